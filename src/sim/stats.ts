/**
 * Per-module statistics: counters and latency histograms, read as plain JSON by `tb.stats()`.
 * Counters are objects with a numeric field so the hot path increments a field, nothing more.
 */

/** A monotonically updated count. */
export class Counter {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

const BUCKETS = 64;

/**
 * A histogram of non-negative values in power-of-two buckets (bucket i holds [2^(i-1), 2^i),
 * bucket 0 holds 0), plus exact count, sum, min and max. Fixed size: adding never allocates.
 */
export class Histogram {
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  readonly buckets = new Float64Array(BUCKETS);

  add(v: number): void {
    this.count++;
    this.sum += v;
    if (v < this.min) this.min = v;
    if (v > this.max) this.max = v;
    let b = 0;
    if (v >= 1) b = v < 2 ** 31 ? 32 - Math.clz32(v) : Math.min(BUCKETS - 1, Math.floor(Math.log2(v)) + 1);
    this.buckets[b]++;
  }

  /** The upper bound of the bucket holding quantile q (0..1): an estimate within a factor 2. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const target = q * this.count;
    let seen = 0;
    for (let b = 0; b < BUCKETS; b++) {
      seen += this.buckets[b];
      if (seen >= target && this.buckets[b] > 0) return Math.min(this.max, b === 0 ? 0 : 2 ** b - 1);
    }
    return this.max;
  }

  toJSON(): HistogramJson {
    const buckets: Record<string, number> = {};
    for (let b = 0; b < BUCKETS; b++) {
      if (this.buckets[b] > 0) buckets[b === 0 ? '0' : `<${2 ** b}`] = this.buckets[b];
    }
    return {
      count: this.count,
      mean: this.count ? this.sum / this.count : 0,
      min: this.count ? this.min : 0,
      max: this.count ? this.max : 0,
      p50: this.quantile(0.5),
      p99: this.quantile(0.99),
      buckets,
    };
  }
}

/** JSON form of a histogram. */
export interface HistogramJson {
  count: number;
  mean: number;
  min: number;
  max: number;
  p50: number;
  p99: number;
  buckets: Record<string, number>;
}

/** JSON form of one module's statistics. */
export type StatsJson = Record<string, number | HistogramJson>;

class Gauge {
  constructor(readonly read: () => number) {}
}

/** The statistics of one module, in declaration order. */
export class StatSet {
  private readonly items: [string, Counter | Histogram | Gauge][] = [];

  counter(name: string): Counter {
    const c = new Counter();
    this.add(name, c);
    return c;
  }

  histogram(name: string): Histogram {
    const h = new Histogram();
    this.add(name, h);
    return h;
  }

  /** A value read when the stats are taken (occupancy kept in a hot-path field elsewhere). */
  gauge(name: string, read: () => number): void {
    this.add(name, new Gauge(read));
  }

  get empty(): boolean {
    return this.items.length === 0;
  }

  toJSON(): StatsJson {
    const out: StatsJson = {};
    for (const [n, s] of this.items) out[n] = s instanceof Counter ? s.value : s instanceof Gauge ? s.read() : s.toJSON();
    return out;
  }

  private add(name: string, s: Counter | Histogram | Gauge): void {
    if (this.items.some(([n]) => n === name)) throw new Error(`statistic '${name}' declared twice`);
    this.items.push([name, s]);
  }
}
