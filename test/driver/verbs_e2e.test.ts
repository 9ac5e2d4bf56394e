/**
 * spec/semantics.md through the public API: every row of "Verbs calls (sync failures)" (the
 * errno, and a message naming the rule), and rows of "Work requests (async outcomes)" end to
 * end (the completion status, the QP in ERR, the next work request flushed).
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, incRkey, type Cq, type Mr, type Mw, type Pd, type Qp, type SendWr } from '../../src/index.ts';
import { readMkey } from '../../src/rtl/firmware/icm_writer.ts';
import { rcPair } from '../support/rc_pair.ts';

const PAGE = 4096;
const GiB2 = 2 ** 31;

/** Expects `f` to fail with a VerbsError of `errno` whose message matches `rule`. */
async function expectErr(f: () => unknown, errno: string, rule: RegExp): Promise<void> {
  let err: unknown = null;
  try {
    await f();
  } catch (e) {
    err = e;
  }
  expect(err, `expected ${errno} (${rule})`).toBeInstanceOf(VerbsError);
  expect((err as VerbsError).errno).toBe(errno);
  expect((err as VerbsError).message).toMatch(rule);
}

/** A small MR cache (buckets of 4 to 64 MTT entries, 8 mkeys each): its pre-fill is over in 40 CREATE_MKEYs, not 6,120. */
const SMALL_MR_CACHE = { mrCacheLimit: 4, mrCacheLastOrder: 4 } as const;

