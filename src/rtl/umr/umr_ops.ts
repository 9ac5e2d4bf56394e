/**
 * The functional half of the UMR engine: what a UMR WQE asks (decoded from the exact bytes the
 * driver posts, spec/mlx5.md "Send WQE" / "UMR control segment"), the rules it is checked
 * against (spec/semantics.md "Work requests (async outcomes)"), and the field updates it makes.
 * Pure functions over decoded ICM entries: `umr_engine.ts` adds the timing (DMA reads of the
 * contexts and lists, posted writes) and applies the updates through firmware.ts.
 */
import { EnumType, enumType } from '../../sim/enum_type.ts';
import type { IcmPrivate, MkeyEntry } from '../memory/icm_mkey.ts';
import { IB_LOCAL_WRITE, IB_REMOTE_ATOMIC, IB_REMOTE_READ, IB_REMOTE_WRITE } from '../memory/icm_mkey.ts';
import { decodeMkeyContext, encodeMkeyContext, zeroMkeyContext, type MkeyContext } from '../formats/mkey_context.ts';
import { CTRL_SEG_SIZE, decodeCtrlSeg, encodeCtrlSeg } from '../formats/ctrl_seg.ts';
import { UMR_CTRL_SEG_SIZE, decodeUmrCtrlSeg, encodeUmrCtrlSeg, mkeyMask } from '../formats/umr_ctrl_seg.ts';
import { DATA_SEG_SIZE, decodeDataSeg, dataSegLength, type DataSeg } from '../formats/data_seg.ts';
import { decodeKlm, type Klm } from '../formats/klm.ts';
import { readMttRawAt } from '../formats/mtt.ts';
import { CeMode, CqeSyndrome, DS_SIZE, FenceMode, KLM_SIZE, MKEY_CONTEXT_SIZE, MTT_SIZE, MkcAccessMode, MkeyMaskBit, UmrCtrlFlag, WqeOpcode } from '../formats/constants.ts';
import { MKEY_KIND_MR, MKEY_KIND_MW1, MKEY_KIND_MW2 } from '../memory/icm_mkey.ts';

/**
 * What a UMR does, decided from its mkey_mask and the mkey segment's status (the WQE carries
 * no sub-opcode: spec/mlx5.md "Fast registration", "Local invalidate", "Memory-window bind"):
 * - REG_MR: FREE in the mask, segment not free, PAGE_SIZE in the mask (the kernel's frwr mask,
 *   MTT or KLM);
 * - BIND_MW: FREE in the mask, segment not free, no PAGE_SIZE (rdma-core set_bind_wr), one KLM;
 * - LOCAL_INV: FREE in the mask, segment free, no KEY (kernel set_linv_umr_seg: mask == FREE);
 * - UNBIND: FREE and KEY in the mask, segment free: a bind of length 0 (rdma-core: no KLM,
 *   CHECK_QPN for type 2); on an MR target (the mask is all the hardware sees) it disables the
 *   MR and gives it the segment's tag: the driver's mkey pool retires a deregistered user MR's
 *   key this way (checked as LOCAL_INV, see checkUmr);
 * - XLT_UPDATE: no FREE in the mask: translations (and masked fields) of an mkey whose state is
 *   kept, e.g. ODP's MTT update with a translation offset;
 * - INVALID: not a UMR, or malformed.
 * - REMOTE_INV: never decoded from a WQE: the responder's remote invalidation of SEND_WITH_INV,
 *   a LOCAL_INV WQE the hardware builds itself and submits on the engine's `rinv` port, checked
 *   by the "Remote invalidate" rules instead (spec/semantics.md).
 */
export const [UmrKind, UMR_KIND] = enumType('umr_kind', ['NONE', 'REG_MR', 'LOCAL_INV', 'BIND_MW', 'UNBIND', 'XLT_UPDATE', 'INVALID', 'REMOTE_INV']);

