/**
 * `mlx5sim run --fst`: with GTKWave's vcd2fst installed (.ci/run installs the Debian package
 * `gtkwave`), the run's VCD is converted after the run and the .gtkw names the FST, whose values
 * read back (fst2vcd) equal the VCD's; without vcd2fst, the option is refused before the run,
 * naming the converter and the package, with exit code 2.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.ts';
import { readVcd, readVcdFile, type ParsedVcd } from '../support/vcd_read.ts';
import { findVcd2fst } from '../../src/sim/trace/fst.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const cliArgs = (...args: string[]): string[] => [join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'src/cli/main.ts'), ...args];

/** Each signal's values in time order, repeated values dropped (the two formats group changes differently). */
function histories(v: ParsedVcd): Map<string, string> {
  const h = new Map<string, [number, number | null][]>();
  for (const [t, p, x] of v.changes) {
    const l = h.get(p) ?? [];
    if (l.length && l[l.length - 1][0] === t) l[l.length - 1][1] = x;
    else l.push([t, x]);
    h.set(p, l);
  }
  const out = new Map<string, string>();
  for (const [p, l] of h) out.set(p, JSON.stringify(l.filter((e, i) => i === 0 || e[1] !== l[i - 1][1])));
  return out;
}

describe('mlx5sim run --fst', () => {
  it('converts the VCD after the run with vcd2fst; the .gtkw names the FST, whose values equal the VCD', async () => {
    const vcd2fst = findVcd2fst();
    expect(vcd2fst, "vcd2fst not on PATH: install the Debian package 'gtkwave' (.ci/run does)").not.toBeNull();
    const cwd = tempDir('mlx5sim-fst-');
    const out = execFileSync(process.execPath, cliArgs('run', 'frwr', '--fst'), { cwd, encoding: 'utf8' });
    const fst = join(cwd, 'waves/frwr/frwr.fst');
    expect(out).toMatch(/^FST: waves\/frwr\/frwr\.fst \(\d+ bytes; the VCD has \d+\), named by waves\/frwr\/frwr\.gtkw$/m);
    expect(readFileSync(join(cwd, 'waves/frwr/frwr.gtkw'), 'utf8')).toMatch(new RegExp(`^\\[dumpfile\\] "${fst}"$`, 'm'));
    const vcd = await readVcdFile(join(cwd, 'waves/frwr/frwr.vcd'));
    const back = await readVcd(execFileSync(join(dirname(vcd2fst!), 'fst2vcd'), [fst], { encoding: 'utf8', maxBuffer: 1 << 28 }));
    expect(back.decls.length).toBe(vcd.decls.length);
    expect(histories(back)).toEqual(histories(vcd));
  });

  it('without vcd2fst on PATH, or with --no-vcd, is refused before the run with exit code 2', () => {
    const cwd = tempDir('mlx5sim-nofst-');
    const r = spawnSync(process.execPath, cliArgs('run', 'frwr', '--fst'), { cwd, encoding: 'utf8', env: { ...process.env, PATH: join(cwd, 'empty') } });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--fst needs GTKWave's vcd2fst on PATH, and there is none \(Debian\/Ubuntu: apt-get install gtkwave\)/);
    expect(existsSync(join(cwd, 'waves'))).toBe(false);
    const n = spawnSync(process.execPath, cliArgs('run', 'frwr', '--fst', '--no-vcd'), { cwd, encoding: 'utf8' });
    expect(n.status).toBe(2);
    expect(n.stderr).toMatch(/--fst converts the run's VCD: it cannot go with --no-vcd/);
  });
});
