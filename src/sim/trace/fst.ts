/**
 * FST for long runs: GTKWave's `vcd2fst` (Debian package `gtkwave`) turns a finished VCD into
 * FST, GTKWave's compressed, indexed format, and the run's .gtkw is pointed at it. The VCD stays
 * the simulator's output (every test reads VCD); FST is a conversion after the run.
 */
import { accessSync, constants, readFileSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, join, resolve } from 'node:path';
import { execFileSync } from 'node:child_process';
import { gtkwPath, phaseViews } from './gtkw.ts';

/** The `vcd2fst` executable on `PATH` (null when there is none). */
export function findVcd2fst(path = process.env.PATH ?? ''): string | null {
  for (const dir of path.split(delimiter)) {
    if (!dir) continue;
    const f = join(dir, 'vcd2fst');
    try {
      accessSync(f, constants.X_OK);
      return f;
    } catch {
      // not here
    }
  }
  return null;
}

/** What a conversion made. */
export interface FstResult {
  fst: string;
  vcdBytes: number;
  fstBytes: number;
}

/**
 * Converts `vcd` to `<vcd without .vcd>.fst` with `vcd2fst` (found by `findVcd2fst`), and, when
 * the run has a .gtkw beside it, makes its `[dumpfile]` the FST (filters, markers and the view
 * stay as they are: FST has the same signals and times). Throws naming vcd2fst when it fails.
 */
export function convertToFst(vcd: string, vcd2fst: string): FstResult {
  const fst = vcd.replace(/\.vcd$/, '') + '.fst';
  try {
    execFileSync(vcd2fst, [vcd, fst], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    const err = (e as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(`vcd2fst ${vcd} ${fst} failed${err ? `: ${err}` : ''}`);
  }
  // the run's .gtkw and its phases' (`<run>.<phase>.gtkw`), when written
  const gtkw = gtkwPath(vcd);
  for (const f of [gtkw, ...phaseViews(vcd)]) {
    let text: string | null = null;
    try {
      text = readFileSync(f, 'utf8');
    } catch {
      // --no-gtkw: nothing to point
    }
    if (text !== null) writeFileSync(f, text.replace(/^\[dumpfile\] ".*"$/m, () => `[dumpfile] "${resolve(fst)}"`));
  }
  return { fst, vcdBytes: statSync(vcd).size, fstBytes: statSync(fst).size };
}
