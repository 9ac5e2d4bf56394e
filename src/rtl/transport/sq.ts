/**
 * The send queue engine (`tb.hcaN.sq`): takes doorbells, fetches WQEs from the send queue
 * buffers in host memory by DMA, parses them and hands them to the UMR engine or the requester,
 * for every QP with work at once, and writes the requester's completions in each QP's order:
 * always for errors, for successes when signaled.
 *
 * Fetch: per QP, a doorbell lets the engine read the posted WQEBBs in bursts (up to
 * FETCH_BURST_BBS WQEBBs a read, two reads in flight per QP) into a per-QP prefetch buffer of
 * PREFETCH_BBS WQEBBs; WQEs are parsed out of it in order into WQE slots (`config.sqWqeSlots`,
 * shared by all QPs). A QP's slots are its WQEs in flight, oldest first.
 *
 * Dispatch (the arbiter): every QP with a parsed WQE is served round robin, one WQE per QP an
 * edge, as far as the engines take them. Within a QP, WQEs start in order, each when the fence
 * mode of its control segment (fm_ce_se bits 7:5, include/linux/mlx5/qp.h MLX5_FENCE_MODE_*)
 * lets it; what it waits for is only the earlier WQEs of its QP that have not completed:
 * - NONE: nothing; it starts at its turn (UMR WQEs go to the UMR engine, data WQEs to the
 *   requester, which keeps their order on the wire);
 * - INITIATOR_SMALL: the earlier local work, UMR WQEs (REG_MR, LOCAL_INV, BIND_MW, the driver's
 *   UMRs), so a WQE that uses a key sees its registration done (mlx5 wr.c gives it to the WQE
 *   after a REG_MR); earlier READs and atomics are not waited for (the mkey bit
 *   small_fence_on_rdma_read_response, mlx5_ifc.h, exists to add them);
 * - FENCE: the earlier RDMA READs and atomics, until their responses are placed (the IB fence,
 *   IB_SEND_FENCE); earlier UMRs, SENDs and WRITEs are not waited for;
 * - SMALL_AND_FENCE: both of the above;
 * - STRONG_ORDERING (and the reserved values 5..7, model's choice): every earlier WQE.
 * A WQE holds no later one: each later WQE has its own fence. The model's RDMA_READ_WITH_INV
 * (below) and a malformed WQE keep the old barrier: they wait for every earlier WQE, and the
 * later ones wait for them.
 * Completion: a WQE in error moves its QP to ERR at once; every later WQE then completes
 * WR_FLUSH_ERR without touching memory (those already at the requester are flushed there).
 * CQEs are written in WQE order per QP. A destroyed QP (DESTROY_QP) is forgotten: its doorbells
 * are ignored, and its WQEs in progress are dropped without a completion.
 *
 * RDMA_READ_WITH_INV (model-private encoding, formats/constants.ts WQE_OPMOD_READ_WITH_INV; only
 * with config.readWithInvalidate): the requester completes the read, then the engine hands the
 * UMR engine a LOCAL_INV WQE for the key in imm (state INVALIDATE), so the invalidation takes a
 * UMR's time and keeps the mkey cache coherent; then the CQE: opcode RDMA_READ, or
 * LOC_QP_OP_ERR when the LOCAL_INV rules fail (spec/semantics.md "Work requests").
 */
import { EnumType, Fifo, Module, enumType, type ReqResp, type Reg, type Signal, type WireOptions } from '../../sim/index.ts';
import { ReadyList, type Arbitrated } from '../../sim/ready_list.ts';
import { BlockedStalls } from '../../sim/blocked_sleep.ts';
import type { Counter } from '../../sim/stats.ts';
import { SlotRun, WaitList, type Piece, type Waiter } from './slot_waiters.ts';
import { NextMember } from '../../sim/key_set.ts';
import { dmaRead, type DmaPort } from '../memory/pcie.ts';
import { CqeSyndromeEnum, type CqeJob } from '../completion/cq_writer.ts';
import type { ReqDone, ReqJob } from './requester.ts';
import type { QpTable, QpView } from './qp_table.ts';
import { ContextTable } from './context_table.ts';
import type { UmrDone, UmrJob } from '../umr/umr_types.ts';
import { WqeParseStore, parseWqeInto, type ParsedWqe } from '../formats/wqe_parse.ts';
import { ctrlCe, ctrlFence, ctrlOpcode, ctrlWqeIndex, ctrlWqebbs } from '../formats/ctrl_seg.ts';
import { CeMode, CqeOpcode, CqeSyndrome, FenceMode, WQE_OPMOD_READ_WITH_INV, WqeOpcode } from '../formats/constants.ts';
import { LOCAL_INV_WQE_BYTES, encodeLocalInvWqe } from '../umr/umr_ops.ts';
import { bytesToPageEnd, queueAddr } from '../memory/pas.ts';

/** A send queue doorbell: the driver posted WQEBBs up to counter `pi`. */
export interface SqDoorbell {
  qpn: number;
  pi: number;
}

/** What the engine did on the last edge it worked (FETCH: a read issued; EXEC: a WQE dispatched; ...). */
/** Send WQE opcodes by name (MLX5_OPCODE_*), as the send queue and the requester trace them. */
export const WqeOpcodeEnum = new EnumType('wqe_opcode', Object.fromEntries(Object.entries(WqeOpcode).map(([k, v]) => [v, k])) as Record<number, string>);

/** The control segment's fence modes by name (fm_ce_se bits 7:5), as the waves show them. */
export const FenceModeEnum = new EnumType('fence_mode', Object.fromEntries(Object.entries(FenceMode).map(([k, v]) => [v, k])) as Record<number, string>);

export const [SqState, SQ_STATES] = enumType('sq_state', ['IDLE', 'FETCH', 'WAIT_WQE', 'EXEC', 'WAIT_DONE', 'CQE', 'INVALIDATE']);
const { IDLE, FETCH, WAIT_WQE, EXEC, WAIT_DONE, CQE, INVALIDATE } = SQ_STATES;

