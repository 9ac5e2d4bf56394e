/**
 * A device context (ibv_context): one adapter seen by the driver. Objects are created through
 * firmware commands (sent by core/cmd.ts, mlx5_core's job) and cost their firmware latency in
 * simulated time.
 */
import type { Testbed } from './testbed.ts';
import type { Hca } from '../rtl/hca.ts';
import { FenceMode, HcaCapOpMod } from '../rtl/formats/constants.ts';
import { UMR_FENCE_CAP, deviceAttrOf, type DeviceAttr, type HcaGeneralCaps, type HcaOdpCaps } from '../rtl/firmware/hca_caps.ts';
import { VerbsError, checkObject, checkU32, checkU53, removing, shown } from './verbs_error.ts';
import { Pd } from './pd.ts';
import { Cq } from './cq.ts';
import { CmdError } from '../rtl/firmware/cmd_types.ts';
import { MkeyPool } from './mkey_pool.ts';
import { DriverUmr } from './umr.ts';
import { ALL_EVENTS_MASK, DriverEq } from './core/eq.ts';
import { CompChannel, EventFifo, type AsyncEvent } from './comp_channel.ts';
import { EventType } from '../rtl/formats/constants.ts';
import type { Eqe } from '../rtl/formats/eqe.ts';
import type { Qp } from './qp.ts';
import { OdpHandler } from './odp.ts';
import { DmaPool } from './core/dma_pool.ts';
import { CmdQueue } from './core/cmd.ts';

/** The events of QPs, by EQE type, as ibv_event_type names them (spec/mlx5.md "Other event data"). */
const QP_EVENTS: Partial<Record<number, AsyncEvent['type']>> = {
  [EventType.WQ_CATAS_ERROR]: 'QP_FATAL',
  [EventType.WQ_INVAL_REQ_ERROR]: 'QP_REQ_ERR',
  [EventType.WQ_ACCESS_ERROR]: 'QP_ACCESS_ERR',
  [EventType.COMM_EST]: 'COMM_EST',
  [EventType.SQ_DRAINED]: 'SQ_DRAINED',
  [EventType.PATH_MIG]: 'PATH_MIG',
};

/**
 * Completion vectors a context offers (ibv_context.num_comp_vectors; mlx5 has one completion EQ
 * per vector, as many as CPUs): a CQ's compVector chooses its EQ (README "Events").
 */
export const NUM_COMP_VECTORS = 8;

/** A verbs object a context made (a uverbs uobject): PDs, CQs, QPs, MRs, windows. */
export interface UObject {
  readonly destroyed: boolean;
  /** Destroys it by its command; false (nothing done) while it is still in use. */
  removeHw(): Promise<boolean>;
}

/** Each adapter's UMR QP and MR cache (made with its first context, as at mlx5_ib's load). */
const deviceState = new WeakMap<Hca, { umr: DriverUmr; pool: MkeyPool }>();

