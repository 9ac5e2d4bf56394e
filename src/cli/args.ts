/**
 * Command-line parsing for `mlx5sim`: commander builds the subcommands and the generated
 * `--help`; every value is checked here, strictly, with errors that name the bad argument
 * (a `UsageError`: exit code 2 with one line naming the argument).
 */
import { Command, CommanderError, Option } from 'commander';
import { availableParallelism } from 'node:os';
import { packageVersion } from './package_info.ts';
import { formatPs } from '../sim/time.ts';

/** A usage error: exit code 2 with one line naming the argument. */
export class UsageError extends Error {}

export interface RunArgs {
  cmd: 'run';
  target: string;
  vcd: string | null | undefined; // undefined: default waves/<name>/<name>.vcd; null: --no-vcd
  gtkw: boolean;
  strings: boolean;
  /** Convert the VCD to FST after the run (GTKWave's vcd2fst) and point the .gtkw at it. */
  fst: boolean;
  scopes: string[];
  depth?: number;
  from?: number;
  to?: number;
  seed: number;
  config?: string;
  /** `--set field=value`: configuration fields, each once, applied over --config's. */
  sets: { field: string; values: string[] }[];
  stats: 'text' | 'json' | null;
  /** `--pcap [file]`, `--txlog [file]`: true for the default beside the waves (waves/<name>/). */
  pcap?: string | true;
  txlog?: string | true;
  /** `--check-dma`: the DMA-ownership checker on (a DMA to a frame nobody gave the device stops the run). */
  checkDma: boolean;
}

/** `mlx5sim sweep <experiment>`: the grid's overrides as given (checked against the experiment by the sweep). */
export interface SweepArgs {
  cmd: 'sweep';
  experiment: string;
  quick: boolean;
  /** `--set field=v1,v2`, in order: the field and its values as typed. */
  sets: { field: string; values: string[] }[];
  /** `--pages 4k,2m`: only the points with these page sizes (bytes). */
  pages?: number[];
  jobs: number;
  /** `--shard i/n`: the points whose grid index is i modulo n (0 <= i < n). */
  shard?: { i: number; n: number };
  out?: string;
  /** Overwrite an --out folder that already holds a sweep's points. */
  force: boolean;
  seed: number;
}

export interface MergeArgs {
  cmd: 'merge';
  dirs: string[];
  out?: string;
  /** Overwrite an --out folder that already holds a sweep's points. */
  force: boolean;
}

/** `mlx5sim log <file> --wr <id> [--qp <n>]`: one work request's life from a transaction log. */
export interface LogArgs {
  cmd: 'log';
  file: string;
  /** The WR id as logged (decimal). */
  wr: string;
  qp?: number;
}

export interface PlotArgs {
  cmd: 'plot';
  dir: string;
}

export type Args =
  | { cmd: 'list' }
  | { cmd: 'demo'; seed: number }
  | RunArgs
  | SweepArgs
  | MergeArgs
  | PlotArgs
  | LogArgs
  /** `mlx5sim config`: every configuration field with its default, unit and meaning. */
  | { cmd: 'config' }
  /** --help or --version: printed; exit with this code. */
  | { cmd: 'exit'; code: number };

