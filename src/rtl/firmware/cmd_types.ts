/**
 * The firmware commands `Cmdif` executes: their typed inputs and outputs, the command status
 * codes, the error a failed command rejects with, and the bookkeeping objects of the queues
 * (EQ, CQ, QP) that CREATE_* leaves for the queue modules.
 */
import { EnumType } from '../../sim/enum_type.ts';
import { CmdOpcode } from '../formats/constants.ts';
import type { Klm } from '../formats/klm.ts';
import type { Mtu } from '../config.ts';
import type { HcaCapQuery } from './hca_caps.ts';
import { hex } from '../formats/field.ts';
import type { QueuePages } from '../memory/pas.ts';

// ---------------------------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------------------------

/**
 * Command completion statuses (the `status` byte of every command output). Values are the
 * kernel's MLX5_CMD_STAT_* (include/linux/mlx5/device.h); names are the PRM's, which the kernel
 * shortens: BAD_RESOURCE = MLX5_CMD_STAT_BAD_RES_ERR ("bad resource" in cmd.c cmd_status_str),
 * EXCEED_LIM = MLX5_CMD_STAT_LIM_ERR ("limits exceeded"), BAD_RES_STATE =
 * MLX5_CMD_STAT_BAD_RES_STATE_ERR ("bad resource state"), NO_RESOURCES =
 * MLX5_CMD_STAT_NO_RES_ERR ("no resources").
 */
export const CmdStatus = {
  OK: 0x0,
  INTERNAL_ERR: 0x1,
  BAD_OP: 0x2,
  BAD_PARAM: 0x3,
  BAD_SYS_STATE: 0x4,
  BAD_RESOURCE: 0x5,
  RESOURCE_BUSY: 0x6,
  EXCEED_LIM: 0x8,
  BAD_RES_STATE: 0x9,
  BAD_INDEX: 0xa,
  NO_RESOURCES: 0xf,
  BAD_QP_STATE: 0x10,
  BAD_PKT: 0x30,
  BAD_SIZE_OUTS_CQES: 0x40,
  BAD_INPUT_LEN: 0x50,
  BAD_OUTPUT_LEN: 0x51,
} as const;
/** The name of a command status. */
export type CmdStatusName = keyof typeof CmdStatus;

function invert(o: Readonly<Record<string, number>>): Record<number, string> {
  const r: Record<number, string> = {};
  for (const [k, v] of Object.entries(o)) r[v] = k;
  return r;
}

/** Command statuses traced as `cmd_status` (GTKWave shows the names through a filter). */
export const CmdStatusEnum = new EnumType('cmd_status', invert(CmdStatus));

/** Opcodes traced as `cmd_opcode`: the names of spec/mlx5.md "Commands"; NONE (0) while idle. */
export const CmdOpcodeEnum = new EnumType('cmd_opcode', { 0: 'NONE', ...invert(CmdOpcode) });

