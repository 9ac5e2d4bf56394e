/**
 * `mlx5sim run` puts each run in a folder of its own (`waves/<name>/<name>.vcd` and `.gtkw`) and
 * the translate filters in one `waves/filters/` that every run of the folder shares; the .gtkw
 * still finds everything, as GTKWave resolves paths, after the whole folder is moved, and after
 * one run's folder is moved on the same machine.
 */
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, renameSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.ts';
import { gtkwReferences, gtkwaveResolve } from '../support/gtkw_paths.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const cli = (cwd: string, ...args: string[]): string =>
  execFileSync(process.execPath, [join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'src/cli/main.ts'), ...args], { cwd, encoding: 'utf8' });

describe('waves folders', () => {
  it('one folder per run, one shared filters/ folder, paths that survive moving the folder', () => {
    const cwd = tempDir('mlx5sim-layout-');
    expect(cli(cwd, 'run', 'frwr')).toMatch(/waves in waves\/frwr\/frwr\.vcd \(open: gtkwave waves\/frwr\/frwr\.gtkw\)/);
    cli(cwd, 'run', 'sg-gaps');
    expect(readdirSync(join(cwd, 'waves')).sort()).toEqual(['filters', 'frwr', 'sg-gaps']);
    // the run's view and one per phase of frwr (tb.phase), beside the VCD
    expect(readdirSync(join(cwd, 'waves/frwr')).sort()).toEqual(['frwr.create_mkey.gtkw', 'frwr.gtkw', 'frwr.local_inv.gtkw', 'frwr.refused.gtkw', 'frwr.reg_mr.gtkw', 'frwr.vcd', 'frwr.write.gtkw']);
    const frwr = gtkwReferences(join(cwd, 'waves/frwr/frwr.gtkw'));
    const sg = gtkwReferences(join(cwd, 'waves/sg-gaps/sg-gaps.gtkw'));
    const phase = gtkwReferences(join(cwd, 'waves/frwr/frwr.write.gtkw'));
    expect([phase.dumpfile, phase.filters.every((f) => frwr.filters.includes(f))]).toEqual([frwr.dumpfile, true]);
    // both runs name the same filter files, and those are all the filters folder holds
    const shared = readdirSync(join(cwd, 'waves/filters')).map((f) => join(cwd, 'waves/filters', f)).sort();
    expect([...new Set([...frwr.filters, ...sg.filters])].sort()).toEqual(shared);
    expect(frwr.filters.length).toBeGreaterThan(5);
    expect(frwr.filters.filter((f) => sg.filters.includes(f)).length).toBeGreaterThan(5);

    // the whole folder moved elsewhere: everything re-anchors beside the moved .gtkw
    const away = join(tempDir('mlx5sim-moved-'), 'elsewhere');
    renameSync(join(cwd, 'waves'), away);
    const moved = join(away, 'frwr/frwr.gtkw');
    expect(gtkwaveResolve(moved, frwr.savefile, frwr.dumpfile)).toBe(join(away, 'frwr/frwr.vcd'));
    for (const f of frwr.filters) expect(gtkwaveResolve(moved, frwr.savefile, f)).toBe(join(away, 'filters', f.slice(f.lastIndexOf('/') + 1)));
    expect(gtkwaveResolve(join(away, 'frwr/frwr.write.gtkw'), phase.savefile, phase.dumpfile)).toBe(join(away, 'frwr/frwr.vcd'));

    // one run's folder copied away alone: its VCD re-anchors, the filters are found where
    // they were written (so on this machine; elsewhere copy waves/filters beside it)
    renameSync(away, join(cwd, 'waves'));
    const lone = join(tempDir('mlx5sim-lone-'), 'frwr');
    cpSync(join(cwd, 'waves/frwr'), lone, { recursive: true });
    const loneGtkw = join(lone, 'frwr.gtkw');
    expect(gtkwaveResolve(loneGtkw, frwr.savefile, frwr.dumpfile)).toBe(join(lone, 'frwr.vcd'));
    for (const f of frwr.filters) expect(gtkwaveResolve(loneGtkw, frwr.savefile, f)).toBe(f);
  });
});
