/**
 * A 16-byte KLM: one entry of an indirect (KLMS) mkey's translation list (spec/mlx5.md
 * "Translation entries"; kernel struct mlx5_klm): bcount u32 @0, key u32 @4, va u64 @8.
 */

import { checkU64, checkUint, getU64, setU64 } from './field.ts';

export { KLM_SIZE } from './constants.ts';

/** The fields of a KLM. */
export interface Klm {
  /** Bytes this entry covers (u32; the verbs layer keeps it to 2 GiB). */
  bcount: number;
  /** The key through which the bytes are reached. */
  key: number;
  /** Virtual address, in `key`'s space, of the entry's first byte (u64 below 2^53). */
  va: number;
}

/** Writes `f` as a 16-byte KLM at `off`; throws RangeError for a field that does not fit. */
export function encodeKlm(view: DataView, off: number, f: Klm): void {
  checkUint('bcount', f.bcount, 32);
  checkUint('key', f.key, 32);
  checkU64('va', f.va);
  view.setUint32(off + 0, f.bcount);
  view.setUint32(off + 4, f.key);
  setU64(view, off + 8, f.va);
}

/** Reads the 16-byte KLM at `off`. */
export function decodeKlm(view: DataView, off: number): Klm {
  return {
    bcount: view.getUint32(off + 0),
    key: view.getUint32(off + 4),
    va: getU64(view, off + 8, 'va'),
  };
}

/** A KLM's bcount (u32 @0), read in place (the KLM walker scans one entry a cycle). */
export function klmBcount(view: DataView, off: number): number {
  return view.getUint32(off);
}

/** A KLM's key (u32 @4), read in place. */
export function klmKey(view: DataView, off: number): number {
  return view.getUint32(off + 4);
}

/** A KLM's va (u64 @8), read in place; unchecked (decodeKlm rejects a va of 2^53 or more). */
export function klmVa(view: DataView, off: number): number {
  return view.getUint32(off + 8) * 2 ** 32 + view.getUint32(off + 12);
}