/** WQEBBs prefetched per QP at most (a WQE is at most 16). */
const PREFETCH_BBS = 64;
/** WQEBBs per fetch read at most (512 B), and reads in flight per QP. */
const FETCH_BURST_BBS = 8;
const FETCH_READS_PER_QP = 2;
/** The largest WQE: ds is 6 bits, 63 x 16 B = 16 WQEBBs. */
const MAX_WQE_BBS = 16;
/**
 * WQE slots only the driver's UMR QP (CREATE_QP `umr`) may take (model's choice; when the engine
 * has more than one slot): QPs stalled behind page faults may hold every other slot with WQEs
 * waiting for their resume, and the fault handler's UMR, which brings that resume, still gets one.
 */
const UMR_RESERVED_SLOTS = 1;

// slot states
const S_FREE = 0;
const S_PARSED = 1;
const S_EXEC = 2;
/** RDMA_READ_WITH_INV: the read is done; the LOCAL_INV waits to be pushed, then for its answer. */
const S_INV_PUSH = 3;
const S_INV_WAIT = 4;
const S_DONE = 5;

/**
 * Wait sets of the arbiter (ready_list.ts): room in the requester's queue, room for a fetch read
 * (the PCIe port and a tag). A QP waiting for a WQE slot leaves the arbiter instead (slotWaiters).
 */
const ENGINE_WAIT = 0;
const FETCH_WAIT = 1;
/** PCIe read tags of the engine's fetches. */
const FETCH_TAGS = 64;

/** Wiring and size of the send queue engine (wired in hca.ts). */
export interface SqOptions
  extends WireOptions<
    {
      readonly dma: DmaPort;
      readonly cqWriter: Fifo<CqeJob>;
      readonly requester: ReqResp<ReqJob, ReqDone>;
      readonly umr: ReqResp<UmrJob, UmrDone> | null;
      /** Where QPs moved to ERR are told (the responder flushes their receives). */
      readonly flush: Fifo<number>;
    },
    { readonly qps: QpTable }
  > {
  /** WQEs in flight at most, across all QPs. */
  readonly slots: number;
  readonly readWithInvalidate: boolean;
}

interface Chunk {
  start: number;
  n: number;
  arrived: boolean;
}

interface SqQp extends Arbitrated, Waiter {
  readonly qpn: number;
  readonly ctx: QpView;
  pi: number;
  /** WQEBB counters: next to read, read so far (contiguous), next WQE to parse. */
  fetchPtr: number;
  arrived: number;
  parsePtr: number;
  readonly prefetch: Uint8Array;
  /** Reads in flight, oldest first. */
  readonly chunks: Chunk[];
  /** WQEs in flight (parsed, executing, done but not completed), oldest first. */
  readonly slots: Slot[];
  /** Slots dispatched and not done: all, UMR WQEs (local), READs and atomics. */
  executing: number;
  execLocal: number;
  execRdAtomic: number;
  /** A dispatched WQE that later ones wait for (READ_WITH_INV, malformed), or null. */
  barrier: Slot | null;
  /** WQEs completed (executed or flushed). */
  done: number;
  active: boolean;
  /** A WQE of this QP completed in error. */
  errSeen: boolean;
  /** Parsing waits for a free WQE slot (woken when one is given back, not served every edge). */
  waitsSlot: boolean;
  /** Waiting: in the list's marks (looked at alone when woken); in a run's marks; its state changed. */
  wMark: boolean;
  rMark: boolean;
  dirty: boolean;
  /** The WQE waiting for room in the requester's queue while the QP is parked there. */
  engSlot: Slot | null;
  /** Forgotten (DESTROY_QP): what a lookup of its number by the table would say, without the lookup. */
  dead: boolean;
}

interface Slot {
  readonly idx: number;
  readonly bytes: Uint8Array;
  readonly views: (DataView | undefined)[];
  readonly invWqe: Uint8Array;
  state: number;
  q: SqQp | null;
  bbs: number;
  /** The parsed WQE (the slot's own store's objects, valid while the slot holds this WQE), or null: malformed. */
  w: ParsedWqe | null;
  /** Where the slot's WQEs are parsed into, reused by each (no objects per WQE). */
  readonly store: WqeParseStore;
  /**
   * The requester's job for the slot's WQE, reused: the requester keeps it (and the parsed WQE
   * it names) until it hands the completion back, and the slot is given back only after that.
   */
  readonly job: ReqJob;
  /** Its fence mode (fm_ce_se bits 7:5): what earlier WQEs it waits for. */
  fence: number;
  /** Waits for every earlier WQE, and later ones wait for it (READ_WITH_INV, malformed). */
  drains: boolean;
  /** A UMR WQE (the small fence waits for it), a READ or atomic (the fence waits for it). */
  local: boolean;
  rdAtomic: boolean;
  /** Its fence held it at least once (the waves show when it goes). */
  held: boolean;
  invKey: number;
  syndrome: number;
  byteLen: number;
  opcode: number;
  wqeIndex: number;
  signaled: boolean;
}

/** Sees the send queue engine's work (the transaction log); null when untraced. */
export interface SqTap {
  /** A doorbell: the QP's WQEs below counter `pi` are posted. */
  doorbell(qpn: number, pi: number): void;
  /** A WQE was read from host memory and parsed. */
  fetched(qpn: number, wqeIndex: number, opcode: number): void;
  /** The WQE went to its engine (after the fences and barriers before it). */
  started(qpn: number, wqeIndex: number): void;
  /** Its engine is done with the WQE (its CQE follows in QP order): what a later fence waits for. */
  completed?(qpn: number, wqeIndex: number, syndrome: number): void;
}