export class Context {
  /** The driver's rolling 8-bit key tag (mlx5: a per-device counter), shared by MRs and windows. */
  private tag = 0;
  private eq: DriverEq | null = null;
  private eqSetup: Promise<DriverEq> | null = null;
  /** Completion EQs of vectors 1 and up (vector 0 is the event EQ's), made with their first CQ. */
  private readonly compEqs = new Map<number, Promise<DriverEq>>();
  /** Completion channels made here (woken when the device goes into error). */
  private readonly channels: CompChannel[] = [];
  /**
   * Why the device is in error (an EQ overran, reported by the device's health syndrome), or
   * null. From then on a wait for completions or events that nothing is left to satisfy fails
   * with EIO naming it, instead of waiting for what was lost.
   */
  fatal: string | null = null;
  /**
   * @internal Set only by the device's own error (an EQ overran), not by a removal: the driver's
   * kernel objects (the UMR QP's CQ) keep working while the device is removed, as mlx5_ib's do.
   */
  hwFatal: string | null = null;
  /**
   * @internal The verbs objects made here (the ufile's uobjects list), each with its creation
   * number; MRs are not in it but carry theirs (`Mr.useq`) and are found through their PDs.
   */
  readonly uobjects = new Map<UObject, number>();
  /** @internal The next creation number of a verbs object. */
  nextUseq = 0;
  /** Live CQs by number (the EQ handler finds a COMP event's CQ). */
  readonly cqs = new Map<number, Cq>();
  /** Live QPs by number (the ODP fault handler reads a faulting WQE from its queue). */
  readonly qps = new Map<number, Qp>();
  /** On-demand paging: the fault handler and MMU notifier (made with the first ODP MR). */
  private odpHandler: OdpHandler | null = null;
  private readonly asyncEvents: EventFifo<AsyncEvent>;
  /** @internal Page-fault EQEs go here (the ODP fault handler, driver/odp.ts, installs itself). */
  onPageFault: ((e: Eqe) => void) | null = null;
  private attr: DeviceAttr | null = null;
  /**
   * @internal The fence mode a REG_MR carries (mlx5_ib's dev->umr_fence): the device's umr_fence
   * capability as mlx5 main.c:3043 mlx5_get_umr_fence maps it (NONE, SMALL, anything else
   * STRONG_ORDERING), read at queryDevice (mlx5_ib reads it at load, main.c:4376).
   */
  umrFence: number = FenceMode.STRONG_ORDERING;
  readonly tb: Testbed;
  /** @internal The driver's MR cache (free mkeys enabled by UMR): the adapter's, shared by its contexts. */
  readonly pool: MkeyPool;
  /** @internal The driver's UMR QP (umr.c): the MR cache's and ODP's translation updates; the adapter's, shared by its contexts. */
  readonly umr: DriverUmr;
  /** @internal Queue buffers and doorbell records: page lists for the device, reused after destroy. */
  readonly dma: DmaPool;
  /** @internal The firmware command interface (mlx5_core's cmd.c): every command goes through it. */
  readonly cmdq: CmdQueue;
  /** UMR descriptor buffers (physically contiguous) of destroyed QPs, for later QPs' lists. */
  readonly descFree: { addr: number; cap: number }[] = [];

  /** @internal tb.openDevice makes a context. */
  constructor(
    tb: Testbed,
    /** @internal The adapter this context drives. */
    readonly hca: Hca,
    readonly index: number,
  ) {
    this.tb = tb;
    // the UMR QP and the MR cache are the device's (mlx5_ib's dev->umrc and dev->cache, made at
    // load: main.c:4552-4563), shared by every context opened on it; the first open makes them
    const dev = deviceState.get(hca);
    if (dev !== undefined) {
      this.umr = dev.umr;
      this.pool = dev.pool;
    } else {
      this.umr = new DriverUmr(this);
      this.pool = new MkeyPool(this);
      deviceState.set(hca, { umr: this.umr, pool: this.pool });
    }
    this.dma = new DmaPool(hca.host);
    this.cmdq = CmdQueue.of(hca, tb.sim);
    this.asyncEvents = new EventFifo<AsyncEvent>(tb.sim, () => this.fatal);
    // mlx5_core's health poll finds the fatal syndrome and enters the error state
    // (mlx5_enter_error_state); mlx5_ib tells every context IB_EVENT_DEVICE_FATAL. Here the
    // driver hears of it an interrupt's latency after the overrun.
    hca.msix.onFatal((what) => tb.sim.after(hca.cfg.interruptPs, { fire: () => {
      this.hwFatal ??= what;
      this.enterError(what);
    } }));
  }

  /**
   * @internal The adapter is going away (tb.closeDevice): the MR cache stops, and the context is
   * in error as a disassociated one is (DEVICE_FATAL, then EIO: uverbs_std_types_async_fd.c:31,
   * uverbs_main.c:1261-1263).
   */
  removed(): void {
    this.pool.stop();
    this.enterError('the device was closed (tb.closeDevice)');
  }

