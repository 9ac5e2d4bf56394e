/**
 * A sweep's output folder: `points.jsonl` (one line per point, sorted by grid index), the same
 * as a table in `points.csv`,
 * `meta.json` (experiment, grid, configuration, seed, version, git commit, shard) and the plot.
 * Also reading it back, and joining the folders of shards (`mlx5sim sweep merge`).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DEFAULT_HCA_CONFIG, type HcaConfig } from '../../rtl/config.ts';
import type { GridBlock, PointLine } from '../../experiment.ts';
import { UsageError } from '../args.ts';
import { packageRoot, packageVersion } from '../package_info.ts';

/** `meta.json`: what the points are of. Nothing in it depends on the number of jobs or the wall clock. */
export interface SweepMeta {
  experiment: string;
  summary: string;
  shape: string;
  /** The package version and the git commit of its checkout (null outside one). */
  version: string;
  gitCommit: string | null;
  seed: number;
  quick: boolean;
  /** The grid as run: the blocks (after --set) and the --pages filter. */
  grid: { blocks: GridBlock[]; pages: number[] | null };
  /** Points in the whole grid (a shard holds fewer). */
  gridPoints: number;
  /** The shard this folder holds (null: the whole grid). */
  shard: { i: number; n: number } | null;
  /** The configuration every point starts from; the grid's configuration axes override it. */
  config: HcaConfig;
}

/** The package version, and HEAD when the package is a git checkout of its own. */
export function provenance(): { version: string; gitCommit: string | null } {
  const root = packageRoot();
  const version = packageVersion();
  let gitCommit: string | null = null;
  try {
    const git = (args: string[]): string => execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    // an installed copy inside someone else's repository is not a checkout of this package
    if (resolve(git(['rev-parse', '--show-toplevel'])) === resolve(root)) gitCommit = git(['rev-parse', 'HEAD']);
  } catch {
    gitCommit = null;
  }
  return { version, gitCommit };
}

export const POINTS_FILE = 'points.jsonl';
export const META_FILE = 'meta.json';
export const CSV_FILE = 'points.csv';

/**
 * A command that writes a sweep refuses a folder that holds another's points (exit 2, naming
 * it) unless `force`: a rerun or a merge must not replace results without being asked.
 */
export function refuseOverwrite(what: string, dir: string, force: boolean): void {
  if (!force && existsSync(join(dir, POINTS_FILE))) {
    throw new UsageError(`${what}: ${dir} already holds a sweep's points (${POINTS_FILE}); give --force to overwrite them, or another --out`);
  }
}

/** Writes the points (sorted by index), points.csv and meta.json; makes the folder. */
export function writeSweep(dir: string, meta: SweepMeta, lines: readonly PointLine[]): void {
  mkdirSync(dir, { recursive: true });
  const sorted = [...lines].sort((a, b) => a.index - b.index);
  writeFileSync(join(dir, POINTS_FILE), sorted.map((l) => JSON.stringify(l) + '\n').join(''));
  writeCsv(dir, sorted);
  writeFileSync(join(dir, META_FILE), JSON.stringify(meta, null, 2) + '\n');
}

/** A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
function csvField(v: unknown): string {
  const s = v === undefined ? '' : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/**
 * `points.csv`: one row per point, sorted by index: index, seed, every parameter, every
 * figure, every statistic as `<module>.<counter>`, wallSeconds (columns in the order first met;
 * a point without a column leaves it empty). For a spreadsheet or pandas; points.jsonl stays
 * the source.
 */
export function writeCsv(dir: string, lines: readonly PointLine[]): void {
  const sorted = [...lines].sort((a, b) => a.index - b.index);
  const cols = (pick: (l: PointLine) => string[]): string[] => [...new Set(sorted.flatMap(pick))];
  const params = cols((l) => Object.keys(l.params));
  const figures = cols((l) => Object.keys(l.figures));
  const stats = cols((l) => Object.entries(l.stats).flatMap(([m, s]) => Object.keys(s).map((k) => `${m}.${k}`)));
  const stat = (l: PointLine, col: string): number | undefined => {
    const dot = col.lastIndexOf('.');
    return l.stats[col.slice(0, dot)]?.[col.slice(dot + 1)];
  };
  const rows: unknown[][] = [['index', 'seed', ...params, ...figures, ...stats, 'wallSeconds']];
  for (const l of sorted) rows.push([l.index, l.seed, ...params.map((p) => l.params[p]), ...figures.map((f) => l.figures[f]), ...stats.map((s) => stat(l, s)), l.wallSeconds]);
  writeFileSync(join(dir, CSV_FILE), rows.map((r) => r.map(csvField).join(',') + '\n').join(''));
}