/** Completion syndromes a UMR ends with (0 = success), named for the trace. */
export const UmrSyndrome = new EnumType('umr_syndrome', {
  0: 'OK',
  [CqeSyndrome.LOCAL_QP_OP_ERR]: 'LOC_QP_OP_ERR',
  [CqeSyndrome.LOCAL_PROT_ERR]: 'LOC_PROT_ERR',
  [CqeSyndrome.MW_BIND_ERR]: 'MW_BIND_ERR',
  [CqeSyndrome.GENERAL_ERR]: 'GENERAL_ERR',
  [CqeSyndrome.REMOTE_INVAL_REQ_ERR]: 'REM_INV_REQ_ERR',
});

const OK = 0;
const QP_OP = CqeSyndrome.LOCAL_QP_OP_ERR;
const BIND_ERR = CqeSyndrome.MW_BIND_ERR;
const PROT = CqeSyndrome.LOCAL_PROT_ERR;
const REM_INV = CqeSyndrome.REMOTE_INVAL_REQ_ERR;

/** Offsets inside a UMR WQE: control, UMR control, mkey segment, then translations or a pointer. */
export const UMR_CTRL_OFF = CTRL_SEG_SIZE;
export const UMR_MKEY_OFF = UMR_CTRL_OFF + UMR_CTRL_SEG_SIZE;
export const UMR_XLT_OFF = UMR_MKEY_OFF + MKEY_CONTEXT_SIZE;
const UMR_HEADER_DS = UMR_XLT_OFF / DS_SIZE;

/** A decoded UMR WQE. */
export interface UmrWqe {
  kind: number;
  /** Why the WQE is INVALID (empty otherwise). */
  reason: string;
  /** The control segment's imm: the target key (spec/mlx5.md "Send WQE"). */
  key: number;
  /** The control segment's qpn. */
  qpn: number;
  /** UmrCtrlFlag bits. */
  flags: number;
  mask: number;
  /** The mkey segment. */
  seg: MkeyContext;
  /** xlt_octowords * 16: bytes of translations (padded to 64 by the driver). */
  xltBytes: number;
  /** Where they go, in octowords (only with TRANSLATION_OFFSET_EN, else 0). */
  xltOffsetOcto: number;
  /** Inline translations (a copy of the WQE bytes), or null. */
  inlineXlt: Uint8Array | null;
  /** The pointer to the translations (non-inline), or null. */
  ptr: DataSeg | null;
  /** BIND_MW: the inline KLM `{ length, mr lkey, addr }`. */
  bindKlm: Klm | null;
}

/** Whether `mask` has the bit `bit` (MkeyMaskBit.X: a named load, where a name looked up in the table per test was ~0.5% of a registration). */
function has(mask: number, bit: number): boolean {
  // every bit is below 32: ToUint32 keeps the low word of any integer mask exactly (hasMaskBit)
  return ((mask >>> bit) & 1) === 1;
}

