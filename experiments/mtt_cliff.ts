/**
 * Shape 1 of spec/timing.md: throughput of small random RDMA READs against the working set. Flat
 * while the working set's MTT entries fit the MTT cache (its reach: lines x 8 entries x page
 * size, 128 MiB with the defaults and 4 KiB pages), then a cliff down to a plateau bound by the
 * dependent PCIe read each miss adds; with 2 MiB pages the cliff moves out 512x (FaRM NSDI'14;
 * Kalia et al. ATC'16). One MR over the working set, 64 B READs over 8 QPs x 16 outstanding.
 */
import type { Experiment, ShapeCheck } from '../src/experiment.ts';
import { DEFAULT_HCA_CONFIG } from '../src/rtl/config.ts';
import { PAGE_2M, PAGE_4K, randomReads } from './support/random_reads.ts';
import { formatBytes, groupBy, groupLabel, intIn, isSizeFrom4k, paramsWithout, positiveInt } from './support/shape.ts';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/** The MTT cache's reach: every entry it holds, times the page size. */
export function mttReach(p: Readonly<Record<string, unknown>>): number {
  const lines = (p.mttCacheLines as number | undefined) ?? DEFAULT_HCA_CONFIG.mttCacheLines;
  const perLine = ((p.mttCacheLineBytes as number | undefined) ?? DEFAULT_HCA_CONFIG.mttCacheLineBytes) / 8;
  return lines * perLine * (p.pages as number);
}

// finer around the default reach (128 MiB)
const ws4k = [1 * MiB, 16 * MiB, 64 * MiB, 96 * MiB, 128 * MiB, 160 * MiB, 192 * MiB, 256 * MiB, 512 * MiB, 1 * GiB];
// x 512: 512 MiB .. 512 GiB (huge pages are reserved when allocated; the host gets room for them)
const ws2m = ws4k.map((w) => w * 512);