function intArg(flag: string, v: string | undefined, min = 0): number {
  if (v === undefined) throw new UsageError(`${flag} needs a value`);
  // decimal digits only: '' (Number('') is 0), '1e3' and '0x10' are not what a user means
  const n = /^[0-9]+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${flag} must be a decimal integer >= ${min}, got '${v}'`);
  return n;
}

const SIZE_UNITS: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };

/**
 * A size as a user types it: `4096`, `4k`, `2m`, `2MiB`, `1G` (binary units: k = 1024). Null
 * when `v` is not a size.
 */
export function parseSize(v: string): number | null {
  const m = /^([0-9]+)(?:([kmgt])(?:i?b)?)?$/i.exec(v.trim());
  if (!m) return null;
  const n = Number(m[1]) * SIZE_UNITS[(m[2] ?? '').toLowerCase()];
  return Number.isSafeInteger(n) ? n : null;
}

const TIME_UNITS: Record<string, number> = { ps: 1, ns: 1e3, us: 1e6, ms: 1e9, s: 1e12 };

/**
 * A time as a user types it: `2us`, `1.4ms`, `500 ns`, `3s` (ps, ns, us, ms, s); a bare number
 * is picoseconds. Whole picoseconds below 2^53, else a UsageError naming `flag`.
 */
export function parseTime(flag: string, v: string): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)$/i.exec(v.trim());
  const unit = m ? m[2].toLowerCase() : '';
  if (!m || !(unit in TIME_UNITS || unit === '')) {
    throw new UsageError(`--${flag} ${v}: must be a time: a number of ps, or with a unit ps, ns, us, ms or s (e.g. 2us, 1.4ms)`);
  }
  if (unit === '' && !/^[0-9]+$/.test(m[1])) throw new UsageError(`--${flag} ${v}: a bare number is picoseconds and must be whole (or give a unit: ${v}ns)`);
  // decimal scaling: 1.4ms is 1.4 * 1e9 exactly only if done on the digits, not on the float
  const [int, frac = ''] = m[1].split('.');
  const scale = TIME_UNITS[unit === '' ? 'ps' : unit];
  const digits = Math.log10(scale);
  if (frac.length > digits && /[1-9]/.test(frac.slice(digits))) throw new UsageError(`--${flag} ${v}: not a whole number of picoseconds`);
  const ps = Number(int) * scale + Number((frac + '0'.repeat(digits)).slice(0, digits) || '0');
  if (!Number.isSafeInteger(ps)) throw new UsageError(`--${flag} ${v}: too large (at most 2^53 - 1 ps, about 2.5 hours)`);
  return ps;
}

/** `--set field=v1,v2`: the field and its values, each non-empty; a field given twice is refused. */
function setArg(v: string, prev: SweepArgs['sets'] = []): SweepArgs['sets'] {
  const m = /^([A-Za-z][A-Za-z0-9_]*)=(.+)$/.exec(v);
  if (!m) throw new UsageError(`--set ${v}: must be field=v1,v2,... (e.g. --set mttCacheLines=64,128)`);
  const values = m[2].split(',');
  if (values.some((x) => x.trim() === '')) throw new UsageError(`--set ${v}: an empty value in the list`);
  // the last one would win silently: say so instead
  if (prev.some((s) => s.field === m[1])) throw new UsageError(`--set ${m[1]}: given twice (give every value in one --set ${m[1]}=v1,v2)`);
  return [...prev, { field: m[1], values: values.map((x) => x.trim()) }];
}

/** `run --set field=value`: one value (a run is one point). */
function runSetArg(v: string, prev: RunArgs['sets'] = []): RunArgs['sets'] {
  const out = setArg(v, prev);
  const last = out[out.length - 1];
  if (last.values.length !== 1) throw new UsageError(`--set ${v}: a run takes one value per field (a grid of values is for mlx5sim sweep)`);
  return out;
}

function pagesArg(v: string): number[] {
  const out: number[] = [];
  for (const p of v.split(',')) {
    const n = parseSize(p);
    if (n === null || (n !== 4096 && n !== 2 ** 21)) throw new UsageError(`--pages ${v}: page sizes are 4k and 2m, got '${p}'`);
    if (!out.includes(n)) out.push(n);
  }
  return out;
}

function shardArg(v: string): { i: number; n: number } {
  const m = /^([0-9]+)\/([0-9]+)$/.exec(v);
  const i = m ? Number(m[1]) : NaN;
  const n = m ? Number(m[2]) : NaN;
  if (!m || !(n >= 1) || !(i < n)) throw new UsageError(`--shard ${v}: must be i/n with 0 <= i < n (e.g. --shard 0/4 .. 3/4)`);
  return { i, n };
}

/** Commander's own messages ("error: unknown option '--x'") as one of ours. */
function fromCommander(e: CommanderError): UsageError {
  return new UsageError(e.message.replace(/^error: /, '').replace(/\.$/, ''));
}

/**
 * Builds the command tree. Actions only record what was asked (`done`); the values are
 * checked by the option parsers as commander meets them.
 */
function program(done: (a: Args) => void): Command {
  const p = new Command('mlx5sim')
    .description('A cycle-level simulator of the mlx5 (ConnectX) memory-translation pipeline, with VCD waveforms for GTKWave')
    .usage('<command> [options]')
    .addHelpText('after', '\nExit codes: 0 success, 1 a scenario\'s (or a sweep\'s) own checks failed, 2 bad usage, 141 the reader closed the pipe.')
    .version(packageVersion(), '-V, --version', 'the package version')
    .exitOverride()
    .configureOutput({ writeErr: () => {}, outputError: () => {} })
    .showSuggestionAfterError(false);
  const seedOpt = (): Option => new Option('--seed <n>', 'the seed every random choice derives from (default 1)').argParser((v) => intArg('--seed', v));

  p.command('list')
    .description('the built-in scenarios and experiments, one line each')
    .action(() => done({ cmd: 'list' }));

  p.command('run')
    .description("run one scenario (built-in, or a .ts / .js file that says 'export default defineScenario({ name, summary, run })')")
    .argument('[scenario]', 'a name from `mlx5sim list`, or a .ts / .js file')
    .option('--vcd <file>', 'where to write the VCD (default waves/<name>/<name>.vcd)')
    .option('--no-vcd', 'no waves at all')
    .option('--no-gtkw', 'no GTKWave save file beside the VCD')
    .option('--vcd-strings', 'enumerations as $var string (not readable by every tool)')
    .option('--fst', "also convert the VCD to FST (GTKWave's vcd2fst) and point the .gtkw at it")
    .addOption(new Option('--scope <glob>', 'trace only the matching scopes (repeatable), e.g. tb.hca0.atu*').argParser((v: string, prev: string[] | undefined) => [...(prev ?? []), v]))
    .addOption(new Option('--depth <n>', 'trace scopes down to this depth').argParser((v) => intArg('--depth', v, 1)))
    .addOption(new Option('--from <time>', 'trace from this time: 2us, 1.4ms (ps, ns, us, ms, s; a bare number is ps)').argParser((v) => parseTime('from', v)))
    .addOption(new Option('--to <time>', 'trace until this time (units as --from)').argParser((v) => parseTime('to', v)))
    .addOption(seedOpt())
    .option('--config <file>', 'a JSON object of configuration fields (mlx5sim config lists them)')
    .addOption(new Option('--set <field=value>', 'a configuration field (mlx5sim config lists them), over --config\'s (repeatable)').argParser(runSetArg))
    .option('--pcap [file]', 'write the packets on the wire as RoCEv2 for Wireshark (default waves/<name>/<name>.pcap)')
    .option('--txlog [file]', 'write the life of every work request (default waves/<name>/<name>.txlog.jsonl, and .trace.json for Perfetto)')
    .option('--check-dma', 'check every DMA against who owns its frames (pinned, ODP-mapped, a queue, ICM); a violation stops the run')
    .addOption(new Option('--stats <how>', 'print the statistics').argParser((v) => {
      if (v !== 'text' && v !== 'json') throw new UsageError(`--stats must be 'text' or 'json', got '${v}'`);
      return v;
    }))
    .action((target: string | undefined, o: Record<string, unknown>) => {
      if (!target) throw new UsageError('run needs a scenario name or a .ts file');
      const a: RunArgs = {
        cmd: 'run', target, vcd: o.vcd === false ? null : (o.vcd as string | undefined), gtkw: o.gtkw !== false,
        strings: o.vcdStrings === true, fst: o.fst === true, scopes: (o.scope as string[] | undefined) ?? [],
        seed: (o.seed as number | undefined) ?? 1, stats: (o.stats as 'text' | 'json' | undefined) ?? null,
        sets: (o.set as RunArgs['sets'] | undefined) ?? [],
        checkDma: o.checkDma === true,
      };
      if (o.depth !== undefined) a.depth = o.depth as number;
      if (o.from !== undefined) a.from = o.from as number;
      if (o.to !== undefined) a.to = o.to as number;
      if (o.config !== undefined) a.config = o.config as string;
      if (o.pcap !== undefined) a.pcap = o.pcap as string | true;
      if (o.txlog !== undefined) a.txlog = o.txlog as string | true;
      if (a.from !== undefined && a.to !== undefined && a.to < a.from) throw new UsageError(`--to ${formatPs(a.to)} is before --from ${formatPs(a.from)}`);
      if (a.fst && a.vcd === null) throw new UsageError('--fst converts the run\'s VCD: it cannot go with --no-vcd');
      done(a);
    });

  p.command('demo')
    .description('run every scenario, the DMA checker on: waves into waves/, a summary table')
    .addOption(seedOpt())
    .action((o: { seed?: number }) => done({ cmd: 'demo', seed: o.seed ?? 1 }));

  const merge = (dirs: string[], o: { out?: string; force?: boolean }): void => {
    if (dirs.length === 0) throw new UsageError('merge needs the output folders of the shards');
    done({ cmd: 'merge', dirs, ...(o.out !== undefined ? { out: o.out } : {}), force: o.force === true });
  };
  const sweep = p.command('sweep')
    .description('run an experiment\'s grid of points on every core: one JSON line per point, meta.json and an SVG plot')
    .argument('[experiment]', 'a name from `mlx5sim list` (experiments)')
    .option('--quick', 'the small grid (what the tests run)')
    .addOption(new Option('--set <field=v1,v2>', 'an axis of the grid: an experiment parameter or a configuration field (repeatable)').argParser(setArg))
    .addOption(new Option('--pages <sizes>', 'only these page sizes: 4k, 2m').argParser(pagesArg))
    .addOption(new Option('--jobs <n>', 'worker threads (default: the cores)').argParser((v) => intArg('--jobs', v, 1)))
    .addOption(new Option('--shard <i/n>', 'run only the points whose index is i modulo n').argParser(shardArg))
    .option('--out <dir>', 'where the points, meta.json and the plot go (default results/<experiment>)')
    .option('--force', 'overwrite an --out folder that holds the points of an earlier sweep')
    .addOption(seedOpt())
    .action((experiment: string | undefined, o: Record<string, unknown>) => {
      if (!experiment) throw new UsageError('sweep needs an experiment name (see mlx5sim list)');
      const a: SweepArgs = {
        cmd: 'sweep', experiment, quick: o.quick === true, sets: (o.set as SweepArgs['sets'] | undefined) ?? [],
        jobs: (o.jobs as number | undefined) ?? Math.max(1, availableParallelism()), seed: (o.seed as number | undefined) ?? 1, force: false,
      };
      if (o.pages !== undefined) a.pages = o.pages as number[];
      if (o.shard !== undefined) a.shard = o.shard as SweepArgs['shard'];
      if (o.out !== undefined) a.out = o.out as string;
      a.force = o.force === true;
      done(a);
    });
  sweep.command('merge')
    .description('join the outputs of shards (--shard i/n) into one sweep')
    .argument('<dirs...>', 'the shards\' output folders')
    .option('--out <dir>', 'where the joined sweep goes (default results/<experiment>)')
    .option('--force', 'overwrite an --out folder that holds the points of an earlier sweep')
    // `sweep merge a b --out X`: commander hands --out to the parent `sweep`, which declares it
    // too; the merge takes it from there
    .action((dirs: string[], _o: { out?: string }, cmd: Command) => merge(dirs, cmd.optsWithGlobals<{ out?: string; force?: boolean }>()));
  p.command('merge')
    .description('the same as `sweep merge`')
    .argument('<dirs...>', 'the shards\' output folders')
    .option('--out <dir>', 'where the joined sweep goes (default results/<experiment>)')
    .option('--force', 'overwrite an --out folder that holds the points of an earlier sweep')
    .action(merge);

  p.command('log')
    .description('one work request\'s life from a transaction log (run --txlog): each stage and its time')
    .argument('<file>', 'a transaction log, waves/<name>/<name>.txlog.jsonl')
    .addOption(new Option('--wr <id>', 'the work request\'s id (wrId)').argParser((v) => {
      // any size: a bigint wrId is logged as its decimal string
      if (!/^[0-9]+$/.test(v)) throw new UsageError(`--wr must be a decimal work request id, got '${v}'`);
      return BigInt(v).toString();
    }).makeOptionMandatory())
    .addOption(new Option('--qp <n>', 'only on this QP (decimal or 0x hex)').argParser((v) => {
      const n = /^0x[0-9a-f]+$/i.test(v) ? parseInt(v, 16) : /^[0-9]+$/.test(v) ? Number(v) : NaN;
      if (!(Number.isSafeInteger(n) && n < 2 ** 24)) throw new UsageError(`--qp must be a QP number (decimal or 0x hex, below 2^24), got '${v}'`);
      return n;
    }))
    .action((file: string, o: { wr: string; qp?: number }) => done({ cmd: 'log', file, wr: o.wr, ...(o.qp !== undefined ? { qp: o.qp } : {}) }));
  p.command('config')
    .description('every configuration field (for --set and --config) with its default, unit and meaning')
    .action(() => done({ cmd: 'config' }));

  p.command('plot')
    .description('redraw a sweep\'s plot (<dir>/plot.svg) from its points')
    .argument('<dir>', 'a sweep\'s output folder')
    .action((dir: string) => done({ cmd: 'plot', dir }));
  return p;
}

export function parseArgs(argv: readonly string[]): Args {
  if (argv.length === 0) throw new UsageError('no command given (list, run, demo, sweep, plot, config)');
  let out: Args | null = null;
  const p = program((a) => { out = a; });
  try {
    p.parse([...argv], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help, --version: printed by commander; anything else is a usage error
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.help' || e.code === 'commander.version') return { cmd: 'exit', code: 0 };
      throw fromCommander(e);
    }
    throw e;
  }
  if (out === null) throw new UsageError('no command given');
  return out;
}
