/**
 * The examples a reader copies (examples/): the scenario passes every check as `mlx5sim run`
 * runs it, and the experiment's small grid runs through the sweep engine, holds its shape and
 * draws a plot. The README and the guide show how to run both.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/cli.ts';
import { plotSpec, renderSvg } from '../../src/cli/sweep/plot.ts';
import { runSweep } from '../../src/cli/sweep/sweep.ts';
import myScenario from '../../examples/my_scenario.ts';
import myExperiment from '../../examples/my_experiment.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

describe('examples/', () => {
  it('my_scenario.ts passes every check, run as the command line runs a scenario file', async () => {
    const r = await myScenario.run({ seed: 1 });
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.checks.length).toBe(7);
    // and through the command: exit 0
    const prev = process.cwd();
    process.chdir(root);
    try {
      expect(await runCli(['run', 'examples/my_scenario.ts', '--no-vcd'])).toBe(0);
    } finally {
      process.chdir(prev);
    }
  });

  it('my_experiment.ts: its quick grid through the sweep engine holds its shape and plots', async () => {
    const r = await runSweep(myExperiment, { quick: true, sets: [], jobs: 1, out: null });
    expect(r.lines.map((l) => l.params.size)).toEqual([64, 65536]);
    expect(r.checks.length).toBeGreaterThan(0);
    expect(r.checks.every((c) => c.ok)).toBe(true);
    expect(await renderSvg(plotSpec(myExperiment, r.lines))).toMatch(/^<svg /);
  });

  it('the README and the guide show how to run them', () => {
    for (const f of ['README.md', 'docs/guide/scenarios.md']) expect(readFileSync(join(root, f), 'utf8')).toContain('mlx5sim run examples/my_scenario.ts');
    for (const f of ['README.md', 'docs/guide/experiments.md']) expect(readFileSync(join(root, f), 'utf8')).toContain('npx tsx examples/my_experiment.ts');
  });
});