/** Decodes the UMR WQE bytes `wqe` (ds * 16 bytes, laid out contiguously). Never throws. */
export function decodeUmrWqe(wqe: Uint8Array): UmrWqe {
  const w: UmrWqe = {
    kind: UMR_KIND.INVALID, reason: '', key: 0, qpn: 0, flags: 0, mask: 0, seg: zeroMkeyContext(),
    xltBytes: 0, xltOffsetOcto: 0, inlineXlt: null, ptr: null, bindKlm: null,
  };
  const view = new DataView(wqe.buffer, wqe.byteOffset, wqe.byteLength);
  if (wqe.byteLength < CTRL_SEG_SIZE) return invalid(w, `WQE of ${wqe.byteLength} bytes has no control segment`);
  const ctrl = decodeCtrlSeg(view, 0);
  w.key = ctrl.imm >>> 0;
  w.qpn = ctrl.qpn;
  if (ctrl.opcode !== WqeOpcode.UMR) return invalid(w, `opcode 0x${ctrl.opcode.toString(16)} is not UMR`);
  if (ctrl.ds < UMR_HEADER_DS) return invalid(w, `ds ${ctrl.ds} < ${UMR_HEADER_DS}`);
  if (ctrl.ds * DS_SIZE > wqe.byteLength) return invalid(w, `ds ${ctrl.ds} reaches past the ${wqe.byteLength} bytes given`);
  try {
    const u = decodeUmrCtrlSeg(view, UMR_CTRL_OFF);
    w.flags = u.flags;
    w.mask = u.mkeyMask;
    w.seg = decodeMkeyContext(view, UMR_MKEY_OFF);
    w.xltBytes = u.xltOctowords * DS_SIZE;
    w.xltOffsetOcto = (u.flags & UmrCtrlFlag.TRANSLATION_OFFSET_EN) !== 0 ? u.xltOffset : 0;
    if (w.xltBytes > 0) {
      if ((u.flags & UmrCtrlFlag.INLINE) !== 0) {
        if (ctrl.ds < UMR_HEADER_DS + u.xltOctowords) return invalid(w, `inline translations of ${u.xltOctowords} octowords need ds ${UMR_HEADER_DS + u.xltOctowords}`);
        w.inlineXlt = wqe.slice(UMR_XLT_OFF, UMR_XLT_OFF + w.xltBytes);
      } else {
        if (ctrl.ds < UMR_HEADER_DS + DATA_SEG_SIZE / DS_SIZE) return invalid(w, 'translation pointer: no data segment');
        w.ptr = decodeDataSeg(view, UMR_XLT_OFF);
      }
    }
  } catch (e) {
    return invalid(w, e instanceof Error ? e.message : String(e));
  }
  const seg = w.seg;
  if (!has(w.mask, MkeyMaskBit.FREE)) w.kind = UMR_KIND.XLT_UPDATE;
  else if (seg.free) w.kind = has(w.mask, MkeyMaskBit.KEY) ? UMR_KIND.UNBIND : UMR_KIND.LOCAL_INV;
  else if (has(w.mask, MkeyMaskBit.PAGE_SIZE)) w.kind = UMR_KIND.REG_MR;
  else {
    w.kind = UMR_KIND.BIND_MW;
    if (w.inlineXlt === null) return invalid(w, 'BIND_MW without its inline KLM');
    try {
      w.bindKlm = decodeKlm(new DataView(w.inlineXlt.buffer, w.inlineXlt.byteOffset, w.inlineXlt.byteLength), 0);
    } catch (e) {
      return invalid(w, e instanceof Error ? e.message : String(e));
    }
  }
  return w;
}

/** Bytes of a LOCAL_INV UMR WQE: control, UMR control and mkey segment (8 DS, no translations). */
export const LOCAL_INV_WQE_BYTES = UMR_XLT_OFF;

/**
 * Writes into `dst` the LOCAL_INV UMR WQE of spec/mlx5.md "Local invalidate" (imm = the key,
 * flags INLINE, mask FREE, an all-zero mkey segment but status free): the same bytes the driver
 * posts (driver/wqe_builder.ts buildLocalInvWqe). The hardware builds it itself to invalidate
 * through the UMR engine: RDMA_READ_WITH_INV's local key (sq.ts) and, with the REMOTE_INV kind,
 * SEND_WITH_INV's key at the responder.
 */
export function encodeLocalInvWqe(dst: Uint8Array, key: number, qpn: number, wqeIndex: number): void {
  const view = new DataView(dst.buffer, dst.byteOffset, LOCAL_INV_WQE_BYTES);
  encodeCtrlSeg(view, 0, {
    opmod: 0, wqeIndex, opcode: WqeOpcode.UMR, qpn, ds: UMR_HEADER_DS, signature: 0,
    fence: FenceMode.NONE, ce: CeMode.ERROR_ONLY, se: false, imm: key >>> 0,
  });
  encodeUmrCtrlSeg(view, UMR_CTRL_OFF, { flags: UmrCtrlFlag.INLINE, xltOctowords: 0, xltOffset: 0, mkeyMask: LOCAL_INV_MASK });
  encodeMkeyContext(view, UMR_MKEY_OFF, FREE_SEG);
}
const LOCAL_INV_MASK = mkeyMask('FREE');
const FREE_SEG: MkeyContext = Object.freeze(Object.assign(zeroMkeyContext(), { free: true }));

function invalid(w: UmrWqe, reason: string): UmrWqe {
  w.kind = UMR_KIND.INVALID;
  w.reason = reason;
  return w;
}

/** The kinds whose every failure is MW_BIND_ERR (spec/semantics.md: BIND_MW rows; the model's bindWindow). */
export function isBindFamily(kind: number): boolean {
  return kind === UMR_KIND.BIND_MW || kind === UMR_KIND.UNBIND;
}

