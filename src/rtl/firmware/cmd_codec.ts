/**
 * Commands as bytes: the input a driver writes into the command queue (inline bytes and
 * mailboxes) and the output the firmware writes back, for every command of `CmdInputs`, in the
 * layouts of mlx5_ifc.h (src/rtl/formats/cmd_*.ts). This file maps the model's command objects
 * onto those structures and back; the signatures are the contract between the command queue
 * (driver/core/cmd.ts, firmware/cmdif.ts) and the layouts.
 *
 * Decoding is the firmware's reading of an input: an opcode it does not know is BAD_OP, an input
 * shorter than the command's structure BAD_INPUT_LEN, a value the structure cannot mean (an mtu
 * code past 4096, a service type not modelled, a u64 past 2^53) BAD_PARAM; the semantic checks
 * (a PD that exists, a size within the caps) stay with Cmdif, which executes what is decoded.
 * Nothing here throws on garbage input.
 *
 * Where the model's command has an optional field whose absence keeps a QP's value, the bytes
 * say so as mlx5 does: RTR2RTS's timeout, retry counts and max_rd_atomic are given only with their
 * opt_param_mask bit (qp.h MLX5_QP_OPTPAR_*), INIT2RTR's mtu only when qpc.mtu is not 0. Other
 * optional fields decode to the default Cmdif would use (qpn 0xffffff, log_page_size 12, ...).
 * A list given empty (CQ/QP pas) decodes as not given.
 */
import { CmdOpcode, HcaCapOpMod, ManagePagesOpMod, MKEY_QPN_NONE, makeKey } from '../formats/constants.ts';
import { decodeIfc, encodeIfc, readPas, setIfc, writePas, IN_HDR, PAS_ENTRY_BYTES, type IfcLayout, type IfcValues } from '../formats/cmd_hdr.ts';
import { ENABLE_HCA_IN, ENABLE_HCA_OUT, DISABLE_HCA_IN, DISABLE_HCA_OUT, INIT_HCA_IN, INIT_HCA_OUT, TEARDOWN_HCA_IN, TEARDOWN_HCA_OUT } from '../formats/cmd_init.ts';
import { MANAGE_PAGES_IN, MANAGE_PAGES_OUT, QUERY_PAGES_IN, QUERY_PAGES_OUT } from '../formats/cmd_pages.ts';
import { CMD_HCA_CAP, ODP_CAP, QUERY_HCA_CAP_IN, QUERY_HCA_CAP_OUT } from '../formats/cmd_hca_cap.ts';
import { ALLOC_PD_IN, ALLOC_PD_OUT, DEALLOC_PD_IN, DEALLOC_PD_OUT } from '../formats/cmd_pd.ts';
import {
  CREATE_MKEY_IN,
  CREATE_MKEY_OUT,
  DESTROY_MKEY_IN,
  DESTROY_MKEY_OUT,
  PAGE_FAULT_RESUME_OUT,
  QUERY_MKEY_IN,
  QUERY_MKEY_OUT,
  QUERY_SPECIAL_CONTEXTS_IN,
  QUERY_SPECIAL_CONTEXTS_OUT,
} from '../formats/cmd_mkey.ts';
import { CREATE_EQ_IN, CREATE_EQ_OUT, DESTROY_EQ_IN, DESTROY_EQ_OUT, EQC } from '../formats/cmd_eq.ts';
import { CQC, CREATE_CQ_IN, CREATE_CQ_OUT, DESTROY_CQ_IN, DESTROY_CQ_OUT } from '../formats/cmd_cq.ts';
import {
  CREATE_QP_IN,
  CREATE_QP_OUT,
  DESTROY_QP_IN,
  DESTROY_QP_OUT,
  INIT2RTR_QP_IN,
  INIT2RTR_QP_OUT,
  QPC,
  QP_2ERR_IN,
  QP_2ERR_OUT,
  QP_2RST_IN,
  QP_2RST_OUT,
  QUERY_QP_IN,
  QUERY_QP_OUT,
  QpOptPar,
  QpRqType,
  QpcMtu,
  QpcSt,
  QpcState,
  RST2INIT_QP_IN,
  RST2INIT_QP_OUT,
  RTR2RTS_QP_IN,
  RTR2RTS_QP_OUT,
} from '../formats/cmd_qp.ts';
import { decodeMkeyContext, encodeMkeyContext } from '../formats/mkey_context.ts';
import { decodePageFaultResumeIn, encodePageFaultResumeIn, PAGE_FAULT_RESUME_IN_SIZE } from '../formats/page_fault_resume.ts';
import { decodeKlm, encodeKlm, type Klm } from '../formats/klm.ts';
import { KLM_SIZE, MTT_SIZE, OCTOWORD_SIZE } from '../formats/constants.ts';
import { hex, setBits } from '../formats/field.ts';
import type { Mtu } from '../config.ts';
import type { QueuePages } from '../memory/pas.ts';
import type { HcaGeneralCaps, HcaOdpCaps, OdpGeneralCap, OdpTransportCap } from './hca_caps.ts';
import {
  CmdError,
  type Cmd,
  type CmdInputs,
  type CmdName,
  type CmdOf,
  type CmdOutputs,
  type CmdStatusName,
  type QpContext,
  type QpState,
  type QpTransport,
} from './cmd_types.ts';

/** Bytes of the header every command input and output starts with (mlx5_ifc `*_in`/`*_out`). */
export const CMD_HDR_BYTES = 16;

/**
 * Page-list entries QUERY_QP's output has room for (cmdOutputLength): the firmware writes as
 * many as fit, as it does in mlx5's fixed-size query_qp_out. 512 pages of 4 KiB hold a send
 * queue of 2^15 WQEBBs (the model's log_max_qp_sz).
 */
export const QUERY_QP_PAS_ROOM = 512;

/** A decoded input: the command, or the status the firmware answers a malformed one with. */
export type DecodedCmdInput = { readonly ok: true; readonly cmd: Cmd } | { readonly ok: false; readonly error: CmdError };

/** A malformed input, thrown inside a decoder and returned as a CmdError by decodeCmdInput. */
class BadInput extends Error {
  constructor(
    readonly status: CmdStatusName,
    readonly rule: string,
    detail: string,
  ) {
    super(detail);
  }
}

const NAME_OF: ReadonlyMap<number, CmdName> = new Map(Object.entries(CmdOpcode).map(([k, v]) => [v, k as CmdName]));

const flag = (b: boolean | undefined): number => (b === true ? 1 : 0);

/** log2 of `n`, a power of two; a RangeError naming `name` otherwise. */
function log2Exact(name: string, n: number): number {
  const l = Math.log2(n);
  if (!Number.isInteger(n) || n < 1 || !Number.isInteger(l) || 2 ** l !== n) throw new RangeError(`${name} ${String(n)} is not a power of two (the structure holds its log2)`);
  return l;
}

/** Bytes an encode with `scratch` lends the next `buffer` call (null: allocate). */
let lent: Uint8Array | null = null;

/**
 * The views `buffer` last made of each scratch array, with their length: a sender encodes the
 * same command (a registration's CREATE_MKEY) again and again, and a view and a DataView per
 * encode cost more than the encode's own stores. The views stay valid as long as the scratch.
 */
const LENT_VIEWS = new WeakMap<Uint8Array, { readonly n: number; readonly b: Uint8Array; readonly v: DataView }>();

