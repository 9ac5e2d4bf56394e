/**
 * The experiments' shape checks on made-up points (no simulation): each judges what the points
 * say, per configuration when a `--set` axis splits them.
 */
import { describe, expect, it } from 'vitest';
import type { PointLine } from '../../src/experiment.ts';
import sgeVsKlm from '../../experiments/sge_vs_klm.ts';

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
});
