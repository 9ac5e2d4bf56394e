/** semantics.md "Verbs calls (sync failures)", one or more tests per row, and the key rules. */
import { describe, expect, it } from 'vitest';
import { VerbsModel, incRkey, keyIndex, keyTag, makeKey } from '../../../src/model/index.ts';
import { A, ALL, expectErrno, run, setup } from './helpers.ts';

describe('regMr / REG_MR access: REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE (EINVAL)', () => {
  it('regMr', () => {
    const { m, a } = setup();
    expectErrno(() => m.regMr(a.pd, a.buf, 64, A.REMOTE_WRITE), 'EINVAL');
    expectErrno(() => m.regMr(a.pd, a.buf, 64, A.REMOTE_ATOMIC | A.REMOTE_READ), 'EINVAL');
    expect(m.regMr(a.pd, a.buf, 64, A.REMOTE_READ).lkey).toBeGreaterThan(0);
    expect(m.regMr(a.pd, a.buf, 64, A.REMOTE_WRITE | A.LOCAL_WRITE).rkey).toBeGreaterThan(0);
  });
  it('REG_MR', () => {
    const { m, a } = setup();
    const fmr = m.allocMr(a.pd, 'MEM_REG', 4);
    m.mapSg(fmr, [{ addr: a.buf, length: 4096 }]);
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: A.REMOTE_WRITE }), 'EINVAL');
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: A.REMOTE_ATOMIC }), 'EINVAL');
    expect(a.qp.sq.length).toBe(0);
    m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: A.REMOTE_ATOMIC | A.LOCAL_WRITE });
    expect(a.qp.sq.length).toBe(1);
  });
});

describe('regMr: length 0 (EINVAL), range not mapped in the host (EFAULT)', () => {
  it('length 0', () => {
    const { m, a } = setup();
    expectErrno(() => m.regMr(a.pd, a.buf, 0, A.LOCAL_WRITE), 'EINVAL');
  });
  it('unmapped, wholly or in part', () => {
    const { m, a } = setup();
    expectErrno(() => m.regMr(a.pd, 0x1000, 4096, 0), 'EFAULT');
    // The allocation is followed by an unmapped guard page.
    expectErrno(() => m.regMr(a.pd, a.buf + 4000, 200, 0), 'EFAULT');
    expect(m.regMr(a.pd, a.buf + 4000, 96, 0).length).toBe(96);
  });
});

describe('regMr ON_DEMAND: device without ON_DEMAND_PAGING (EOPNOTSUPP)', () => {
  it('refused without the capability, accepted with it', () => {
    const m = new VerbsModel({ onDemandPaging: false });
    const pd = m.allocPd();
    const buf = m.alloc(0, 4096);
    expectErrno(() => m.regMr(pd, buf, 4096, A.ON_DEMAND | A.LOCAL_WRITE), 'EOPNOTSUPP');
    const odp = new VerbsModel();
    const pd2 = odp.allocPd();
    const mr = odp.regMr(pd2, odp.alloc(0, 4096), 4096, A.ON_DEMAND | A.LOCAL_WRITE);
    expect(odp.keyState(mr.lkey)).toMatchObject({ kind: 'MR', state: 'VALID' });
  });
});

describe('allocMr: type not MEM_REG / SG_GAPS; maxNumSg 0 or above maxFastRegPageListLen (EINVAL)', () => {
  it('type', () => {
    const { m, a } = setup();
    expectErrno(() => m.allocMr(a.pd, 'USER' as 'MEM_REG', 4), 'EINVAL');
  });
  it('maxNumSg bounds', () => {
    const m = new VerbsModel({ maxFastRegPageListLen: 8 });
    const pd = m.allocPd();
    expectErrno(() => m.allocMr(pd, 'MEM_REG', 0), 'EINVAL');
    expectErrno(() => m.allocMr(pd, 'SG_GAPS', 9), 'EINVAL');
    const mr = m.allocMr(pd, 'SG_GAPS', 8);
    expect(mr.maxNumSg).toBe(8);
    expect(m.keyState(mr.lkey)).toMatchObject({ kind: 'MR', type: 'SG_GAPS', state: 'FREE' });
    expect(new VerbsModel().maxFastRegPageListLen).toBe(65536);
  });
});

