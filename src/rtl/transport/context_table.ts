/**
 * A hardware table of contexts (WQE slots, requester or responder contexts): a fixed number of
 * entries, taken and given back, with the two statistics that tell whether it limits the
 * pipeline: its peak occupancy (`<name>_peak`) and the edges work waited for a free entry
 * (`<name>_full_stalls`). Entries are made once; taking and giving back allocates nothing.
 */
import type { Counter, StatSet } from '../../sim/index.ts';
import type { BlockedStalls } from '../../sim/blocked_sleep.ts';

export class ContextTable<T> {
  /** Every entry, by index. */
  readonly all: readonly T[];
  private readonly free: T[] = [];
  private readonly sPeak: Counter;
  private readonly sStalls: Counter;

  /**
   * `sleep`: the engine may sleep through edges on which it would count a stall each; its
   * `BlockedStalls` adds them (the statistic reads them at `now()`, mid-sleep too).
   */
  constructor(size: number, make: (index: number) => T, stats: StatSet, name: string, sleep?: { stalls: BlockedStalls; now: () => number }) {
    const all: T[] = [];
    for (let i = 0; i < size; i++) all.push(make(i));
    this.all = all;
    for (let i = size - 1; i >= 0; i--) this.free.push(all[i]); // entry 0 is taken first
    this.sPeak = stats.counter(`${name}_peak`);
    if (sleep === undefined) this.sStalls = stats.counter(`${name}_full_stalls`);
    else {
      this.sStalls = sleep.stalls.counter;
      stats.gauge(`${name}_full_stalls`, () => sleep.stalls.read(sleep.now()));
    }
  }

  /** Entries in use. */
  get inUse(): number {
    return this.all.length - this.free.length;
  }

  /** A free entry exists. */
  get hasFree(): boolean {
    return this.free.length > 0;
  }

  /** Entries free. */
  get freeCount(): number {
    return this.free.length;
  }

  /**
   * Work began to wait for an entry without taking one: counted as a stall, once per wait (an
   * engine that sleeps until an entry is given back does not count edges).
   */
  noteStall(n = 1): void {
    this.sStalls.inc(n);
  }

  /** A free entry, or undefined (counted as a stall: work waits for the table). */
  take(): T | undefined {
    const e = this.free.pop();
    if (e === undefined) {
      this.sStalls.inc();
      return undefined;
    }
    const n = this.all.length - this.free.length;
    if (n > this.sPeak.value) this.sPeak.value = n;
    return e;
  }

  /** Gives an entry back. */
  give(e: T): void {
    this.free.push(e);
  }
}
