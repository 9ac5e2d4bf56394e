/**
 * The DMA fence (`tb.hcaN.dma_fence`): what makes an invalidation a fence for the DMA already
 * translated through the mkey it changes.
 *
 * A translation answered before a UMR's writes land may still be used after: a READ's
 * destination is translated when its WQE starts and written when the response arrives a round
 * trip later; a responder's READ is translated, then gathered. So an invalidating UMR (an ODP
 * zap, a pooled MR's revoke, a LOCAL_INV, DESTROY_MKEY) having landed does not mean the device
 * stopped reaching the old pages. mlx5 relies on that UMR completing only once such DMA is over
 * (Linux 6.12 drivers/infiniband/hw/mlx5/umr.c:414-421, mlx5r_umr_revoke_mr: "Upon return the
 * NIC will not be doing any DMA to the pages under the MR, and any DMA in progress will be
 * completed"; odp.c:259-350 mlx5_ib_invalidate_range unmaps the pages once the zap UMR returned).
 *
 * Per mkey, with counters and no allocation on the data path:
 * - The ATU takes a hold on the mkey index of each request of a fenced port (the requester's
 *   and responder's) when it accepts it, and one on the shared INDIRECT slot the first time the
 *   walk enters a KLM or KSM mkey (a window, a KLM MR, an implicit ODP parent: the walk reaches
 *   keys the engines never name). The engine that asked releases them when the DMA through the
 *   answer is over (src/rtl/memory/dma_mover.ts releaseWhenLanded).
 * - A hold is a count in one of two phases of its slot (`token` = (slot * 2 + phase) + 1).
 *   An invalidation of mkey index i, once its writes have landed, flips slot i's phase
 *   (`mark`) and waits until the old phase's count is 0, and the same for the INDIRECT slot: a
 *   grace period per slot, as SRCU does. Holds taken after the flip translate through the new
 *   entries, so the wait ends even under traffic through the same mkey. A second mark on a
 *   slot whose grace period is still running shares the next one, started when it ends.
 * - Slots are the mkey index folded to 64 Ki (indices equal mod 2^16 share a counter: a wait can
 *   only grow, never shrink), so the table is two fixed typed arrays whatever the mkey count.
 *
 * DMA through other mkeys never delays an invalidation; DMA through any indirect mkey delays
 * every invalidation (README "Where the hardware has no answer").
 */
import { Module, type Signal } from '../../sim/index.ts';
import type { Counter, Histogram } from '../../sim/stats.ts';

/** Slots for mkey indices (a power of two); the INDIRECT slot comes after them. */
const SLOTS = 1 << 16;
const SLOT_MASK = SLOTS - 1;
/** The slot every translation through a KLM or KSM mkey holds. */
export const INDIRECT_SLOT = SLOTS;

/** A slot's grace periods: `done` of them ended; one running drains phase `old` (-1: none). */
interface Grace {
  old: number;
  started: number;
  done: number;
  /** Another grace period is owed once the running one ends (a mark came meanwhile). */
  deferred: boolean;
}

/** A fence point: grace period `target` of `slot` and `targetInd` of the INDIRECT slot must end. */
export interface FencePoint {
  readonly slot: number;
  readonly target: number;
  readonly targetInd: number;
}

interface Waiter {
  point: FencePoint;
  fire: () => void;
  since: number;
}

export class DmaFence extends Module {
  /** Live holds per (slot, phase). */
  private readonly counts = new Int32Array((SLOTS + 1) * 2);
  /** The phase new holds of each slot take. */
  private readonly phase = new Uint8Array(SLOTS + 1);
  /** Slots with a grace period running or ended (only those ever marked). */
  private readonly graces = new Map<number, Grace>();
  /** Grace periods running (so `release` looks them up only then). */
  private running = 0;
  private nHolds = 0;
  private readonly waiters: Waiter[] = [];
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

  /** An invalidation is waiting for translated DMA to finish. */
  override hasWork(): boolean {
    return this.waiters.length > 0;
  }

  /** Translations whose DMA is not over (every slot). */
  get holds(): number {
    return this.nHolds;
  }

  /** Holds on mkey index `index`'s slot (both phases). */
  holdsOn(index: number): number {
    const s = index === INDIRECT_SLOT ? INDIRECT_SLOT : index & SLOT_MASK;
    return this.counts[s * 2] + this.counts[s * 2 + 1];
  }

