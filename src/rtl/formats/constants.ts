/**
 * mlx5 codes, bit positions, key arithmetic and sizes (spec/mlx5.md). Names follow the kernel's
 * include/linux/mlx5/{device.h,qp.h,mlx5_ifc.h} with the `MLX5_<GROUP>_` prefix dropped into the
 * object name (MLX5_OPCODE_SEND -> WqeOpcode.SEND).
 */

import { checkUint } from './field.ts';

// ---------------------------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------------------------

/** Send WQE basic block (MLX5_SEND_WQE_BB): WQEs are stored in 64-byte units. */
export const WQEBB_SIZE = 64;
/** Data segment unit (MLX5_SEND_WQE_DS): the control segment's `ds` counts 16-byte units. */
export const DS_SIZE = 16;
/** A WQE spans at most 16 WQEBBs (MLX5_SEND_WQE_MAX_WQEBBS). */
export const MAX_WQEBBS_PER_WQE = 16;
/** Bytes of a CQE (this project uses 64-byte CQEs only). */
export const CQE_SIZE = 64;
/** Bytes of an EQE. */
export const EQE_SIZE = 64;
/** Bytes of an mkey context, which is also the UMR mkey segment. */
export const MKEY_CONTEXT_SIZE = 64;
/** Bytes of one KLM entry (one octoword). */
export const KLM_SIZE = 16;
/** Bytes of one MTT entry (two per octoword). */
export const MTT_SIZE = 8;
/** An octoword: the unit of xlt_octowords and translations_octword_size. */
export const OCTOWORD_SIZE = 16;

// ---------------------------------------------------------------------------------------------
// Send WQE
// ---------------------------------------------------------------------------------------------

/** Send WQE opcodes (MLX5_OPCODE_*). REG_MR, LOCAL_INV and BIND_MW are all posted as UMR. */
export const WqeOpcode = {
  NOP: 0x00,
  SEND_INVAL: 0x01,
  RDMA_WRITE: 0x08,
  RDMA_WRITE_IMM: 0x09,
  SEND: 0x0a,
  SEND_IMM: 0x0b,
  RDMA_READ: 0x10,
  ATOMIC_CS: 0x11,
  ATOMIC_FA: 0x12,
  UMR: 0x25,
} as const;
/** A send WQE opcode value. */
export type WqeOpcode = (typeof WqeOpcode)[keyof typeof WqeOpcode];

/**
 * Model-private encoding of RDMA_READ_WITH_INV (spec/mlx5.md: "mlx5 has no opcode for
 * RDMA_READ_WITH_INV"; it is iWARP-only): an RDMA_READ WQE (opcode 0x10) with this value in
 * opmod (bits 31:24 of opmod_idx_opcode) and the local key to invalidate in the control
 * segment's imm, as SEND_INVAL and LOCAL_INV carry theirs. mlx5 defines no opmod for RDMA_READ
 * (the kernel's wr.c always writes 0 there), so a non-zero value cannot clash with a real WQE.
 * Accepted only with config.readWithInvalidate; otherwise it is an unknown opmod, completed
 * LOC_QP_OP_ERR.
 */
export const WQE_OPMOD_READ_WITH_INV = 0x01;

/**
 * Fence modes: the value of `fm_ce_se` bits 7:5, unshifted (the kernel's MLX5_FENCE_MODE_* are
 * pre-shifted by 5). SMALL_AND_FENCE is from include/linux/mlx5/qp.h; the spec lists 0..3.
 */
export const FenceMode = {
  NONE: 0,
  INITIATOR_SMALL: 1,
  FENCE: 2,
  STRONG_ORDERING: 3,
  SMALL_AND_FENCE: 4,
} as const;
/** A fence mode value (3 bits). */
export type FenceMode = (typeof FenceMode)[keyof typeof FenceMode];

/**
 * Completion modes: the value of `fm_ce_se` bits 3:2, unshifted. CQ_UPDATE (kernel
 * MLX5_WQE_CTRL_CQ_UPDATE = 2 << 2) is a signaled WQE; ERROR_ONLY writes a CQE only on error.
 * Value 1 is not used by the drivers.
 */
export const CeMode = {
  ERROR_ONLY: 0,
  CQ_UPDATE: 2,
  CQ_UPDATE_AND_EQE: 3,
} as const;
/** A completion mode value (2 bits). */
export type CeMode = (typeof CeMode)[keyof typeof CeMode];

