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
  it('REG_MR and BIND_MW naming another adapter\'s MR or window, and createQp with its CQ or another Testbed\'s, are EINVAL', async () => {
    const other = new Testbed();
    const otherCq = await other.run(async () => (await other.openDevice(0)).createCq(8));
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
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
      // and a CQ of another Testbed (made in its own run, before this one)
      await expect(pd0.createQp({ sendCq: otherCq, recvCq: cq0 })).rejects.toThrow(/^EINVAL: createQp: the send or receive CQ belongs to another Testbed/);
      // nothing was posted: the QP still works, and adapter 0's mkey of that index is untouched
      expect(qp0.state).toBe('RTS');
      await tb.quiesce();
      expect(cq0.poll(16)).toEqual([]);
    });
  });
});

describe('the send ring is counted in WQEBBs', () => {
  it('maxSendWr 4 with 30 SGEs: the ring holds four of the largest WQEs (mlx5 calc_sq_size); the fifth is ENOMEM, and each completes as posted', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1 } = await rcPair(tb);
      const qp = await pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendWr: 4, maxSendSge: 30 });
      expect(qp.sq.wqeCnt).toBe(32); // 4 x 8 WQEBBs (control, remote address, 30 data segments)
      const peer = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp.connect(peer);
      const a = tb.host(0).alloc(30 * 64);
      const b = tb.host(1).alloc(30 * 64);
      for (let i = 0; i < 30; i++) tb.host(0).fill(a.addr + i * 64, 64, i + 1);
      const mr0 = await pd0.regMr(a.addr, 30 * 64, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 30 * 64, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const sgl = Array.from({ length: 30 }, (_, i) => ({ addr: a.addr + i * 64, length: 2, lkey: mr0.lkey }));
      const w = (id: number) => ({ wrId: id, opcode: 'RDMA_WRITE' as const, sgList: sgl, remoteAddr: b.addr + (id - 100) * 64, rkey: mr1.rkey, signaled: true });
      qp.postSend([w(100), w(101), w(102), w(103)]);
      expect(errno(() => qp.postSend(w(104)))).toMatch(/^ENOMEM: postSend: send queue full/);
      const wcs = await cq0.wait(4);
      expect(wcs.map((c) => [c.wrId, c.status, c.byteLen])).toEqual([100, 101, 102, 103].map((id) => [id, 'SUCCESS', 60]));
      for (let k = 0; k < 4; k++) expect(Array.from(tb.host(1).read(b.addr + k * 64, 4))).toEqual([1, 1, 2, 2]);
      // room again once their completions are polled
      qp.postSend(w(100));
      expect((await cq0.wait(1)).map((c) => [c.wrId, c.status])).toEqual([[100, 'SUCCESS']]);
    });
  });

  it('maxInlineData 900: four 900 B inline WRITEs fit the ring and land; more than the QP reports is ENOMEM (libmlx5 set_data_inl_seg)', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1 } = await rcPair(tb);
      const qp = await pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendWr: 4, maxInlineData: 900 });
      expect(qp.attr.maxInlineData).toBe(924); // 15 WQEBBs (960 B) less control, remote address and the inline header
      const peer = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp.connect(peer);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4 * 1024);
      for (let k = 0; k < 4; k++) tb.host(0).fill(a.addr + k * 900, 900, 0x10 + k);
      const mr1 = await pd1.regMr(b.addr, 4 * 1024, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const w = (k: number, len = 900) => ({ wrId: 200 + k, opcode: 'RDMA_WRITE' as const, inline: true, sgList: [{ addr: a.addr + k * 900, length: len, lkey: 0 }], remoteAddr: b.addr + k * 1024, rkey: mr1.rkey, signaled: true });
      expect(errno(() => qp.postSend(w(0, 925)))).toMatch(/^ENOMEM: postSend: 925 bytes of inline data exceed the QP's maxInlineData 924/);
      qp.postSend([w(0), w(1), w(2), w(3)]);
      const wcs = await cq0.wait(4);
      expect(wcs.map((c) => [c.wrId, c.status])).toEqual([200, 201, 202, 203].map((id) => [id, 'SUCCESS']));
      for (let k = 0; k < 4; k++) expect(tb.host(1).read(b.addr + k * 1024, 901)).toEqual(Uint8Array.from([...new Array<number>(900).fill(0x10 + k), 0]));
    });
  });

  it('the default QP holds 220 B of inline data; maxInlineData past what a WQE holds (972) is EINVAL', async () => {
    const tb = new Testbed({ hcas: 1, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const cq = await ctx.createCq(16);
      const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
      expect(qp.attr.maxInlineData).toBe(220);
      expect(qp.sq.wqeCnt).toBe(256); // 64 requests x 4 WQEBBs, as before maxInlineData
      await expect(pd.createQp({ sendCq: cq, recvCq: cq, maxInlineData: 973 })).rejects.toThrow(/^EINVAL: createQp: maxInlineData must be in 0..972, got 973/);
      await expect(pd.createQp({ sendCq: cq, recvCq: cq, maxInlineData: -1 })).rejects.toThrow(/^EINVAL: createQp: maxInlineData/);
    });
  });
});