describe('allocMw: type not 1 or 2 (EINVAL)', () => {
  it('refuses type 3 and 0', () => {
    const { m, a } = setup();
    expectErrno(() => m.allocMw(a.pd, 3 as 1), 'EINVAL');
    expectErrno(() => m.allocMw(a.pd, 0 as 1), 'EINVAL');
    expect(m.allocMw(a.pd, 2).type).toBe(2);
  });
});

describe('mapSg (MEM_REG): the alignment rule ends the mapping', () => {
  const P = 4096;
  it('maps a list that keeps the rule, setting iova and length', () => {
    const { m, a } = setup();
    const base = m.alloc(0, 4 * P);
    const mr = m.allocMr(a.pd, 'MEM_REG', 8);
    const n = m.mapSg(mr, [
      { addr: base + 0x100, length: P - 0x100 }, // first: may start unaligned, ends aligned
      { addr: base + 2 * P, length: P }, // middle: both aligned
      { addr: base + 3 * P, length: 0x10 }, // last: may end unaligned
    ]);
    expect(n).toBe(3);
    expect(mr.iova).toBe(base + 0x100);
    expect(mr.length).toBe(P - 0x100 + P + 0x10);
  });
  it('stops at an element whose predecessor ends unaligned', () => {
    const { m, a } = setup();
    const base = m.alloc(0, 4 * P);
    const mr = m.allocMr(a.pd, 'MEM_REG', 8);
    expect(m.mapSg(mr, [{ addr: base, length: 0x800 }, { addr: base + P, length: P }])).toBe(1);
    expect(mr.iova).toBe(base);
    expect(mr.length).toBe(0x800);
  });
  it('stops at an element that starts unaligned', () => {
    const { m, a } = setup();
    const base = m.alloc(0, 4 * P);
    const mr = m.allocMr(a.pd, 'MEM_REG', 8);
    expect(m.mapSg(mr, [{ addr: base, length: P }, { addr: base + P + 8, length: 8 }])).toBe(1);
    expect(m.mapSg(mr, [{ addr: base, length: P }, { addr: base + P, length: P }, { addr: base + 3 * P + 1, length: 8 }])).toBe(2);
    expect(mr.length).toBe(2 * P);
  });
  it('SG_GAPS has no alignment rule', () => {
    const { m, a } = setup();
    const mr = m.allocMr(a.pd, 'SG_GAPS', 8);
    expect(m.mapSg(mr, [{ addr: a.buf + 3, length: 5 }, { addr: a.buf + 100, length: 7 }, { addr: a.buf + 999, length: 1 }])).toBe(3);
    expect(mr.iova).toBe(a.buf + 3);
    expect(mr.length).toBe(13);
  });
});

describe('mapSg: more entries than maxNumSg maps the first maxNumSg', () => {
  it('SG_GAPS and MEM_REG', () => {
    const { m, a } = setup();
    const sg = m.allocMr(a.pd, 'SG_GAPS', 3);
    const list = [0, 1, 2, 3, 4].map((i) => ({ addr: a.buf + i * 100, length: 10 + i }));
    expect(m.mapSg(sg, list)).toBe(3);
    expect(sg.length).toBe(10 + 11 + 12);
    const base = m.alloc(0, 5 * 4096);
    const mem = m.allocMr(a.pd, 'MEM_REG', 2);
    const pages = [0, 1, 2, 3].map((i) => ({ addr: base + i * 4096, length: 4096 }));
    expect(m.mapSg(mem, pages)).toBe(2);
    expect(mem.length).toBe(8192);
  });
});