// ---------------------------------------------------------------------------------------------
// mkey context
// ---------------------------------------------------------------------------------------------

/** mkey access modes (MLX5_MKC_ACCESS_MODE_*): how an mkey translates its range. */
export const MkcAccessMode = {
  /** No translation: the va is the physical address. */
  PA: 0,
  /** Page table of 8-byte MTT entries. */
  MTT: 1,
  /** Indirect: a list of 16-byte KLMs. */
  KLMS: 2,
  /** Fixed-size indirect. */
  KSM: 3,
} as const;
/** An access mode value (5 bits in the mkey context). */
export type MkcAccessMode = (typeof MkcAccessMode)[keyof typeof MkcAccessMode];

/** mkey context byte 0: the mkey is disabled (MLX5_MKEY_STATUS_FREE). */
export const MKEY_STATUS_FREE = 0x40;

/** mkey context byte 2 permission bits (MLX5_PERM_*); bits 1:0 hold access_mode[1:0]. */
export const MkeyPerm = {
  UMR_EN: 0x80,
  ATOMIC: 0x40,
  REMOTE_WRITE: 0x20,
  REMOTE_READ: 0x10,
  LOCAL_WRITE: 0x08,
  LOCAL_READ: 0x04,
} as const;

/** mkey context `flags_pd` (u32 @12) bits above the 24-bit pd (MLX5_MKEY_LEN64 etc.). */
export const MkeyFlagsPd = {
  LEN64: 0x80000000,
  BSF_EN: 0x40000000,
  SYNC_UMR: 0x20000000,
  /** en_rinval: the key may be invalidated remotely (SEND_INVAL). */
  REMOTE_INVAL: 0x01000000,
} as const;

/** The qpn of an mkey not bound to a QP (all ones in 24 bits). */
export const MKEY_QPN_NONE = 0xffffff;

// ---------------------------------------------------------------------------------------------
// UMR
// ---------------------------------------------------------------------------------------------

/**
 * UMR control segment `flags` (byte 0).
 *
 * Naming clash (spec/mlx5.md "UMR control segment"): the kernel (include/linux/mlx5/qp.h) calls
 * 0x20 MLX5_UMR_CHECK_NOT_FREE and 0x40 MLX5_UMR_CHECK_FREE, while rdma-core (mlx5dv.h) calls
 * 0x20 MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE. The bits do not clash, only the names. Here each name
 * says what the hardware requires of the target mkey: CHECK_FREE (0x20) = "mkey must be free"
 * (fast registration, type-2 bind), CHECK_NOT_FREE (0x40) = "mkey must not be free".
 */
export const UmrCtrlFlag = {
  /** Translations follow in the WQE; otherwise a data segment points to them. */
  INLINE: 0x80,
  /** The mkey must not be free (kernel MLX5_UMR_CHECK_FREE). */
  CHECK_NOT_FREE: 0x40,
  /** The mkey must be free (kernel MLX5_UMR_CHECK_NOT_FREE, rdma-core CHECK_FREE). */
  CHECK_FREE: 0x20,
  /** xlt_offset is valid (rdma-core TRNSLATION_OFFSET). */
  TRANSLATION_OFFSET_EN: 0x10,
  /** The mkey's qpn must be the posting QP (unbinding a type-2 window). */
  CHECK_QPN: 0x08,
} as const;

/** Bit positions of the UMR `mkey_mask` (MLX5_MKEY_MASK_*): set = copy that field from the mkey segment. */
export const MkeyMaskBit = {
  LEN: 0,
  PAGE_SIZE: 1,
  START_ADDR: 6,
  PD: 7,
  EN_RINVAL: 8,
  KEY: 13,
  QPN: 14,
  LR: 17,
  LW: 18,
  RR: 19,
  RW: 20,
  A: 21,
  SMALL_FENCE: 23,
  FREE: 29,
} as const;
/** The name of an mkey_mask bit. */
export type MkeyMaskName = keyof typeof MkeyMaskBit;

// ---------------------------------------------------------------------------------------------
// Translation entries
// ---------------------------------------------------------------------------------------------

/** MTT entry bit 0: the page may be read (MLX5_EN_RD). */
export const MLX5_EN_RD = 1;
/** MTT entry bit 1: the page may be written (MLX5_EN_WR). */
export const MLX5_EN_WR = 2;

// ---------------------------------------------------------------------------------------------
// CQE
// ---------------------------------------------------------------------------------------------

