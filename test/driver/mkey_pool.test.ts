/**
 * The driver's MR cache as mlx5_ib's (Linux 6.12 mr.c): buckets of 4 x 2^i MTT entries and the
 * at-most-twice rule, the profile's limits, pre-fill at load, a miss that makes a cache mkey,
 * revoke-and-return on deregistration with the whole key kept, temporary entries and their
 * timer, shrinking after the delay, fills stopped when the firmware refuses one, and the stats.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Access, Testbed, VerbsError, type Mr } from '../../src/index.ts';
import { MkeyPool, mkeyCacheLimit } from '../../src/driver/mkey_pool.ts';
import { MS } from '../../src/sim/time.ts';

const PAGE = 4096;

describe('MR cache', () => {
  it('bucketOf: the smallest 4 x 2^i of at least n, never more than max(2n, 4), none past 4 x 2^20', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 23 }), (n) => {
        const b = MkeyPool.bucketOf(n);
        if (n > 4 * 2 ** 20) return b === 0;
        return b >= n && b <= Math.max(2 * n, 4) && Math.log2(b / 4) % 1 === 0 && (b === 4 || b / 2 < n);
      }),
    );
    expect([1, 4, 5, 600, 4 * 2 ** 20].map((n) => MkeyPool.bucketOf(n))).toEqual([4, 4, 8, 1024, 4 * 2 ** 20]);
  });

  it("the profile's limits: mrCacheLimit up to 8 Ki entries, then 32, 16, 8, 4, then 0", () => {
    expect([0, 11, 12, 13, 14, 15, 16, 20].map((o) => mkeyCacheLimit(o, 250))).toEqual([250, 250, 32, 16, 8, 4, 0, 0]);
    expect([11, 12, 15].map((o) => mkeyCacheLimit(o, 10))).toEqual([10, 10, 4]);
  });

  it('pre-fills every bucket to twice its limit at load; a take is a hit; stats per bucket in tb.stats()', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 2, mrCacheLastOrder: 3 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      await tb.quiesce();
      expect(ctx.pool.stats().free).toEqual({ 4: 4, 8: 4, 16: 4, 32: 4 });
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(20 * PAGE);
      const mr = await pd.regMr(buf.addr, 5 * PAGE, Access.LOCAL_WRITE); // 5 entries: the 8 bucket
      expect(mr.poolBucket).toBe(8);
      const s = tb.stats()['tb.hca0.mr_cache'];
      expect([s.b8_size, s.b8_free, s.b8_hits, s.b8_misses, s.b8_fills]).toEqual([4, 3, 1, 0, 4]);
      expect(s.created).toBe(16);
    });
  });

  it('a miss makes a cache mkey; dereg revokes it by UMR and returns it; the next take pops the same 32-bit key', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0, mrCacheLastOrder: 2 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(4 * PAGE);
      const a = await pd.regMr(buf.addr, 3 * PAGE, Access.LOCAL_WRITE);
      const umrBefore = tb.stats()['tb.hca0.icm_writer'].umr_context_writes as number;
      const destroyed = tb.stats()['tb.hca0.cmdif'].cmd_DESTROY_MKEY as number;
      await a.dereg();
      expect(tb.stats()['tb.hca0.icm_writer'].umr_context_writes).toBeGreaterThan(umrBefore); // revoked by UMR
      expect(tb.stats()['tb.hca0.cmdif'].cmd_DESTROY_MKEY).toBe(destroyed); // not destroyed
      const b = await pd.regMr(buf.addr + PAGE, 2 * PAGE, Access.LOCAL_WRITE);
      expect(b.lkey).toBe(a.lkey);
      const st = ctx.pool.stats().buckets.find((x) => x.ndescs === 4)!;
      expect([st.misses, st.hits, st.fills, st.size]).toEqual([1, 1, 0, 1]);
    });
  });

  it('a size with no bucket: its own mkey, stored on dereg in a temporary entry that serves up to twice its size, emptied after mrCacheTmpDelayPs', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 1, mrCacheLastOrder: 1, mrCacheTmpDelayPs: 5 * MS } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(100 * PAGE);
      const big = await pd.regMr(buf.addr, 30 * PAGE, Access.LOCAL_WRITE); // past the 8 bucket
      expect(big.poolBucket).toBe(30);
      await big.dereg();
      expect(ctx.pool.stats().free[30]).toBe(1);
      const smaller = await pd.regMr(buf.addr, 20 * PAGE, Access.LOCAL_WRITE); // 30 <= 2 x 20: the temporary entry's
      expect(smaller.lkey).toBe(big.lkey);
      const tooSmall = await pd.regMr(buf.addr, 14 * PAGE, Access.LOCAL_WRITE); // 30 > 2 x 14: an mkey of its own
      expect(tooSmall.poolBucket).toBe(14);
      await smaller.dereg();
      await tooSmall.dereg();
      expect(ctx.pool.stats().free).toMatchObject({ 14: 1, 30: 1 });
      const destroyed = ctx.pool.stats().destroyed;
      await tb.delay(5 * MS);
      await tb.quiesce();
      expect(ctx.pool.stats().free).toMatchObject({ 14: 0, 30: 0 });
      expect(ctx.pool.stats().destroyed).toBe(destroyed + 2);
    });
  });

  it('shrinks a bucket above twice its limit one mkey at a time, once no mkey was added for mrCacheShrinkDelayPs', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 2, mrCacheLastOrder: 0, mrCacheShrinkDelayPs: 2 * MS } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(12 * PAGE);
      const mrs: Mr[] = [];
      for (let i = 0; i < 12; i++) mrs.push(await pd.regMr(buf.addr + i * PAGE, PAGE, Access.LOCAL_WRITE));
      for (const mr of mrs) await mr.dereg();
      await tb.quiesce();
      const free = ctx.pool.stats().free[4];
      expect(free).toBeGreaterThan(4);
      // a store does not adjust the bucket (cache_ent_find_and_store): the next take does
      const one = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE);
      await tb.delay(MS);
      await tb.quiesce();
      expect(ctx.pool.stats().free[4]).toBe(free - 1); // not yet: an mkey was added less than 2 ms ago
      await tb.delay(4 * MS);
      await tb.quiesce();
      expect(ctx.pool.stats().free[4]).toBe(4);
      expect(ctx.pool.stats().destroyed).toBe(free - 1 - 4);
      await one.dereg();
    });
  });

  it('out of mkeys: fills stop for mrCacheFillDelayPs, a miss is VerbsError ENOMEM (never a failed run), a dereg makes room', async () => {
    const tb = new Testbed({ config: { icmMkeyEntries: 40, mrCacheLimit: 8, mrCacheLastOrder: 2 } });
    let error = '';
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      await tb.quiesce();
      expect(ctx.pool.stats().refillsRefused).toBeGreaterThan(0); // the fill met the end and stopped quietly
      const buf = tb.host(0).alloc(64 * PAGE);
      const mrs: Mr[] = [];
      for (;;) {
        try {
          mrs.push(await pd.regMr(buf.addr + mrs.length * PAGE, PAGE, Access.LOCAL_WRITE));
        } catch (e) {
          if (!(e instanceof VerbsError)) throw e;
          error = `${e.errno}: ${e.message}`;
          break;
        }
      }
      // every mkey is the user's or free in another bucket (mlx5 does not take them back)
      const st = ctx.pool.stats();
      const freeElsewhere = st.free[8] + st.free[16];
      expect(st.free[4]).toBe(0);
      expect(mrs.length + freeElsewhere).toBe(ctx.deviceAttr.maxMr);
      await mrs[0].dereg();
      mrs[0] = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE); // room again: the stored mkey
    });
    expect(error).toMatch(/^ENOMEM: .*NO_RESOURCES/);
  });

  it("the destroy policy 'all' applies to a cached MR's deregistration (a UMR), as to DESTROY_MKEY", async () => {
    const missesAfterDereg = async (policy: 'entry' | 'all'): Promise<number> => {
      const tb = new Testbed({ config: { destroyInvalidates: policy, mrCacheLimit: 4, mrCacheLastOrder: 0 } });
      return tb.run(async () => {
        const ctx = await tb.openDevice(0);
        const pd = await ctx.allocPd();
        const cq = await ctx.createCq(16);
        const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
        const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
        await qp.connect(peer);
        const buf = tb.host(0).alloc(4 * PAGE);
        await tb.quiesce();
        const a = await pd.regMr(buf.addr + PAGE, PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
        const b = await pd.regMr(buf.addr + 2 * PAGE, PAGE, Access.LOCAL_WRITE);
        expect([a.poolBucket, b.poolBucket]).toEqual([4, 4]);
        const read = async (): Promise<void> => {
          qp.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: buf.addr + 2 * PAGE, length: 8, lkey: b.lkey }], remoteAddr: buf.addr + PAGE, rkey: a.rkey, signaled: true });
          expect((await cq.wait(1))[0].status).toBe('SUCCESS');
        };
        await read(); // both keys cached
        const c = await pd.regMr(buf.addr + 3 * PAGE, PAGE, Access.LOCAL_WRITE);
        const misses = (): number => tb.stats()['tb.hca0.mkey_cache'].misses as number;
        const before = misses();
        await c.dereg(); // cached: a UMR, not DESTROY_MKEY
        await read();
        return misses() - before;
      });
    };
    expect(await missesAfterDereg('entry')).toBe(0);
    expect(await missesAfterDereg('all')).toBeGreaterThanOrEqual(2); // the flush took both keys
  });
});