const experiment: Experiment = {
  name: 'mtt-cliff',
  summary: 'random 64 B READs against the working set, 4 KiB and 2 MiB pages: the MTT cache cliff at its reach, 512x further with 2 MiB pages',
  shape: 'spec/timing.md shape 1: flat up to the MTT cache reach, then a cliff to a PCIe-bound plateau; 2 MB pages move it out 512x',
  axes: {
    pages: { what: 'page size of the MR (4k: regMr over ordinary memory; 2m: regMr over huge pages, 2 MiB MTT entries)', check: (v) => (v === PAGE_4K || v === PAGE_2M ? null : 'must be 4k or 2m'), format: 'bytes' },
    workingSet: { what: 'bytes of the MR the READs go to', check: (v) => (isSizeFrom4k(v) ? null : 'must be a size of at least 4 KiB (4k, 64m, 1g, ...)'), format: 'bytes' },
    reads: { what: 'READs measured (after as many of warm-up)', check: positiveInt },
    readBytes: { what: 'bytes per READ', check: intIn(1, 4096, 'must be 1..4096') },
  },
  grid: {
    full: [
      { pages: [PAGE_4K], workingSet: ws4k, reads: [20_000], readBytes: [64] },
      // the same working sets x 512: the cliff's move is read off at equal positions
      { pages: [PAGE_2M], workingSet: ws2m, reads: [20_000], readBytes: [64] },
    ],
    // a 64-line MTT cache: reach 2 MiB with 4 KiB pages, 1 GiB with 2 MiB pages
    quick: [
      { mttCacheLines: [64], pages: [PAGE_4K], workingSet: [1 * MiB, 2 * MiB, 8 * MiB], reads: [2_000], readBytes: [64] },
      { mttCacheLines: [64], pages: [PAGE_2M], workingSet: [512 * MiB, 1 * GiB, 4 * GiB], reads: [2_000], readBytes: [64] },
    ],
  },
  async run(p, { seed, config }) {
    // huge pages are reserved when allocated: give the host room for the working set
    const ws = p.workingSet as number;
    const hostMemBytes = config.hostMemBytes ?? Math.max(DEFAULT_HCA_CONFIG.hostMemBytes, 2 ** Math.ceil(Math.log2(ws)) * 2);
    const r = await randomReads({
      seed, config: { ...config, hostMemBytes }, readBytes: p.readBytes as number, workingSet: p.workingSet as number, pageSize: p.pages as number,
      warm: p.reads as number, reads: p.reads as number,
    });
    return {
      figures: {
        mReadsPerSec: +(r.readsPerSec / 1e6).toFixed(3), gbps: r.gbps, mttMissRate: r.mttMissRate, mkeyMissRate: r.mkeyMissRate,
        atuContextStalls: r.atuContextStalls, mttReach: mttReach(p),
      },
      stats: r.stats,
    };
  },
  plot: {
    title: 'Random 64 B RDMA READs against the working set (MTT cache cliff)',
    x: { field: 'workingSet', title: 'working set (one MR)', log: true, bytes: true },
    y: { field: 'mReadsPerSec', title: 'READs per simulated second (millions)' },
    series: ['pages', 'mttCacheLines'],
    source: 'reference: the MTT cache reach (lines x 8 entries x page); the published shape moves it out 512x with 2 MB pages (FaRM NSDI\'14, Kalia ATC\'16)',
    references: (points) => {
      const reaches = new Map<number, string>();
      for (const pt of points) reaches.set(pt.figures.mttReach, `reach ${formatBytes(pt.figures.mttReach)} (${formatBytes(pt.params.pages as number)} pages)`);
      return [...reaches].sort((a, b) => a[0] - b[0]).map(([x, label]) => ({ kind: 'x' as const, x, label }));
    },
  },
  checks(points) {
    const out: ShapeCheck[] = [];
    // the first point below 90% of the flat rate, per cache geometry (the params other than
    // pages and workingSet) and page size
    const cliffAt = new Map<string, Map<number, number>>();
    // per page size (and cache geometry): flat to the reach, below 70% past 2x the reach
    for (const pts of groupBy(points, (pt) => paramsWithout(pt, 'workingSet')).values()) {
      const reach = pts[0].figures.mttReach;
      const inside = pts.filter((pt) => (pt.params.workingSet as number) <= reach);
      const beyond = pts.filter((pt) => (pt.params.workingSet as number) >= 2 * reach);
      if (!inside.length || !beyond.length) continue;
      const flat = Math.max(...inside.map((pt) => pt.figures.mReadsPerSec));
      const lowIn = Math.min(...inside.map((pt) => pt.figures.mReadsPerSec));
      const highOut = Math.max(...beyond.map((pt) => pt.figures.mReadsPerSec));
      const label = `${formatBytes(pts[0].params.pages as number)} pages, reach ${formatBytes(reach)}`;
      out.push({ what: `${label}: flat up to the reach (within 5%), no MTT misses there`, ok: lowIn >= 0.95 * flat && inside.every((pt) => pt.figures.mttMissRate <= 0.01), detail: `${lowIn}..${flat} M/s` });
      out.push({ what: `${label}: past twice the reach, below 70% of the flat rate`, ok: highOut < 0.7 * flat, detail: `${highOut} M/s against ${flat} M/s` });
      const firstDrop = [...pts].sort((a, b) => (a.params.workingSet as number) - (b.params.workingSet as number)).find((pt) => pt.figures.mReadsPerSec < 0.9 * flat);
      if (!firstDrop) continue;
      const geometry = paramsWithout(pts[0], 'pages', 'workingSet');
      const m = cliffAt.get(geometry) ?? new Map<number, number>();
      m.set(pts[0].params.pages as number, firstDrop.params.workingSet as number);
      cliffAt.set(geometry, m);
    }
    // each geometry's 4 KiB and 2 MiB cliffs; the geometry named when it is not the defaults'
    for (const [geometry, m] of cliffAt) {
      const a = m.get(PAGE_4K);
      const b = m.get(PAGE_2M);
      if (a === undefined || b === undefined) continue;
      out.push({ what: `with 2 MiB pages the cliff is 512x further out${groupLabel(geometry, ['reads', 'readBytes'])}`, ok: b / a === 512, detail: `first point below 90%: ${formatBytes(a)} and ${formatBytes(b)}` });
    }
    return out;
  },
};

export default experiment;
