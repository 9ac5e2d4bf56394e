/**
 * Completion channels (ibv_comp_channel) and the queue of asynchronous events
 * (ibv_get_async_event): both filled by the driver's EQ interrupt handler (driver/core/eq.ts) and
 * read by processes that wait in simulated time.
 */
import { SimEvent, type Sim } from '../sim/index.ts';
import { VerbsError, checkObject, checkU53 } from './verbs_error.ts';
import type { Cq } from './cq.ts';
import type { Testbed } from './testbed.ts';

/** An asynchronous event (API.md "Completion channels and asynchronous events"). */
export interface AsyncEvent {
  type: 'QP_FATAL' | 'QP_REQ_ERR' | 'QP_ACCESS_ERR' | 'COMM_EST' | 'SQ_DRAINED' | 'CQ_ERR' | 'PATH_MIG' | 'DEVICE_FATAL';
  qpNum?: number;
  cqNum?: number;
}

/** A FIFO of items that processes wait on, with a timeout. */
export class EventFifo<T> {
  private readonly items: T[] = [];
  private readonly ev: SimEvent;

  constructor(
    private readonly sim: Sim,
    /** Why nothing more will come (the device is in error), or null: an empty take then fails. */
    private readonly failure: () => string | null = () => null,
  ) {
    this.ev = new SimEvent(sim);
  }

  /** Wakes the waiters to look at `failure` again. */
  wakeAll(): void {
    this.ev.notify();
  }

  push(item: T): void {
    this.items.push(item);
    this.ev.notify();
  }

  get length(): number {
    return this.items.length;
  }

  /** Drops the items `drop` picks (a destroyed CQ's events nobody read). */
  remove(drop: (item: T) => boolean): void {
    for (let i = this.items.length - 1; i >= 0; i--) if (drop(this.items[i])) this.items.splice(i, 1);
  }

  /** The oldest item, waiting up to `timeout` ps for one (ETIMEDOUT after). */
  async take(what: string, timeout: number | undefined): Promise<T> {
    if (timeout !== undefined) checkU53(`${what}: timeout`, timeout);
    const deadline = timeout === undefined ? Infinity : this.sim.now + timeout;
    let armed = false;
    while (this.items.length === 0) {
      const failed = this.failure();
      if (failed !== null) throw new VerbsError('EIO', `${what}: ${failed}`);
      if (this.sim.now >= deadline) throw new VerbsError('ETIMEDOUT', `${what}: nothing within ${timeout} ps`);
      if (!armed && deadline !== Infinity) {
        armed = true;
        this.sim.at(deadline, { fire: () => this.ev.notify() });
      }
      await this.ev.wait();
    }
    return this.items.shift()!;
  }
}

/** ibv_comp_channel: the CQs created with it report their completion events here. */
export class CompChannel {
  private readonly q: EventFifo<Cq>;

  /** @internal Made by ctx.createCompChannel(); `failure` says why no more event will come. */
  constructor(
    /** The testbed whose context made it: a CQ of another testbed cannot report here. */
    readonly tb: Testbed,
    readonly ctxIndex: number,
    failure: () => string | null = () => null,
  ) {
    this.q = new EventFifo<Cq>(tb.sim, failure);
  }

  /** @internal The device went into error: waiters look again (and fail once nothing is left). */
  wakeAll(): void {
    this.q.wakeAll();
  }

  /** @internal The EQ handler saw a COMP EQE for `cq`. */
  deliver(cq: Cq): void {
    this.q.push(cq);
  }

  /**
   * @internal `cq` was destroyed: its events not yet read go (the kernel's
   * ib_uverbs_release_ucq, drivers/infiniband/core/uverbs_main.c:143, frees the CQ's unread
   * events from the channel's queue), so getCqEvent never returns a destroyed CQ.
   */
  forget(cq: Cq): void {
    this.q.remove((c) => c === cq);
  }

  /**
   * ibv_get_cq_event: the CQ of the next completion event, waiting for it (after the COMP EQE,
   * the interrupt and the handler's latency). The CQ must be armed again (`reqNotify`) for
   * another event. A timeout rejects with ETIMEDOUT.
   */
  async getCqEvent(opts: { timeout?: number } = {}): Promise<Cq> {
    checkObject('getCqEvent: options', opts);
    this.tb.checkInRun('getCqEvent');
    const cq = await this.q.take('getCqEvent', opts.timeout);
    cq.noteEvent();
    return cq;
  }
}
