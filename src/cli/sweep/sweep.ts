/**
 * `mlx5sim sweep`, `sweep merge` and `plot`: a grid of points run on every core, written as
 * one JSON line per point with meta.json and an SVG plot; shards joined; plots redrawn. Also
 * `runSweep`, the same for a program or a test, without the command line.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { experiments } from '../../../experiments/index.ts';
import type { Experiment, PointLine, ShapeCheck } from '../../experiment.ts';
import { UsageError, type MergeArgs, type PlotArgs, type SweepArgs } from '../args.ts';
import { expandGrid, gridBlocks, shardOf, type GridChoice } from './grid.ts';
import { POINTS_FILE, baseConfig, mergeSweeps, provenance, readSweep, refuseOverwrite, writeCsv, writeSweep, type SweepMeta } from './output.ts';
import { writePlot } from './plot.ts';
import { runPoints } from './pool.ts';
import { Progress } from './progress.ts';
import { ensureWritable } from '../writable.ts';

/** A built-in experiment by name; an unknown name is a usage error listing the known ones. */
export function findExperiment(name: string): Experiment {
  const e = experiments.find((x) => x.name === name);
  if (!e) throw new UsageError(`no experiment named '${name}' (known: ${experiments.map((x) => x.name).join(', ')})`);
  return e;
}

export interface SweepOptions extends GridChoice {
  seed?: number;
  jobs?: number;
  shard?: { i: number; n: number };
  /** Output folder (default results/<experiment>); null writes nothing. */
  out?: string | null;
  /** Called as each point finishes. */
  onPoint?(line: PointLine): void;
}

export interface SweepResult {
  meta: SweepMeta;
  lines: PointLine[];
  /** The shape checks (empty for a shard: they need the whole grid). */
  checks: ShapeCheck[];
  /** The plot written, if any. */
  svg: string | null;
}

/**
 * Where a sweep writes without --out: results/<experiment>, and a shard of several its own
 * folder in it (shards sharing a file system must not overwrite each other's points).
 */
export function defaultOut(experiment: string, shard?: { i: number; n: number }): string {
  return shard && shard.n > 1 ? join('results', experiment, `shard-${shard.i}-of-${shard.n}`) : join('results', experiment);
}

/** Runs an experiment's grid (or one shard of it) and writes its folder. */
export async function runSweep(exp: Experiment, o: SweepOptions): Promise<SweepResult> {
  const seed = o.seed ?? 1;
  const choice: GridChoice = { quick: o.quick, sets: o.sets, ...(o.pages ? { pages: o.pages } : {}) };
  const grid = expandGrid(exp, choice);
  const mine = shardOf(grid, o.shard);
  const out = o.out === undefined ? defaultOut(exp.name, o.shard) : o.out;
  if (out !== null) ensureWritable(`--out ${out}`, out);
  const tasks = mine.map((p) => ({ experiment: exp.name, index: p.index, params: p.params, seed }));
  const lines = await runPoints(exp, tasks, { jobs: o.jobs ?? 1, ...(o.onPoint ? { onPoint: o.onPoint } : {}) });
  const meta: SweepMeta = {
    experiment: exp.name,
    summary: exp.summary,
    shape: exp.shape,
    ...provenance(),
    seed,
    quick: o.quick,
    grid: { blocks: gridBlocks(exp, choice), pages: o.pages ? [...o.pages] : null },
    gridPoints: grid.length,
    shard: o.shard ?? null,
    config: baseConfig(),
  };
  let svg: string | null = null;
  if (out !== null) {
    writeSweep(out, meta, lines);
    svg = await writePlot(out, exp, lines);
  }
  return { meta, lines, checks: o.shard && o.shard.n > 1 ? [] : exp.checks(lines), svg };
}

/** Prints the checks; true when every one holds. */
function report(checks: readonly ShapeCheck[]): boolean {
  // a grid the shape's checks cannot judge (one side of the cliff only, say) says so
  if (checks.length === 0) console.log('no shape check applies to this grid (the points are written; widen the grid to judge the shape)');
  for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.what}${c.detail ? `: ${c.detail}` : ''}`);
  return checks.every((c) => c.ok);
}

export async function sweepCommand(a: SweepArgs): Promise<number> {
  const exp = findExperiment(a.experiment);
  // the grid is checked (exit code 2) before the progress bar starts
  const grid = shardOf(expandGrid(exp, { quick: a.quick, sets: a.sets, ...(a.pages ? { pages: a.pages } : {}) }), a.shard);
  const dir = a.out ?? defaultOut(exp.name, a.shard);
  refuseOverwrite(a.out !== undefined ? '--out' : 'sweep', dir, a.force);
  ensureWritable(`--out ${dir}`, dir);
  const bar = new Progress(grid.length, exp.name);
  const t0 = performance.now();
  let r: SweepResult;
  try {
    r = await runSweep(exp, {
      quick: a.quick, sets: a.sets, seed: a.seed, jobs: a.jobs,
      ...(a.pages ? { pages: a.pages } : {}), ...(a.shard ? { shard: a.shard } : {}), out: dir,
      onPoint: () => bar.tick(),
    });
  } finally {
    // an error is printed on a line of its own, not over the bar
    bar.finish();
  }
  const wall = (performance.now() - t0) / 1000;
  console.log(`${exp.name}: ${r.lines.length} points${a.shard ? ` (shard ${a.shard.i}/${a.shard.n} of ${r.meta.gridPoints})` : ''} in ${wall.toFixed(1)} s with ${a.jobs} job${a.jobs === 1 ? '' : 's'}: ${join(dir, 'points.jsonl')}, plot ${r.svg}`);
  if (a.shard && a.shard.n > 1) {
    console.log(`the shape checks run on the whole grid: mlx5sim sweep merge <the shards' folders>`);
    return 0;
  }
  return report(r.checks) ? 0 : 1;
}

export async function mergeCommand(a: MergeArgs): Promise<number> {
  const m = mergeSweeps(a.dirs);
  const exp = findExperiment(m.meta.experiment);
  const out = a.out ?? join('results', exp.name);
  // an incomplete merge writes nothing: it must not replace a whole sweep with part of one
  if (m.missing.length) {
    console.log(`FAIL ${m.missing.length} of ${m.meta.gridPoints} points missing (grid indices ${m.missing.slice(0, 20).join(', ')}${m.missing.length > 20 ? ', ...' : ''}): a shard not run or not given; nothing written to ${out}`);
    return 1;
  }
  refuseOverwrite(a.out !== undefined ? '--out' : 'merge', out, a.force);
  ensureWritable(`--out ${out}`, out);
  writeSweep(out, m.meta, m.lines);
  const svg = await writePlot(out, exp, m.lines);
  console.log(`${exp.name}: ${m.lines.length} of ${m.meta.gridPoints} points from ${a.dirs.length} folders: ${join(out, 'points.jsonl')}, plot ${svg}`);
  return report(exp.checks(m.lines)) ? 0 : 1;
}

export async function plotCommand(a: PlotArgs): Promise<number> {
  const { meta, lines } = readSweep(a.dir);
  const exp = findExperiment(meta.experiment);
  if (lines.length === 0) throw new UsageError(`${a.dir}: ${POINTS_FILE} holds no point: nothing to plot`);
  writeCsv(a.dir, lines);
  console.log(`${exp.name}: plot ${await writePlot(a.dir, exp, lines)} (${lines.length} points)`);
  return 0;
}