/** Reads a sweep's folder back; a missing or malformed file is a usage error naming it. */
export function readSweep(dir: string): { meta: SweepMeta; lines: PointLine[] } {
  const metaPath = join(dir, META_FILE);
  const pointsPath = join(dir, POINTS_FILE);
  for (const p of [metaPath, pointsPath]) if (!existsSync(p)) throw new UsageError(`${dir}: not a sweep's folder (no ${p.slice(dir.length + 1)})`);
  let meta: SweepMeta;
  try {
    meta = JSON.parse(readFileSync(metaPath, 'utf8')) as SweepMeta;
  } catch (e) {
    throw new UsageError(`${metaPath}: invalid JSON (${(e as Error).message})`);
  }
  if (typeof meta.experiment !== 'string') throw new UsageError(`${metaPath}: no experiment named`);
  const lines: PointLine[] = [];
  readFileSync(pointsPath, 'utf8').split('\n').forEach((text, i) => {
    if (text.trim() === '') return;
    try {
      lines.push(JSON.parse(text) as PointLine);
    } catch (e) {
      throw new UsageError(`${pointsPath}:${i + 1}: invalid JSON (${(e as Error).message})`);
    }
  });
  return { meta, lines };
}

/** What must agree between shards of one sweep. */
function sweepKey(m: SweepMeta): string {
  return JSON.stringify([m.experiment, m.seed, m.quick, m.grid, m.gridPoints, m.version, m.config]);
}

/**
 * Joins the folders of shards: same experiment, grid, seed and version; each point once (a
 * point in two shards must be the same line but for its wall time). Returns the joined sweep
 * and the grid indices no shard had.
 */
export function mergeSweeps(dirs: readonly string[]): { meta: SweepMeta; lines: PointLine[]; missing: number[] } {
  const parts = dirs.map((d) => ({ dir: d, ...readSweep(d) }));
  const first = parts[0];
  for (const p of parts.slice(1)) {
    if (sweepKey(p.meta) !== sweepKey(first.meta)) {
      throw new UsageError(`${p.dir}: not a shard of the same sweep as ${first.dir} (experiment, grid, seed, quick and version must agree)`);
    }
  }
  const byIndex = new Map<number, PointLine>();
  const same = (a: PointLine, b: PointLine): boolean => JSON.stringify({ ...a, wallSeconds: 0 }) === JSON.stringify({ ...b, wallSeconds: 0 });
  for (const p of parts) {
    for (const l of p.lines) {
      // a line must belong to the sweep its folder's meta.json names, at a point of its grid
      if (l.experiment !== p.meta.experiment || l.seed !== p.meta.seed || !Number.isInteger(l.index) || l.index < 0 || l.index >= p.meta.gridPoints) {
        throw new UsageError(`${p.dir}: a point line (index ${String(l.index)}, experiment ${String(l.experiment)}, seed ${String(l.seed)}) is not of this sweep (${p.meta.experiment}, seed ${p.meta.seed}, ${p.meta.gridPoints} points)`);
      }
      const had = byIndex.get(l.index);
      if (had && !same(had, l)) throw new UsageError(`${p.dir}: point ${l.index} differs from another shard's`);
      if (!had) byIndex.set(l.index, l);
    }
  }
  const lines = [...byIndex.values()].sort((a, b) => a.index - b.index);
  const missing: number[] = [];
  for (let i = 0; i < first.meta.gridPoints; i++) if (!byIndex.has(i)) missing.push(i);
  const gc = parts.map((p) => p.meta.gitCommit);
  return { meta: { ...first.meta, shard: null, gitCommit: gc.every((c) => c === gc[0]) ? gc[0] : null }, lines, missing };
}

/** The configuration every point starts from. */
export function baseConfig(): HcaConfig {
  return { ...DEFAULT_HCA_CONFIG };
}