  /**
   * @internal The device's removal, for this context (ib_uverbs_remove_one ->
   * uverbs_destroy_ufile_hw, rdma_core.c:880-941): every verbs object it made goes by its own
   * destroy command, newest first; one still in use (a PD with MRs, windows or QPs, a CQ with QPs,
   * an MR with bound windows: uverbs_std_types.c:127, verbs.c:2201) waits for the next pass,
   * until none is left. The adapter's own objects (the UMR QP, its CQ and PD) stay for
   * mlx5r_umr_resource_cleanup (DriverUmr.destroyResources). Objects made behind the driver's
   * back (raw commands) are left to TEARDOWN_HCA.
   */
  async disassociate(): Promise<void> {
    for (;;) {
      // newest first: alloc_commit_idr_uobject puts each uobject at the head of the list
      // (rdma_core.c:651) and __uverbs_cleanup_ufile walks it from the head (rdma_core.c:896)
      const all: [UObject, number][] = [];
      for (const [o, seq] of this.uobjects) {
        all.push([o, seq]);
        if (o instanceof Pd) for (const mr of o.liveMrs) all.push([mr, mr.useq]);
      }
      all.sort((a, b) => b[1] - a[1]);
      const left = all.map((e) => e[0]).filter((o) => !o.destroyed && !this.umr.owns(o));
      if (left.length === 0) return;
      let progress = false;
      for (const o of left) if (await removing(o.removeHw())) progress = true;
      if (!progress) return; // nothing can go (a connect in flight): TEARDOWN_HCA drops the rest
    }
  }

  /**
   * @internal mlx5_eq_table_destroy (eq.c:1227-1237): the completion EQs (`comp`, by vector), or
   * the event EQ (destroy_async_eqs' async EQ, eq.c:725), each by DESTROY_EQ.
   */
  async destroyEqs(comp: boolean): Promise<void> {
    const eqs = comp ? [...this.compEqs.keys()].sort((a, b) => a - b).map((v) => this.compEqs.get(v)!) : this.eqSetup !== null ? [this.eqSetup] : [];
    for (const p of eqs) {
      const eq = await p.catch(() => null);
      if (eq !== null) await removing(eq.destroy());
    }
  }

  /** The device is in error: DEVICE_FATAL to the application, and every wait looks again. */
  private enterError(what: string): void {
    if (this.fatal !== null) return;
    this.fatal = what;
    this.asyncEvents.push({ type: 'DEVICE_FATAL' });
    for (const cq of this.cqs.values()) cq.wakeWaiters();
    for (const ch of this.channels) ch.wakeAll();
  }

  /** @internal The context's EQ (created with the first CQ): completions, async events and page faults. */
  async eventQueue(): Promise<DriverEq> {
    if (this.eq) return this.eq;
    if (!this.eqSetup) this.eqSetup = DriverEq.create(this, this.hca.cfg.eventEqSize, ALL_EVENTS_MASK, (e) => this.onEqe(e));
    this.eq = await this.eqSetup;
    return this.eq;
  }

  /**
   * The EQ of completion vector `v`: vector 0 is the event EQ (async events, page faults and
   * the completions of its CQs, `eventEqSize` entries); every other vector has a completion EQ
   * of its own (`ioEqSize` entries, COMP events only), made with its first CQ.
   */
  private async compEq(v: number): Promise<DriverEq> {
    const eq = await this.eventQueue();
    if (v === 0) return eq;
    let p = this.compEqs.get(v);
    if (p === undefined) {
      p = DriverEq.create(this, this.hca.cfg.ioEqSize, 1 << EventType.COMP, (e) => this.onEqe(e));
      this.compEqs.set(v, p);
    }
    return p;
  }

