/**
 * The untimed reference translation: (key, va, length, access, pd, qpn) to physical segments,
 * an error, or an ODP page fault. It mirrors the rules of spec/semantics.md "Data path" and the
 * translation entries of spec/mlx5.md, one check after the other, with no caching.
 */
import { keyIndex, keyTag } from './keys.ts';
import type { MkeyTable } from './mkey_table.ts';
import {
  NOT_BOUND_QPN,
  WRITE_ACCESS,
  type ModelMkey,
  type Segment,
  type XlateError,
  type XlateFailure,
  type XlateFault,
  type XlateRequest,
  type XlateResult,
} from './types.ts';

/** Options of `translate`. */
export interface TranslateOptions {
  /** The device's max_indirection: how many KLMS mkeys one path may go through. */
  maxIndirection: number;
}

/** The default max_indirection of the model. */
export const DEFAULT_MAX_INDIRECTION = 4;

/** What stops a translation before its end. */
type Stop = XlateFailure | XlateFault;

/** State shared by every piece of one request. */
interface Walk {
  readonly table: MkeyTable;
  /** The request needs write permission on every page it touches. */
  readonly needWrite: boolean;
  readonly maxIndirection: number;
  /** Pieces in va order, not yet merged. */
  readonly segments: Segment[];
  /** Bytes translated so far, over all pieces (the fault's bytes_committed). */
  committed: number;
}

/**
 * Translates `req` through `table`.
 *
 * Rules, in order (the first failure wins):
 * - length 0: ok with no segments, before any lookup ("a zero-length READ/WRITE checks nothing");
 * - the outer key: INVALID_KEY, FREE, PD, QPN, ACCESS, BOUNDS (see the body);
 * - then the range is translated piece by piece by increasing va; the first error or fault met
 *   ends the translation, even if later pieces would have failed differently.
 */
export function translate(
  table: MkeyTable,
  req: XlateRequest,
  opts: Partial<TranslateOptions> = {},
): XlateResult {
  if (req.length === 0) return { kind: 'ok', segments: [] };

  const mkey = table.get(keyIndex(req.key));
  // (1) The index must hold an mkey and the full key must match (a stale tag is an invalid key).
  if (mkey === undefined || mkey.tag !== keyTag(req.key)) return failure('INVALID_KEY', req.key);
  // (2) Disabled mkeys, and windows bound with length 0 (unbound), are not valid.
  if (isFree(mkey)) return failure('FREE', req.key);
  // (3) PD first, then the QP a type-2 window is bound to.
  if (mkey.pd !== req.pd) return failure('PD', req.key);
  if (mkey.qpn !== NOT_BOUND_QPN && mkey.qpn !== req.qpn) return failure('QPN', req.key);
  // (4) Every bit the access needs must be granted (local read needs no bit).
  if ((req.access & ~mkey.access) !== 0) return failure('ACCESS', req.key);
  // (5) The whole range inside the mkey's, unless LEN64 (zero-based mkeys have start 0).
  if (!inBounds(mkey, req.va, req.length)) return failure('BOUNDS', req.key);

  const walk: Walk = {
    table,
    needWrite: (req.access & WRITE_ACCESS) !== 0,
    maxIndirection: opts.maxIndirection ?? DEFAULT_MAX_INDIRECTION,
    segments: [],
    committed: 0,
  };
  const stop = mapRange(walk, mkey, req.key, req.va, req.length, req.va, 0);
  if (stop !== undefined) return stop;
  return { kind: 'ok', segments: mergeSegments(walk.segments) };
}

/**
 * The canonical form of a segment list: zero-length segments dropped, and each segment that
 * starts where the previous one ends merged into it. Returns a new array; the input is kept.
 */
export function mergeSegments(segs: readonly Segment[]): Segment[] {
  const out: Segment[] = [];
  for (const seg of segs) {
    if (seg.length === 0) continue;
    const prev = out[out.length - 1];
    if (prev !== undefined && prev.pa + prev.length === seg.pa) {
      prev.length += seg.length;
    } else {
      out.push({ pa: seg.pa, length: seg.length });
    }
  }
  return out;
}

/**
 * Translates `[va, va + length)` of an mkey whose own checks have passed.
 * `outerVa` is the request va of this range's first byte (a fault reports the outer va);
 * `klmsAbove` counts the KLMS mkeys already on the path.
 */
function mapRange(
  walk: Walk,
  mkey: ModelMkey,
  key: number,
  va: number,
  length: number,
  outerVa: number,
  klmsAbove: number,
): Stop | undefined {
  switch (mkey.accessMode) {
    case 'PA':
      // No translation: the va is the physical address.
      emit(walk, va, length);
      return undefined;
    case 'MTT':
      return mapMtt(walk, mkey, key, va, length, outerVa);
    case 'KLMS':
      return mapKlms(walk, mkey, key, va, length, outerVa, klmsAbove + 1);
  }
}

