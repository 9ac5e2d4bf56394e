/**
 * Issue 21 "Outputs a user can trust" and issue 20's times with units: --stats json is JSON
 * alone on stdout, --stats text shows times with units, `mlx5sim config` lists every field,
 * `run --set` applies fields, times parse with units, a sweep's folder is never overwritten
 * without --force (and an incomplete merge writes nothing), and points.csv sits beside
 * points.jsonl.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { parseTime, UsageError } from '../../src/cli/args.ts';
import { runCli } from '../../src/cli/cli.ts';
import { statsText } from '../../src/cli/stats_text.ts';
import { DEFAULT_HCA_CONFIG } from '../../src/index.ts';
import { CONFIG_FIELDS } from '../../src/rtl/config_fields.ts';

const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-outputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI in this process: its exit code and what it printed on stdout and stderr. */
async function cli(...args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
  const error = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
  try {
    return { code: await runCli(args), out, err };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

describe('run', () => {
  it('--stats json prints the statistics alone on stdout, the pass line on stderr; --stats text shows times with units', async () => {
    const j = await cli('run', 'kernel-pipeline', '--no-vcd', '--stats', 'json');
    expect(j.code).toBe(0);
    expect(j.out).toHaveLength(1);
    const stats = JSON.parse(j.out[0]) as Record<string, Record<string, unknown>>;
    expect(Object.keys(stats).length).toBeGreaterThan(0);
    expect(j.err.join('\n')).toMatch(/^kernel-pipeline: pass \(/m);
    // raw picoseconds stay in the JSON
    const text = statsText({ 'tb.x': { wait_ps: 2_000_000, n: 3, latency_ps: { count: 2, mean: 361333.4, p99: 1_076_000 } } as never });
    expect(text).toEqual(['tb.x: wait=2us n=3 latency={n=2 mean=361.333ns p99<=1.076us}']);
  });

  it('--set fields reach the scenario over --config; a scenario file needs export default defineScenario(...)', async () => {
    const index = join(import.meta.dirname, '../../src/index.ts');
    const file = join(dir, 'echo_config.ts');
    writeFileSync(
      file,
      `import { Checks, defineScenario } from ${JSON.stringify(index)};\n` +
        `export default defineScenario({\n  name: 'echo-config', summary: 'checks the configuration it is given',\n` +
        `  async run({ config }) {\n    const c = new Checks();\n    c.equal(config, { mtu: 1024, mttCacheLines: 64, readWithInvalidate: true }, 'the configuration');\n` +
        `    return { checks: c.list, simTime: 0, stats: {} };\n  },\n});\n`,
    );
    writeFileSync(join(dir, 'cfg.json'), '{"mtu": 2048, "mttCacheLines": 64}');
    const r = await cli('run', file, '--no-vcd', '--config', join(dir, 'cfg.json'), '--set', 'mtu=1024', '--set', 'readWithInvalidate=true');
    expect(r.out.join('\n')).toMatch(/^echo-config: pass \(1 checks/m);
    expect(r.code).toBe(0);
  });

  it('times take units: ps, ns, us, ms, s; a bare number is picoseconds', () => {
    expect(parseTime('to', '2us')).toBe(2_000_000);
    expect(parseTime('to', '1.4ms')).toBe(1_400_000_000);
    expect(parseTime('to', '3 s')).toBe(3e12);
    expect(parseTime('to', '250ns')).toBe(250_000);
    expect(parseTime('to', '0.001ns')).toBe(1);
    expect(parseTime('to', '7ps')).toBe(7);
    expect(parseTime('to', '12345')).toBe(12345);
    expect(() => parseTime('to', '2 minutes')).toThrow(UsageError);
  });
});

describe('mlx5sim config', () => {
  it('lists every configuration field with its default, unit and meaning', async () => {
    expect(Object.keys(CONFIG_FIELDS).sort()).toEqual(Object.keys(DEFAULT_HCA_CONFIG).sort());
    const r = await cli('config');
    expect(r.code).toBe(0);
    for (const [k, v] of Object.entries(DEFAULT_HCA_CONFIG)) {
      const row = r.out.find((l) => l.startsWith(`${k} `));
      expect(row, k).toBeDefined();
      expect(row).toContain(JSON.stringify(v) === String(v) ? String(v) : JSON.stringify(v));
      expect(row).toContain(CONFIG_FIELDS[k as keyof typeof CONFIG_FIELDS].meaning);
    }
    expect(r.out.find((l) => l.startsWith('fwCreateMkeyPs '))).toMatch(/230000000 \(230 us\)\s+ps\s+firmware latency of CREATE_MKEY/);
  });
});

describe('sweep folders', () => {
  it('a sweep writes points.csv; a second sweep into its folder is refused without --force; an incomplete merge leaves the folder as it was', async () => {
    const out = join(dir, 'ind');
    const first = await cli('sweep', 'indirection', '--quick', '--jobs', '1', '--out', out);
    expect(first.code).toBe(0);
    const csv = readFileSync(join(out, 'points.csv'), 'utf8').trim().split('\n');
    expect(csv).toHaveLength(6);
    expect(csv[0]).toMatch(/^index,seed,depth,.*,wallSeconds$/);
    expect(csv[1]).toMatch(/^0,1,0,/);
    const points = readFileSync(join(out, 'points.jsonl'), 'utf8');

    const again = await cli('sweep', 'indirection', '--quick', '--jobs', '1', '--out', out);
    expect(again.code).toBe(2);
    expect(again.err).toEqual([expect.stringMatching(/^mlx5sim: --out: .*ind already holds a sweep's points/)]);
    expect(readFileSync(join(out, 'points.jsonl'), 'utf8')).toBe(points);

    // a shard of 2 merged alone: points missing, nothing written (with --force too)
    const shard = join(dir, 'shard0');
    expect((await cli('sweep', 'indirection', '--quick', '--jobs', '1', '--shard', '0/2', '--out', shard)).code).toBe(0);
    const merged = await cli('merge', shard, '--out', out, '--force');
    expect(merged.code).toBe(1);
    expect(merged.out.join('\n')).toMatch(/FAIL 2 of 5 points missing \(grid indices 1, 3\).*nothing written to/);
    expect(readFileSync(join(out, 'points.jsonl'), 'utf8')).toBe(points);

    // --force overwrites; plot regenerates the CSV
    expect((await cli('sweep', 'indirection', '--quick', '--jobs', '1', '--out', out, '--force')).code).toBe(0);
    rmSync(join(out, 'points.csv'));
    expect((await cli('plot', out)).code).toBe(0);
    expect(existsSync(join(out, 'points.csv'))).toBe(true);
  });
});
