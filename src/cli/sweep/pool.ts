/**
 * Runs a sweep's points on a pool of worker threads (piscina), or in this thread with one job.
 * Each point is independent (its own testbed, its own seed), so the lines do not depend on the
 * number of jobs or the order the points finish in; they come back sorted by grid index.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import type { Experiment, PointLine } from '../../experiment.ts';
import { runPoint, type PointTask } from './point.ts';

export interface PoolOptions {
  /** Worker threads; 1 runs the points in this thread, one after the other. */
  jobs: number;
  /** Called as each point finishes (in finishing order), e.g. for the progress bar. */
  onPoint?(line: PointLine): void;
}

/** A point that threw: the sweep fails naming it. */
export class PointError extends Error {
  constructor(readonly task: PointTask, cause: unknown) {
    super(`point ${task.index} ${JSON.stringify(task.params)}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}

/**
 * The worker module beside this one, and how Node must start it: from the sources (.ts) a
 * thread needs tsx's loader, which a process started by tsx passes on by itself and any other
 * (a test runner) does not.
 */
function workerOf(): { filename: string; execArgv?: string[] } {
  const here = import.meta.url;
  const ts = /\.ts$/.test(here);
  const filename = new URL(ts ? './worker.ts' : './worker.js', here).href;
  if (!ts || process.execArgv.some((a) => a.includes('tsx'))) return { filename };
  // tsx's main export is its loader (what `node --import tsx` runs)
  const loader = pathToFileURL(createRequire(here).resolve('tsx')).href;
  return { filename, execArgv: [...process.execArgv, '--import', loader] };
}

export async function runPoints(exp: Experiment, tasks: readonly PointTask[], opts: PoolOptions): Promise<PointLine[]> {
  const lines: PointLine[] = [];
  const done = (l: PointLine): void => {
    lines.push(l);
    opts.onPoint?.(l);
  };
  if (opts.jobs <= 1 || tasks.length <= 1) {
    for (const t of tasks) {
      try {
        done(await runPoint(exp, t));
      } catch (e) {
        throw new PointError(t, e);
      }
    }
  } else {
    const threads = Math.min(opts.jobs, tasks.length);
    const pool = new Piscina({ ...workerOf(), minThreads: threads, maxThreads: threads, idleTimeout: 1000 });
    try {
      await Promise.all(
        tasks.map((t) =>
          (pool.run(t) as Promise<PointLine>).then(done, (e: unknown) => {
            throw new PointError(t, e);
          }),
        ),
      );
    } finally {
      await pool.destroy();
    }
  }
  return lines.sort((a, b) => a.index - b.index);
}