export class Sq extends Module {
  /** The transaction log's tap; null (one compare per event) when untraced. */
  tap: SqTap | null = null;
  readonly doorbell: Fifo<SqDoorbell>;
  private readonly cqWriter: Fifo<CqeJob>;
  private readonly requester: ReqResp<ReqJob, ReqDone>;
  private readonly umr: ReqResp<UmrJob, UmrDone> | null;
  private readonly flush: Fifo<number>;
  private readonly port: DmaPort;
  private readonly table: QpTable;
  private readonly readWithInvalidate: boolean;
  private readonly qps = new Map<number, SqQp>();
  /** QPs held at their next WQE (stallQp): the others go on. */
  private readonly stalled = new Set<number>();
  private readonly slotTable: ContextTable<Slot>;
  private readonly slots: readonly Slot[];
  /** Reads in flight by DMA tag. */
  private readonly reads: ({ q: SqQp; c: Chunk } | null)[] = [];
  private readonly freeTags: number[] = [];
  /**
   * QPs with something to do, served round robin: in the order they became ready (ready_list.ts),
   * a QP that can only wait for room in the requester's queue or for a fetch read parked there.
   * Double-buffered work lists: `active` (the first nActive entries) is next edge's.
   */
  private readonly ready = new ReadyList<SqQp>(2);
  private active: (SqQp | SlotRun<SqQp>)[] = [];
  private nActive = 0;
  private spare: (SqQp | SlotRun<SqQp>)[] = [];
  /**
   * QPs waiting for a free WQE slot to parse into (out of the arbiter's list until one is given
   * back); when one is, they all become ready, as runs (slot_waiters.ts).
   */
  private waiters = new WaitList<SqQp>();
  /** wakeWaiters' scratch (kept: a wake per slot given back must not allocate): the marks in list order, the run marks. */
  private spareMarks: SqQp[] = [];
  private readonly markQ: SqQp[] = [];
  private readonly markG: number[] = [];
  private readonly runMarks: number[] = [];
  private runMarkAt = 0;
  /** serveReady's lookups of the woken, engine-wait and fetch-wait sets' next keys. */
  private readonly nextWoken = new NextMember();
  private readonly nextEngine = new NextMember();
  private readonly nextFetch = new NextMember();
  /** Served runs, for addRuns to reuse. */
  private readonly runPool: SlotRun<SqQp>[] = [];
  /** Slots other QPs leave to the UMR QP. */
  private readonly reserved: number;
  /** QPs with posted WQEBBs not parsed yet. */
  private unparsed = 0;
  /** This edge: the key of the last QP that tried to dispatch, QPs parked per wait set. */
  private lastAttempt = -1;
  private parkedEngine = 0;
  /** engine_full_stalls, counted for the edges of a sleep with every parked QP refused too. */
  private readonly engineStalls: BlockedStalls;
  private readonly state: Signal;
  private readonly rInflight: Reg;
  private readonly rQpn: Reg;
  private readonly rWqeIndex: Reg;
  private readonly rOpcode: Reg;
  private readonly rSyndrome: Reg;
  private readonly rFence: Reg;
  private readonly rFenceWaits: Reg;
  private readonly sWqes;
  private readonly sFenceStalls;
  private readonly sFlushed;
  private readonly sErrors;
  private readonly sFetches;
  private readonly sEngineStalls: Counter;
  private readonly sMalformed;

  constructor(parent: Module, name: string, o: SqOptions) {
    super(parent.sim, parent, name);
    if (!Number.isInteger(o.slots) || o.slots < 1) throw new RangeError(`${this.path}: slots ${o.slots} must be a positive integer`);
    this.port = o.ports.dma;
    this.table = o.deps.qps;
    this.cqWriter = o.ports.cqWriter;
    this.requester = o.ports.requester;
    this.umr = o.ports.umr;
    this.flush = o.ports.flush;
    this.readWithInvalidate = o.readWithInvalidate;
    this.state = this.signal('state', SqState.width, { enum: SqState });
    this.rInflight = this.probe('inflight', 16);
    this.rQpn = this.probe('qpn', 24);
    this.rWqeIndex = this.probe('wqe_index', 16);
    this.rOpcode = this.probe('opcode', 8, { enum: WqeOpcodeEnum });
    this.rSyndrome = this.probe('syndrome', 8, { enum: CqeSyndromeEnum });
    // the fence a WQE waits on (its mode by name; qpn and wqe_index name the WQE), and how many
    // earlier WQEs of its QP it waits for; 0 again when it goes
    this.rFence = this.probe('fence', 3, { enum: FenceModeEnum });
    this.rFenceWaits = this.probe('fence_waits', 16);
    this.doorbell = new Fifo<SqDoorbell>(this, 'doorbell', { capacity: 16 });
    this.doorbell.consumer = this;
    this.port.resp.consumer = this;
    this.port.req.producer = this;
    this.requester.resp.consumer = this;
    this.requester.req.producer = this;
    if (this.umr) {
      this.umr.resp.consumer = this;
      this.umr.req.producer = this;
    }
    this.cqWriter.producer = this;
    // every slot's bytes in one store: two buffers a slot were 1,024 allocations an adapter (most
    // of an adapter's construction went to collecting them, in tests that make thousands)
    const slotBytes = new Uint8Array(o.slots * 64 * MAX_WQE_BBS);
    const invBytes = new Uint8Array(o.slots * LOCAL_INV_WQE_BYTES);
    this.slotTable = new ContextTable<Slot>(o.slots, (i) => {
      const store = new WqeParseStore();
      return {
        idx: i, bytes: slotBytes.subarray(i * 64 * MAX_WQE_BBS, (i + 1) * 64 * MAX_WQE_BBS), views: new Array<DataView | undefined>(MAX_WQE_BBS + 1).fill(undefined),
        invWqe: invBytes.subarray(i * LOCAL_INV_WQE_BYTES, (i + 1) * LOCAL_INV_WQE_BYTES), state: S_FREE, q: null, bbs: 0, w: null, store, job: { tag: i, qpn: 0, wqe: store.rdma }, fence: 0, drains: false, local: false, rdAtomic: false, held: false, invKey: -1,
        syndrome: 0, byteLen: 0, opcode: 0, wqeIndex: 0, signaled: false,
      };
    }, this.stats, 'slots');
    this.slots = this.slotTable.all;
    this.reserved = Math.min(UMR_RESERVED_SLOTS, o.slots - 1);
    this.sWqes = this.stats.counter('wqes');
    this.sFlushed = this.stats.counter('flushed');
    this.sErrors = this.stats.counter('errors');
    this.sFetches = this.stats.counter('fetch_reads');
    this.engineStalls = new BlockedStalls(o.clock.period);
    this.sEngineStalls = this.engineStalls.counter;
    this.stats.gauge('engine_full_stalls', () => this.engineStalls.read(this.sim.now));
    this.sMalformed = this.stats.counter('malformed_wqes');
    this.sFenceStalls = this.stats.counter('fence_stalls');
    this.clockedBy(o.clock);
  }

  /**
   * Debug inspection for tests: work requests of a QP the engine has completed. The driver does
   * not read it (it counts what its polled CQEs complete).
   */
  completedWqes(qpn: number): number {
    return this.qps.get(qpn)?.done ?? 0;
  }