describe('verbs calls: synchronous failures (spec/semantics.md "Verbs calls")', () => {
  it('every row of the table', async () => {
    // no MR cache pre-fill: the quiesce below would wait for its 6,120 CREATE_MKEYs
    const tb = new Testbed({ hcas: 1, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const attr = await ctx.queryDevice();
      const pd = await ctx.allocPd();
      const pd2 = await ctx.allocPd();
      const cq = await ctx.createCq(64);
      const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
      const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
      await qp.connect(peer);
      const h = tb.host(0);
      const buf = h.alloc(8 * PAGE, { align: PAGE });
      const RW = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;

      // regMr / REG_MR access: REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE
      await expectErr(() => pd.regMr(buf.addr, PAGE, Access.REMOTE_WRITE), 'EINVAL', /REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE/);
      await expectErr(() => pd.regMr(buf.addr, PAGE, Access.REMOTE_ATOMIC | Access.REMOTE_READ), 'EINVAL', /requires LOCAL_WRITE/);
      const fmr = await pd.allocMr('MEM_REG', 4);
      expect(fmr.mapSg([{ addr: buf.addr, length: 2 * PAGE }])).toBe(1);
      await expectErr(() => qp.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.REMOTE_WRITE }), 'EINVAL', /requires LOCAL_WRITE/);

      // regMr: length 0 (EINVAL), a range not mapped in the host (EFAULT)
      await expectErr(() => pd.regMr(buf.addr, 0, Access.LOCAL_WRITE), 'EINVAL', /length/);
      await expectErr(() => pd.regMr(2 ** 46, PAGE, Access.LOCAL_WRITE), 'EFAULT', /not mapped/);
      await expectErr(() => pd.regMr(buf.addr + 7 * PAGE, 2 * PAGE, Access.LOCAL_WRITE), 'EFAULT', /not mapped/);

      // allocMr: type, maxNumSg 0 or above maxFastRegPageListLen
      await expectErr(() => pd.allocMr('USER' as 'MEM_REG', 4), 'EINVAL', /type must be MEM_REG or SG_GAPS/);
      await expectErr(() => pd.allocMr('MEM_REG', 0), 'EINVAL', /maxNumSg/);
      await expectErr(() => pd.allocMr('SG_GAPS', attr.maxFastRegPageListLen + 1), 'EINVAL', /max_fast_reg_page_list_len|maxNumSg/);

      // allocMw: type 1 or 2
      await expectErr(() => pd.allocMw(3 as 1), 'EINVAL', /type must be 1 or 2/);

      // mapSg (MEM_REG): the first element breaking the alignment rule ends the mapping
      const m8 = await pd.allocMr('MEM_REG', 8);
      expect(m8.mapSg([{ addr: buf.addr, length: PAGE }, { addr: buf.addr + 2 * PAGE + 100, length: 100 }])).toBe(1); // 2nd not page-aligned
      expect(m8.mapSg([{ addr: buf.addr + 100, length: 100 }, { addr: buf.addr + PAGE, length: PAGE }])).toBe(1); // 1st does not end aligned
      expect(m8.mapSg([{ addr: buf.addr + 100, length: PAGE - 100 }, { addr: buf.addr + 3 * PAGE, length: PAGE }, { addr: buf.addr + 5 * PAGE, length: 10 }])).toBe(3);
      expect(m8.length).toBe(PAGE - 100 + PAGE + 10);
      // mapSg: more entries than maxNumSg maps the first maxNumSg
      const m2 = await pd.allocMr('MEM_REG', 2);
      expect(m2.mapSg([0, 1, 2].map((i) => ({ addr: buf.addr + i * PAGE, length: PAGE })))).toBe(2);
      expect(m2.length).toBe(2 * PAGE);
      // (addresses and lengths are checked before the host is asked: EINVAL, never a HostError)
      await expectErr(() => m2.mapSg([{ addr: -4096, length: PAGE }]), 'EINVAL', /non-negative/);
      // mapSg: the page size is a power of two in 4 KiB .. 2 GiB (the model has the same rule)
      for (const bad of [2048, 6144, 2 ** 32]) await expectErr(() => m2.mapSg([{ addr: buf.addr, length: 8 }], bad), 'EINVAL', /pageSize/);
      const g2 = await pd.allocMr('SG_GAPS', 2);
      expect(g2.mapSg([0, 1, 2].map((i) => ({ addr: buf.addr + i * PAGE + 8, length: 16 })))).toBe(2);

      // postSend REG_MR: key index differs from the MR's; page list longer than maxNumSg
      await expectErr(() => qp.postSend({ wrId: 2, opcode: 'REG_MR', mr: fmr, key: (fmr.rkey + 0x100) >>> 0, access: Access.LOCAL_WRITE }), 'EINVAL', /index/);
      // (mapSg caps the elements at maxNumSg, not their pages: one element of 3 pages maps, as the
      // letter of semantics.md and the reference model have it, and REG_MR refuses the list)
      const m1 = await pd.allocMr('MEM_REG', 1);
      expect(m1.mapSg([{ addr: buf.addr + 100, length: 2 * PAGE }])).toBe(1);
      expect(m1.length).toBe(2 * PAGE);
      await expectErr(() => qp.postSend({ wrId: 3, opcode: 'REG_MR', mr: m1, key: m1.rkey, access: Access.LOCAL_WRITE }), 'EINVAL', /maxNumSg/);
      expect(m2.mapSg([{ addr: buf.addr, length: 2 * PAGE }, { addr: buf.addr + 2 * PAGE, length: PAGE }])).toBe(2);
      await expectErr(() => qp.postSend({ wrId: 3, opcode: 'REG_MR', mr: m2, key: m2.rkey, access: Access.LOCAL_WRITE }), 'EINVAL', /maxNumSg/);

      // postSend BIND_MW: new rkey index differs; length > 2 GiB
      const mr = await pd.regMr(buf.addr, 4 * PAGE, RW | Access.MW_BIND);
      const mw2 = await pd.allocMw(2);
      const bi = { mr, addr: buf.addr, length: PAGE, access: Access.REMOTE_READ };
      await expectErr(() => qp.postSend({ wrId: 4, opcode: 'BIND_MW', mw: mw2, rkey: incRkey(mw2.rkey) + 0x100, bindInfo: bi }), 'EINVAL', /index/);
      await expectErr(() => qp.postSend({ wrId: 5, opcode: 'BIND_MW', mw: mw2, rkey: incRkey(mw2.rkey), bindInfo: { ...bi, length: GiB2 + 1 } }), 'EOPNOTSUPP', /2 GiB/);

      // postSend RDMA_READ_WITH_INV on mlx5 (no iWARP)
      await expectErr(() => qp.postSend({ wrId: 6, opcode: 'RDMA_READ_WITH_INV', sgList: [{ addr: buf.addr, length: 8, lkey: mr.lkey }], remoteAddr: buf.addr, rkey: mr.rkey, invalidateRkey: fmr.rkey }), 'EOPNOTSUPP', /RDMA_READ_WITH_INV/);

      // bindMw (type-1 verb)
      const mw1 = await pd.allocMw(1);
      const mw1b = await pd2.allocMw(1);
      await expectErr(() => qp.bindMw(mw2, bi), 'EINVAL', /type-1/);
      await expectErr(() => qp.bindMw(mw1, { mr: null, addr: buf.addr, length: 16, access: Access.REMOTE_READ }), 'EINVAL', /no MR but length != 0/);
      await expectErr(() => qp.bindMw(mw1b, bi), 'EPERM', /PD/);
      await expectErr(() => qp.bindMw(mw1, { ...bi, access: Access.REMOTE_READ | Access.ZERO_BASED }), 'EINVAL', /ZERO_BASED/);
      const zmr = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE | Access.MW_BIND | Access.ZERO_BASED);
      await expectErr(() => qp.bindMw(mw1, { mr: zmr, addr: 0, length: 16, access: Access.REMOTE_READ }), 'EINVAL', /zero-based/);

      // dereg with windows bound: EBUSY
      const k = qp.bindMw(mw1, bi, { wrId: 7, signaled: true });
      expect(k).toBe(mw1.rkey);
      expect((await cq.wait(1))[0]).toMatchObject({ wrId: 7, status: 'SUCCESS', opcode: 'BIND_MW' });
      await expectErr(() => mr.dereg(), 'EBUSY', /windows/);

      // postSend: send queue full
      const small = await pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 2 });
      const smallPeer = await pd.createQp({ sendCq: cq, recvCq: cq });
      await small.connect(smallPeer);
      const w = (i: number): SendWr => ({ wrId: 100 + i, opcode: 'RDMA_WRITE', sgList: [{ addr: buf.addr, length: 8, lkey: mr.lkey }], remoteAddr: buf.addr + PAGE, rkey: mr.rkey });
      small.postSend([w(0), { ...w(1), signaled: true }]);
      await expectErr(() => small.postSend(w(2)), 'ENOMEM', /send queue full/);
      await tb.quiesce();
      // done, but the driver learns it from the CQE (the send queue's tail moves in poll_cq)
      await expectErr(() => small.postSend(w(2)), 'ENOMEM', /send queue full/);
      expect((await small.attr.sendCq.wait(1)).map((c) => c.wrId)).toEqual([101]);
      expect(() => small.postSend(w(3))).not.toThrow();

      // any call on a destroyed object: EINVAL
      const dead = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE);
      await dead.dereg();
      await expectErr(() => dead.dereg(), 'EINVAL', /deregistered/);
      const deadF = await pd.allocMr('MEM_REG', 1);
      await deadF.dereg();
      await expectErr(() => deadF.mapSg([{ addr: buf.addr, length: PAGE }]), 'EINVAL', /deregistered/);
      await expectErr(() => deadF.updateKey(1), 'EINVAL', /deregistered/);
      await expectErr(() => qp.postSend({ wrId: 8, opcode: 'REG_MR', mr: deadF, key: deadF.rkey, access: 0 }), 'EINVAL', /deregistered/);
      const deadW = await pd.allocMw(1);
      await deadW.dealloc();
      await expectErr(() => deadW.dealloc(), 'EINVAL', /deallocated/);
      await expectErr(() => qp.bindMw(deadW, bi), 'EINVAL', /deallocated/);
      const deadW2 = await pd.allocMw(2);
      await deadW2.dealloc();
      await expectErr(() => qp.postSend({ wrId: 9, opcode: 'BIND_MW', mw: deadW2, rkey: incRkey(deadW2.rkey), bindInfo: bi }), 'EINVAL', /deallocated/);
    });
  });

  it('regMr ON_DEMAND on a device without ON_DEMAND_PAGING: EOPNOTSUPP', async () => {
    const tb = new Testbed({ hcas: 1, caps: { odp: false } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      expect((await ctx.queryDevice()).deviceCapFlags.has('ON_DEMAND_PAGING')).toBe(false);
      const pd = await ctx.allocPd();
      const b = tb.host(0).alloc(PAGE, { align: PAGE });
      await expectErr(() => pd.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.ON_DEMAND), 'EOPNOTSUPP', /ON_DEMAND_PAGING/);
    });
  });

  it('a verbs call outside run() throws a clear error', async () => {
    const tb = new Testbed({ hcas: 1 });
    await expect(tb.openDevice(0)).rejects.toThrow(/run/);
  });
});

