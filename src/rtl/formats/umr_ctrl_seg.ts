/**
 * The 48-byte UMR control segment that follows the control segment of a UMR WQE
 * (spec/mlx5.md "UMR control segment"; kernel struct mlx5_wqe_umr_ctrl_seg).
 *
 * | off | field |
 * |---|---|
 * | 0 | flags (UmrCtrlFlag) |
 * | 1 | reserved (3 bytes) |
 * | 4 | xlt_octowords u16: translation bytes / 16 |
 * | 6 | xlt_offset u16: bits 15:0 of the offset (in octowords) |
 * | 8 | mkey_mask u64 (MkeyMaskBit) |
 * | 16 | xlt_offset_47_16 u32: bits 47:16 of the offset |
 * | 20 | reserved (28 bytes) |
 */

import { MkeyMaskBit } from './constants.ts';
import type { MkeyMaskName } from './constants.ts';
import { checkU64, checkUint, getU64, setU64, zero } from './field.ts';

/** Bytes of a UMR control segment. */
export const UMR_CTRL_SEG_SIZE = 48;

/** The fields of a UMR control segment. */
export interface UmrCtrlSeg {
  /** UmrCtrlFlag bits, 8 bits. */
  flags: number;
  /** Size of the translations this UMR writes, in octowords (16 bits). */
  xltOctowords: number;
  /** Where in the mkey's translation table they go: xlt_offset_47_16 << 16 | xlt_offset (< 2^48). */
  xltOffset: number;
  /** Which mkey-segment fields the UMR copies (MkeyMaskBit), u64 below 2^53. */
  mkeyMask: number;
}

/** Writes `f` as a 48-byte UMR control segment at `off`; throws RangeError for a field that does not fit. */
export function encodeUmrCtrlSeg(view: DataView, off: number, f: UmrCtrlSeg): void {
  checkUint('flags', f.flags, 8);
  checkUint('xltOctowords', f.xltOctowords, 16);
  checkUint('xltOffset', f.xltOffset, 48);
  checkU64('mkeyMask', f.mkeyMask);
  zero(view, off, UMR_CTRL_SEG_SIZE);
  view.setUint8(off + 0, f.flags);
  view.setUint16(off + 4, f.xltOctowords);
  view.setUint16(off + 6, f.xltOffset % 0x10000);
  setU64(view, off + 8, f.mkeyMask);
  view.setUint32(off + 16, Math.floor(f.xltOffset / 0x10000));
}

/** Reads the 48-byte UMR control segment at `off`. */
export function decodeUmrCtrlSeg(view: DataView, off: number): UmrCtrlSeg {
  return {
    flags: view.getUint8(off + 0),
    xltOctowords: view.getUint16(off + 4),
    xltOffset: view.getUint32(off + 16) * 0x10000 + view.getUint16(off + 6),
    mkeyMask: getU64(view, off + 8, 'mkeyMask'),
  };
}

/** The mkey_mask with the named bits set, e.g. `mkeyMask('LEN', 'FREE')`. */
export function mkeyMask(...names: MkeyMaskName[]): number {
  let mask = 0;
  // Every bit is below 32, but sum powers of two rather than `|` so a u64 bit could be added safely.
  // (a name given twice counts once; no Set or array built: REG_MR and binds call this per WQE)
  for (let i = 0; i < names.length; i++) {
    const v = 2 ** MkeyMaskBit[names[i]];
    if (Math.floor(mask / v) % 2 === 0) mask += v;
  }
  return mask;
}

/** Whether `mask` has the named mkey_mask bit set. */
export function hasMaskBit(mask: number, name: MkeyMaskName): boolean {
  // every bit is below 32: ToUint32 keeps the low word of any integer mask exactly
  return ((mask >>> MkeyMaskBit[name]) & 1) === 1;
}