  /** WQE slots in use. */
  get inFlight(): number {
    return this.slotTable.inUse;
  }

  /** Work in flight: WQEs posted and not completed. */
  override hasWork(): boolean {
    return this.doorbell.canPop() || this.inFlight > 0 || this.unparsed > 0;
  }

  /**
   * DESTROY_QP executed: forget the QP (its number may be handed out again). Its WQEs in an
   * engine are dropped when they come back.
   */
  forgetQp(qpn: number): void {
    const q = this.qps.get(qpn);
    if (q === undefined) return;
    if (q.waitsSlot) {
      // a run's member is given its key alone (rare); a waiter of the list is skipped when woken
      if (this.ready.nRuns > 0 && this.findRun(q) !== null) this.explodeRuns();
      else this.markWaiter(q);
    }
    this.wakeIfBlocked();
    this.qps.delete(qpn);
    q.dead = true;
    this.stalled.delete(qpn);
    if (q.parsePtr < q.pi) this.unparsed--;
    this.ready.leave(q);
    for (const s of q.slots) if (s.state !== S_EXEC && s.state !== S_INV_WAIT) this.freeSlot(s);
    q.slots.length = 0;
  }

  /**
   * Holds a QP at its next WQE: nothing more of it is dispatched until `resumeQp` (WQEs already
   * at the requester go on, in order). The hook on-demand paging stalls a faulting QP with;
   * the other QPs keep running.
   */
  stallQp(qpn: number): void {
    this.stalled.add(qpn);
  }

  /** Lets a stalled QP go on. */
  resumeQp(qpn: number): void {
    if (!this.stalled.delete(qpn)) return;
    const q = this.qps.get(qpn);
    if (q !== undefined) {
      this.activate(q);
      this.wake();
    }
  }

  private gone(q: SqQp): boolean {
    return q.dead;
  }

  /**
   * The QP's state changed in the firmware's table (to ERR: its parsed WQEs are flushed): a QP
   * parked for a resource is served at its next turn.
   */
  qpStateChanged(qpn: number): void {
    const q = this.qps.get(qpn);
    if (q === undefined) return;
    if (q.waitsSlot) {
      // a waiter whose QP moved to ERR has WQEs to flush when it is served
      q.dirty = true;
      this.waiterInput(q);
    }
    if (q.arbWait !== 0) {
      this.ready.wake(q);
      this.wakeIfBlocked();
    }
  }

  private activate(q: SqQp): void {
    if (q.waitsSlot && this.waiterInput(q)) return; // a run's member is ready already
    if (q.active) return;
    if (q.arbWait !== 0) {
      this.ready.wake(q); // parked: served at its turn
      return;
    }
    q.active = true;
    if (q.arbKey < 0) this.ready.enter(q);
    this.active[this.nActive++] = q;
  }

  /** A fetch read can be issued: room in the PCIe port, and a tag. */
  private canFetch(): boolean {
    return this.port.req.canPush() && (this.freeTags.length > 0 || this.reads.length < FETCH_TAGS);
  }

  /** The QP can only wait for room in the requester's queue or for a fetch read. */
  private park(q: SqQp, engine: boolean, fetch: boolean): void {
    this.ready.park(q, (engine ? 1 << ENGINE_WAIT : 0) | (fetch ? 1 << FETCH_WAIT : 0));
    if (engine) this.parkedEngine++;
  }

  override tick(): void {
    if (this.engineStalls.sleeping) this.engineStalls.end(this.sim.now);
    let act = -1;
    while (this.doorbell.canPop()) {
      const d = this.doorbell.pop();
      let q = this.qps.get(d.qpn);
      if (!q) {
        // a doorbell for a QP the firmware does not know (destroyed) is ignored
        const ctx = this.table.getQp(d.qpn);
        if (ctx === undefined) continue;
        q = {
          qpn: d.qpn, ctx, pi: 0, fetchPtr: 0, arrived: 0, parsePtr: 0, prefetch: new Uint8Array(64 * PREFETCH_BBS),
          chunks: [], slots: [], executing: 0, execLocal: 0, execRdAtomic: 0, barrier: null, done: 0, active: false, errSeen: false, waitsSlot: false, engSlot: null, arbKey: -1, arbWait: 0,
          wArr: [], wIdx: 0, wMark: false, rMark: false, dirty: false, dead: false,
        };
        this.qps.set(d.qpn, q);
      }
      if (q.parsePtr < q.pi) this.unparsed--;
      q.pi = d.pi;
      if (this.tap !== null) this.tap.doorbell(d.qpn, d.pi);
      if (q.parsePtr < q.pi) this.unparsed++;
      this.activate(q);
    }
    while (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      const rec = this.reads[r.tag]!;
      this.reads[r.tag] = null;
      this.freeTags.push(r.tag);
      rec.c.arrived = true;
      const q = rec.q;
      while (q.chunks.length > 0 && q.chunks[0].arrived) {
        const c = q.chunks.shift()!;
        q.arrived = c.start + c.n;
      }
      if (!this.gone(q)) this.activate(q);
      act = WAIT_WQE;
    }
    while (this.requester.resp.canPop()) {
      const d = this.requester.resp.pop();
      const s = this.slots[d.tag];
      if (s.invKey >= 0 && d.syndrome === 0 && !this.gone(s.q!)) {
        // the read data is placed: now the local invalidation (no CQE before it is done)
        s.byteLen = d.byteLen;
        s.state = S_INV_PUSH;
        this.activate(s.q!);
      } else this.complete(s, d.syndrome, d.byteLen);
      act = WAIT_DONE;
    }
    if (this.umr) {
      while (this.umr.resp.canPop()) {
        const d = this.umr.resp.pop();
        const s = this.slots[d.tag];
        this.complete(s, d.syndrome, s.state === S_INV_WAIT && d.syndrome === 0 ? s.byteLen : 0);
        act = WAIT_DONE;
      }
    }
    const rl = this.ready;
    if (this.nActive > 0 || rl.parked > 0) act = this.serveReady(act);
    const used = this.inFlight;
    this.rInflight.set(used);
    if (act >= 0) this.state.setNow(act);
    else if (used === 0) this.state.setNow(IDLE);
    if (this.nActive === 0 && rl.parked === 0) this.sleep();
    else if (this.nActive === 0 && this.sim.tracer === null && this.allRefused()) {
      // every parked QP waits for a resource found full, and nothing else is ready: the edges
      // until one frees would repeat this one (a pop of a FIFO found full wakes its producer, a
      // fetch's data arrives on a FIFO this engine drains), so sleep and count their stalls on
      // waking. Untraced only: a traced run keeps its clock's edges.
      this.engineStalls.begin(this.sim.now, rl.waits[ENGINE_WAIT].size);
      this.sleep();
    }
  }

