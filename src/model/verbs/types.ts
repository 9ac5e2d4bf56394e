/**
 * Types of the untimed verbs-level reference model (VerbsModel): access bits, work requests,
 * work completions, errors. Names follow API.md (the libibverbs names in camelCase), with a
 * `Model` prefix where the public API has an object of the same name.
 */
import type { WcStatus } from '../../rtl/formats/constants.ts';
import type { ModelMr, ModelMw } from './objects.ts';

/** `ib_access_flags` bits, as API.md `Access`. Local read has no bit: it is always granted. */
export const VerbsAccess = {
  LOCAL_WRITE: 1,
  REMOTE_WRITE: 2,
  REMOTE_READ: 4,
  REMOTE_ATOMIC: 8,
  MW_BIND: 16,
  ZERO_BASED: 32,
  ON_DEMAND: 64,
} as const;

/** The errnos a synchronous verbs call of the model can fail with. */
export type VerbsErrno = 'EINVAL' | 'EBUSY' | 'ENOMEM' | 'EOPNOTSUPP' | 'EPERM' | 'EFAULT' | 'ENOENT';

/**
 * A synchronous verbs failure (semantics.md "Verbs calls (sync failures)"): `errno`, and a
 * message that names the rule broken. A failing `postSend`/`postRecv` of a list also tells which
 * element failed (`badWrIndex`, like libibverbs' `bad_wr`); the elements before it stay posted.
 */
export class VerbsModelError extends Error {
  /** The errno of the failure. */
  readonly errno: VerbsErrno;
  /** The rule broken, in words (also in `message`). */
  readonly rule: string;
  /** postSend / postRecv of a list: index of the work request that failed. */
  badWrIndex: number | undefined;

  constructor(errno: VerbsErrno, rule: string, badWrIndex?: number) {
    super(`${errno}: ${rule}`);
    this.name = 'VerbsModelError';
    this.errno = errno;
    this.rule = rule;
    this.badWrIndex = badWrIndex;
  }
}

/** RC QP states (API.md `qp.state`). */
export type QpState = 'RESET' | 'INIT' | 'RTR' | 'RTS' | 'ERR';

/** Fast-registration MR types of `allocMr`, and 'USER' for `regMr`. */
export type MrType = 'USER' | 'MEM_REG' | 'SG_GAPS';

/** Memory window types (type 2 is mlx5's 2B). */
export type MwType = 1 | 2;

/** Send work request opcodes (API.md "Send work requests"). */
export type WrOpcode =
  | 'RDMA_WRITE'
  | 'RDMA_WRITE_WITH_IMM'
  | 'SEND'
  | 'SEND_WITH_IMM'
  | 'SEND_WITH_INV'
  | 'RDMA_READ'
  | 'RDMA_READ_WITH_INV'
  | 'ATOMIC_CMP_AND_SWP'
  | 'ATOMIC_FETCH_AND_ADD'
  | 'LOCAL_INV'
  | 'REG_MR'
  | 'BIND_MW';

/** Every send opcode, for validation and generators. */
export const WR_OPCODES: readonly WrOpcode[] = [
  'RDMA_WRITE',
  'RDMA_WRITE_WITH_IMM',
  'SEND',
  'SEND_WITH_IMM',
  'SEND_WITH_INV',
  'RDMA_READ',
  'RDMA_READ_WITH_INV',
  'ATOMIC_CMP_AND_SWP',
  'ATOMIC_FETCH_AND_ADD',
  'LOCAL_INV',
  'REG_MR',
  'BIND_MW',
];

/** Work completion opcodes (API.md "Work completions"). */
export type WcOpcode =
  | 'SEND'
  | 'RDMA_WRITE'
  | 'RDMA_READ'
  | 'COMP_SWAP'
  | 'FETCH_ADD'
  | 'BIND_MW'
  | 'LOCAL_INV'
  | 'REG_MR'
  | 'RECV'
  | 'RECV_RDMA_WITH_IMM';

/** Work completion flags. */
export type WcFlag = 'WITH_IMM' | 'WITH_INV';

export type { WcStatus };

/** A scatter/gather element: `length` bytes at host virtual address `addr` through `lkey`. */
export interface ModelSge {
  addr: number;
  length: number;
  lkey: number;
}

