/**
 * A completion queue (ibv_cq): the driver reads CQEs from the CQ buffer in host memory
 * (ownership by the owner bit, spec/mlx5.md "CQE") and turns them into work completions.
 */
import type { Context } from './context.ts';
import type { WcOpcode, WorkCompletion } from './types.ts';
import type { Qp } from './qp.ts';
import { VerbsError, shown } from './verbs_error.ts';
import { SimEvent } from '../sim/index.ts';
import { microtask } from '../sim/microtask.ts';
import type { MemWatch } from '../rtl/memory/host_mem.ts';
import { decodeCqe } from '../rtl/formats/cqe.ts';
import { CqeOpcode, syndromeToWcStatus } from '../rtl/formats/constants.ts';
import { cqArmWord } from '../rtl/completion/cq_writer.ts';
import type { CompChannel } from './comp_channel.ts';
import type { DmaBuf } from './core/dma_pool.ts';



const NO_FLAGS: ReadonlySet<'WITH_IMM' | 'WITH_INV'> = new Set();
const WITH_IMM: ReadonlySet<'WITH_IMM' | 'WITH_INV'> = new Set(['WITH_IMM']);
const WITH_INV: ReadonlySet<'WITH_IMM' | 'WITH_INV'> = new Set(['WITH_INV']);

export class Cq {
  /** Consumer counter. */
  private ci = 0;
  private readonly cqe = new Uint8Array(64); // poll reads each CQE here (no allocation)
  private readonly cqeView = new DataView(this.cqe.buffer);
  /** Live QPs completing here, by number (to find the work request of a CQE; destroy's EBUSY rule). */
  readonly qps = new Map<number, Qp>();
  /** Set by destroy: every later call is EINVAL. */
  destroyed = false;
  /** @internal The driver's own CQ (the UMR QP's): a removal of the device does not fail its waits, only the device's error does. */
  kernel = false;
  /** The CQ buffer, for inspection: virtual address, CQEs, stride (as `qp.sq`). */
  readonly buf: { addr: number; cqeCnt: number; stride: number };
  /**
   * What a polling CPU sees: a DMA write landing on the CQE slot a wait needs (CQEs are written
   * in order, so the last one it needs). The driver learns of CQEs from host memory only.
   */
  private readonly landed: SimEvent;

  /** @internal The device went into error: a wait looks again (and fails once nothing is left). */
  wakeWaiters(): void {
    this.landed.notify();
  }
  private readonly bufVa: number;
  private readonly dbrVa: number;
  private readonly watchSlot: MemWatch;
  /** What a stalled run says this CQ's wait waits for. */
  private waitWant = 0;
  private waitGot = 0;
  private readonly waiter = {
    describe: (): string =>
      `cq.wait: ${this.waitWant} completion(s) on CQ 0x${this.cqn.toString(16)} of adapter ${this.ctx.index}, ${this.waitGot} polled so far`,
  };

  /** arm_sn: counts the completion events software received (rdma-core mlx5_cq_event). */
  private armSn = 0;
  /** Events received (getCqEvent) and acknowledged (ackEvents). */
  private eventsGot = 0;
  private eventsAcked = 0;

  /** @internal ctx.createCq makes a CQ. */
  constructor(
    readonly ctx: Context,
    readonly cqn: number,
    readonly size: number,
    private readonly bufMem: DmaBuf,
    private readonly dbrMem: DmaBuf,
    /** The completion channel the CQ reports to, or null. */
    readonly channel: CompChannel | null,
  ) {
    this.bufVa = bufMem.addr;
    this.dbrVa = dbrMem.addr;
    this.buf = { addr: this.bufVa, cqeCnt: size, stride: 64 };
    const ev = (this.landed = new SimEvent(ctx.tb.sim));
    this.watchSlot = { lo: 0, hi: 0, fire: () => ev.notify() };
  }

