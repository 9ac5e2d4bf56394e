/**
 * The experiments' shape checks on made-up points (no simulation): each judges what the points
 * say, per configuration when a `--set` axis splits them.
 */
import { describe, expect, it } from 'vitest';
import type { PointLine } from '../../src/experiment.ts';
import sgeVsKlm from '../../experiments/sge_vs_klm.ts';
import mttCliff from '../../experiments/mtt_cliff.ts';
import indirection from '../../experiments/indirection.ts';
import odpLatency from '../../experiments/odp_latency.ts';

function pt(experiment: string, params: PointLine['params'], figures: PointLine['figures']): PointLine {
  return { experiment, index: 0, params, seed: 1, figures, stats: {}, wallSeconds: 0 };
}

describe('shape checks', () => {
  it("sge-vs-klm: the READ count per I/O is the adapter's (readsPerIo), not the posted list's", () => {
    const sge = (readsPerIo: number) => pt('sge-vs-klm', { method: 'sge', pages: 64, ios: 8 }, { gbps: 95, maxSge: 30, wrsPerIo: 3, readsPerIo });
    const klm = pt('sge-vs-klm', { method: 'klm', pages: 64, ios: 8 }, { gbps: 95, maxSge: 30, wrsPerIo: 3, readsPerIo: 1 });
    const split = (pts: PointLine[]) => sgeVsKlm.checks(pts).filter((c) => c.what.includes('READ(s) per I/O'));
    expect(split([sge(3), klm]).map((c) => c.ok)).toEqual([true, true]);
    // three WRs posted but the adapter sent one READ each: the check fails
    expect(split([sge(1), klm]).map((c) => c.ok)).toEqual([false, true]);
    expect(split([sge(3), { ...klm, figures: { ...klm.figures, readsPerIo: 2 } }]).map((c) => c.ok)).toEqual([true, false]);
  });

  it('sge-vs-klm: umr_fence SMALL is checked against STRONG of the same parameters only', () => {
    const rw = (umrFence: string, gbps: number, sgeCycles = 0) => pt('sge-vs-klm', { method: 'rw', pages: 64, umrFence, sgeCycles, ios: 8 }, { gbps, maxSge: 30, maxSglRd: 8, wrsPerIo: 3, readsPerIo: 1 });
    const fences = (pts: PointLine[]) => sgeVsKlm.checks(pts).filter((c) => c.what.includes('umr_fence SMALL'));
    expect(fences([rw('STRONG', 40), rw('SMALL', 87)]).map((c) => c.ok)).toEqual([true]);
    expect(fences([rw('STRONG', 87), rw('SMALL', 40)]).map((c) => c.ok)).toEqual([false]);
    // a STRONG point of another per-SGE cost is not its pair
    expect(fences([rw('STRONG', 87, 234), rw('SMALL', 40)])).toEqual([]);
  });

  it('mtt-cliff: the 512x check is made per cache geometry (--set mttCacheLines=1024,2048)', () => {
    // per geometry and page size: flat at 50 M/s up to the reach, 20 M/s from twice it;
    // `shift` moves one 2 MiB cliff out by 2x
    const cliff = (lines: number, pages: number, shift = 1): PointLine[] => {
      const reach = lines * 8 * pages;
      return [0.5, 1, 2 * shift, 4 * shift].map((f) =>
        pt('mtt-cliff', { pages, workingSet: f * reach, reads: 20_000, readBytes: 64, mttCacheLines: lines }, { mReadsPerSec: f <= shift ? 50 : 20, mttMissRate: 0, mttReach: reach }),
      );
    };
    const x512 = (pts: PointLine[]) => mttCliff.checks(pts).filter((c) => c.what.startsWith('with 2 MiB pages the cliff is 512x further out'));
    const good = x512([...cliff(1024, 4096), ...cliff(2048, 4096), ...cliff(1024, 2 ** 21), ...cliff(2048, 2 ** 21)]);
    expect(good.map((c) => [c.what, c.ok])).toEqual([
      ['with 2 MiB pages the cliff is 512x further out (mttCacheLines 1024)', true],
      ['with 2 MiB pages the cliff is 512x further out (mttCacheLines 2048)', true],
    ]);
    const bad = x512([...cliff(1024, 4096), ...cliff(2048, 4096), ...cliff(1024, 2 ** 21), ...cliff(2048, 2 ** 21, 2)]);
    expect(bad.map((c) => c.ok)).toEqual([true, false]);
    // the default geometry (no configuration axis) is not named
    const noAxis = [...cliff(4096, 4096), ...cliff(4096, 2 ** 21)].map((p) => ({ ...p, params: { pages: p.params.pages, workingSet: p.params.workingSet, reads: 20_000, readBytes: 64 } }));
    expect(x512(noAxis).map((c) => [c.what, c.ok])).toEqual([['with 2 MiB pages the cliff is 512x further out', true]]);
  });

  it('indirection: with a configuration axis each configuration is checked, none overwrites another', () => {
    // two PCIe latencies, depths 0..2; the slow one's level 2 takes three reads
    const pts = [600_000, 530_000].flatMap((base) =>
      [0, 1, 2].map((depth) =>
        pt('indirection', { depth, pcieReadBasePs: base }, { hostReads: 2 + 2 * depth + (base === 600_000 && depth === 2 ? 1 : 0), coldExtraNs: 1060 * (depth + 1) }),
      ),
    );
    const checks = indirection.checks(pts);
    expect(checks).toHaveLength(2 * 4);
    expect(checks.filter((c) => !c.ok).map((c) => c.what)).toEqual(['level 2 adds two dependent host reads each (a KLM line and the inner mkey), ~0.55 us each (pcieReadBasePs 600000)']);
    // depths apart in the grid (0, 1, 4): the levels between are checked together
    const gap = indirection.checks([0, 1, 4].map((depth) => pt('indirection', { depth }, { hostReads: 2 + 2 * depth, coldExtraNs: 1060 * (depth + 1) })));
    expect(gap.map((c) => [c.what.split(' two')[0], c.ok])).toEqual([
      ['a cold direct access pays', true], ['one KLM level costs ~2-3 us extra cold (timing.md)', true], ['level 1 adds', true], ['levels 2..4 add', true],
    ]);
  });

  it('odp-latency: with a configuration axis each configuration is checked, none overwrites another', () => {
    const pts = [1, 8].flatMap((pcieReadBasePs) =>
      [4096, 2 ** 22].map((size) => pt('odp-latency', { size, pcieReadBasePs }, { faultUs: size === 4096 ? 220 : pcieReadBasePs === 8 ? 500 : 330, faults: 1, pageFaults: size / 4096 })),
    );
    const bad = odpLatency.checks(pts).filter((c) => !c.ok).map((c) => c.what);
    expect(bad).toEqual(['4 MB (pcieReadBasePs 8): the fault costs ~350 us (within 15%)', 'strongly sublinear (pcieReadBasePs 8): 1024x the bytes, less than 2x the fault']);
    expect(odpLatency.checks(pts)).toHaveLength(2 * 5);
  });
});
