/**
 * The experiments' shape checks on made-up points (no simulation): each judges what the points
 * say, per configuration when a `--set` axis splits them.
 */
import { describe, expect, it } from 'vitest';
import type { PointLine } from '../../src/experiment.ts';
import sgeVsKlm from '../../experiments/sge_vs_klm.ts';
import mttCliff from '../../experiments/mtt_cliff.ts';

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
    const gain = sgeVsKlm.checks([sge(3), klm]).find((c) => c.what.includes('within 5%'));
    expect(gain?.what).toMatch(/published KLM gain NOT reproduced/);
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
});
