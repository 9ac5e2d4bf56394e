/**
 * The grid of a sweep: the experiment's blocks (default or `--quick`) with the command line's
 * `--set field=v1,v2` axes and `--pages` filter applied, expanded to numbered points. Every
 * value is checked here, before any point runs (a bad one is a UsageError: exit code 2).
 */
import { DEFAULT_HCA_CONFIG, resolveConfig, type HcaConfig } from '../../rtl/config.ts';
import type { Experiment, GridBlock, ParamValue, Params } from '../../experiment.ts';
import { parseSize, UsageError } from '../args.ts';

/** One point of the grid: its index (the order of the grid) and its parameters. */
export interface GridPoint {
  index: number;
  params: Record<string, ParamValue>;
}

/** What shapes the grid besides the experiment: the command line's choices. */
export interface GridChoice {
  quick: boolean;
  sets: readonly { field: string; values: readonly string[] }[];
  pages?: readonly number[];
}

/** True for the name of a configuration field (HcaConfig). */
export function isConfigField(name: string): name is keyof HcaConfig {
  return Object.hasOwn(DEFAULT_HCA_CONFIG, name);
}

/** A typed value: booleans, sizes (4k, 2m: bytes), numbers, else the text itself. */
export function typed(v: string): ParamValue {
  if (v === 'true') return true;
  if (v === 'false') return false;
  const size = parseSize(v);
  if (size !== null) return size;
  if (/^-?[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?$/i.test(v)) return Number(v);
  return v;
}

/** The values of `--set field=...`, typed and checked against the axis or configuration field. */
function setValues(exp: Experiment, field: string, raw: readonly string[]): ParamValue[] {
  const values = raw.map(typed);
  // own properties only: 'constructor' or 'toString' name no axis, whatever the prototype has
  const axis = Object.hasOwn(exp.axes, field) ? exp.axes[field] : undefined;
  if (axis) {
    for (const v of values) {
      const bad = axis.check?.(v) ?? null;
      if (bad !== null) throw new UsageError(`--set ${field}: ${bad}, got '${String(v)}'`);
    }
  } else if (isConfigField(field)) {
    for (const v of values) checkConfigValue(field, v);
  } else {
    throw new UsageError(`--set ${field}: not a parameter of ${exp.name} (${Object.keys(exp.axes).join(', ')}) nor a configuration field (mlx5sim config lists them)`);
  }
  return [...new Set(values)];
}

/** A value of a configuration field, checked alone (UsageError `--set field=v: config.field: rule`). */
export function checkConfigValue(field: keyof HcaConfig, v: ParamValue): void {
  try {
    resolveConfig({ [field]: v } as Partial<HcaConfig>);
  } catch (e) {
    throw new UsageError(`--set ${field}=${String(v)}: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** The blocks with the command line's axes: a `--set` replaces the axis where a block has it, else joins every block. */
export function gridBlocks(exp: Experiment, choice: GridChoice): GridBlock[] {
  let blocks: Record<string, readonly ParamValue[]>[] = (choice.quick ? exp.grid.quick : exp.grid.full).map((b) => ({ ...b }));
  for (const s of choice.sets) {
    const values = setValues(exp, s.field, s.values);
    if (blocks.some((b) => Object.hasOwn(b, s.field))) {
      blocks = blocks.map((b) => (Object.hasOwn(b, s.field) ? { ...b, [s.field]: values } : b));
    } else {
      blocks = blocks.map((b) => ({ ...b, [s.field]: values }));
    }
  }
  return blocks;
}

/** A canonical text of a point's parameters (sorted keys), to find duplicates. */
function keyOf(p: Params): string {
  return JSON.stringify(Object.keys(p).sort().map((k) => [k, p[k]]));
}

/** The cartesian product of one block, the first axis varying slowest. */
function product(b: GridBlock): Record<string, ParamValue>[] {
  let out: Record<string, ParamValue>[] = [{}];
  for (const [axis, values] of Object.entries(b)) {
    const next: Record<string, ParamValue>[] = [];
    for (const p of out) for (const v of values) next.push({ ...p, [axis]: v });
    out = next;
  }
  return out;
}

/** The numbered points of the grid: blocks expanded in order, duplicates dropped, `--pages` applied. */
export function expandGrid(exp: Experiment, choice: GridChoice): GridPoint[] {
  const seen = new Set<string>();
  let params: Record<string, ParamValue>[] = [];
  for (const b of gridBlocks(exp, choice)) {
    for (const p of product(b)) {
      const k = keyOf(p);
      if (!seen.has(k)) {
        seen.add(k);
        params.push(p);
      }
    }
  }
  if (choice.pages) {
    if (!('pages' in exp.axes)) throw new UsageError(`--pages: ${exp.name} has no page-size axis`);
    const want = choice.pages;
    params = params.filter((p) => want.includes(p.pages as number));
    if (params.length === 0) throw new UsageError(`--pages: no point of ${exp.name}'s grid has these page sizes`);
  }
  return params.map((p, index) => ({ index, params: p }));
}

/** The points of shard i of n: every n-th point, from the i-th. */
export function shardOf<T extends { index: number }>(points: readonly T[], shard: { i: number; n: number } | undefined): T[] {
  return shard ? points.filter((p) => p.index % shard.n === shard.i) : [...points];
}

/** The parameters that are configuration fields, for the testbed. */
export function configOf(params: Params): Partial<HcaConfig> {
  const c: Record<string, ParamValue> = {};
  for (const [k, v] of Object.entries(params)) if (isConfigField(k)) c[k] = v;
  return c as Partial<HcaConfig>;
}
