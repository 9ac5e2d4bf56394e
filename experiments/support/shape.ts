/** Helpers of the experiments' shape checks, axis checks and plot labels. */
import type { ParamValue, PointLine } from '../../src/experiment.ts';
export { formatBytes } from '../../src/experiment.ts';

/** The points grouped by a key, in first-seen order. */
export function groupBy(points: readonly PointLine[], key: (p: PointLine) => string): Map<string, PointLine[]> {
  const m = new Map<string, PointLine[]>();
  for (const p of points) m.set(key(p), [...(m.get(key(p)) ?? []), p]);
  return m;
}

/**
 * The key of a point's group: its parameters without the named ones (the x axis, and what a
 * check compares), so points that differ only there share it and any other axis (a `--set`
 * configuration field) splits them.
 */
export function paramsWithout(p: PointLine, ...names: readonly string[]): string {
  const rest: Record<string, ParamValue> = { ...p.params };
  for (const n of names) delete rest[n];
  return JSON.stringify(Object.keys(rest).sort().map((k) => [k, rest[k]]));
}

/** An axis check: a safe integer in lo..hi, else `what` (default 'must be an integer in lo..hi'). */
export function intIn(lo: number, hi: number, what?: string): (v: ParamValue) => string | null {
  return (v) => (typeof v === 'number' && Number.isSafeInteger(v) && v >= lo && v <= hi ? null : (what ?? `must be an integer in ${lo}..${hi}`));
}

/** An axis check: a positive safe integer. */
export const positiveInt = intIn(1, Number.MAX_SAFE_INTEGER, 'must be a positive integer');

/** An axis check: true or false. */
export const isBoolean = (v: ParamValue): string | null => (typeof v === 'boolean' ? null : 'must be true or false');

/** A whole number of bytes, at least 4 KiB (any such size: not necessarily a power of two). */
export function isSizeFrom4k(v: ParamValue): boolean {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 4096;
}

/** A group key of `paramsWithout` as a label suffix: ' (mttCacheLines 64, ...)', or '' for none. */
export function groupLabel(key: string, skip: readonly string[] = []): string {
  const named = (JSON.parse(key) as [string, ParamValue][]).filter(([k]) => !skip.includes(k));
  return named.length ? ` (${named.map(([k, v]) => `${k} ${String(v)}`).join(', ')})` : '';
}
