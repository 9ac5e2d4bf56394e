/** semantics.md "Errors and QP state", "Ordering", "Objects and states", and the model's QP choices. */
import { describe, expect, it } from 'vitest';
import { VerbsModel, incRkey, makeKey } from '../../../src/model/index.ts';
import { A, ALL, expectErrno, pattern, postRecvAt, readWr, run, setup, statuses, writeWr } from './helpers.ts';

describe('Errors and QP state', () => {
  it('an error moves the QP to ERR; outstanding and later WRs complete WR_FLUSH_ERR, signaled or not', () => {
    const env = setup();
    const { m, a, b } = env;
    m.postSend(a.qp, [
      writeWr(env, 1, 8, b.mr.rkey, b.buf),
      writeWr(env, 2, 8, 0xbad00, b.buf), // error
      { ...writeWr(env, 3, 8, b.mr.rkey, b.buf), signaled: false },
      writeWr(env, 4, 8, b.mr.rkey, b.buf),
    ]);
    m.runToCompletion();
    expect(m.pollCq(a.cq).map((w) => [w.wrId, w.status, w.opcode])).toEqual([
      [1, 'SUCCESS', 'RDMA_WRITE'],
      [2, 'REM_ACCESS_ERR', 'RDMA_WRITE'],
      [3, 'WR_FLUSH_ERR', 'RDMA_WRITE'],
      [4, 'WR_FLUSH_ERR', 'RDMA_WRITE'],
    ]);
    expect(a.qp.state).toBe('ERR');
    // Posted later: accepted, flushed.
    m.postSend(a.qp, { ...readWr(env, 5, 8, b.mr.rkey, b.buf), signaled: false });
    m.bindMw(a.qp, m.allocMw(a.pd, 1), { mr: a.mr, addr: a.buf, length: 8, access: 0 }, { wrId: 6 });
    m.runToCompletion();
    expect(m.pollCq(a.cq).map((w) => [w.wrId, w.status, w.opcode, w.byteLen])).toEqual([
      [5, 'WR_FLUSH_ERR', 'RDMA_READ', 0],
      [6, 'WR_FLUSH_ERR', 'BIND_MW', 0],
    ]);
  });
  it('a QP in ERR never touches memory again', () => {
    const env = setup();
    const { m, a, b } = env;
    m.memWrite(0, a.buf, pattern(8));
    m.modifyQp(a.qp, 'ERR');
    m.memWrite(1, b.buf + 16, pattern(8, 100));
    m.postSend(a.qp, [writeWr(env, 1, 8, b.mr.rkey, b.buf), readWr(env, 2, 8, b.mr.rkey, b.buf + 16)]);
    m.runToCompletion();
    expect(statuses(m.pollCq(a.cq))).toEqual(['WR_FLUSH_ERR', 'WR_FLUSH_ERR']);
    expect([...m.memRead(1, b.buf, 8)]).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect([...m.memRead(0, a.buf + 2048, 8)]).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
  });
  it('the receive queue of a QP in ERR is flushed, and later receives too', () => {
    const env = setup();
    const { m, a } = env;
    postRecvAt(env, a, 1, 0, 8);
    postRecvAt(env, a, 2, 8, 8);
    m.runToCompletion();
    expect(m.pollCq(a.cq)).toEqual([]);
    m.postSend(a.qp, { wrId: 9, opcode: 'LOCAL_INV', invalidateRkey: 0xbad00 });
    m.runToCompletion();
    postRecvAt(env, a, 3, 16, 8);
    m.runToCompletion();
    expect(m.pollCq(a.cq).map((w) => [w.wrId, w.status, w.opcode])).toEqual([
      [9, 'LOC_QP_OP_ERR', 'LOCAL_INV'],
      [1, 'WR_FLUSH_ERR', 'RECV'],
      [2, 'WR_FLUSH_ERR', 'RECV'],
      [3, 'WR_FLUSH_ERR', 'RECV'],
    ]);
  });
  it('a local error leaves the peer in RTS; the peer\'s next request finds no responder (RETRY_EXC_ERR)', () => {
    const env = setup();
    const { m, a, b } = env;
    run(env, a, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: 0xbad00 });
    expect([a.qp.state, b.qp.state]).toEqual(['ERR', 'RTS']);
    m.memWrite(1, b.buf, pattern(4));
    const wcs = run(env, b, { wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: b.buf, length: 4, lkey: b.mr.lkey }], remoteAddr: a.buf, rkey: a.mr.rkey });
    expect(wcs).toMatchObject([{ wrId: 2, status: 'RETRY_EXC_ERR', opcode: 'RDMA_WRITE' }]);
    expect(b.qp.state).toBe('ERR');
    expect([...m.memRead(0, a.buf, 4)]).toEqual([0, 0, 0, 0]);
  });
  it('postSend needs RTS (or ERR), postRecv a QP out of RESET', () => {
    const m = new VerbsModel();
    const pd = m.allocPd();
    const cq = m.createCq();
    const q = m.createQp(pd, { sendCq: cq, recvCq: cq });
    const peer = m.createQp(pd, { sendCq: cq, recvCq: cq });
    const wr = { wrId: 1, opcode: 'LOCAL_INV' as const, invalidateRkey: 0 };
    expectErrno(() => m.postSend(q, wr), 'EINVAL');
    expectErrno(() => m.postRecv(q, { wrId: 1, sgList: [] }), 'EINVAL');
    m.modifyQp(q, 'INIT');
    m.postRecv(q, { wrId: 1, sgList: [] });
    expectErrno(() => m.postSend(q, wr), 'EINVAL');
    m.modifyQp(q, 'RTR', peer);
    expectErrno(() => m.postSend(q, wr), 'EINVAL');
    expectErrno(() => m.modifyQp(q, 'INIT'), 'EINVAL');
    m.modifyQp(q, 'RTS');
    m.postSend(q, wr);
    m.modifyQp(q, 'RESET');
    expect([q.sq.length, q.rq.length, q.state]).toEqual([0, 0, 'RESET']);
  });
});

