/** Checks, before a run, that an output folder can be made and written. */
import { closeSync, existsSync, mkdirSync, openSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { UsageError } from './args.ts';

/**
 * Makes `dir` one level at a time (a recursive mkdir under /proc never returns) and checks it
 * takes files by making one (access(2) says yes to root in /proc, and a file named as a folder
 * would only fail at the end of the run); a UsageError `<what>: cannot write in <dir> (<errno>)`
 * otherwise, or `<what>: <path> is a file, not a folder`.
 */
export function ensureWritable(what: string, dir: string): void {
  const abs = resolve(dir);
  const missing: string[] = [];
  let d = abs;
  for (; !existsSync(d); d = dirname(d)) missing.unshift(d);
  if (!statSync(d).isDirectory()) throw new UsageError(`${what}: ${d} is a file, not a folder`);
  const probe = join(abs, `.mlx5sim-write-check-${process.pid}`);
  try {
    for (const m of missing) mkdirSync(m);
    closeSync(openSync(probe, 'wx'));
    rmSync(probe);
  } catch (e) {
    throw new UsageError(`${what}: cannot write in ${abs} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
}
