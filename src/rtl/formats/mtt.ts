/**
 * An 8-byte MTT entry: one page of an MTT-mode mkey (spec/mlx5.md "Translation entries"): the
 * page's physical address (u64) with bit0 = MLX5_EN_RD and bit1 = MLX5_EN_WR. Both clear = not
 * present (an ODP page never faulted in, or zapped). Bits 11:2 are written 0 and ignored on
 * decode, so the address must be 4 KiB aligned (every mlx5 page size is a multiple of 4 KiB).
 */

import { MLX5_EN_RD, MLX5_EN_WR } from './constants.ts';
import { checkU64, getBe32, getU64, setU64 } from './field.ts';

const TWO_32 = 2 ** 32;

export { MTT_SIZE } from './constants.ts';

/** Low address bits an MTT entry uses for flags (and reserved): 4 KiB alignment. */
const PAGE_MASK_4K = 0xfff;

/** The fields of an MTT entry. */
export interface Mtt {
  /** Physical address of the page, 4 KiB aligned (u64 below 2^53). */
  addr: number;
  /** MLX5_EN_RD: the page may be read. */
  read: boolean;
  /** MLX5_EN_WR: the page may be written. */
  write: boolean;
}

/** Writes `f` as an 8-byte MTT entry at `off`; throws RangeError if addr is not a 4 KiB aligned u64. */
export function encodeMtt(view: DataView, off: number, f: Mtt): void {
  checkU64('addr', f.addr);
  if (f.addr % (PAGE_MASK_4K + 1) !== 0) {
    throw new RangeError(`addr 0x${f.addr.toString(16)} is not 4 KiB aligned (bits 11:0 of an MTT entry are flags)`);
  }
  setU64(view, off, f.addr + (f.read ? MLX5_EN_RD : 0) + (f.write ? MLX5_EN_WR : 0));
}

/** Reads the 8-byte MTT entry at `off`. */
export function decodeMtt(view: DataView, off: number): Mtt {
  const lo = view.getUint32(off + 4);
  const raw = getU64(view, off, 'addr');
  return {
    addr: raw - (lo & PAGE_MASK_4K),
    read: (lo & MLX5_EN_RD) !== 0,
    write: (lo & MLX5_EN_WR) !== 0,
  };
}

/** Whether an MTT entry maps its page at all (either permission bit set). */
export function mttPresent(f: Mtt): boolean {
  return f.read || f.write;
}

/**
 * The raw 8-byte entry at `off` as one number (page address | RD 1 | WR 2), without allocating
 * or checking: the MTT cache's hot path and the UMR engine's list read it this way.
 */
export function readMttRaw(view: DataView, off: number): number {
  return view.getUint32(off) * TWO_32 + view.getUint32(off + 4);
}

/** readMttRaw over bytes (no DataView: a small list's `.buffer` would be a backing store made per read). */
export function readMttRawAt(b: Uint8Array, off: number): number {
  return getBe32(b, off) * TWO_32 + getBe32(b, off + 4);
}

/** Writes a raw entry (page address | RD 1 | WR 2; a u64 below 2^53) at `off`. */
export function writeMttRaw(view: DataView, off: number, raw: number): void {
  setU64(view, off, raw);
}