/**
 * MTT mode: one piece per page. Pages form the grid that starts at the page holding `start`
 * (entry index = (a - start + start % P) / P, spec/mlx5.md), so `start` may be unaligned: it is
 * both the mkey's iova and its first byte's page offset (Linux 6.12 mlx5_ib.h:1720-1723), so a
 * zero-based mkey (start 0) starts at byte 0 of its first page.
 */
function mapMtt(
  walk: Walk,
  mkey: ModelMkey,
  key: number,
  va: number,
  length: number,
  outerVa: number,
): Stop | undefined {
  const pageSize = 2 ** mkey.logPageSize;
  const firstPageOffset = mkey.start % pageSize;
  let done = 0;
  while (done < length) {
    const rel = va + done - mkey.start + firstPageOffset;
    // rel < 0 is only reachable on a LEN64 mkey (no bounds check): no entry maps it.
    if (rel < 0) return failure('BOUNDS', key);
    const entryIndex = Math.floor(rel / pageSize);
    const offsetInPage = rel % pageSize;
    const pieceLength = Math.min(length - done, pageSize - offsetInPage);
    // A range longer than its translation table: no entry, so out of bounds.
    if (entryIndex >= mkey.mtt.length) return failure('BOUNDS', key);
    const entry = mkey.mtt[entryIndex];
    // ODP: every access needs RD; writes (and atomics) need WR too. Without pg_access the
    // bits are not looked at (a pinned MR's entries are always usable).
    if (mkey.pgAccess && !(entry.read && (entry.write || !walk.needWrite))) {
      return { kind: 'fault', va: outerVa + done, bytesCommitted: walk.committed, write: walk.needWrite };
    }
    emit(walk, entry.addr + offsetInPage, pieceLength);
    done += pieceLength;
  }
  return undefined;
}

/**
 * KLMS mode: walk the list from offset va - start, subtracting each bcount until the offset
 * falls inside an entry; each piece goes through the entry's key (nested rules), and the rest
 * continues at the start of the next entries. `depth` counts this mkey among the KLMS ones.
 */
function mapKlms(
  walk: Walk,
  mkey: ModelMkey,
  key: number,
  va: number,
  length: number,
  outerVa: number,
  depth: number,
): Stop | undefined {
  // The walker checks its depth when it is about to walk a list (after this mkey's own checks).
  if (depth > walk.maxIndirection) return failure('INDIRECTION', key);
  let offset = va - mkey.start;
  // offset < 0 is only reachable on a LEN64 mkey (no bounds check): no entry maps it.
  if (offset < 0) return failure('BOUNDS', key);
  let done = 0;
  for (const klm of mkey.klm) {
    if (done === length) break;
    // Entries wholly before the offset are skipped; so are entries with bcount 0.
    if (offset >= klm.bcount) {
      offset -= klm.bcount;
      continue;
    }
    const pieceLength = Math.min(length - done, klm.bcount - offset);
    const stop = mapNested(walk, klm.key, klm.va + offset, pieceLength, outerVa + done, depth);
    if (stop !== undefined) return stop;
    done += pieceLength;
    offset = 0;
  }
  // The list ended before the range did.
  if (done < length) return failure('BOUNDS', key);
  return undefined;
}

/**
 * A piece through a KLM's key. Nested keys get only the checks that reach memory: the key
 * (INVALID_KEY), valid (FREE, same definition as the outer key) and bounds (BOUNDS). No PD, QPN
 * or access check: the outer mkey's permissions apply, the HCA uses the KLM's key only to
 * reach memory.
 */
function mapNested(
  walk: Walk,
  key: number,
  va: number,
  length: number,
  outerVa: number,
  klmsAbove: number,
): Stop | undefined {
  const mkey = walk.table.get(keyIndex(key));
  if (mkey === undefined || mkey.tag !== keyTag(key)) return failure('INVALID_KEY', key);
  if (isFree(mkey)) return failure('FREE', key);
  if (!inBounds(mkey, va, length)) return failure('BOUNDS', key);
  return mapRange(walk, mkey, key, va, length, outerVa, klmsAbove);
}

/** Disabled, or a window with length 0 (unbound); a LEN64 mkey's length field means nothing. */
function isFree(mkey: ModelMkey): boolean {
  return mkey.free || (!mkey.len64 && mkey.length === 0);
}

/** `[va, va + length)` inside `[start, start + mkey length)`, or any range when LEN64. */
function inBounds(mkey: ModelMkey, va: number, length: number): boolean {
  if (mkey.len64) return true;
  return va >= mkey.start && va + length <= mkey.start + mkey.length;
}

/** Records one translated piece. */
function emit(walk: Walk, pa: number, length: number): void {
  walk.segments.push({ pa, length });
  walk.committed += length;
}

function failure(error: XlateError, key: number): XlateFailure {
  return { kind: 'error', error, key };
}
