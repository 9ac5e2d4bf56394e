import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { translate, MkeyTable, makeKey, NOT_BOUND_QPN, type ModelMkey } from '../../../src/model/index.ts';
import { mkeyScenarioArb } from '../../support/mkey_arb.ts';
import { xlateBench } from '../../support/xlate_bench.ts';

/** Cache geometries from tiny (constant evictions) to the defaults. */
const geometry = fc.record({
  mkeyCacheWays: fc.constantFrom(1, 2, 4),
  mkeyCacheSets: fc.constantFrom(1, 2, 8, 128),
  mttCacheWays: fc.constantFrom(1, 2, 8),
  mttCacheSets: fc.constantFrom(1, 4, 512),
  mkeyCacheHitCycles: fc.integer({ min: 1, max: 4 }),
  mttCacheHitCycles: fc.integer({ min: 1, max: 4 }),
  klmMaxIndirection: fc.integer({ min: 1, max: 5 }),
});

describe('ATU (cycle model) against the reference model', () => {
  it('gives the same segments, error or fault for random tables, requests and cache geometries', async () => {
    await fc.assert(
      fc.asyncProperty(mkeyScenarioArb(), geometry, fc.integer({ min: 1, max: 3 }), async (sc, g, rounds) => {
        const b = xlateBench(sc.table, {
          mkeyCacheWays: g.mkeyCacheWays,
          mkeyCacheEntries: g.mkeyCacheWays * g.mkeyCacheSets,
          mttCacheWays: g.mttCacheWays,
          mttCacheLines: g.mttCacheWays * g.mttCacheSets,
          mkeyCacheHitCycles: g.mkeyCacheHitCycles,
          mttCacheHitCycles: g.mttCacheHitCycles,
          klmMaxIndirection: g.klmMaxIndirection,
        });
        const table = MkeyTable.from(sc.table);
        // the same requests several times: cold, then warm (or partly evicted)
        const reqs = Array.from({ length: rounds }, () => sc.requests).flat();
        const got = await b.sim.run(() => b.translate(reqs));
        reqs.forEach((r, i) => {
          const want = translate(table, r, { maxIndirection: g.klmMaxIndirection });
          expect(got.results[i], `request ${i}: ${JSON.stringify(r)}`).toEqual(want);
          if (want.kind === 'ok') {
            // the bytes behind the segments are the bytes at the model's addresses
            const read = (segs: { pa: number; length: number }[]): number[] => segs.flatMap((s) => [...b.hca.mem.read(s.pa, Math.min(s.length, 64))]);
            const g2 = got.results[i];
            if (g2.kind === 'ok') expect(read(g2.segments)).toEqual(read(want.segments));
          }
        });
      }),
      { numRuns: Number(process.env.ATU_RUNS ?? 1000) },
    );
  });
});

describe('ATU: zero-based MTT mkeys (start_addr 0, as mlx5 makes them)', () => {
  // Changed with issue 18 item 7: this test used to give the mkey a model-private first byte
  // offset (FBO) of 100. mlx5 has none: start_addr is both the iova and the first byte's page
  // offset (Linux 6.12 drivers/infiniband/hw/mlx5/mlx5_ib.h:1720-1723), and the kernel refuses
  // an MR whose iova and address differ in page offset (core/uverbs_cmd.c:710), so iova 0 is
  // byte 0 of the first MTT page.
  it('iova 0 is byte 0 of the first page; the entry index counts from there', async () => {
    const mkey: ModelMkey = {
      index: 0x10, tag: 0x11, free: false, pd: 1, qpn: NOT_BOUND_QPN, len64: false, pgAccess: false, access: 15,
      accessMode: 'MTT', start: 0, length: 2 * 4096, logPageSize: 12, klm: [],
      mtt: [0x9000_0000, 0x7000_0000].map((addr) => ({ addr, read: true, write: true })),
    };
    const b = xlateBench([mkey]);
    const reqs = [
      { key: makeKey(0x10, 0x11), va: 100, length: 4096, access: 0, pd: 1, qpn: 5 },
      { key: makeKey(0x10, 0x11), va: 8191, length: 1, access: 0, pd: 1, qpn: 5 },
      { key: makeKey(0x10, 0x11), va: 8191, length: 2, access: 0, pd: 1, qpn: 5 },
    ];
    const got = await b.sim.run(() => b.translate(reqs));
    const want = [
      { kind: 'ok', segments: [{ pa: 0x9000_0000 + 100, length: 3996 }, { pa: 0x7000_0000, length: 100 }] },
      { kind: 'ok', segments: [{ pa: 0x7000_0000 + 4095, length: 1 }] },
      { kind: 'error', error: 'BOUNDS', key: makeKey(0x10, 0x11) },
    ];
    expect(got.results).toEqual(want);
    expect(reqs.map((r) => translate(MkeyTable.from([mkey]), r))).toEqual(want);
  });
});

