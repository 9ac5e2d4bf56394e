/**
 * One point of a sweep, run where it is called: in a worker thread of the pool, or in-process
 * (`--jobs 1`, and the tests). The line it returns is the same either way but for wallSeconds.
 */
import { performance } from 'node:perf_hooks';
import type { Experiment, ParamValue, PointLine } from '../../experiment.ts';
import { configOf } from './grid.ts';

/** A point to run: what a worker is sent (plain data: it crosses threads). */
export interface PointTask {
  experiment: string;
  index: number;
  params: Record<string, ParamValue>;
  seed: number;
}

export async function runPoint(exp: Experiment, t: PointTask): Promise<PointLine> {
  const t0 = performance.now();
  const r = await exp.run(t.params, { seed: t.seed, config: configOf(t.params) });
  // the field order of every line is fixed here: experiment, index, params, seed, figures, stats, wallSeconds
  return {
    experiment: t.experiment,
    index: t.index,
    params: t.params,
    seed: t.seed,
    figures: r.figures,
    stats: r.stats,
    wallSeconds: +((performance.now() - t0) / 1000).toFixed(3),
  };
}