describe('postSend REG_MR: key index differs from the MR\'s; page list longer than maxNumSg (EINVAL)', () => {
  it('key index', () => {
    const { m, a } = setup();
    const mr = m.allocMr(a.pd, 'MEM_REG', 4);
    m.mapSg(mr, [{ addr: a.buf, length: 4096 }]);
    const otherIndex = makeKey(keyIndex(mr.lkey) + 1, keyTag(mr.lkey));
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr, key: otherIndex, access: 0 }), 'EINVAL');
    // Same index, any tag: accepted.
    m.postSend(a.qp, { wrId: 2, opcode: 'REG_MR', mr, key: makeKey(mr.index, 0x77), access: 0 });
    expect(a.qp.sq.length).toBe(1);
  });
  it('page list: one element over 3 pages in an MR of maxNumSg 2', () => {
    const { m, a } = setup();
    const base = m.alloc(0, 3 * 4096);
    const mr = m.allocMr(a.pd, 'MEM_REG', 2);
    expect(m.mapSg(mr, [{ addr: base + 8, length: 2 * 4096 }])).toBe(1);
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: 0 }), 'EINVAL');
    // Two pages fit.
    m.mapSg(mr, [{ addr: base, length: 2 * 4096 }]);
    m.postSend(a.qp, { wrId: 2, opcode: 'REG_MR', mr, key: mr.lkey, access: 0 });
    expect(a.qp.sq.length).toBe(1);
  });
});

// Issue 18 item 7: an mlx5 mkey's start_addr is both its iova and its first byte's page offset
// (Linux 6.12 drivers/infiniband/hw/mlx5/mlx5_ib.h:1720-1723); the kernel refuses an MR whose
// iova and address differ in page offset (drivers/infiniband/core/uverbs_cmd.c:710, EINVAL).
describe('ZERO_BASED: the first byte must be page aligned (regMr, postSend REG_MR MEM_REG) (EINVAL)', () => {
  it('regMr', () => {
    const { m, a } = setup();
    expectErrno(() => m.regMr(a.pd, a.buf + 1, 64, ALL | A.ZERO_BASED), 'EINVAL');
    expect(m.regMr(a.pd, a.buf, 64, ALL | A.ZERO_BASED).iova).toBe(0);
    // not zero-based: any address
    expect(m.regMr(a.pd, a.buf + 1, 64, ALL).iova).toBe(a.buf + 1);
  });
  it('REG_MR: a MEM_REG page list from inside a page (of mapSg\'s page size); SG_GAPS at any byte', () => {
    const { m, a } = setup();
    const base = m.alloc(0, 4 * 8192);
    const aligned = base % 8192 === 0 ? base : base + 4096;
    const mr = m.allocMr(a.pd, 'MEM_REG', 4);
    m.mapSg(mr, [{ addr: aligned + 8, length: 64 }]);
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: A.ZERO_BASED }), 'EINVAL');
    m.mapSg(mr, [{ addr: aligned + 4096, length: 64 }], 8192);
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: A.ZERO_BASED }), 'EINVAL');
    // not zero-based, the same list: accepted
    m.postSend(a.qp, { wrId: 2, opcode: 'REG_MR', mr, key: mr.lkey, access: 0 });
    m.mapSg(mr, [{ addr: aligned, length: 64 }], 8192);
    m.postSend(a.qp, { wrId: 3, opcode: 'REG_MR', mr, key: mr.lkey, access: A.ZERO_BASED });
    const g = m.allocMr(a.pd, 'SG_GAPS', 4);
    m.mapSg(g, [{ addr: aligned + 8, length: 64 }]);
    m.postSend(a.qp, { wrId: 4, opcode: 'REG_MR', mr: g, key: g.lkey, access: A.ZERO_BASED });
    expect(a.qp.sq.length).toBe(3);
  });
});

describe('postSend BIND_MW: new rkey index differs (EINVAL); length > 2 GiB (EOPNOTSUPP)', () => {
  it('rkey index', () => {
    const { m, a } = setup();
    const mw = m.allocMw(a.pd, 2);
    const bindInfo = { mr: a.mr, addr: a.buf, length: 16, access: A.REMOTE_READ };
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'BIND_MW', mw, rkey: makeKey(mw.index + 1, 5), bindInfo }), 'EINVAL');
    m.postSend(a.qp, { wrId: 1, opcode: 'BIND_MW', mw, rkey: makeKey(mw.index, 5), bindInfo });
    expect(a.qp.sq.length).toBe(1);
  });
  it('length', () => {
    const { m, a } = setup();
    const mw = m.allocMw(a.pd, 2);
    const wr = (length: number) => ({ wrId: 1, opcode: 'BIND_MW' as const, mw, rkey: incRkey(mw.rkey), bindInfo: { mr: a.mr, addr: a.buf, length, access: 0 } });
    expectErrno(() => m.postSend(a.qp, wr(2 ** 31 + 1)), 'EOPNOTSUPP');
    m.postSend(a.qp, wr(2 ** 31)); // exactly 2 GiB is accepted (it fails later: outside the MR)
    m.runToCompletion();
    expect(m.pollCq(a.cq).map((w) => w.status)).toEqual(['MW_BIND_ERR']);
  });
});