/** Whether the target is a memory window. */
export function isWindow(e: MkeyEntry): boolean {
  return e.kind === MKEY_KIND_MW1 || e.kind === MKEY_KIND_MW2;
}

/** Policies of the checks (UmrEngineOptions). */
export interface UmrPolicy {
  type2Unbind: 'bind_error' | 'invalidate';
  regMrPdCheck: boolean;
}

/** The posting QP: its number, PD and qpc.fre. */
export interface UmrPoster {
  qpn: number;
  pd: number;
  fre: boolean;
}

/**
 * The checks that need only the WQE, the target's context and (BIND_MW) the MR's context: 0 or
 * the completion syndrome. Translation sizes are checked later (`checkTranslations`), once a
 * list given by pointer has been read.
 */
export function checkUmr(w: UmrWqe, q: UmrPoster, t: MkeyEntry, mr: MkeyEntry | null, pol: UmrPolicy): number {
  switch (w.kind) {
    case UMR_KIND.REG_MR:
    case UMR_KIND.XLT_UPDATE:
      return checkMrUpdate(w, q, t, pol);
    case UMR_KIND.LOCAL_INV:
      return checkLocalInv(w, t);
    case UMR_KIND.REMOTE_INV:
      return checkRemoteInv(w, q, t);
    case UMR_KIND.BIND_MW:
      return checkBind(w, q, t, mr);
    case UMR_KIND.UNBIND:
      // FREE | KEY on an MR: the pool's retire (free and a new tag), with LOCAL_INV's rules
      if (t.allocated && t.kind === MKEY_KIND_MR) return checkLocalInv(w, t);
      return checkUnbind(w, q, t, pol);
    default:
      return QP_OP; // malformed: the hardware completes it as a local QP operation error
  }
}

/** The UMR control flags CHECK_FREE / CHECK_NOT_FREE (spec/mlx5.md "UMR control segment"). */
function freeFlagsFail(w: UmrWqe, t: MkeyEntry): boolean {
  if ((w.flags & UmrCtrlFlag.CHECK_FREE) !== 0 && !t.free) return true;
  if ((w.flags & UmrCtrlFlag.CHECK_NOT_FREE) !== 0 && t.free) return true;
  return false;
}

/** REG_MR (and XLT_UPDATE): an MR, allocated and UMR-enabled; "must be free" honoured; same PD as the QP. */
function checkMrUpdate(w: UmrWqe, q: UmrPoster, t: MkeyEntry, pol: UmrPolicy): number {
  // UMR privilege (README "UMR privilege"): MTT entries are physical addresses, so only a QP
  // with qpc.fre, which mlx5_ib sets for kernel QPs alone (qp.c create_kernel_qp: "fast
  // registration enabled for all kernel QPs"), may write an MR's translations. A user QP's
  // attempt is a local QP operation error (the PRM is not public: the syndrome is assumed).
  if (!q.fre) return QP_OP;
  if (!t.allocated || !t.umrEn) return QP_OP;
  // a window's translation is written only by a bind (its one KLM names the MR it counts on)
  if (t.kind !== MKEY_KIND_MR) return QP_OP;
  // semantics.md "REG_MR: MR must be FREE (UMR 'must be free')": the builder sets CHECK_FREE (0x20)
  if (freeFlagsFail(w, t)) return QP_OP;
  if ((w.flags & UmrCtrlFlag.CHECK_QPN) !== 0 && t.qpn !== q.qpn) return QP_OP;
  // IBTA fast registration: the MR must be in the PD of the QP that registers it. ODP's XLT
  // updates come from the driver's own UMR QP and are not checked.
  if (w.kind === UMR_KIND.REG_MR && pol.regMrPdCheck && t.pd !== q.pd) return QP_OP;
  return OK;
}

