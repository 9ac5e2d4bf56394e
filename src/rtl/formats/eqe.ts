/**
 * The 64-byte EQE (spec/mlx5.md "EQ and EQE"; kernel struct mlx5_eqe): type u8 @1, sub_type u8
 * @3, data (28 bytes) @32..59, signature u8 @62, owner u8 @63; all other bytes reserved.
 *
 * The data bytes have typed sub-layouts, read and written through the EQE's own offset:
 * - completion (struct mlx5_eqe_comp): cqn u32 at data+24, low 24 bits;
 * - page fault (the seed's struct mlx5_eqe_page_fault): bytes_committed u32 @0; WQE subtype:
 *   wqe_index u16 @6, packet_length u16 @10; RDMA subtype: r_key u32 @4, packet_length u16 @10,
 *   rdma_op_len u32 @12, rdma_va u64 @16; both: flags_qpn u32 @24 = flags[31:24] | qpn[23:0].
 */

import { EQE_SIZE, PageFaultSubtype } from './constants.ts';
import { checkU64, checkUint, getU64, setU64, zero } from './field.ts';

export { EQE_SIZE } from './constants.ts';

/** Byte offset of the 28 data bytes within an EQE. */
export const EQE_DATA_OFFSET = 32;
/** Number of data bytes in an EQE. */
export const EQE_DATA_SIZE = 28;
/** The owner byte every EQE of a new EQ starts with. */
export const EQE_OWNER_INIT = 1;

/** The fields of an EQE, with its data as raw bytes (see the typed sub-layouts below). */
export interface Eqe {
  /** EventType, 8 bits. */
  type: number;
  /** Event subtype (PageFaultSubtype for PAGE_FAULT), 8 bits. */
  subType: number;
  /** The 28 data bytes (@32..59). */
  data: Uint8Array;
  /** Signature byte. */
  signature: number;
  /** Owner byte: hardware writes (producer index >> log2(size)) & 1. */
  owner: number;
}

/** Writes `f` as a 64-byte EQE at `off`; throws RangeError for a field that does not fit. */
export function encodeEqe(view: DataView, off: number, f: Eqe): void {
  checkUint('type', f.type, 8);
  checkUint('subType', f.subType, 8);
  checkUint('signature', f.signature, 8);
  checkUint('owner', f.owner, 8);
  if (f.data.length !== EQE_DATA_SIZE) {
    throw new RangeError(`data length ${f.data.length} is not ${EQE_DATA_SIZE} bytes`);
  }
  zero(view, off, EQE_SIZE);
  view.setUint8(off + 1, f.type);
  view.setUint8(off + 3, f.subType);
  new Uint8Array(view.buffer, view.byteOffset + off + EQE_DATA_OFFSET, EQE_DATA_SIZE).set(f.data);
  view.setUint8(off + 62, f.signature);
  view.setUint8(off + 63, f.owner);
}

/** Reads the 64-byte EQE at `off` (data is a copy). */
export function decodeEqe(view: DataView, off: number): Eqe {
  if (off < 0 || off + EQE_SIZE > view.byteLength) throw new RangeError(`EQE at ${off} runs past the view`);
  return {
    type: view.getUint8(off + 1),
    subType: view.getUint8(off + 3),
    data: new Uint8Array(view.buffer, view.byteOffset + off + EQE_DATA_OFFSET, EQE_DATA_SIZE).slice(),
    signature: view.getUint8(off + 62),
    owner: view.getUint8(off + 63),
  };
}

/**
 * Whether software owns EQ entry `ci` (the consumer counter, not wrapped) of an EQ of
 * 2^logSize entries: `(owner & 1) == ((ci >> logSize) & 1)` (spec/mlx5.md "EQ and EQE").
 */
export function eqeOwnedBySw(owner: number, ci: number, logSize: number): boolean {
  return (owner & 1) === (Math.floor(ci / (POW2[logSize] ?? 2 ** logSize)) & 1);
}

/** 2^n for n 0..63 (a power per EQE polled was ~0.4% of a registration's CPU). */
const POW2: readonly number[] = Array.from({ length: 64 }, (_, n) => 2 ** n);

// ---------------------------------------------------------------------------------------------
// Completion event data
// ---------------------------------------------------------------------------------------------

/** The data of a COMP event. */
export interface EqeCompletion {
  /** The CQ that has a new CQE, 24 bits. */
  cqn: number;
}

/** Writes the 28 data bytes of the EQE at `off` as completion data (other data bytes zero). */
export function encodeEqeCompletion(view: DataView, off: number, f: EqeCompletion): void {
  checkUint('cqn', f.cqn, 24);
  const d = off + EQE_DATA_OFFSET;
  zero(view, d, EQE_DATA_SIZE);
  view.setUint32(d + 24, f.cqn);
}

