/**
 * The key-changing work requests and their asynchronous outcomes (semantics.md "Work requests
 * (async outcomes)" and "Remote invalidate"): REG_MR, LOCAL_INV, BIND_MW (both types) and the
 * responder's invalidation of SEND_WITH_INV. Each returns the completion status and, on
 * success only, changes the device state (and its mkey mirror).
 */
import { keyIndex } from '../keys.ts';
import type { HcaState } from './hca.ts';
import { ModelMr, ModelMw, type BindRequest, type ModelQp, type RegSnapshot } from './objects.ts';
import { VerbsAccess } from './types.ts';

/** The outcome of a key-changing operation: success, or the failure status and the rule. */
export type KeyOpResult<S extends string> = { ok: true } | { ok: false; status: S; rule: string };

const OK = { ok: true } as const;

/**
 * REG_MR: registers `mr` with `key` (same index, new tag), `access` and the list snapshot taken at
 * post time. The MR must be FREE (UMR "must be free"), else LOC_QP_OP_ERR.
 * Success: tag, iova (0 when zero-based), length, access and list set; state VALID.
 */
export function fastRegister(
  hca: HcaState,
  mr: ModelMr,
  key: number,
  access: number,
  snapshot: RegSnapshot,
): KeyOpResult<'LOC_QP_OP_ERR'> {
  // Deregistered after the post: nothing to register (the UMR names a destroyed mkey).
  if (mr.destroyed) return fail('LOC_QP_OP_ERR', 'REG_MR: the MR no longer exists');
  // REG_MR: "MR must be FREE (UMR 'must be free')".
  if (mr.dev.state !== 'FREE') return fail('LOC_QP_OP_ERR', 'REG_MR: the MR must be FREE');
  mr.dev.key = key;
  mr.dev.state = 'VALID';
  mr.dev.iova = (access & VerbsAccess.ZERO_BASED) !== 0 ? 0 : snapshot.iova;
  mr.dev.length = snapshot.length;
  mr.dev.access = access;
  mr.dev.extents = snapshot.extents.map((e) => ({ ...e }));
  hca.sync(mr);
  return OK;
}

/**
 * LOCAL_INV of `key` (semantics.md rows "LOCAL_INV"):
 * - the key must name an MR or a type-2 window, full 32-bit key match: else LOC_QP_OP_ERR;
 * - a type-1 window is never invalidated (o10-37.2.26): LOC_QP_OP_ERR;
 * - an MR with windows still bound: LOC_QP_OP_ERR;
 * - a target already FREE: success, nothing changes (no check flag in the UMR).
 * Success: the MR or window is FREE (a user MR too: it is UMR-enabled on mlx5).
 */
export function localInvalidate(hca: HcaState, key: number): KeyOpResult<'LOC_QP_OP_ERR'> {
  const obj = hca.objects.get(keyIndex(key));
  if (obj === undefined) return fail('LOC_QP_OP_ERR', 'LOCAL_INV: the key must name an MR or a type-2 window');
  if (obj.dev.key !== key) return fail('LOC_QP_OP_ERR', 'LOCAL_INV: full 32-bit key match');
  if (obj instanceof ModelMw && obj.type === 1) {
    return fail('LOC_QP_OP_ERR', 'LOCAL_INV: a type-1 window cannot be invalidated (o10-37.2.26)');
  }
  if (obj instanceof ModelMr && obj.boundWindows > 0) {
    return fail('LOC_QP_OP_ERR', 'LOCAL_INV: the MR still has windows bound');
  }
  invalidate(hca, obj);
  return OK;
}

/**
 * The responder's invalidation of SEND_WITH_INV's `invalidateRkey` (semantics.md "Remote
 * invalidate"): the key must name a fast-registration MR (remote invalidation allowed) or a
 * type-2 window, full key match, same PD as the responder QP, and an MR with no windows bound.
 * Failure: REM_INV_REQ_ERR and the key stays valid. A target already FREE: success (as LOCAL_INV).
 */
export function remoteInvalidate(hca: HcaState, qp: ModelQp, key: number): KeyOpResult<'REM_INV_REQ_ERR'> {
  const obj = hca.objects.get(keyIndex(key));
  if (obj === undefined) return fail('REM_INV_REQ_ERR', 'remote invalidate: the key must name an MR or a type-2 window');
  if (obj.dev.key !== key) return fail('REM_INV_REQ_ERR', 'remote invalidate: full key match');
  if (obj instanceof ModelMr && obj.type === 'USER') {
    return fail('REM_INV_REQ_ERR', 'remote invalidate: a user MR does not allow remote invalidation (no en_rinval)');
  }
  if (obj instanceof ModelMw && obj.type === 1) {
    return fail('REM_INV_REQ_ERR', 'remote invalidate: a type-1 window cannot be invalidated');
  }
  if (obj.pd !== qp.pd) return fail('REM_INV_REQ_ERR', 'remote invalidate: the target must be in the responder QP\'s PD');
  if (obj instanceof ModelMr && obj.boundWindows > 0) {
    return fail('REM_INV_REQ_ERR', 'remote invalidate: the MR still has windows bound');
  }
  invalidate(hca, obj);
  return OK;
}