/** LOCAL_INV rows of semantics.md, in the reference model's order. */
function checkLocalInv(w: UmrWqe, t: MkeyEntry): number {
  if (!t.allocated || !t.umrEn) return QP_OP; // the key must name an MR or a type-2 window
  if (t.tag !== (w.key & 0xff)) return QP_OP; // full 32-bit key match
  if (t.kind === MKEY_KIND_MW1) return QP_OP; // o10-37.2.26: type-1 windows are never invalidated
  if (t.kind === MKEY_KIND_MR && t.mwCount > 0) return QP_OP; // windows still bound to the MR
  if (freeFlagsFail(w, t)) return QP_OP; // LOCAL_INV posts no check flag: an already FREE target succeeds
  return OK;
}

/**
 * spec/semantics.md "Remote invalidate" (every failure REM_INV_REQ_ERR, the key stays valid): the
 * key names an MR with remote invalidation allowed (en_rinval: fast-registration MRs) and no
 * windows bound, or a type-2 window; full key match; the responder QP's PD. A FREE target
 * succeeds (as LOCAL_INV).
 */
function checkRemoteInv(w: UmrWqe, q: UmrPoster, t: MkeyEntry): number {
  if (!t.allocated) return REM_INV;
  if (t.tag !== (w.key & 0xff)) return REM_INV;
  if (t.pd !== q.pd) return REM_INV;
  if (t.kind === MKEY_KIND_MR) return t.remoteInval && t.mwCount === 0 ? OK : REM_INV;
  return t.kind === MKEY_KIND_MW2 ? OK : REM_INV;
}

/** BIND_MW rows of semantics.md (every failure MW_BIND_ERR), in the reference model's order. */
function checkBind(w: UmrWqe, q: UmrPoster, t: MkeyEntry, mr: MkeyEntry | null): number {
  if (!t.allocated || !t.umrEn || !isWindow(t)) return BIND_ERR;
  const type2 = t.kind === MKEY_KIND_MW2;
  const len = has(w.mask, MkeyMaskBit.LEN) ? w.seg.len : t.len;
  if (type2) {
    if (!t.free || freeFlagsFail(w, t)) return BIND_ERR; // o10-37.2.30: a type-2 window must be FREE
    if (q.pd !== t.pd) return BIND_ERR; // C10-72
    if (len === 0 && !w.seg.len64) return BIND_ERR; // o10-37.2.40
  } else if (len === 0 && !w.seg.len64) {
    return OK; // a type-1 bind of length 0 unbinds and checks no MR (applied as UNBIND)
  }
  const k = w.bindKlm!;
  // "MR must be VALID, its key current"
  if (mr === null || !mr.allocated || mr.kind !== MKEY_KIND_MR || mr.free || mr.tag !== (k.key & 0xff)) return BIND_ERR;
  // the reference model's choice (semantics.md silent for type 2): window and MR share a PD
  if (mr.pd !== t.pd) return BIND_ERR;
  // no window on a zero-based MR, for both types (rxe's rule; the reference model's choice)
  if (mr.zeroBased) return BIND_ERR;
  // No C10-73 check (the MR's IB_ACCESS_MW_BIND): mlx5 has no mkey bit for it (wr.c:180
  // get_umr_flags, umr.c:443 mlx5r_umr_set_access_flags drop it), and rdma-core checks it only
  // in a build with MLX5_MW_DEBUG (providers/mlx5/qp.c set_bind_wr, off by default), so a bind
  // over an MR without it succeeds
  const winAccess = accessOf(w, t);
  if ((winAccess & (IB_REMOTE_WRITE | IB_REMOTE_ATOMIC)) !== 0 && (mr.access & IB_LOCAL_WRITE) === 0) return BIND_ERR; // C10-74
  // C10-75: [addr, addr + length) inside the MR
  if (!mr.len64 && (k.va < mr.start || k.va + k.bcount > mr.start + mr.len)) return BIND_ERR;
  return OK;
}

