/**
 * Shape 2 of spec/timing.md: throughput of small random RDMA READs against the number of live
 * MRs. Each READ goes to a random one of N one-page MRs: flat while their mkey contexts fit the
 * mkey cache (512 entries by default), then each miss adds a dependent read of the context from
 * ICM (Husky NSDI'23's "num" attacker; LITE SOSP'17).
 */
import type { Experiment, ShapeCheck } from '../src/experiment.ts';
import { DEFAULT_HCA_CONFIG } from '../src/rtl/config.ts';
import { randomReads } from './support/random_reads.ts';
import { groupBy, intIn, positiveInt } from './support/shape.ts';

const entriesOf = (p: Readonly<Record<string, unknown>>): number => (p.mkeyCacheEntries as number | undefined) ?? DEFAULT_HCA_CONFIG.mkeyCacheEntries;

const experiment: Experiment = {
  name: 'mr-count',
  summary: 'random 64 B READs over N one-page MRs: the mkey cache cliff once live mkeys exceed its entries',
  shape: 'spec/timing.md shape 2: degradation once live mkeys exceed the mkey cache (Husky NSDI\'23, LITE SOSP\'17)',
  axes: {
    mrs: { what: 'live one-page MRs the READs spread over', check: intIn(1, 60_000) },
    reads: { what: 'READs measured (after as many of warm-up)', check: positiveInt },
  },
  grid: {
    // mrCacheLimit 0: the driver's MR cache is not pre-filled, so the MRs' mkeys are made one
    // after another (consecutive indices) and the sweep measures the mkey cache's capacity; a
    // pre-filled cache hands out indices interleaved with its other buckets' fills, which the
    // modelled cache's index-modulo sets turn into set conflicts (README "The MR cache as mlx5's")
    full: [{ mrCacheLimit: [0], mrs: [16, 64, 256, 384, 512, 640, 768, 1024, 2048, 4096], reads: [20_000] }],
    // a 64-entry mkey cache
    quick: [{ mrCacheLimit: [0], mkeyCacheEntries: [64], mrs: [16, 64, 256], reads: [2_000] }],
  },
  async run(p, { seed, config }) {
    const r = await randomReads({ seed, config, readBytes: 64, mrs: p.mrs as number, warm: p.reads as number, reads: p.reads as number });
    return {
      figures: {
        mReadsPerSec: +(r.readsPerSec / 1e6).toFixed(3), mkeyMissRate: r.mkeyMissRate, mttMissRate: r.mttMissRate,
        atuContextStalls: r.atuContextStalls, mkeyCacheEntries: entriesOf(p),
      },
      stats: r.stats,
    };
  },
  plot: {
    title: 'Random 64 B RDMA READs against the number of live MRs (mkey cache cliff)',
    x: { field: 'mrs', title: 'live one-page MRs', log: true },
    y: { field: 'mReadsPerSec', title: 'READs per simulated second (millions)' },
    series: ['mkeyCacheEntries'],
    source: 'reference: the mkey cache\'s entries; the published shape degrades past them (Husky NSDI\'23 "num" attacker, LITE SOSP\'17)',
    references: (points) => [...new Set(points.map((p) => p.figures.mkeyCacheEntries))].map((x) => ({ kind: 'x' as const, x, label: `mkey cache: ${x} entries` })),
  },
  checks(points) {
    const out: ShapeCheck[] = [];
    for (const [, pts] of groupBy(points, (p) => JSON.stringify({ ...p.params, mrs: 0 }))) {
      const entries = pts[0].figures.mkeyCacheEntries;
      const inside = pts.filter((p) => (p.params.mrs as number) <= entries);
      const beyond = pts.filter((p) => (p.params.mrs as number) >= 2 * entries);
      if (!inside.length || !beyond.length) continue;
      const flat = Math.max(...inside.map((p) => p.figures.mReadsPerSec));
      const lowIn = Math.min(...inside.map((p) => p.figures.mReadsPerSec));
      const highOut = Math.max(...beyond.map((p) => p.figures.mReadsPerSec));
      // at exactly the cache's size a set-associative cache may lose a few lines to set conflicts
      // (the indices the firmware and the driver's pool hand out are not consecutive): a few %
      const worst = Math.max(...inside.map((p) => p.figures.mkeyMissRate));
      out.push({ what: `${entries}-entry mkey cache: flat up to ${entries} MRs (within 5%), at most 5% mkey misses there (set conflicts)`, ok: lowIn >= 0.95 * flat && worst <= 0.05, detail: `${lowIn}..${flat} M/s, mkey miss rate at most ${worst}` });
      out.push({ what: `${entries}-entry mkey cache: from ${2 * entries} MRs on, below 70% of the flat rate`, ok: highOut < 0.7 * flat, detail: `${highOut} M/s against ${flat} M/s` });
    }
    return out;
  },
};

export default experiment;
