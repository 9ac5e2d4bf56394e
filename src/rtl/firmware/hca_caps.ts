/**
 * The device capabilities one HCA reports through QUERY_HCA_CAP (spec/mlx5.md "Commands":
 * op_mod 0/1 general max/cur, 4/5 ODP max/cur), and the verbs view the driver derives from them
 * (spec/mlx5.md "Device capabilities"; API.md `queryDevice`).
 *
 * "max" is what the device can do; "cur" is what is enabled. They differ only where an
 * override turns a feature off (ODP): the hardware still reports it in max, as a ConnectX with
 * ODP disabled by the driver would.
 *
 * Sources of the values (each field says which):
 * - spec/mlx5.md: log_max_mkey 24, max_fast_reg_page_list_len = 1 << log_max_klm_list_size with
 *   2^16, max_mr = max_mw = 2^24, memory windows type 1 and 2B (2A is not offered by mlx5),
 *   SG_GAPS_REG, per-transport ODP caps and the legacy caps word.
 * - Linux drivers/infiniband/hw/mlx5/main.c mlx5_ib_query_device: max_mr = 1 << log_max_mkey,
 *   max_fast_reg_page_list_len = 1 << log_max_klm_list_size, max_cqe = (1 << log_max_cq_sz) - 1,
 *   max send SGEs = (min(max_wqe_sz_sq, 512) - ctrl 16 - raddr 16) / 16.
 * - `ibv_devinfo -vv` of a ConnectX-6 (vendor_part_id 4123, fw 20.37.1700, pasted in a public
 *   UCX bug report; a ConnectX-6 Dx, part 4125, fw 22.36.1010, shows the same limits): max_qp 131072, max_qp_wr 32768, max_sge 30, max_cq 16777216, max_cqe
 *   4194303, max_mr 16777216, max_pd 8388608, max_mw 16777216; general_odp_caps ODP_SUPPORT
 *   ODP_SUPPORT_IMPLICIT; rc_odp_caps SEND RECV WRITE READ ATOMIC SRQ; uc_odp_caps none;
 *   ud_odp_caps SEND. The log_max_* fields below are the logs of those numbers.
 * - Linux drivers/infiniband/hw/mlx5/odp.c mlx5_ib_internal_fill_odp_caps: general SUPPORT when
 *   the `pg` cap is set; IMPLICIT only with fixed_buffer_size, null_mkey and
 *   umr_extended_translation_offset; uc caps are never filled (mlx5 has no UC ODP).
 */
import { DEFAULT_HCA_CONFIG, type HcaConfig, type UmrFence } from '../config.ts';
import { HcaCapOpMod } from '../formats/constants.ts';

/** A per-transport ODP capability (ib_odp_transport_cap_bits; API.md `odpCaps`). */
export type OdpTransportCap = 'SEND' | 'RECV' | 'WRITE' | 'READ' | 'ATOMIC' | 'SRQ_RECV';
/** A general ODP capability (ib_odp_general_cap_bits). */
export type OdpGeneralCap = 'SUPPORT' | 'IMPLICIT';
/** A verbs device capability flag (API.md `deviceCapFlags`). */
export type DeviceCap =
  | 'MEM_MGT_EXTENSIONS'
  | 'MEM_WINDOW'
  | 'MEM_WINDOW_TYPE_2A'
  | 'MEM_WINDOW_TYPE_2B'
  | 'SG_GAPS_REG'
  | 'ON_DEMAND_PAGING';