/** Reads the completion data of the EQE at `off`. */
export function decodeEqeCompletion(view: DataView, off: number): EqeCompletion {
  return { cqn: view.getUint32(off + EQE_DATA_OFFSET + 24) & 0xffffff };
}

// ---------------------------------------------------------------------------------------------
// Page-fault event data
// ---------------------------------------------------------------------------------------------

/** Fields of both page-fault subtypes. */
interface EqePageFaultCommon {
  /** Bytes of the message already done before the fault. */
  bytesCommitted: number;
  /** PageFaultFlag bits (REQUESTOR, WRITE, RDMA), 8 bits. */
  flags: number;
  /** The faulting QP, 24 bits. */
  qpn: number;
}

/** A fault while handling a WQE (the requester's own SGE, or a responder's receive WQE). */
export interface EqePageFaultWqe extends EqePageFaultCommon {
  /** PageFaultSubtype.WQE. */
  subType: typeof PageFaultSubtype.WQE;
  /** The faulting WQE's index, 16 bits. */
  wqeIndex: number;
  /** Packet length, 16 bits. */
  packetLength: number;
}

/** A fault on an incoming RDMA access (the responder's rkey range). */
export interface EqePageFaultRdma extends EqePageFaultCommon {
  /** PageFaultSubtype.RDMA. */
  subType: typeof PageFaultSubtype.RDMA;
  /** The rkey of the access. */
  rKey: number;
  /** Packet length, 16 bits. */
  packetLength: number;
  /** Length of the whole RDMA operation. */
  rdmaOpLen: number;
  /** Faulting virtual address (u64 below 2^53). */
  rdmaVa: number;
}

/** The data of a PAGE_FAULT event, by subtype. */
export type EqePageFault = EqePageFaultWqe | EqePageFaultRdma;

/**
 * Writes the page-fault sub-layout of the EQE at `off`: sub_type (byte 3, it selects the
 * layout) and the 28 data bytes (unused ones zero). type, signature and owner are left alone.
 */
export function encodeEqePageFault(view: DataView, off: number, f: EqePageFault): void {
  checkUint('bytesCommitted', f.bytesCommitted, 32);
  checkUint('flags', f.flags, 8);
  checkUint('qpn', f.qpn, 24);
  checkUint('packetLength', f.packetLength, 16);
  if (f.subType === PageFaultSubtype.WQE) {
    checkUint('wqeIndex', f.wqeIndex, 16);
  } else if (f.subType === PageFaultSubtype.RDMA) {
    checkUint('rKey', f.rKey, 32);
    checkUint('rdmaOpLen', f.rdmaOpLen, 32);
    checkU64('rdmaVa', f.rdmaVa);
  } else {
    throw new RangeError(`subType ${String((f as { subType: unknown }).subType)} is not a page-fault subtype`);
  }
  const d = off + EQE_DATA_OFFSET;
  zero(view, d, EQE_DATA_SIZE);
  view.setUint8(off + 3, f.subType);
  view.setUint32(d + 0, f.bytesCommitted);
  view.setUint16(d + 10, f.packetLength);
  view.setUint32(d + 24, ((f.flags << 24) | f.qpn) >>> 0);
  if (f.subType === PageFaultSubtype.WQE) {
    view.setUint16(d + 6, f.wqeIndex);
  } else {
    view.setUint32(d + 4, f.rKey);
    view.setUint32(d + 12, f.rdmaOpLen);
    setU64(view, d + 16, f.rdmaVa);
  }
}

/** Reads the page-fault data of the EQE at `off`, by its sub_type; throws RangeError for another subtype. */
export function decodeEqePageFault(view: DataView, off: number): EqePageFault {
  const subType = view.getUint8(off + 3);
  const d = off + EQE_DATA_OFFSET;
  const flagsQpn = view.getUint32(d + 24);
  const bytesCommitted = view.getUint32(d + 0);
  const packetLength = view.getUint16(d + 10);
  const flags = flagsQpn >>> 24;
  const qpn = flagsQpn & 0xffffff;
  if (subType === PageFaultSubtype.WQE) {
    return { subType, bytesCommitted, wqeIndex: view.getUint16(d + 6), packetLength, flags, qpn };
  }
  if (subType === PageFaultSubtype.RDMA) {
    return {
      subType,
      bytesCommitted,
      rKey: view.getUint32(d + 4),
      packetLength,
      rdmaOpLen: view.getUint32(d + 12),
      rdmaVa: getU64(view, d + 16, 'rdmaVa'),
      flags,
      qpn,
    };
  }
  throw new RangeError(`sub_type ${subType} is not a page-fault subtype`);
}