describe('Ordering: a REG_MR / LOCAL_INV / BIND_MW is complete before any later WQE of the same QP uses the key', () => {
  it('REG_MR then a SEND through the key, LOCAL_INV then a SEND through it', () => {
    const env = setup();
    const { m, a, b } = env;
    const mr = m.allocMr(a.pd, 'SG_GAPS', 1);
    m.mapSg(mr, [{ addr: a.buf + 64, length: 4 }]);
    m.updateKey(mr, 0x31);
    m.memWrite(0, a.buf + 64, pattern(4, 40));
    postRecvAt(env, b, 1, 0, 8);
    postRecvAt(env, b, 2, 8, 8);
    m.postSend(a.qp, [
      { wrId: 10, opcode: 'REG_MR', mr, key: mr.lkey, access: 0 },
      { wrId: 11, opcode: 'SEND', sgList: [{ addr: a.buf + 64, length: 4, lkey: mr.lkey }], signaled: true },
      { wrId: 12, opcode: 'LOCAL_INV', invalidateRkey: mr.lkey },
      { wrId: 13, opcode: 'SEND', sgList: [{ addr: a.buf + 64, length: 4, lkey: mr.lkey }], signaled: true },
    ]);
    m.runToCompletion();
    expect(m.pollCq(a.cq).map((w) => [w.wrId, w.status])).toEqual([[11, 'SUCCESS'], [13, 'LOC_PROT_ERR']]);
    expect([...m.memRead(1, b.buf, 4)]).toEqual([40, 41, 42, 43]);
  });
  it('BIND_MW then an RDMA READ through the window from the peer', () => {
    const env = setup();
    const { m, a, b } = env;
    const mw = m.allocMw(b.pd, 2);
    m.memWrite(1, b.buf, pattern(4, 9));
    m.postSend(b.qp, { wrId: 1, opcode: 'BIND_MW', mw, rkey: makeKey(mw.index, 0x10), bindInfo: { mr: b.mr, addr: b.buf, length: 4, access: A.REMOTE_READ } });
    m.postSend(a.qp, readWr(env, 2, 4, makeKey(mw.index, 0x10), b.buf));
    m.runToCompletion();
    expect(statuses(m.pollCq(a.cq))).toEqual(['SUCCESS']);
    expect([...m.memRead(0, a.buf + 2048, 4)]).toEqual([9, 10, 11, 12]);
  });
  it('across QPs, work runs in post order', () => {
    const env = setup();
    const { m, a, b } = env;
    const mw = m.allocMw(b.pd, 2);
    // The READ is posted before the bind: it runs first and fails.
    m.postSend(a.qp, readWr(env, 2, 4, makeKey(mw.index, 0x10), b.buf));
    m.postSend(b.qp, { wrId: 1, opcode: 'BIND_MW', mw, rkey: makeKey(mw.index, 0x10), bindInfo: { mr: b.mr, addr: b.buf, length: 4, access: A.REMOTE_READ } });
    expect(m.step()).toBe(true);
    expect(statuses(m.pollCq(a.cq))).toEqual(['REM_ACCESS_ERR']);
    m.runToCompletion();
    // b went to ERR with the NAK, so its bind is flushed.
    expect(m.pollCq(b.cq)).toMatchObject([{ wrId: 1, status: 'WR_FLUSH_ERR', opcode: 'BIND_MW' }]);
  });
});