function buffer(n: number): { b: Uint8Array; v: DataView } {
  const a = lent;
  if (a !== null && n <= a.length) {
    lent = null;
    a.fill(0, 0, n);
    let r = LENT_VIEWS.get(a);
    if (r === undefined || r.n !== n) {
      r = { n, b: a.subarray(0, n), v: new DataView(a.buffer, a.byteOffset, n) };
      LENT_VIEWS.set(a, r);
    }
    return { b: r.b, v: r.v };
  }
  const b = new Uint8Array(n);
  return { b, v: new DataView(b.buffer) };
}

/** The input of `l` with its header: a buffer of `l.bytes + extra` bytes. */
function input(op: CmdName, l: IfcLayout, opMod: number, fields: Record<string, number>, extra = 0): { b: Uint8Array; v: DataView } {
  const r = buffer(l.bytes + extra);
  // the fields, then the header (as one spread object wrote them, without copying the fields)
  encodeIfc(r.v, 0, l, fields);
  // the header's two fields (every input layout has them: IN_HDR), without an object for them
  const f = (l as IfcLayout<keyof typeof IN_HDR>).fields;
  setBits(r.v, 0, f.opcode.bit, f.opcode.width, CmdOpcode[op], f.opcode.name);
  setBits(r.v, 0, f.op_mod.bit, f.op_mod.width, opMod, f.op_mod.name);
  return r;
}

/** The output of `l` (status OK). */
function output(l: IfcLayout, fields: Record<string, number>, extra = 0): { b: Uint8Array; v: DataView } {
  const r = buffer(l.bytes + extra);
  encodeIfc(r.v, 0, l, fields);
  return r;
}

/** Reads `l` at 0, once `len` bytes cover it (else BAD_INPUT_LEN). */
function need<K extends string>(v: DataView, l: IfcLayout<K>): IfcValues<K> {
  if (v.byteLength < l.bytes) throw new BadInput('BAD_INPUT_LEN', 'input_len', `${l.ifc} needs ${l.bytes} bytes; the input has ${v.byteLength}`);
  return decodeIfc(v, 0, l);
}

/** The `pas[]` entries after `at` that the input's length holds, or undefined for none. */
function trailingPas(v: DataView, at: number, field: string): number[] | undefined {
  const n = Math.floor(Math.max(0, v.byteLength - at) / PAS_ENTRY_BYTES);
  return n === 0 ? undefined : readPas(v, at, n, field);
}

// ---------------------------------------------------------------------------------------------
// QP context
// ---------------------------------------------------------------------------------------------

const MTU_CODE: Readonly<Record<Mtu, number>> = { 256: QpcMtu['256_BYTES'], 512: QpcMtu['512_BYTES'], 1024: QpcMtu['1K_BYTES'], 2048: QpcMtu['2K_BYTES'], 4096: QpcMtu['4K_BYTES'] };
const MTU_OF: ReadonlyMap<number, Mtu> = new Map(Object.entries(MTU_CODE).map(([m, c]) => [c, Number(m) as Mtu]));
const STATE_CODE: Readonly<Record<QpState, number>> = { RESET: QpcState.RST, INIT: QpcState.INIT, RTR: QpcState.RTR, RTS: QpcState.RTS, ERR: QpcState.ERR };
const STATE_OF: ReadonlyMap<number, QpState> = new Map(Object.entries(STATE_CODE).map(([s, c]) => [c, s as QpState]));
const ST_CODE: Readonly<Record<QpTransport, number>> = { RC: QpcSt.RC, UC: QpcSt.UC, UD: QpcSt.UD };

function mtuCode(m: Mtu): number {
  const c = MTU_CODE[m];
  if (c === undefined) throw new RangeError(`mtu ${String(m)} is not an IB MTU (256..4096)`);
  return c;
}

function mtuOf(code: number): Mtu | undefined {
  if (code === 0) return undefined;
  const m = MTU_OF.get(code);
  if (m === undefined) throw new BadInput('BAD_PARAM', 'mtu', `qpc.mtu ${code} is not an IB MTU code (1..5)`);
  return m;
}

/** qpc.st of a transport, REG_UMR for the driver's UMR QP (an RC QP). */
function stCode(transport: QpTransport, umr: boolean | undefined): number {
  const st = ST_CODE[transport];
  if (st === undefined) throw new RangeError(`transport ${String(transport)} is not RC, UC or UD`);
  if (umr === true && transport !== 'RC') throw new RangeError('a UMR QP is RC (qpc.st REG_UMR)');
  return umr === true ? QpcSt.REG_UMR : st;
}

function transportOf(st: number): { transport: QpTransport; umr: boolean } {
  if (st === QpcSt.REG_UMR) return { transport: 'RC', umr: true };
  for (const [t, c] of Object.entries(ST_CODE)) if (c === st) return { transport: t as QpTransport, umr: false };
  throw new BadInput('BAD_PARAM', 'st', `qpc.st ${hex(st)} is not a service type modelled (RC, UC, UD, REG_UMR)`);
}

/** IB access flags (LOCAL_WRITE 1, REMOTE_WRITE 2, REMOTE_READ 4, REMOTE_ATOMIC 8) as qpc bits. */
function qpAccess(access: number): { model_local_write: number; rwe: number; rre: number; rae: number } {
  if (!Number.isInteger(access) || access < 0 || access > 0xf) throw new RangeError(`access flags ${String(access)} are not IB access bits`);
  return { model_local_write: access & 1, rwe: (access >>> 1) & 1, rre: (access >>> 2) & 1, rae: (access >>> 3) & 1 };
}

function qpAccessOf(q: IfcValues<keyof typeof QPC.fields>): number {
  return q.model_local_write | (q.rwe << 1) | (q.rre << 2) | (q.rae << 3);
}

/** The qpc sizes: log_sq_size, and log_rq_size with rq_type (ZERO_LEN_RQ for no receive queue). */
function qpSizes(sqSize: number, rqSize: number): { log_sq_size: number; log_rq_size: number; rq_type: number } {
  return {
    log_sq_size: log2Exact('sqSize', sqSize),
    log_rq_size: rqSize === 0 ? 0 : log2Exact('rqSize', rqSize),
    rq_type: rqSize === 0 ? QpRqType.ZERO_LEN_RQ : QpRqType.NON_ZERO_RQ,
  };
}

function rqSizeOf(q: IfcValues<keyof typeof QPC.fields>): number {
  if (q.rq_type === QpRqType.ZERO_LEN_RQ) return 0;
  if (q.rq_type !== QpRqType.NON_ZERO_RQ) throw new BadInput('BAD_PARAM', 'rq_type', `qpc.rq_type ${q.rq_type} is not modelled (a receive queue, or MLX5_ZERO_LEN_RQ)`);
  return 2 ** q.log_rq_size;
}

/** A modify-QP input: qpn, opt_param_mask and the qpc fields. */
function modifyIn(op: CmdName, l: IfcLayout, qpn: number, optParam: number, qpc: Record<string, number>): Uint8Array {
  const { b, v } = input(op, l, 0, { qpn, opt_param_mask: optParam });
  setIfc(v, l.at.qpc!, QPC, qpc);
  return b;
}

function qpcAt(v: DataView, l: IfcLayout): IfcValues<keyof typeof QPC.fields> {
  return decodeIfc(v, l.at.qpc!, QPC);
}

// ---------------------------------------------------------------------------------------------
// CREATE_MKEY
// ---------------------------------------------------------------------------------------------

