/**
 * Send WQE builder and parser (spec/mlx5.md "Send WQE").
 *
 * Each `build*` function writes one complete WQE at `off` of a DataView, as the kernel's
 * drivers/infiniband/hw/mlx5/wr.c and rdma-core's providers/mlx5/qp.c do with their set_*_seg
 * functions, and returns its size in 16-byte DS (also written into the control segment). The
 * WQE is written contiguously: a caller whose send queue wraps builds into a scratch WQE of
 * MAX_WQEBBS_PER_WQE * 64 bytes and copies it block by block.
 *
 * `parseWqe` is the inverse, used by the hardware's SQ parser: it returns a tagged union of the
 * decoded segments, and reports a malformed WQE as `kind: 'invalid'` instead of throwing, so
 * the hardware can complete it with an error.
 *
 * The builders do not choose fences: the caller passes the mode (the driver's QP chooses it as
 * mlx5 wr.c and libmlx5 do: Qp.fenceOf).
 */

import {
  ATOMIC_SEG_SIZE,
  CTRL_SEG_SIZE,
  CeMode,
  DATA_SEG_SIZE,
  DS_SIZE,
  FenceMode,
  KLM_SIZE,
  MKEY_CONTEXT_SIZE,
  MKEY_QPN_NONE,
  MTT_SIZE,
  MkcAccessMode,
  RADDR_SEG_SIZE,
  UMR_CTRL_SEG_SIZE,
  UmrCtrlFlag,
  WQEBB_SIZE,
  WQE_OPMOD_READ_WITH_INV,
  WqeOpcode,
  dataSegByteCount,
  encodeAtomicOperands,
  encodeCtrlSeg,
  encodeDataSeg,
  encodeInlineSeg,
  encodeKlm,
  encodeMkeyContext,
  encodeMtt,
  encodeRaddrSeg,
  encodeUmrCtrlSeg,
  inlineSegDs,
  mkeyMask,
  mkeyTag,
  zeroMkeyContext,
} from '../rtl/formats/index.ts';
import type {
  AtomicOperands,
  CtrlSeg,
  DataSeg,
  Klm,
  MkeyContext,
  MkeyMaskName,
  RaddrSeg,
} from '../rtl/formats/index.ts';

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/** What every WQE's control segment needs. */
export interface WqeCommonParams {
  /** The WQE's index: the send queue's producer counter, low 16 bits. */
  wqeIndex: number;
  /** The posting QP's number (24 bits). */
  qpn: number;
  /** Write a CQE on success (CeMode.CQ_UPDATE); else only on error. */
  signaled?: boolean;
  /** FenceMode (default NONE). */
  fence?: number;
  /** Solicited event (SE bit). */
  solicited?: boolean;
}

/** One scatter/gather entry. */
export interface Sge {
  /** Virtual address in lkey's space. */
  addr: number;
  /** Bytes, 0 .. 2 GiB; zero-length entries are skipped, as in the kernel and rdma-core. */
  length: number;
  /** Local key. */
  lkey: number;
}

/** The local data of a send or RDMA WQE: pointers, or bytes carried inline in the WQE. */
export interface WqeDataParams {
  /** Data segments, one per non-empty entry. */
  sgList?: readonly Sge[];
  /** Data copied into the WQE (IBV_SEND_INLINE); exclusive with a non-empty sgList. */
  inlineData?: Uint8Array;
}

/** Parameters of a SEND, SEND_IMM or SEND_INVAL WQE. */
export type SendWqeParams = WqeCommonParams &
  WqeDataParams &
  (
    | { opcode: typeof WqeOpcode.SEND }
    | { opcode: typeof WqeOpcode.SEND_IMM; immData: number }
    | { opcode: typeof WqeOpcode.SEND_INVAL; invalidateRkey: number }
  );

/** Parameters of an RDMA_WRITE, RDMA_WRITE_IMM or RDMA_READ WQE. */
export type RdmaWqeParams = WqeCommonParams &
  WqeDataParams & { remoteAddr: number; rkey: number } & (
    | { opcode: typeof WqeOpcode.RDMA_WRITE }
    | { opcode: typeof WqeOpcode.RDMA_WRITE_IMM; immData: number }
    | { opcode: typeof WqeOpcode.RDMA_READ; invalidateRkey?: number }
  );

