/**
 * The `mlx5sim` command (src/cli/main.ts runs it): list the scenarios and experiments, run one
 * scenario (built-in or a .ts file) with waves and stats, run them all (`demo`) with a summary
 * table, sweep an experiment's grid (`sweep`, `sweep merge`, `plot`). Exit 0 on success, 1 when
 * a scenario's (or a sweep's) own checks fail, 2 on bad usage.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { Testbed } from '../driver/testbed.ts';
import { globToRegExp } from '../sim/trace/glob.ts';
import { pathToFileURL } from 'node:url';
import { parseArgs, UsageError, type RunArgs } from './args.ts';
import { printConfig, runConfig } from './config_file.ts';
import { scenarios } from '../../scenarios/index.ts';
import type { Scenario, ScenarioResult } from '../scenario.ts';
import { formatPs } from '../sim/time.ts';
import { gtkwPath, phaseViews, type TraceOptions } from '../sim/index.ts';
import type { TestbedTrace } from '../driver/testbed.ts';
import { checkWireTrace, wireTrace } from './wire_trace.ts';
import { logCommand } from './log.ts';
import { traceJsonPath } from '../driver/trace/txlog.ts';
import { convertToFst, findVcd2fst } from '../sim/trace/fst.ts';
import { experiments } from '../../experiments/index.ts';
import { mergeCommand, plotCommand, sweepCommand } from './sweep/sweep.ts';
import { ensureWritable } from './writable.ts';
import { statsText } from './stats_text.ts';

const progress = (msg: string): void => {
  if (process.stderr.isTTY) process.stderr.write(msg + '\n');
};

/**
 * Lets Node import a TypeScript scenario file. The installed command is compiled JavaScript and
 * starts without a transpiler; only a `.ts` target loads tsx (a development dependency), and
 * only when this CLI is not itself running from TypeScript sources under a loader already.
 */
async function enableTypeScript(target: string): Promise<void> {
  if (import.meta.url.endsWith('.ts')) return;
  let api: typeof import('tsx/esm/api');
  try {
    api = await import('tsx/esm/api');
  } catch {
    throw new UsageError(`${target} is TypeScript: running it needs tsx (npm install --save-dev tsx), or compile it to .js first`);
  }
  api.register();
}

async function loadScenario(target: string): Promise<Scenario> {
  const builtin = scenarios.find((s) => s.name === target);
  if (builtin) return builtin;
  if (!/\.[cm]?[tj]s$/.test(target)) {
    throw new UsageError(`no scenario named '${target}' (see 'mlx5sim list'), and it is not a .ts or .js file`);
  }
  if (!existsSync(resolve(target))) throw new UsageError(`${target}: no such file (and no built-in scenario of that name; see 'mlx5sim list')`);
  if (/\.[cm]?ts$/.test(target)) await enableTypeScript(target);
  // importing a file runs it: what is not a scenario is refused from its text, before that
  if (!SCENARIO_EXPORT.test(stripComments(readFileSync(resolve(target), 'utf8')))) {
    throw new UsageError(`${target}: not a scenario file (a scenario file says 'export default defineScenario({ name, summary, run })'; nothing of it was run)`);
  }
  const mod = (await import(pathToFileURL(resolve(target)).href)) as { default?: Partial<Scenario> };
  const s = mod.default;
  if (!s || typeof s.run !== 'function' || typeof s.name !== 'string') {
    throw new UsageError(`${target}: the default export must be a Scenario { name, summary, run(opts) }`);
  }
  return s as Scenario;
}

