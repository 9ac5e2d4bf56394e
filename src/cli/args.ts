/** Command-line parsing for `mlx5sim`: strict, with errors that name the bad argument. */

export const USAGE = `usage: mlx5sim list
       mlx5sim run <scenario|file.ts> [--vcd waves/x.vcd | --no-vcd] [--no-gtkw] [--vcd-strings]
                   [--fst] [--scope GLOB]... [--depth N] [--from PS] [--to PS] [--seed N]
                   [--config cfg.json] [--stats text|json]
       mlx5sim demo [--seed N]`;

/** A usage error: exit code 2 with the usage line. */
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
  stats: 'text' | 'json' | null;
}

export type Args = { cmd: 'list' } | { cmd: 'demo'; seed: number } | RunArgs;

function intArg(flag: string, v: string | undefined, min = 0): number {
  if (v === undefined) throw new UsageError(`${flag} needs a value`);
  // decimal digits only: '' (Number('') is 0), '1e3' and '0x10' are not what a user means
  const n = /^[0-9]+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < min) throw new UsageError(`${flag} must be a decimal integer >= ${min}, got '${v}'`);
  return n;
}

export function parseArgs(argv: readonly string[]): Args {
  const [cmd, ...rest] = argv;
  if (cmd === 'list') {
    if (rest.length) throw new UsageError(`list takes no arguments, got '${rest[0]}'`);
    return { cmd: 'list' };
  }
  if (cmd === 'demo') {
    let seed = 1;
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === '--seed') seed = intArg('--seed', rest[++i]);
      else throw new UsageError(`demo: unknown argument '${rest[i]}'`);
    }
    return { cmd: 'demo', seed };
  }
  if (cmd !== 'run') throw new UsageError(cmd ? `unknown command '${cmd}'` : 'no command given');
  const a: RunArgs = { cmd: 'run', target: '', vcd: undefined, gtkw: true, strings: false, fst: false, scopes: [], seed: 1, stats: null };
  for (let i = 0; i < rest.length; i++) {
    const f = rest[i];
    const val = (): string => {
      const v = rest[++i];
      if (v === undefined) throw new UsageError(`${f} needs a value`);
      return v;
    };
    switch (f) {
      case '--vcd': a.vcd = val(); break;
      case '--no-vcd': a.vcd = null; break;
      case '--no-gtkw': a.gtkw = false; break;
      case '--vcd-strings': a.strings = true; break;
      case '--fst': a.fst = true; break;
      case '--scope': a.scopes.push(val()); break;
      case '--depth': a.depth = intArg(f, rest[++i], 1); break;
      case '--from': a.from = intArg(f, rest[++i]); break;
      case '--to': a.to = intArg(f, rest[++i]); break;
      case '--seed': a.seed = intArg(f, rest[++i]); break;
      case '--config': a.config = val(); break;
      case '--stats': {
        const v = val();
        if (v !== 'text' && v !== 'json') throw new UsageError(`--stats must be 'text' or 'json', got '${v}'`);
        a.stats = v;
        break;
      }
      default:
        if (f.startsWith('-')) throw new UsageError(`unknown option '${f}'`);
        if (a.target) throw new UsageError(`one scenario at a time: got '${a.target}' and '${f}'`);
        a.target = f;
    }
  }
  if (!a.target) throw new UsageError('run needs a scenario name or a .ts file');
  if (a.from !== undefined && a.to !== undefined && a.to < a.from) throw new UsageError(`--to ${a.to} is before --from ${a.from}`);
  if (a.fst && a.vcd === null) throw new UsageError('--fst converts the run\'s VCD: it cannot go with --no-vcd');
  return a;
}
