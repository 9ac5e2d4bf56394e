/**
 * Types of the untimed reference model of address translation.
 *
 * The model is the oracle of the property tests: it states the translation rules plainly,
 * with no caches, no timing and no byte layouts. Field names follow the mkey context of
 * spec/mlx5.md where one exists.
 */

/** How an mkey maps its virtual range: identity (PA), page table (MTT) or indirect list (KLMS). */
export type AccessMode = 'PA' | 'MTT' | 'KLMS';

/**
 * Access bits of a request and of an mkey, with the values of `ib_access_flags`.
 * Local read has no bit: every mkey grants it and every request may use it.
 */
export const AccessBits = {
  LOCAL_WRITE: 1,
  REMOTE_WRITE: 2,
  REMOTE_READ: 4,
  REMOTE_ATOMIC: 8,
} as const;

/** Every access bit the model knows. */
export const ALL_ACCESS =
  AccessBits.LOCAL_WRITE | AccessBits.REMOTE_WRITE | AccessBits.REMOTE_READ | AccessBits.REMOTE_ATOMIC;

/** The access bits that make the HCA write the page (an atomic reads and writes it). */
export const WRITE_ACCESS = AccessBits.LOCAL_WRITE | AccessBits.REMOTE_WRITE | AccessBits.REMOTE_ATOMIC;

/** The qpn of an mkey that is not bound to a QP (the all-ones 24-bit qpn field). */
export const NOT_BOUND_QPN = 0xffffff;

/** One MTT entry: a page's physical address and its ODP present bits (MLX5_EN_RD / MLX5_EN_WR). */
export interface MttEntry {
  /** Physical address of the page (page-aligned in every real table). */
  addr: number;
  /** MLX5_EN_RD: the page may be read. */
  read: boolean;
  /** MLX5_EN_WR: the page may be written. */
  write: boolean;
}

/** One KLM of an indirect mkey: `bcount` bytes that continue at `va` through `key`. */
export interface Klm {
  /** Bytes this entry covers; 0 means the entry covers nothing and is skipped. */
  bcount: number;
  /** The key through which the bytes are reached (any mode, including KLMS again). */
  key: number;
  /** The virtual address, in `key`'s space, of this entry's first byte. */
  va: number;
}

/** An mkey as the reference model sees it: the meaning of an mkey context and its translations. */
export interface ModelMkey {
  /** Index (bits 31:8 of the key), 24 bits. */
  index: number;
  /** Variant (bits 7:0 of the key), 8 bits. */
  tag: number;
  /** The mkey is disabled (status bit 0x40). */
  free: boolean;
  /** How the range maps to physical memory. */
  accessMode: AccessMode;
  /** The AccessBits mask this mkey grants (local read is always granted). */
  access: number;
  /** Protection domain. */
  pd: number;
  /** The QP a type-2 window is bound to, or NOT_BOUND_QPN. */
  qpn: number;
  /** First virtual address of the range (0 for zero-based). */
  start: number;
  /** Bytes in the range; 0 (without len64) is an unbound window. */
  length: number;
  /** LEN64: the mkey covers every address, so there is no bounds check. */
  len64: boolean;
  /** MTT mode: log2 of the page size (12 or 21 in practice). */
  logPageSize: number;
  /** ODP (pg_access): honour the MTT entries' read/write bits; a missing bit is a page fault. */
  pgAccess: boolean;
  /** MTT mode: one entry per page of the range, the first page being the one holding `start`. */
  mtt: MttEntry[];
  /** KLMS mode: the list walked from `start`. */
  klm: Klm[];
}

/** One translation request: the bytes `[va, va + length)` through `key`, for `access`. */
export interface XlateRequest {
  /** The full 32-bit key (lkey or rkey). */
  key: number;
  /** First virtual address, in the key's space. */
  va: number;
  /** Bytes to translate. */
  length: number;
  /** The AccessBits the access needs (0 = local read). */
  access: number;
  /** PD of the QP that makes the access. */
  pd: number;
  /** The QP that makes the access. */
  qpn: number;
}

/** Why a translation was refused, in the order the checks run. */
export type XlateError = 'INVALID_KEY' | 'FREE' | 'PD' | 'QPN' | 'ACCESS' | 'BOUNDS' | 'INDIRECTION';

/** A run of physically contiguous bytes. */
export interface Segment {
  pa: number;
  length: number;
}

/** The whole range translated; `segments` are merged (see `mergeSegments`). */
export interface XlateOk {
  kind: 'ok';
  segments: Segment[];
}

/** The translation was refused. */
export interface XlateFailure {
  kind: 'error';
  error: XlateError;
  /** The key (outer, or nested in a KLM) whose check failed. */
  key: number;
}

/** A page of an ODP mkey is not present for this access. */
export interface XlateFault {
  kind: 'fault';
  /** Outer (request) va of the first byte that is not present. */
  va: number;
  /** Bytes translated before it, over all pieces. */
  bytesCommitted: number;
  /** The access needed write permission (WRITE_ACCESS), as the EQE's WRITE flag reports. */
  write: boolean;
}

/** The outcome of one translation request. */
export type XlateResult = XlateOk | XlateFailure | XlateFault;
