/** semantics.md "Remote invalidate (SEND_WITH_INV)". */
import { describe, expect, it } from 'vitest';
import { incRkey, type ModelMr } from '../../../src/model/index.ts';
import { A, ALL, pattern, postRecvAt, run, setup, statuses, type Env } from './helpers.ts';

/** A registered fast-registration MR on side b over b.buf + 0x800 (64 bytes). */
function fastMrB(env: Env, access = ALL): ModelMr {
  const mr = env.m.allocMr(env.b.pd, 'MEM_REG', 1);
  env.m.mapSg(mr, [{ addr: env.b.buf + 0x800, length: 64 }]);
  expect(statuses(run(env, env.b, { wrId: 900, opcode: 'REG_MR', mr, key: mr.lkey, access, signaled: true }))).toEqual(['SUCCESS']);
  return mr;
}

/** A 4-byte SEND_WITH_INV from a to b (receive posted at b.buf), invalidating `key`. */
function sendInv(env: Env, key: number) {
  postRecvAt(env, env.b, 50, 0, 64);
  env.m.memWrite(0, env.a.buf, pattern(4));
  const req = run(env, env.a, { wrId: 1, opcode: 'SEND_WITH_INV', invalidateRkey: key, sgList: [{ addr: env.a.buf, length: 4, lkey: env.a.mr.lkey }], signaled: true });
  return { req, resp: env.m.pollCq(env.b.cq) };
}

/** Asserts the failure outcome: receive REM_INV_REQ_ERR, responder ERR, data placed, requester SEND success. */
function expectInvFailure(env: Env, out: ReturnType<typeof sendInv>): void {
  expect(out.req).toMatchObject([{ wrId: 1, status: 'SUCCESS', opcode: 'SEND', byteLen: 4 }]);
  expect(out.resp).toMatchObject([{ wrId: 50, status: 'REM_INV_REQ_ERR', opcode: 'RECV' }]);
  expect(out.resp[0].invalidatedRkey).toBeUndefined();
  expect(env.b.qp.state).toBe('ERR');
  expect(env.a.qp.state).toBe('RTS');
  expect([...env.m.memRead(1, env.b.buf, 4)]).toEqual([1, 2, 3, 4]);
}

describe('SEND_WITH_INV success', () => {
  it('a fast-registration MR: RECV with WITH_INV and invalidatedRkey; the MR is FREE', () => {
    const env = setup();
    const mr = fastMrB(env);
    const out = sendInv(env, mr.rkey);
    expect(out.req).toMatchObject([{ status: 'SUCCESS', opcode: 'SEND' }]);
    expect(out.resp).toMatchObject([{ wrId: 50, status: 'SUCCESS', opcode: 'RECV', byteLen: 4, invalidatedRkey: mr.rkey }]);
    expect([...out.resp[0].wcFlags]).toEqual(['WITH_INV']);
    expect(env.m.keyState(mr.rkey, 1)).toMatchObject({ state: 'FREE' });
    expect([...env.m.memRead(1, env.b.buf, 4)]).toEqual([1, 2, 3, 4]);
    expect(env.b.qp.state).toBe('RTS');
  });
  it('a type-2 window: FREE, its MR counts one window less', () => {
    const env = setup();
    const mw = env.m.allocMw(env.b.pd, 2);
    const bind = run(env, env.b, { wrId: 2, opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: { mr: env.b.mr, addr: env.b.buf, length: 8, access: A.REMOTE_READ }, signaled: true });
    expect(statuses(bind)).toEqual(['SUCCESS']);
    const out = sendInv(env, mw.rkey);
    expect(out.resp).toMatchObject([{ status: 'SUCCESS', invalidatedRkey: mw.rkey }]);
    expect(env.m.keyState(mw.rkey, 1)).toMatchObject({ kind: 'MW', state: 'FREE' });
    expect(env.m.keyState(env.b.mr.lkey, 1)).toMatchObject({ boundWindows: 0 });
  });
  it('a target already FREE (key matching) succeeds as LOCAL_INV does', () => {
    const env = setup();
    const mr = env.m.allocMr(env.b.pd, 'SG_GAPS', 1);
    expect(sendInv(env, mr.rkey).resp).toMatchObject([{ status: 'SUCCESS', invalidatedRkey: mr.rkey }]);
  });
});

describe('SEND_WITH_INV failure: receive REM_INV_REQ_ERR, responder ERR, key stays valid, requester SEND', () => {
  it('a user MR (no remote invalidation)', () => {
    const env = setup();
    expectInvFailure(env, sendInv(env, env.b.mr.rkey));
    expect(env.m.keyState(env.b.mr.rkey, 1)).toMatchObject({ state: 'VALID' });
  });
  it('a type-1 window', () => {
    const env = setup();
    const mw = env.m.allocMw(env.b.pd, 1);
    env.m.bindMw(env.b.qp, mw, { mr: env.b.mr, addr: env.b.buf, length: 8, access: A.REMOTE_READ });
    env.m.runToCompletion();
    expectInvFailure(env, sendInv(env, mw.rkey));
    expect(env.m.keyState(mw.rkey, 1)).toMatchObject({ state: 'VALID' });
  });
  it('no full key match', () => {
    const env = setup();
    const mr = fastMrB(env);
    expectInvFailure(env, sendInv(env, incRkey(mr.rkey)));
    expect(env.m.keyState(mr.rkey, 1)).toMatchObject({ state: 'VALID' });
  });
  it('an index that names nothing', () => {
    const env = setup();
    expectInvFailure(env, sendInv(env, 0x777701));
  });
  it('another PD', () => {
    const env = setup();
    const pd2 = env.m.allocPd(1);
    const mr = env.m.allocMr(pd2, 'MEM_REG', 1);
    env.m.mapSg(mr, [{ addr: env.b.buf, length: 64 }]);
    // Registered through a QP of the MR's PD? REG_MR checks no PD, so b's QP will do.
    expect(statuses(run(env, env.b, { wrId: 9, opcode: 'REG_MR', mr, key: mr.lkey, access: 0, signaled: true }))).toEqual(['SUCCESS']);
    expectInvFailure(env, sendInv(env, mr.rkey));
    expect(env.m.keyState(mr.rkey, 1)).toMatchObject({ state: 'VALID' });
  });
  it('an MR with windows bound', () => {
    const env = setup();
    const mr = fastMrB(env);
    const mw = env.m.allocMw(env.b.pd, 1);
    env.m.bindMw(env.b.qp, mw, { mr, addr: mr.iova, length: 8, access: A.REMOTE_READ });
    env.m.runToCompletion();
    expect(env.m.keyState(mr.rkey, 1)).toMatchObject({ boundWindows: 1 });
    expectInvFailure(env, sendInv(env, mr.rkey));
    expect(env.m.keyState(mr.rkey, 1)).toMatchObject({ state: 'VALID' });
  });
});