  /** Whether no parked QP could be served next edge: none woken, each one's resource full. */
  private allRefused(): boolean {
    const rl = this.ready;
    if (rl.woken.size > 0) return false;
    if (rl.waits[ENGINE_WAIT].size > 0 && this.requester.req.canPush()) return false;
    if (rl.waits[FETCH_WAIT].size > 0 && this.canFetch()) return false;
    return true;
  }

  /** A parked QP changes from outside a tick: an engine asleep with every QP refused looks again next edge. */
  private wakeIfBlocked(): void {
    if (this.engineStalls.sleeping) this.wake();
  }

  /**
   * The parked QPs whose turn passed with their resource full: a stall each, as the scan that
   * served every ready QP each edge counted them, and the last one to try the requester names
   * its WQE in the probes.
   */
  private countSkipped(): void {
    const rl = this.ready;
    const skippedEngine = rl.waits[ENGINE_WAIT].size - this.parkedEngine;
    if (skippedEngine > 0) this.sEngineStalls.inc(skippedEngine);
    const last = rl.waits[ENGINE_WAIT].max();
    if (last > this.lastAttempt) this.probeDispatch(rl.item(last).engSlot!);
  }

  /** Serves the ready QPs of this edge in order (see `ready`); returns the activity. */
  private serveReady(act: number): number {
    const rl = this.ready;
    const list = this.active;
    const n = this.nActive;
    this.active = this.spare;
    this.nActive = 0;
    this.spare = list;
    this.lastAttempt = -1;
    this.parkedEngine = 0;
    // every ready QP in key order: the listed ones, the woken ones, and a parked one whose
    // resource is free at its turn
    let i = 0;
    let pos = -1;
    // each wait set's next key past pos is kept while the set is unchanged and pos has not
    // passed it (most turns change none of the three sets)
    const nw = this.nextWoken;
    const ne = this.nextEngine;
    const nf = this.nextFetch;
    nw.reset();
    ne.reset();
    nf.reset();
    let engineFull = false;
    let fetchFull = false;
    for (;;) {
      let k = i < n ? list[i].arbKey : Infinity;
      if (rl.parked > 0) {
        const from = pos + 1;
        const kw = nw.of(rl.woken, from);
        if (kw < k) k = kw;
        // (a resource is asked only when a parked QP has its turn, as that QP would ask it:
        // canPush() marks a FIFO found full)
        // a resource found full stays full for the rest of this edge (the engine only fills it;
        // what its consumer pops is room from the next edge): its waiters need not be looked up
        if (!engineFull) {
          const ke = ne.of(rl.waits[ENGINE_WAIT], from);
          if (ke < k) {
            if (this.requester.req.canPush()) k = ke;
            else engineFull = true;
          }
        }
        if (!fetchFull) {
          const kf = nf.of(rl.waits[FETCH_WAIT], from);
          if (kf < k) {
            if (this.canFetch()) k = kf;
            else fetchFull = true;
          }
        }
      }
      if (k === Infinity) break;
      let q: SqQp;
      if (i < n && list[i].arbKey === k) {
        const e = list[i];
        if (e instanceof SlotRun) {
          const g = e.next;
          const a = this.serveRun(e);
          if (a > act) act = a;
          pos = k + (e.next - g) - 1;
          if (e.next >= e.m) i++;
          continue;
        }
        q = e;
        i++;
        q.active = false;
        if (this.gone(q)) continue; // forgetQp took its key
      } else {
        q = rl.item(k);
        rl.unpark(q);
      }
      pos = k;
      const a = this.serve(q);
      if (a > act) act = a;
      if (!q.active && q.arbWait === 0) rl.leave(q);
    }
    if (rl.parked > 0) this.countSkipped();
    if (rl.nRuns > 0) {
      // the runs the list drops now are served whole and referenced no more (none is in the
      // next edge's list): kept for addRuns
      const rs = rl.runs;
      for (let i = rl.runHead; i < rl.nRuns && rs[i].next >= rs[i].m && this.runPool.length < 64; i++) this.runPool.push(rs[i] as SlotRun<SqQp>);
      rl.dropServedRuns();
    }
    return act;
  }

  /**
   * A run's turn: its next member is served as the list would serve it when it must be (an
   * input, a state change, the UMR QP) or when a slot is free for it; otherwise every member up
   * to the next that must be served finds no slot: a stall each, and they wait again in order.
   * (Those members have had no input since they last found no slot: their serve would do nothing
   * else, and nothing changes between their turns.)
   */
  private serveRun(r: SlotRun<SqQp>): number {
    const g = r.next;
    const marked = r.mi < r.marks.length && r.marks[r.mi] === g;
    if (marked || this.slotTable.freeCount > this.reserved) {
      if (marked) r.mi++;
      const q = r.current();
      const k = r.base + g;
      r.advance(g + 1);
      q.rMark = false;
      q.dirty = false;
      q.waitsSlot = false;
      q.active = false;
      this.ready.place(q, k);
      const a = this.serve(q);
      if (!q.active && q.arbWait === 0) this.ready.leave(q);
      return a;
    }
    const end = r.mi < r.marks.length ? r.marks[r.mi] : r.m;
    this.slotTable.noteStall(end - g);
    r.requeueTo(this.waiters, end);
    r.advance(end);
    return -1;
  }

  /** The pending run holding waiter `q` among its members not served yet, or null. */
  private findRun(q: SqQp): SlotRun<SqQp> | null {
    const rs = this.ready.runs;
    for (let i = this.ready.runHead; i < this.ready.nRuns; i++) {
      const r = rs[i] as SlotRun<SqQp>;
      if (r.next < r.m && r.indexOf(q) >= 0) return r;
    }
    return null;
  }

