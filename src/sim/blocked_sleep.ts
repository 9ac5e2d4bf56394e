import { Counter } from './stats.ts';

/**
 * A stall counter of a module that sleeps while every step it has to take is refused by a full
 * FIFO (a pop of a FIFO found full wakes its producer, so it misses no edge that could move),
 * instead of ticking on every edge to find the same FIFOs full. Each edge slept through would
 * have counted `perEdge` stalls; they are added when the module ticks again, and a read of the
 * statistic meanwhile (`tb.stats()` in the middle of a sleep) counts the edges up to now, as the
 * ticking module would have. The module's clock period sets the edges: a sleeping module may
 * stop its clock, and the edges it would have kept are counted from the time.
 */
export class BlockedStalls {
  /** The counted stalls (edges ticked, and sleeps ended). */
  readonly counter = new Counter();
  /** Edge time of the sleep under way, or -1. */
  private at = -1;
  private perEdge = 0;
  /** Edge time of one stall owed (see `owe`), or -1. */
  private owedAt = -1;

  constructor(private readonly period: number) {}

  /** Whether a sleep is under way. */
  get sleeping(): boolean {
    return this.at >= 0;
  }

  /** The module goes to sleep at the edge of time `now`; each later edge would count `perEdge`. */
  begin(now: number, perEdge: number): void {
    this.at = now;
    this.perEdge = perEdge;
  }

  /**
   * One stall for the edge after `now`, which the module sleeps through: counted when it ticks
   * again later (a tick at that very edge counts its stall itself).
   */
  oweNext(now: number): void {
    this.owedAt = now + this.period;
  }

  /** The module ticks at the edge of time `now`: a sleep's edges and an owed stall before it are counted. */
  ticks(now: number): void {
    if (this.owedAt >= 0) {
      if (now > this.owedAt) this.counter.inc();
      this.owedAt = -1;
    }
    if (this.at >= 0) this.end(now);
  }

  /** The module ticks at the edge of time `now`: the edges strictly between are counted. */
  end(now: number): void {
    const slept = Math.round((now - this.at) / this.period) - 1;
    if (slept > 0 && this.perEdge > 0) this.counter.inc(slept * this.perEdge);
    this.at = -1;
  }

  /** The statistic at time `now` (the edges up to now of a sleep under way included). */
  read(now: number): number {
    const owed = this.owedAt >= 0 && now >= this.owedAt ? 1 : 0;
    if (this.at < 0 || this.perEdge === 0) return this.counter.value + owed;
    return this.counter.value + owed + Math.floor((now - this.at) / this.period) * this.perEdge;
  }
}