/** Parameters of an ATOMIC_CS or ATOMIC_FA WQE; sgList is where the original value lands. */
export type AtomicWqeParams = WqeCommonParams & { remoteAddr: number; rkey: number; sgList: readonly Sge[] } & (
    | { opcode: typeof WqeOpcode.ATOMIC_CS; compare: number | bigint; swap: number | bigint }
    | { opcode: typeof WqeOpcode.ATOMIC_FA; add: number | bigint }
  );

/** Access rights of a registration or window (verbs names; local read is always granted). */
export interface MrAccess {
  localWrite?: boolean;
  remoteWrite?: boolean;
  remoteRead?: boolean;
  remoteAtomic?: boolean;
}

/** The translations of a fast registration: MTT pages (MEM_REG) or KLMs (SG_GAPS). */
export type XltList =
  | {
      mode: 'MTT';
      /** Physical (DMA) address of each page, 4 KiB aligned; written as `addr | 3` (RD | WR). */
      pages: readonly number[];
      /** log2 of the page size. */
      logPageSize: number;
    }
  | {
      mode: 'KLM';
      /** KLMs; `key` is the PD's local DMA lkey and `va` the segment's DMA address. */
      klms: readonly Klm[];
    };

/** Parameters of a fast-registration (IB_WR_REG_MR) UMR WQE. */
export interface RegMrWqeParams extends WqeCommonParams {
  /** The new key: it goes to imm, and its tag into the mkey segment. */
  key: number;
  /** The access rights to grant. */
  access: MrAccess;
  /** The MR's first virtual address. */
  iova: number;
  /** The MR's length in bytes. */
  length: number;
  /** The translation list. */
  translations: XltList;
  /** Address of the list in host memory (mr->desc_map); needed when the list exceeds 64 bytes. */
  listAddr?: number;
  /** lkey of listAddr (the PD's local DMA lkey); needed with listAddr. */
  listLkey?: number;
  /**
   * Put A (remote atomic) in the mkey mask even when `access` has no remote atomic, so the
   * mkey's atomic bit is cleared. spec/mlx5.md has A in the mask only "for remote atomic" (the
   * kernel's set_reg_wr: frwr_mkey_mask(atomic = access & REMOTE_ATOMIC)), which would leave an
   * earlier registration's atomic right in place, against semantics.md "REG_MR sets ... access".
   * Documented choice: the driver sets this when an earlier REG_MR of the MR granted it.
   */
  clearAtomic?: boolean;
  /**
   * The last chunk of a translation list over one UMR (mlx5r_umr_update_mr_pas, Linux 6.12
   * drivers/infiniband/hw/mlx5/umr.c:671-750): the data segment covers only `listBytes` (a
   * multiple of 64) of the list at `listAddr`, written at `xltOffsetOcto` octowords into the
   * table with TRANSLATION_OFFSET_EN (umr.c:627-635, :721), while the mkey segment still
   * describes the whole MR.
   */
  chunk?: { xltOffsetOcto: number; listBytes: number };
}

/** Parameters of a LOCAL_INV UMR WQE. */
export interface LocalInvWqeParams extends WqeCommonParams {
  /** The key to invalidate. */
  key: number;
  /**
   * Also give the mkey this tag (mask FREE | KEY): the mkey pool retires a deregistered user
   * MR's key so it no longer names the free mkey (the UMR engine checks it as a LOCAL_INV).
   */
  newTag?: number;
}

/** What a memory window is bound to. */
export interface MwBindInfo {
  /** The MR's lkey (the KLM's key). */
  mrLkey: number;
  /** First address of the window, in the MR's space. */
  addr: number;
  /** Bytes; 0 unbinds. */
  length: number;
  /** The window's access rights. */
  access: MrAccess;
  /** The window's addresses start at 0 (IBV_ACCESS_ZERO_BASED). */
  zeroBased?: boolean;
}