  /** A waiter is to be looked at alone when the list is woken. */
  private markWaiter(q: SqQp): void {
    if (q.wMark) return;
    q.wMark = true;
    this.waiters.mark(q);
  }

  /**
   * An input (or a state change) for a QP waiting for a slot; true when it is a run's member
   * (ready already: served alone at its turn).
   */
  private waiterInput(q: SqQp): boolean {
    if (this.ready.nRuns > 0) {
      const r = this.findRun(q);
      if (r !== null) {
        if (!q.rMark) {
          q.rMark = true;
          r.mark(r.indexOf(q));
        }
        return true;
      }
    }
    this.markWaiter(q);
    return false;
  }

  /**
   * A slot was given back: every waiter becomes ready in order, as `activate` makes each ready
   * (a run of new keys for those not ready; a waiter ready already, or gone, alone).
   */
  private wakeWaiters(): void {
    const w = this.waiters;
    // the woken list's marks array is looked at here only: the next list takes it back, emptied
    this.waiters = new WaitList<SqQp>(this.spareMarks);
    w.compact();
    // the marks in list order (a stable insertion sort into scratch arrays: they are few)
    const mq = this.markQ;
    const mg = this.markG;
    const n = w.nMarks;
    for (let i = 0; i < n; i++) {
      const q = w.marks[i];
      const g = w.indexOf(q);
      let j = i;
      while (j > 0 && mg[j - 1] > g) {
        mq[j] = mq[j - 1];
        mg[j] = mg[j - 1];
        j--;
      }
      mq[j] = q;
      mg[j] = g;
    }
    for (let i = 0; i < n; i++) w.marks[i] = undefined as unknown as SqQp;
    this.spareMarks = w.marks;
    let from = 0;
    const runMarks = this.runMarks;
    if (runMarks.length !== 0) runMarks.length = 0; // (a setter call even on an empty array)
    this.runMarkAt = 0;
    for (let i = 0; i < n; i++) {
      const q = mq[i];
      const g = mg[i];
      mq[i] = null as unknown as SqQp;
      q.wMark = false;
      if (!this.gone(q) && q.arbKey < 0) {
        // not ready: a member of the run, served alone when it must be
        if (q.dirty || q.ctx.umr) runMarks.push(g);
        continue;
      }
      this.addRuns(w.pieces, from, g, runMarks);
      from = g + 1;
      q.waitsSlot = false;
      if (!this.gone(q)) this.activate(q);
    }
    this.addRuns(w.pieces, from, w.len, runMarks);
  }

  /**
   * Waiters from .. to - 1 of the pieces become ready as runs (split where the keys are
   * renumbered); `marks` from `runMarkAt` on are list indices of members to serve alone.
   */
  private addRuns(pieces: Piece<SqQp>[], from: number, to: number, marks: number[]): void {
    while (from < to) {
      const t = Math.min(to - from, this.ready.room());
      // the run's members are read from the woken list's pieces, from `from` on
      const r = this.runPool.length > 0 ? this.runPool.pop()!.reuse(pieces, t, from) : new SlotRun(pieces, t, from);
      while (this.runMarkAt < marks.length && marks[this.runMarkAt] < from + t) {
        const g = marks[this.runMarkAt++] - from;
        r.marks.push(g);
        const q = r.memberAt(g);
        if (q !== undefined) q.rMark = true;
      }
      this.ready.addRun(r);
      r.advance(0);
      this.active[this.nActive++] = r;
      from += t;
    }
  }

  /**
   * A run's member is gone (DESTROY_QP): every pending run's members take their keys one by one
   * as entries (what one \`enter\` each gave them), so the list skips the gone one as it does any.
   */
  private explodeRuns(): void {
    const rl = this.ready;
    const out: (SqQp | SlotRun<SqQp>)[] = [];
    for (let i = 0; i < this.nActive; i++) {
      const e = this.active[i];
      if (!(e instanceof SlotRun)) {
        out.push(e);
        continue;
      }
      const base = e.base;
      let g = e.next;
      for (const q of e.unserved()) {
        rl.place(q, base + g++);
        q.active = true;
        q.waitsSlot = false;
        q.rMark = false;
        q.dirty = false;
        out.push(q);
      }
    }
    rl.dropRuns();
    this.active = out;
    this.nActive = out.length;
  }