describe('work requests: asynchronous outcomes (spec/semantics.md "Work requests")', () => {
  it('REG_MR, LOCAL_INV and BIND_MW rows, each on a fresh QP, the next WR flushed', async () => {
    const tb = new Testbed({ hcas: 1 });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const pdB = await ctx.allocPd();
      const cq = await ctx.createCq(256);
      const h = tb.host(0);
      const buf = h.alloc(8 * PAGE, { align: PAGE });
      const fresh = async (p: Pd = pd): Promise<Qp> => {
        const q = await p.createQp({ sendCq: cq, recvCq: cq });
        const peer = await p.createQp({ sendCq: cq, recvCq: cq });
        await q.connect(peer);
        return q;
      };
      const mr = await pd.regMr(buf.addr, 4 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.MW_BIND);
      const noBind = await pd.regMr(buf.addr, 4 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
      const noLw = await pd.regMr(buf.addr, 4 * PAGE, Access.REMOTE_READ | Access.MW_BIND);
      const nop = (_q: Qp): SendWr => ({ wrId: 999, opcode: 'RDMA_WRITE', sgList: [{ addr: buf.addr, length: 8, lkey: mr.lkey }], remoteAddr: buf.addr + PAGE, rkey: mr.rkey });

      /** Posts `wr` (signaled) and one more on the same QP; returns [status, opcode, flushed?]. */
      const outcome = async (q: Qp, wr: SendWr, wcCq: Cq = cq): Promise<[string, string, string]> => {
        q.postSend([{ ...wr, signaled: true }, nop(q)]);
        const first = (await wcCq.wait(1))[0];
        let next = 'none';
        if (first.status !== 'SUCCESS') next = (await wcCq.wait(1))[0].status;
        return [first.status, first.opcode, next];
      };
      const bindWr = (mw: Mw, m: Mr, addr: number, length: number, access: number): SendWr =>
        ({ wrId: 1, opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: { mr: m, addr, length, access } });

      // REG_MR: the MR must be FREE
      let q = await fresh();
      const fmr = await pd.allocMr('MEM_REG', 2);
      fmr.mapSg([{ addr: buf.addr, length: 2 * PAGE }]);
      expect(await outcome(q, { wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE })).toEqual(['SUCCESS', 'REG_MR', 'none']);
      fmr.updateKey(incRkey(fmr.rkey) & 0xff);
      expect(await outcome(q, { wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE })).toEqual(['LOC_QP_OP_ERR', 'REG_MR', 'WR_FLUSH_ERR']);
      expect((await q.query()).state).toBe('ERR');

      // LOCAL_INV: full key match (a stale tag)
      q = await fresh();
      expect(await outcome(q, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: incRkey(mr.lkey) })).toEqual(['LOC_QP_OP_ERR', 'LOCAL_INV', 'WR_FLUSH_ERR']);
      // LOCAL_INV: a type-1 window
      q = await fresh();
      const mw1 = await pd.allocMw(1);
      q.bindMw(mw1, { mr, addr: buf.addr, length: PAGE, access: Access.REMOTE_READ }, { wrId: 2, signaled: true });
      expect((await cq.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'BIND_MW' });
      expect(await outcome(q, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: mw1.rkey })).toEqual(['LOC_QP_OP_ERR', 'LOCAL_INV', 'WR_FLUSH_ERR']);
      // LOCAL_INV: the MR still has windows bound (mw1)
      q = await fresh();
      expect(await outcome(q, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: mr.lkey })).toEqual(['LOC_QP_OP_ERR', 'LOCAL_INV', 'WR_FLUSH_ERR']);
      // LOCAL_INV: an already FREE target succeeds (no check flag)
      q = await fresh();
      const free = await pd.allocMr('MEM_REG', 1);
      expect(await outcome(q, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: free.rkey })).toEqual(['SUCCESS', 'LOCAL_INV', 'none']);
      expect((await q.query()).state).toBe('RTS');

      // BIND_MW (2): the window must be FREE (o10-37.2.30)
      const mw2 = await pd.allocMw(2);
      expect(await outcome(q, bindWr(mw2, mr, buf.addr, PAGE, Access.REMOTE_READ))).toEqual(['SUCCESS', 'BIND_MW', 'none']);
      expect(await outcome(q, bindWr(mw2, mr, buf.addr, PAGE, Access.REMOTE_READ))).toEqual(['MW_BIND_ERR', 'BIND_MW', 'WR_FLUSH_ERR']);
      // BIND_MW (2): the QP's PD must be the window's (C10-72)
      q = await fresh(pdB);
      const mw2b = await pd.allocMw(2);
      expect(await outcome(q, bindWr(mw2b, mr, buf.addr, PAGE, Access.REMOTE_READ))).toEqual(['MW_BIND_ERR', 'BIND_MW', 'WR_FLUSH_ERR']);
      // BIND_MW over an MR registered without MW_BIND succeeds, as on mlx5 (changed with issue 18
      // item 7, once MW_BIND_ERR by C10-73): the mkey has no MW_BIND bit (Linux 6.12 wr.c:180
      // get_umr_flags), and rdma-core checks it only in an MLX5_MW_DEBUG build (qp.c set_bind_wr)
      q = await fresh();
      const mw2c = await pd.allocMw(2);
      expect(await outcome(q, bindWr(mw2c, noBind, buf.addr, PAGE, Access.REMOTE_READ))).toEqual(['SUCCESS', 'BIND_MW', 'none']);
      // BIND_MW: window REMOTE_WRITE needs MR LOCAL_WRITE (C10-74)
      q = await fresh();
      expect(await outcome(q, bindWr(mw2b, noLw, buf.addr, PAGE, Access.REMOTE_WRITE))).toEqual(['MW_BIND_ERR', 'BIND_MW', 'WR_FLUSH_ERR']);
      // BIND_MW: the range must lie within the MR (C10-75)
      q = await fresh();
      expect(await outcome(q, bindWr(mw2b, mr, buf.addr + 3 * PAGE, 2 * PAGE, Access.REMOTE_READ))).toEqual(['MW_BIND_ERR', 'BIND_MW', 'WR_FLUSH_ERR']);
      // BIND_MW (2): no zero-length type-2 bind (o10-37.2.40)
      q = await fresh();
      expect(await outcome(q, bindWr(mw2b, mr, buf.addr, 0, Access.REMOTE_READ))).toEqual(['MW_BIND_ERR', 'BIND_MW', 'WR_FLUSH_ERR']);
      // BIND_MW: the MR must be VALID (a FREE fast-reg MR)
      q = await fresh();
      const freeMr = await pd.allocMr('MEM_REG', 1);
      expect(await outcome(q, bindWr(mw2b, freeMr, buf.addr, 16, Access.REMOTE_READ))).toEqual(['MW_BIND_ERR', 'BIND_MW', 'WR_FLUSH_ERR']);
      // type 1 through the verb: the range rule too
      q = await fresh();
      const mw1c = await pd.allocMw(1);
      q.bindMw(mw1c, { mr, addr: buf.addr + 4 * PAGE - 8, length: 16, access: Access.REMOTE_READ }, { wrId: 3, signaled: true });
      q.postSend(nop(q));
      expect((await cq.wait(2)).map((w) => [w.status, w.opcode])).toEqual([['MW_BIND_ERR', 'BIND_MW'], ['WR_FLUSH_ERR', 'RDMA_WRITE']]);
    });
  });

  it("a deregistered cached user MR keeps its key (mlx5 stores and pops the whole key): refused while free, then the old rkey reaches the next MR of its mkey", async () => {
    // no pre-fill: a fill landing between the dereg and the next regMr would be popped first (LIFO)
    const tb = new Testbed({ hcas: 1, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const cq = await ctx.createCq(64);
      const q = await pd.createQp({ sendCq: cq, recvCq: cq });
      const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
      await q.connect(peer);
      const buf = tb.host(0).alloc(3 * PAGE, { align: PAGE });
      tb.host(0).write(buf.addr, new Uint8Array(PAGE).fill(0x11));
      tb.host(0).write(buf.addr + PAGE, new Uint8Array(PAGE).fill(0x22));
      const dst = await pd.regMr(buf.addr + 2 * PAGE, PAGE, Access.LOCAL_WRITE);
      const read = async (rkey: number, addr: number): Promise<string> => {
        q.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: buf.addr + 2 * PAGE, length: 4, lkey: dst.lkey }], remoteAddr: addr, rkey, signaled: true });
        const [wc] = await cq.wait(1);
        return wc.status === 'SUCCESS' ? `${tb.host(0).read(buf.addr + 2 * PAGE, 1)[0]}` : wc.status;
      };
      const mr = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
      expect(mr.poolBucket).toBe(4);
      const old = mr.rkey;
      expect(await read(old, buf.addr)).toBe('17');
      await mr.dereg();
      // the mkey is FREE in the cache under the same key (mlx5r_umr_revoke_mr keeps mkey_7_0)
      const ctxBytes = (await tb.hca(0).cmdif.exec({ op: 'QUERY_MKEY', index: old >>> 8 })).context;
      expect(ctxBytes[0] & 0x40).toBe(0x40);
      expect(ctxBytes[7]).toBe(old & 0xff);
      expect(await read(old, buf.addr)).toBe('REM_ACCESS_ERR'); // a free mkey serves nothing (the QP is now in error)
      // the next registration of that bucket pops the same mkey, same 32-bit key (last in, first out)
      const again = await pd.regMr(buf.addr + PAGE, PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
      expect(again.rkey).toBe(old);
      expect(again.poolBucket).toBe(4);
    });
  });

  it('a fast-reg MR can be re-registered once FREE again, with a new key; the old key is refused', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0, qp1 } = await rcPair(tb);
      const a = tb.host(0).alloc(2 * PAGE, { align: PAGE });
      tb.host(0).write(a.addr, Uint8Array.from({ length: 2 * PAGE }, (_, i) => i & 0xff));
      const b = tb.host(1).alloc(PAGE, { align: PAGE });
      const bmr = await pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE);
      const fmr = await pd0.allocMr('MEM_REG', 2);
      fmr.mapSg([{ addr: a.addr, length: PAGE }]);
      // post REG_MR, LOCAL_INV, REG_MR (new key, second page) back to back: in order on one QP
      const k1 = fmr.rkey;
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: k1, access: Access.REMOTE_READ });
      qp0.postSend({ wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: k1 });
      fmr.mapSg([{ addr: a.addr + PAGE, length: PAGE }]);
      fmr.updateKey(incRkey(k1) & 0xff);
      const k2 = fmr.rkey;
      qp0.postSend({ wrId: 3, opcode: 'REG_MR', mr: fmr, key: k2, access: Access.REMOTE_READ, signaled: true });
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 3, status: 'SUCCESS', opcode: 'REG_MR' });
      qp1.postSend({ wrId: 10, opcode: 'RDMA_READ', sgList: [{ addr: b.addr, length: 64, lkey: bmr.lkey }], remoteAddr: a.addr + PAGE + 16, rkey: k2, signaled: true });
      expect((await cq1.wait(1))[0]).toMatchObject({ status: 'SUCCESS', byteLen: 64 });
      expect(tb.host(1).read(b.addr, 64)).toEqual(tb.host(0).read(a.addr + PAGE + 16, 64));
      qp1.postSend({ wrId: 11, opcode: 'RDMA_READ', sgList: [{ addr: b.addr, length: 64, lkey: bmr.lkey }], remoteAddr: a.addr + PAGE + 16, rkey: k1, signaled: true });
      expect((await cq1.wait(1))[0]).toMatchObject({ wrId: 11, status: 'REM_ACCESS_ERR' });
    });
  });
});

