/**
 * The 16-byte atomic segment (spec/mlx5.md "Other segments"; kernel struct mlx5_wqe_atomic_seg):
 * swap_add u64 @0, compare u64 @8. Operands are JS numbers, so this simulator limits them to
 * below 2^53 (DESIGN.md: numbers, not bigint).
 */

import { checkU64, getU64, setU64 } from './field.ts';

/** Bytes of an atomic segment. */
export const ATOMIC_SEG_SIZE = 16;

/** The fields of an atomic segment. */
export interface AtomicSeg {
  /** The swap value (ATOMIC_CS) or the addend (ATOMIC_FA). */
  swapAdd: number;
  /** The compare value (ATOMIC_CS); 0 for ATOMIC_FA. */
  compare: number;
}

/** Writes `f` as a 16-byte atomic segment at `off`; throws RangeError for a field that does not fit. */
export function encodeAtomicSeg(view: DataView, off: number, f: AtomicSeg): void {
  checkU64('swapAdd', f.swapAdd);
  checkU64('compare', f.compare);
  setU64(view, off + 0, f.swapAdd);
  setU64(view, off + 8, f.compare);
}

/** Reads the 16-byte atomic segment at `off`. */
export function decodeAtomicSeg(view: DataView, off: number): AtomicSeg {
  return {
    swapAdd: getU64(view, off + 0, 'swapAdd'),
    compare: getU64(view, off + 8, 'compare'),
  };
}

/**
 * The operands as the hardware reads them: any 64-bit values. An atomic's operands are data,
 * not addresses: 2^64 - 1 (an add of -1) is as legal as 1, so the send queue engine decodes
 * them whole (the number fields of `AtomicSeg` stop at 2^53).
 */
export interface AtomicOperands {
  swapAdd: bigint;
  compare: bigint;
}

/** Writes the operands (each taken modulo 2^64: -1 is 2^64 - 1) as a 16-byte atomic segment at `off`. */
export function encodeAtomicOperands(view: DataView, off: number, f: AtomicOperands): void {
  view.setBigUint64(off + 0, BigInt.asUintN(64, f.swapAdd));
  view.setBigUint64(off + 8, BigInt.asUintN(64, f.compare));
}

/** Reads the 16-byte atomic segment at `off`, every 64-bit value. */
export function decodeAtomicOperands(view: DataView, off: number): AtomicOperands {
  return { swapAdd: view.getBigUint64(off + 0), compare: view.getBigUint64(off + 8) };
}