/** What `mlx5sim run file` looks for in a scenario file's source (README "Scenario files"). */
const SCENARIO_EXPORT = /^[ \t]*export\s+default\s+defineScenario\s*\(/m;

/** The source without its comments (roughly: enough that a commented-out export does not count). */
function stripComments(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
}

/**
 * Where a run's waves go: its own folder, `waves/<name>/<name>.vcd` with the `.gtkw` beside it,
 * and the translate filters in `waves/filters/`, shared by every run of the folder.
 */
function runWaves(name: string, root = 'waves'): TraceOptions {
  return { vcd: join(root, name, `${name}.vcd`), filters: join(root, 'filters') };
}

function traceOf(a: RunArgs, name: string): TestbedTrace | undefined {
  const wire = wireTrace(a, name);
  if (a.vcd === null) return wire.pcap !== undefined || wire.txlog !== undefined ? wire : undefined;
  const t: TestbedTrace = { ...wire, ...(a.vcd === undefined ? runWaves(name) : { vcd: a.vcd }), gtkw: a.gtkw, strings: a.strings };
  if (a.scopes.length) t.scopes = a.scopes;
  if (a.depth !== undefined) t.depth = a.depth;
  if (a.from !== undefined) t.start = a.from;
  if (a.to !== undefined) t.stop = a.to;
  return t;
}

/**
 * What the run would only find out at its end: a --vcd that names a directory or a place it
 * cannot write, a --scope that names no module of the testbed (it would write an empty VCD).
 */
function checkTraceArgs(a: RunArgs, t: TestbedTrace): void {
  checkWireTrace(t);
  if (t.vcd === undefined) return;
  if (a.scopes.length > 0) {
    const tb = new Testbed({ hcas: 2 });
    const paths: string[] = [];
    for (const m of tb.sim.top.walk()) paths.push(m.path);
    for (const glob of a.scopes) {
      const re = globToRegExp(glob);
      if (!paths.some((p) => re.test(p))) throw new UsageError(`--scope ${glob}: matches no module (scopes look like tb.hca0.atu; 'tb.hca0.*' for an adapter)`);
    }
  }
  const vcd = resolve(t.vcd);
  if (existsSync(vcd) && statSync(vcd).isDirectory()) throw new UsageError(`--vcd ${t.vcd}: is a directory (name the .vcd file to write)`);
  ensureWritable(`--vcd ${t.vcd}`, dirname(vcd));
}

function printChecks(name: string, r: ScenarioResult, say: (line: string) => void = console.log): boolean {
  const failed = r.checks.filter((c) => !c.ok);
  for (const c of failed) say(`FAIL ${name}: ${c.what}${c.detail ? `: ${c.detail}` : ''}`);
  return failed.length === 0 && r.checks.length > 0;
}

async function main(argv: string[]): Promise<number> {
  const a = parseArgs(argv);
  if (a.cmd === 'exit') return a.code;
  if (a.cmd === 'list') {
    const w = Math.max(...scenarios.map((s) => s.name.length), ...experiments.map((e) => e.name.length));
    for (const s of scenarios) console.log(`${s.name.padEnd(w)}  ${s.summary}`);
    console.log(`\nexperiments (mlx5sim sweep <name> [--quick]):`);
    for (const e of experiments) console.log(`${e.name.padEnd(w)}  ${e.summary}`);
    return 0;
  }
  if (a.cmd === 'config') {
    printConfig();
    return 0;
  }
  if (a.cmd === 'sweep') return sweepCommand(a);
  if (a.cmd === 'merge') return mergeCommand(a);
  if (a.cmd === 'plot') return plotCommand(a);
  if (a.cmd === 'log') return logCommand(a);
  if (a.cmd === 'demo') {
    Testbed.checkDmaByDefault = true; // every scenario under the DMA checker
    const rows: string[][] = [['scenario', 'result', 'simulated time', 'waves']];
    let allOk = true;
    for (const s of scenarios) {
      progress(`running ${s.name} ...`);
      const trace = { ...runWaves(s.name), ...wireTrace({ pcap: true, txlog: true }, s.name) };
      let ok = false;
      let time = '-';
      try {
        const r = await s.run({ seed: a.seed, trace });
        ok = printChecks(s.name, r);
        time = formatPs(r.simTime);
      } catch (e) {
        console.log(`FAIL ${s.name}: ${(e as Error).stack ?? String(e)}`);
      }
      allOk &&= ok;
      rows.push([s.name, ok ? 'pass' : 'FAIL', time, `${dirname(trace.vcd)}/`]);
    }
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    for (const r of rows) console.log(r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd());
    console.log(`\nEach folder holds <scenario>.vcd, <scenario>.gtkw and a <scenario>.<phase>.gtkw per phase; the enum filters are in waves/filters/.`);
    console.log(`A verbs scenario's folder also holds <scenario>.pcap (wireshark) and <scenario>.txlog.jsonl / .trace.json (mlx5sim log, ui.perfetto.dev).`);
    console.log(`Open one with: gtkwave waves/<scenario>/<scenario>.gtkw`);
    return allOk ? 0 : 1;
  }
  // --fst is checked before the run: a long run should not end in 'no converter'
  const vcd2fst = a.fst ? findVcd2fst() : null;
  if (a.fst && vcd2fst === null) {
    throw new UsageError("--fst needs GTKWave's vcd2fst on PATH, and there is none (Debian/Ubuntu: apt-get install gtkwave); without --fst the run writes its VCD");
  }
  const s = await loadScenario(a.target);
  if ((a.config || a.sets.length) && s.configurable === false) {
    throw new UsageError(`${a.config ? '--config' : '--set'}: scenario '${s.name}' builds no adapter, so there is nothing to configure`);
  }
  const config = runConfig(a);
  const trace = traceOf(a, s.name);
  if (trace) checkTraceArgs(a, trace);
  if (a.checkDma) Testbed.checkDmaByDefault = true; // the scenario's testbeds check every DMA
  progress(`running ${s.name} ...`);
  const r = await s.run({ seed: a.seed, ...(trace ? { trace } : {}), ...(config ? { config } : {}) });
  // with --stats json, stdout is the JSON alone (a pipe into jq); what a person reads goes to stderr
  const say = a.stats === 'json' ? (line: string): void => console.error(line) : (line: string): void => console.log(line);
  const ok = printChecks(s.name, r, say);
  say(`${s.name}: ${ok ? 'pass' : 'FAIL'} (${r.checks.length} checks, simulated ${formatPs(r.simTime)})${trace?.vcd !== undefined ? `, waves in ${trace.vcd}${trace.gtkw === false ? '' : ` (open: gtkwave ${gtkwPath(trace.vcd)})`}` : ''}`);
  const phases = trace?.vcd !== undefined && trace.gtkw !== false ? phaseViews(trace.vcd) : [];
  if (phases.length > 0) say(`phase views: ${phases.map((f) => relative(process.cwd(), f)).join(', ')}`);
  if (trace?.pcap !== undefined) say(`packets: ${trace.pcap} (open: wireshark ${trace.pcap})`);
  if (trace?.txlog !== undefined) say(`transaction log: ${trace.txlog} (mlx5sim log ${trace.txlog} --wr <id>), timeline: ${traceJsonPath(trace.txlog)} (ui.perfetto.dev)`);
  if (trace?.vcd !== undefined && vcd2fst) {
    progress(`converting ${trace.vcd} to FST ...`);
    const f = convertToFst(trace.vcd, vcd2fst);
    say(`FST: ${f.fst} (${f.fstBytes} bytes; the VCD has ${f.vcdBytes})${trace.gtkw === false ? '' : `, named by ${gtkwPath(trace.vcd)}`}`);
  }
  if (a.stats === 'json') console.log(JSON.stringify(r.stats));
  else if (a.stats === 'text') for (const line of statsText(r.stats)) console.log(line);
  return ok ? 0 : 1;
}

/**
 * Runs the command line `argv` (without node and the script) and returns its exit code: 0, 1
 * when a scenario's or a sweep's own checks fail (or the run fails), 2 on bad usage, printed as
 * one line naming the argument.
 */
export async function runCli(argv: readonly string[]): Promise<number> {
  try {
    return await main([...argv]);
  } catch (e) {
    if (e instanceof UsageError) {
      // one line naming the argument; the usage is one --help away
      console.error(`mlx5sim: ${e.message} (usage: mlx5sim --help)`);
      return 2;
    }
    console.error(`mlx5sim: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}
