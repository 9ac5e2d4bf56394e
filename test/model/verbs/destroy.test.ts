/**
 * The reference model's destroy verbs (destroyQp, destroyCq, deallocPd): the same sync errors
 * as the driver's qp.destroy, cq.destroy and pd.dealloc (test/driver/destroy_verbs.test.ts): the
 * kernel's usecnt EBUSY rules, EINVAL for any call on a destroyed object (spec/semantics.md),
 * and a destroyed QP's peer timing out.
 */
import { describe, expect, it } from 'vitest';
import { incRkey } from '../../../src/model/index.ts';
import { A, drain, expectErrno, setup } from './helpers.ts';

describe('deallocPd: EBUSY while a live MR, window or QP belongs to the PD', () => {
  it('each kind alone keeps the PD; once gone, the PD goes and every later call is EINVAL', () => {
    const { m, a } = setup();
    const pd = m.allocPd(0);
    const mr = m.regMr(pd, a.buf, 8, 0);
    expect(expectErrno(() => m.deallocPd(pd), 'EBUSY').message).toMatch(/PD/);
    m.dereg(mr);
    const mw = m.allocMw(pd, 2);
    expectErrno(() => m.deallocPd(pd), 'EBUSY');
    m.deallocMw(mw);
    const qp = m.createQp(pd, { sendCq: a.cq, recvCq: a.cq });
    expectErrno(() => m.deallocPd(pd), 'EBUSY');
    m.destroyQp(qp);
    m.deallocPd(pd);
    for (const f of [
      () => m.regMr(pd, a.buf, 8, 0),
      () => m.allocMr(pd, 'SG_GAPS', 1),
      () => m.allocMw(pd, 1),
      () => m.createQp(pd, { sendCq: a.cq, recvCq: a.cq }),
      () => m.deallocPd(pd),
    ]) {
      expect(expectErrno(f, 'EINVAL').message).toMatch(/PD was destroyed/);
    }
  });
});

describe('destroyCq: EBUSY while a live QP uses it as send or receive CQ', () => {
  it('send CQ and receive CQ each keep it; after destroyQp it goes, and every later call is EINVAL', () => {
    const { m, a } = setup();
    const [scq, rcq] = [m.createCq(0), m.createCq(0)];
    const qp = m.createQp(a.pd, { sendCq: scq, recvCq: rcq });
    expectErrno(() => m.destroyCq(scq), 'EBUSY');
    expectErrno(() => m.destroyCq(rcq), 'EBUSY');
    m.destroyQp(qp);
    m.destroyCq(scq);
    m.destroyCq(rcq);
    for (const f of [() => m.pollCq(scq), () => m.destroyCq(scq), () => m.createQp(a.pd, { sendCq: scq, recvCq: a.cq })]) {
      expect(expectErrno(f, 'EINVAL').message).toMatch(/CQ was destroyed/);
    }
  });
});

describe('destroyQp', () => {
  it('every later call on the QP is EINVAL, as the peer of a connect too', () => {
    const { m, a, b } = setup();
    const mw = m.allocMw(a.pd, 1);
    m.destroyQp(a.qp);
    for (const f of [
      () => m.postSend(a.qp, { wrId: 1, opcode: 'SEND', sgList: [] }),
      () => m.postRecv(a.qp, { wrId: 1, sgList: [] }),
      () => m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 8, access: 0 }),
      () => m.connect(a.qp, b.qp),
      () => m.connect(m.createQp(b.pd, { sendCq: b.cq, recvCq: b.cq }), a.qp),
      () => m.destroyQp(a.qp),
    ]) {
      expect(expectErrno(f, 'EINVAL').message).toMatch(/QP was destroyed/);
    }
  });

  it("the peer's later send completes RETRY_EXC_ERR; the destroyed QP's posted receives never complete", () => {
    const env = setup();
    const { m, a, b } = env;
    m.postRecv(b.qp, { wrId: 50, sgList: [{ addr: b.buf, length: 64, lkey: b.mr.lkey }] });
    m.destroyQp(b.qp);
    m.postSend(a.qp, { wrId: 7, opcode: 'SEND', sgList: [{ addr: a.buf, length: 16, lkey: a.mr.lkey }], signaled: true });
    m.runToCompletion();
    expect(drain(env, a.cq)).toMatchObject([{ wrId: 7, status: 'RETRY_EXC_ERR', opcode: 'SEND' }]);
    expect(a.qp.state).toBe('ERR');
    expect(drain(env, b.cq)).toEqual([]);
  });

  it('its outstanding work requests are dropped without completions', () => {
    const env = setup();
    const { m, a, b } = env;
    m.postSend(a.qp, { wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.buf, length: 8, lkey: a.mr.lkey }], remoteAddr: b.buf, rkey: b.mr.rkey, signaled: true });
    m.destroyQp(a.qp);
    m.runToCompletion();
    expect(drain(env, a.cq)).toEqual([]);
    expect(drain(env, b.cq)).toEqual([]);
    expect(m.memRead(1, b.buf, 8)).toEqual(new Uint8Array(8));
  });

  it('a type-2 window bound to it stays bound (IBTA leaves it): VALID, and its MR cannot be deregistered', () => {
    const env = setup();
    const { m, a } = env;
    const mw = m.allocMw(a.pd, 2);
    m.postSend(a.qp, { wrId: 1, opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: { mr: a.mr, addr: a.buf, length: 64, access: A.REMOTE_READ }, signaled: true });
    m.runToCompletion();
    expect(drain(env, a.cq)).toMatchObject([{ status: 'SUCCESS', opcode: 'BIND_MW' }]);
    m.destroyQp(a.qp);
    expect(m.keyState(mw.rkey)).toMatchObject({ kind: 'MW', state: 'VALID' });
    expectErrno(() => m.dereg(a.mr), 'EBUSY');
  });
});