function encodeCreateMkey(c: CmdOf<'CREATE_MKEY'>): Uint8Array {
  if (c.mtt !== undefined && c.klm !== undefined) throw new RangeError('CREATE_MKEY: an MTT list and a KLM list (klm_pas_mtt holds one)');
  if (!Number.isInteger(c.access) || c.access < 0 || c.access > 0xf) throw new RangeError(`access ${String(c.access)} has bits other than the IB access flags`);
  const count = c.mtt?.length ?? c.klm?.length ?? 0;
  const listBytes = c.mtt !== undefined ? count * MTT_SIZE : count * KLM_SIZE;
  const actual = Math.ceil(listBytes / OCTOWORD_SIZE);
  const perOct = c.accessMode === 1 ? OCTOWORD_SIZE / MTT_SIZE : 1; // MkcAccessMode.MTT: two MTTs an octoword
  const xlt = Math.ceil(Math.max(count, c.xltCapacity ?? 0) / perOct);
  const { b, v } = input('CREATE_MKEY', CREATE_MKEY_IN, 0, {
    pg_access: flag(c.pgAccess),
    translations_octword_actual_size: actual,
    model_kind: c.kind ?? 0,
    model_mtt_given: flag(c.mtt !== undefined),
    model_klm_given: flag(c.klm !== undefined),
    model_xlt_capacity: c.xltCapacity ?? 0,
    model_xlt_count: count,
  }, actual * OCTOWORD_SIZE);
  encodeMkeyContext(v, CREATE_MKEY_IN.at.memory_key_mkey_entry!, {
    free: c.free === true,
    pcieControl: 0,
    umrEn: c.umrEn === true,
    atomic: (c.access & 8) !== 0,
    remoteWrite: (c.access & 2) !== 0,
    remoteRead: (c.access & 4) !== 0,
    localWrite: (c.access & 1) !== 0,
    localRead: true, // mlx5_ib set_mkc_access_pd_addr_fields: lr is always set
    accessMode: c.accessMode,
    qpn: c.qpn ?? MKEY_QPN_NONE,
    tag: c.tag,
    len64: c.len64 === true,
    bsfEn: false,
    syncUmr: false,
    remoteInval: c.remoteInval === true,
    pd: c.pd,
    startAddr: c.start,
    len: c.length,
    bsfOctwordSize: 0,
    translationsOctwordSize: xlt,
    logPageSize: c.logPageSize ?? 12,
  });
  const list = CREATE_MKEY_IN.at.klm_pas_mtt!;
  if (c.mtt !== undefined) writePas(v, list, c.mtt, 'mtt');
  c.klm?.forEach((k, i) => encodeKlm(v, list + i * KLM_SIZE, k));
  return b;
}