/** The general device capabilities (QUERY_HCA_CAP op_mod 0/1), hardware names in camelCase. */
export interface HcaGeneralCaps {
  /** log2 of the mkey indices (spec/mlx5.md "Keys": 24). */
  readonly logMaxMkey: number;
  /** log2 of the longest KLM/MTT list of a fast registration (spec/mlx5.md: 2^16). */
  readonly logMaxKlmListSize: number;
  /**
   * log2 of the most translation entries one mkey may reserve (CREATE_MKEY's xlt capacity, any
   * access mode; KLM lists are bounded tighter by logMaxKlmListSize). Model-private: mlx5_ifc.h
   * has no field bounding an MTT or KSM table (log_max_klm_list_size, mlx5_ifc.h:1668, bounds KLM
   * lists, main.c:1102; log_max_mrw_sz, mlx5_ifc.h:1662, a region's bytes, which 2^32 MTT entries
   * of 4 KiB, 2^44 bytes, stay under for any value that lets the implicit ODP parent span 2^47).
   * 24: a table can map all 64 GiB of the default host memory in 4 KiB pages (128 MiB of ICM);
   * beyond it the firmware answers EXCEED_LIM rather than ask the driver for gigabytes of ICM.
   */
  readonly logMaxXlt: number;
  /** log2 of the PDs (ConnectX-6 max_pd 8388608 = 2^23). */
  readonly logMaxPd: number;
  /** log2 of the QPs (ConnectX-6 max_qp 131072 = 2^17). */
  readonly logMaxQp: number;
  /** log2 of the WQEs of one work queue (ConnectX-6 max_qp_wr 32768 = 2^15). */
  readonly logMaxQpSz: number;
  /** log2 of the CQs (ConnectX-6 max_cq 16777216 = 2^24). */
  readonly logMaxCq: number;
  /** log2 of the CQEs of one CQ (ConnectX-6 max_cqe 4194303 = 2^22 - 1). */
  readonly logMaxCqSz: number;
  /** log2 of the EQs: 8, since the EQ doorbell carries the eqn in 8 bits (spec/mlx5.md "EQ"; assumed). */
  readonly logMaxEq: number;
  /** log2 of the EQEs of one EQ (assumed: as for CQs). */
  readonly logMaxEqSz: number;
  /** Largest send WQE in bytes (mlx5 caps it to 512 for the SGE count: main.c). */
  readonly maxWqeSzSq: number;
  /** Deepest nesting of indirect (KLM) mkeys (HcaConfig.klmMaxIndirection). */
  readonly maxIndirection: number;
  /** UMR: fast registration and invalidation by work request (FRWR). */
  readonly umr: boolean;
  /** Memory windows of type 1. */
  readonly memWindowType1: boolean;
  /** Memory windows of type 2A (QPN-only binding): false on mlx5 (spec/mlx5.md). */
  readonly memWindowType2A: boolean;
  /** Memory windows of type 2B. */
  readonly memWindowType2B: boolean;
  /** KLM fast registration of gappy SG lists (IB_MR_TYPE_SG_GAPS). */
  readonly sgGaps: boolean;
  /** On-demand paging (the `pg` cap bit). */
  readonly pg: boolean;
  /** MRs: 1 << logMaxMkey. */
  readonly maxMr: number;
  /** MWs: 1 << logMaxMkey (windows are mkeys too). */
  readonly maxMw: number;
  /** 1 << logMaxKlmListSize. */
  readonly maxFastRegPageListLen: number;
  /** 1 << logMaxXlt: the most translation entries one mkey may reserve. */
  readonly maxXltEntries: number;
  /** 1 << logMaxPd. */
  readonly maxPd: number;
  /** 1 << logMaxQp. */
  readonly maxQp: number;
  /** 1 << logMaxQpSz. */
  readonly maxQpWr: number;
  /** 1 << logMaxCq. */
  readonly maxCq: number;
  /** (1 << logMaxCqSz) - 1, as mlx5_ib_query_device reports it. */
  readonly maxCqe: number;
  /** 1 << logMaxEq. */
  readonly maxEq: number;
  /** Send SGEs per WQE: (maxWqeSzSq - 16 - 16) / 16. */
  readonly maxSge: number;
  /**
   * umr_fence (mlx5_ifc.h cmd_hca_cap, 2 bits): MLX5_CAP_UMR_FENCE_STRONG 0, SMALL 1, NONE 2
   * (HcaConfig.umrFence). mlx5 main.c mlx5_get_umr_fence maps it to the REG_MR's fence mode.
   */
  readonly umrFence: number;
  /** max_sgl_for_optimized_performance (mlx5_ifc.h, 8 bits; HcaConfig.maxSglForOptimizedPerformance). */
  readonly maxSglForOptimizedPerformance: number;
}

