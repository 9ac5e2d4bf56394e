/** Helpers of the experiments' shape checks and plot labels. */
import type { ParamValue, PointLine } from '../../src/experiment.ts';
export { formatBytes } from '../../src/experiment.ts';

/** The points grouped by a key, in first-seen order. */
export function groupBy(points: readonly PointLine[], key: (p: PointLine) => string): Map<string, PointLine[]> {
  const m = new Map<string, PointLine[]>();
  for (const p of points) m.set(key(p), [...(m.get(key(p)) ?? []), p]);
  return m;
}

/** A whole number of bytes, at least 4 KiB. */
export function isPow2Size(v: ParamValue): boolean {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 4096;
}