describe('postSend: send queue full (ENOMEM)', () => {
  it('the third of three with maxSendWr 2; the first two stay posted', () => {
    const { m, a } = setup({ maxSendWr: 2 });
    const wr = (wrId: number) => ({ wrId, opcode: 'LOCAL_INV' as const, invalidateRkey: 0x12345 });
    const e = expectErrno(() => m.postSend(a.qp, [wr(1), wr(2), wr(3)]), 'ENOMEM');
    expect(e.badWrIndex).toBe(2);
    expect(a.qp.sq.map((p) => p.wr.wrId)).toEqual([1, 2]);
    // Running executes them, but their room comes back only when their completions are polled
    // (libmlx5 moves the SQ tail in poll_cq): both failed, so both have one
    m.runToCompletion();
    expectErrno(() => m.postSend(a.qp, wr(4)), 'ENOMEM');
    expect(m.pollCq(a.qp.sendCq).map((w) => w.wrId)).toEqual([1, 2]);
    m.postSend(a.qp, wr(4));
    expect(a.qp.sq.length).toBe(1);
  });

  it('an unsignaled success keeps its room until a later completion of its queue is polled', () => {
    const { m, a } = setup({ maxSendWr: 2 });
    const nop = (wrId: number, signaled: boolean) => ({ wrId, opcode: 'RDMA_WRITE' as const, sgList: [], remoteAddr: 0, rkey: 0, signaled });
    m.postSend(a.qp, [nop(1, false), nop(2, true)]);
    m.runToCompletion();
    expectErrno(() => m.postSend(a.qp, nop(3, false)), 'ENOMEM');
    expect(m.pollCq(a.qp.sendCq).map((w) => [w.wrId, w.status])).toEqual([[2, 'SUCCESS']]);
    m.postSend(a.qp, [nop(3, false), nop(4, false)]);
    m.runToCompletion();
    expectErrno(() => m.postSend(a.qp, nop(5, false)), 'ENOMEM'); // nothing polled covers 3 and 4
  });
});

describe('postSend RDMA_READ_WITH_INV: mlx5 (no iWARP) (EOPNOTSUPP)', () => {
  it('refused by default', () => {
    const env = setup();
    const { m, a, b } = env;
    const wr = { wrId: 1, opcode: 'RDMA_READ_WITH_INV' as const, sgList: [{ addr: a.buf, length: 8, lkey: a.mr.lkey }], remoteAddr: b.buf, rkey: b.mr.rkey, invalidateRkey: a.mr.lkey };
    expectErrno(() => m.postSend(a.qp, wr), 'EOPNOTSUPP');
  });
  it('with readWithInvalidate: the local key is invalidated when the read completes', () => {
    const env = setup({ readWithInvalidate: true });
    const { m, a, b } = env;
    const dst = m.allocMr(a.pd, 'SG_GAPS', 1);
    m.mapSg(dst, [{ addr: a.buf + 100, length: 8 }]);
    expect(run(env, a, { wrId: 1, opcode: 'REG_MR', mr: dst, key: dst.lkey, access: A.LOCAL_WRITE, signaled: true })[0].status).toBe('SUCCESS');
    m.memWrite(1, b.buf, Uint8Array.of(9, 8, 7, 6, 5, 4, 3, 2));
    const wcs = run(env, a, { wrId: 2, opcode: 'RDMA_READ_WITH_INV', sgList: [{ addr: a.buf + 100, length: 8, lkey: dst.lkey }], remoteAddr: b.buf, rkey: b.mr.rkey, invalidateRkey: dst.lkey, signaled: true });
    expect(wcs).toMatchObject([{ wrId: 2, status: 'SUCCESS', opcode: 'RDMA_READ', byteLen: 8 }]);
    expect([...m.memRead(0, a.buf + 100, 8)]).toEqual([9, 8, 7, 6, 5, 4, 3, 2]);
    expect(m.keyState(dst.lkey)).toMatchObject({ state: 'FREE' });
  });
});