describe('zero-based MRs at addresses inside a page (semantics.md: "a zero-based MR starts at 0")', () => {
  /** Two adapters, a QP pair, and on hca1 a sink MR to read into. */
  async function setup(tb: Testbed) {
    const { c0, pd0, pd1, cq0, cq1, qp0, qp1 } = await rcPair(tb);
    const buf = tb.host(0).alloc(4 * PAGE, { align: PAGE });
    tb.host(0).write(buf.addr, Uint8Array.from({ length: 4 * PAGE }, (_, i) => (i * 5 + 1) & 0xff));
    const sink = tb.host(1).alloc(4 * PAGE);
    const smr = await pd1.regMr(sink.addr, 4 * PAGE, Access.LOCAL_WRITE);
    /** RDMA READ by hca1 of `len` bytes at iova `va` through `rkey`: what it got. */
    const read = async (rkey: number, va: number, len: number): Promise<Uint8Array> => {
      qp1.postSend({ wrId: 7, opcode: 'RDMA_READ', sgList: [{ addr: sink.addr, length: len, lkey: smr.lkey }], remoteAddr: va, rkey, signaled: true });
      expect((await cq1.wait(1))[0]).toMatchObject({ wrId: 7, status: 'SUCCESS', byteLen: len });
      return tb.host(1).read(sink.addr, len);
    };
    return { c0, pd0, cq0, qp0, buf, read };
  }

  // Changed with issue 18 item 7: these registrations were at unaligned addresses (buf.addr + 1,
  // + 3000, a page list from buf.addr + 1), with a model-private first byte offset in ICM. mlx5
  // has none: the kernel refuses an MR whose iova and address differ in page offset (Linux 6.12
  // drivers/infiniband/core/uverbs_cmd.c:710, EINVAL), as start_addr is also the page offset
  // (mlx5_ib.h:1720-1723). They are EINVAL now, and the zero-based MRs start on a page.
  it('regMr (CREATE_MKEY and the pool) and REG_MR (MEM_REG, SG_GAPS): iova 0 is the first registered byte', async () => {
    const tb = new Testbed({ hcas: 2, config: SMALL_MR_CACHE });
    await tb.run(async () => {
      const { c0, pd0, cq0, qp0, buf, read } = await setup(tb);
      const h = tb.host(0);
      const ZB_READ = Access.LOCAL_WRITE | Access.REMOTE_READ | Access.ZERO_BASED;
      // not page aligned: the uverbs rule
      await expectErr(() => pd0.regMr(buf.addr + 1, 2 * PAGE, ZB_READ), 'EINVAL', /same offset in their page \(uverbs_cmd\.c:710\)/);
      // regMr from the MR cache (a miss or a hit), then from the filled cache
      const a = await pd0.regMr(buf.addr, 2 * PAGE, ZB_READ);
      expect(a.poolBucket).toBe(4);
      await tb.quiesce(); // the pre-fill is done
      const b = await pd0.regMr(buf.addr + PAGE, 2 * PAGE, ZB_READ);
      expect(b.poolBucket).toBe(4);
      for (const [mr, addr] of [[a, buf.addr], [b, buf.addr + PAGE]] as const) {
        expect(mr.iova).toBe(0);
        expect(await read(mr.rkey, 0, 5000)).toEqual(h.read(addr, 5000));
        expect(await read(mr.rkey, 2 * PAGE - 10, 10)).toEqual(h.read(addr + 2 * PAGE - 10, 10));
        // QUERY_MKEY shows what mlx5 shows, start_addr 0 and every reserved byte zero; the
        // zero-based bit is ICM's own (icm_mkey.ts)
        const raw = await c0.queryMkey(mr.lkey);
        const ctx = new DataView(raw.buffer, raw.byteOffset);
        expect(ctx.getUint32(16) * 2 ** 32 + ctx.getUint32(20)).toBe(0);
        expect([raw[3], ...raw.subarray(8, 12), ...raw.subarray(36, 48), ...raw.subarray(60, 64)]).toEqual(new Array(21).fill(0));
        expect(readMkey(tb.hca(0), mr.lkey >>> 8)).toMatchObject({ zeroBased: true });
      }
      // REG_MR of a page list starting inside a page: EINVAL at post (the same rule); on a page
      // it works; an SG_GAPS list (KLMs start at their first byte) at any address
      const m = await pd0.allocMr('MEM_REG', 4);
      expect(m.mapSg([{ addr: buf.addr + 1, length: 2 * PAGE - 1 }])).toBe(1);
      expect(() => qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: m, key: m.rkey, access: ZB_READ, signaled: true })).toThrow(/same page offset \(uverbs_cmd\.c:710\)/);
      expect(m.mapSg([{ addr: buf.addr, length: 2 * PAGE - 1 }])).toBe(1);
      const g = await pd0.allocMr('SG_GAPS', 4);
      expect(g.mapSg([{ addr: buf.addr + 100, length: 50 }, { addr: buf.addr + 2 * PAGE + 7, length: 5000 }])).toBe(2);
      for (const mr of [m, g]) {
        qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr, key: mr.rkey, access: ZB_READ, signaled: true });
        expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 1, status: 'SUCCESS', opcode: 'REG_MR' });
      }
      expect(await read(m.rkey, 0, 5000)).toEqual(h.read(buf.addr, 5000));
      const want = new Uint8Array(1000);
      want.set(h.read(buf.addr + 100 + 10, 40), 0);
      want.set(h.read(buf.addr + 2 * PAGE + 7, 960), 40);
      expect(await read(g.rkey, 10, 1000)).toEqual(want);
    });
  });

  it('no window on a zero-based MR: the bindMw verb EINVAL (software view), BIND_MW (type 2) MW_BIND_ERR', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, cq0, qp0, buf } = await setup(tb);
      const ZB = Access.LOCAL_WRITE | Access.MW_BIND | Access.ZERO_BASED;
      // a fast-reg MR is zero-based once a REG_MR with ZERO_BASED is posted for it
      const fmr = await pd0.allocMr('MEM_REG', 2);
      fmr.mapSg([{ addr: buf.addr, length: PAGE }]);
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: ZB });
      const mw1 = await pd0.allocMw(1);
      await expectErr(() => qp0.bindMw(mw1, { mr: fmr, addr: 0, length: 0, access: 0 }), 'EINVAL', /zero-based/);
      // type 2: the device refuses it (the MR's ZERO_BASED bit)
      const user = await pd0.regMr(buf.addr, 16, ZB);
      const mw2 = await pd0.allocMw(2);
      qp0.postSend({ wrId: 2, opcode: 'BIND_MW', mw: mw2, rkey: incRkey(mw2.rkey), bindInfo: { mr: user, addr: 0, length: 1, access: Access.REMOTE_READ }, signaled: true });
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 2, status: 'MW_BIND_ERR', opcode: 'BIND_MW' });
    });
  });

  // Changed with issue 18 item 7: ICM kept MW_BIND and a first byte offset (5) passed beside
  // the WQE; neither exists on mlx5 (no MW_BIND bit: wr.c:180 get_umr_flags; no page offset
  // apart from start_addr: mlx5_ib.h:1720-1723), and the page list now starts on a page.
  it('a zero-based REG_MR WQE is mlx5\'s: start_addr 0 and no private bit in its mkey segment; ICM keeps ZERO_BASED only', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { c0, pd0, cq0, qp0, buf } = await setup(tb);
      const m = await pd0.allocMr('MEM_REG', 4);
      m.mapSg([{ addr: buf.addr, length: PAGE }]);
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: m, key: m.rkey, access: Access.LOCAL_WRITE | Access.MW_BIND | Access.ZERO_BASED, signaled: true });
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 1, status: 'SUCCESS', opcode: 'REG_MR' });
      // the WQE in the send queue: the UMR (opcode 0x25) whose imm is the key
      const ring = tb.host(0).read(qp0.sq.addr, qp0.sq.wqeCnt * qp0.sq.stride);
      const at = Array.from({ length: qp0.sq.wqeCnt }, (_, i) => i * qp0.sq.stride)
        .find((o) => ring[o + 3] === 0x25 && new DataView(ring.buffer, ring.byteOffset).getUint32(o + 12) === m.rkey >>> 0);
      expect(at).toBeDefined();
      const seg = ring.subarray(at! + 64, at! + 128); // after the control (16) and UMR control (48) segments
      // mlx5_mkey_seg: version (byte 3) and rsvd1 (8..11) zero, start_addr (16..23) 0
      expect([seg[3], ...seg.subarray(8, 12), ...seg.subarray(16, 24)]).toEqual(new Array(13).fill(0));
      const q = await c0.queryMkey(m.lkey);
      expect(new DataView(q.buffer, q.byteOffset).getUint32(20)).toBe(0);
      const e = readMkey(tb.hca(0), m.lkey >>> 8);
      expect(e).toMatchObject({ start: 0, zeroBased: true });
      expect(Object.keys(e)).not.toContain('mwBind');
      expect(Object.keys(e)).not.toContain('fbo');
    });
  });
});

