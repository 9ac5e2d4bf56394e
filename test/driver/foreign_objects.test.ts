/**
 * Issue 12, first items: objects of another adapter are refused at the verbs boundary, and the
 * send ring is counted in WQEBBs, so long WQEs never overwrite ones not yet executed.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';

function errno(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    if (e instanceof VerbsError) return e.message; // "ERRNO: rule"
    throw e;
  }
  return 'no error';
}

describe('objects of another adapter', () => {
  it('REG_MR and BIND_MW naming another adapter\'s MR or window, and createQp with its CQ, are EINVAL', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { c1, pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const foreignMr = await pd1.allocMr('MEM_REG', 4);
      const b = tb.host(1).alloc(4096);
      foreignMr.mapSg([{ addr: b.addr, length: 4096 }]);
      expect(errno(() => qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: foreignMr, key: foreignMr.lkey, access: Access.LOCAL_WRITE }))).toMatch(/^EINVAL: .*another device context/);
      const foreignMw = await pd1.allocMw(2);
      const mr0 = await pd0.regMr(tb.host(0).alloc(4096).addr, 4096, Access.LOCAL_WRITE | Access.MW_BIND);
      expect(errno(() => qp0.postSend({ wrId: 2, opcode: 'BIND_MW', mw: foreignMw, rkey: foreignMw.rkey, bindInfo: { mr: mr0, addr: mr0.iova, length: 64, access: Access.REMOTE_READ } }))).toMatch(/^EINVAL: .*window belongs to another/);
      const mw1 = await pd0.allocMw(1);
      const foreignUserMr = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.MW_BIND);
      expect(errno(() => qp0.bindMw(mw1, { mr: foreignUserMr, addr: b.addr, length: 64, access: Access.REMOTE_READ }))).toMatch(/^EINVAL: .*MR belongs to another/);
      const cq1 = await c1.createCq(16);
      await expect(pd0.createQp({ sendCq: cq0, recvCq: cq1 })).rejects.toThrow(/another device context/);
      // nothing was posted: the QP still works, and adapter 0's mkey of that index is untouched
      expect(qp0.state).toBe('RTS');
      await tb.quiesce();
      expect(cq0.poll(16)).toEqual([]);
    });
  });
});

describe('the send ring is counted in WQEBBs', () => {
  it('maxSendWr 4 with 30 SGEs: the third 30-SGE WRITE finds the ring full (ENOMEM); the first two complete as posted', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1 } = await rcPair(tb);
      const qp = await pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendWr: 4, maxSendSge: 30 });
      const peer = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp.connect(peer);
      const a = tb.host(0).alloc(30 * 64);
      const b = tb.host(1).alloc(30 * 64);
      for (let i = 0; i < 30; i++) tb.host(0).fill(a.addr + i * 64, 64, i + 1);
      const mr0 = await pd0.regMr(a.addr, 30 * 64, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 30 * 64, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const sgl = Array.from({ length: 30 }, (_, i) => ({ addr: a.addr + i * 64, length: 2, lkey: mr0.lkey }));
      const w = (id: number) => ({ wrId: id, opcode: 'RDMA_WRITE' as const, sgList: sgl, remoteAddr: b.addr + (id - 100) * 64, rkey: mr1.rkey, signaled: true });
      qp.postSend([w(100), w(101)]); // 2 x 8 WQEBBs: the 16-WQEBB ring is full
      expect(errno(() => qp.postSend(w(102)))).toMatch(/^ENOMEM: postSend: send queue full/);
      const wcs = await cq0.wait(2);
      expect(wcs.map((c) => [c.wrId, c.status, c.byteLen])).toEqual([[100, 'SUCCESS', 60], [101, 'SUCCESS', 60]]);
      // room again once their completions are polled
      qp.postSend(w(102));
      expect((await cq0.wait(1)).map((c) => [c.wrId, c.status])).toEqual([[102, 'SUCCESS']]);
      expect(Array.from(tb.host(1).read(b.addr + 128, 4))).toEqual([1, 1, 2, 2]);
    });
  });
});
