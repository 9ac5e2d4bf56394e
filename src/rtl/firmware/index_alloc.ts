/**
 * A deterministic allocator of resource numbers (mkey indices, PDs, CQNs, EQNs, QPNs) as the
 * firmware hands them out: always the lowest free number in `[first, limit)`. Freed numbers
 * are reused lowest first, so a run's numbers depend only on the order of commands (DESIGN.md:
 * same inputs, same results).
 *
 * Cost: O(log n) per allocation and release (a binary min-heap of freed numbers below a
 * high-water mark); memory is proportional to the numbers ever handed out, not to the range.
 */
export class IndexAllocator {
  /** Numbers below this were handed out at least once; numbers at or above it never were. */
  private hwm: number;
  /** Freed numbers below `hwm`, as a binary min-heap. */
  private readonly freed: number[] = [];
  private readonly live = new Set<number>();

  constructor(
    /** The lowest number ever handed out. */
    readonly first: number,
    /** One past the highest number that may be handed out. */
    readonly limit: number,
  ) {
    if (!(Number.isSafeInteger(first) && Number.isSafeInteger(limit) && first >= 0 && limit >= first)) {
      throw new RangeError(`IndexAllocator: need integers 0 <= first <= limit, got [${first}, ${limit})`);
    }
    this.hwm = first;
  }

  /** Numbers currently allocated. */
  get size(): number {
    return this.live.size;
  }

  /** Every number allocated now, ascending (TEARDOWN_HCA frees them all). */
  liveNumbers(): number[] {
    return [...this.live].sort((a, b) => a - b);
  }

  /** True when `n` is allocated. */
  has(n: number): boolean {
    return this.live.has(n);
  }

  /**
   * Takes the lowest free number, or returns -1 when none is left. A number for which
   * `inUse(n)` is true (taken behind the allocator's back, e.g. an mkey written straight into
   * ICM by a test bench) is marked allocated and skipped.
   */
  alloc(inUse?: (n: number) => boolean): number {
    for (;;) {
      let n: number;
      if (this.freed.length > 0) n = this.popMin();
      else if (this.hwm < this.limit) n = this.hwm++;
      else return -1;
      this.live.add(n);
      if (inUse === undefined || !inUse(n)) return n;
    }
  }

  /** Returns `n` to the pool; false when it was not allocated. */
  release(n: number): boolean {
    if (!this.live.delete(n)) return false;
    this.pushFreed(n);
    return true;
  }

  private pushFreed(n: number): void {
    const h = this.freed;
    h.push(n);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p] <= h[i]) break;
      [h[p], h[i]] = [h[i], h[p]];
      i = p;
    }
  }

  private popMin(): number {
    const h = this.freed;
    const top = h[0];
    const last = h.pop() as number;
    if (h.length > 0) {
      h[0] = last;
      this.siftDown(0);
    }
    return top;
  }

  private siftDown(start: number): void {
    const h = this.freed;
    let i = start;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && h[l] < h[m]) m = l;
      if (r < h.length && h[r] < h[m]) m = r;
      if (m === i) return;
      [h[m], h[i]] = [h[i], h[m]];
      i = m;
    }
  }
}

/**
 * Numbers handed out in turn through `[first, limit)` and around again, skipping those still
 * live (`live(n)`): a freed number comes back only after every other one had its turn. QP
 * numbers: a window still bound to a destroyed QP (IBTA leaves it bound) names its number, so a
 * new QP must not get it soon; mlx5 reuses QP numbers too, so this only puts it off as long as
 * the range allows. Constant memory, however many numbers were ever handed out.
 */
export class RoundRobinAllocator {
  private next: number;

  constructor(
    readonly first: number,
    readonly limit: number,
  ) {
    if (!(Number.isSafeInteger(first) && Number.isSafeInteger(limit) && first >= 0 && limit > first)) {
      throw new RangeError(`RoundRobinAllocator: need integers 0 <= first < limit, got [${first}, ${limit})`);
    }
    this.next = first;
    this.before = first;
  }

  /** Takes back the last alloc (its command failed before the number was used): the same number comes next. */
  undo(): void {
    this.next = this.before;
  }

  /** `next` before the last alloc (undo puts it back). */
  private before: number;

  /** The next number not live, or -1 when every number is. */
  alloc(live: (n: number) => boolean): number {
    this.before = this.next;
    const span = this.limit - this.first;
    for (let i = 0; i < span; i++) {
      const n = this.next;
      this.next = n + 1 === this.limit ? this.first : n + 1;
      if (!live(n)) return n;
    }
    return -1;
  }
}
