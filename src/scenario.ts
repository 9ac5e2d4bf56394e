import type { TestbedTrace } from './driver/testbed.ts';
import type { StatsJson } from './sim/stats.ts';

/** How the command line (or a test) runs a scenario. */
export interface ScenarioOptions {
  seed: number;
  /** Where to write waves, the pcap and the transaction log; undefined: no tracing. */
  trace?: TestbedTrace;
  /** A partial configuration (from `--config cfg.json`), validated by what it configures. */
  config?: Record<string, unknown>;
}

/** What a scenario reports: its own checks, simulated time, and statistics. */
export interface ScenarioResult {
  /** Each check the scenario made, with whether it held. */
  checks: { what: string; ok: boolean; detail?: string }[];
  /** Simulated time at the end, in ps. */
  simTime: number;
  stats: Record<string, StatsJson>;
}

/**
 * A runnable, self-checking scenario: `mlx5sim run <name|file.ts>` runs it, `npm run demo`
 * runs every built-in one. A scenario file's default export is a Scenario.
 */
export interface Scenario {
  /** Short name, file-name safe: the waves are `waves/<name>/<name>.vcd`. */
  name: string;
  /** One line for `mlx5sim list`. */
  summary: string;
  /**
   * False for a scenario that builds no adapter (the kernel's own example): `--config` has
   * nothing to configure there, so the command line refuses it instead of ignoring it.
   */
  configurable?: boolean;
  run(opts: ScenarioOptions): Promise<ScenarioResult>;
}

/**
 * Marks a scenario file's default export: `export default defineScenario({ name, summary, run })`.
 * `mlx5sim run file.ts` looks for exactly that text in the source before it imports (runs) the
 * file, so a file that is not a scenario is refused without executing any of its code. Checks
 * the shape and returns the scenario unchanged.
 */
export function defineScenario(s: Scenario): Scenario {
  if (s === null || typeof s !== 'object' || typeof s.name !== 'string' || typeof s.summary !== 'string' || typeof s.run !== 'function') {
    throw new TypeError('defineScenario: a scenario is an object { name: string, summary: string, run(opts) }');
  }
  return s;
}

/** Collects a scenario's checks: `check(cond, what, detail?)`. */
export class Checks {
  readonly list: ScenarioResult['checks'] = [];
  check(ok: boolean, what: string, detail?: string): boolean {
    this.list.push(detail === undefined ? { what, ok } : { what, ok, detail });
    return ok;
  }
  equal<T>(got: T, want: T, what: string): boolean {
    const ok = Object.is(got, want) || JSON.stringify(got) === JSON.stringify(want);
    return this.check(ok, what, ok ? undefined : `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}