describe('bindMw (type 1 verb): sync checks', () => {
  it('window not type 1 (EINVAL)', () => {
    const { m, a } = setup();
    expectErrno(() => m.bindMw(a.qp, m.allocMw(a.pd, 2), { mr: a.mr, addr: a.buf, length: 8, access: 0 }), 'EINVAL');
  });
  it('MR missing but length != 0 (EINVAL); length 0 without MR is an unbind', () => {
    const { m, a } = setup();
    const mw = m.allocMw(a.pd, 1);
    expectErrno(() => m.bindMw(a.qp, mw, { addr: a.buf, length: 8, access: 0 }), 'EINVAL');
    const before = mw.rkey;
    expect(m.bindMw(a.qp, mw, { addr: 0, length: 0, access: 0 })).toBe(incRkey(before));
  });
  it('MW PD != MR PD (EPERM)', () => {
    const { m, a } = setup();
    const otherPd = m.allocPd(0);
    const mw = m.allocMw(otherPd, 1);
    expectErrno(() => m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 8, access: 0 }), 'EPERM');
  });
  it('ZERO_BASED access (EINVAL)', () => {
    const { m, a } = setup();
    const mw = m.allocMw(a.pd, 1);
    expectErrno(() => m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 8, access: A.REMOTE_READ | A.ZERO_BASED }), 'EINVAL');
  });
  it('MR zero-based (EINVAL)', () => {
    const { m, a } = setup();
    const zb = m.regMr(a.pd, a.buf, 4096, ALL | A.ZERO_BASED);
    const mw = m.allocMw(a.pd, 1);
    expectErrno(() => m.bindMw(a.qp, mw, { mr: zb, addr: 0, length: 8, access: A.REMOTE_READ }), 'EINVAL');
  });
  it('returns incRkey(mw.rkey) and updates mw.rkey at once; the device key changes when the bind runs', () => {
    const { m, a } = setup();
    const mw = m.allocMw(a.pd, 1);
    const before = mw.rkey;
    const k = m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 64, access: A.REMOTE_READ }, { wrId: 7, signaled: true });
    expect(k).toBe(incRkey(before));
    expect(mw.rkey).toBe(k);
    expect(m.keyState(k)).toMatchObject({ kind: 'MW', key: before, keyMatches: false, state: 'FREE' });
    m.runToCompletion();
    expect(m.pollCq(a.cq)).toMatchObject([{ wrId: 7, status: 'SUCCESS', opcode: 'BIND_MW' }]);
    expect(m.keyState(k)).toMatchObject({ kind: 'MW', key: k, keyMatches: true, state: 'VALID', addr: a.buf, length: 64 });
  });
  it('queue full (ENOMEM) and length > 2 GiB (EOPNOTSUPP), as a posted bind', () => {
    const { m, a } = setup({ maxSendWr: 1 });
    const mw = m.allocMw(a.pd, 1);
    expectErrno(() => m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 2 ** 31 + 1, access: 0 }), 'EOPNOTSUPP');
    m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 8, access: 0 });
    const rkey = mw.rkey;
    expectErrno(() => m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 8, access: 0 }), 'ENOMEM');
    expect(mw.rkey).toBe(rkey); // a refused bind does not change the key
  });
});

describe('dereg: memory windows still bound to the MR (EBUSY)', () => {
  it('EBUSY while bound, fine after the window is deallocated', () => {
    const env = setup();
    const { m, a } = env;
    const mr = m.regMr(a.pd, a.buf, 4096, ALL);
    const mw = m.allocMw(a.pd, 1);
    m.bindMw(a.qp, mw, { mr, addr: a.buf, length: 8, access: A.REMOTE_READ });
    // Not bound yet: the bind has not run.
    expect(m.keyState(mr.lkey)).toMatchObject({ boundWindows: 0 });
    m.runToCompletion();
    expect(m.keyState(mr.lkey)).toMatchObject({ boundWindows: 1 });
    expectErrno(() => m.dereg(mr), 'EBUSY');
    m.deallocMw(mw);
    expect(m.keyState(mr.lkey)).toMatchObject({ boundWindows: 0 });
    m.dereg(mr);
    expect(m.keyState(mr.lkey)).toEqual({ kind: 'NONE', index: mr.index });
  });
});

