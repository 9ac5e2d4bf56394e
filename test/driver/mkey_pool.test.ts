/**
 * The driver's mkey pool (mlx5's MR cache): bulk background refills that never delay a user's
 * command, limits and shrinking, ENOMEM when mkeys run out, and the destroy policy on its
 * deregistrations.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, type Mr } from '../../src/index.ts';
import { POOL_LIMIT, POOL_SHRINK_DELAY_PS } from '../../src/driver/mkey_pool.ts';
import { DEFAULT_HCA_CONFIG } from '../../src/rtl/config.ts';

const PAGE = 4096;
const US = 1e6;

describe('mkey pool', () => {
  it('refills in bulk in the background: back-to-back one-page regMr never wait behind a refill', async () => {
    const tb = new Testbed();
    const times: number[] = [];
    let created = 0;
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(200 * PAGE);
      for (let i = 0; i < 200; i++) {
        const t0 = tb.now;
        await pd.regMr(buf.addr + i * PAGE, PAGE, Access.LOCAL_WRITE);
        times.push((tb.now - t0) / US);
      }
      await tb.quiesce();
      created = ctx.pool.stats().created;
      // after the burst the pool is back at twice its limit, not left below it until the next take
      expect(ctx.pool.stats().free[8]).toBe(2 * POOL_LIMIT);
    });
    const fw = (DEFAULT_HCA_CONFIG.fwCreateMkeyPs + DEFAULT_HCA_CONFIG.pinPagePs) / US;
    // the first finds the pool empty (firmware); the next two wait once each for the pool's own
    // PD, and its CQ and UMR QP (its one-time setup, in the firmware's foreground after the
    // first's command); after that a registration is pooled (a UMR) or, when the pool is empty,
    // exactly one CREATE_MKEY: never queued behind a refill
    // (a command also costs the queue's doorbell, DMA, EQE and interrupt: under 10 us)
    const fwCmd = (t: number): boolean => t >= fw && t < fw + 10;
    expect(fwCmd(times[0]), `regMr #0 took ${times[0]} us`).toBe(true);
    // (with the queue's per-command cost the pool's first round lands just after the fourth
    // regMr, which finds it empty and waits for the rest of the one-time setup too)
    for (let i = 4; i < times.length; i++) {
      expect(times[i] < 20 || fwCmd(times[i]), `regMr #${i} took ${times[i]} us`).toBe(true);
    }
    expect(times.slice(2).filter((t) => t < 20).length).toBeGreaterThan(100); // mostly pooled
    expect(created).toBeGreaterThanOrEqual(2 * POOL_LIMIT);
  });

  it('out of mkeys, regMr is VerbsError ENOMEM (never a failed run), after the pool gives back its free mkeys', async () => {
    const tb = new Testbed({ config: { icmMkeyEntries: 200 } });
    let live = 0;
    let max = 0;
    let error = '';
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      max = ctx.deviceAttr.maxMr;
      const buf = tb.host(0).alloc(300 * PAGE);
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
      live = mrs.length;
      expect(ctx.pool.stats().refillsRefused).toBeGreaterThan(0); // refills met the end and stopped quietly
      await mrs[0].dereg();
      mrs[0] = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE); // room again
    });
    expect(error).toMatch(/^ENOMEM: .*NO_RESOURCES/);
    expect(live).toBe(max); // every mkey the device advertises went to the user
  }, 30_000);

  it('gives mkeys back: a bucket above its limit shrinks after a delay, and a later large registration finds room', async () => {
    const tb = new Testbed({ config: { icmMkeyEntries: 1024 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const host = tb.host(0);
      const small = host.alloc(700 * PAGE);
      const mrs: Mr[] = [];
      for (let i = 0; i < 700; i++) mrs.push(await pd.regMr(small.addr + i * PAGE, PAGE, Access.LOCAL_WRITE));
      for (const mr of mrs) await mr.dereg();
      const back = ctx.pool.stats().free[8]; // the pooled ones came back to their bucket
      expect(back).toBeGreaterThan(500);
      const xltBefore = tb.hca(0).icm.xltBytesInUse;
      await tb.delay(POOL_SHRINK_DELAY_PS);
      await tb.quiesce();
      const st = ctx.pool.stats();
      expect(st.free[8]).toBe(2 * POOL_LIMIT);
      expect(st.destroyed).toBe(back - 2 * POOL_LIMIT);
      expect(tb.hca(0).icm.xltBytesInUse).toBe(xltBefore - st.destroyed * 64);
      // 100-page MRs fill the device: every advertised mkey is theirs or the pool's refills'
      const big = host.alloc(1100 * 100 * PAGE);
      let n = 0;
      for (;;) {
        try {
          await pd.regMr(big.addr + n * 100 * PAGE, 100 * PAGE, Access.LOCAL_WRITE);
          n++;
        } catch (e) {
          if (!(e instanceof VerbsError)) throw e;
          break;
        }
      }
      expect(n).toBe(ctx.deviceAttr.maxMr);
    });
  }, 60_000);

  it("the destroy policy 'all' applies to a pooled MR's deregistration (a UMR), as to DESTROY_MKEY", async () => {
    const missesAfterDereg = async (policy: 'entry' | 'all'): Promise<number> => {
      const tb = new Testbed({ config: { destroyInvalidates: policy } });
      return tb.run(async () => {
        const ctx = await tb.openDevice(0);
        const pd = await ctx.allocPd();
        const cq = await ctx.createCq(16);
        const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
        const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
        await qp.connect(peer);
        const buf = tb.host(0).alloc(4 * PAGE);
        await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE); // the pool's first miss: it refills
        await tb.quiesce();
        const a = await pd.regMr(buf.addr + PAGE, PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
        const b = await pd.regMr(buf.addr + 2 * PAGE, PAGE, Access.LOCAL_WRITE);
        expect([a.poolBucket, b.poolBucket]).toEqual([8, 8]);
        const read = async (): Promise<void> => {
          qp.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: buf.addr + 2 * PAGE, length: 8, lkey: b.lkey }], remoteAddr: buf.addr + PAGE, rkey: a.rkey, signaled: true });
          expect((await cq.wait(1))[0].status).toBe('SUCCESS');
        };
        await read(); // both keys cached
        const c = await pd.regMr(buf.addr + 3 * PAGE, PAGE, Access.LOCAL_WRITE);
        const misses = (): number => tb.stats()['tb.hca0.mkey_cache'].misses as number;
        const before = misses();
        await c.dereg(); // pooled: a UMR, not DESTROY_MKEY
        await read();
        return misses() - before;
      });
    };
    expect(await missesAfterDereg('entry')).toBe(0);
    expect(await missesAfterDereg('all')).toBeGreaterThanOrEqual(2); // the flush took both keys
  });
});
