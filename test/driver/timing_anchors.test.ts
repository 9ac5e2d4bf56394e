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
  it('a pooled 64-page regMr takes ~14 us; one too big for the pool takes CREATE_MKEY time plus pinning', async () => {
    const tb = new Testbed({ hcas: 1 });
    const times: Record<string, number> = {};
    await tb.run(async () => {
      const c = await tb.openDevice(0);
      const pd = await c.allocPd();
      const buf = tb.host(0).alloc(4096 * PAGE);
      await pd.regMr(buf.addr, 64 * PAGE, Access.LOCAL_WRITE); // empty pool: CREATE_MKEY, and the pool refills
      await tb.quiesce(); // the background refill is done: the firmware is idle
      let t0 = tb.now;
      const pooled = await pd.regMr(buf.addr + 64 * PAGE, 64 * PAGE, Access.LOCAL_WRITE);
      times.pooled = tb.now - t0;
      expect(pooled.poolBucket).toBe(64);
      t0 = tb.now;
      const big = await pd.regMr(buf.addr + 1024 * PAGE, 1024 * PAGE, Access.LOCAL_WRITE); // over the largest bucket
      times.big = tb.now - t0;
      expect(big.poolBucket).toBe(0);
    });
    // "user MR registration from the mkey cache (UMR), 64 pages: ~14 us per MR"
    expect(times.pooled / US).toBeGreaterThan(14 * 0.85);
    expect(times.pooled / US).toBeLessThan(14 * 1.15);
    // firmware CREATE_MKEY (230 us) plus 1024 pages of pinning, and the command queue's own
    // work: the doorbell, the entry and the input's mailbox chain read one block after the other
    // (the 1024 MTTs: 8 KiB and more), the status write, the EQE and the interrupt (~7 us + ~0.6 us a block)
    const expected = DEFAULT_HCA_CONFIG.fwCreateMkeyPs + 1024 * DEFAULT_HCA_CONFIG.pinPagePs;
    expect(times.big).toBeGreaterThanOrEqual(expected);
    expect(times.big).toBeLessThan(expected + 25 * US);
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
      expect(s.omr.odpStats().pageFaults).toBe(1);
    });
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