/** The bind WQE of length 0 (no KLM; CHECK_QPN for type 2). */
function checkUnbind(w: UmrWqe, q: UmrPoster, t: MkeyEntry, pol: UmrPolicy): number {
  if (!t.allocated || !t.umrEn || !isWindow(t)) return BIND_ERR;
  if (t.kind === MKEY_KIND_MW1) return OK; // "unbound" by binding with length 0 (semantics.md)
  // A type-2 window: semantics.md o10-37.2.40 forbids a zero-length type-2 bind (MW_BIND_ERR);
  // real mlx5 (rdma-core set_bind_wr) uses this very WQE to invalidate the window.
  if (pol.type2Unbind === 'bind_error') return BIND_ERR;
  if (t.tag !== (w.key & 0xff)) return QP_OP; // as LOCAL_INV: full key match
  if (t.free) return OK; // nothing bound: nothing to check
  if ((w.flags & UmrCtrlFlag.CHECK_QPN) !== 0 && t.qpn !== q.qpn) return QP_OP; // the window's QP must be the poster
  return OK;
}

/** The window's access after the bind: the masked bits from the segment, the others kept. */
function accessOf(w: UmrWqe, t: MkeyEntry): number {
  const s = w.seg;
  let a = t.access;
  const set = (bit: number, on: boolean): void => {
    a = on ? a | bit : a & ~bit;
  };
  if (has(w.mask, MkeyMaskBit.LW)) set(IB_LOCAL_WRITE, s.localWrite);
  if (has(w.mask, MkeyMaskBit.RW)) set(IB_REMOTE_WRITE, s.remoteWrite);
  if (has(w.mask, MkeyMaskBit.RR)) set(IB_REMOTE_READ, s.remoteRead);
  if (has(w.mask, MkeyMaskBit.A)) set(IB_REMOTE_ATOMIC, s.atomic);
  return a;
}

/** Does this UMR, on success, release the MR a currently bound window counts on? */
export function releasesWindow(w: UmrWqe, t: MkeyEntry, pol: UmrPolicy): boolean {
  if (t.free || !isWindow(t)) return false;
  if (w.kind === UMR_KIND.LOCAL_INV || w.kind === UMR_KIND.REMOTE_INV) return t.kind === MKEY_KIND_MW2;
  if (w.kind === UMR_KIND.BIND_MW) return t.kind === MKEY_KIND_MW1; // a type-1 rebind (type 2 must be FREE)
  if (w.kind === UMR_KIND.UNBIND) return t.kind === MKEY_KIND_MW1 || pol.type2Unbind === 'invalidate';
  return false;
}

/** Whether a BIND_MW WQE binds (length != 0) rather than unbinds a type-1 window. */
export function bindsSomething(w: UmrWqe, t: MkeyEntry): boolean {
  const len = has(w.mask, MkeyMaskBit.LEN) ? w.seg.len : t.len;
  return w.kind === UMR_KIND.BIND_MW && (len !== 0 || w.seg.len64);
}

/** Bytes of one translation entry of an access mode (0: the mode has no table). */
export function entryBytes(accessMode: number): number {
  // a KSM entry (reserved, key, va) has a KLM's 16 bytes, bcount reserved
  return accessMode === MkcAccessMode.MTT ? MTT_SIZE : accessMode === MkcAccessMode.KLMS || accessMode === MkcAccessMode.KSM ? KLM_SIZE : 0;
}

/** What a UMR writes into the target's translation table. */
export interface XltPlan {
  /** First entry written (xlt_offset in entries). */
  first: number;
  /** Entries written (the list, clipped to the table). */
  count: number;
  /** Entries up to the last non-zero one: the list without the driver's 64-byte padding. */
  used: number;
  /** MTT mode: raw entries; KLMS mode: KLMs. */
  mtt: number[] | null;
  klm: Klm[] | null;
}

/**
 * Checks a translation list against the target's table and decodes it: the capacity is what
 * CREATE_MKEY reserved (translations_octword_size, in the target's access mode), and the list
 * may not reach past it (LOC_QP_OP_ERR; MW_BIND_ERR for a bind). Trailing all-zero entries are
 * the 64-byte padding of spec/mlx5.md ("UMR copies translations in 64-byte units"): they are
 * written while they fit, and never count. Returns the plan or a syndrome.
 */