/** CQE opcodes, `op_own` bits 7:4 (MLX5_CQE_*). */
export const CqeOpcode = {
  REQ: 0,
  RESP_WR_IMM: 1,
  RESP_SEND: 2,
  RESP_SEND_IMM: 3,
  RESP_SEND_INV: 4,
  REQ_ERR: 13,
  RESP_ERR: 14,
  INVALID: 15,
} as const;
/** A CQE opcode value (4 bits). */
export type CqeOpcode = (typeof CqeOpcode)[keyof typeof CqeOpcode];

/** Error CQE syndromes (MLX5_CQE_SYNDROME_*). */
export const CqeSyndrome = {
  LOCAL_LENGTH_ERR: 0x01,
  LOCAL_QP_OP_ERR: 0x02,
  LOCAL_PROT_ERR: 0x04,
  WR_FLUSH_ERR: 0x05,
  MW_BIND_ERR: 0x06,
  BAD_RESP_ERR: 0x10,
  LOCAL_ACCESS_ERR: 0x11,
  REMOTE_INVAL_REQ_ERR: 0x12,
  REMOTE_ACCESS_ERR: 0x13,
  REMOTE_OP_ERR: 0x14,
  TRANSPORT_RETRY_EXC_ERR: 0x15,
  RNR_RETRY_EXC_ERR: 0x16,
  REMOTE_ABORTED_ERR: 0x22,
  /**
   * This project's choice: the hardware has no syndrome that means "general error" (every
   * unknown syndrome maps to GENERAL_ERR), so the simulator writes 0xff when it needs one.
   */
  GENERAL_ERR: 0xff,
} as const;

/** Work completion status names (API.md "Work completions"). */
export type WcStatus =
  | 'SUCCESS'
  | 'LOC_LEN_ERR'
  | 'LOC_QP_OP_ERR'
  | 'LOC_PROT_ERR'
  | 'WR_FLUSH_ERR'
  | 'MW_BIND_ERR'
  | 'BAD_RESP_ERR'
  | 'LOC_ACCESS_ERR'
  | 'REM_INV_REQ_ERR'
  | 'REM_ACCESS_ERR'
  | 'REM_OP_ERR'
  | 'RETRY_EXC_ERR'
  | 'RNR_RETRY_EXC_ERR'
  | 'REM_ABORT_ERR'
  | 'GENERAL_ERR';

/** The error statuses: every WcStatus but SUCCESS (which no error CQE carries). */
export type WcErrorStatus = Exclude<WcStatus, 'SUCCESS'>;

/** Syndrome -> status, as mlx5_handle_error_cqe (drivers/infiniband/hw/mlx5/cq.c); others are GENERAL_ERR. */
export const SYNDROME_TO_WC_STATUS: Readonly<Record<number, WcErrorStatus>> = {
  [CqeSyndrome.LOCAL_LENGTH_ERR]: 'LOC_LEN_ERR',
  [CqeSyndrome.LOCAL_QP_OP_ERR]: 'LOC_QP_OP_ERR',
  [CqeSyndrome.LOCAL_PROT_ERR]: 'LOC_PROT_ERR',
  [CqeSyndrome.WR_FLUSH_ERR]: 'WR_FLUSH_ERR',
  [CqeSyndrome.MW_BIND_ERR]: 'MW_BIND_ERR',
  [CqeSyndrome.BAD_RESP_ERR]: 'BAD_RESP_ERR',
  [CqeSyndrome.LOCAL_ACCESS_ERR]: 'LOC_ACCESS_ERR',
  [CqeSyndrome.REMOTE_INVAL_REQ_ERR]: 'REM_INV_REQ_ERR',
  [CqeSyndrome.REMOTE_ACCESS_ERR]: 'REM_ACCESS_ERR',
  [CqeSyndrome.REMOTE_OP_ERR]: 'REM_OP_ERR',
  [CqeSyndrome.TRANSPORT_RETRY_EXC_ERR]: 'RETRY_EXC_ERR',
  [CqeSyndrome.RNR_RETRY_EXC_ERR]: 'RNR_RETRY_EXC_ERR',
  [CqeSyndrome.REMOTE_ABORTED_ERR]: 'REM_ABORT_ERR',
};