  /** Fetch, parse, dispatch and complete what a QP can this edge; returns the activity. */
  private serve(q: SqQp): number {
    let act = -1;
    /** Waits for something other than a WQE slot or the requester's room (PCIe, UMR, CQ writer). */
    let blocked = false;
    let engineBlocked = false;
    let fetchBlocked = false;
    const qp = q.ctx;
    // fetch: bursts of posted WQEBBs, within the ring's end and the prefetch buffer's room
    while (q.chunks.length < FETCH_READS_PER_QP && q.fetchPtr < q.pi && q.fetchPtr - q.parsePtr < PREFETCH_BBS) {
      if (!this.canFetch()) {
        fetchBlocked = true;
        break;
      }
      const start = q.fetchPtr;
      const ring = start & (qp.sqSize - 1);
      const pre = start & (PREFETCH_BBS - 1);
      // a read stays within one page of the ring's page list (memory/pas.ts)
      const off = qp.sqOffset + ring * 64;
      const n = Math.min(q.pi - start, FETCH_BURST_BBS, qp.sqSize - ring, PREFETCH_BBS - pre, PREFETCH_BBS - (start - q.parsePtr), Math.floor(bytesToPageEnd(qp.sqPages, off) / 64));
      const c: Chunk = { start, n, arrived: false };
      let tag = this.freeTags.pop();
      if (tag === undefined) {
        tag = this.reads.length;
        this.reads.push(null);
      }
      this.reads[tag] = { q, c };
      q.chunks.push(c);
      this.port.req.push(dmaRead(queueAddr(qp.sqPages, off), n * 64, tag, q.prefetch, pre * 64));
      q.fetchPtr += n;
      this.sFetches.inc();
      act = FETCH;
    }
    // parse: WQEs whose every WQEBB has arrived, into slots
    while (q.parsePtr < q.arrived) {
      if (this.slotTable.freeCount <= (qp.umr ? 0 : this.reserved)) {
        // none free for this QP: it leaves the arbiter until a slot is given back (freeSlot), so
        // an engine whose slots are all held sleeps instead of spinning, and a run that can make
        // no progress ends in the kernel's stall report instead of running forever
        if (!q.waitsSlot) {
          q.waitsSlot = true;
          this.waiters.append(q);
          // served now, so ready: looked at alone when the waiters are woken
          this.markWaiter(q);
          this.slotTable.noteStall();
        }
        break;
      }
      const first = (q.parsePtr & (PREFETCH_BBS - 1)) * 64;
      let bbs = ctrlWqebbs(q.prefetch, first);
      // a WQE longer than what was posted is malformed: it ends at the producer index
      const malformed = q.parsePtr + bbs > q.pi;
      if (malformed) bbs = q.pi - q.parsePtr;
      if (q.parsePtr + bbs > q.arrived) break; // woken by the rest of it
      const s = this.slotTable.take()!;
      for (let b = 0; b < bbs; b++) {
        const o = ((q.parsePtr + b) & (PREFETCH_BBS - 1)) * 64;
        const d = s.bytes;
        const src = q.prefetch;
        for (let i = 0, t = b * 64; i < 64; i++) d[t + i] = src[o + i];
      }
      this.parse(s, q, bbs, malformed);
      const was = q.parsePtr < q.pi;
      q.parsePtr += bbs;
      if (was && q.parsePtr >= q.pi) this.unparsed--;
      q.slots.push(s);
    }
    // dispatch, in order
    for (let i = 0; i < q.slots.length; i++) {
      const s = q.slots[i];
      if (s.state === S_INV_PUSH) {
        if (!this.umr!.req.canPush()) {
          blocked = true;
          break;
        }
        encodeLocalInvWqe(s.invWqe, s.invKey, qp.qpn, s.wqeIndex);
        this.umr!.req.push({ tag: s.idx, qpn: qp.qpn, pd: qp.pd, fre: true, wqe: s.invWqe });
        s.state = S_INV_WAIT;
        act = Math.max(act, INVALIDATE);
        continue;
      }
      if (s.state !== S_PARSED) continue;
      if (q.barrier !== null || this.stalled.has(q.qpn)) break;
      if (qp.state === 'ERR') {
        this.sFlushed.inc();
        this.complete(s, CqeSyndrome.WR_FLUSH_ERR, 0);
        continue;
      }
      const waits = this.fenceWaits(s, q);
      if (waits > 0) {
        // woken by the completions of the earlier WQEs it waits for
        if (!s.held) {
          s.held = true;
          this.sFenceStalls.inc();
        }
        this.probeDispatch(s);
        this.rFence.set(s.fence);
        this.rFenceWaits.set(Math.min(waits, 0xffff));
        break;
      }
      const r = this.dispatch(s, q);
      if (r === -2) {
        engineBlocked = true;
        q.engSlot = s;
        break;
      }
      if (r < 0) {
        blocked = true;
        break;
      }
      act = Math.max(act, EXEC);
      break; // one new WQE per QP an edge (the arbiter)
    }
    // completions, in order
    while (q.slots.length > 0 && q.slots[0].state === S_DONE) {
      const s = q.slots[0];
      // once a WQE completed in error, every later one completes flushed, whatever its own fate
      // (a later WQE may have failed locally while an earlier one waited for its NAK)
      if (q.errSeen) s.syndrome = CqeSyndrome.WR_FLUSH_ERR;
      else if (s.syndrome !== 0) q.errSeen = true;
      if (s.signaled || s.syndrome !== 0) {
        if (!this.cqWriter.canPush()) {
          blocked = true;
          break;
        }
        this.cqWriter.push({
          cqn: qp.sendCqn,
          opcode: s.syndrome !== 0 ? CqeOpcode.REQ_ERR : CqeOpcode.REQ,
          qpn: qp.qpn,
          wqeOpcode: s.opcode,
          wqeCounter: s.wqeIndex,
          byteCnt: s.syndrome !== 0 ? 0 : s.opcode === WqeOpcode.ATOMIC_CS || s.opcode === WqeOpcode.ATOMIC_FA ? 8 : s.byteLen,
          immInvalPkey: 0,
          syndrome: s.syndrome,
          se: false, // SE marks receive completions only
        });
        act = Math.max(act, CQE);
      }
      q.slots.shift();
      q.done++;
      this.freeSlot(s);
    }
    // more to do without a new input: parsed WQEs the engines could not take yet, a full FIFO
    // next edge: more to do without a new input (a fetch the parse made room for, a WQE the
    // arbiter may dispatch), or only waiting for a resource (parked), or nothing (an input wakes it)
    const fetchMore = q.fetchPtr < q.pi && q.chunks.length < FETCH_READS_PER_QP && q.fetchPtr - q.parsePtr < PREFETCH_BBS;
    if (blocked || (fetchMore && !fetchBlocked) || (!engineBlocked && this.canDispatch(q))) this.activate(q);
    else if (fetchBlocked || engineBlocked) this.park(q, engineBlocked, fetchBlocked);
    return act;
  }

  /** A parsed WQE of the QP could start now (not behind a barrier or its fence). */
  private canDispatch(q: SqQp): boolean {
    if (q.barrier !== null || this.stalled.has(q.qpn)) return false;
    for (let i = 0; i < q.slots.length; i++) {
      const s = q.slots[i];
      if (s.state === S_PARSED) return this.fenceWaits(s, q) === 0 || q.ctx.state === 'ERR';
    }
    return false;
  }

  /**
   * The earlier WQEs of its QP that the next WQE's fence waits for and that have not completed
   * (0: it may start). Every earlier WQE has been dispatched (they start in order), so the
   * QP's counts of executing WQEs are exactly the earlier ones not done.
   */
  private fenceWaits(s: Slot, q: SqQp): number {
    if (s.drains) return q.executing;
    switch (s.fence) {
      case FenceMode.NONE:
        return 0;
      case FenceMode.INITIATOR_SMALL:
        return q.execLocal;
      case FenceMode.FENCE:
        return q.execRdAtomic;
      case FenceMode.SMALL_AND_FENCE:
        return q.execLocal + q.execRdAtomic;
      default:
        // STRONG_ORDERING, and the reserved values 5..7 (the model's choice: the strongest)
        return q.executing;
    }
  }