describe('translation lists by pointer (over 64 bytes): each posted UMR has its own descriptor buffer', () => {
  it('two REG_MRs posted back to back, and two pooled regMr at once, each map their own pages', async () => {
    const tb = new Testbed({ hcas: 2, config: SMALL_MR_CACHE });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0, qp1 } = await rcPair(tb);
      const [h0, h1] = [tb.host(0), tb.host(1)];
      const sink = h1.alloc(PAGE);
      const smr = await pd1.regMr(sink.addr, PAGE, Access.LOCAL_WRITE);
      const firstBytes = async (rkey: number, va: number): Promise<number[] | string> => {
        qp1.postSend({ wrId: 7, opcode: 'RDMA_READ', sgList: [{ addr: sink.addr, length: 4, lkey: smr.lkey }], remoteAddr: va, rkey, signaled: true });
        const [wc] = await cq1.wait(1);
        return wc.status !== 'SUCCESS' ? wc.status : [...h1.read(sink.addr, 4)];
      };
      const RD = Access.LOCAL_WRITE | Access.REMOTE_READ;
      const [A, B] = [h0.alloc(16 * PAGE), h0.alloc(16 * PAGE)];
      h0.fill(A.addr, 16 * PAGE, 0xaa);
      h0.fill(B.addr, 16 * PAGE, 0xbb);
      // 16 MTTs each (128 bytes: the list goes by pointer), posted in one batch
      const [ma, mb] = [await pd0.allocMr('MEM_REG', 16), await pd0.allocMr('MEM_REG', 16)];
      ma.mapSg([{ addr: A.addr, length: 16 * PAGE }]);
      mb.mapSg([{ addr: B.addr, length: 16 * PAGE }]);
      qp0.postSend([
        { wrId: 1, opcode: 'REG_MR', mr: ma, key: ma.rkey, access: RD, signaled: true },
        { wrId: 2, opcode: 'REG_MR', mr: mb, key: mb.rkey, access: RD, signaled: true },
      ]);
      expect((await cq0.wait(2)).map((w) => w.status)).toEqual(['SUCCESS', 'SUCCESS']);
      expect(await firstBytes(ma.rkey, A.addr + 15 * PAGE)).toEqual([0xaa, 0xaa, 0xaa, 0xaa]);
      expect(await firstBytes(mb.rkey, B.addr + 15 * PAGE)).toEqual([0xbb, 0xbb, 0xbb, 0xbb]);
      // the driver's mkey pool: two registrations in flight on its UMR QP
      await tb.quiesce(); // the cache's pre-fill is done
      const [x, y] = await Promise.all([pd0.regMr(A.addr, 16 * PAGE, RD), pd0.regMr(B.addr, 16 * PAGE, RD)]);
      expect([x.poolBucket, y.poolBucket]).toEqual([16, 16]);
      expect(await firstBytes(x.rkey, A.addr + 15 * PAGE)).toEqual([0xaa, 0xaa, 0xaa, 0xaa]);
      expect(await firstBytes(y.rkey, B.addr + 15 * PAGE)).toEqual([0xbb, 0xbb, 0xbb, 0xbb]);
    });
  });

  it('mapSg of lists with 10^5 entries returns (no stack overflow); one UMR carries any list mapSg accepts', async () => {
    const tb = new Testbed({ hcas: 1 });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const cq = await ctx.createCq(16);
      const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
      await qp.connect(await pd.createQp({ sendCq: cq, recvCq: cq })); // loopback
      const buf = tb.host(0).alloc(65536 * 8192, { align: 8192 });
      // 131072 4 KiB pages in one element: mapped, then refused by REG_MR (longer than maxNumSg)
      const big = await pd.allocMr('MEM_REG', 65536);
      expect(big.mapSg([{ addr: buf.addr, length: 131072 * PAGE }])).toBe(1);
      await expectErr(() => qp.postSend({ wrId: 1, opcode: 'REG_MR', mr: big, key: big.rkey, access: Access.LOCAL_WRITE }), 'EINVAL', /page list of 131072 > maxNumSg 65536/);
      // 65536 pages of 8 KiB over scattered frames: 131072 4 KiB MTTs do not fit one UMR, so
      // mapSg stops before the element; three elements map as far as a UMR can carry
      const m = await pd.allocMr('MEM_REG', 65536);
      expect(m.mapSg([{ addr: buf.addr, length: 65536 * 8192 }], 8192)).toBe(0);
      const third = 65536 * 8192 / 4;
      const parts = [0, 1, 2].map((i) => ({ addr: buf.addr + i * third, length: third }));
      const n = m.mapSg(parts, 8192);
      expect(n).toBeGreaterThan(0);
      expect(m.pages.length).toBeLessThanOrEqual(131064);
      qp.postSend({ wrId: 2, opcode: 'REG_MR', mr: m, key: m.rkey, access: Access.LOCAL_WRITE, signaled: true });
      expect((await cq.wait(1))[0].status).toBe('SUCCESS');
    });
  });
});
