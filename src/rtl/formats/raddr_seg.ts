/**
 * The 16-byte remote address segment of RDMA and atomic WQEs (spec/mlx5.md "Other segments";
 * kernel struct mlx5_wqe_raddr_seg): raddr u64 @0, rkey u32 @8, reserved u32 @12.
 */

import { checkU64, checkUint, getU64, setU64 } from './field.ts';

/** Bytes of a remote address segment. */
export const RADDR_SEG_SIZE = 16;

/** The fields of a remote address segment. */
export interface RaddrSeg {
  /** Remote virtual address (u64 below 2^53). */
  raddr: number;
  /** Remote key. */
  rkey: number;
}

/** Writes `f` as a 16-byte remote address segment at `off`; throws RangeError for a field that does not fit. */
export function encodeRaddrSeg(view: DataView, off: number, f: RaddrSeg): void {
  checkU64('raddr', f.raddr);
  checkUint('rkey', f.rkey, 32);
  setU64(view, off + 0, f.raddr);
  view.setUint32(off + 8, f.rkey);
  view.setUint32(off + 12, 0);
}

/** Reads the 16-byte remote address segment at `off`. */
export function decodeRaddrSeg(view: DataView, off: number): RaddrSeg {
  return decodeRaddrSegInto(view, off, { raddr: 0, rkey: 0 });
}

/** Reads the 16-byte remote address segment at `off` into `f` (a parser's reused segment), and returns it. */
export function decodeRaddrSegInto(view: DataView, off: number, f: RaddrSeg): RaddrSeg {
  f.raddr = getU64(view, off + 0, 'raddr');
  f.rkey = view.getUint32(off + 8);
  return f;
}
