/** Checks, before a run, that an output folder can be made and written. */
import { accessSync, constants, existsSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UsageError } from './args.ts';

/**
 * Makes `dir` one level at a time (a recursive mkdir under /proc never returns) and checks it
 * takes files; a UsageError `<what>: cannot write in <dir> (<errno>)` otherwise.
 */
export function ensureWritable(what: string, dir: string): void {
  const abs = resolve(dir);
  const missing: string[] = [];
  for (let d = abs; !existsSync(d); d = dirname(d)) missing.unshift(d);
  try {
    for (const d of missing) mkdirSync(d);
    accessSync(abs, constants.W_OK);
  } catch (e) {
    throw new UsageError(`${what}: cannot write in ${abs} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
}
