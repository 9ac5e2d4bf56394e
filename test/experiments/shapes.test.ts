/**
 * Issue 10 item 6: every built-in experiment at --quick size, in-process, and the shape of
 * spec/timing.md it reproduces: the cliff at the configured reach, 2 MiB pages moving it 512x,
 * the storm lowering the victim only under 'all', ODP fault latency sublinear, prefetch taking
 * the first-touch fault away, each KLM level adding its dependent reads. Each run also writes
 * its points, meta.json and SVG.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { experiments } from '../../experiments/index.ts';
import { expandGrid } from '../../src/cli/sweep/grid.ts';
import { findExperiment, runSweep, type SweepResult } from '../../src/cli/sweep/sweep.ts';
import { tempDir } from '../support/tmp.ts';

async function quick(name: string, jobs = 1): Promise<SweepResult & { out: string }> {
  const out = tempDir(`mlx5sim-${name}-`);
  const r = await runSweep(findExperiment(name), { quick: true, sets: [], out, jobs });
  expect(r.lines.length).toBe(r.meta.gridPoints);
  expect(readFileSync(join(out, 'points.jsonl'), 'utf8').trim().split('\n')).toHaveLength(r.lines.length);
  expect(readFileSync(join(out, 'plot.svg'), 'utf8')).toMatch(/^<svg [\s\S]*<\/svg>\n$/);
  expect(existsSync(join(out, 'meta.json'))).toBe(true);
  return { ...r, out };
}

const failed = (r: SweepResult): string[] => r.checks.filter((c) => !c.ok).map((c) => `${c.what}: ${c.detail ?? ''}`);
const fig = (r: SweepResult, f: (p: Record<string, unknown>) => boolean, k: string): number => {
  const p = r.lines.find((l) => f(l.params));
  expect(p, `a point for ${k}`).toBeDefined();
  return p!.figures[k];
};

describe('the built-in experiments at --quick size hold their shapes', () => {
  it('there is one experiment per shape of spec/timing.md, each with a quick grid of at most as many points as its full one', () => {
    expect(experiments.map((e) => e.name)).toEqual(['mtt-cliff', 'mr-count', 'dereg-storm', 'odp-latency', 'odp-prefetch', 'sge-vs-klm', 'indirection']);
    for (const e of experiments) expect(e.shape).toMatch(/^spec\/timing\.md shape [1-7]:/);
    // at most, not fewer: dereg-storm's quick grid has the same six cases with fewer READs each,
    // and indirection's five cold translations are cheap enough to run in full
    const size = (quick: boolean, name: string) => expandGrid(findExperiment(name), { quick, sets: [] }).length;
    for (const e of experiments) expect(size(true, e.name), e.name).toBeLessThanOrEqual(size(false, e.name));
  });

  it('mtt-cliff: flat to the MTT cache reach, a cliff past it, 512x further out with 2 MiB pages', async () => {
    const r = await quick('mtt-cliff');
    expect(failed(r)).toEqual([]);
    expect(r.checks.map((c) => c.what)).toContain('with 2 MiB pages the cliff is 512x further out (mttCacheLines 64)');
    // the reach is the configured one (64 lines x 8 x page), drawn on the plot
    expect(fig(r, (p) => p.pages === 4096, 'mttReach')).toBe(64 * 8 * 4096);
    expect(fig(r, (p) => p.pages === 2 ** 21, 'mttReach')).toBe(64 * 8 * 2 ** 21);
    expect(readFileSync(join(r.out, 'plot.svg'), 'utf8')).toContain('reach 2 MiB (4 KiB pages)');
    // past the reach the MTT misses explain the drop
    expect(fig(r, (p) => p.pages === 4096 && p.workingSet === 8 * 2 ** 20, 'mttMissRate')).toBeGreaterThan(0.5);
  });

  it('mr-count: flat up to the mkey cache entries, below 70% past twice them', async () => {
    const r = await quick('mr-count');
    expect(failed(r)).toEqual([]);
    expect(r.checks).toHaveLength(2);
    expect(fig(r, (p) => p.mrs === 256, 'mkeyMissRate')).toBeGreaterThan(0.5);
  });

  it("dereg-storm: the co-tenant lowers the victim only under 'all', the pooled storm below Husky's x0.497", async () => {
    const r = await quick('dereg-storm', 2);
    expect(failed(r)).toEqual([]);
    expect(r.checks.map((c) => c.what)).toEqual(["'entry': the storm leaves the victim within 5%", "'all': the storm lowers the victim below x0.8 (Husky: x0.497)"]);
    const rate = (policy: string, pages: number | null): number =>
      fig(r, (p) => p.destroyInvalidates === policy && (pages === null ? p.cotenant === false : p.cotenant === true && p.cotenantPages === pages), 'mReadsPerSec');
    for (const pages of [1, 600]) {
      expect(fig(r, (p) => p.cotenant === true && p.cotenantPages === pages && p.destroyInvalidates === 'all', 'cotenantCycles')).toBeGreaterThanOrEqual(1);
      // 'entry': the co-tenant costs the victim less than 5%, with either kind of MR
      expect(rate('entry', pages) / rate('entry', null)).toBeGreaterThan(0.95);
      expect(fig(r, (p) => p.cotenant === true && p.cotenantPages === pages && p.destroyInvalidates === 'entry', 'mttMissRate')).toBe(0);
    }
    // 'all': pooled MRs (a UMR each way) flush the caches every few us, before the victim's 480
    // MTT lines refill: past Husky's x0.497; the firmware's 600-page MRs (--quick's 8x faster
    // firmware) about x0.7. Each dereg waits for the victim's DMA in flight (the revoke UMR is a
    // DMA fence, issue 18), so the co-tenant cycles less often than when dereg returned at once
    expect(rate('all', 1) / rate('all', null)).toBeLessThan(0.497);
    expect(rate('all', 600) / rate('all', null)).toBeLessThan(0.8);
    expect(fig(r, (p) => p.cotenant === true && p.cotenantPages === 1 && p.destroyInvalidates === 'all', 'mttMissRate')).toBeGreaterThan(0.8);
    expect(readFileSync(join(r.out, 'plot.svg'), 'utf8')).toContain('1-page MRs (pool, UMR)');
  });

  it('odp-latency: one fault per message, 220 us at 4 KB, ~350 us at 4 MB: strongly sublinear', async () => {
    const r = await quick('odp-latency');
    expect(failed(r)).toEqual([]);
    expect(r.checks.some((c) => c.what.startsWith('strongly sublinear'))).toBe(true);
  });

  it('odp-prefetch: with prefetch no fault on the first touch', async () => {
    const r = await quick('odp-prefetch');
    expect(failed(r)).toEqual([]);
    expect(fig(r, (p) => p.prefetch === true && p.size === 4096, 'pagePrefetch')).toBeGreaterThan(0);
  });

  it('sge-vs-klm: past the SGE limit the scatter list splits; the KLM path does not win here (documented)', async () => {
    const r = await quick('sge-vs-klm');
    expect(failed(r)).toEqual([]);
    // the READs the adapter's requester sent, per I/O, for both methods and both sizes
    const split = r.checks.filter((c) => c.what.includes('READ(s) per I/O'));
    expect(split.length).toBe(4);
    expect(fig(r, (p) => p.method === 'sge' && p.pages === 64, 'readsPerIo')).toBe(3);
    expect(fig(r, (p) => p.method === 'sge' && p.pages === 16, 'readsPerIo')).toBe(1);
    expect(fig(r, (p) => p.method === 'klm' && p.pages === 64, 'readsPerIo')).toBe(1);
    // the published x1.2 for the UMR path is not reproduced: both paths run near the 100 Gb/s
    // link's rate (README "Experiments"), and the check says so in its text
    const gain = r.checks.filter((c) => c.what.includes('within 5%'));
    expect(gain.length).toBe(1);
    expect(gain[0].what).toMatch(/published KLM gain NOT reproduced/);
    const klm = fig(r, (p) => p.method === 'klm' && p.pages === 64, 'gbps');
    const sge = fig(r, (p) => p.method === 'sge' && p.pages === 64, 'gbps');
    expect(klm / sge).toBeGreaterThan(0.95);
    expect(klm / sge).toBeLessThan(1.05);
    expect(fig(r, (p) => p.method === 'sge' && p.pages === 64, 'wrsPerIo')).toBe(3);
    expect(readFileSync(join(r.out, 'plot.svg'), 'utf8')).toContain('Not reproduced');
  });

  it('indirection: each KLM level adds two dependent host reads cold', async () => {
    const r = await quick('indirection');
    expect(failed(r)).toEqual([]);
    expect(r.lines.map((l) => l.figures.hostReads)).toEqual([2, 4, 6, 8, 10]);
  });
});