  /**
   * ibv_req_notify_cq: arms the CQ for one completion event (with `solicitedOnly`, for the next
   * solicited or error CQE). Writes the arm word to the doorbell record (dbrec[1]), then rings
   * the 64-bit UAR CQ doorbell (spec/mlx5.md "CQ arm"). Needs a completion channel.
   */
  reqNotify(opts: { solicitedOnly?: boolean } = {}): void {
    this.checkAlive('reqNotify');
    if (opts === null || typeof opts !== 'object') throw new VerbsError('EINVAL', 'reqNotify: options must be an object');
    if (opts.solicitedOnly !== undefined && typeof opts.solicitedOnly !== 'boolean') throw new VerbsError('EINVAL', 'reqNotify: solicitedOnly must be a boolean');
    if (this.channel === null) throw new VerbsError('EINVAL', 'reqNotify: the CQ has no completion channel (createCq(n, { channel }))');
    this.ctx.tb.checkInRun('reqNotify');
    const word = cqArmWord(this.armSn & 3, opts.solicitedOnly === true, this.ci);
    this.dbrWrite(4, word);
    this.ctx.hca.uar.ringCq(word, this.cqn);
  }

  private readonly dbrWord = new Uint8Array(4);
  private readonly dbrWordView = new DataView(this.dbrWord.buffer);
  /** Writes a big-endian word of the doorbell record: set_ci at 0, the arm word at 4. */
  private dbrWrite(off: number, v: number): void {
    this.dbrWordView.setUint32(0, v >>> 0);
    this.ctx.hca.host.writeFrom(this.dbrVa + off, this.dbrWord, 0, 4);
  }

  /** @internal getCqEvent returned this CQ: the next arm carries the next sequence number. */
  noteEvent(): void {
    this.armSn++;
    this.eventsGot++;
  }

  /** ibv_ack_cq_events: acknowledges `n` events received by getCqEvent. */
  ackEvents(n: number): void {
    this.checkAlive('ackEvents');
    this.ctx.tb.checkInRun('ackEvents');
    if (!(Number.isSafeInteger(n) && n >= 0 && this.eventsAcked + n <= this.eventsGot)) {
      throw new VerbsError('EINVAL', `ackEvents: n must be an integer in 0..${this.eventsGot - this.eventsAcked} (events received and not acknowledged), got ${shown(n)}`);
    }
    this.eventsAcked += n;
  }

  /** Any call on a destroyed object: EINVAL (spec/semantics.md "Verbs calls"). */
  checkAlive(what: string): void {
    if (this.destroyed) throw new VerbsError('EINVAL', `${what}: the CQ was destroyed`);
  }

  /**
   * ibv_destroy_cq: EBUSY while a live QP uses it as send or receive CQ (the kernel's uverbs
   * usecnt rule: uverbs_free_cq -> ib_destroy_usecnt in include/rdma/ib_verbs.h returns -EBUSY
   * while cq->usecnt, which ib_create_qp raises, is non-zero); else DESTROY_CQ (0x401).
   *
   * EBUSY too while completion events returned by getCqEvent are not acknowledged (ackEvents).
   * libibverbs' ibv_destroy_cq blocks there until ibv_ack_cq_events catches up; here that wait
   * would hang a process that forgot to ack (nothing else ever acks), so the call fails at once
   * and the CQ stays usable: ackEvents, then destroy again. Events the channel holds but no
   * getCqEvent has returned are dropped with the CQ (the kernel's ib_uverbs_release_ucq).
   */
  async destroy(): Promise<void> {
    this.checkAlive('destroy');
    this.ctx.tb.checkInRun('destroy');
    const users = [...this.qps.values()].filter((q) => !q.destroyed);
    if (users.length > 0) {
      throw new VerbsError('EBUSY', `destroy: the CQ is still the send or receive CQ of ${users.length} QP(s) (qpn 0x${users[0].qpNum.toString(16)})`);
    }
    const unacked = this.eventsGot - this.eventsAcked;
    if (unacked > 0) {
      throw new VerbsError('EBUSY', `destroy: ${unacked} completion event(s) returned by getCqEvent are not acknowledged (ackEvents(${unacked}) first; libibverbs would block here)`);
    }
    await this.removeHw();
  }

  /**
   * @internal DESTROY_CQ; also the device's removal (Context.disassociate), where events not
   * acknowledged go with the CQ. False (nothing done) while a live QP uses it (ib_destroy_cq_user's
   * usecnt, verbs.c:2201-2202).
   */
  async removeHw(): Promise<boolean> {
    if (this.destroyed) return true;
    if ([...this.qps.values()].some((q) => !q.destroyed)) return false;
    this.channel?.forget(this);
    this.destroyed = true;
    this.ctx.cqs.delete(this.cqn);
    this.ctx.uobjects.delete(this);
    await this.ctx.cmd(this.ctx.cmdq.exec({ op: 'DESTROY_CQ', cqn: this.cqn }), 'destroy');
    // the device forgot the CQ: its ring and doorbell record serve the next queue
    this.ctx.dma.release(this.bufMem);
    this.ctx.dma.release(this.dbrMem);
    return true;
  }

