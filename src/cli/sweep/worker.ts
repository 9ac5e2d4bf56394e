/**
 * The worker of the sweep's thread pool (piscina): runs one point of a built-in experiment.
 * From dist/ it is plain JavaScript; from the sources the pool starts it with tsx's loader.
 */
import { experiments } from '../../../experiments/index.ts';
import type { PointLine } from '../../experiment.ts';
import { runPoint, type PointTask } from './point.ts';

export default async function run(t: PointTask): Promise<PointLine> {
  const exp = experiments.find((e) => e.name === t.experiment);
  if (!exp) throw new Error(`no experiment named '${t.experiment}'`);
  return runPoint(exp, t);
}