/** A direct MTT mkey of `pages` 4 KiB pages over scattered physical pages, and a KLM chain over it. */
function tables(): { mtt: ModelMkey; klm1: ModelMkey; klm2: ModelMkey } {
  const base = { free: false, pd: 1, qpn: NOT_BOUND_QPN, len64: false, pgAccess: false, access: 15, mtt: [], klm: [] };
  const mtt: ModelMkey = {
    ...base, index: 0x10, tag: 0x11, accessMode: 'MTT', start: 0x10000, length: 4 * 4096, logPageSize: 12,
    mtt: [0x9000_0000, 0x7000_0000, 0x8000_0000, 0x6000_0000].map((addr) => ({ addr, read: true, write: true })),
  };
  const klm1: ModelMkey = {
    ...base, index: 0x20, tag: 0x22, accessMode: 'KLMS', start: 0, length: 4096, logPageSize: 12,
    klm: [{ bcount: 4096, key: makeKey(0x10, 0x11), va: 0x10000 }],
  };
  const klm2: ModelMkey = {
    ...base, index: 0x30, tag: 0x33, accessMode: 'KLMS', start: 0, length: 4096, logPageSize: 12,
    klm: [{ bcount: 4096, key: makeKey(0x20, 0x22), va: 0 }],
  };
  return { mtt, klm1, klm2 };
}

describe('ATU timing (simulated time, default configuration)', () => {
  async function latency(table: ModelMkey[], key: number, va: number): Promise<[number, number]> {
    const b = xlateBench(table);
    return b.sim.run(async () => {
      const req = { key, va, length: 64, access: 0, pd: 1, qpn: 5 };
      const t0 = b.sim.now;
      const cold = await b.translate([req]);
      expect(cold.results[0].kind).toBe('ok');
      const t1 = b.sim.now;
      const warm = await b.translate([req]);
      expect(warm.results[0].kind).toBe('ok');
      return [t1 - t0, b.sim.now - t1];
    });
  }

  it('a warm direct access takes a few cycles; a cold one about two PCIe reads (~1.1 us)', async () => {
    const { mtt } = tables();
    const [cold, warm] = await latency([mtt], makeKey(0x10, 0x11), 0x10000);
    expect(warm).toBeLessThanOrEqual(10 * 2000); // <= 10 core cycles
    expect(cold).toBeGreaterThan(1_000_000);
    expect(cold).toBeLessThan(1_250_000);
  });

  it('each cold KLM level adds dependent reads (mkey + KLM line)', async () => {
    const t = tables();
    const [direct] = await latency([t.mtt], makeKey(0x10, 0x11), 0x10000);
    const [one, warm1] = await latency([t.mtt, t.klm1], makeKey(0x20, 0x22), 0);
    const [two] = await latency([t.mtt, t.klm1, t.klm2], makeKey(0x30, 0x33), 0);
    const read = 525_000; // one 64-byte PCIe read
    expect(one - direct).toBeGreaterThan(2 * read * 0.9);
    expect(one - direct).toBeLessThan(2 * read * 1.2);
    expect(two - one).toBeGreaterThan(2 * read * 0.9);
    expect(two - one).toBeLessThan(2 * read * 1.2);
    expect(one).toBeGreaterThan(2_000_000); // ~2-3 us (timing.md)
    expect(one).toBeLessThan(3_000_000);
    expect(warm1).toBeLessThan(30 * 2000);
  });
});