  /** ibv_poll_cq: up to `n` completions that are there now (no simulated time passes). */
  poll(n = 16): WorkCompletion[] {
    this.checkAlive('poll');
    this.ctx.tb.checkInRun('poll');
    if (!(Number.isSafeInteger(n) && n >= 0)) throw new VerbsError('EINVAL', `poll: n must be a non-negative integer, got ${shown(n)}`);
    const out: WorkCompletion[] = [];
    const ci0 = this.ci;
    const host = this.ctx.hca.host;
    while (out.length < n) {
      const at = this.bufVa + (this.ci & (this.size - 1)) * 64;
      const bytes = this.cqe;
      host.readInto(at, bytes, 0, 64);
      const opOwn = bytes[63];
      // software owns CQE ci when its opcode is valid and the owner bit matches the pass
      if (opOwn >> 4 === CqeOpcode.INVALID || (opOwn & 1) !== ((this.ci & this.size) !== 0 ? 1 : 0)) break;
      const c = decodeCqe(this.cqeView, 0);
      this.ci++;
      const wc = this.toWc(c);
      if (wc) out.push(wc);
    }
    // set_ci in the doorbell record, once a poll (mlx5 update_cons_index): the hardware's view of the room
    if (this.ci !== ci0) this.dbrWrite(0, this.ci & 0xffffff);
    return out;
  }

  /**
   * Advances simulated time until `n` completions have been polled. With a timeout, throws
   * ETIMEDOUT (keeping what was polled in `partial` of the error) when it passes first.
   */
  async wait(n = 1, opts: { timeout?: number } = {}): Promise<WorkCompletion[]> {
    this.checkAlive('wait');
    this.ctx.tb.checkInRun('cq.wait');
    if (!(Number.isSafeInteger(n) && n >= 1)) throw new VerbsError('EINVAL', `cq.wait: n must be a positive integer, got ${shown(n)}`);
    if (opts.timeout !== undefined && !(Number.isSafeInteger(opts.timeout) && opts.timeout >= 0)) {
      throw new VerbsError('EINVAL', `cq.wait: timeout must be a whole, non-negative number of ps below 2^53, got ${shown(opts.timeout)}`);
    }
    const out: WorkCompletion[] = [];
    const sim = this.ctx.tb.sim;
    const deadline = opts.timeout === undefined ? Infinity : sim.now + opts.timeout;
    const ev = this.landed;
    const host = this.ctx.hca.host;
    const mem = this.ctx.hca.mem;
    let armed = false;
    for (;;) {
      out.push(...this.poll(n - out.length));
      if (out.length >= n) return out;
      const fatal = this.kernel ? this.ctx.hwFatal : this.ctx.fatal;
      if (fatal !== null) {
        // the device is in error (an EQ overran): completions that need a lost event (a page
        // fault's) would never come, so the wait ends here instead of hanging; what was polled
        // travels with the error
        throw Object.assign(new VerbsError('EIO', `cq.wait: ${out.length} of ${n} completions, and the device is in error: ${fatal}`), { partial: out });
      }
      if (sim.now >= deadline) {
        // what was polled is not lost: it travels with the error (API.md: `partial`)
        throw Object.assign(new VerbsError('ETIMEDOUT', `cq.wait: ${out.length} of ${n} completions within ${opts.timeout} ps`), { partial: out });
      }
      // wake when the last CQE this wait needs lands in host memory, or once at the deadline
      if (!armed && deadline !== Infinity) {
        armed = true;
        sim.at(deadline, { fire: () => ev.notify() });
      }
      const slot = (this.ci + (n - out.length) - 1) & (this.size - 1);
      const pa = host.dmaAddress(this.bufVa + slot * 64);
      this.watchSlot.lo = pa;
      this.watchSlot.hi = pa + 64;
      mem.watch(this.watchSlot);
      this.waitWant = n;
      this.waitGot = out.length;
      sim.waitingFor(this.waiter);
      try {
        await ev.wait();
      } finally {
        mem.unwatch(this.watchSlot);
        sim.doneWaiting(this.waiter);
      }
    }
  }

