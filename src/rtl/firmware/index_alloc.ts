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
  /**
   * Live numbers as bits over `[first, hwm)` (grown by doubling): 4 bits of memory per number
   * ever handed out where a Set took some 30 bytes per live one (a million live mkeys).
   */
  private live = new Uint32Array(2);
  private count = 0;

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
    return this.count;
  }

  /** Every number allocated now, ascending (TEARDOWN_HCA frees them all). */
  liveNumbers(): number[] {
    const out: number[] = [];
    const w = this.live;
    for (let i = 0; i < w.length; i++) {
      for (let v = w[i]; v !== 0; v = (v & (v - 1)) >>> 0) out.push(this.first + i * 32 + (31 - Math.clz32(v & -v)));
    }
    return out;
  }

  /** True when `n` is allocated. */
  has(n: number): boolean {
    if (!Number.isSafeInteger(n) || n < this.first || n >= this.hwm) return false;
    const k = n - this.first;
    return ((this.live[k >>> 5] >>> (k & 31)) & 1) === 1;
  }

  private mark(n: number): void {
    const k = n - this.first;
    const word = Math.floor(k / 32);
    if (word >= this.live.length) {
      let len = this.live.length;
      while (len <= word) len *= 2;
      const grown = new Uint32Array(len);
      grown.set(this.live);
      this.live = grown;
    }
    this.live[word] |= 1 << (k & 31);
    this.count++;
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
      this.mark(n);
      if (inUse === undefined || !inUse(n)) return n;
    }
  }

  /** Returns `n` to the pool; false when it was not allocated. */
  release(n: number): boolean {
    if (!this.has(n)) return false;
    const k = n - this.first;
    this.live[k >>> 5] &= ~(1 << (k & 31));
    this.count--;
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
