/**
 * The 64-byte CQE (spec/mlx5.md "CQE"; kernel struct mlx5_cqe64 and, for errors, struct
 * mlx5_err_cqe, which share bytes 56..63).
 *
 * | off | field |
 * |---|---|
 * | 36 | imm_inval_pkey u32: immediate data, or the invalidated rkey |
 * | 44 | byte_cnt u32 |
 * | 54 | vendor_err_synd u8 (error CQE only) |
 * | 55 | syndrome u8 (error CQE only) |
 * | 56 | sop_drop_qpn u32 (s_wqe_opcode_qpn in an error CQE): wqe opcode[31:24] \| qpn[23:0] |
 * | 60 | wqe_counter u16 |
 * | 62 | signature u8 |
 * | 63 | op_own: opcode[7:4] \| format[3:2] \| se[1] \| owner[0] |
 *
 * In a good CQE bytes 54..55 are part of the timestamp, which is not modelled: one layout holds
 * both views, and every other byte is written as zero.
 */

import { CQE_SIZE, CqeOpcode } from './constants.ts';
import { checkUint, zero } from './field.ts';

export { CQE_SIZE } from './constants.ts';

/** The op_own byte of every CQE of a new CQ buffer: opcode INVALID, owner 0. */
export const CQE_OP_OWN_INIT = 0xf0;

/** The fields of a CQE (good and error views). */
export interface Cqe {
  /** Immediate data (RESP_*_IMM) or the invalidated rkey (RESP_SEND_INV). */
  immInvalPkey: number;
  /** Bytes transferred. */
  byteCnt: number;
  /** Vendor error syndrome, 8 bits (error CQE). */
  vendorErrSynd: number;
  /** Error syndrome (CqeSyndrome), 8 bits (error CQE). */
  syndrome: number;
  /** The opcode of the WQE that completed (WqeOpcode), 8 bits. */
  wqeOpcode: number;
  /** The QP's number, 24 bits. */
  qpn: number;
  /** The completed WQE's wqe_index (16 bits). */
  wqeCounter: number;
  /** Signature byte. */
  signature: number;
  /** CqeOpcode, 4 bits. */
  opcode: number;
  /** CQE format (0 = no inline data), 2 bits. */
  format: number;
  /** Solicited event. */
  se: boolean;
  /** Owner bit, 0 or 1: flips on every pass over the CQ. */
  owner: number;
}

/** Writes `f` as a 64-byte CQE at `off`; throws RangeError for a field that does not fit. */
export function encodeCqe(view: DataView, off: number, f: Cqe): void {
  checkUint('immInvalPkey', f.immInvalPkey, 32);
  checkUint('byteCnt', f.byteCnt, 32);
  checkUint('vendorErrSynd', f.vendorErrSynd, 8);
  checkUint('syndrome', f.syndrome, 8);
  checkUint('wqeOpcode', f.wqeOpcode, 8);
  checkUint('qpn', f.qpn, 24);
  checkUint('wqeCounter', f.wqeCounter, 16);
  checkUint('signature', f.signature, 8);
  checkUint('opcode', f.opcode, 4);
  checkUint('format', f.format, 2);
  checkUint('owner', f.owner, 1);
  zero(view, off, CQE_SIZE);
  view.setUint32(off + 36, f.immInvalPkey);
  view.setUint32(off + 44, f.byteCnt);
  view.setUint8(off + 54, f.vendorErrSynd);
  view.setUint8(off + 55, f.syndrome);
  view.setUint32(off + 56, ((f.wqeOpcode << 24) | f.qpn) >>> 0);
  view.setUint16(off + 60, f.wqeCounter);
  view.setUint8(off + 62, f.signature);
  view.setUint8(off + 63, (f.opcode << 4) | (f.format << 2) | (f.se ? 2 : 0) | f.owner);
}

/** Reads the 64-byte CQE at `off`. */
export function decodeCqe(view: DataView, off: number): Cqe {
  const sopDropQpn = view.getUint32(off + 56);
  const opOwn = view.getUint8(off + 63);
  return {
    immInvalPkey: view.getUint32(off + 36),
    byteCnt: view.getUint32(off + 44),
    vendorErrSynd: view.getUint8(off + 54),
    syndrome: view.getUint8(off + 55),
    wqeOpcode: sopDropQpn >>> 24,
    qpn: sopDropQpn & 0xffffff,
    wqeCounter: view.getUint16(off + 60),
    signature: view.getUint8(off + 62),
    opcode: opOwn >>> 4,
    format: (opOwn >>> 2) & 3,
    se: (opOwn & 2) !== 0,
    owner: opOwn & 1,
  };
}

/** The byte offset of op_own within a CQE: software polls this byte alone. */
export const CQE_OP_OWN_OFFSET = 63;

/**
 * Whether software owns CQE number `n` (the consumer counter, not wrapped) of a CQ of `ncqe`
 * entries (a power of two), given that CQE's op_own byte: opcode != INVALID and the owner bit
 * equals the pass parity `(n & ncqe) != 0` (spec/mlx5.md "CQE"; kernel cq.c get_sw_cqe).
 */
export function cqeOwnedBySw(opOwn: number, n: number, ncqe: number): boolean {
  const parity = Math.floor(n / ncqe) & 1; // (n & ncqe) != 0, also for counters past 2^31
  return opOwn >>> 4 !== CqeOpcode.INVALID && (opOwn & 1) === parity;
}