/** The ODP capabilities (QUERY_HCA_CAP op_mod 4/5) in the verbs shape of API.md `odpCaps`. */
export interface HcaOdpCaps {
  readonly generalCaps: ReadonlySet<OdpGeneralCap>;
  readonly rcOdpCaps: ReadonlySet<OdpTransportCap>;
  readonly ucOdpCaps: ReadonlySet<OdpTransportCap>;
  readonly udOdpCaps: ReadonlySet<OdpTransportCap>;
}

/** Everything QUERY_HCA_CAP answers, max and cur. */
export interface HcaCaps {
  readonly general: { readonly max: HcaGeneralCaps; readonly cur: HcaGeneralCaps };
  readonly odp: { readonly max: HcaOdpCaps; readonly cur: HcaOdpCaps };
}

/** Overrides of the reported capabilities (no config fields: an argument of hcaCaps / Cmdif). */
export interface HcaCapsOverride {
  /** ODP enabled (default true). False: the cur caps report no ODP at all; max still does. */
  odp?: boolean;
  /**
   * Report implicit ODP (default true, as ConnectX-5 and later do: see the ConnectX-6 output
   * above). Off: regMr(0, SIZE_MAX, ON_DEMAND) is EOPNOTSUPP.
   */
  odpImplicit?: boolean;
  /**
   * The RC ODP capabilities the cur caps report (default all of SEND RECV WRITE READ ATOMIC
   * SRQ_RECV). The driver's fault handler resumes with ERROR a fault of an operation whose bit
   * is off (mlx5 odp.c checks the transport caps per opcode), so it completes with an access error.
   */
  rcOdpCaps?: readonly OdpTransportCap[];
}

/** The value of one QUERY_HCA_CAP op_mod. */
export type HcaCapQuery =
  | { readonly group: 'general'; readonly caps: HcaGeneralCaps }
  | { readonly group: 'odp'; readonly caps: HcaOdpCaps };

/** The verbs view of the capabilities (API.md `queryDevice`). */
export interface DeviceAttr {
  readonly deviceCapFlags: ReadonlySet<DeviceCap>;
  readonly maxMr: number;
  readonly maxMw: number;
  readonly maxFastRegPageListLen: number;
  readonly maxQp: number;
  readonly maxQpWr: number;
  readonly maxCq: number;
  readonly maxCqe: number;
  readonly maxPd: number;
  readonly maxSge: number;
  /** SGEs of a READ past which rdma_rw registers its destination (mlx5 main.c: max_sgl_for_optimized_performance); 0: never. */
  readonly maxSglRd: number;
  readonly odpCaps: HcaOdpCaps;
}

const LOG_MAX_MKEY = 24; // spec/mlx5.md "Keys"
/**
 * mkey indices the firmware keeps (0 unused, 1 the reserved lkey 0x100): CREATE_MKEY hands out
 * index 2 and up (cmdif.ts FIRST_MKEY_INDEX).
 */
export const RESERVED_MKEY_INDICES = 2;
const LOG_MAX_KLM_LIST_SIZE = 16; // spec/mlx5.md "Device capabilities": take 2^16
const LOG_MAX_XLT = 24; // model choice (HcaGeneralCaps.logMaxXlt): 2^24 4 KiB pages = 64 GiB, the default host memory
const LOG_MAX_PD = 23; // ConnectX-6 max_pd 8388608
const LOG_MAX_QP = 17; // ConnectX-6 max_qp 131072
const LOG_MAX_QP_SZ = 15; // ConnectX-6 max_qp_wr 32768
const LOG_MAX_CQ = 24; // ConnectX-6 max_cq 16777216
const LOG_MAX_CQ_SZ = 22; // ConnectX-6 max_cqe 4194303 = 2^22 - 1
const LOG_MAX_EQ = 8; // eqn is 8 bits in the EQ doorbell (spec/mlx5.md "EQ and EQE"); assumed
const LOG_MAX_EQ_SZ = 22; // assumed, as CQs
const MAX_WQE_SZ_SQ = 512; // mlx5_ib_query_device: min(max_wqe_sz_sq, 512)
const CTRL_SEG = 16; // spec/mlx5.md "Send WQE": control segment
const RADDR_SEG = 16; // remote address segment
const DATA_SEG = 16; // data segment