  /** The EQ handler's dispatch of one EQE. */
  private onEqe(e: Eqe): void {
    // offsets within the 28 data bytes (spec/mlx5.md "EQ and EQE", "Other event data")
    const data = new DataView(e.data.buffer, e.data.byteOffset, e.data.byteLength);
    if (e.type === EventType.COMP) {
      const cq = this.cqs.get(data.getUint32(24) & 0xffffff);
      cq?.channel?.deliver(cq);
      return;
    }
    if (e.type === EventType.PAGE_FAULT) {
      // the device's one event EQ takes every context's faults: the QP's context handles it; a
      // QP no context has (destroyed) drops it (odp.c: "wqe page fault for missing resource")
      this.tb.contextOfQp(this.hca, data.getUint32(24) & 0xffffff)?.onPageFault?.(e);
      return;
    }
    const qpType = QP_EVENTS[e.type];
    if (qpType !== undefined) {
      const qpNum = data.getUint32(24) & 0xffffff;
      (this.tb.contextOfQp(this.hca, qpNum) ?? this).asyncEvents.push({ type: qpType, qpNum });
      return;
    }
    if (e.type === EventType.CQ_ERROR) {
      const cqNum = data.getUint32(0) & 0xffffff;
      (this.tb.contextOfCq(this.hca, cqNum) ?? this).asyncEvents.push({ type: 'CQ_ERR', cqNum });
    }
    else if (e.type === EventType.INTERNAL_ERROR) this.asyncEvents.push({ type: 'DEVICE_FATAL' });
  }

  /** ibv_context.num_comp_vectors: the completion vectors a CQ may choose (createCq compVector). */
  get numCompVectors(): number {
    return NUM_COMP_VECTORS;
  }

  /** @internal The ODP fault handler and MMU notifier (made with the first ODP MR). */
  get odp(): OdpHandler {
    if (this.odpHandler === null) this.odpHandler = new OdpHandler(this);
    return this.odpHandler;
  }

  /** ibv_create_comp_channel: a channel CQs may report their completion events to. */
  createCompChannel(): CompChannel {
    this.tb.checkInRun('createCompChannel');
    const ch = new CompChannel(this.tb, this.index, () => this.fatal);
    this.channels.push(ch);
    return ch;
  }

  /** ibv_get_async_event: the next asynchronous event (QP and CQ errors), waiting for one. */
  async getAsyncEvent(opts: { timeout?: number } = {}): Promise<AsyncEvent> {
    checkObject('getAsyncEvent: options', opts);
    this.tb.checkInRun('getAsyncEvent');
    if (opts.timeout !== undefined) checkU53('getAsyncEvent: timeout', opts.timeout);
    await this.eventQueue();
    return this.asyncEvents.take('getAsyncEvent', opts.timeout);
  }


  /** The next key tag (1, 2, ..., 255, 0, 1, ...). */
  nextTag(): number {
    this.tag = (this.tag + 1) & 0xff;
    return this.tag;
  }

  /** Runs a firmware command, turning its failure into the errno a verbs call reports. */
  async cmd<T>(p: Promise<T>, what: string): Promise<T> {
    try {
      return await p;
    } catch (e) {
      if (e instanceof CmdError) {
        const errno = e.statusName === 'EXCEED_LIM' || e.statusName === 'NO_RESOURCES' ? 'ENOMEM' : 'EINVAL';
        throw new VerbsError(errno, `${what}: ${e.message}`);
      }
      throw e;
    }
  }

