/**
 * A binary min-heap of (time, item) timers: push and pop in O(log n), the earliest at the top.
 * Timers at equal times come out in no particular order (users that need one order sort what
 * they pop). Entries are never removed from inside: a user that cancels or moves a timer leaves
 * the old entry, and checks an entry it pops against its own state (lazy deletion).
 */
export class TimerHeap<T> {
  private readonly times: number[] = [];
  private readonly items: T[] = [];

  get size(): number {
    return this.times.length;
  }

  /** Time of the earliest timer, or Infinity. */
  peekTime(): number {
    return this.times.length > 0 ? this.times[0] : Infinity;
  }

  /** The earliest timer's item (undefined when empty). */
  peek(): T | undefined {
    return this.items[0];
  }

  push(t: number, item: T): void {
    const ts = this.times;
    const is = this.items;
    let i = ts.length;
    ts.push(t);
    is.push(item);
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (ts[p] <= t) break;
      ts[i] = ts[p];
      is[i] = is[p];
      i = p;
    }
    ts[i] = t;
    is[i] = item;
  }

  /** Removes the earliest timer and returns its item (undefined when empty). */
  pop(): T | undefined {
    const ts = this.times;
    const is = this.items;
    const n = ts.length;
    if (n === 0) return undefined;
    const top = is[0];
    const t = ts.pop()!;
    const x = is.pop()!;
    if (n > 1) {
      // sift the last entry down from the root
      const m = n - 1;
      let i = 0;
      for (;;) {
        let c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && ts[c + 1] < ts[c]) c++;
        if (ts[c] >= t) break;
        ts[i] = ts[c];
        is[i] = is[c];
        i = c;
      }
      ts[i] = t;
      is[i] = x;
    }
    return top;
  }

  clear(): void {
    this.times.length = 0;
    this.items.length = 0;
  }
}
