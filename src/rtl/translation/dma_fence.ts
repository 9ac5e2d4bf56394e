/**
 * The DMA fence (`tb.hcaN.dma_fence`): what makes an invalidation a fence for the DMA already
 * translated through the entries it removes.
 *
 * A translation answered before a UMR's writes land may still be used after: a READ's
 * destination is translated when its WQE starts and written when the response arrives a round
 * trip later; a responder's READ is translated, then gathered. So an invalidating UMR (an ODP
 * zap, a pooled MR's revoke, DESTROY_MKEY) having landed does not mean the device stopped
 * reaching the old pages. The data-path engines take a hold here for each message from its
 * first translation request until its DMA through those translations is over (the requester:
 * gathered, or placed for a READ or atomic; the responder: the message's context is done), and
 * each hold carries the epoch it began in. The UMR engine marks a fence point (`mark`) when an
 * invalidating UMR's writes have landed and holds its completion until the point has `passed`:
 * every hold of an earlier epoch released, every DMA translated through the old entries over
 * (src/rtl/umr/umr_engine.ts). So the driver, which lets the pages go only after that
 * completion, frees no frame the device may still write: munmap, madvise and dereg return only
 * then, as mlx5 relies on (Linux 6.12 drivers/infiniband/hw/mlx5/umr.c:406-413,
 * mlx5r_umr_revoke_mr: "Upon return the NIC will not be doing any DMA to the pages under the
 * MR, and any DMA in progress will be completed"). `drain()` is the same wait as a promise.
 *
 * This drains the whole pipeline (every message translated before, not only those through the
 * changed mkey): the engines do not tell which mkeys a KLM or KSM translation passed through,
 * and a drain is bounded by the messages in flight (a round trip, or a fault being handled).
 */
import { Module, type Signal } from '../../sim/index.ts';
import type { Counter, Histogram } from '../../sim/stats.ts';

interface Drain {
  /** Holds of epochs below this one must be released. */
  epoch: number;
  resolve: () => void;
  since: number;
}

export class DmaFence extends Module {
  /** The epoch new holds take (starts at 1: 0 means "no hold" to the engines). */
  private epoch = 1;
  /** Live holds per epoch, oldest first (epochs only grow, so insertion order is epoch order). */
  private readonly counts = new Map<number, number>();
  private nHolds = 0;
  private readonly drains: Drain[] = [];
  private readonly sHolds: Signal;
  private readonly sDraining: Signal;
  private readonly cDrains: Counter;
  private readonly cHoldsPeak: Counter;
  private readonly cWaited: Counter;
  private readonly hWait: Histogram;

  constructor(parent: Module, name: string) {
    super(parent.sim, parent, name);
    this.sHolds = this.signal('holds', 16);
    this.sDraining = this.signal('draining', 8);
    this.cDrains = this.stats.counter('drains');
    this.cWaited = this.stats.counter('drains_waited');
    this.cHoldsPeak = this.stats.counter('holds_peak');
    this.hWait = this.stats.histogram('drain_wait_ps');
  }

  /** A drain is waiting for translated DMA to finish. */
  override hasWork(): boolean {
    return this.drains.length > 0;
  }

  /** Messages whose translated DMA is not over. */
  get holds(): number {
    return this.nHolds;
  }

  /** An engine starts translating a message: returns its hold's epoch (release it with `release`). */
  hold(): number {
    const e = this.epoch;
    this.counts.set(e, (this.counts.get(e) ?? 0) + 1);
    this.nHolds++;
    if (this.nHolds > this.cHoldsPeak.value) this.cHoldsPeak.value = this.nHolds;
    if (this.traced) this.sHolds.setNow(Math.min(this.nHolds, 0xffff));
    return e;
  }

  /** The message's DMA through its translations is over (`epoch` from `hold`; 0 does nothing). */
  release(epoch: number): void {
    if (epoch === 0) return;
    const n = this.counts.get(epoch);
    if (n === undefined) throw new Error(`${this.path}: release of epoch ${epoch}, which holds nothing`);
    if (n > 1) this.counts.set(epoch, n - 1);
    else this.counts.delete(epoch);
    this.nHolds--;
    if (this.traced) this.sHolds.setNow(Math.min(this.nHolds, 0xffff));
    if (this.drains.length > 0 && n === 1) this.settle();
  }

  /** A fence point: a new epoch; `passed(point)` once every hold taken before it is released. */
  mark(): number {
    this.cDrains.inc();
    return ++this.epoch;
  }

  /** Every hold taken before fence point `point` (from `mark`) is released. */
  passed(point: number): boolean {
    return this.oldest() >= point;
  }

  /** Tells `target` (fire) once fence point `point` has passed; `point` not passed yet. */
  notify(point: number, target: { fire(): void }): void {
    this.cWaited.inc();
    this.drains.push({ epoch: point, resolve: () => target.fire(), since: this.sim.now });
    this.sDraining.setNow(Math.min(this.drains.length, 0xff));
  }

  /**
   * Resolves once every hold taken before now is released (at once when none is): the DMA
   * translated through entries an invalidation just removed has finished.
   */
  drain(): Promise<void> {
    this.cDrains.inc();
    const epoch = ++this.epoch;
    if (this.oldest() >= epoch) return Promise.resolve();
    this.cWaited.inc();
    return new Promise<void>((resolve) => {
      this.drains.push({ epoch, resolve, since: this.sim.now });
      this.sDraining.setNow(Math.min(this.drains.length, 0xff));
    });
  }

  /** The oldest epoch with a live hold (Infinity when none). */
  private oldest(): number {
    for (const e of this.counts.keys()) return e;
    return Infinity;
  }

  private settle(): void {
    const oldest = this.oldest();
    let resumed = false;
    while (this.drains.length > 0 && this.drains[0].epoch <= oldest) {
      const d = this.drains.shift()!;
      this.hWait.add(this.sim.now - d.since);
      d.resolve();
      resumed = true;
    }
    this.sDraining.setNow(Math.min(this.drains.length, 0xff));
    if (resumed) this.sim.noteResume();
  }
}
