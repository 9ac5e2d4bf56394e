import type { Module } from './module.ts';
import type { Sim } from './sim.ts';
import type { Committable } from './sim.ts';
import type { EventTarget } from './event_queue.ts';
import type { Signal } from './signal.ts';
import { SimEvent } from './sim_event.ts';
import { checkPs, type Ps } from './time.ts';

/** Options of a FIFO. */
export interface FifoOptions {
  /** Items it holds (default 2). Full means back-pressure: `canPush()` is false. */
  capacity?: number;
  /** Extra time in ps from push to visibility (a fixed-latency channel; default 0). */
  latency?: Ps;
}

/**
 * A bounded FIFO channel between modules with valid/ready semantics, as a pipe queue: an item
 * pushed during an edge becomes visible to the consumer from the next edge (after the commit,
 * plus `latency`), and space freed by a pop becomes usable from the next edge too. So results
 * never depend on which of producer and consumer ticks first.
 *
 * It wakes its consumer when an item becomes visible, and its producer when space frees up
 * after the producer found it full (`canPush()` false): a producer that never saw it full has
 * nothing to retry, so a pop does not cost it an edge.
 * Occupancy (`count`) is traced, with `valid` (not empty) and `ready` (not full).
 */
export class Fifo<T> implements Committable, EventTarget {
  readonly capacity: number;
  readonly latency: Ps;
  private cons: Module | null = null;
  private wakeAt = -1; // time of the pending latency wake event, -1 when none
  /** The module that pushes (woken when space frees), or null for software. */
  producer: Module | null = null;
  /** Notified after every commit that changed the FIFO, for software processes. */
  readonly changed: SimEvent;
  private readonly sim: Sim;
  private readonly buf: (T | undefined)[];
  private readonly readyAt: Float64Array;
  private head = 0;
  private count = 0; // committed items (visible once readyAt <= now)
  private pushed = 0; // this cycle
  private popped = 0; // this cycle
  private dirty = false;
  private blocked = false; // canPush() said no since the last pop commit
  /** Processes in pushWait waiting on `changed` for room (each counted until it resumes). */
  private roomWaiters = 0;
  private readonly sCount: Signal;
  private readonly sValid: Signal;
  private readonly sReady: Signal;
  /** Items pushed and popped over the run. */
  readonly pushes;
  readonly pops;

  constructor(
    readonly owner: Module,
    readonly name: string,
    opts: FifoOptions = {},
  ) {
    this.sim = owner.sim;
    this.capacity = opts.capacity ?? 2;
    this.latency = checkPs(opts.latency ?? 0, `fifo ${name} latency`);
    if (!(Number.isInteger(this.capacity) && this.capacity >= 1)) {
      throw new RangeError(`fifo ${owner.path}.${name}: capacity must be a positive integer`);
    }
    this.buf = new Array<T | undefined>(this.capacity).fill(undefined);
    this.readyAt = new Float64Array(this.capacity);
    const w = Math.max(1, Math.ceil(Math.log2(this.capacity + 1)));
    this.sValid = owner.signal(`${name}_valid`, 1);
    this.sReady = owner.signal(`${name}_ready`, 1, { init: 1 });
    this.sCount = owner.signal(`${name}_count`, w);
    this.changed = new SimEvent(owner.sim);
    this.pushes = owner.stats.counter(`${name}_pushes`);
    this.pops = owner.stats.counter(`${name}_pops`);
  }

  /** The module that pops (woken when an item becomes visible), or null for software. */
  get consumer(): Module | null {
    return this.cons;
  }
  set consumer(m: Module | null) {
    this.cons = m;
    if (m !== null && this.latency > 0) m.latencyInputs.push(this as Fifo<unknown>);
  }

  /** Committed items, visible or still in flight through the latency. */
  get size(): number {
    return this.count;
  }

  /** True when a push this cycle will be accepted. */
  canPush(): boolean {
    if (this.count + this.pushed < this.capacity) return true;
    this.blocked = true;
    return false;
  }

  /** Pushes an item (visible from the next edge). Throws when full: check canPush() first. */
  push(item: T): void {
    if (this.count + this.pushed >= this.capacity) {
      throw new Error(`fifo ${this.owner.path}.${this.name}: push while full (check canPush())`);
    }
    const i = this.wrap(this.head + this.count + this.pushed);
    this.buf[i] = item;
    // (a FIFO without latency never reads it: see canPop)
    if (this.latency !== 0) this.readyAt[i] = this.sim.now + this.latency;
    this.pushed++;
    this.touch();
  }