/**
 * BIND_MW, posted (type 2) or from the bindMw verb (type 1), executing on `qp`
 * (semantics.md rows "BIND_MW"); any failure is MW_BIND_ERR:
 * - (2) the window must be FREE (o10-37.2.30); the QP's PD == the window's PD (C10-72);
 *   an MR given and length != 0 (o10-37.2.40);
 * - (1, 2) with an MR and length != 0 (a type-1 bind of length 0 unbinds and checks no MR):
 *   the MR VALID and its key current (not its MW_BIND access, as on mlx5); a window REMOTE_WRITE or
 *   REMOTE_ATOMIC needs MR LOCAL_WRITE (C10-74); the range inside the MR (C10-75).
 * Success: the window's key (new tag), range, access, QP (type 2), state VALID (FREE for a
 * type-1 unbind), and one more window counted on the MR (one less on the MR it left).
 */
export function bindWindow(hca: HcaState, qp: ModelQp, b: BindRequest): KeyOpResult<'MW_BIND_ERR'> {
  const mw = b.mw;
  if (mw.destroyed) return fail('MW_BIND_ERR', 'BIND_MW: the window no longer exists');
  if (mw.type === 2) {
    // o10-37.2.30
    if (mw.dev.state !== 'FREE') return fail('MW_BIND_ERR', 'BIND_MW (2): the window must be FREE (o10-37.2.30)');
    // C10-72
    if (qp.pd !== mw.pd) return fail('MW_BIND_ERR', 'BIND_MW (2): the QP\'s PD must be the window\'s PD (C10-72)');
    // o10-37.2.40
    if (b.mr === undefined || b.length === 0) {
      return fail('MW_BIND_ERR', 'BIND_MW (2): an MR and a length != 0 are required (o10-37.2.40)');
    }
  }
  const mr = b.length !== 0 ? b.mr : undefined;
  if (mr !== undefined) {
    // "MR must be VALID, its key current".
    if (mr.destroyed || mr.dev.state !== 'VALID' || mr.dev.key !== b.mrKey) {
      return fail('MW_BIND_ERR', 'BIND_MW: the MR must be VALID and its key current');
    }
    // Choice (semantics.md silent): a type-2 window and its MR share a PD (the type-1 verb checks it, EPERM).
    if (mr.pd !== mw.pd) return fail('MW_BIND_ERR', 'BIND_MW: the MR must be in the window\'s PD');
    // Choice (rxe, for both types; the type-1 verb checks it synchronously): no window on a zero-based MR.
    if ((mr.dev.access & VerbsAccess.ZERO_BASED) !== 0) {
      return fail('MW_BIND_ERR', 'BIND_MW: the MR must not be zero-based');
    }
    // No C10-73 (the MR's MW_BIND access): mlx5 has no mkey bit for it and rdma-core checks it
    // only in an MLX5_MW_DEBUG build (providers/mlx5/qp.c set_bind_wr; off by default).
    // C10-74
    const writes = VerbsAccess.REMOTE_WRITE | VerbsAccess.REMOTE_ATOMIC;
    if ((b.access & writes) !== 0 && (mr.dev.access & VerbsAccess.LOCAL_WRITE) === 0) {
      return fail('MW_BIND_ERR', 'BIND_MW: a window with REMOTE_WRITE or REMOTE_ATOMIC needs MR LOCAL_WRITE (C10-74)');
    }
    // C10-75
    if (b.addr < mr.dev.iova || b.addr + b.length > mr.dev.iova + mr.dev.length) {
      return fail('MW_BIND_ERR', 'BIND_MW: the window must lie inside the MR (C10-75)');
    }
  }
  // Success. The MR the window leaves (a type-1 rebind or unbind) counts one window less.
  if (mw.dev.mr !== undefined) releaseMr(hca, mw.dev.mr);
  mw.dev.key = b.newRkey;
  mw.dev.addr = mr !== undefined ? b.addr : 0;
  mw.dev.length = mr !== undefined ? b.length : 0;
  mw.dev.access = mr !== undefined ? b.access : 0;
  mw.dev.state = mr !== undefined ? 'VALID' : 'FREE';
  mw.dev.qp = mw.type === 2 ? qp : undefined;
  mw.dev.mr = mr;
  if (mr !== undefined) {
    mr.boundWindows += 1;
    hca.sync(mr);
  }
  hca.sync(mw);
  return OK;
}

/**
 * Makes an MR or window FREE (keeping its key, so a repeated invalidation still matches). A
 * window drops its binding, and its MR counts one window less.
 */
export function invalidate(hca: HcaState, obj: ModelMr | ModelMw): void {
  if (obj instanceof ModelMr) {
    obj.dev.state = 'FREE';
    hca.sync(obj);
    return;
  }
  releaseWindow(hca, obj);
  obj.dev.state = 'FREE';
  hca.sync(obj);
}

/** Unbinds `mw` from its MR and QP (invalidate, dealloc). */
export function releaseWindow(hca: HcaState, mw: ModelMw): void {
  if (mw.dev.mr !== undefined) releaseMr(hca, mw.dev.mr);
  mw.dev.mr = undefined;
  mw.dev.qp = undefined;
  mw.dev.addr = 0;
  mw.dev.length = 0;
  mw.dev.access = 0;
}

function releaseMr(hca: HcaState, mr: ModelMr): void {
  mr.boundWindows -= 1;
  if (!mr.destroyed) hca.sync(mr);
}

function fail<S extends string>(status: S, rule: string): KeyOpResult<S> {
  return { ok: false, status, rule };
}