  /** A translation through mkey index `index` (or INDIRECT_SLOT) starts: its token, for `release`. */
  hold(index: number): number {
    const s = index === INDIRECT_SLOT ? INDIRECT_SLOT : index & SLOT_MASK;
    const t = s * 2 + this.phase[s];
    this.counts[t]++;
    this.nHolds++;
    if (this.nHolds > this.cHoldsPeak.value) this.cHoldsPeak.value = this.nHolds;
    if (this.traced) this.sHolds.setNow(Math.min(this.nHolds, 0xffff));
    return t + 1;
  }

  /** The DMA through the translation of hold `token` is over (0 does nothing). */
  release(token: number): void {
    if (token === 0) return;
    const t = token - 1;
    const n = --this.counts[t];
    if (n < 0) throw new Error(`${this.path}: release of token ${token}, which holds nothing`);
    this.nHolds--;
    if (this.traced) this.sHolds.setNow(Math.min(this.nHolds, 0xffff));
    if (n === 0 && this.running > 0) {
      const s = t >> 1;
      const g = this.graces.get(s);
      if (g !== undefined && g.old === (t & 1)) this.endGrace(s, g);
    }
  }

  /**
   * An invalidation of mkey index `index` has landed: the point its completion waits for (every
   * hold on its slot, and on the INDIRECT slot, taken before now released).
   */
  mark(index: number): FencePoint {
    this.cDrains.inc();
    const slot = index & SLOT_MASK;
    return { slot, target: this.owe(slot), targetInd: this.owe(INDIRECT_SLOT) };
  }

  /** Every hold point `p` waits for is released. */
  passed(p: FencePoint): boolean {
    return this.doneOf(p.slot) >= p.target && this.doneOf(INDIRECT_SLOT) >= p.targetInd;
  }

  /** Tells `target` (fire) once point `p`, not passed yet, has passed. */
  notify(p: FencePoint, target: { fire(): void }): void {
    this.cWaited.inc();
    this.waiters.push({ point: p, fire: () => target.fire(), since: this.sim.now });
    this.sDraining.setNow(Math.min(this.waiters.length, 0xff));
  }

  /**
   * Resolves once every hold on mkey index `index` (and on INDIRECT) taken before now is
   * released: DESTROY_MKEY's wait (at once when none is).
   */
  drain(index: number): Promise<void> {
    const p = this.mark(index);
    if (this.passed(p)) return Promise.resolve();
    return new Promise<void>((resolve) => this.notify(p, { fire: resolve }));
  }

  /** The grace period of `slot` a mark now needs (starting one if none is running). */
  private owe(slot: number): number {
    let g = this.graces.get(slot);
    if (g === undefined) {
      g = { old: -1, started: 0, done: 0, deferred: false };
      this.graces.set(slot, g);
    }
    if (g.old >= 0) {
      g.deferred = true; // holds taken since the running one began: the next grace period
      return g.started + 1;
    }
    this.startGrace(slot, g);
    return g.started;
  }

  private startGrace(slot: number, g: Grace): void {
    g.started++;
    g.old = this.phase[slot];
    this.phase[slot] ^= 1;
    if (this.counts[slot * 2 + g.old] === 0) {
      g.old = -1;
      g.done = g.started;
      if (g.deferred) {
        g.deferred = false;
        this.startGrace(slot, g);
      }
    } else this.running++;
  }

  private endGrace(slot: number, g: Grace): void {
    this.running--;
    g.old = -1;
    g.done = g.started;
    if (g.deferred) {
      g.deferred = false;
      this.startGrace(slot, g);
    }
    this.settle();
  }

  private doneOf(slot: number): number {
    return this.graces.get(slot)?.done ?? 0;
  }

  /** Waiters whose point has passed go on, in the order they came. */
  private settle(): void {
    const w = this.waiters;
    let kept = 0;
    let resumed = false;
    for (let i = 0; i < w.length; i++) {
      const x = w[i];
      if (this.passed(x.point)) {
        this.hWait.add(this.sim.now - x.since);
        x.fire();
        resumed = true;
      } else w[kept++] = x;
    }
    w.length = kept;
    this.sDraining.setNow(Math.min(w.length, 0xff));
    if (resumed) this.sim.noteResume();
  }
}
