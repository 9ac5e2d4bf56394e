/**
 * Miss status holding registers: the outstanding host reads of a cache. One MSHR per missing
 * key (an mkey index or a line address); later misses to the same key wait on it (merged). An
 * invalidation of a key with a read in flight marks it stale, so the fill is not installed and
 * the read is issued again: no stale copy can be cached after a coherent update.
 */
export class MissQueue {
  private readonly key: Float64Array;
  private readonly stale: Uint8Array;
  private readonly needIssue: Uint8Array;
  private readonly since: Float64Array;
  readonly waiters: number[][];
  private used = 0;
  private toIssue = 0;
  /** Most MSHRs busy at once, and misses refused because every MSHR was busy (the cache's limit). */
  peak = 0;
  fullStalls = 0;

  constructor(readonly size: number) {
    this.key = new Float64Array(size).fill(-1);
    this.stale = new Uint8Array(size);
    this.needIssue = new Uint8Array(size);
    this.since = new Float64Array(size);
    this.waiters = Array.from({ length: size }, () => []);
  }

  get busy(): number {
    return this.used;
  }

  /** The MSHR waiting for `key`, or -1. */
  find(key: number): number {
    for (let m = 0; m < this.size; m++) if (this.key[m] === key) return m;
    return -1;
  }

  /** Takes a free MSHR for `key` (-1 when all are busy); it must then be issued. */
  alloc(key: number, now: number): number {
    for (let m = 0; m < this.size; m++) {
      if (this.key[m] < 0) {
        this.key[m] = key;
        this.stale[m] = 0;
        this.needIssue[m] = 1;
        this.toIssue++;
        this.since[m] = now;
        this.used++;
        if (this.used > this.peak) this.peak = this.used;
        return m;
      }
    }
    this.fullStalls++;
    return -1;
  }

  keyOf(m: number): number {
    return this.key[m];
  }

  sinceOf(m: number): number {
    return this.since[m];
  }

  /** An MSHR whose read must be (re)issued, or -1. */
  nextToIssue(): number {
    if (this.toIssue === 0) return -1;
    for (let m = 0; m < this.size; m++) if (this.key[m] >= 0 && this.needIssue[m]) return m;
    return -1;
  }

  issued(m: number): void {
    if (this.needIssue[m]) this.toIssue--;
    this.needIssue[m] = 0;
    this.stale[m] = 0;
  }

  /** The read of `m` came back: true when its data may be installed, false when it was reissued. */
  completed(m: number): boolean {
    if (this.stale[m]) {
      this.needIssue[m] = 1;
      this.toIssue++;
      return false;
    }
    return true;
  }

  /** Frees an MSHR after its fill. */
  release(m: number): void {
    this.key[m] = -1;
    this.waiters[m].length = 0;
    this.used--;
  }

  /** Marks in-flight reads of keys for which `match(key)` holds as stale. */
  invalidateWhere(match: (key: number) => boolean): void {
    for (let m = 0; m < this.size; m++) if (this.key[m] >= 0 && match(this.key[m])) this.stale[m] = 1;
  }
}
