/** The verbs-level types of the public API (API.md "Verbs"), in libibverbs' names. */
import type { WcStatus } from '../rtl/formats/constants.ts';
import type { Mr } from './mr.ts';
import type { Mw } from './mw.ts';

export type { WcStatus };

/** Work request opcodes (API.md "Send work requests"). */
export type WrOpcode =
  | 'RDMA_WRITE' | 'RDMA_WRITE_WITH_IMM' | 'SEND' | 'SEND_WITH_IMM' | 'SEND_WITH_INV' | 'RDMA_READ' | 'RDMA_READ_WITH_INV'
  | 'ATOMIC_CMP_AND_SWP' | 'ATOMIC_FETCH_AND_ADD' | 'LOCAL_INV' | 'REG_MR' | 'BIND_MW';

/** Work completion opcodes. */
export type WcOpcode = 'SEND' | 'RDMA_WRITE' | 'RDMA_READ' | 'COMP_SWAP' | 'FETCH_ADD' | 'BIND_MW' | 'LOCAL_INV' | 'REG_MR' | 'RECV' | 'RECV_RDMA_WITH_IMM';

/** A scatter/gather element. */
export interface Sge {
  addr: number;
  length: number;
  lkey: number;
}

/** What a window is bound to (bindMw, BIND_MW). */
export interface BindInfo {
  mr: Mr | null;
  addr: number;
  length: number;
  access: number;
}

/** A send work request. */
export interface SendWr {
  wrId: number | bigint;
  opcode: WrOpcode;
  sgList?: readonly Sge[];
  signaled?: boolean;
  fence?: boolean;
  solicited?: boolean;
  inline?: boolean;
  remoteAddr?: number;
  rkey?: number;
  immData?: number;
  invalidateRkey?: number;
  /**
   * Atomic operands, any 64-bit value: a safe integer (a negative one in two's complement, so -1
   * adds 2^64 - 1) or a bigint in -2^63 .. 2^64 - 1.
   */
  compareAdd?: number | bigint;
  swap?: number | bigint;
  /** REG_MR */
  mr?: Mr;
  key?: number;
  access?: number;
  /** BIND_MW (type 2); the new key in `rkey`. */
  mw?: Mw;
  bindInfo?: BindInfo;
}

/** A receive work request. */
export interface RecvWr {
  wrId: number | bigint;
  sgList: readonly Sge[];
}

/** A work completion. */
export interface WorkCompletion {
  wrId: number | bigint;
  status: WcStatus;
  opcode: WcOpcode;
  byteLen: number;
  qpNum: number;
  wcFlags: ReadonlySet<'WITH_IMM' | 'WITH_INV'>;
  immData?: number;
  invalidatedRkey?: number;
  vendorErr: number;
}

/** ib_access_flags bits. */
export const IbAccess = {
  LOCAL_WRITE: 1,
  REMOTE_WRITE: 2,
  REMOTE_READ: 4,
  REMOTE_ATOMIC: 8,
  MW_BIND: 16,
  ZERO_BASED: 32,
  ON_DEMAND: 64,
} as const;