  /**
   * @internal `wait(1)` for a completion handler instead of a process (the driver's UMR CQ,
   * mlx5r_umr_done): the same polls, the same watch on the slot of the CQE it needs, the same
   * error once the device is in error; `done` gets what a wait would return or throw. It runs
   * where the waiting process would have resumed (a microtask after the landing that wakes it),
   * without a process, its promise hops and its wait's validations made for every UMR.
   */
  waitOne(done: (wcs: WorkCompletion[] | null, err: unknown) => void, again = false): void {
    let wcs: WorkCompletion[];
    try {
      // the wait's own checks on entry; after a wake-up, those of the poll (as wait's loop)
      if (!again) {
        this.checkAlive('wait');
        this.ctx.tb.checkInRun('cq.wait');
      }
      wcs = this.poll(1);
      if (wcs.length === 0) {
        const fatal = this.kernel ? this.ctx.hwFatal : this.ctx.fatal;
        if (fatal !== null) {
          throw Object.assign(new VerbsError('EIO', `cq.wait: 0 of 1 completions, and the device is in error: ${fatal}`), { partial: wcs });
        }
      }
    } catch (e) {
      microtask(() => done(null, e)); // as the rejection of a wait reaches its process
      return;
    }
    if (wcs.length > 0) {
      microtask(() => done(wcs, null));
      return;
    }
    const host = this.ctx.hca.host;
    const mem = this.ctx.hca.mem;
    const sim = this.ctx.tb.sim;
    const pa = host.dmaAddress(this.bufVa + (this.ci & (this.size - 1)) * 64);
    this.watchSlot.lo = pa;
    this.watchSlot.hi = pa + 64;
    mem.watch(this.watchSlot);
    this.waitWant = 1;
    this.waitGot = 0;
    sim.waitingFor(this.waiter);
    void this.landed.wait().then(() => {
      mem.unwatch(this.watchSlot);
      sim.doneWaiting(this.waiter);
      this.waitOne(done, true);
    });
  }

  private toWc(c: ReturnType<typeof decodeCqe>): WorkCompletion | null {
    const qp = this.qps.get(c.qpn);
    // a CQE of a destroyed QP is consumed unseen: rdma-core's mlx5_destroy_qp cleans the QP's
    // CQEs out of its CQs (__mlx5_cq_clean), so none of its work completes after destroy
    if (qp === undefined) return null;
    const err = c.opcode === CqeOpcode.REQ_ERR || c.opcode === CqeOpcode.RESP_ERR;
    const status = err ? syndromeToWcStatus(c.syndrome) : 'SUCCESS';
    // the driver's view of its QP: an error completion means the QP is in ERR
    if (err) qp.sawError();
    const log = this.ctx.tb.txlog;
    if (log !== null) log.polled(this.ctx.index, c.qpn, c.opcode === CqeOpcode.REQ || c.opcode === CqeOpcode.REQ_ERR, c.wqeCounter);
    if (c.opcode === CqeOpcode.REQ || c.opcode === CqeOpcode.REQ_ERR) {
      const rec = qp.takeSendRecord(c.wqeCounter);
      return {
        wrId: rec?.wrId ?? 0,
        status,
        opcode: rec?.opcode ?? 'SEND',
        byteLen: err ? 0 : c.byteCnt,
        qpNum: c.qpn,
        wcFlags: NO_FLAGS,
        vendorErr: c.vendorErrSynd,
      };
    }
    const wrId = qp.takeRecvRecord(c.wqeCounter) ?? 0;
    let opcode: WcOpcode = 'RECV';
    let flags = NO_FLAGS;
    const wc: WorkCompletion = { wrId, status, opcode, byteLen: err ? 0 : c.byteCnt, qpNum: c.qpn, wcFlags: flags, vendorErr: c.vendorErrSynd };
    if (c.opcode === CqeOpcode.RESP_SEND_IMM) {
      wc.wcFlags = flags = WITH_IMM;
      wc.immData = c.immInvalPkey;
    } else if (c.opcode === CqeOpcode.RESP_WR_IMM) {
      wc.opcode = opcode = 'RECV_RDMA_WITH_IMM';
      wc.wcFlags = WITH_IMM;
      wc.immData = c.immInvalPkey;
    } else if (c.opcode === CqeOpcode.RESP_SEND_INV) {
      wc.wcFlags = WITH_INV;
      wc.invalidatedRkey = c.immInvalPkey;
    }
    return wc;
  }
}