/** Status -> syndrome: the inverse of SYNDROME_TO_WC_STATUS, GENERAL_ERR -> CqeSyndrome.GENERAL_ERR. */
export const WC_STATUS_TO_SYNDROME: Readonly<Record<WcErrorStatus, number>> = {
  LOC_LEN_ERR: CqeSyndrome.LOCAL_LENGTH_ERR,
  LOC_QP_OP_ERR: CqeSyndrome.LOCAL_QP_OP_ERR,
  LOC_PROT_ERR: CqeSyndrome.LOCAL_PROT_ERR,
  WR_FLUSH_ERR: CqeSyndrome.WR_FLUSH_ERR,
  MW_BIND_ERR: CqeSyndrome.MW_BIND_ERR,
  BAD_RESP_ERR: CqeSyndrome.BAD_RESP_ERR,
  LOC_ACCESS_ERR: CqeSyndrome.LOCAL_ACCESS_ERR,
  REM_INV_REQ_ERR: CqeSyndrome.REMOTE_INVAL_REQ_ERR,
  REM_ACCESS_ERR: CqeSyndrome.REMOTE_ACCESS_ERR,
  REM_OP_ERR: CqeSyndrome.REMOTE_OP_ERR,
  RETRY_EXC_ERR: CqeSyndrome.TRANSPORT_RETRY_EXC_ERR,
  RNR_RETRY_EXC_ERR: CqeSyndrome.RNR_RETRY_EXC_ERR,
  REM_ABORT_ERR: CqeSyndrome.REMOTE_ABORTED_ERR,
  GENERAL_ERR: CqeSyndrome.GENERAL_ERR,
};

/** The work completion status of an error CQE's syndrome; unknown syndromes are GENERAL_ERR. */
export function syndromeToWcStatus(syndrome: number): WcErrorStatus {
  return SYNDROME_TO_WC_STATUS[syndrome] ?? 'GENERAL_ERR';
}

/** The syndrome an error CQE carries for `status`. */
export function wcStatusToSyndrome(status: WcErrorStatus): number {
  return WC_STATUS_TO_SYNDROME[status];
}

// ---------------------------------------------------------------------------------------------
// EQ
// ---------------------------------------------------------------------------------------------

/** EQE event types (MLX5_EVENT_TYPE_*). */
export const EventType = {
  COMP: 0x00,
  PATH_MIG: 0x01,
  COMM_EST: 0x02,
  SQ_DRAINED: 0x03,
  CQ_ERROR: 0x04,
  WQ_CATAS_ERROR: 0x05,
  INTERNAL_ERROR: 0x08,
  PORT_CHANGE: 0x09,
  CMD: 0x0a,
  PAGE_REQUEST: 0x0b,
  PAGE_FAULT: 0x0c,
  WQ_INVAL_REQ_ERROR: 0x10,
  WQ_ACCESS_ERROR: 0x11,
} as const;
/** An event type value. */
export type EventType = (typeof EventType)[keyof typeof EventType];

/** The EQE types of a QP the hardware moved to ERR (QP_FATAL, QP_REQ_ERR, QP_ACCESS_ERR to a verbs user). */
export type QpErrorEvent = 'WQ_CATAS_ERROR' | 'WQ_INVAL_REQ_ERROR' | 'WQ_ACCESS_ERROR';

/**
 * Page-fault flags, bits 31:24 of `flags_qpn` in the page-fault EQE and in PAGE_FAULT_RESUME
 * (the seed's MLX5_PFAULT_* / MLX5_PAGE_FAULT_RESUME_*).
 */
export const PageFaultFlag = {
  /** The fault is on the requester side (its own SGE); else the responder's. */
  REQUESTOR: 0x01,
  /** The HCA was writing the page. */
  WRITE: 0x02,
  /** The fault is on an RDMA (remote) access. */
  RDMA: 0x04,
  /** PAGE_FAULT_RESUME only: the fault could not be resolved; complete the WQE in error. */
  ERROR: 0x80,
} as const;

