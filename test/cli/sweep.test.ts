/**
 * The sweep engine (issue 10 items 1-5): the grid from --set/--pages/--quick, shards that
 * partition it, points identical for any number of jobs and joined back identical by merge,
 * plots byte-identical for the same points, and the progress bar silent off a terminal.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UsageError, parseArgs } from '../../src/cli/args.ts';
import { expandGrid, shardOf } from '../../src/cli/sweep/grid.ts';
import { mergeSweeps } from '../../src/cli/sweep/output.ts';
import { plotSpec, renderSvg } from '../../src/cli/sweep/plot.ts';
import { Progress } from '../../src/cli/sweep/progress.ts';
import { defaultOut, findExperiment, runSweep } from '../../src/cli/sweep/sweep.ts';
import type { PointLine } from '../../src/experiment.ts';
import { tempDir } from '../support/tmp.ts';

const mtt = findExperiment('mtt-cliff');
const ind = findExperiment('indirection');
const noWall = (lines: readonly PointLine[]): string[] => lines.map((l) => JSON.stringify({ ...l, wallSeconds: 0 }));

describe('the grid', () => {
  it('expands blocks in order; --set replaces an axis where a block has it and joins every block otherwise', () => {
    const g = expandGrid(mtt, { quick: true, sets: [{ field: 'workingSet', values: ['1m', '4m'] }, { field: 'mttCacheWays', values: ['4', '8'] }] });
    expect(g.map((p) => p.index)).toEqual([...g.keys()]);
    expect(g).toHaveLength(2 * 2 * 2); // pages x workingSet x ways
    expect(g[0].params).toEqual({ mttCacheLines: 64, pages: 4096, workingSet: 2 ** 20, reads: 2000, readBytes: 64, mttCacheWays: 4 });
    expect(new Set(g.map((p) => p.params.workingSet))).toEqual(new Set([2 ** 20, 4 * 2 ** 20]));
  });

  it('--pages keeps the points of those page sizes; duplicates are dropped', () => {
    const g = expandGrid(mtt, { quick: true, sets: [], pages: [2 ** 21] });
    expect(g.every((p) => p.params.pages === 2 ** 21)).toBe(true);
    expect(g.map((p) => p.index)).toEqual([0, 1, 2]);
    expect(expandGrid(ind, { quick: true, sets: [{ field: 'depth', values: ['1', '1', '2'] }] })).toHaveLength(2);
  });

  it('refuses an unknown field, a bad value of an axis or of a configuration field, naming it', () => {
    const bad = (sets: { field: string; values: string[] }[], pages?: number[]): string => {
      try {
        expandGrid(mtt, { quick: true, sets, ...(pages ? { pages } : {}) });
      } catch (e) {
        expect(e).toBeInstanceOf(UsageError);
        return (e as Error).message;
      }
      return 'no error';
    };
    expect(bad([{ field: 'nope', values: ['1'] }])).toMatch(/--set nope: not a parameter of mtt-cliff .* nor a configuration field/);
    expect(bad([{ field: 'pages', values: ['8k'] }])).toMatch(/--set pages: must be 4k or 2m, got '8192'/);
    expect(bad([{ field: 'mttCacheLines', values: ['0'] }])).toMatch(/--set mttCacheLines=0: config\.mttCacheLines/);
    expect(() => expandGrid(ind, { quick: true, sets: [], pages: [4096] })).toThrow(/--pages: indirection has no page-size axis/);
  });

  it('shards partition the grid: every point in exactly one shard, in index order', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 1, max: 9 }), (size, n) => {
        const pts = Array.from({ length: size }, (_, index) => ({ index }));
        const all = Array.from({ length: n }, (_, i) => shardOf(pts, { i, n })).flat().map((p) => p.index).sort((a, b) => a - b);
        expect(all).toEqual(pts.map((p) => p.index));
        for (let i = 0; i < n; i++) expect(shardOf(pts, { i, n }).every((p) => p.index % n === i)).toBe(true);
      }),
    );
  });
});

describe('running a sweep', () => {
  it('gives the same lines and meta.json with 1 job in-process and 2 worker threads; shards merged give them again', async () => {
    const one = await runSweep(ind, { quick: true, sets: [], out: tempDir('mlx5sim-j1-'), jobs: 1 });
    const dir2 = tempDir('mlx5sim-j2-');
    const two = await runSweep(ind, { quick: true, sets: [], out: dir2, jobs: 2 });
    expect(noWall(two.lines)).toEqual(noWall(one.lines));
    expect(two.meta).toEqual(one.meta);
    expect(one.lines.map((l) => l.index)).toEqual([0, 1, 2, 3, 4]);
    // the file is sorted by index, with the fixed field order
    const first = JSON.parse(readFileSync(join(dir2, 'points.jsonl'), 'utf8').split('\n')[0]) as Record<string, unknown>;
    expect(Object.keys(first)).toEqual(['experiment', 'index', 'params', 'seed', 'figures', 'stats', 'wallSeconds']);

    const s0 = tempDir('mlx5sim-s0-');
    const s1 = tempDir('mlx5sim-s1-');
    const a = await runSweep(ind, { quick: true, sets: [], out: s0, jobs: 1, shard: { i: 0, n: 2 } });
    const b = await runSweep(ind, { quick: true, sets: [], out: s1, jobs: 1, shard: { i: 1, n: 2 } });
    expect(a.lines.map((l) => l.index)).toEqual([0, 2, 4]);
    expect(b.lines.map((l) => l.index)).toEqual([1, 3]);
    expect(a.checks).toEqual([]); // a shard cannot judge the shape
    const m = mergeSweeps([s1, s0]);
    expect(m.missing).toEqual([]);
    expect(noWall(m.lines)).toEqual(noWall(one.lines));
    expect(m.meta).toEqual(one.meta);
    expect(mergeSweeps([s0]).missing).toEqual([1, 3]);
    expect(() => mergeSweeps([s0, dir2, tempDir('mlx5sim-empty-')])).toThrow(/not a sweep's folder/);
  });

  it('sweep merge takes its own --out; shards write to folders of their own by default; a line of another sweep is refused', async () => {
    // commander gives --out to the parent `sweep`: the merge must still see it
    expect(parseArgs(['sweep', 'merge', 'a', 'b', '--out', 'X'])).toEqual({ cmd: 'merge', dirs: ['a', 'b'], out: 'X', force: false });
    expect(parseArgs(['merge', 'a', '--out', 'Y'])).toEqual({ cmd: 'merge', dirs: ['a'], out: 'Y', force: false });
    expect(parseArgs(['sweep', 'merge', 'a'])).toEqual({ cmd: 'merge', dirs: ['a'], force: false })
    expect(parseArgs(['sweep', 'merge', 'a', '--force'])).toEqual({ cmd: 'merge', dirs: ['a'], force: true });
    expect(defaultOut('mr-count')).toBe(join('results', 'mr-count'));
    expect(defaultOut('mr-count', { i: 1, n: 4 })).toBe(join('results', 'mr-count', 'shard-1-of-4'));
    const s = tempDir('mlx5sim-tampered-');
    await runSweep(ind, { quick: true, sets: [], out: s, jobs: 1, shard: { i: 0, n: 2 } });
    const path = join(s, 'points.jsonl');
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n');
    writeFileSync(path, [JSON.stringify({ ...JSON.parse(lines[0]), index: 99 }), ...lines.slice(1)].join('\n') + '\n');
    expect(() => mergeSweeps([s])).toThrow(/a point line \(index 99, experiment indirection, seed 1\) is not of this sweep \(indirection, seed 1, 5 points\)/);
  });

  it('draws the same SVG bytes for the same points, with the published figures on it', async () => {
    const r = await runSweep(ind, { quick: true, sets: [], out: null, jobs: 1 });
    const a = await renderSvg(plotSpec(ind, r.lines));
    const b = await renderSvg(plotSpec(ind, [...r.lines].reverse()));
    expect(b).toBe(a);
    expect(a).toContain('direct: ~1.1 us');
    expect(a).not.toMatch(/20[0-9]{2}-[0-9]{2}-[0-9]{2}/); // no dates
  });

  it("draws grouped bars for mark 'bar': a nominal group per x label in grid order, a bar per series, the y references", async () => {
    const storm = findExperiment('dereg-storm');
    const point = (index: number, policy: string, pages: number | null, rate: number): PointLine => ({
      experiment: storm.name, index, seed: 1, wallSeconds: 0, stats: {},
      params: { destroyInvalidates: policy, victimBytes: 2 ** 20, reads: 10, cotenant: pages !== null, ...(pages === null ? {} : { cotenantPages: pages }) },
      figures: { mReadsPerSec: rate },
    });
    const lines = [point(0, 'entry', null, 50), point(1, 'all', null, 50), point(2, 'entry', 1, 49), point(3, 'all', 1, 10), point(4, 'entry', 600, 50), point(5, 'all', 600, 37)];
    const spec = plotSpec(storm, lines) as unknown as { layer: { mark: { type: string }; encoding: Record<string, { type?: string; sort?: string[] }> }[] };
    expect(spec.layer.map((l) => l.mark.type)).toEqual(['bar', 'text', 'rule', 'text']);
    expect(spec.layer[0].encoding.x.type).toBe('nominal');
    expect(spec.layer[0].encoding.x.sort).toEqual(['no co-tenant', '1-page MRs (cache, 4-entry bucket, UMR)', '600-page MRs (cache, 1024-entry bucket, UMR)']);
    expect(spec.layer[0].encoding.xOffset.sort).toEqual(['destroyInvalidates entry', 'destroyInvalidates all']);
    const a = await renderSvg(spec as never);
    expect(await renderSvg(plotSpec(storm, [...lines].reverse()))).toBe(a);
    expect(a).toContain('600-page MRs (cache, 1024-entry bucket, UMR)');
    expect(a).toContain('Husky: x0.497');
  });
});

describe('the progress bar', () => {
  const stream = (tty: boolean): PassThrough & { isTTY: boolean; text: () => string } => {
    const s = Object.assign(new PassThrough(), { isTTY: tty });
    let text = '';
    s.on('data', (d: Buffer) => { text += d.toString(); });
    return Object.assign(s, { text: () => text });
  };
  it('draws points done and an ETA on a terminal, and writes nothing elsewhere', async () => {
    const tty = stream(true);
    const pipe = stream(false);
    for (const s of [tty, pipe]) {
      const p = new Progress(4, 'x', s as unknown as NodeJS.WriteStream);
      p.tick();
      p.tick();
      p.finish();
    }
    await new Promise((r) => setImmediate(r));
    expect(tty.text()).toMatch(/\rx \[#{15}-{15}\] 2\/4 points, \d+s elapsed, ETA \d+s/);
    expect(tty.text().endsWith('\n')).toBe(true);
    expect(pipe.text()).toBe('');
  });
});