  /** Whether the consumer popped an item this edge (before the commit). */
  get poppedNow(): boolean {
    return this.popped > 0;
  }

  /** True when an item is visible to pop now. */
  canPop(): boolean {
    if (this.popped >= this.count) return false;
    // without latency a committed item is visible: it was pushed at or before now (one typed
    // array less to touch on the hot path)
    return this.latency === 0 || this.readyAt[this.wrap(this.head + this.popped)] <= this.sim.now;
  }

  /** The item a pop would return. Check canPop() first. */
  peek(): T {
    if (!this.canPop()) throw new Error(`fifo ${this.owner.path}.${this.name}: peek with nothing visible`);
    return this.buf[this.wrap(this.head + this.popped)] as T;
  }

  /** Removes and returns the oldest visible item. Check canPop() first. */
  pop(): T {
    if (!this.canPop()) throw new Error(`fifo ${this.owner.path}.${this.name}: pop with nothing visible`);
    const i = this.wrap(this.head + this.popped);
    const item = this.buf[i] as T;
    this.buf[i] = undefined;
    this.popped++;
    this.touch();
    return item;
  }

  /** @internal The update phase. */
  commit(): void {
    this.dirty = false;
    const pushed = this.pushed;
    const popped = this.popped;
    this.head = this.wrap(this.head + popped);
    this.count += pushed - popped;
    this.pushed = 0;
    this.popped = 0;
    this.pushes.value += pushed;
    this.pops.value += popped;
    if (this.sCount.q !== this.count) {
      this.sCount.setNow(this.count);
      this.sValid.setNow(this.count > 0 ? 1 : 0);
      this.sReady.setNow(this.count < this.capacity ? 1 : 0);
    }
    if (pushed > 0 && this.cons !== null) {
      // an awake consumer polls; one that sleeps gets a wake event when its item is due (see armWake)
      if (this.latency === 0) this.cons.wake();
      else if (!this.cons.awake) this.armWake();
    }
    if (popped > 0 && this.blocked) {
      this.blocked = false;
      if (this.producer !== null) this.producer.wake();
    }
    if (this.changed.hasWaiters && !this.nothingToWake(popped)) this.changed.notify();
  }

  /**
   * A commit that popped nothing frees no room: when every waiter is a pushWait waiting for room,
   * each would wake to find the FIFO as full as before and wait again, a drain of the processes
   * for nothing. Skipped only when no other process resumed since the last drain: then nothing
   * queued ahead of those waiters could run between their wake and their wait again, so the
   * waiters stay in the order their new waits would have taken, and every later step is the same.
   */
  private nothingToWake(popped: number): boolean {
    return popped === 0 && this.roomWaiters === this.changed.waiterCount && this.sim.noResumePending;
  }

  /**
   * @internal Schedules one wake of the consumer for when the oldest unpopped item becomes
   * visible. Called when the consumer goes to sleep with items in flight, or when items
   * arrive for a sleeping consumer.
   */
  armWake(): void {
    // the oldest item not popped: a consumer that sleeps in the tick that popped the head
    // (before the commit) waits for the next one, not for the head it already took, which
    // would wake it on the next edge to find nothing visible
    if (this.count - this.popped === 0) return;
    // 1 ps early: the wake lands the consumer on the first edge at or after the item is due
    const t = Math.max(this.readyAt[this.wrap(this.head + this.popped)] - 1, this.sim.now);
    if (this.wakeAt >= 0 && this.wakeAt <= t) return;
    this.wakeAt = t;
    this.sim.at(t, this);
  }

  /** @internal A latency timer expired: the consumer has an item to see. */
  fire(): void {
    if (this.wakeAt === this.sim.now) this.wakeAt = -1;
    this.cons?.wake();
    this.changed.notify();
  }

  /** Software: waits until an item is visible, then pops it. */
  async popWait(): Promise<T> {
    while (!this.canPop()) await this.changed.wait();
    return this.pop();
  }

  /** Software: waits until there is space, then pushes. */
  async pushWait(item: T): Promise<void> {
    while (!this.canPush()) {
      this.roomWaiters++;
      await this.changed.wait();
      this.roomWaiters--;
    }
    this.push(item);
  }

  /** A ring index (i < 2 * capacity): cheaper than a modulo on the hot path. */
  private wrap(i: number): number {
    return i >= this.capacity ? i - this.capacity : i;
  }

  private touch(): void {
    if (!this.dirty) {
      this.dirty = true;
      this.sim.markDirtyOther(this);
    }
  }
}