/** Page-fault EQE `sub_type` (MLX5_PFAULT_SUBTYPE_*): which data layout follows. */
export const PageFaultSubtype = {
  WQE: 0,
  RDMA: 1,
} as const;
/** A page-fault subtype value. */
export type PageFaultSubtype = (typeof PageFaultSubtype)[keyof typeof PageFaultSubtype];

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/** Firmware command opcodes (MLX5_CMD_OP_*). `2ERR_QP` keeps the hardware name, hence the quotes. */
export const CmdOpcode = {
  QUERY_HCA_CAP: 0x100,
  /** MLX5_CMD_OP_INIT_HCA .. MLX5_CMD_OP_MANAGE_PAGES (mlx5_ifc.h): the start-up sequence of mlx5_core's main.c. */
  INIT_HCA: 0x102,
  TEARDOWN_HCA: 0x103,
  ENABLE_HCA: 0x104,
  DISABLE_HCA: 0x105,
  QUERY_PAGES: 0x107,
  MANAGE_PAGES: 0x108,
  CREATE_MKEY: 0x200,
  QUERY_MKEY: 0x201,
  DESTROY_MKEY: 0x202,
  QUERY_SPECIAL_CONTEXTS: 0x203,
  PAGE_FAULT_RESUME: 0x204,
  CREATE_EQ: 0x301,
  /** MLX5_CMD_OP_DESTROY_EQ (mlx5_ifc.h). */
  DESTROY_EQ: 0x302,
  CREATE_CQ: 0x400,
  /** MLX5_CMD_OP_DESTROY_CQ (include/linux/mlx5/mlx5_ifc.h, earlier driver.h). */
  DESTROY_CQ: 0x401,
  CREATE_QP: 0x500,
  /** MLX5_CMD_OP_DESTROY_QP (mlx5_ifc.h). */
  DESTROY_QP: 0x501,
  RST2INIT_QP: 0x502,
  INIT2RTR_QP: 0x503,
  RTR2RTS_QP: 0x504,
  /** MLX5_CMD_OP_QUERY_QP (mlx5_ifc.h). */
  QUERY_QP: 0x50b,
  '2ERR_QP': 0x507,
  /** MLX5_CMD_OP_2RST_QP (mlx5_ifc.h). */
  '2RST_QP': 0x50a,
  ALLOC_PD: 0x800,
  /** MLX5_CMD_OP_DEALLOC_PD (mlx5_ifc.h). */
  DEALLOC_PD: 0x801,
} as const;
/** A command opcode value. */
export type CmdOpcode = (typeof CmdOpcode)[keyof typeof CmdOpcode];

/** QUERY_PAGES op_mod (mlx5_ifc.h MLX5_QUERY_PAGES_IN_OP_MOD_*): which stage's pages the firmware asks for. */
export const QueryPagesOpMod = {
  BOOT_PAGES: 0x1,
  INIT_PAGES: 0x2,
  REGULAR_PAGES: 0x3,
} as const;

/** MANAGE_PAGES op_mod (mlx5_ifc.h MLX5_MANAGE_PAGES_IN_OP_MOD_*): give pages, say none are left, or take pages back. */
export const ManagePagesOpMod = {
  ALLOCATION_FAIL: 0x0,
  ALLOCATION_SUCCESS: 0x1,
  HCA_RETURN_PAGES: 0x2,
} as const;

/** QUERY_HCA_CAP op_mod: capability group and max/current (spec/mlx5.md "Commands"). */
export const HcaCapOpMod = {
  GENERAL_MAX: 0,
  GENERAL_CUR: 1,
  ODP_MAX: 4,
  ODP_CUR: 5,
} as const;

// ---------------------------------------------------------------------------------------------
// Keys
// ---------------------------------------------------------------------------------------------

/** The reserved invalid / terminate-scatter lkey (MLX5_INVALID_LKEY). */
export const MLX5_INVALID_LKEY = 0x100;
/**
 * The null mkey (QUERY_SPECIAL_CONTEXTS null_mkey): a KSM entry naming it has no child yet, and an
 * access through it faults (spec/mlx5.md "Implicit ODP"). Here key 0: mkey index 0 is never
 * allocated (firmware/cmdif.ts FIRST_MKEY_INDEX), so a new, zero-filled KSM table is all null.
 */
export const NULL_MKEY = 0;

/** The 24-bit mkey index of a key (bits 31:8). */
export function mkeyIndex(key: number): number {
  return key >>> 8;
}

/** The 8-bit tag ("variant") of a key (bits 7:0). */
export function mkeyTag(key: number): number {
  return key & 0xff;
}

/** The key of mkey `idx` with tag `tag`, as an unsigned 32-bit number. */
export function makeKey(idx: number, tag: number): number {
  checkUint('mkey index', idx, 24);
  checkUint('tag', tag, 8);
  // `>>> 0` keeps indices >= 0x800000 positive (a JS shift is signed 32-bit).
  return ((idx << 8) | tag) >>> 0;
}

/** `ib_inc_rkey`: the next tag, wrapping within 8 bits; the index is kept. */
export function incRkey(k: number): number {
  checkUint('key', k, 32);
  return (((k + 1) & 0xff) | (k & ~0xff)) >>> 0;
}
