/**
 * The 16-byte data (scatter/gather pointer) segment, and the inline-data form that shares its
 * first word (spec/mlx5.md "Other segments"; kernel struct mlx5_wqe_data_seg and
 * struct mlx5_wqe_inline_seg).
 *
 * | off | field |
 * |---|---|
 * | 0 | byte_count u32: bit31 = inline (MLX5_INLINE_SEG), bits 30:0 = length; 0 means 2 GiB |
 * | 4 | lkey u32 |
 * | 8 | addr u64 |
 *
 * An inline segment is byte_count (with bit31 set) followed directly by the data, padded to a
 * multiple of 16 bytes (kernel wr.c set_data_inl_seg: ALIGN(len + 4, 16)).
 */

import { DS_SIZE } from './constants.ts';
import { checkU64, checkUint, getU64, setU64, zero } from './field.ts';

/** Bytes of a data segment. */
export const DATA_SEG_SIZE = 16;

/** byte_count bit31: the segment carries its data inline (MLX5_INLINE_SEG). */
export const MLX5_INLINE_SEG = 0x80000000;

/** The length a data segment's byte_count 0 stands for: 2 GiB. */
export const DATA_SEG_MAX_LENGTH = 2 ** 31;

/** The fields of a data segment. */
export interface DataSeg {
  /** byte_count bits 30:0; 0 means 2 GiB (see dataSegLength). */
  byteCount: number;
  /** byte_count bit31 (an inline segment: the data follows the first word instead of lkey/addr). */
  inline: boolean;
  /** The key through which `addr` is reached. */
  lkey: number;
  /** Virtual address in lkey's space (u64 below 2^53). */
  addr: number;
}

/** Writes `f` as a 16-byte data segment at `off`; throws RangeError for a field that does not fit. */
export function encodeDataSeg(view: DataView, off: number, f: DataSeg): void {
  checkUint('byteCount', f.byteCount, 31);
  checkUint('lkey', f.lkey, 32);
  checkU64('addr', f.addr);
  view.setUint32(off + 0, (f.inline ? MLX5_INLINE_SEG : 0) + f.byteCount);
  view.setUint32(off + 4, f.lkey);
  setU64(view, off + 8, f.addr);
}

/** Reads the 16-byte data segment at `off`. */
export function decodeDataSeg(view: DataView, off: number): DataSeg {
  return decodeDataSegInto(view, off, { byteCount: 0, inline: false, lkey: 0, addr: 0 });
}

/** Reads the 16-byte data segment at `off` into `f` (a parser's reused segment), and returns it. */
export function decodeDataSegInto(view: DataView, off: number, f: DataSeg): DataSeg {
  const bc = view.getUint32(off + 0);
  // the address first: a RangeError leaves `f` as it was
  const addr = getU64(view, off + 8, 'addr');
  f.byteCount = bc & 0x7fffffff;
  f.inline = bc >= MLX5_INLINE_SEG;
  f.lkey = view.getUint32(off + 4);
  f.addr = addr;
  return f;
}

/** The length in bytes a byte_count stands for: 0 means 2 GiB. */
export function dataSegLength(byteCount: number): number {
  return byteCount === 0 ? DATA_SEG_MAX_LENGTH : byteCount;
}

/** The byte_count for a length of 1 byte .. 2 GiB (2 GiB is written as 0). */
export function dataSegByteCount(length: number): number {
  if (!Number.isInteger(length) || length < 1 || length > DATA_SEG_MAX_LENGTH) {
    throw new RangeError(`data segment length ${length} is not in 1..2^31`);
  }
  return length === DATA_SEG_MAX_LENGTH ? 0 : length;
}

/** DS (16-byte units) an inline segment of `len` data bytes takes: ALIGN(len + 4, 16) / 16. */
export function inlineSegDs(len: number): number {
  return Math.ceil((len + 4) / DS_SIZE);
}

/**
 * Writes an inline segment carrying `data` at `off`, zero-padded to 16 bytes; returns the DS it
 * takes. Throws RangeError when the length does not fit byte_count's 31 bits.
 */
export function encodeInlineSeg(view: DataView, off: number, data: Uint8Array): number {
  checkUint('inline byteCount', data.length, 31);
  const ds = inlineSegDs(data.length);
  zero(view, off, ds * DS_SIZE);
  view.setUint32(off, MLX5_INLINE_SEG + data.length);
  new Uint8Array(view.buffer, view.byteOffset + off + 4, data.length).set(data);
  return ds;
}

/** Reads the inline segment at `off` (byte_count bit31 must be set): a copy of its data. */
export function decodeInlineSeg(view: DataView, off: number): Uint8Array {
  const bc = view.getUint32(off);
  if (bc < MLX5_INLINE_SEG) throw new RangeError(`byte_count 0x${bc.toString(16)} at ${off} is not an inline segment`);
  const len = bc & 0x7fffffff;
  if (off + 4 + len > view.byteLength) throw new RangeError(`inline segment of ${len} bytes runs past the view`);
  return new Uint8Array(view.buffer, view.byteOffset + off + 4, len).slice();
}
