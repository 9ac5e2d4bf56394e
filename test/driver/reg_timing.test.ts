/**
 * The registration anchors of spec/timing.md, end to end through the driver with the defaults:
 * a 64-page user MR from the driver's mkey cache (pinning + one UMR) takes ~14 us, within 15%;
 * without the cache (firmware CREATE_MKEY) ~230 us plus pinning.
 */
import { describe, expect, it } from 'vitest';
import { Access, DEFAULT_HCA_CONFIG, Testbed, US } from '../../src/index.ts';

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
      await tb.delay(5000 * US); // the background refill is done: the firmware is idle
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
    // firmware CREATE_MKEY (230 us) plus 1024 pages of pinning, and nothing else to wait for
    const expected = DEFAULT_HCA_CONFIG.fwCreateMkeyPs + 1024 * DEFAULT_HCA_CONFIG.pinPagePs;
    expect(times.big).toBeGreaterThanOrEqual(expected);
    expect(times.big).toBeLessThan(expected + 5 * US);
  });
});
