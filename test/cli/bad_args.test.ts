/**
 * Bad command lines and configuration files (issue 12): every one exits 2 with one line that
 * names the argument or field, before any run; nothing is written.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/cli.ts';

const root = join(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-badargs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
writeFileSync(join(dir, 'negative.json'), '{"coreClockMHz": -5}');
writeFileSync(join(dir, 'syntax.json'), '{"mtu":\n 4096,,}');
writeFileSync(join(dir, 'array.json'), '[1, 2]');
writeFileSync(join(dir, 'unknown.json'), '{"noSuchField": 1}');
// a sweep's folder whose points file is empty
mkdirSync(join(dir, 'nopoints'));
writeFileSync(join(dir, 'nopoints', 'meta.json'), JSON.stringify({ experiment: 'mtt-cliff' }));
writeFileSync(join(dir, 'nopoints', 'points.jsonl'), '');
// issue 17 and 21: a file where a folder is needed; a folder holding a sweep's points; a shard
// folder with nothing missing (gridPoints 0) to merge into it; a .js file that is no scenario
writeFileSync(join(dir, 'afile'), 'x');
mkdirSync(join(dir, 'done'));
writeFileSync(join(dir, 'done', 'points.jsonl'), '{}\n');
mkdirSync(join(dir, 'shard'));
writeFileSync(join(dir, 'shard', 'meta.json'), JSON.stringify({ experiment: 'mtt-cliff', seed: 1, gridPoints: 0 }));
writeFileSync(join(dir, 'shard', 'points.jsonl'), '');
writeFileSync(join(dir, 'not_a_scenario.js'), `require('node:fs').writeFileSync(${JSON.stringify(join(dir, 'ran'))}, 'it ran');\nexport default {};\n`);

const CASES: [string[], RegExp][] = [
  [['run', 'frwr', '--seed', ''], /--seed must be a decimal integer >= 0, got ''/],
  [['run', 'frwr', '--seed', '1e3'], /--seed must be a decimal integer >= 0, got '1e3'/],
  [['run', 'frwr', '--seed', '0x10'], /--seed must be a decimal integer >= 0, got '0x10'/],
  [['run', 'frwr', '--seed', '-1'], /--seed must be a decimal integer/],
  [['demo', '--seed', 'x'], /--seed must be a decimal integer >= 0, got 'x'/],
  [['run', join(dir, 'missing.ts')], /missing\.ts: no such file/],
  [['run', 'no-such-scenario'], /no scenario named 'no-such-scenario'/],
  [['run', 'frwr', '--vcd', dir], /--vcd .*: is a directory/],
  [['run', 'frwr', '--vcd', '/proc/mlx5sim/x.vcd'], /--vcd \/proc\/mlx5sim\/x\.vcd: cannot write/],
  [['run', 'frwr', '--scope', 'tb.nothing*'], /--scope tb\.nothing\*: matches no module/],
  [['run', 'frwr', '--pcap', dir], /--pcap .*: is a directory/],
  [['run', 'frwr', '--txlog', '/proc/mlx5sim/x.txlog.jsonl'], /--txlog \/proc\/mlx5sim\/x\.txlog\.jsonl: cannot write/],
  [['log', join(dir, 'absent.jsonl'), '--wr', '1'], /absent\.jsonl: cannot read \(ENOENT\)/],
  [['log', join(dir, 'array.json')], /required option '--wr <id>' not specified/],
  [['log', join(dir, 'array.json'), '--wr', '1', '--qp', 'zz'], /--qp must be a QP number/],
  [['log', join(dir, 'syntax.json'), '--wr', '1'], /syntax\.json: line 1 is not JSON/],
  [['run', 'frwr', '--config', join(dir, 'absent.json')], /--config .*absent\.json: cannot read the file \(ENOENT\)/],
  [['run', 'frwr', '--config', join(dir, 'negative.json')], /--config .*negative\.json: .*coreClockMHz/],
  [['run', 'frwr', '--config', join(dir, 'syntax.json')], /syntax\.json:2:\d+: invalid JSON/],
  [['run', 'frwr', '--config', join(dir, 'array.json')], /array\.json: the configuration must be a JSON object/],
  [['run', 'frwr', '--config', join(dir, 'unknown.json')], /--config .*unknown\.json: .*noSuchField/],
  [['run', 'kernel-pipeline', '--config', join(dir, 'negative.json')], /--config: scenario 'kernel-pipeline' builds no adapter, so there is nothing to configure/],
  [['run', 'frwr', '--stats', 'xml'], /--stats must be 'text' or 'json'/],
  [['run', 'frwr', '--from', '5', '--to', '1'], /--to 1 ps is before --from 5 ps/],
  [['run', 'frwr', '--from', '2us', '--to', '1.5us'], /--to 1\.5 us is before --from 2 us/],
  [['run', 'frwr', '--from', '2xs'], /--from 2xs: must be a time: a number of ps, or with a unit ps, ns, us, ms or s/],
  [['run', 'frwr', '--to', 'us'], /--to us: must be a time/],
  [['run', 'frwr', '--to', '1.5'], /--to 1\.5: a bare number is picoseconds and must be whole/],
  [['run', 'frwr', '--to', '1.0005ns'], /--to 1\.0005ns: not a whole number of picoseconds/],
  [['run', 'frwr', '--to', '9000000s'], /--to 9000000s: too large/],
  [['run', 'frwr', '--vcd', join(dir, 'afile', 'x.vcd')], /--vcd .*afile\/x\.vcd: .*afile is a file, not a folder/],
  [['run', 'frwr', '--vcd', '/proc/x.vcd'], /--vcd \/proc\/x\.vcd: cannot write in \/proc \(/],
  [['run', 'frwr', '--set', 'bogus=1'], /--set bogus: not a configuration field \(mlx5sim config lists them\)/],
  [['run', 'frwr', '--set', 'constructor=1'], /--set constructor: not a configuration field/],
  [['run', 'frwr', '--set', 'mttCacheLines=64,128'], /--set mttCacheLines=64,128: a run takes one value per field/],
  [['run', 'frwr', '--set', 'mttCacheLines=0'], /--set mttCacheLines=0: config\.mttCacheLines/],
  [['run', 'frwr', '--set', 'mttCacheWays=3'], /--set mttCacheWays=3: config\.mttCacheWays: must be a positive integer dividing mttCacheLines, got 3/],
  [['run', 'frwr', '--set', 'mttCacheWays=16', '--set', 'mttCacheLines=8'], /--set: config\.mttCacheWays: must be a positive integer dividing mttCacheLines, got 16/],
  [['run', 'frwr', '--set', 'mtu=1024', '--set', 'mtu=2048'], /--set mtu: given twice/],
  [['run', 'kernel-pipeline', '--set', 'mtu=1024'], /--set: scenario 'kernel-pipeline' builds no adapter/],
  [['run', join(dir, 'not_a_scenario.js')], /not_a_scenario\.js: not a scenario file \(a scenario file says 'export default defineScenario\(\{ name, summary, run \}\)'; nothing of it was run\)/],
  [['frob'], /unknown command 'frob'/],
  // sweeps, plots and merges (issue 10): refused before any point runs
  [['sweep'], /sweep needs an experiment name/],
  [['sweep', 'no-such'], /no experiment named 'no-such' \(known: mtt-cliff, /],
  [['sweep', 'mtt-cliff', '--set', 'mttCacheLines'], /--set mttCacheLines: must be field=v1,v2/],
  [['sweep', 'mtt-cliff', '--set', 'bogus=1'], /--set bogus: not a parameter of mtt-cliff/],
  [['sweep', 'mtt-cliff', '--set', 'mttCacheLines=0'], /--set mttCacheLines=0: config\.mttCacheLines/],
  [['sweep', 'mtt-cliff', '--set', 'pages=8k'], /--set pages: must be 4k or 2m/],
  [['sweep', 'mtt-cliff', '--pages', '1g'], /--pages 1g: page sizes are 4k and 2m/],
  [['sweep', 'indirection', '--pages', '4k'], /--pages: indirection has no page-size axis/],
  [['sweep', 'mtt-cliff', '--jobs', '0'], /--jobs must be a decimal integer >= 1, got '0'/],
  [['sweep', 'mtt-cliff', '--shard', '2/2'], /--shard 2\/2: must be i\/n with 0 <= i < n/],
  [['sweep', 'mtt-cliff', '--out', '/proc/mlx5sim/x'], /--out \/proc\/mlx5sim\/x: cannot write in \/proc\/mlx5sim\/x \(/],
  [['sweep', 'mtt-cliff', '--out', join(dir, 'afile')], /--out .*afile: .*afile is a file, not a folder/],
  [['sweep', 'mtt-cliff', '--out', join(dir, 'done')], /--out: .*done already holds a sweep's points \(points\.jsonl\); give --force to overwrite them, or another --out/],
  [['sweep', 'merge', join(dir, 'shard'), '--out', join(dir, 'done')], /--out: .*done already holds a sweep's points/],
  [['merge', join(dir, 'shard'), '--out', join(dir, 'afile')], /--out .*afile: .*afile is a file, not a folder/],
  [['sweep', 'mtt-cliff', '--set', 'constructor=1'], /--set constructor: not a parameter of mtt-cliff/],
  [['sweep', 'mtt-cliff', '--set', 'toString=1'], /--set toString: not a parameter of mtt-cliff/],
  [['sweep', 'mtt-cliff', '--set', 'mttCacheLines=64', '--set', 'mttCacheLines=128'], /--set mttCacheLines: given twice \(give every value in one --set mttCacheLines=v1,v2\)/],
  [['plot', dir], /: not a sweep's folder \(no meta\.json\)/],
  [['plot', join(dir, 'nopoints')], /nopoints: points\.jsonl holds no point: nothing to plot/],
  [['sweep', 'merge', dir], /: not a sweep's folder \(no meta\.json\)/],
  [['merge'], /missing required argument 'dirs'/],
  [[], /no command given \(list, run, demo, sweep, plot, config\)/],
];

describe('the CLI refuses bad arguments with exit code 2 and a line naming them', () => {
  it('a reader that closes the pipe early ends the command as SIGPIPE would (exit 141, no EPIPE stack), and --version prints the version', () => {
    const cli = (...args: string[]) => [process.execPath, join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'src/cli/main.ts'), ...args].map((a) => `'${a}'`).join(' ');
    // the reader exits before the CLI writes (it starts in a second); PIPESTATUS[0] is the CLI's code
    const r = spawnSync('bash', ['-c', `${cli('list')} | true; echo "rc=\${PIPESTATUS[0]}"`], { encoding: 'utf8' });
    expect(r.stdout.trim()).toBe('rc=141');
    expect(r.stderr).not.toMatch(/EPIPE/);
    const v = spawnSync('bash', ['-c', cli('--version')], { encoding: 'utf8' });
    expect(v.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('the executable prints one line and exits 2 on a bad argument (the cases below run in this process)', () => {
    const r = spawnSync(process.execPath, [join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'src/cli/main.ts'), 'run', 'frwr', '--seed', 'x'], { cwd: dir, encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toBe("mlx5sim: --seed must be a decimal integer >= 0, got 'x' (usage: mlx5sim --help)\n");
  });

  // runCli is what the executable runs; in this process a case costs milliseconds, not a start of tsx
  it.each(CASES)('mlx5sim %j', async (args, message) => {
    const cwd = mkdtempSync(join(dir, 'run-'));
    const here = process.cwd();
    const out: string[] = [];
    const err: string[] = [];
    const log = vi.spyOn(console, 'log').mockImplementation((...a: unknown[]) => void out.push(a.join(' ')));
    const error = vi.spyOn(console, 'error').mockImplementation((...a: unknown[]) => void err.push(a.join(' ')));
    let code: number;
    try {
      process.chdir(cwd);
      code = await runCli(args);
    } finally {
      process.chdir(here);
      log.mockRestore();
      error.mockRestore();
    }
    expect(code).toBe(2);
    // one line, naming the argument (the usage is one --help away)
    const lines = err.join('\n').split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^mlx5sim: /);
    expect(lines[0]).toMatch(message);
    expect(out).toEqual([]);
    expect(existsSync(join(cwd, 'waves'))).toBe(false); // refused before the run wrote anything
    expect(existsSync(join(cwd, 'results'))).toBe(false);
    expect(existsSync(join(dir, 'ran'))).toBe(false); // no refused file's code ran
  });
});