function decodeCreateMkey(v: DataView): CmdInputs['CREATE_MKEY'] {
  const f = need(v, CREATE_MKEY_IN);
  const m = decodeMkeyContext(v, CREATE_MKEY_IN.at.memory_key_mkey_entry!);
  if (!m.localRead) throw new BadInput('BAD_PARAM', 'lr', 'mkc.lr 0: local read is always granted in this model (mlx5_ib sets it on every mkey)');
  if (f.model_mtt_given === 1 && f.model_klm_given === 1) throw new BadInput('BAD_PARAM', 'klm_pas_mtt', 'the input says both an MTT and a KLM list follow');
  const list = CREATE_MKEY_IN.at.klm_pas_mtt!;
  const room = f.translations_octword_actual_size * OCTOWORD_SIZE;
  if (v.byteLength < list + room) {
    throw new BadInput('BAD_INPUT_LEN', 'input_len', `translations_octword_actual_size ${f.translations_octword_actual_size} needs ${list + room} bytes; the input has ${v.byteLength}`);
  }
  // without the model's bits (a list from another driver) the list is what actual_size holds, in the mode's entries
  const mtt = f.model_mtt_given === 1 || (f.model_klm_given === 0 && room > 0 && m.accessMode === 1);
  const klm = !mtt && (f.model_klm_given === 1 || room > 0);
  const given = f.model_mtt_given === 1 || f.model_klm_given === 1;
  const count = given ? f.model_xlt_count : room / (mtt ? MTT_SIZE : KLM_SIZE);
  if (count * (mtt ? MTT_SIZE : KLM_SIZE) > room) {
    throw new BadInput('BAD_PARAM', 'translations_octword_actual_size', `${count} entries do not fit translations_octword_actual_size ${f.translations_octword_actual_size}`);
  }
  const out: CmdInputs['CREATE_MKEY'] = {
    tag: m.tag,
    accessMode: m.accessMode,
    access: (m.localWrite ? 1 : 0) | (m.remoteWrite ? 2 : 0) | (m.remoteRead ? 4 : 0) | (m.atomic ? 8 : 0),
    pd: m.pd,
    start: m.startAddr,
    length: m.len,
    free: m.free,
    umrEn: m.umrEn,
    remoteInval: m.remoteInval,
    qpn: m.qpn,
    len64: m.len64,
    logPageSize: m.logPageSize,
    pgAccess: f.pg_access === 1,
    xltCapacity: f.model_xlt_capacity,
    kind: f.model_kind,
  };
  if (mtt) out.mtt = readPas(v, list, count, 'mtt');
  else if (klm) {
    const l: Klm[] = [];
    for (let i = 0; i < count; i++) l.push(decodeKlm(v, list + i * KLM_SIZE));
    out.klm = l;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// QUERY_HCA_CAP
// ---------------------------------------------------------------------------------------------

const ODP_TRANSPORT: readonly [OdpTransportCap, string][] = [
  ['SEND', 'send'],
  ['RECV', 'receive'],
  ['WRITE', 'write'],
  ['READ', 'read'],
  ['ATOMIC', 'atomic'],
  ['SRQ_RECV', 'srq_receive'],
];
const SCHEME = 'transport_page_fault_scheme_cap';
const ODP_GROUPS = [
  ['rcOdpCaps', 'rc_odp_caps'],
  ['ucOdpCaps', 'uc_odp_caps'],
  ['udOdpCaps', 'ud_odp_caps'],
] as const;

function encodeHcaCap(out: CmdOutputs['QUERY_HCA_CAP']): Uint8Array {
  const { b, v } = output(QUERY_HCA_CAP_OUT, {});
  const at = QUERY_HCA_CAP_OUT.at.capability!;
  if (out.group === 'general') {
    const g = out.caps;
    setIfc(v, at, CMD_HCA_CAP, {
      log_max_qp_sz: g.logMaxQpSz,
      log_max_qp: g.logMaxQp,
      log_max_cq_sz: g.logMaxCqSz,
      log_max_cq: g.logMaxCq,
      log_max_eq_sz: g.logMaxEqSz,
      log_max_mkey: g.logMaxMkey,
      log_max_eq: g.logMaxEq,
      max_indirection: g.maxIndirection,
      log_max_klm_list_size: g.logMaxKlmListSize,
      umr_modify_entity_size_disabled: flag(!g.umr),
      umr_fence: g.umrFence,
      max_sgl_for_optimized_performance: g.maxSglForOptimizedPerformance,
      pg: flag(g.pg),
      imaicl: flag(g.memWindowType2B),
      max_wqe_sz_sq: g.maxWqeSzSq,
      log_max_pd: g.logMaxPd,
      model_mw_type1: flag(g.memWindowType1),
      model_mw_type2a: flag(g.memWindowType2A),
      model_sg_gaps: flag(g.sgGaps),
      model_log_max_xlt: g.logMaxXlt,
      model_max_mr: g.maxMr,
      model_max_mw: g.maxMw,
    });
  } else {
    const o = out.caps;
    const f: Record<string, number> = { model_odp_support: flag(o.generalCaps.has('SUPPORT')), model_odp_implicit: flag(o.generalCaps.has('IMPLICIT')) };
    for (const [key, ifc] of ODP_GROUPS) for (const [cap, bit] of ODP_TRANSPORT) f[`${SCHEME}.${ifc}.${bit}`] = flag(o[key].has(cap));
    setIfc(v, at, ODP_CAP, f);
  }
  return b;
}

function decodeGeneralCaps(v: DataView, at: number): HcaGeneralCaps {
  const c = decodeIfc(v, at, CMD_HCA_CAP);
  // the derived numbers as mlx5_ib_query_device derives them (hca_caps.ts)
  return {
    logMaxMkey: c.log_max_mkey,
    logMaxKlmListSize: c.log_max_klm_list_size,
    logMaxXlt: c.model_log_max_xlt,
    logMaxPd: c.log_max_pd,
    logMaxQp: c.log_max_qp,
    logMaxQpSz: c.log_max_qp_sz,
    logMaxCq: c.log_max_cq,
    logMaxCqSz: c.log_max_cq_sz,
    logMaxEq: c.log_max_eq,
    logMaxEqSz: c.log_max_eq_sz,
    maxWqeSzSq: c.max_wqe_sz_sq,
    maxIndirection: c.max_indirection,
    umr: c.umr_modify_entity_size_disabled === 0,
    umrFence: c.umr_fence,
    maxSglForOptimizedPerformance: c.max_sgl_for_optimized_performance,
    memWindowType1: c.model_mw_type1 === 1,
    memWindowType2A: c.model_mw_type2a === 1,
    memWindowType2B: c.imaicl === 1,
    sgGaps: c.model_sg_gaps === 1,
    pg: c.pg === 1,
    maxMr: c.model_max_mr,
    maxMw: c.model_max_mw,
    maxFastRegPageListLen: 2 ** c.log_max_klm_list_size,
    maxXltEntries: 2 ** c.model_log_max_xlt,
    maxPd: 2 ** c.log_max_pd,
    maxQp: 2 ** c.log_max_qp,
    maxQpWr: 2 ** c.log_max_qp_sz,
    maxCq: 2 ** c.log_max_cq,
    maxCqe: 2 ** c.log_max_cq_sz - 1,
    maxEq: 2 ** c.log_max_eq,
    maxSge: Math.max(0, Math.floor((c.max_wqe_sz_sq - 32) / 16)), // ctrl 16 + raddr 16, then 16-byte SGEs
  };
}

function decodeOdpCaps(v: DataView, at: number): HcaOdpCaps {
  const c = decodeIfc(v, at, ODP_CAP) as Record<string, number>;
  const set = (ifc: string): Set<OdpTransportCap> => new Set(ODP_TRANSPORT.filter(([, bit]) => c[`${SCHEME}.${ifc}.${bit}`] === 1).map(([cap]) => cap));
  const general: OdpGeneralCap[] = [];
  if (c.model_odp_support === 1) general.push('SUPPORT');
  if (c.model_odp_implicit === 1) general.push('IMPLICIT');
  return { generalCaps: new Set(general), rcOdpCaps: set('rc_odp_caps'), ucOdpCaps: set('uc_odp_caps'), udOdpCaps: set('ud_odp_caps') };
}

// ---------------------------------------------------------------------------------------------
// QUERY_QP
// ---------------------------------------------------------------------------------------------

function encodeQueryQp(q: QpContext): Uint8Array {
  const pas = q.sqPages.pas;
  const at = QUERY_QP_OUT.at.qp_pas_or_qpc_ext_and_pas!;
  const { b, v } = output(QUERY_QP_OUT, { model_pas_count: pas.length }, Math.max(0, at + pas.length * PAS_ENTRY_BYTES - QUERY_QP_OUT.bytes));
  // (computed in the literal's order, then written key by key: no object spread with keys after
  // it, which costs microseconds a key on Node 20)
  const state = STATE_CODE[q.state];
  const st = stCode(q.transport, q.umr);
  const mtu = mtuCode(q.mtu);
  const sizes = qpSizes(q.sqSize, q.rqSize);
  const logPage = log2Exact('pageBytes', q.sqPages.pageBytes) - 12;
  const logSra = log2Exact('maxRdAtomic', q.maxRdAtomic);
  const fre = flag(q.fre);
  const acc = qpAccess(q.accessFlags);
  setIfc(v, QUERY_QP_OUT.at.qpc!, QPC, {
    state,
    st,
    pd: q.pd,
    mtu,
    log_sq_size: sizes.log_sq_size,
    log_rq_size: sizes.log_rq_size,
    rq_type: sizes.rq_type,
    log_page_size: logPage,
    remote_qpn: q.remoteQpn,
    'primary_address_path.pkey_index': q.pkeyIndex,
    'primary_address_path.ack_timeout': q.timeout,
    'primary_address_path.vhca_port_num': q.port,
    log_sra_max: logSra,
    retry_count: q.retryCnt,
    rnr_retry: q.rnrRetry,
    fre,
    next_send_psn: q.sqPsn,
    cqn_snd: q.sendCqn,
    model_local_write: acc.model_local_write,
    rwe: acc.rwe,
    rre: acc.rre,
    rae: acc.rae,
    next_rcv_psn: q.rqPsn,
    cqn_rcv: q.recvCqn,
    dbr_addr: q.dbrAddr,
    model_page_fault_resumes: q.pageFaultResumes,
    model_max_send_sge: q.maxSendSge,
    model_max_recv_sge: q.maxRecvSge,
    model_sq_offset: q.sqOffset,
    model_remote_hca: q.remoteHca,
    model_last_resume_flags: q.lastResumeFlags,
    model_sq_buf_addr: q.sqBufAddr,
    model_rq_buf_addr: q.rqBufAddr,
  });
  writePas(v, at, pas, 'pas');
  return b;
}

function decodeQueryQp(qpn: number, v: DataView): QpContext {
  const o = decodeIfc(v, 0, QUERY_QP_OUT);
  const q = qpcAt(v, QUERY_QP_OUT);
  const state = STATE_OF.get(q.state);
  if (state === undefined) throw new RangeError(`qpc.state ${q.state} is not a state modelled`);
  const mtu = MTU_OF.get(q.mtu);
  if (mtu === undefined) throw new RangeError(`qpc.mtu ${q.mtu} is not an IB MTU code`);
  const { transport, umr } = transportOf(q.st);
  const pageBytes = 2 ** (12 + q.log_page_size);
  const at = QUERY_QP_OUT.at.qp_pas_or_qpc_ext_and_pas!;
  const n = Math.min(o.model_pas_count, Math.floor(Math.max(0, v.byteLength - at) / PAS_ENTRY_BYTES));
  const paged: QueuePages | null = o.model_pas_count > 0 ? { pas: readPas(v, at, n, 'pas'), pageBytes, base: 0 } : null;
  return {
    qpn,
    transport,
    pd: q.pd,
    sendCqn: q.cqn_snd,
    recvCqn: q.cqn_rcv,
    sqSize: 2 ** q.log_sq_size,
    rqSize: rqSizeOf(q),
    maxSendSge: q.model_max_send_sge,
    maxRecvSge: q.model_max_recv_sge,
    sqBufAddr: q.model_sq_buf_addr,
    rqBufAddr: q.model_rq_buf_addr,
    dbrAddr: q.dbr_addr,
    rqPages: paged ?? { pas: [], pageBytes, base: q.model_rq_buf_addr },
    sqPages: paged ?? { pas: [], pageBytes, base: q.model_sq_buf_addr },
    sqOffset: q.model_sq_offset,
    fre: q.fre === 1,
    umr,
    state,
    accessFlags: qpAccessOf(q),
    port: q['primary_address_path.vhca_port_num'],
    pkeyIndex: q['primary_address_path.pkey_index'],
    remoteQpn: q.remote_qpn,
    remoteHca: q.model_remote_hca,
    mtu,
    rqPsn: q.next_rcv_psn,
    sqPsn: q.next_send_psn,
    timeout: q['primary_address_path.ack_timeout'],
    retryCnt: q.retry_count,
    rnrRetry: q.rnr_retry,
    maxRdAtomic: 2 ** q.log_sra_max,
    pageFaultResumes: q.model_page_fault_resumes,
    lastResumeFlags: q.model_last_resume_flags,
  };
}

// ---------------------------------------------------------------------------------------------
// Every command
// ---------------------------------------------------------------------------------------------

/** How one command travels: its input's encoder and decoder, its output's, its output length. */
interface CmdCodec<K extends CmdName> {
  readonly inLayout: IfcLayout;
  readonly outLayout: IfcLayout;
  encIn(c: CmdOf<K>): Uint8Array;
  /** The inputs from `v` (the whole input, header included); `opMod` from the header. */
  decIn(v: DataView, opMod: number): CmdInputs[K];
  encOut(out: CmdOutputs[K]): Uint8Array;
  decOut(c: CmdOf<K>, v: DataView): CmdOutputs[K];
  /** Output bytes beyond the fixed structure. */
  outExtra?(c: CmdOf<K>): number;
}

/** A command with a header-only output and `fields` of its input from its inputs. */
function voidOut<K extends CmdName>(
  op: K,
  inL: IfcLayout,
  outL: IfcLayout,
  enc: (c: CmdOf<K>) => Record<string, number>,
  dec: (f: Record<string, number>, opMod: number) => CmdInputs[K],
  opModOf: (c: CmdOf<K>) => number = () => 0,
): CmdCodec<K> {
  return {
    inLayout: inL,
    outLayout: outL,
    encIn: (c) => input(op, inL, opModOf(c), enc(c)).b,
    decIn: (v, opMod) => dec(need(v, inL), opMod),
    encOut: () => output(outL, {}).b,
    decOut: () => undefined as CmdOutputs[K],
  };
}

const none = (): Record<string, number> => ({});
const empty = <K extends CmdName>(): CmdInputs[K] => ({}) as CmdInputs[K];

const CODECS: { readonly [K in CmdName]: CmdCodec<K> } = {
  ENABLE_HCA: voidOut('ENABLE_HCA', ENABLE_HCA_IN, ENABLE_HCA_OUT, (c) => ({ function_id: c.functionId ?? 0 }), (f) => ({ functionId: f.function_id! })),
  DISABLE_HCA: voidOut('DISABLE_HCA', DISABLE_HCA_IN, DISABLE_HCA_OUT, (c) => ({ function_id: c.functionId ?? 0 }), (f) => ({ functionId: f.function_id! })),
  INIT_HCA: voidOut('INIT_HCA', INIT_HCA_IN, INIT_HCA_OUT, none, empty),
  TEARDOWN_HCA: voidOut('TEARDOWN_HCA', TEARDOWN_HCA_IN, TEARDOWN_HCA_OUT, (c) => ({ profile: c.profile ?? 0 }), (f) => ({ profile: f.profile! })),
  QUERY_PAGES: {
    inLayout: QUERY_PAGES_IN,
    outLayout: QUERY_PAGES_OUT,
    encIn: (c) => input('QUERY_PAGES', QUERY_PAGES_IN, c.opMod, { function_id: c.functionId ?? 0 }).b,
    decIn: (v, opMod) => ({ opMod, functionId: need(v, QUERY_PAGES_IN).function_id }),
    encOut: (o) => {
      if (!Number.isInteger(o.numPages) || o.numPages < -(2 ** 31) || o.numPages >= 2 ** 31) throw new RangeError(`num_pages ${o.numPages} is not a signed 32-bit number`);
      return output(QUERY_PAGES_OUT, { function_id: o.functionId, num_pages: o.numPages >>> 0 }).b;
    },
    decOut: (_c, v) => {
      const f = decodeIfc(v, 0, QUERY_PAGES_OUT);
      return { functionId: f.function_id, numPages: f.num_pages | 0 };
    },
  },
  MANAGE_PAGES: {
    inLayout: MANAGE_PAGES_IN,
    outLayout: MANAGE_PAGES_OUT,
    encIn: (c) => {
      const pas = c.pas ?? [];
      const { b, v } = input('MANAGE_PAGES', MANAGE_PAGES_IN, c.opMod, { function_id: c.functionId ?? 0, input_num_entries: c.numEntries ?? pas.length }, pas.length * PAS_ENTRY_BYTES);
      writePas(v, MANAGE_PAGES_IN.at.pas!, pas, 'pas');
      return b;
    },
    decIn: (v, opMod) => {
      const f = need(v, MANAGE_PAGES_IN);
      const at = MANAGE_PAGES_IN.at.pas!;
      if (opMod === ManagePagesOpMod.ALLOCATION_SUCCESS) {
        // the pages given must all be in the input (pagealloc.c give_pages: inlen covers npages)
        if (v.byteLength < at + f.input_num_entries * PAS_ENTRY_BYTES) {
          throw new BadInput('BAD_INPUT_LEN', 'input_len', `input_num_entries ${f.input_num_entries} needs ${at + f.input_num_entries * PAS_ENTRY_BYTES} bytes; the input has ${v.byteLength}`);
        }
        return { opMod, functionId: f.function_id, numEntries: f.input_num_entries, pas: readPas(v, at, f.input_num_entries, 'pas') };
      }
      const pas = trailingPas(v, at, 'pas');
      return pas === undefined ? { opMod, functionId: f.function_id, numEntries: f.input_num_entries } : { opMod, functionId: f.function_id, numEntries: f.input_num_entries, pas };
    },
    encOut: (o) => {
      const { b, v } = output(MANAGE_PAGES_OUT, { output_num_entries: o.pas.length }, o.pas.length * PAS_ENTRY_BYTES);
      writePas(v, MANAGE_PAGES_OUT.at.pas!, o.pas, 'pas');
      return b;
    },
    decOut: (_c, v) => {
      const f = decodeIfc(v, 0, MANAGE_PAGES_OUT);
      const at = MANAGE_PAGES_OUT.at.pas!;
      return { pas: readPas(v, at, Math.min(f.output_num_entries, Math.floor(Math.max(0, v.byteLength - at) / PAS_ENTRY_BYTES)), 'pas') };
    },
    // reclaim_pages: room for the pages asked back
    outExtra: (c) => (c.opMod === ManagePagesOpMod.HCA_RETURN_PAGES ? (c.numEntries ?? 0) * PAS_ENTRY_BYTES : 0),
  },
  QUERY_HCA_CAP: {
    inLayout: QUERY_HCA_CAP_IN,
    outLayout: QUERY_HCA_CAP_OUT,
    encIn: (c) => input('QUERY_HCA_CAP', QUERY_HCA_CAP_IN, c.opMod, {}).b,
    decIn: (v, opMod) => (need(v, QUERY_HCA_CAP_IN), { opMod }),
    encOut: encodeHcaCap,
    decOut: (c, v) => {
      const at = QUERY_HCA_CAP_OUT.at.capability!;
      const odp = c.opMod === HcaCapOpMod.ODP_MAX || c.opMod === HcaCapOpMod.ODP_CUR;
      return odp ? { group: 'odp', caps: decodeOdpCaps(v, at) } : { group: 'general', caps: decodeGeneralCaps(v, at) };
    },
  },
  ALLOC_PD: {
    inLayout: ALLOC_PD_IN,
    outLayout: ALLOC_PD_OUT,
    encIn: () => input('ALLOC_PD', ALLOC_PD_IN, 0, {}).b,
    decIn: (v) => (need(v, ALLOC_PD_IN), {}),
    encOut: (o) => output(ALLOC_PD_OUT, { pd: o.pd }).b,
    decOut: (_c, v) => ({ pd: decodeIfc(v, 0, ALLOC_PD_OUT).pd }),
  },
  DEALLOC_PD: voidOut('DEALLOC_PD', DEALLOC_PD_IN, DEALLOC_PD_OUT, (c) => ({ pd: c.pd }), (f) => ({ pd: f.pd! })),
  CREATE_MKEY: {
    inLayout: CREATE_MKEY_IN,
    outLayout: CREATE_MKEY_OUT,
    encIn: encodeCreateMkey,
    decIn: decodeCreateMkey,
    encOut: (o) => output(CREATE_MKEY_OUT, { mkey_index: o.index }).b,
    // the key is the index and the tag the driver chose (mkc.mkey_7_0)
    decOut: (c, v) => {
      const index = decodeIfc(v, 0, CREATE_MKEY_OUT).mkey_index;
      return { mkey: makeKey(index, c.tag & 0xff), index };
    },
  },
  QUERY_MKEY: {
    inLayout: QUERY_MKEY_IN,
    outLayout: QUERY_MKEY_OUT,
    encIn: (c) => input('QUERY_MKEY', QUERY_MKEY_IN, 0, { mkey_index: c.index }).b,
    decIn: (v) => ({ index: need(v, QUERY_MKEY_IN).mkey_index }),
    encOut: (o) => {
      if (o.context.length !== 64) throw new RangeError(`an mkey context is 64 bytes, not ${o.context.length}`);
      const { b } = output(QUERY_MKEY_OUT, { model_allocated: flag(o.allocated) });
      b.set(o.context, QUERY_MKEY_OUT.at.memory_key_mkey_entry!);
      return b;
    },
    decOut: (_c, v) => {
      const at = QUERY_MKEY_OUT.at.memory_key_mkey_entry!;
      return { context: new Uint8Array(v.buffer, v.byteOffset + at, 64).slice(), allocated: decodeIfc(v, 0, QUERY_MKEY_OUT).model_allocated === 1 };
    },
  },
  QUERY_SPECIAL_CONTEXTS: {
    inLayout: QUERY_SPECIAL_CONTEXTS_IN,
    outLayout: QUERY_SPECIAL_CONTEXTS_OUT,
    encIn: () => input('QUERY_SPECIAL_CONTEXTS', QUERY_SPECIAL_CONTEXTS_IN, 0, {}).b,
    decIn: (v) => (need(v, QUERY_SPECIAL_CONTEXTS_IN), {}),
    encOut: (o) => output(QUERY_SPECIAL_CONTEXTS_OUT, { resd_lkey: o.resdLkey, null_mkey: o.nullMkey }).b,
    decOut: (_c, v) => {
      const f = decodeIfc(v, 0, QUERY_SPECIAL_CONTEXTS_OUT);
      return { resdLkey: f.resd_lkey, nullMkey: f.null_mkey };
    },
  },
  DESTROY_MKEY: voidOut('DESTROY_MKEY', DESTROY_MKEY_IN, DESTROY_MKEY_OUT, (c) => ({ mkey_index: c.index }), (f) => ({ index: f.mkey_index! })),
  PAGE_FAULT_RESUME: {
    // the seed's layout (formats/page_fault_resume.ts): flags_qpn at byte 8
    inLayout: { ifc: 'page_fault_resume_in', bytes: PAGE_FAULT_RESUME_IN_SIZE, fields: {}, keys: [], private: {}, at: {} },
    outLayout: PAGE_FAULT_RESUME_OUT,
    encIn: (c) => {
      const { b, v } = buffer(PAGE_FAULT_RESUME_IN_SIZE);
      if (!Number.isInteger(c.flagsQpn) || c.flagsQpn < 0 || c.flagsQpn >= 2 ** 32) throw new RangeError(`flags_qpn ${String(c.flagsQpn)} is not 32 bits`);
      encodePageFaultResumeIn(v, 0, { opcode: CmdOpcode.PAGE_FAULT_RESUME, opMod: 0, flags: c.flagsQpn >>> 24, qpn: c.flagsQpn & 0xffffff });
      return b;
    },
    decIn: (v) => {
      if (v.byteLength < PAGE_FAULT_RESUME_IN_SIZE) throw new BadInput('BAD_INPUT_LEN', 'input_len', `page_fault_resume_in needs ${PAGE_FAULT_RESUME_IN_SIZE} bytes; the input has ${v.byteLength}`);
      const f = decodePageFaultResumeIn(v, 0);
      return { flagsQpn: ((f.flags << 24) | f.qpn) >>> 0 };
    },
    encOut: () => output(PAGE_FAULT_RESUME_OUT, {}).b,
    decOut: () => undefined,
  },
  CREATE_EQ: {
    inLayout: CREATE_EQ_IN,
    outLayout: CREATE_EQ_OUT,
    encIn: (c) => {
      const { b, v } = input('CREATE_EQ', CREATE_EQ_IN, 0, { 'event_bitmask[0]': c.eventMask ?? 0, model_buf_addr: c.bufAddr ?? 0 });
      setIfc(v, CREATE_EQ_IN.at.eq_context_entry!, EQC, { log_eq_size: log2Exact('size', c.size) });
      return b;
    },
    decIn: (v) => {
      const f = need(v, CREATE_EQ_IN);
      const eqc = decodeIfc(v, CREATE_EQ_IN.at.eq_context_entry!, EQC);
      return { size: 2 ** eqc.log_eq_size, bufAddr: f.model_buf_addr, eventMask: f['event_bitmask[0]'] };
    },
    encOut: (o) => output(CREATE_EQ_OUT, { eq_number: o.eqn }).b,
    decOut: (_c, v) => ({ eqn: decodeIfc(v, 0, CREATE_EQ_OUT).eq_number }),
  },
  DESTROY_EQ: voidOut('DESTROY_EQ', DESTROY_EQ_IN, DESTROY_EQ_OUT, (c) => ({ eq_number: c.eqn }), (f) => ({ eqn: f.eq_number! })),
  CREATE_CQ: {
    inLayout: CREATE_CQ_IN,
    outLayout: CREATE_CQ_OUT,
    encIn: (c) => {
      const pas = c.pas ?? [];
      const { b, v } = input('CREATE_CQ', CREATE_CQ_IN, 0, { model_buf_addr: c.bufAddr ?? 0 }, pas.length * PAS_ENTRY_BYTES);
      setIfc(v, CREATE_CQ_IN.at.cq_context!, CQC, {
        log_cq_size: log2Exact('size', c.size),
        c_eqn_or_apu_element: c.eqn,
        log_page_size: c.logPageSize ?? 0,
        dbr_addr: c.dbrAddr ?? 0,
      });
      writePas(v, CREATE_CQ_IN.at.pas!, pas, 'pas');
      return b;
    },
    decIn: (v) => {
      const f = need(v, CREATE_CQ_IN);
      const q = decodeIfc(v, CREATE_CQ_IN.at.cq_context!, CQC);
      const pas = trailingPas(v, CREATE_CQ_IN.at.pas!, 'pas');
      const c: CmdInputs['CREATE_CQ'] = { size: 2 ** q.log_cq_size, eqn: q.c_eqn_or_apu_element, bufAddr: f.model_buf_addr, dbrAddr: q.dbr_addr, logPageSize: q.log_page_size };
      if (pas !== undefined) c.pas = pas;
      return c;
    },
    encOut: (o) => output(CREATE_CQ_OUT, { cqn: o.cqn }).b,
    decOut: (_c, v) => ({ cqn: decodeIfc(v, 0, CREATE_CQ_OUT).cqn }),
  },
  DESTROY_CQ: voidOut('DESTROY_CQ', DESTROY_CQ_IN, DESTROY_CQ_OUT, (c) => ({ cqn: c.cqn }), (f) => ({ cqn: f.cqn! })),
  CREATE_QP: {
    inLayout: CREATE_QP_IN,
    outLayout: CREATE_QP_OUT,
    encIn: (c) => {
      const pas = c.pas ?? [];
      const { b, v } = input('CREATE_QP', CREATE_QP_IN, 0, {}, pas.length * PAS_ENTRY_BYTES);
      // (in the literal's order, written key by key: see encodeQueryQp)
      const st = stCode(c.transport ?? 'RC', c.umr);
      const sizes = qpSizes(c.sqSize, c.rqSize);
      setIfc(v, CREATE_QP_IN.at.qpc!, QPC, {
        st,
        pd: c.pd,
        log_sq_size: sizes.log_sq_size,
        log_rq_size: sizes.log_rq_size,
        rq_type: sizes.rq_type,
        log_page_size: c.logPageSize ?? 0,
        fre: flag(c.fre),
        cqn_snd: c.sendCqn,
        cqn_rcv: c.recvCqn,
        dbr_addr: c.dbrAddr ?? 0,
        model_max_send_sge: c.maxSendSge ?? 1,
        model_max_recv_sge: c.maxRecvSge ?? 1,
        model_sq_buf_addr: c.sqBufAddr ?? 0,
        model_rq_buf_addr: c.rqBufAddr ?? 0,
      });
      writePas(v, CREATE_QP_IN.at.pas!, pas, 'pas');
      return b;
    },
    decIn: (v) => {
      need(v, CREATE_QP_IN);
      const q = qpcAt(v, CREATE_QP_IN);
      const { transport, umr } = transportOf(q.st);
      const pas = trailingPas(v, CREATE_QP_IN.at.pas!, 'pas');
      const c: CmdInputs['CREATE_QP'] = {
        pd: q.pd,
        sendCqn: q.cqn_snd,
        recvCqn: q.cqn_rcv,
        sqSize: 2 ** q.log_sq_size,
        rqSize: rqSizeOf(q),
        transport,
        maxSendSge: q.model_max_send_sge,
        maxRecvSge: q.model_max_recv_sge,
        sqBufAddr: q.model_sq_buf_addr,
        rqBufAddr: q.model_rq_buf_addr,
        dbrAddr: q.dbr_addr,
        logPageSize: q.log_page_size,
        fre: q.fre === 1,
        umr,
      };
      if (pas !== undefined) c.pas = pas;
      return c;
    },
    encOut: (o) => output(CREATE_QP_OUT, { qpn: o.qpn }).b,
    decOut: (_c, v) => ({ qpn: decodeIfc(v, 0, CREATE_QP_OUT).qpn }),
  },
  DESTROY_QP: voidOut('DESTROY_QP', DESTROY_QP_IN, DESTROY_QP_OUT, (c) => ({ qpn: c.qpn }), (f) => ({ qpn: f.qpn! })),
  QUERY_QP: {
    inLayout: QUERY_QP_IN,
    outLayout: QUERY_QP_OUT,
    encIn: (c) => input('QUERY_QP', QUERY_QP_IN, 0, { qpn: c.qpn }).b,
    decIn: (v) => ({ qpn: need(v, QUERY_QP_IN).qpn }),
    encOut: encodeQueryQp,
    decOut: (c, v) => decodeQueryQp(c.qpn, v),
    outExtra: () => QUERY_QP_OUT.at.qp_pas_or_qpc_ext_and_pas! + QUERY_QP_PAS_ROOM * PAS_ENTRY_BYTES - QUERY_QP_OUT.bytes,
  },
  RST2INIT_QP: modify('RST2INIT_QP', RST2INIT_QP_IN, RST2INIT_QP_OUT, 'INIT', (c) => {
    const a = qpAccess(c.accessFlags ?? 0);
    return [
      0,
      { model_local_write: a.model_local_write, rwe: a.rwe, rre: a.rre, rae: a.rae, 'primary_address_path.vhca_port_num': c.port ?? 1, 'primary_address_path.pkey_index': c.pkeyIndex ?? 0 },
    ];
  }, (qpn, _o, q) => ({ qpn, accessFlags: qpAccessOf(q), port: q['primary_address_path.vhca_port_num'], pkeyIndex: q['primary_address_path.pkey_index'] })),
  INIT2RTR_QP: modify('INIT2RTR_QP', INIT2RTR_QP_IN, INIT2RTR_QP_OUT, 'RTR', (c) => [
    0,
    { remote_qpn: c.remoteQpn ?? 0, model_remote_hca: c.remoteHca ?? 0, mtu: c.mtu === undefined ? 0 : mtuCode(c.mtu), next_rcv_psn: c.rqPsn ?? 0 },
  ], (qpn, _o, q) => {
    const mtu = mtuOf(q.mtu);
    const c: CmdInputs['INIT2RTR_QP'] = { qpn, remoteQpn: q.remote_qpn, remoteHca: q.model_remote_hca, rqPsn: q.next_rcv_psn };
    if (mtu !== undefined) c.mtu = mtu;
    return c;
  }),
  RTR2RTS_QP: modify('RTR2RTS_QP', RTR2RTS_QP_IN, RTR2RTS_QP_OUT, 'RTS', (c) => {
    const opt =
      (c.timeout !== undefined ? QpOptPar.ACK_TIMEOUT : 0) |
      (c.retryCnt !== undefined ? QpOptPar.RETRY_COUNT : 0) |
      (c.rnrRetry !== undefined ? QpOptPar.RNR_RETRY : 0) |
      (c.maxRdAtomic !== undefined ? QpOptPar.SRA_MAX : 0);
    return [
      opt,
      {
        next_send_psn: c.sqPsn ?? 0,
        'primary_address_path.ack_timeout': c.timeout ?? 0,
        retry_count: c.retryCnt ?? 0,
        rnr_retry: c.rnrRetry ?? 0,
        log_sra_max: c.maxRdAtomic === undefined ? 0 : log2Exact('maxRdAtomic', c.maxRdAtomic),
      },
    ];
  }, (qpn, opt, q) => {
    const c: CmdInputs['RTR2RTS_QP'] = { qpn, sqPsn: q.next_send_psn };
    if (opt & QpOptPar.ACK_TIMEOUT) c.timeout = q['primary_address_path.ack_timeout'];
    if (opt & QpOptPar.RETRY_COUNT) c.retryCnt = q.retry_count;
    if (opt & QpOptPar.RNR_RETRY) c.rnrRetry = q.rnr_retry;
    if (opt & QpOptPar.SRA_MAX) c.maxRdAtomic = 2 ** q.log_sra_max;
    return c;
  }),
  '2ERR_QP': stateOnly('2ERR_QP', QP_2ERR_IN, QP_2ERR_OUT, 'ERR'),
  '2RST_QP': stateOnly('2RST_QP', QP_2RST_IN, QP_2RST_OUT, 'RESET'),
};

type ModifyOp = 'RST2INIT_QP' | 'INIT2RTR_QP' | 'RTR2RTS_QP';

/** A transition with a qpc: the state it leaves is the command's (its output carries none). */
function modify<K extends ModifyOp>(
  op: K,
  inL: IfcLayout,
  outL: IfcLayout,
  to: QpState,
  enc: (c: CmdOf<K>) => [number, Record<string, number>],
  dec: (qpn: number, optParam: number, q: IfcValues<keyof typeof QPC.fields>) => CmdInputs[K],
): CmdCodec<K> {
  return {
    inLayout: inL,
    outLayout: outL,
    encIn: (c) => {
      const [opt, qpc] = enc(c);
      return modifyIn(op, inL, c.qpn, opt, qpc);
    },
    decIn: (v) => {
      const f = need(v, inL);
      return dec(f.qpn!, f.opt_param_mask!, qpcAt(v, inL));
    },
    encOut: () => output(outL, {}).b,
    decOut: () => ({ state: to }) as CmdOutputs[K],
  };
}

function stateOnly<K extends '2ERR_QP' | '2RST_QP'>(op: K, inL: IfcLayout, outL: IfcLayout, to: QpState): CmdCodec<K> {
  return {
    inLayout: inL,
    outLayout: outL,
    encIn: (c) => input(op, inL, 0, { qpn: c.qpn }).b,
    decIn: (v) => ({ qpn: need(v, inL).qpn! }) as CmdInputs[K],
    encOut: () => output(outL, {}).b,
    decOut: () => ({ state: to }) as CmdOutputs[K],
  };
}

function codecOf<K extends CmdName>(op: K): CmdCodec<K> {
  return CODECS[op] as CmdCodec<K>;
}

function opModOf(cmd: Cmd): number {
  return 'opMod' in cmd && typeof cmd.opMod === 'number' ? cmd.opMod & 0xffff : 0;
}

// ---------------------------------------------------------------------------------------------
// The contract
// ---------------------------------------------------------------------------------------------

/**
 * The bytes of a command's input (what the driver posts). A value its structure cannot hold (a
 * size not a power of two, a field too wide) throws a RangeError naming it: the driver checks
 * its arguments before it builds a command. With `scratch`, the input is written there when it
 * fits (a view of it, valid until its next use: for a sender that copies it out at once).
 */
export function encodeCmdInput(cmd: Cmd, scratch?: Uint8Array): Uint8Array {
  const c = codecOf(cmd.op) as CmdCodec<CmdName>;
  if (c === undefined) throw new RangeError(`no command ${String((cmd as { op: unknown }).op)}`);
  lent = scratch ?? null;
  try {
    return c.encIn(cmd as never);
  } finally {
    lent = null;
  }
}

/** The command in `bytes` (what the firmware reads), or the status a malformed input gets. */
export function decodeCmdInput(bytes: Uint8Array): DecodedCmdInput {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 8) {
    return { ok: false, error: new CmdError('UNKNOWN', bytes.length >= 2 ? v.getUint16(0) : 0, 0, 'BAD_INPUT_LEN', 'input_len', `input of ${bytes.length} bytes is shorter than the 8-byte command header`) };
  }
  const opcode = v.getUint16(0);
  const opMod = v.getUint16(6);
  const op = NAME_OF.get(opcode);
  if (op === undefined) return { ok: false, error: new CmdError('UNKNOWN', opcode, opMod, 'BAD_OP', 'opcode', `unknown or reserved opcode ${hex(opcode)}`) };
  try {
    const inputs = codecOf(op).decIn(v, opMod);
    // op added to the decoded object (as a spread copy with op last would have it, without the copy)
    (inputs as Record<string, unknown>).op = op;
    return { ok: true, cmd: inputs as unknown as Cmd };
  } catch (e) {
    if (e instanceof BadInput) return { ok: false, error: new CmdError(op, opcode, opMod, e.status, e.rule, e.message) };
    // a field the structure holds but the model's numbers cannot (a u64 past 2^53)
    const why = e instanceof Error ? e.message : String(e);
    return { ok: false, error: new CmdError(op, opcode, opMod, 'BAD_PARAM', 'field_range', why) };
  }
}

/** The bytes of a successful command's output (status OK); into `scratch` when it fits, as `encodeCmdInput`. */
export function encodeCmdOutput<K extends CmdName>(op: K, out: CmdOutputs[K], scratch?: Uint8Array): Uint8Array {
  lent = scratch ?? null;
  try {
    return codecOf(op).encOut(out);
  } finally {
    lent = null;
  }
}

/** The bytes of a failed command's output: its status and syndrome, nothing else (mlx5 `*_out`). */
export function encodeCmdError(err: CmdError): Uint8Array {
  const { b, v } = buffer(CMD_HDR_BYTES);
  v.setUint8(0, err.status & 0xff);
  v.setUint32(4, err.syndrome >>> 0);
  return b;
}

/**
 * The output of `cmd` from its bytes; a status other than OK throws the CmdError it stands for
 * (CmdError.fromOutput), as does an output too short for its structure (BAD_OUTPUT_LEN) or one
 * whose fields the model cannot mean (INTERNAL_ERR: a state or MTU code it does not know).
 */
export function decodeCmdOutput<K extends CmdName>(cmd: CmdOf<K>, bytes: Uint8Array): CmdOutputs[K] {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const opcode = CmdOpcode[cmd.op];
  const opMod = opModOf(cmd as Cmd);
  if (bytes.length < 8) throw new CmdError(cmd.op, opcode, opMod, 'BAD_OUTPUT_LEN', 'output_len', `output of ${bytes.length} bytes is shorter than the 8-byte header`);
  const status = v.getUint8(0);
  if (status !== 0) throw CmdError.fromOutput(cmd.op, opcode, opMod, status, v.getUint32(4));
  const c = codecOf(cmd.op);
  if (bytes.length < c.outLayout.bytes) {
    throw new CmdError(cmd.op, opcode, opMod, 'BAD_OUTPUT_LEN', 'output_len', `${c.outLayout.ifc} needs ${c.outLayout.bytes} bytes; the output has ${bytes.length}`);
  }
  try {
    return c.decOut(cmd, v);
  } catch (e) {
    // an output whose fields mean nothing to the driver (a state or MTU code not modelled)
    throw new CmdError(cmd.op, opcode, opMod, 'INTERNAL_ERR', 'output_field', `the output does not decode: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Bytes the driver leaves for the output of `cmd` (out_length of the command entry). */
export function cmdOutputLength(cmd: Cmd): number {
  const c = codecOf(cmd.op) as CmdCodec<CmdName>;
  return Math.max(CMD_HDR_BYTES, c.outLayout.bytes + (c.outExtra?.(cmd as never) ?? 0));
}

/** Bytes of a command's input structure before any list (what decodeCmdInput needs at least). */
export function cmdInputLength(op: CmdName): number {
  return codecOf(op).inLayout.bytes;
}