describe('any call on a destroyed object (EINVAL)', () => {
  it('MR, MW, PD, QP, CQ', () => {
    const { m, a } = setup();
    const mr = m.allocMr(a.pd, 'MEM_REG', 2);
    m.dereg(mr);
    expectErrno(() => m.dereg(mr), 'EINVAL');
    expectErrno(() => m.mapSg(mr, [{ addr: a.buf, length: 8 }]), 'EINVAL');
    expectErrno(() => m.updateKey(mr, 3), 'EINVAL');
    expectErrno(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: 0 }), 'EINVAL');
    const mw = m.allocMw(a.pd, 1);
    m.deallocMw(mw);
    expectErrno(() => m.deallocMw(mw), 'EINVAL');
    expectErrno(() => m.bindMw(a.qp, mw, { mr: a.mr, addr: a.buf, length: 8, access: 0 }), 'EINVAL');
    const pd = m.allocPd(0);
    m.deallocPd(pd);
    expectErrno(() => m.allocMr(pd, 'MEM_REG', 1), 'EINVAL');
    expectErrno(() => m.regMr(pd, a.buf, 8, 0), 'EINVAL');
    expectErrno(() => m.allocMw(pd, 2), 'EINVAL');
    const cq = m.createCq(0);
    const qp = m.createQp(a.pd, { sendCq: cq, recvCq: cq });
    m.destroyQp(qp);
    expectErrno(() => m.postSend(qp, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: 0 }), 'EINVAL');
    expectErrno(() => m.postRecv(qp, { wrId: 1, sgList: [] }), 'EINVAL');
    m.destroyCq(cq);
    expectErrno(() => m.pollCq(cq), 'EINVAL');
  });
  it('PD and CQ in use are EBUSY', () => {
    const { m, a } = setup();
    expectErrno(() => m.deallocPd(a.pd), 'EBUSY');
    expectErrno(() => m.destroyCq(a.cq), 'EBUSY');
  });
});

describe('Keys (spec/mlx5.md): index << 8 | tag, lkey == rkey, fresh indices, rolling tag', () => {
  it('MRs and windows share one index space with a rolling tag', () => {
    const m = new VerbsModel();
    const pd = m.allocPd();
    const buf = m.alloc(0, 4096);
    const objs = [m.regMr(pd, buf, 8, 0), m.allocMr(pd, 'MEM_REG', 1), m.allocMw(pd, 1), m.allocMw(pd, 2)];
    const keys = objs.map((o) => ('lkey' in o ? o.lkey : o.rkey));
    for (const o of objs) if ('lkey' in o) expect(o.lkey).toBe(o.rkey);
    expect(new Set(keys.map(keyIndex)).size).toBe(4);
    const tags = keys.map(keyTag);
    for (let i = 1; i < tags.length; i++) expect(tags[i]).toBe((tags[i - 1] + 1) & 0xff);
    for (const k of keys) expect(keyIndex(k)).toBeGreaterThanOrEqual(2); // 0x100 (index 1) is reserved
  });
  it('the tag wraps after 256 objects and indices stay distinct', () => {
    const m = new VerbsModel();
    const pd = m.allocPd();
    const keys = Array.from({ length: 300 }, () => m.allocMw(pd, 2).rkey);
    expect(new Set(keys.map(keyIndex)).size).toBe(300);
    expect(keyTag(keys[256])).toBe(keyTag(keys[0]));
  });
  it('updateKey changes the handle\'s tag only', () => {
    const { m, a } = setup();
    const mr = m.allocMr(a.pd, 'MEM_REG', 1);
    const dev = mr.lkey;
    m.updateKey(mr, 0xab);
    expect(mr.lkey).toBe(makeKey(mr.index, 0xab));
    expect(mr.rkey).toBe(mr.lkey);
    expect(m.keyState(mr.lkey)).toMatchObject({ key: dev, keyMatches: false });
    expectErrno(() => m.updateKey(mr, 256), 'EINVAL');
  });
});