  /** Parses a fetched WQE into its slot. */
  private parse(s: Slot, q: SqQp, bbs: number, malformed: boolean): void {
    s.q = q;
    s.bbs = bbs;
    s.state = S_PARSED;
    s.syndrome = 0;
    s.byteLen = 0;
    s.invKey = -1;
    // a view bounded by the WQE's basic blocks (the parser checks ds against it), one per size
    const view = (s.views[bbs] ??= new DataView(s.bytes.buffer, s.bytes.byteOffset, bbs * 64));
    // a WQE the parser refuses (a 64-bit field beyond what the model represents, below 2^53,
    // a segment past ds, ...) is malformed: it completes LOC_QP_OP_ERR, it never stops the run
    let w: ParsedWqe | null = null;
    if (!malformed) {
      try {
        w = parseWqeInto(view, 0, s.store);
      } catch (e) {
        if (!(e instanceof RangeError || e instanceof TypeError)) throw e;
        this.sMalformed.inc();
      }
    }
    s.w = w;
    const b = s.bytes;
    s.opcode = ctrlOpcode(b);
    s.wqeIndex = ctrlWqeIndex(b);
    const ce = ctrlCe(b);
    s.signaled = ce === CeMode.CQ_UPDATE || ce === CeMode.CQ_UPDATE_AND_EQE;
    s.fence = ctrlFence(b);
    const readInv = w !== null && w.ctrl.opmod === WQE_OPMOD_READ_WITH_INV && w.kind === 'rdma' && w.ctrl.opcode === WqeOpcode.RDMA_READ;
    s.drains = w === null || readInv;
    s.local = w !== null && w.kind === 'umr';
    s.rdAtomic = w !== null && (w.kind === 'atomic' || (w.kind === 'rdma' && w.ctrl.opcode === WqeOpcode.RDMA_READ));
    s.held = false;
    this.sWqes.inc();
    if (this.tap !== null) this.tap.fetched(q.qpn, s.wqeIndex, s.opcode);
  }

  /** The probes show the WQE the arbiter tried to dispatch. */
  private probeDispatch(s: Slot): void {
    this.rQpn.set(s.q!.qpn);
    this.rWqeIndex.set(s.wqeIndex);
    this.rOpcode.set(s.opcode);
  }

  /**
   * Hands a WQE to its engine; 1: taken, 0: done at once (no engine), -1: the UMR engine is
   * full, -2: the requester is full.
   */
  private dispatch(s: Slot, q: SqQp): number {
    const qp = q.ctx;
    const w = s.w;
    this.lastAttempt = q.arbKey;
    this.probeDispatch(s);
    if (this.tap !== null) this.tap.started(qp.qpn, s.wqeIndex);
    if (w === null || w.kind === 'invalid') {
      // a malformed WQE: the local QP operation error the hardware reports
      this.complete(s, CqeSyndrome.LOCAL_QP_OP_ERR, 0);
      return 0;
    }
    if (w.ctrl.opmod !== 0) {
      // opmod is defined only for this model's RDMA_READ_WITH_INV, and only when configured:
      // any other is an unknown operation, a local QP operation error
      if (w.kind !== 'rdma' || w.ctrl.opcode !== WqeOpcode.RDMA_READ || w.ctrl.opmod !== WQE_OPMOD_READ_WITH_INV || !this.readWithInvalidate || !this.umr) {
        this.complete(s, CqeSyndrome.LOCAL_QP_OP_ERR, 0);
        return 0;
      }
      s.invKey = w.ctrl.imm >>> 0;
    }
    switch (w.kind) {
      case 'nop':
        this.complete(s, 0, 0);
        return 0;
      case 'umr':
        if (!this.umr) {
          this.complete(s, CqeSyndrome.LOCAL_QP_OP_ERR, 0);
          return 0;
        }
        if (!this.umr.req.canPush()) {
          this.sEngineStalls.inc();
          return -1;
        }
        this.umr.req.push({ tag: s.idx, qpn: qp.qpn, pd: qp.pd, fre: qp.fre, wqe: s.bytes.subarray(0, w.ctrl.ds * 16) });
        break;
      default:
        if (!this.requester.req.canPush()) {
          this.sEngineStalls.inc();
          return -2;
        }
        s.job.qpn = qp.qpn;
        s.job.wqe = w;
        this.requester.req.push(s.job);
    }
    s.state = S_EXEC;
    q.executing++;
    if (s.local) q.execLocal++;
    if (s.rdAtomic) q.execRdAtomic++;
    if (s.drains) q.barrier = s;
    if (s.held) this.rFenceWaits.set(0);
    return 1;
  }

  /** The WQE is done: an error moves the QP to ERR at once; the CQE follows in order. */
  private complete(s: Slot, syndrome: number, byteLen: number): void {
    const q = s.q!;
    if (s.state === S_EXEC || s.state === S_INV_WAIT || s.state === S_INV_PUSH) {
      q.executing--;
      if (s.local) q.execLocal--;
      if (s.rdAtomic) q.execRdAtomic--;
    }
    if (q.barrier === s) q.barrier = null;
    if (this.gone(q)) {
      // dropped: no completion for a destroyed QP
      this.freeSlot(s);
      return;
    }
    if (this.tap !== null && this.tap.completed !== undefined) this.tap.completed(q.qpn, s.wqeIndex, syndrome);
    s.state = S_DONE;
    s.syndrome = syndrome;
    s.byteLen = byteLen;
    this.rSyndrome.set(syndrome);
    if (syndrome !== 0) {
      this.sErrors.inc();
      const qp = this.table.getQp(q.qpn);
      if (qp !== undefined && qp.state !== 'ERR') {
        // a malformed WQE is the QP's catastrophic error (QP_FATAL); other errors raise no event
        this.table.hwError(q.qpn, syndrome === CqeSyndrome.LOCAL_QP_OP_ERR ? 'WQ_CATAS_ERROR' : undefined);
        if (this.flush.canPush()) this.flush.push(q.qpn);
      }
    }
    this.activate(q);
  }

  private freeSlot(s: Slot): void {
    s.state = S_FREE;
    s.q = null;
    s.w = null;
    this.slotTable.give(s);
    if (this.waiters.len > 0) {
      this.wakeWaiters();
      this.wake();
    }
  }
}
