/**
 * The 16-byte control segment that starts every send WQE (spec/mlx5.md "Send WQE"; kernel
 * struct mlx5_wqe_ctrl_seg).
 *
 * | off | field |
 * |---|---|
 * | 0 | opmod_idx_opcode: opmod[31:24] \| wqe_index[23:8] \| opcode[7:0] |
 * | 4 | qpn_ds: qpn[31:8] \| ds[5:0] (bits 7:6 reserved) |
 * | 8 | signature |
 * | 9 | reserved (2 bytes) |
 * | 11 | fm_ce_se: fence[7:5] \| ce[3:2] \| se[1] (bits 4 and 0 reserved) |
 * | 12 | imm: immediate data, the rkey to invalidate, or the target mkey of a UMR |
 */

import { checkUint, getBe32 } from './field.ts';
import { DS_SIZE, WQEBB_SIZE } from './constants.ts';

/** Bytes of a control segment. */
export const CTRL_SEG_SIZE = 16;

/** The fields of a control segment. */
export interface CtrlSeg {
  /** Opcode modifier, 8 bits (0 for every WQE this project builds). */
  opmod: number;
  /** The WQE's index in the send queue (the producer counter's low 16 bits). */
  wqeIndex: number;
  /** WqeOpcode, 8 bits. */
  opcode: number;
  /** The posting QP's number, 24 bits. */
  qpn: number;
  /** WQE size in 16-byte units, 6 bits. */
  ds: number;
  /** WQE signature byte (0 unless the QP checks signatures). */
  signature: number;
  /** FenceMode, unshifted, 3 bits. */
  fence: number;
  /** CeMode, unshifted, 2 bits (CeMode.CQ_UPDATE = signaled). */
  ce: number;
  /** Solicited event. */
  se: boolean;
  /** Immediate data / invalidated rkey / UMR target mkey (u32). */
  imm: number;
}

/** Writes `f` as a 16-byte control segment at `off`; throws RangeError for a field that does not fit. */
export function encodeCtrlSeg(view: DataView, off: number, f: CtrlSeg): void {
  checkUint('opmod', f.opmod, 8);
  checkUint('wqeIndex', f.wqeIndex, 16);
  checkUint('opcode', f.opcode, 8);
  checkUint('qpn', f.qpn, 24);
  checkUint('ds', f.ds, 6);
  checkUint('signature', f.signature, 8);
  checkUint('fence', f.fence, 3);
  checkUint('ce', f.ce, 2);
  checkUint('imm', f.imm, 32);
  view.setUint8(off + 0, f.opmod);
  view.setUint16(off + 1, f.wqeIndex);
  view.setUint8(off + 3, f.opcode);
  view.setUint32(off + 4, ((f.qpn << 8) | f.ds) >>> 0);
  view.setUint8(off + 8, f.signature);
  view.setUint16(off + 9, 0);
  view.setUint8(off + 11, (f.fence << 5) | (f.ce << 2) | (f.se ? 2 : 0));
  view.setUint32(off + 12, f.imm);
}

/** Reads the 16-byte control segment at `off`. */
export function decodeCtrlSeg(view: DataView, off: number): CtrlSeg {
  return decodeCtrlSegInto(view, off, { opmod: 0, wqeIndex: 0, opcode: 0, qpn: 0, ds: 0, signature: 0, fence: 0, ce: 0, se: false, imm: 0 });
}

/** Reads the 16-byte control segment at `off` into `f` (a parser's reused segment), and returns it. */
export function decodeCtrlSegInto(view: DataView, off: number, f: CtrlSeg): CtrlSeg {
  const qpnDs = view.getUint32(off + 4);
  const fmCeSe = view.getUint8(off + 11);
  f.opmod = view.getUint8(off + 0);
  f.wqeIndex = view.getUint16(off + 1);
  f.opcode = view.getUint8(off + 3);
  f.qpn = qpnDs >>> 8;
  f.ds = qpnDs & 0x3f;
  f.signature = view.getUint8(off + 8);
  f.fence = fmCeSe >>> 5;
  f.ce = (fmCeSe >>> 2) & 3;
  f.se = (fmCeSe & 2) !== 0;
  f.imm = view.getUint32(off + 12);
  return f;
}

/*
 * Field readers over the WQE's bytes, for the engines' hot path: they allocate nothing (decodeCtrlSeg
 * builds an object). `off` is the control segment's offset in `b` (0 for a WQE fetched alone).
 */

/** opmod (byte 0). */
export function ctrlOpmod(b: Uint8Array, off = 0): number {
  return b[off];
}

/** wqe_index (bytes 1..2, big-endian). */
export function ctrlWqeIndex(b: Uint8Array, off = 0): number {
  return (b[off + 1] << 8) | b[off + 2];
}

/** opcode (byte 3): a WqeOpcode. */
export function ctrlOpcode(b: Uint8Array, off = 0): number {
  return b[off + 3];
}

/** qpn (bytes 4..6). */
export function ctrlQpn(b: Uint8Array, off = 0): number {
  return (b[off + 4] << 16) | (b[off + 5] << 8) | b[off + 6];
}

/** ds (byte 7 bits 5:0): the WQE's size in 16-byte units. */
export function ctrlDs(b: Uint8Array, off = 0): number {
  return b[off + 7] & 0x3f;
}

/** WQEBBs the WQE spans: ds * 16 bytes rounded up to 64-byte basic blocks, at least one. */
export function ctrlWqebbs(b: Uint8Array, off = 0): number {
  return Math.max(1, Math.ceil((ctrlDs(b, off) * DS_SIZE) / WQEBB_SIZE));
}

/** fence (byte 11 bits 7:5): a FenceMode. */
export function ctrlFence(b: Uint8Array, off = 0): number {
  return b[off + 11] >>> 5;
}

/** ce (byte 11 bits 3:2): a CeMode (CQ_UPDATE = signaled). */
export function ctrlCe(b: Uint8Array, off = 0): number {
  return (b[off + 11] >>> 2) & 3;
}

/** se (byte 11 bit 1): solicited event. */
export function ctrlSe(b: Uint8Array, off = 0): boolean {
  return (b[off + 11] & 2) !== 0;
}

/** imm (bytes 12..15, big-endian u32): immediate data, the key to invalidate, or a UMR's target mkey. */
export function ctrlImm(b: Uint8Array, off = 0): number {
  return getBe32(b, off + 12);
}
