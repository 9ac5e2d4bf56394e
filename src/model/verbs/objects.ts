/**
 * The objects of the verbs model: PD, CQ, QP, MR, MW. Each is a handle the tests hold (the fields
 * a libibverbs user sees, e.g. `mr.lkey`) plus the device-side state the model keeps (`dev`, the
 * meaning of the mkey context). Tests must not mutate them; the VerbsModel does.
 *
 * Two views of a key exist, as on real hardware: the handle's software view (`mr.lkey`, changed by
 * updateKey; `mw.rkey`, changed by bindMw at once) and the device's (`dev.key`, changed only when a
 * REG_MR or BIND_MW executes). Checks compare the keys a request carries with `dev.key`.
 */
import type {
  ModelRecvWr,
  ModelSendWr,
  ModelSge,
  ModelWc,
  MrType,
  MwType,
  QpState,
} from './types.ts';

/** A run of host virtual memory. */
export interface HostExtent {
  addr: number;
  length: number;
}

/** A protection domain. */
export class ModelPd {
  destroyed = false;
  constructor(
    /** The HCA (device) it was allocated on. */
    readonly hca: number,
    /** PD number (1, 2, ... per HCA; 0 is the model's internal host mkey's). */
    readonly pdn: number,
  ) {}
}

/** A completion queue; the model appends, `VerbsModel.pollCq` removes. */
export class ModelCq {
  destroyed = false;
  /** Completions not yet polled, oldest first. */
  readonly completions: ModelWc[] = [];
  constructor(
    readonly hca: number,
    readonly cqn: number,
    /** The size asked for (the model never overflows: see the choices in verbs_model.ts). */
    readonly cqe: number,
  ) {}
}

/** Queue sizes of a QP (ibv_qp_cap). */
export interface QpCaps {
  maxSendWr: number;
  maxRecvWr: number;
  maxSendSge: number;
  maxRecvSge: number;
}

/** REG_MR: the MR's mapped list as it was when the work request was posted. */
export interface RegSnapshot {
  iova: number;
  length: number;
  extents: HostExtent[];
}

/** BIND_MW (either type): what the bind does, fixed at post time. */
export interface BindRequest {
  mw: ModelMw;
  /** The window's key after the bind (same index, new tag). */
  newRkey: number;
  mr: ModelMr | undefined;
  /** The MR's lkey as the poster saw it (must still be the MR's key when the bind executes). */
  mrKey: number | undefined;
  addr: number;
  length: number;
  access: number;
}

/** A send queue entry: the work request and what was fixed when it was posted. */
export interface PostedSend {
  /** Global post order (the model's execution order; see runToCompletion). */
  seq: number;
  wr: ModelSendWr;
  sgList: ModelSge[];
  /** Inline SEND / RDMA_WRITE: the bytes, copied at post time. */
  inlineData: Uint8Array | undefined;
  reg: RegSnapshot | undefined;
  bind: BindRequest | undefined;
}

/** A receive queue entry. */
export interface PostedRecv {
  seq: number;
  wr: ModelRecvWr;
}

/** An RC queue pair. */
export class ModelQp {
  destroyed = false;
  state: QpState = 'RESET';
  /** The connected QP (set on the move to RTR), possibly on another HCA. */
  peer: ModelQp | undefined = undefined;
  /** Posted send work requests not executed yet, in order. */
  readonly sq: PostedSend[] = [];
  /**
   * Executed send work requests whose completion the application has not reaped yet (their
   * sequence numbers): a polled send completion reaps its request and every earlier one. They
   * still take room in the send queue (libmlx5 moves the SQ tail in poll_cq, from the CQE's
   * wqe_counter), so an application that never polls finds the queue full.
   */
  unreaped: number[] = [];
  /** Posted receive work requests not consumed yet, in order. */
  readonly rq: PostedRecv[] = [];
  constructor(
    readonly hca: number,
    readonly pd: ModelPd,
    /** QP number (per HCA, never reused). */
    readonly qpNum: number,
    readonly sendCq: ModelCq,
    readonly recvCq: ModelCq,
    readonly caps: QpCaps,
  ) {}
}

/** Device view of an MR (its mkey context). */
export interface MrDevice {
  /** The full key the device holds (index << 8 | tag). */
  key: number;
  state: 'FREE' | 'VALID';
  /** Start of the range: the registered iova, 0 when zero-based. */
  iova: number;
  length: number;
  /** VerbsAccess bits of the registration. */
  access: number;
  /** The host memory the range maps to, in order (`[iova, iova + length)` walks these). */
  extents: HostExtent[];
}

/** What the last mapSg left in a fast-registration MR (its page list / KLM list). */
export interface MappedList {
  extents: HostExtent[];
  /** Length of the page list REG_MR would write: pages (MEM_REG) or KLMs (SG_GAPS). */
  entries: number;
  /** mapSg's page size (MEM_REG). */
  pageSize: number;
}

/** A memory region: a user MR (regMr) or a fast-registration MR (allocMr). */
export class ModelMr {
  destroyed = false;
  /** Software view: ibv_mr lkey (== rkey on mlx5); updateKey changes its tag. */
  lkey: number;
  /** Software view: ibv_mr rkey. */
  rkey: number;
  /** Software view: the iova (regMr: addr, or 0 zero-based; mapSg: the first element's addr). */
  iova: number;
  /** Software view: bytes registered (regMr) or mapped (mapSg). */
  length: number;
  /** Windows bound to this MR now (counted when a bind executes). */
  boundWindows = 0;
  /** Fast-registration MRs: the list the last mapSg built. */
  mapped: MappedList = { extents: [], entries: 0, pageSize: 4096 };
  /**
   * Software view of the registration's access: regMr's, or that of the last REG_MR posted
   * (the bindMw verb's zero-based check; see verbs_model.ts).
   */
  regAccess: number;

  constructor(
    readonly hca: number,
    readonly pd: ModelPd,
    readonly type: MrType,
    /** mkey index (24 bits). */
    readonly index: number,
    /** Fast-registration MRs: max_num_sg of allocMr (0 for user MRs). */
    readonly maxNumSg: number,
    /** The device view. */
    readonly dev: MrDevice,
  ) {
    this.lkey = dev.key;
    this.rkey = dev.key;
    this.iova = dev.iova;
    this.length = dev.length;
    this.regAccess = dev.access;
  }
}

/** Device view of a memory window (its mkey context). */
export interface MwDevice {
  key: number;
  /** VALID only while bound with a length != 0. */
  state: 'FREE' | 'VALID';
  /** Bound range, in the MR's address space. */
  addr: number;
  length: number;
  /** VerbsAccess bits of the binding (ZERO_BASED included). */
  access: number;
  /** Type 2: the QP it is bound to. */
  qp: ModelQp | undefined;
  /** The MR it lies in. */
  mr: ModelMr | undefined;
}

/** A memory window of type 1 or 2. */
export class ModelMw {
  destroyed = false;
  /** Software view: ibv_mw rkey (bindMw and a posted BIND_MW set it at once). */
  rkey: number;
  constructor(
    readonly hca: number,
    readonly pd: ModelPd,
    readonly type: MwType,
    readonly index: number,
    readonly dev: MwDevice,
  ) {
    this.rkey = dev.key;
  }
}

/** Both kinds of object that own an mkey index. */
export type MkeyObject = ModelMr | ModelMw;