/** FNV-1a, 32 bits: a stable, opaque syndrome per rule (firmware syndromes identify the check). */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * A failed command: the promise of `Cmdif.exec` rejects with it. It carries what the command
 * output carries (status, syndrome) plus the rule that failed, and its message reads like the
 * kernel's cmd_status_print: `CREATE_MKEY(0x200) op_mod(0x0) failed, status BAD_RESOURCE(0x5),
 * syndrome (0x...): pd 0x7 is not allocated`.
 */
export class CmdError extends Error {
  override readonly name = 'CmdError';
  /** The status byte (CmdStatus). */
  readonly status: number;
  /** 32-bit syndrome: a hash of the command and rule id, the same for every failure of that rule. */
  readonly syndrome: number;

  constructor(
    /** The command name (a key of CmdOpcode), or the name given for an unknown command. */
    readonly op: string,
    /** Its opcode (0 when unknown). */
    readonly opcode: number,
    /** Its op_mod. */
    readonly opMod: number,
    /** The status name. */
    readonly statusName: CmdStatusName,
    /** Stable id of the rule that failed, e.g. `pd_not_allocated`. */
    readonly rule: string,
    /** The rule with the values that broke it. */
    readonly detail: string,
    /** The status and syndrome as an output carried them (CmdError.fromOutput); else from the name and rule. */
    raw?: { readonly status: number; readonly syndrome: number },
  ) {
    const status = raw?.status ?? CmdStatus[statusName];
    const syndrome = raw?.syndrome ?? fnv1a(`${op}.${rule}`);
    super(`${op}(${hex(opcode)}) op_mod(${hex(opMod)}) failed, status ${statusName}(${hex(status)}), syndrome (${hex(syndrome)}): ${detail}`);
    this.status = status;
    this.syndrome = syndrome;
  }

  /**
   * The error a failed command's output stands for: mlx5's `*_out` carries only the status
   * (byte 0) and the syndrome (bytes 4-7), so the rule is named by the syndrome and the detail
   * says no more (the firmware's text reaches the driver by another path). A status mlx5 does not
   * define keeps its value; its name reads INTERNAL_ERR.
   */
  static fromOutput(op: string, opcode: number, opMod: number, status: number, syndrome: number): CmdError {
    const name = STATUS_NAME.get(status) ?? 'INTERNAL_ERR';
    return new CmdError(op, opcode, opMod, name, `syndrome_${hex(syndrome)}`, `the firmware answered status ${hex(status)}, syndrome ${hex(syndrome)}`, { status, syndrome });
  }
}

const STATUS_NAME: ReadonlyMap<number, CmdStatusName> = new Map(Object.entries(CmdStatus).map(([k, v]) => [v, k as CmdStatusName]));

// ---------------------------------------------------------------------------------------------
// Queues and QPs (bookkeeping for the queue modules)
// ---------------------------------------------------------------------------------------------

/** QP states (API.md `qp.state`); SQD/SQER are not modelled. */
export type QpState = 'RESET' | 'INIT' | 'RTR' | 'RTS' | 'ERR';
/** QP transport service. The data path models RC; UC and UD are bookkeeping only. */
export type QpTransport = 'RC' | 'UC' | 'UD';

/** An EQ as CREATE_EQ left it. */
export interface EqContext {
  readonly eqn: number;
  /** EQEs, a power of two. */
  readonly size: number;
  /** Host physical address of the EQE ring (0: not given). */
  readonly bufAddr: number;
  /** Event types mapped to this EQ: bit `t` for EventType `t`. */
  readonly eventMask: number;
}

/** A CQ as CREATE_CQ left it. */
export interface CqContext {
  readonly cqn: number;
  /** CQEs, a power of two. */
  readonly size: number;
  /** The EQ its completion events go to. */
  readonly eqn: number;
  /** Host physical address of the CQE ring (0: not given). */
  readonly bufAddr: number;
  /** Host physical address of the doorbell record (0: not given). */
  readonly dbrAddr: number;
  /** How the device reaches the CQE ring: the page list of the command (pas), or `bufAddr`. */
  readonly pages: QueuePages;
}

/** A QP as CREATE_QP and the modify commands left it. */
export interface QpContext {
  readonly qpn: number;
  readonly transport: QpTransport;
  readonly pd: number;
  readonly sendCqn: number;
  readonly recvCqn: number;
  /** Send queue WQEBBs, a power of two. */
  readonly sqSize: number;
  /** Receive queue WQEs, a power of two (0: no receive queue). */
  readonly rqSize: number;
  readonly maxSendSge: number;
  readonly maxRecvSge: number;
  /** Host physical addresses of the queue buffers and doorbell record (0: not given). */
  readonly sqBufAddr: number;
  readonly rqBufAddr: number;
  readonly dbrAddr: number;
  /**
   * How the device reaches the rings: with a page list (pas), one buffer holds the receive queue
   * and then the send queue (at byte `sqOffset`); without, the two buffer addresses above.
   */
  readonly rqPages: QueuePages;
  readonly sqPages: QueuePages;
  readonly sqOffset: number;
  /** qpc.fre (fast registration enabled): the QP may post UMR WQEs that write translations. */
  readonly fre: boolean;
  /** The driver's UMR QP (CREATE_QP `umr`). */
  readonly umr: boolean;
  readonly state: QpState;
  /** RST2INIT: remote access enabled (ib_access_flags bits). */
  readonly accessFlags: number;
  readonly port: number;
  readonly pkeyIndex: number;
  /** INIT2RTR: the peer QP, path MTU and the expected receive PSN. */
  readonly remoteQpn: number;
  /** The peer adapter (testbed index) of a connected RC QP. */
  readonly remoteHca: number;
  readonly mtu: Mtu;
  readonly rqPsn: number;
  /** RTR2RTS: first send PSN, ACK timeout exponent, retry counts. */
  readonly sqPsn: number;
  readonly timeout: number;
  readonly retryCnt: number;
  readonly rnrRetry: number;
  /**
   * RTR2RTS: RDMA READs and atomics this QP may have outstanding as initiator (2^log_sra_max;
   * log_sra_max is a 3-bit field of the QPC in mlx5_ifc.h, so 1..128). Default 16.
   */
  readonly maxRdAtomic: number;
  /** PAGE_FAULT_RESUME commands executed for this QP, and the flags of the last one. */
  readonly pageFaultResumes: number;
  readonly lastResumeFlags: number;
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/**
 * CREATE_MKEY input: the fields of firmware.ts `MkeyDesc` but the index (the firmware picks
 * it). Optional fields default to: free false, umrEn false, remoteInval false, qpn 0xffffff
 * (not bound), len64 false, logPageSize 12, pgAccess false, no translations.
 */
export interface CreateMkeyIn {
  /** The key's low byte (the driver's rolling variant counter). */
  tag: number;
  /** MkcAccessMode: PA, MTT or KLMS (KSM is not modelled: BAD_PARAM). */
  accessMode: number;
  /** ib_access_flags bits: LOCAL_WRITE 1, REMOTE_WRITE 2, REMOTE_READ 4, REMOTE_ATOMIC 8. */
  access: number;
  /** A PD from ALLOC_PD. */
  pd: number;
  start: number;
  length: number;
  free?: boolean;
  umrEn?: boolean;
  remoteInval?: boolean;
  qpn?: number;
  len64?: boolean;
  logPageSize?: number;
  /** pg_access (spec/mlx5.md "mkey context"): the per-page RD/WR bits of MTTs are honoured (ODP). */
  pgAccess?: boolean;
  /** MTT mode: raw 8-byte entries (page address | RD 1 | WR 2). */
  mtt?: readonly number[];
  /** KLMS mode: the list. */
  klm?: readonly Klm[];
  /** Translation entries to reserve (at least the list given), for UMR to fill later. */
  xltCapacity?: number;
  /** MKEY_KIND_MR (default), MKEY_KIND_MW1 or MKEY_KIND_MW2 (model-private ICM bits). */
  kind?: number;
}

/** The inputs of each command, by name (spec/mlx5.md "Commands"). */
export interface CmdInputs {
  /** Start-up (mlx5_core main.c): ENABLE_HCA, then QUERY_PAGES boot and MANAGE_PAGES, then INIT_HCA. */
  ENABLE_HCA: { functionId?: number };
  INIT_HCA: Record<never, never>;
  /** profile: 0 graceful close (what mlx5_cmd_teardown_hca sends, fw.c:307), 1 force close, 2 prepare fast teardown (mlx5_ifc.h MLX5_TEARDOWN_HCA_IN_PROFILE_*). */
  TEARDOWN_HCA: { profile?: number };
  DISABLE_HCA: { functionId?: number };
  /** opMod: QueryPagesOpMod (boot, init, regular). */
  QUERY_PAGES: { opMod: number; functionId?: number };
  /**
   * opMod: ManagePagesOpMod. ALLOCATION_SUCCESS gives the firmware the 4 KiB pages `pas` (DMA
   * addresses) for ICM; HCA_RETURN_PAGES asks it to give back `numEntries` pages; ALLOCATION_FAIL
   * says the driver has none to give.
   */
  MANAGE_PAGES: { opMod: number; functionId?: number; pas?: readonly number[]; numEntries?: number };
  /** opMod: HcaCapOpMod (0/1 general max/cur, 4/5 ODP max/cur). */
  QUERY_HCA_CAP: { opMod: number };
  ALLOC_PD: Record<never, never>;
  /** The PD from ALLOC_PD (mlx5_ifc dealloc_pd_in.pd). */
  DEALLOC_PD: { pd: number };
  CREATE_MKEY: CreateMkeyIn;
  /** The 24-bit mkey index (mlx5_ifc query_mkey_in.mkey_index), i.e. key >>> 8. */
  QUERY_MKEY: { index: number };
  QUERY_SPECIAL_CONTEXTS: Record<never, never>;
  /** The 24-bit mkey index (mlx5_ifc destroy_mkey_in.mkey_index). */
  DESTROY_MKEY: { index: number };
  PAGE_FAULT_RESUME: { flagsQpn: number };
  /** size: EQEs (a power of two); eventMask: bit t for EventType t (default: none). */
  CREATE_EQ: { size: number; bufAddr?: number; eventMask?: number };
  /** The EQ from CREATE_EQ (mlx5_ifc destroy_eq_in.eq_number). */
  DESTROY_EQ: { eqn: number };
  /**
   * size: CQEs (a power of two); eqn: an EQ from CREATE_EQ. The ring is reached through `pas`
   * (create_cq_in.pas: the physical address of each page of the buffer, pages of
   * 4 KiB << `logPageSize`, cqc.log_page_size) when given, else it is contiguous at `bufAddr`.
   */
  CREATE_CQ: { size: number; eqn: number; bufAddr?: number; dbrAddr?: number; pas?: readonly number[]; logPageSize?: number };
  /** The CQ from CREATE_CQ (mlx5_ifc destroy_cq_in.cqn). */
  DESTROY_CQ: { cqn: number };
  CREATE_QP: {
    pd: number;
    sendCqn: number;
    recvCqn: number;
    /** Send queue WQEBBs, a power of two. */
    sqSize: number;
    /** Receive queue WQEs, a power of two, or 0. */
    rqSize: number;
    transport?: QpTransport;
    maxSendSge?: number;
    maxRecvSge?: number;
    sqBufAddr?: number;
    rqBufAddr?: number;
    dbrAddr?: number;
    /**
     * create_qp_in.pas: the physical pages (4 KiB << `logPageSize`, qpc.log_page_size) of one
     * buffer holding the receive queue (rqSize x its stride) and then the send queue (sqSize x
     * 64 B); given, it replaces sqBufAddr and rqBufAddr.
     */
    pas?: readonly number[];
    logPageSize?: number;
    /**
     * qpc.fre, fast registration enabled (default false): mlx5_ib sets it for every kernel QP
     * (qp.c create_kernel_qp), never for a user QP. Only such a QP may post a UMR that writes
     * translations (REG_MR: MTTs are physical addresses).
     */
    fre?: boolean;
    /**
     * The driver's UMR QP (mlx5 creates it as MLX5_IB_QPT_REG_UMR, qpc.st REG_UMR; default
     * false): the send queue engine keeps a WQE slot for it (transport/sq.ts), so the UMRs that
     * resolve page faults always get one.
     */
    umr?: boolean;
  };
  /** The QP from CREATE_QP (mlx5_ifc destroy_qp_in.qpn), in any state. */
  DESTROY_QP: { qpn: number };
  /** The hardware's view of a QP (ibv_query_qp): its state and connection attributes. */
  QUERY_QP: { qpn: number };
  RST2INIT_QP: { qpn: number; accessFlags?: number; port?: number; pkeyIndex?: number };
  /** `remoteHca`: the peer adapter's index in the testbed (what an address vector names). */
  INIT2RTR_QP: { qpn: number; remoteQpn?: number; remoteHca?: number; mtu?: Mtu; rqPsn?: number };
  RTR2RTS_QP: { qpn: number; sqPsn?: number; timeout?: number; retryCnt?: number; rnrRetry?: number; maxRdAtomic?: number };
  '2ERR_QP': { qpn: number };
  '2RST_QP': { qpn: number };
}

/** The outputs of each command, by name. */
export interface CmdOutputs {
  ENABLE_HCA: void;
  INIT_HCA: void;
  TEARDOWN_HCA: void;
  DISABLE_HCA: void;
  /** num_pages is signed: negative asks the driver to take pages back. */
  QUERY_PAGES: { functionId: number; numPages: number };
  /** HCA_RETURN_PAGES: the pages given back. */
  MANAGE_PAGES: { pas: readonly number[] };
  QUERY_HCA_CAP: HcaCapQuery;
  ALLOC_PD: { pd: number };
  DEALLOC_PD: void;
  /** The new key = index << 8 | tag. */
  CREATE_MKEY: { mkey: number; index: number };
  /** The 64 bytes of the mkey context (spec/mlx5.md), and whether the index is allocated. */
  QUERY_MKEY: { context: Uint8Array; allocated: boolean };
  /** resd_lkey (the reserved lkey that ends a scatter list) and null_mkey (implicit ODP's not-present entry). */
  QUERY_SPECIAL_CONTEXTS: { resdLkey: number; nullMkey: number };
  DESTROY_MKEY: void;
  PAGE_FAULT_RESUME: void;
  CREATE_EQ: { eqn: number };
  DESTROY_EQ: void;
  CREATE_CQ: { cqn: number };
  DESTROY_CQ: void;
  CREATE_QP: { qpn: number };
  DESTROY_QP: void;
  QUERY_QP: QpContext;
  RST2INIT_QP: { state: QpState };
  INIT2RTR_QP: { state: QpState };
  RTR2RTS_QP: { state: QpState };
  '2ERR_QP': { state: QpState };
  '2RST_QP': { state: QpState };
}

/** The name of a command `Cmdif` executes. */
export type CmdName = keyof CmdInputs;

/** A command of name `K`: `{ op: K, ...inputs }`. */
export type CmdOf<K extends CmdName> = { op: K } & CmdInputs[K];

/** Any command: a discriminated union on `op`. */
export type Cmd = { [K in CmdName]: CmdOf<K> }[CmdName];