  /** ibv_query_device, with the ODP capabilities (QUERY_HCA_CAP general and ODP, current). */
  async queryDevice(): Promise<DeviceAttr> {
    this.tb.checkInRun('queryDevice');
    if (this.attr) return this.attr;
    const g = await this.cmd(this.cmdq.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.GENERAL_CUR }), 'queryDevice');
    const o = await this.cmd(this.cmdq.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.ODP_CUR }), 'queryDevice');
    this.attr = deviceAttrOf(g.caps as HcaGeneralCaps, o.caps as HcaOdpCaps);
    const cap = (g.caps as HcaGeneralCaps).umrFence;
    this.umrFence = cap === UMR_FENCE_CAP.NONE ? FenceMode.NONE : cap === UMR_FENCE_CAP.SMALL ? FenceMode.INITIATOR_SMALL : FenceMode.STRONG_ORDERING;
    return this.attr;
  }

  /** The device attributes once queried (the driver queries at open). */
  get deviceAttr(): DeviceAttr {
    if (!this.attr) throw new Error('internal: device attributes not yet queried');
    return this.attr;
  }

  /** ibv_alloc_pd */
  async allocPd(): Promise<Pd> {
    this.tb.checkInRun('allocPd');
    const { pd } = await this.cmd(this.cmdq.exec({ op: 'ALLOC_PD' }), 'allocPd');
    return new Pd(this, pd);
  }

  /** ibv_create_cq: a CQ of at least `cqe` entries (a power of two), its buffer in host memory. */
  async createCq(cqe: number, opts: { channel?: CompChannel; compVector?: number } = {}): Promise<Cq> {
    this.tb.checkInRun('createCq');
    if (!(Number.isInteger(cqe) && cqe >= 1 && cqe <= this.deviceAttr.maxCqe)) {
      throw new VerbsError('EINVAL', `createCq: cqe must be an integer in 1..${this.deviceAttr.maxCqe}, got ${shown(cqe)}`);
    }
    if (opts === null || typeof opts !== 'object') throw new VerbsError('EINVAL', 'createCq: options must be an object');
    const channel = opts.channel;
    if (channel !== undefined && !(channel instanceof CompChannel)) throw new VerbsError('EINVAL', 'createCq: channel must come from ctx.createCompChannel()');
    if (channel !== undefined && channel.tb !== this.tb) throw new VerbsError('EINVAL', 'createCq: the channel belongs to another Testbed (its events could never arrive)');
    if (channel !== undefined && channel.ctxIndex !== this.index) throw new VerbsError('EINVAL', 'createCq: the channel belongs to another device context');
    const v = opts.compVector ?? 0;
    if (!(Number.isInteger(v) && v >= 0 && v < NUM_COMP_VECTORS)) {
      throw new VerbsError('EINVAL', `createCq: compVector must be an integer in 0..${NUM_COMP_VECTORS - 1} (ctx.numCompVectors), got ${shown(v)}`);
    }
    const eq = await this.compEq(v);
    let size = 1;
    while (size < cqe) size *= 2;
    // scattered 4 KiB pages, given to the device as the command's page list (pas)
    const buf = this.dma.alloc(size * 64, 'createCq');
    // a new CQ buffer is filled with op_own = 0xF0 (opcode INVALID): nothing is owned by software
    const ownInit = new Uint8Array([0xf0]);
    for (let i = 0; i < size; i++) this.hca.host.writeFrom(buf.addr + i * 64 + 63, ownInit, 0, 1);
    // the doorbell record: set_ci (dbrec[0]) and the arm word (dbrec[1])
    const dbr = this.dma.alloc(64, 'createCq');
    let cqn: number;
    try {
      ({ cqn } = await this.cmd(
        this.cmdq.exec({ op: 'CREATE_CQ', size, eqn: eq.eqn, pas: buf.pas, logPageSize: 0, dbrAddr: this.hca.host.dmaAddress(dbr.addr) }),
        'createCq',
      ));
    } catch (e) {
      this.dma.release(buf);
      this.dma.release(dbr);
      throw e;
    }
    const cq = new Cq(this, cqn, size, buf, dbr, channel ?? null);
    this.cqs.set(cqn, cq);
    this.uobjects.set(cq, this.nextUseq++);
    return cq;
  }

  /** The 64-byte mkey context of `key` (QUERY_MKEY), for inspection. */
  async queryMkey(key: number): Promise<Uint8Array> {
    checkU32('queryMkey: key', key);
    this.tb.checkInRun('queryMkey');
    const r = await this.cmd(this.cmdq.exec({ op: 'QUERY_MKEY', index: key >>> 8 }), 'queryMkey');
    return r.context;
  }
}