/** MLX5_CAP_UMR_FENCE_* (include/linux/mlx5/mlx5_ifc.h:1543-1545). */
export const UMR_FENCE_CAP: { readonly [K in UmrFence]: number } = { STRONG: 0, SMALL: 1, NONE: 2 };

function generalCaps(maxIndirection: number, pg: boolean, mkeyEntries: number, umrFence: UmrFence, maxSgl: number): HcaGeneralCaps {
  // what the device can really hold: the ICM mkey table less the reserved indices (the
  // advertised count is the truth a caller may plan on; log_max_mkey stays the index width)
  const mkeys = Math.max(0, Math.min(2 ** LOG_MAX_MKEY, mkeyEntries) - RESERVED_MKEY_INDICES);
  return Object.freeze({
    logMaxMkey: LOG_MAX_MKEY,
    logMaxKlmListSize: LOG_MAX_KLM_LIST_SIZE,
    logMaxXlt: LOG_MAX_XLT,
    logMaxPd: LOG_MAX_PD,
    logMaxQp: LOG_MAX_QP,
    logMaxQpSz: LOG_MAX_QP_SZ,
    logMaxCq: LOG_MAX_CQ,
    logMaxCqSz: LOG_MAX_CQ_SZ,
    logMaxEq: LOG_MAX_EQ,
    logMaxEqSz: LOG_MAX_EQ_SZ,
    maxWqeSzSq: MAX_WQE_SZ_SQ,
    maxIndirection,
    umr: true,
    memWindowType1: true,
    memWindowType2A: false,
    memWindowType2B: true,
    sgGaps: true,
    pg,
    maxMr: mkeys,
    maxMw: mkeys,
    maxFastRegPageListLen: 2 ** LOG_MAX_KLM_LIST_SIZE,
    maxXltEntries: 2 ** LOG_MAX_XLT,
    maxPd: 2 ** LOG_MAX_PD,
    maxQp: 2 ** LOG_MAX_QP,
    maxQpWr: 2 ** LOG_MAX_QP_SZ,
    maxCq: 2 ** LOG_MAX_CQ,
    maxCqe: 2 ** LOG_MAX_CQ_SZ - 1,
    maxEq: 2 ** LOG_MAX_EQ,
    maxSge: (MAX_WQE_SZ_SQ - CTRL_SEG - RADDR_SEG) / DATA_SEG,
    umrFence: UMR_FENCE_CAP[umrFence],
    maxSglForOptimizedPerformance: maxSgl,
  });
}

const RC_ODP_ALL: readonly OdpTransportCap[] = ['SEND', 'RECV', 'WRITE', 'READ', 'ATOMIC', 'SRQ_RECV'];

function odpCaps(on: boolean, implicit: boolean, rc: readonly OdpTransportCap[] = RC_ODP_ALL): HcaOdpCaps {
  if (!on) {
    return Object.freeze({
      generalCaps: new Set<OdpGeneralCap>(),
      rcOdpCaps: new Set<OdpTransportCap>(),
      ucOdpCaps: new Set<OdpTransportCap>(),
      udOdpCaps: new Set<OdpTransportCap>(),
    });
  }
  const general: OdpGeneralCap[] = implicit ? ['SUPPORT', 'IMPLICIT'] : ['SUPPORT'];
  return Object.freeze({
    generalCaps: new Set(general),
    // ConnectX-6 rc_odp_caps: SEND RECV WRITE READ ATOMIC SRQ (ibv_devinfo above)
    rcOdpCaps: new Set<OdpTransportCap>(rc),
    // mlx5 fills no uc caps (odp.c); ConnectX-6 prints "NO SUPPORT"
    ucOdpCaps: new Set<OdpTransportCap>(),
    // ConnectX-6 ud_odp_caps: SEND
    udOdpCaps: new Set<OdpTransportCap>(['SEND']),
  });
}

