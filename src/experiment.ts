/**
 * Experiments: parameter sweeps that reproduce the published shapes of spec/timing.md
 * (`mlx5sim sweep <experiment>`). An experiment names its grid, runs one point of it on a fresh
 * testbed, says how its points are plotted and which published figure goes on the plot, and
 * checks that the shape holds. The built-in ones are in `experiments/`, one file each.
 */
import type { HcaConfig } from './rtl/config.ts';

/** A value of one axis of the grid. */
export type ParamValue = number | string | boolean;

/** One point's parameters: experiment axes and configuration fields (HcaConfig) by name. */
export type Params = Readonly<Record<string, ParamValue>>;

/**
 * A block of the grid: each axis with its values; the block's points are the cartesian product
 * (the first axis varies slowest). A grid is the union of its blocks, in order: a block per page
 * size, say, each with the working sets that matter for it.
 */
export type GridBlock = Readonly<Record<string, readonly ParamValue[]>>;

/** What one point measured: simulated figures, and the cache statistics behind them. */
export interface PointFigures {
  /** Simulated results by name (rates, latencies, miss rates): the plot's y axis is one of them. */
  figures: Record<string, number>;
  /** Counters of the modules that explain the figures (`tb.hca1.mtt`: { hits, misses }). */
  stats: Record<string, Record<string, number>>;
}

/** What `run` is given besides its parameters. */
export interface PointContext {
  seed: number;
  /** The parameters that are configuration fields, for the testbed's `config`. */
  config: Partial<HcaConfig>;
}

/** One written point: a line of `points.jsonl`. */
export interface PointLine extends PointFigures {
  experiment: string;
  /** Position in the whole grid (shards keep it): lines are sorted by it. */
  index: number;
  params: Record<string, ParamValue>;
  seed: number;
  /** Wall-clock seconds the point took: the only field that differs between runs. */
  wallSeconds: number;
}

/** An axis the experiment itself defines (configuration fields need no entry). */
export interface AxisDef {
  /** What it is, for `--help`-like listings and errors. */
  what: string;
  /** A requirement text when `v` is not a value of this axis, else null. */
  check?(v: ParamValue): string | null;
  /** How the plot labels its values. */
  format?: 'bytes' | 'number' | 'text';
}

/** A published (or derived) figure drawn on the plot. */
export type Reference =
  /** a vertical line at x (a cache's reach, a limit) */
  | { kind: 'x'; x: number; label: string }
  /** a horizontal line at y (a published rate) */
  | { kind: 'y'; y: number; label: string }
  /** a published point */
  | { kind: 'point'; x: number; y: number; label: string };

/**
 * How the points are drawn: one line per series over x, or grouped bars (`mark: 'bar'`). Fields
 * name params or figures.
 */
export interface PlotDef {
  title: string;
  /**
   * 'line' (the default): a line per series over a quantitative x. 'bar': grouped bars, a group
   * per value of x (nominal, in grid order), a bar per series in each group, each bar labelled
   * with its y; only 'y' references are drawn (a comparison of a few cases, not a curve).
   */
  mark?: 'line' | 'bar';
  x: {
    field: string;
    title: string;
    log?: boolean;
    bytes?: boolean;
    /** For bars: a point's group on the x axis (default: its `field`'s value as text). */
    label?(point: PointLine): string;
  };
  y: { field: string; title: string; log?: boolean; zero?: boolean };
  /** The parameters whose values tell the lines apart (default: none, one line). */
  series?: readonly string[];
  /** Figures for the plot: what timing.md publishes, and reaches computed from the parameters. */
  references?(points: readonly PointLine[]): Reference[];
  /** Where the published figure comes from, under the plot. */
  source?: string;
}

/** The outcome of one shape check. */
export interface ShapeCheck {
  what: string;
  ok: boolean;
  detail?: string;
}

/** A built-in experiment (a file of `experiments/`). */
export interface Experiment {
  /** File-name safe: `results/<name>/`. */
  name: string;
  /** One line for `mlx5sim list`. */
  summary: string;
  /** The shape of spec/timing.md it reproduces. */
  shape: string;
  axes: Readonly<Record<string, AxisDef>>;
  /** The default grid and the small one (`--quick`, what the tests run). */
  grid: { full: readonly GridBlock[]; quick: readonly GridBlock[] };
  /** Runs one point on a fresh testbed. Deterministic: same params and seed, same figures. */
  run(params: Params, ctx: PointContext): Promise<PointFigures>;
  plot: PlotDef;
  /**
   * Whether the shape holds over these points; a check the points cannot decide (its x values
   * are missing from the grid) is left out.
   */
  checks(points: readonly PointLine[]): ShapeCheck[];
}

/** 4096 -> '4 KiB', 2097152 -> '2 MiB' (binary units, as page sizes and working sets are given). */
export function formatBytes(v: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  while (u < units.length - 1 && Math.abs(v) >= 1024) {
    v /= 1024;
    u++;
  }
  return `${+v.toFixed(2)} ${units[u]}`;
}

