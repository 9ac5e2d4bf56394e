/**
 * The published anchors of spec/timing.md that the verbs path must reproduce with the defaults,
 * end to end through the driver, within about 15%: registration with and without the driver's
 * mkey cache, the latency of a small warm RDMA READ between two hosts, and ODP faults (4 KB, 4 MB,
 * prefetch).
 */
import { describe, expect, it } from 'vitest';
import { Access, DEFAULT_HCA_CONFIG, Testbed, US } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';
import { writeCase } from '../support/odp_case.ts';

const PAGE = 4096;

describe('registration timing (spec/timing.md anchors)', () => {
  it('a cached 64-page regMr takes ~14 us; a cache miss takes CREATE_MKEY time plus pinning plus the enabling UMR', async () => {
    const regTime = async (config: { mrCacheLimit?: number }, pages: number): Promise<{ t: number; bucket: number }> => {
      const tb = new Testbed({ hcas: 1, config });
      return tb.run(async () => {
        const c = await tb.openDevice(0);
        const pd = await c.allocPd();
        const buf = tb.host(0).alloc(2 * pages * PAGE);
        // the first registration makes the UMR QP (mlx5r_umr_resource_init, mr.c:1544)
        await pd.regMr(buf.addr, pages * PAGE, Access.LOCAL_WRITE);
        await tb.quiesce(); // the cache's pre-fill is done: the firmware is idle
        const t0 = tb.now;
        const mr = await pd.regMr(buf.addr + pages * PAGE, pages * PAGE, Access.LOCAL_WRITE);
        return { t: tb.now - t0, bucket: mr.poolBucket };
      });
    };
    // pre-filled at load (mrCacheLimit 250 by default): a hit
    const pooled = await regTime({}, 64);
    expect(pooled.bucket).toBe(64);
    // "user MR registration from the mkey cache (UMR), 64 pages: ~14 us per MR"
    expect(pooled.t / US).toBeGreaterThan(14 * 0.85);
    expect(pooled.t / US).toBeLessThan(14 * 1.15);
    // a cache without limits (a profile without MLX5_PROF_MASK_MR_CACHE) is never filled: every
    // registration misses, and a miss is create_cache_mkey (CREATE_MKEY) then the enabling UMR;
    // the command also costs the queue's own work (doorbell, entry and mailbox reads, status
    // write, EQE and interrupt: ~7 us and more)
    const miss = await regTime({ mrCacheLimit: 0 }, 1024);
    expect(miss.bucket).toBe(1024);
    const expected = DEFAULT_HCA_CONFIG.fwCreateMkeyPs + 1024 * DEFAULT_HCA_CONFIG.pinPagePs;
    expect(miss.t).toBeGreaterThanOrEqual(expected);
    expect(miss.t).toBeLessThan(expected + 30 * US);
  });

  it('a small warm RDMA READ between two hosts completes in ~1.6-2 us (perftest ib_read_lat)', async () => {
    const tb = new Testbed({ hcas: 2 });
    const lat: number[] = [];
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const mr0 = await pd0.regMr(a.addr, PAGE, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
      for (let i = 0; i < 4; i++) {
        const t0 = tb.now;
        qp0.postSend({ wrId: i, opcode: 'RDMA_READ', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
        expect((await cq0.wait(1))[0].status).toBe('SUCCESS');
        lat.push(tb.now - t0);
      }
    });
    // the first one is cold (mkey and MTT misses on both sides); the rest are warm and equal
    expect(lat[0]).toBeGreaterThan(lat[1]);
    expect(new Set(lat.slice(1)).size).toBe(1);
    expect(lat[1] / US).toBeGreaterThan(1.6 * 0.85);
    expect(lat[1] / US).toBeLessThan(2.0 * 1.15);
  });
});

describe('on-demand paging timing (spec/timing.md ODP anchors)', () => {
  it('a 4 KB message whose source pages are cold in an ODP MR completes ~220 us after posting', async () => {
    const tb = new Testbed({ hcas: 2 });
    let cold = 0;
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      cold = await s.write(1);
    });
    expect(cold / US).toBeGreaterThan(220 * 0.85);
    expect(cold / US).toBeLessThan(220 * 1.15);
  });

  it('a 4 MB one adds ~350 us over the same message on warm pages (one fault maps the range)', async () => {
    const tb = new Testbed({ hcas: 2 });
    let cold = 0;
    let warm = 0;
    await tb.run(async () => {
      const s = await writeCase(tb, 4 * 1024 * 1024);
      cold = await s.write(1);
      warm = await s.write(2);
      expect(s.omr.odpStats().pageFaults).toBe(1024); // pages, as mlx5 counts
    });
    expect(tb.stats()['tb.hca0.pagefault'].faults).toBe(1); // in one fault
    expect((cold - warm) / US).toBeGreaterThan(350 * 0.85);
    expect((cold - warm) / US).toBeLessThan(350 * 1.15);
  });

  it('prefetch with flush takes the fault off the first access: it costs what a warm access does', async () => {
    const tb = new Testbed({ hcas: 2 });
    let first = 0;
    let warm = 0;
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      await s.p.pd0.adviseMr('PREFETCH', [{ addr: s.a.addr, length: 4096, lkey: s.omr.lkey }], { flush: true });
      first = await s.write(1);
      warm = await s.write(2);
    });
    // no fault (that would be ~220 us): a few cache misses over the warm access (the UMR's MTT
    // write left the line out of the MTT cache)
    expect(first).toBeLessThan(warm + 3 * US);
  });
});