/** The capabilities of an HCA with configuration `cfg`, with `override` applied. */
export function hcaCaps(
  cfg: Pick<HcaConfig, 'klmMaxIndirection'> & Partial<Pick<HcaConfig, 'icmMkeyEntries' | 'umrFence' | 'maxSglForOptimizedPerformance'>>,
  override: HcaCapsOverride = {},
): HcaCaps {
  const odpOn = override.odp ?? true;
  const implicit = override.odpImplicit ?? true;
  const mkeys = cfg.icmMkeyEntries ?? 2 ** LOG_MAX_MKEY;
  const fence = cfg.umrFence ?? DEFAULT_HCA_CONFIG.umrFence;
  const sgl = cfg.maxSglForOptimizedPerformance ?? DEFAULT_HCA_CONFIG.maxSglForOptimizedPerformance;
  return Object.freeze({
    general: Object.freeze({ max: generalCaps(cfg.klmMaxIndirection, true, mkeys, fence, sgl), cur: generalCaps(cfg.klmMaxIndirection, odpOn, mkeys, fence, sgl) }),
    odp: Object.freeze({ max: odpCaps(true, implicit), cur: odpCaps(odpOn, implicit, override.rcOdpCaps) }),
  });
}

/** The answer to QUERY_HCA_CAP with `opMod` (HcaCapOpMod), or null for an op_mod not modelled. */
export function queryHcaCap(caps: HcaCaps, opMod: number): HcaCapQuery | null {
  switch (opMod) {
    case HcaCapOpMod.GENERAL_MAX:
      return { group: 'general', caps: caps.general.max };
    case HcaCapOpMod.GENERAL_CUR:
      return { group: 'general', caps: caps.general.cur };
    case HcaCapOpMod.ODP_MAX:
      return { group: 'odp', caps: caps.odp.max };
    case HcaCapOpMod.ODP_CUR:
      return { group: 'odp', caps: caps.odp.cur };
    default:
      return null;
  }
}

/**
 * What ibv_query_device reports for the current caps, as mlx5_ib_query_device derives it:
 * MEM_MGT_EXTENSIONS with UMR, MEM_WINDOW with type-1 windows, MEM_WINDOW_TYPE_2B (never 2A),
 * SG_GAPS_REG with KLM fast registration, ON_DEMAND_PAGING when ODP general caps have SUPPORT.
 */
export function deviceAttrOf(general: HcaGeneralCaps, odp: HcaOdpCaps): DeviceAttr {
  const flags = new Set<DeviceCap>();
  if (general.umr) flags.add('MEM_MGT_EXTENSIONS');
  if (general.memWindowType1) flags.add('MEM_WINDOW');
  if (general.memWindowType2A) flags.add('MEM_WINDOW_TYPE_2A');
  if (general.memWindowType2B) flags.add('MEM_WINDOW_TYPE_2B');
  if (general.sgGaps) flags.add('SG_GAPS_REG');
  if (odp.generalCaps.has('SUPPORT')) flags.add('ON_DEMAND_PAGING');
  return Object.freeze({
    deviceCapFlags: flags,
    maxMr: general.maxMr,
    maxMw: general.maxMw,
    maxFastRegPageListLen: general.maxFastRegPageListLen,
    maxQp: general.maxQp,
    maxQpWr: general.maxQpWr,
    maxCq: general.maxCq,
    maxCqe: general.maxCqe,
    maxPd: general.maxPd,
    maxSge: general.maxSge,
    maxSglRd: general.maxSglForOptimizedPerformance,
    odpCaps: odp,
  });
}

