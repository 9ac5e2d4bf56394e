/**
 * Access checks of the data path (semantics.md "Data path: remote access" and "Data path: local
 * access"), answered by the untimed `translate` over the HCA's mkey mirror, and the gathering and
 * scattering of bytes along the translated host ranges.
 */
import { keyIndex } from '../keys.ts';
import { translate } from '../translate.ts';
import type { Segment, XlateError } from '../types.ts';
import type { HcaState } from './hca.ts';
import { ModelMr, type ModelQp } from './objects.ts';
import { VerbsAccess, type ModelSge } from './types.ts';

/** An access that passed: the host ranges it touches, in order. */
export interface AccessOk {
  ok: true;
  segments: Segment[];
}

/** An access that was refused, with the rule that refused it. */
export interface AccessRefused {
  ok: false;
  rule: string;
  /** An ODP MR's page the process has unmapped (munmap): an access error, not a protection error. */
  odp?: boolean;
}

/** The outcome of one access check. */
export type AccessResult = AccessOk | AccessRefused;

/** The remote access checks of semantics.md, numbered as there, by translate's error. */
const REMOTE_RULE: Record<XlateError, string> = {
  INVALID_KEY: '1: the full key (tag) must match',
  FREE: '2: the MR/window must be VALID (a window with length != 0)',
  PD: '3: PD of the MR/window must be the responder QP\'s PD',
  QPN: '3: a type-2 window is usable only on the QP it was bound to',
  ACCESS: '4: the MR/window must grant the remote access',
  BOUNDS: '5: [va, va + len) must lie inside the MR/window',
  INDIRECTION: 'too many levels of indirection (not reachable in the verbs model)',
};

/** The local access checks of semantics.md, by translate's error. */
const LOCAL_RULE: Record<XlateError, string> = {
  INVALID_KEY: 'lkey: full key match',
  FREE: 'lkey: the MR must be VALID',
  PD: 'lkey: the MR\'s PD must be the QP\'s PD',
  QPN: 'lkey: QP mismatch (not reachable for an MR)',
  ACCESS: 'lkey: the HCA writes here, so the MR needs LOCAL_WRITE',
  BOUNDS: 'lkey: the SGE must lie inside the MR',
  INDIRECTION: 'too many levels of indirection (not reachable in the verbs model)',
};

/**
 * Remote access at the responder (semantics.md "Data path: remote access", checks 1-5):
 * `length` bytes at `va` through `rkey`, needing the VerbsAccess bit `need`, for the responder
 * QP `qp`. A window maps to its MR at `mw.addr + offset` (through its KLM).
 */
export function checkRemote(
  hca: HcaState,
  qp: ModelQp,
  rkey: number,
  va: number,
  length: number,
  need: number,
): AccessResult {
  // "a zero-length READ/WRITE checks nothing".
  if (length === 0) return { ok: true, segments: [] };
  // 1. the rkey's index names an MR or a window ...
  if (!hca.objects.has(keyIndex(rkey))) return refused('1: the rkey\'s index must name an MR or a window');
  // ... and 1 (full key), 2 (VALID), 3 (PD, type-2 QP), 4 (access), 5 (bounds), in that order.
  const r = translate(hca.table, { key: rkey, va, length, access: need, pd: qp.pd.pdn, qpn: qp.qpNum });
  if (r.kind === 'ok') return odpChecked(hca, rkey, r.segments);
  if (r.kind === 'error') return refused(REMOTE_RULE[r.error]);
  return refused('page fault (not reachable: the verbs model has no ODP)');
}

/**
 * Local access through an SGE (semantics.md "Data path: local access"): lkey lookup with full key
 * match, VALID, PD == QP's PD, bounds, and LOCAL_WRITE when `write` (the HCA writes there).
 * A zero-length SGE checks nothing (the driver skips it). Only an MR's key is an lkey.
 */
export function checkLocal(hca: HcaState, qp: ModelQp, sge: ModelSge, write: boolean): AccessResult {
  if (sge.length === 0) return { ok: true, segments: [] };
  if (!(hca.objects.get(keyIndex(sge.lkey)) instanceof ModelMr)) {
    return refused('lkey: the index must name an MR (a window key is not an lkey)');
  }
  const need = write ? VerbsAccess.LOCAL_WRITE : 0;
  const r = translate(hca.table, { key: sge.lkey, va: sge.addr, length: sge.length, access: need, pd: qp.pd.pdn, qpn: qp.qpNum });
  if (r.kind === 'ok') return odpChecked(hca, sge.lkey, r.segments);
  if (r.kind === 'error') return refused(LOCAL_RULE[r.error]);
  return refused('page fault (not reachable: the verbs model has no ODP)');
}

/**
 * Checks every SGE of `sgList` for the HCA reading it (`write` false) or writing it (`write`
 * true, the whole list is the destination, e.g. an RDMA READ's). Refused at the first bad SGE.
 */
export function checkLocalList(hca: HcaState, qp: ModelQp, sgList: readonly ModelSge[], write: boolean): AccessResult {
  const segments: Segment[] = [];
  for (const sge of sgList) {
    const r = checkLocal(hca, qp, sge, write);
    if (!r.ok) return r;
    segments.push(...r.segments);
  }
  return { ok: true, segments };
}

/** Where a receive buffer takes a message: its host ranges, or why not. */
export type ScatterPlan =
  | { kind: 'ok'; segments: Segment[] }
  | { kind: 'prot'; rule: string }
  | { kind: 'odp'; rule: string }
  | { kind: 'len'; rule: string };

/**
 * A receive WR's SGEs taking a `length`-byte message, filled in order: each SGE is checked only
 * for the bytes it takes (LOCAL_WRITE included); a bad SGE is a protection error; SGEs too short
 * in total is a length error (an earlier bad SGE wins, as the HCA meets it first).
 */
export function planScatter(hca: HcaState, qp: ModelQp, sgList: readonly ModelSge[], length: number): ScatterPlan {
  const segments: Segment[] = [];
  let left = length;
  for (const sge of sgList) {
    if (left === 0) break;
    const take = Math.min(left, sge.length);
    const r = checkLocal(hca, qp, { addr: sge.addr, length: take, lkey: sge.lkey }, true);
    if (!r.ok) return { kind: r.odp === true ? 'odp' : 'prot', rule: r.rule };
    segments.push(...r.segments);
    left -= take;
  }
  if (left > 0) return { kind: 'len', rule: 'receive buffer too small for the message' };
  return { kind: 'ok', segments };
}

/**
 * An ODP MR behaves as a pinned one (spec/semantics.md "On-demand paging"), except that a page
 * the process unmapped (munmap) cannot be faulted in: the access fails (an access error).
 */
function odpChecked(hca: HcaState, key: number, segments: Segment[]): AccessResult {
  const o = hca.objects.get(keyIndex(key));
  if (o instanceof ModelMr && (o.dev.access & VerbsAccess.ON_DEMAND) !== 0) {
    for (const sg of segments) if (!hca.host.isMapped(sg.pa, sg.length)) return { ok: false, rule: 'ODP: a page of the range is not mapped in the process (munmap)', odp: true };
  }
  return { ok: true, segments };
}

function refused(rule: string): AccessRefused {
  return { ok: false, rule };
}