export function checkTranslations(
  w: UmrWqe,
  t: MkeyEntry,
  ctxOctwords: number,
  tableBytes: number,
  list: Uint8Array,
): XltPlan | number {
  const fail = isBindFamily(w.kind) ? BIND_ERR : QP_OP;
  const eb = entryBytes(t.accessMode);
  if (eb === 0 || t.xltAddr === 0) return fail; // PA mode: no table to write
  const capacity = Math.min(Math.floor((ctxOctwords * DS_SIZE) / eb), Math.floor(tableBytes / eb));
  const first = (w.xltOffsetOcto * DS_SIZE) / eb;
  const all = Math.floor(list.length / eb);
  // the list's bytes read directly: a DataView needs `list.buffer`, which for a small copied
  // list (an inline one, on V8's heap) makes a backing store per UMR
  let used = all;
  while (used > 0 && isZero(list, (used - 1) * eb, eb)) used--;
  if (!Number.isInteger(first) || first + used > capacity) return fail;
  const count = Math.min(all, capacity - first);
  const plan: XltPlan = { first, count, used, mtt: null, klm: null };
  if (eb === MTT_SIZE) {
    plan.mtt = new Array<number>(count);
    for (let i = 0; i < count; i++) plan.mtt[i] = readMttRawAt(list, i * MTT_SIZE);
  } else {
    const view = new DataView(list.buffer, list.byteOffset, list.byteLength);
    plan.klm = new Array<Klm>(count);
    try {
      for (let i = 0; i < count; i++) plan.klm[i] = decodeKlm(view, i * KLM_SIZE);
    } catch {
      return fail; // a va beyond 2^53: not a host address
    }
  }
  return plan;
}

/** Whether the `n` bytes at `off` (an entry: 8 or 16 bytes) are all zero. */
function isZero(b: Uint8Array, off: number, n: number): boolean {
  let x = 0;
  for (let i = 0; i < n; i++) x |= b[off + i];
  return x === 0;
}

/** Checks a translation pointer (non-inline UMR) before it is read: 0 or a syndrome. */
export function checkPointer(w: UmrWqe, memBytes: number): number {
  const p = w.ptr!;
  // the driver's data segment covers the padded list (kernel: byte_count = ALIGN(bytes, 64))
  if (dataSegLength(p.byteCount) < w.xltBytes) return QP_OP;
  if (p.addr + w.xltBytes > memBytes) return PROT;
  return OK;
}

/**
 * Applies the masked fields of the mkey segment to a context (spec/mlx5.md "mkey_mask bits":
 * set = copy that field). ZERO_BASED (a start of 0) goes with START_ADDR.
 */
export function applyMask(c: MkeyContext, p: IcmPrivate, w: UmrWqe): void {
  const s = w.seg;
  const m = w.mask;
  if (has(m, MkeyMaskBit.LEN)) {
    c.len = s.len;
    c.len64 = s.len64;
  }
  if (has(m, MkeyMaskBit.PAGE_SIZE)) c.logPageSize = s.logPageSize;
  if (has(m, MkeyMaskBit.START_ADDR)) {
    // zero-based is what mlx5 makes of it, a start of 0 (wr.c:206 set_reg_mkey_seg writes the
    // iova, 0 for a zero-based MR; an mkey over all of 2^64 starts at 0 too and is not), kept in
    // ICM's private bit; the first byte is at offset 0 of the first page, as start_addr is
    // also the page offset (mlx5_ib.h:1720-1723)
    c.startAddr = s.startAddr;
    p.zeroBased = s.startAddr === 0 && !(has(m, MkeyMaskBit.LEN) ? s.len64 : c.len64);
  }
  if (has(m, MkeyMaskBit.PD)) c.pd = s.pd;
  if (has(m, MkeyMaskBit.EN_RINVAL)) c.remoteInval = s.remoteInval;
  if (has(m, MkeyMaskBit.KEY)) c.tag = s.tag;
  if (has(m, MkeyMaskBit.QPN)) c.qpn = s.qpn;
  if (has(m, MkeyMaskBit.LR)) c.localRead = s.localRead;
  if (has(m, MkeyMaskBit.LW)) c.localWrite = s.localWrite;
  if (has(m, MkeyMaskBit.RR)) c.remoteRead = s.remoteRead;
  if (has(m, MkeyMaskBit.RW)) c.remoteWrite = s.remoteWrite;
  if (has(m, MkeyMaskBit.A)) c.atomic = s.atomic;
  if (has(m, MkeyMaskBit.FREE)) c.free = s.free;
}
