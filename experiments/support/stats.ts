/** Statistics helpers of the experiments: the numeric counters of some modules, and their change over a window. */
import type { StatsJson } from '../../src/sim/stats.ts';

export type Counters = Record<string, Record<string, number>>;

/** The numeric counters (no histograms) of the named scopes. */
export function counters(stats: Readonly<Record<string, StatsJson>>, scopes: readonly string[]): Counters {
  const out: Counters = {};
  for (const s of scopes) {
    const st = stats[s];
    if (!st) continue;
    const c: Record<string, number> = {};
    // FIFO handshake counts (_pushes, _pops) say nothing a figure needs
    for (const [k, v] of Object.entries(st)) if (typeof v === 'number' && !/_(pushes|pops)$/.test(k)) c[k] = v;
    out[s] = c;
  }
  return out;
}

/**
 * `after - before` for the counters that count events; peaks and other gauges (names ending
 * in _peak, max_*) keep their value at the end.
 */
export function delta(after: Counters, before: Counters): Counters {
  const out: Counters = {};
  for (const [s, c] of Object.entries(after)) {
    const d: Record<string, number> = {};
    for (const [k, v] of Object.entries(c)) d[k] = /_peak$|^max_/.test(k) ? v : v - (before[s]?.[k] ?? 0);
    out[s] = d;
  }
  return out;
}

/** misses / (hits + misses), 0 with no lookups, to 3 decimals. */
export function missRate(c: Record<string, number> | undefined): number {
  if (!c) return 0;
  const n = (c.hits ?? 0) + (c.misses ?? 0);
  return n ? +((c.misses ?? 0) / n).toFixed(3) : 0;
}