/** Parameters of a BIND_MW UMR WQE (rdma-core set_bind_wr). */
export interface BindMwWqeParams extends WqeCommonParams {
  /** Window type. */
  mwType: 1 | 2;
  /** The window's current rkey: goes to imm (the UMR's target). */
  mwRkey: number;
  /** The rkey after the bind: its tag goes into the mkey segment. */
  newRkey: number;
  /** The binding; absent or length 0 unbinds (invalidates) the window. */
  bind?: MwBindInfo;
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/** Bytes UMR copies translations in (MLX5_IB_UMR_XLT_ALIGNMENT). */
const XLT_ALIGN = 64;
/** Lists up to this many bytes go inline in the UMR WQE (MLX5_IB_SQ_UMR_INLINE_THRESHOLD). */
export const UMR_INLINE_THRESHOLD = 64;
/** Offset of the UMR control segment, the mkey segment and what follows, within a UMR WQE. */
const UMR_CTRL_OFF = CTRL_SEG_SIZE;
const UMR_MKEY_OFF = UMR_CTRL_OFF + UMR_CTRL_SEG_SIZE;
const UMR_XLT_OFF = UMR_MKEY_OFF + MKEY_CONTEXT_SIZE;
/** DS of control + UMR control + mkey segment. */
const UMR_HEADER_DS = UMR_XLT_OFF / DS_SIZE;
/** The largest WQE: ds is 6 bits (63 DS = 1008 bytes, within MAX_WQEBBS_PER_WQE blocks). */
export const MAX_WQE_DS = 63;

function alignUp(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

/** WQEBBs a WQE of `ds` 16-byte units occupies: ceil(ds * 16 / 64). */
export function wqeBasicBlocks(ds: number): number {
  return Math.ceil((ds * DS_SIZE) / WQEBB_SIZE);
}

/** `xlt_octowords` for `bytes` of translations: ALIGN(bytes, 64) / 16 (mlx5r_umr_get_xlt_octo). */
export function xltOctowords(bytes: number): number {
  return alignUp(bytes, XLT_ALIGN) / DS_SIZE;
}

/** Bytes of a translation list: 8 per MTT, 16 per KLM. */
export function xltListBytes(list: XltList): number {
  return list.mode === 'MTT' ? list.pages.length * MTT_SIZE : list.klms.length * KLM_SIZE;
}

/**
 * The mkey segment's translations_octword_size for a fast registration: ALIGN(n, 8) / 2 for n
 * MTTs, twice that for KLMs (kernel wr.c set_reg_mkey_seg: "KLMs take twice the size of MTTs").
 */
export function regMrXltOctSize(list: XltList): number {
  const n = list.mode === 'MTT' ? list.pages.length : list.klms.length;
  const mtts = alignUp(n, 8) / 2;
  return list.mode === 'MTT' ? mtts : mtts * 2;
}

/**
 * Writes a translation list at `off` (inline in a WQE, or the driver's desc_map in host memory),
 * zero-padded to a multiple of 64 bytes; returns the padded size in bytes.
 */
export function encodeXltList(view: DataView, off: number, list: XltList): number {
  const bytes = xltListBytes(list);
  const padded = alignUp(bytes, XLT_ALIGN);
  if (list.mode === 'MTT') {
    for (let i = 0; i < list.pages.length; i++) {
      encodeMtt(view, off + i * MTT_SIZE, { addr: list.pages[i], read: true, write: true });
    }
  } else {
    for (let i = 0; i < list.klms.length; i++) encodeKlm(view, off + i * KLM_SIZE, list.klms[i]);
  }
  // the padding a word at a time (entries are 8 or 16 bytes, the list 64-byte units: whole words)
  for (let b = bytes; b < padded; b += 4) view.setUint32(off + b, 0);
  return padded;
}

/**
 * Segment fields the builders fill and encode at once (the encoders keep nothing): one object
 * each for every WQE posted, none per call.
 */
const CTRL: CtrlSeg = { opmod: 0, wqeIndex: 0, opcode: 0, qpn: 0, ds: 0, signature: 0, fence: 0, ce: 0, se: false, imm: 0 };
const RADDR: RaddrSeg = { raddr: 0, rkey: 0 };
const DATA: DataSeg = { byteCount: 0, inline: false, lkey: 0, addr: 0 };

/** The control segment's fields (the shared CTRL: encode them before the next call). */
function ctrlOf(p: WqeCommonParams, opcode: number, ds: number, imm: number, opmod = 0): CtrlSeg {
  const c = CTRL;
  c.opmod = opmod;
  c.wqeIndex = p.wqeIndex;
  c.opcode = opcode;
  c.qpn = p.qpn;
  c.ds = ds;
  c.signature = 0;
  c.fence = p.fence ?? FenceMode.NONE;
  c.ce = p.signaled ? CeMode.CQ_UPDATE : CeMode.ERROR_ONLY;
  c.se = p.solicited ?? false;
  c.imm = imm;
  return c;
}

/** The remote address segment's fields (the shared RADDR: encode them before the next call). */
function raddrOf(raddr: number, rkey: number): RaddrSeg {
  RADDR.raddr = raddr;
  RADDR.rkey = rkey;
  return RADDR;
}

/** DS the local data of `p` takes (0-length SGEs are skipped: a 0 byte_count would mean 2 GiB). */
function dataDs(p: WqeDataParams): number {
  const sges = p.sgList ?? [];
  if (p.inlineData !== undefined) {
    if (sges.some((s) => s.length !== 0)) throw new Error('a WQE carries inlineData or sgList, not both');
    return p.inlineData.length === 0 ? 0 : inlineSegDs(p.inlineData.length);
  }
  let n = 0;
  for (const s of sges) if (s.length !== 0) n++;
  return n;
}

/** Throws a RangeError, before anything is written, when a WQE would not fit ds's 6 bits. */
function checkWqeDs(ds: number): void {
  if (ds > MAX_WQE_DS) throw new RangeError(`WQE of ${ds} DS exceeds ${MAX_WQE_DS} DS (ds is 6 bits)`);
}

/** Writes the local data (inline or pointer segments) at `off`. */
function writeData(view: DataView, off: number, p: WqeDataParams): void {
  if (p.inlineData !== undefined) {
    if (p.inlineData.length !== 0) encodeInlineSeg(view, off, p.inlineData);
    return;
  }
  let ds = 0;
  const sges = p.sgList;
  if (sges === undefined) return;
  for (let i = 0; i < sges.length; i++) {
    const s = sges[i];
    if (s.length === 0) continue;
    const d = DATA;
    d.byteCount = dataSegByteCount(s.length);
    d.inline = false;
    d.lkey = s.lkey;
    d.addr = s.addr;
    encodeDataSeg(view, off + ds * DS_SIZE, d);
    ds++;
  }
}

function umrPerms(a: MrAccess): Pick<MkeyContext, 'atomic' | 'remoteWrite' | 'remoteRead' | 'localWrite'> {
  return {
    atomic: a.remoteAtomic ?? false,
    remoteWrite: a.remoteWrite ?? false,
    remoteRead: a.remoteRead ?? false,
    localWrite: a.localWrite ?? false,
  };
}

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

/** Writes a SEND / SEND_IMM / SEND_INVAL WQE at `off`; returns its DS. */
export function buildSendWqe(view: DataView, off: number, p: SendWqeParams): number {
  const imm =
    p.opcode === WqeOpcode.SEND_IMM ? p.immData : p.opcode === WqeOpcode.SEND_INVAL ? p.invalidateRkey : 0;
  const ds = 1 + dataDs(p);
  checkWqeDs(ds);
  writeData(view, off + CTRL_SEG_SIZE, p);
  encodeCtrlSeg(view, off, ctrlOf(p, p.opcode, ds, imm));
  return ds;
}

/**
 * Writes an RDMA_WRITE / RDMA_WRITE_IMM / RDMA_READ WQE at `off` (raddr + data); returns its DS.
 * An RDMA_READ with `invalidateRkey` is this model's RDMA_READ_WITH_INV: opmod
 * WQE_OPMOD_READ_WITH_INV and the key in imm (constants.ts).
 */
export function buildRdmaWqe(view: DataView, off: number, p: RdmaWqeParams): number {
  if (p.opcode === WqeOpcode.RDMA_READ && p.inlineData !== undefined) {
    throw new Error('RDMA_READ cannot carry inline data: the read data lands in its sgList');
  }
  const ds = 2 + dataDs(p);
  checkWqeDs(ds);
  encodeRaddrSeg(view, off + CTRL_SEG_SIZE, raddrOf(p.remoteAddr, p.rkey));
  writeData(view, off + CTRL_SEG_SIZE + RADDR_SEG_SIZE, p);
  const inv = p.opcode === WqeOpcode.RDMA_READ ? p.invalidateRkey : undefined;
  const imm = p.opcode === WqeOpcode.RDMA_WRITE_IMM ? p.immData : inv ?? 0;
  encodeCtrlSeg(view, off, ctrlOf(p, p.opcode, ds, imm, inv !== undefined ? WQE_OPMOD_READ_WITH_INV : 0));
  return ds;
}

/** Writes an ATOMIC_CS / ATOMIC_FA WQE at `off` (raddr + atomic + data); returns its DS. */
export function buildAtomicWqe(view: DataView, off: number, p: AtomicWqeParams): number {
  const ds = 3 + dataDs({ sgList: p.sgList });
  checkWqeDs(ds);
  encodeRaddrSeg(view, off + CTRL_SEG_SIZE, raddrOf(p.remoteAddr, p.rkey));
  // any 64-bit operands (a negative one in two's complement: an add of -1 is 2^64 - 1)
  const atomic: AtomicOperands =
    p.opcode === WqeOpcode.ATOMIC_CS ? { swapAdd: BigInt(p.swap), compare: BigInt(p.compare) } : { swapAdd: BigInt(p.add), compare: 0n };
  encodeAtomicOperands(view, off + CTRL_SEG_SIZE + RADDR_SEG_SIZE, atomic);
  writeData(view, off + CTRL_SEG_SIZE + RADDR_SEG_SIZE + ATOMIC_SEG_SIZE, { sgList: p.sgList });
  encodeCtrlSeg(view, off, ctrlOf(p, p.opcode, ds, 0));
  return ds;
}

/**
 * The mkey_mask of a fast registration (kernel wr.c frwr_mkey_mask), with A when `remoteAtomic`
 * (the access grants it, or an earlier grant must be cleared: RegMrWqeParams.clearAtomic).
 */
export function regMrMkeyMask(remoteAtomic: boolean): number {
  return remoteAtomic ? REG_MR_MASK_A : REG_MR_MASK;
}
const REG_MR_MASK_NAMES: readonly MkeyMaskName[] = ['LEN', 'PAGE_SIZE', 'START_ADDR', 'EN_RINVAL', 'KEY', 'LR', 'LW', 'RR', 'RW', 'SMALL_FENCE', 'FREE'];
/** The two masks, computed once (every REG_MR WQE takes one). */
const REG_MR_MASK = mkeyMask(...REG_MR_MASK_NAMES);
const REG_MR_MASK_A = mkeyMask(...REG_MR_MASK_NAMES, 'A');

/**
 * Writes a fast-registration UMR WQE at `off` (kernel wr.c set_reg_wr): control (imm = key),
 * UMR control (flags CHECK_FREE [| INLINE], xlt_octowords = ALIGN(bytes, 64) / 16, the frwr
 * mask), mkey segment, then the list inline (<= 64 bytes, padded to 64) or a data segment
 * pointing at listAddr with byte_count ALIGN(bytes, 64). Returns its DS.
 */
export function buildRegMrWqe(view: DataView, off: number, p: RegMrWqeParams): number {
  const list = p.translations;
  const bytes = p.chunk?.listBytes ?? xltListBytes(list);
  // a list given by address goes behind a data segment whatever its size (mlx5 never inlines
  // translations it loads: umr.c:856); so does a chunk of a longer list
  const inline = p.chunk === undefined && bytes <= UMR_INLINE_THRESHOLD && p.listAddr === undefined;
  if (!inline && (p.listAddr === undefined || p.listLkey === undefined)) {
    throw new Error(`a ${bytes}-byte translation list is not inline: listAddr and listLkey are needed`);
  }
  const xltOffset = p.chunk?.xltOffsetOcto ?? 0;
  const ds = UMR_HEADER_DS + (inline ? xltOctowords(bytes) : DATA_SEG_SIZE / DS_SIZE);
  encodeUmrCtrlSeg(view, off + UMR_CTRL_OFF, {
    flags: UmrCtrlFlag.CHECK_FREE | (inline ? UmrCtrlFlag.INLINE : 0) | (xltOffset > 0 ? UmrCtrlFlag.TRANSLATION_OFFSET_EN : 0),
    xltOctowords: xltOctowords(bytes),
    xltOffset,
    mkeyMask: regMrMkeyMask((p.access.remoteAtomic ?? false) || (p.clearAtomic ?? false)),
  });
  // the whole context in one literal (no spreads: one WQE per registration)
  const a = p.access;
  encodeMkeyContext(view, off + UMR_MKEY_OFF, {
    free: false,
    pcieControl: 0,
    umrEn: true,
    atomic: a.remoteAtomic ?? false,
    remoteWrite: a.remoteWrite ?? false,
    remoteRead: a.remoteRead ?? false,
    localWrite: a.localWrite ?? false,
    localRead: true,
    accessMode: list.mode === 'MTT' ? MkcAccessMode.MTT : MkcAccessMode.KLMS,
    qpn: MKEY_QPN_NONE,
    tag: mkeyTag(p.key),
    len64: false,
    bsfEn: false,
    syncUmr: false,
    remoteInval: true,
    pd: 0,
    startAddr: p.iova,
    len: p.length,
    bsfOctwordSize: 0,
    translationsOctwordSize: regMrXltOctSize(list),
    logPageSize: list.mode === 'MTT' ? list.logPageSize : 0,
  });
  if (inline) {
    encodeXltList(view, off + UMR_XLT_OFF, list);
  } else {
    encodeDataSeg(view, off + UMR_XLT_OFF, {
      byteCount: alignUp(bytes, XLT_ALIGN),
      inline: false,
      lkey: p.listLkey as number,
      addr: p.listAddr as number,
    });
  }
  encodeCtrlSeg(view, off, ctrlOf(p, WqeOpcode.UMR, ds, p.key));
  return ds;
}

/** Parameters of a translation-update UMR WQE (ODP: map or zap pages of an MR, or a KSM entry). */
export interface XltUpdateWqeParams extends WqeCommonParams {
  /** The mkey's key. */
  key: number;
  /** Where the list goes in the mkey's translation table, in octowords (16 bytes). */
  xltOffsetOcto: number;
  /** The entries as the table holds them (big-endian MTTs, or 16-byte KSM entries), a multiple of 64 bytes. */
  list: Uint8Array;
  /** Where the list is when over 64 bytes (a descriptor buffer) and its lkey. */
  listAddr?: number;
  listLkey?: number;
  /**
   * A chunk, not the last, of an enabling translation list (mlx5r_umr_update_mr_pas with
   * MLX5_IB_UPD_XLT_ENABLE, umr.c:671-750): mlx5's CHECK_NOT_FREE, "fail if not free"
   * (`UmrCtrlFlag.CHECK_FREE` here: umr.c:594-599), and TRANSLATION_OFFSET_EN only past the
   * first chunk (umr.c:695 sets none, :721 adds it with the offset); the mask stays 0 (only the
   * last chunk adds the enable, PD, access and translation bits: umr.c:637-668, :747).
   */
  enabling?: boolean;
}

/**
 * Writes a translation-update UMR WQE at `off` as mlx5r_umr_update_xlt does (Linux 6.12
 * drivers/infiniband/hw/mlx5/umr.c:793-857): UMR control flags TRANSLATION_OFFSET_EN
 * (umr.c:628-635 mlx5r_umr_update_offset), xlt_octowords =
 * ALIGN(bytes, 64) / 16, mkey_mask 0 (a zap or map changes no context field: umr.c:637-668
 * adds mask bits only for ENABLE/PD/ACCESS/ADDR), an all-zero mkey segment, and the entries
 * behind a data segment (umr.c:617-624, the list DMA-mapped, lkey the UMR PD's local DMA lkey:
 * mlx5 never sends them inline, umr.c:856 `with_data` true). Inline only when no `listAddr` is
 * given and the list fits 64 bytes (this model's tests post such WQEs). Returns its DS.
 * Flags as mlx5r_umr_set_update_xlt_ctrl_seg (umr.c:591-600): an update that does not enable the
 * mkey (an ODP map or zap, an implicit parent's KSM entries: odp.c:696, :831, :317-330) carries
 * MLX5_UMR_CHECK_FREE, "fail if free" (`UmrCtrlFlag.CHECK_NOT_FREE` here: constants.ts names
 * the bits by what they require); one that enables it, MLX5_UMR_CHECK_NOT_FREE, "fail if not
 * free" (`UmrCtrlFlag.CHECK_FREE`; this driver enables by a REG_MR WQE, buildRegMrWqe, which
 * carries it). A target made free meanwhile (a consumer's LOCAL_INV of an ODP MR, a revoke)
 * fails the update with the check's error, LOC_QP_OP_ERR, and writes nothing.
 */
export function buildXltUpdateWqe(view: DataView, off: number, p: XltUpdateWqeParams): number {
  if (p.list.length % 64 !== 0) throw new Error('a translation update covers whole 64-byte units');
  const bytes = p.list.length;
  const inline = p.listAddr === undefined;
  if (inline && bytes > UMR_INLINE_THRESHOLD) throw new Error(`a ${bytes}-byte translation list is not inline: listAddr and listLkey are needed`);
  const ds = UMR_HEADER_DS + (inline ? xltOctowords(bytes) : DATA_SEG_SIZE / DS_SIZE);
  encodeUmrCtrlSeg(view, off + UMR_CTRL_OFF, {
    flags: (p.enabling === true
      ? UmrCtrlFlag.CHECK_FREE | (p.xltOffsetOcto > 0 ? UmrCtrlFlag.TRANSLATION_OFFSET_EN : 0)
      : UmrCtrlFlag.TRANSLATION_OFFSET_EN | UmrCtrlFlag.CHECK_NOT_FREE) | (inline ? UmrCtrlFlag.INLINE : 0),
    xltOctowords: xltOctowords(bytes),
    xltOffset: p.xltOffsetOcto,
    mkeyMask: 0,
  });
  encodeMkeyContext(view, off + UMR_MKEY_OFF, zeroMkeyContext());
  if (inline) new Uint8Array(view.buffer, view.byteOffset + off + UMR_XLT_OFF, bytes).set(p.list);
  else encodeDataSeg(view, off + UMR_XLT_OFF, { byteCount: alignUp(bytes, XLT_ALIGN), inline: false, lkey: p.listLkey ?? 0, addr: p.listAddr as number });
  // signaled whatever p says (no object spread: on Node 20 one with keys after it costs microseconds)
  const c = ctrlOf(p, WqeOpcode.UMR, ds, p.key);
  c.ce = CeMode.CQ_UPDATE;
  encodeCtrlSeg(view, off, c);
  return ds;
}

export function ksmListBytes(entries: readonly { key: number; va: number }[]): Uint8Array {
  const buf = new Uint8Array(Math.ceil((entries.length * 16) / 64) * 64);
  const v = new DataView(buf.buffer);
  entries.forEach((e, i) => {
    v.setUint32(i * 16 + 4, e.key >>> 0);
    v.setUint32(i * 16 + 8, Math.floor(e.va / 2 ** 32));
    v.setUint32(i * 16 + 12, e.va >>> 0);
  });
  return buf;
}

/** The big-endian bytes of MTT entries (a UMR's translation list behind a data segment). */
export function mttListBytes(entries: readonly number[]): Uint8Array {
  const buf = new Uint8Array(Math.ceil((entries.length * 8) / 64) * 64);
  const v = new DataView(buf.buffer);
  for (let i = 0; i < entries.length; i++) {
    v.setUint32(i * 8, Math.floor(entries[i] / 2 ** 32));
    v.setUint32(i * 8 + 4, entries[i] >>> 0);
  }
  return buf;
}

/**
 * Writes a LOCAL_INV UMR WQE at `off` (kernel wr.c set_linv_umr_seg / set_linv_mkey_seg):
 * imm = key, flags INLINE, mask FREE, xlt_octowords 0, mkey segment zero but status free
 * (with `newTag`: mask FREE | KEY and the tag in the segment). Returns its DS (8).
 */
export function buildLocalInvWqe(view: DataView, off: number, p: LocalInvWqeParams): number {
  encodeUmrCtrlSeg(view, off + UMR_CTRL_OFF, {
    flags: UmrCtrlFlag.INLINE,
    xltOctowords: 0,
    xltOffset: 0,
    mkeyMask: p.newTag === undefined ? mkeyMask('FREE') : mkeyMask('FREE', 'KEY'),
  });
  const seg = zeroMkeyContext(); // a new object: set key by key (not spread: see test/driver/no_spread_then_keys.test.ts)
  seg.free = true;
  seg.tag = p.newTag ?? 0;
  encodeMkeyContext(view, off + UMR_MKEY_OFF, seg);
  encodeCtrlSeg(view, off, ctrlOf(p, WqeOpcode.UMR, UMR_HEADER_DS, p.key));
  return UMR_HEADER_DS;
}

/**
 * Writes a BIND_MW UMR WQE at `off` (rdma-core qp.c set_bind_wr): imm = the window's current
 * rkey; flags INLINE | TRANSLATION_OFFSET_EN, plus CHECK_FREE for a type-2 bind or CHECK_QPN for
 * a type-2 unbind; mask FREE | KEY (+ QPN for type 2), plus LEN | START_ADDR | LW | RR | RW | A
 * when binding; mkey segment with the new tag, the QP (type-2 bind) or 0xffffff, start (0 when
 * zero-based), length and access, or just FREE when unbinding; then one KLM
 * `{ length, mrLkey, addr }` padded to 64 bytes (12 DS in all; 8 when unbinding).
 */
export function buildBindMwWqe(view: DataView, off: number, p: BindMwWqeParams): number {
  const b = p.bind !== undefined && p.bind.length !== 0 ? p.bind : undefined;
  const type2 = p.mwType === 2;
  const names: MkeyMaskName[] = ['FREE', 'KEY'];
  if (type2) names.push('QPN');
  let flags = UmrCtrlFlag.INLINE | UmrCtrlFlag.TRANSLATION_OFFSET_EN;
  if (b !== undefined) {
    names.push('LEN', 'START_ADDR', 'LW', 'RR', 'RW', 'A');
    if (type2) flags |= UmrCtrlFlag.CHECK_FREE;
  } else if (type2) {
    flags |= UmrCtrlFlag.CHECK_QPN;
  }
  const klmBytes = b !== undefined ? KLM_SIZE : 0;
  encodeUmrCtrlSeg(view, off + UMR_CTRL_OFF, {
    flags,
    xltOctowords: xltOctowords(klmBytes),
    xltOffset: 0,
    mkeyMask: mkeyMask(...names),
  });
  const mkey: MkeyContext = zeroMkeyContext(); // a new object, set key by key
  mkey.qpn = type2 && b !== undefined ? p.qpn : MKEY_QPN_NONE;
  mkey.tag = mkeyTag(p.newRkey);
  if (b !== undefined) {
    Object.assign(mkey, umrPerms(b.access));
    mkey.startAddr = b.zeroBased ? 0 : b.addr;
    mkey.len = b.length;
  } else {
    mkey.free = true;
  }
  encodeMkeyContext(view, off + UMR_MKEY_OFF, mkey);
  let ds = UMR_HEADER_DS;
  if (b !== undefined) {
    ds += encodeXltList(view, off + UMR_XLT_OFF, { mode: 'KLM', klms: [{ bcount: b.length, key: b.mrLkey, va: b.addr }] }) / DS_SIZE;
  }
  encodeCtrlSeg(view, off, ctrlOf(p, WqeOpcode.UMR, ds, p.mwRkey));
  return ds;
}

// The parser is the hardware's (the send queue engine reads WQEs): it lives in rtl/formats.
export { parseWqe, type ParsedWqe, type WqeData, type UmrXlt } from '../rtl/formats/wqe_parse.ts';