describe('Objects and states', () => {
  it('a fast-registration MR starts FREE and can be re-registered only while FREE', () => {
    const env = setup();
    const { m, a } = env;
    const mr = m.allocMr(a.pd, 'MEM_REG', 1);
    expect(m.keyState(mr.lkey)).toMatchObject({ state: 'FREE', type: 'MEM_REG' });
    m.mapSg(mr, [{ addr: a.buf, length: 4096 }]);
    const reg = (wrId: number, tag: number) => {
      m.updateKey(mr, tag);
      return run(env, a, { wrId, opcode: 'REG_MR', mr, key: mr.lkey, access: A.LOCAL_WRITE, signaled: true });
    };
    expect(statuses(reg(1, 1))).toEqual(['SUCCESS']);
    expect(statuses(run(env, a, { wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: mr.lkey, signaled: true }))).toEqual(['SUCCESS']);
    expect(statuses(reg(3, 2))).toEqual(['SUCCESS']);
    expect(m.keyState(mr.lkey)).toMatchObject({ state: 'VALID', key: makeKey(mr.index, 2) });
    expect(statuses(reg(4, 3))).toEqual(['LOC_QP_OP_ERR']);
  });
  it('a user MR is VALID at once; a type-2 window starts FREE', () => {
    const env = setup();
    expect(env.m.keyState(env.a.mr.lkey)).toMatchObject({ state: 'VALID', type: 'USER', access: ALL, iova: env.a.buf, length: 4096 });
    const mw = env.m.allocMw(env.a.pd, 2);
    expect(env.m.keyState(mw.rkey)).toMatchObject({ kind: 'MW', state: 'FREE', type: 2 });
  });
  it('a type-2 window is bound to the posting QP and never to another', () => {
    const env = setup();
    const { m, b } = env;
    const mw = m.allocMw(b.pd, 2);
    run(env, b, { wrId: 1, opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: { mr: b.mr, addr: b.buf, length: 8, access: A.REMOTE_READ } });
    expect(m.keyState(mw.rkey, 1)).toMatchObject({ qpNum: b.qp.qpNum });
  });
  it('a deregistered MR\'s key names nothing; a later REG_MR of it is LOC_QP_OP_ERR', () => {
    const env = setup();
    const { m, a } = env;
    const mr = m.allocMr(a.pd, 'SG_GAPS', 1);
    m.mapSg(mr, [{ addr: a.buf, length: 8 }]);
    m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: 0 });
    m.dereg(mr);
    m.runToCompletion();
    expect(m.pollCq(a.cq)).toMatchObject([{ wrId: 1, status: 'LOC_QP_OP_ERR' }]);
    expect(m.keyState(mr.lkey).kind).toBe('NONE');
  });
});