// ---------------------------------------------------------------------------------------------
// The legacy ODP caps word and block
// ---------------------------------------------------------------------------------------------

/**
 * Bit of each capability in a per-transport ODP caps word (u32, big-endian in the block).
 * SEND 31, RECV 30, WRITE 29, READ 28 are the legacy word of spec/mlx5.md (kernel
 * include/linux/mlx5/device.h, enum mlx5_odp_transport_cap_bits). ATOMIC 27 and SRQ_RECV 26
 * follow from mlx5_ifc.h struct mlx5_ifc_odp_per_transport_service_cap_bits, which lays out
 * send, receive, write, read, atomic, srq_receive from the most significant bit.
 */
export const OdpTransportCapBit: Readonly<Record<OdpTransportCap, number>> = Object.freeze({
  SEND: 31,
  RECV: 30,
  WRITE: 29,
  READ: 28,
  ATOMIC: 27,
  SRQ_RECV: 26,
});

const TRANSPORT_CAPS = Object.keys(OdpTransportCapBit) as OdpTransportCap[];

/** The u32 caps word of a set of per-transport ODP capabilities. */
export function encodeOdpTransportCaps(caps: Iterable<OdpTransportCap>): number {
  let w = 0;
  for (const c of caps) {
    const bit = OdpTransportCapBit[c];
    if (bit === undefined) throw new RangeError(`encodeOdpTransportCaps: unknown capability '${String(c)}'`);
    w |= 1 << bit;
  }
  return w >>> 0;
}

/** The per-transport ODP capabilities of a u32 caps word (unknown bits ignored, as reserved). */
export function decodeOdpTransportCaps(word: number): Set<OdpTransportCap> {
  const out = new Set<OdpTransportCap>();
  for (const c of TRANSPORT_CAPS) if ((word >>> OdpTransportCapBit[c]) & 1) out.add(c);
  return out;
}

/**
 * Bytes of the legacy ODP caps block (kernel device.h struct mlx5_odp_caps): 16 reserved bytes,
 * then rc_odp_caps u32 @0x10, uc_odp_caps u32 @0x14, ud_odp_caps u32 @0x18, 0xe4 reserved.
 */
export const ODP_CAPS_BLOCK_SIZE = 0x100;
const RC_ODP_CAPS_OFF = 0x10;
const UC_ODP_CAPS_OFF = 0x14;
const UD_ODP_CAPS_OFF = 0x18;

/** Writes the per-transport caps of `caps` as the legacy 256-byte block at `off` (reserved bytes zero). */
export function encodeOdpCapsBlock(view: DataView, off: number, caps: HcaOdpCaps): void {
  for (let i = 0; i < ODP_CAPS_BLOCK_SIZE; i++) view.setUint8(off + i, 0);
  view.setUint32(off + RC_ODP_CAPS_OFF, encodeOdpTransportCaps(caps.rcOdpCaps));
  view.setUint32(off + UC_ODP_CAPS_OFF, encodeOdpTransportCaps(caps.ucOdpCaps));
  view.setUint32(off + UD_ODP_CAPS_OFF, encodeOdpTransportCaps(caps.udOdpCaps));
}

/**
 * Reads the legacy 256-byte block at `off`. The block has no general caps (the legacy driver
 * takes ODP SUPPORT from the general caps' `pg` bit), so `generalCaps` is SUPPORT when `pg`.
 */
export function decodeOdpCapsBlock(view: DataView, off: number, pg: boolean): HcaOdpCaps {
  return {
    generalCaps: new Set<OdpGeneralCap>(pg ? ['SUPPORT'] : []),
    rcOdpCaps: decodeOdpTransportCaps(view.getUint32(off + RC_ODP_CAPS_OFF)),
    ucOdpCaps: decodeOdpTransportCaps(view.getUint32(off + UC_ODP_CAPS_OFF)),
    udOdpCaps: decodeOdpTransportCaps(view.getUint32(off + UD_ODP_CAPS_OFF)),
  };
}