/** The range and rights a memory window is bound to (`ibv_mw_bind_info`). */
export interface ModelBindInfo {
  /** The MR the window lies in; may be omitted (or null) only to unbind a type-1 window (length 0). */
  mr?: ModelMr | null;
  /** First address of the window, in the MR's address space. */
  addr: number;
  /** Bytes of the window; 0 unbinds a type-1 window. */
  length: number;
  /** VerbsAccess bits of the window (REMOTE_READ / REMOTE_WRITE / REMOTE_ATOMIC, ZERO_BASED). */
  access: number;
}

/** A send work request (API.md "Send work requests"); fields unused by the opcode are ignored. */
export interface ModelSendWr {
  wrId: number;
  opcode: WrOpcode;
  /** Local buffers: gathered (SEND, WRITE) or scattered into (READ, atomic result). */
  sgList?: ModelSge[];
  /** Complete with a work completion on success (errors always complete). */
  signaled?: boolean;
  /** Accepted and ignored: the model executes each send queue strictly in order anyway. */
  fence?: boolean;
  /** Accepted and ignored (the model has no completion events). */
  solicited?: boolean;
  /** SEND / RDMA_WRITE: the bytes are copied from `sgList` at post time, without lkey checks. */
  inline?: boolean;
  /** RDMA_WRITE[_WITH_IMM], RDMA_READ[_WITH_INV], ATOMIC_*: the remote virtual address. */
  remoteAddr?: number;
  /** The remote key of RDMA and atomic requests; the window's new key of BIND_MW. */
  rkey?: number;
  /** SEND_WITH_IMM, RDMA_WRITE_WITH_IMM: 32-bit immediate data. */
  immData?: number;
  /** SEND_WITH_INV (remote key), LOCAL_INV and RDMA_READ_WITH_INV (local key) to invalidate. */
  invalidateRkey?: number;
  /** ATOMIC_CMP_AND_SWP: compare value; ATOMIC_FETCH_AND_ADD: the addend (64 bits). */
  compareAdd?: bigint | number;
  /** ATOMIC_CMP_AND_SWP: swap value (64 bits). */
  swap?: bigint | number;
  /** REG_MR: the fast-registration MR whose mapped list is registered. */
  mr?: ModelMr;
  /** REG_MR: the key to register with (the MR's index, any tag). */
  key?: number;
  /** REG_MR: VerbsAccess bits of the registration. */
  access?: number;
  /** BIND_MW: the type-2 window to bind (its new key in `rkey`). */
  mw?: ModelMw;
  /** BIND_MW: what to bind it to. */
  bindInfo?: ModelBindInfo;
}

/** A receive work request. */
export interface ModelRecvWr {
  wrId: number;
  sgList: ModelSge[];
}

/** A work completion (API.md "Work completions", without vendorErr). */
export interface ModelWc {
  wrId: number;
  status: WcStatus;
  opcode: WcOpcode;
  /** Bytes moved (0 on any error). */
  byteLen: number;
  /** The QP the completed work request was posted on. */
  qpNum: number;
  wcFlags: ReadonlySet<WcFlag>;
  immData?: number;
  invalidatedRkey?: number;
}

/** A key's mkey as the device sees it now (`VerbsModel.keyState`). */
export type KeyState =
  | {
      /** The key's index holds no MR or window. */
      kind: 'NONE';
      index: number;
    }
  | {
      kind: 'MR';
      index: number;
      type: MrType;
      /** The full key the device holds at this index now. */
      key: number;
      /** `key` equals the key asked about (the tag matches). */
      keyMatches: boolean;
      state: 'FREE' | 'VALID';
      pdn: number;
      /** First address of the range (0 when zero-based). */
      iova: number;
      length: number;
      /** VerbsAccess bits of the registration. */
      access: number;
      /** Windows bound to this MR now. */
      boundWindows: number;
    }
  | {
      kind: 'MW';
      index: number;
      type: MwType;
      key: number;
      keyMatches: boolean;
      /** VALID only while bound with a length != 0. */
      state: 'FREE' | 'VALID';
      pdn: number;
      /** Bound range, in the MR's address space. */
      addr: number;
      length: number;
      /** VerbsAccess bits of the binding. */
      access: number;
      /** Type 2: the QP it is bound to. */
      qpNum: number | undefined;
      /** The key of the MR it is bound to. */
      mrKey: number | undefined;
    };
