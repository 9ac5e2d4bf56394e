/**
 * The RC responder (`tb.hcaN.responder`): serves incoming messages of many QPs at once, each in
 * a responder context (`config.responderContexts`). Per message: check it (spec/semantics.md
 * "Data path: remote access", "local access" of receive buffers, "Remote invalidate"), move
 * the bytes by DMA, write the receive completion, answer the requester (ACK, NAK, or READ /
 * atomic data).
 *
 * Order within a QP (RC): a message is taken only with the QP's expected PSN (others are
 * dropped: after an RNR NAK the requester sends it and the later ones again); answers leave in
 * PSN order. A plain RDMA READ or WRITE may start (translate its rkey) while the message before
 * it, also a plain READ or WRITE, is in flight; it acts on the result (NAK, or DMA) only once
 * that one has passed its checks and issued all its DMA, so memory sees the QP's accesses in
 * order and nothing after a failing message touches memory; every
 * other operation (SEND*, WRITE with immediate, atomics) waits for the messages before it to
 * finish, and those after it wait for it. Messages of different QPs never wait for each other,
 * only for contexts, the ATU and PCIe.
 *
 * A QP that is not ready to receive drops the message (the requester times out), as does a
 * destroyed QP (DESTROY_QP): a message of it in progress writes no completion and sends no
 * answer. Receive WQEs are fetched from the QP's receive queue (`rq` doorbells), each a list of
 * 16-byte data segments ended by the invalid lkey 0x100.
 *
 * SEND_WITH_INV's invalidation (stage INVALIDATE, after the data is placed and before the
 * receive CQE) goes through the UMR engine's `rinv` queues as a LOCAL_INV WQE run under the
 * remote rules: it takes a UMR's time and updates the mkey cache coherently, as LOCAL_INV does.
 */
import { EnumType, Fifo, Module, enumType, type ReqResp, type Reg, type Signal, type WireOptions } from '../../sim/index.ts';
import type { PayloadPool } from '../memory/payload_pool.ts';
import { dmaRead, type DmaPort } from '../memory/pcie.ts';
import { DmaMover, MOVER_TAG_SPAN } from '../memory/dma_mover.ts';
import type { AtuPort } from '../translation/atu.ts';
import { AtuAnswer, type AtuRequest, type AtuResponse, type PhysSegment } from '../translation/atu_types.ts';
import type { Link } from './link.ts';
import type { RcNak, RcRequest, RcResponse } from './rc_types.ts';
import type { QpTable, QpView } from './qp_table.ts';
import { BlockedStalls } from '../../sim/blocked_sleep.ts';
import { ContextTable } from './context_table.ts';
import type { CqeJob } from '../completion/cq_writer.ts';
import type { UmrDone, UmrJob } from '../umr/umr_types.ts';
import { CqeOpcode, CqeSyndrome, MLX5_INVALID_LKEY, PageFaultFlag, PageFaultSubtype } from '../formats/constants.ts';
import type { FaultClient, FaultReport } from '../translation/pagefault.ts';
import type { DmaFenceHolds, FaultReporter } from './requester.ts';
import { decodeDataSeg, dataSegLength } from '../formats/data_seg.ts';
import { IB_LOCAL_WRITE, IB_REMOTE_ATOMIC, IB_REMOTE_READ, IB_REMOTE_WRITE } from '../memory/icm_mkey.ts';
import { LOCAL_INV_WQE_BYTES, encodeLocalInvWqe } from '../umr/umr_ops.ts';
import { queueAddr } from '../memory/pas.ts';
import { rqStride } from '../formats/rq_wqe.ts';

/** A receive queue doorbell: the driver posted receive WQEs up to counter `pi`. */
export interface RqDoorbell {
  qpn: number;
  pi: number;
}

/** The `op` trace value: index in this list plus one (0: none), named in the waves. */
const RC_OPS = ['SEND', 'SEND_IMM', 'SEND_INV', 'WRITE', 'WRITE_IMM', 'READ', 'CMP_SWAP', 'FETCH_ADD'];
const RcOpEnum = new EnumType('rc_op', ['NONE', ...RC_OPS]);
/** The NAK the responder last answered with (0: none yet). */
const RcNakEnum = new EnumType('rc_nak', ['NONE', 'ACCESS', 'INV_REQ', 'REM_OP', 'RNR'] satisfies ('NONE' | RcNak)[]);

/** What a context is doing; the `state` trace shows the stage of the last context that moved. */
/** WAIT_TURN: admitted, waiting for the messages before it in its QP (the order rules above). */
export const [ResponderState, RESP_STATES] = enumType('responder_state', [
  'IDLE', 'XLATE', 'FETCH_RWQE', 'XLATE_RECV', 'WRITE_DATA', 'READ_DATA', 'ATOMIC', 'INVALIDATE', 'CQE', 'ANSWER', 'FLUSH', 'WAIT_TURN',
]);
const { IDLE, XLATE, FETCH_RWQE, XLATE_RECV, WRITE_DATA, READ_DATA, ATOMIC, INVALIDATE, CQE, ANSWER, FLUSH, WAIT_TURN } = RESP_STATES;

/** ATU tags: context * ATU_TAG_SPAN + receive SGE index; RKEY_TAG for the message's rkey. */
const ATU_TAG_SPAN = 64;
const RKEY_TAG = 63;
/** The receive WQE read's DMA chunk number (movers count chunks from 0). */
const RWQE_CHUNK = 0x7fffff;

/** Wiring and size of the responder (wired in hca.ts). */
export interface ResponderOptions
  extends WireOptions<
    {
      readonly atu: AtuPort;
      readonly dma: DmaPort;
      readonly cqWriter: Fifo<CqeJob>;
      /** The UMR engine's remote-invalidation queues (SEND_WITH_INV). */
      readonly rinv: ReqResp<UmrJob, UmrDone> | null;
    },
    { readonly qps: QpTable; readonly payloads: PayloadPool; readonly faults?: FaultReporter; readonly fence?: DmaFenceHolds }
  > {
  /** Messages served at once, across all QPs (contexts). */
  readonly contexts: number;
}

interface RespQp {
  readonly qpn: number;
  /** Receive queue: posted (doorbell) and consumed WQEs. */
  pi: number;
  ci: number;
  /** The PSN of the next message to take. */
  ePsn: number;
  /** Admitted messages, in PSN order. */
  readonly list: Ctx[];
  /**
   * On-demand paging: a fault of the QP is with the driver ('inflight': its messages are
   * answered RNR-NAK), or the driver resumed it with ERROR ('error': the next faulting access
   * fails with a remote access error).
   */
  fault: 'none' | 'inflight' | 'error';
}

interface Ctx {
  readonly idx: number;
  /** The DMA fence holds its translations carry (the first nHolds), until the context ends (its DMA is over by then). */
  readonly holds: number[];
  nHolds: number;
  /**
   * The remote key's translation request, with the answer the ATU writes, reused by each
   * message of the context: a message issues it once, and ends only after its answer came,
   * so the next message's request never meets a translation of this one in flight; its
   * segments (`segs`) serve the message's DMA, over before the context is free.
   */
  readonly rkeyReq: AtuRequest;
  readonly mover: DmaMover;
  stage: number;
  m: RcRequest | null;
  qp: QpView | null;
  rq: RespQp | null;
  /** Passed its checks and issued all its DMA: a plain READ / WRITE after it may start. */
  committed: boolean;
  /**
   * An earlier message of the QP was answered RNR-NAK after this one was taken: the requester
   * sends this one again, so this try answers nothing (IB: packets after the NAK'd PSN are
   * discarded until the retry).
   */
  stale: boolean;
  segs: PhysSegment[];
  /**
   * A WRITE that met a page not present after its first packets: those packets' bytes, placed
   * before the RNR NAK that reports them (bytes_committed); 0 otherwise.
   */
  partial: number;
  partialReport: FaultReport | null;
  pending: AtuResponse | null;
  issued: boolean;
  answer: RcResponse | null;
  cqes: CqeJob[];
  recvSges: { lkey: number; addr: number; length: number }[];
  recvResults: (AtuResponse | null)[];
  recvIssued: number;
  rwqeAsked: boolean;
  rwqeData: Uint8Array | null;
  atomicPhase: number;
  invIssued: boolean;
  invDone: UmrDone | null;
  invStarted: number;
  readonly invWqe: Uint8Array;
  active: boolean;
  /** Place in the arbiter's order (see `activate`): contexts are served by increasing label. */
  label: number;
  /** Waiting only for room in the ATU port: in `parked`, not served until its turn finds room. */
  parked: boolean;
}

/** Spacing of the arbiter's labels when they are handed out anew. */
const LABEL_GAP = 2 ** 16;
/** Labels stay below this (V8's small integers end at 2^30). */
const LABEL_LIMIT = 2 ** 29;

export class Responder extends Module implements FaultClient {
  /** Requests from the link. */
  readonly inbox: Fifo<RcRequest>;
  /** Receive queue doorbells (rung through PCIe by the driver). */
  readonly rqDoorbell: Fifo<RqDoorbell>;
  /** QPs the send side moved to ERR: their posted receives are flushed. */
  readonly flushReq: Fifo<number>;
  link: Link<RcResponse> | null = null;
  private readonly cqWriter: Fifo<CqeJob>;
  private readonly rinv: { readonly req: Fifo<UmrJob>; readonly resp: Fifo<UmrDone> } | null;
  /** Contexts waiting for the UMR engine's remote invalidations, in the order they were pushed. */
  private readonly rinvWaiting: Ctx[] = [];
  private readonly atu: AtuPort;
  private readonly port: DmaPort;
  private readonly table: QpTable;
  private readonly ctxTable: ContextTable<Ctx>;
  private readonly ctxs: readonly Ctx[];
  private readonly rqs = new Map<number, RespQp>();
  /**
   * Double-buffered work lists: `active` (the first nActive entries) is next edge's. The lists
   * are in arbiter order: an edge serves its list in order, and what a context activates while
   * served joins the next list at that point. A context that can only wait for room in the ATU
   * port is parked (`parked`, sorted by label) instead of being served every edge; its label
   * keeps its place, so it is served at its turn once the port has room, as before.
   */
  private active: Ctx[] = [];
  private nActive = 0;
  private spare: Ctx[] = [];
  private readonly parked: Ctx[] = [];
  /** The list being served this edge (`cur`, `curN` entries, the next at `curI`). */
  private cur: Ctx[] = [];
  private curN = 0;
  private curI = 0;
  private inLoop = false;
  /** While serving: the label of the context served, and the last label at or before it in use. */
  private curLabel = 0;
  private lo = 0;
  /** The largest label handed out. */
  private tailLabel = 0;
  /** contexts_full_stalls of the edges slept through with every context parked (see tick). */
  private readonly ctxSleep: BlockedStalls;
  /** The last step left its context waiting only for the ATU port. */
  private atuBlocked = false;
  /** QPs whose posted receives are to be flushed, once no message of theirs is in flight. */
  private readonly flushQ: number[] = [];
  private readonly state: Signal;
  private readonly rInflight: Reg;
  private readonly rQpn: Reg;
  private readonly rOp: Reg;
  private readonly rKey: Reg;
  private readonly rNak: Reg;
  private readonly sMessages;
  private readonly sNaks;
  private readonly sDrops;
  private readonly sOutOfSeq;
  private readonly sRnr;
  private readonly sInvalidations;
  private readonly sInvLatency;
  private readonly faults: FaultReporter | null;
  /** The DMA fence: a message releases its translations' holds at the end of its context (its DMA is over by then). */
  private readonly fence: DmaFenceHolds | null;
  private readonly sFaultRnr;

  constructor(parent: Module, name: string, o: ResponderOptions) {
    super(parent.sim, parent, name);
    if (!Number.isInteger(o.contexts) || o.contexts < 1 || o.contexts > MOVER_TAG_SPAN) {
      throw new RangeError(`${this.path}: contexts ${o.contexts} must be an integer in 1..${MOVER_TAG_SPAN}`);
    }
    this.atu = o.ports.atu;
    this.port = o.ports.dma;
    this.table = o.deps.qps;
    this.faults = o.deps.faults ?? null;
    this.fence = o.deps.fence ?? null;
    this.cqWriter = o.ports.cqWriter;
    this.rinv = o.ports.rinv;
    this.state = this.signal('state', ResponderState.width, { enum: ResponderState });
    this.rInflight = this.probe('inflight', 8);
    this.rQpn = this.probe('qpn', 24);
    this.rOp = this.probe('op', 4, { enum: RcOpEnum });
    this.rKey = this.probe('rkey', 32);
    this.rNak = this.probe('nak', RcNakEnum.width, { enum: RcNakEnum });
    this.inbox = new Fifo<RcRequest>(this, 'inbox', { capacity: 1024 });
    this.rqDoorbell = new Fifo<RqDoorbell>(this, 'rq_doorbell', { capacity: 16 });
    this.flushReq = new Fifo<number>(this, 'flush_req', { capacity: 16 });
    this.inbox.consumer = this;
    this.rqDoorbell.consumer = this;
    this.flushReq.consumer = this;
    this.atu.resp.consumer = this;
    this.atu.req.producer = this;
    this.port.resp.consumer = this;
    this.port.req.producer = this;
    this.cqWriter.producer = this;
    if (this.rinv) {
      this.rinv.req.producer = this;
      this.rinv.resp.consumer = this;
    }
    this.ctxSleep = new BlockedStalls(o.clock.period);
    this.ctxTable = new ContextTable<Ctx>(o.contexts, (i) => ({
        idx: i, holds: [], nHolds: 0, rkeyReq: { key: 0, va: 0, length: 0, access: 0, pd: 0, qpn: 0, tag: i * ATU_TAG_SPAN + RKEY_TAG, answer: new AtuAnswer() }, mover: new DmaMover(o.ports.dma, o.deps.payloads, i), stage: IDLE, m: null, qp: null, rq: null, committed: false, stale: false, partial: 0, partialReport: null,
        segs: [], pending: null, issued: false, answer: null, cqes: [], recvSges: [], recvResults: [], recvIssued: 0,
        rwqeAsked: false, rwqeData: null, atomicPhase: 0, invIssued: false, invDone: null, invStarted: 0,
        invWqe: new Uint8Array(LOCAL_INV_WQE_BYTES), active: false, label: 0, parked: false,
      }), this.stats, 'contexts', { stalls: this.ctxSleep, now: () => this.sim.now });
    this.ctxs = this.ctxTable.all;
    this.sMessages = this.stats.counter('messages');
    this.sNaks = this.stats.counter('naks');
    this.sDrops = this.stats.counter('drops');
    this.sOutOfSeq = this.stats.counter('out_of_sequence');
    this.sRnr = this.stats.counter('rnr_naks');
    this.sFaultRnr = this.stats.counter('page_fault_rnr_naks');
    this.sInvalidations = this.stats.counter('remote_invalidations');
    this.sInvLatency = this.stats.histogram('remote_inv_latency_ps');
    this.clockedBy(o.clock);
  }

  /** Contexts in use (messages being served). */
  get inFlight(): number {
    return this.ctxTable.inUse;
  }

  /** Work in flight: a message in a context or waiting, a flush to do. */
  override hasWork(): boolean {
    return this.inFlight > 0 || this.inbox.canPop() || this.flushQ.length > 0 || this.flushReq.canPop() || this.rqDoorbell.canPop();
  }

  /** DESTROY_QP executed: forget the QP's receive queue (its messages in flight finish silently). */
  forgetQp(qpn: number): void {
    this.rqs.delete(qpn);
  }

  private rqOf(qpn: number): RespQp {
    let r = this.rqs.get(qpn);
    if (!r) this.rqs.set(qpn, (r = { qpn, pi: 0, ci: 0, ePsn: 0, list: [], fault: 'none' }));
    return r;
  }

  /** The context's QP was destroyed since its message was taken. */
  private gone(c: Ctx): boolean {
    return this.table.getQp(c.m!.dstQpn) !== c.qp || this.rqs.get(c.m!.dstQpn) !== c.rq;
  }

  private activate(c: Ctx): void {
    // a parked context's next step needs room in the ATU port and nothing an input brings: it
    // stays parked (the scan found it in the list already, and stepped it to no effect)
    if (c.active || c.parked) return;
    c.active = true;
    // a context served now keeps its place; one activated while another is served joins the
    // next list there (before the served one's place); one activated outside the loop, the end
    if (!this.inLoop) c.label = this.tailLabel += LABEL_GAP;
    else if (c.label !== this.curLabel || this.cur[this.curI - 1] !== c) c.label = this.labelHere();
    this.active[this.nActive++] = c;
  }

  /** A label after every one in use before the served context's, and before its own. */
  private labelHere(): number {
    let l = Math.floor((this.lo + this.curLabel) / 2);
    if (l <= this.lo) {
      this.relabel();
      l = Math.floor((this.lo + this.curLabel) / 2);
    }
    this.lo = l;
    return l;
  }

  /** Between edges: the active and parked contexts take labels from the start again, in order. */
  private relabelIdle(): void {
    const all: Ctx[] = [];
    for (let i = 0; i < this.nActive; i++) all.push(this.active[i]);
    for (const c of this.parked) all.push(c);
    all.sort((a, b) => a.label - b.label);
    for (let i = 0; i < all.length; i++) all[i].label = (i + 1) * LABEL_GAP;
    this.tailLabel = (all.length + 1) * LABEL_GAP;
  }

  /** Labels ran out between two places: every live context takes a new one, in order. */
  private relabel(): void {
    const all: Ctx[] = [];
    for (let i = 0; i < this.nActive; i++) all.push(this.active[i]);
    const served = this.cur[this.curI - 1];
    all.push(served);
    for (let i = this.curI; i < this.curN; i++) all.push(this.cur[i]);
    for (const c of this.parked) all.push(c);
    all.sort((a, b) => a.label - b.label);
    let lo = 0;
    for (let i = 0; i < all.length; i++) {
      all[i].label = (i + 1) * LABEL_GAP;
      if (all[i] === served) lo = i * LABEL_GAP;
    }
    this.tailLabel = (all.length + 1) * LABEL_GAP;
    this.curLabel = served.label;
    this.lo = lo;
  }

  override tick(): void {
    this.ctxSleep.ticks(this.sim.now);
    while (this.rqDoorbell.canPop()) {
      const d = this.rqDoorbell.pop();
      const qp = this.table.getQp(d.qpn);
      if (qp === undefined) continue; // a destroyed QP's doorbell is ignored
      this.rqOf(d.qpn).pi = d.pi;
      if (qp.state === 'ERR') this.flushQ.push(d.qpn);
    }
    while (this.flushReq.canPop()) this.flushQ.push(this.flushReq.pop());
    while (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      const c = this.ctxs[r.tag % MOVER_TAG_SPAN];
      if (Math.floor(r.tag / MOVER_TAG_SPAN) === RWQE_CHUNK) c.rwqeData = r.data!;
      else c.mover.complete(r.tag, r.data!);
      this.activate(c);
    }
    while (this.atu.resp.canPop()) {
      const r = this.atu.resp.pop();
      const c = this.ctxs[Math.floor(r.tag / ATU_TAG_SPAN)];
      const t = r.tag % ATU_TAG_SPAN;
      if (r.fenceKey) c.holds[c.nHolds++] = r.fenceKey;
      if (r.fenceInd) c.holds[c.nHolds++] = r.fenceInd;
      if (t === RKEY_TAG) c.pending = r;
      else c.recvResults[t] = r;
      this.activate(c);
    }
    if (this.rinv) {
      while (this.rinv.resp.canPop() && this.rinvWaiting.length > 0) {
        const c = this.rinvWaiting.shift()!;
        c.invDone = this.rinv.resp.pop();
        this.activate(c);
      }
    }
    // take messages while contexts are free
    while (this.inbox.canPop() && this.ctxTable.hasFree) this.admit(this.inbox.pop());
    if (this.inbox.canPop()) this.ctxTable.take(); // none free: counted as a stall
    // labels only order the contexts: renumbered (in order) before they leave the small
    // integers, which V8 stores unboxed; past them every label written was a new heap number
    if (this.tailLabel > LABEL_LIMIT) this.relabelIdle();
    let act = -1;
    const parked = this.parked;
    if (this.nActive > 0 || parked.length > 0) {
      this.cur = this.active;
      this.curN = this.nActive;
      this.curI = 0;
      this.active = this.spare;
      this.nActive = 0;
      this.inLoop = true;
      this.lo = 0;
      let pos = -1;
      for (;;) {
        // the next context in order: the list's, or a parked one whose turn finds room in the
        // ATU port (asked only then, as that context would ask it)
        const next = this.curI < this.curN ? this.cur[this.curI] : null;
        const pk = parked.length > 0 ? upperBound(parked, pos) : 0;
        let c: Ctx;
        if (pk < parked.length && (next === null || parked[pk].label < next.label) && this.atu.req.canPush()) {
          c = parked[pk];
          parked.splice(pk, 1);
          c.parked = false;
          // it joins the list being served, as the context the loop is at (the array is reused
          // edge after edge: cut what lies past the list first, or every insertion grows it and
          // the next one shifts all of it)
          if (this.cur.length > this.curN) this.cur.length = this.curN;
          this.cur.splice(this.curI, 0, c);
          this.curN++;
        } else if (next !== null) c = next;
        else break;
        this.curI++;
        this.curLabel = c.label;
        // what it activates goes after every context before it (parked ones too)
        if (parked.length > 0) {
          const pb = lowerBound(parked, c.label);
          if (pb > 0 && parked[pb - 1].label > this.lo) this.lo = parked[pb - 1].label;
        }
        c.active = false;
        if (this.stepCtx(c)) {
          if (this.atuBlocked) {
            c.parked = true;
            parked.splice(lowerBound(parked, c.label), 0, c);
          } else this.activate(c);
        }
        pos = c.label; // (renumbered if labels ran out)
        if (pos > this.lo) this.lo = pos;
        act = c.stage;
      }
      this.inLoop = false;
      this.spare = this.cur;
      // a parked context served after the last one served would have set the state last
      if (parked.length > 0 && parked[parked.length - 1].label > pos) act = parked[parked.length - 1].stage;
    }
    if (this.flushQ.length > 0 && this.flush()) act = FLUSH;
    const busy = this.inFlight;
    this.rInflight.set(busy);
    if (act >= 0 && act !== WAIT_TURN) this.state.setNow(act);
    else if (busy === 0) this.state.setNow(IDLE);
    if (this.nActive === 0 && this.flushQ.length === 0 && !(this.inbox.canPop() && this.ctxTable.hasFree)) {
      if (parked.length === 0) this.sleep();
      else if (this.sim.tracer === null && !this.atu.req.canPush()) {
        // every context left waits for room in the ATU port, which only the ATU's pop makes
        // (it wakes this producer, as any input does): the edges until then would each find the
        // port full and, with a message waiting and no context free, count a stall. Untraced
        // only: a traced run keeps its clock's edges in the waves.
        this.ctxSleep.begin(this.sim.now, this.inbox.canPop() ? 1 : 0);
        this.sleep();
      }
    }
  }

  /** A message from the link: taken in PSN order per QP, or dropped. */
  private admit(m: RcRequest): void {
    this.sMessages.inc();
    const qp = this.table.getQp(m.dstQpn);
    // a QP that cannot receive drops the message; the requester's ACK timer runs out
    if (!qp || (qp.state !== 'RTR' && qp.state !== 'RTS') || qp.remoteQpn !== m.srcQpn) {
      this.sDrops.inc();
      return;
    }
    const rq = this.rqOf(m.dstQpn);
    if (m.seq !== rq.ePsn) {
      // a copy of an earlier message, or one sent after a message this QP refused (RNR): the
      // requester sends it again in order
      this.sOutOfSeq.inc();
      return;
    }
    rq.ePsn++;
    const c = this.ctxTable.take()!;
    c.mover.qpn = qp.qpn;
    c.m = m;
    c.qp = qp;
    c.rq = rq;
    c.committed = false;
    c.stale = false;
    c.stage = WAIT_TURN;
    rq.list.push(c);
    if (this.mayStart(c)) this.activate(c);
  }

  /** A plain READ or WRITE: may overlap the one before it (see the order rules above). */
  private static pipelined(c: Ctx): boolean {
    const op = c.m!.op;
    return op === 'READ' || op === 'WRITE';
  }

  private mayStart(c: Ctx): boolean {
    const list = c.rq!.list;
    const i = list.indexOf(c);
    if (i === 0) return true;
    const prev = list[i - 1];
    return Responder.pipelined(c) && Responder.pipelined(prev) && prev.stage !== WAIT_TURN;
  }

  /**
   * Every earlier message of the QP has passed its checks and issued its DMA; a WRITE after a
   * READ also waits for the READ's data to be read (PCIe lets a posted write pass a read).
   */
  private earlierCommitted(c: Ctx): boolean {
    const list = c.rq!.list;
    const i = list.indexOf(c);
    if (i <= 0) return true;
    if (!list[i - 1].committed) return false;
    if (c.m!.op !== 'WRITE') return true;
    // any earlier READ of the QP still reading (not only the one just before: a zero-length READ
    // between them is done at once)
    for (let j = 0; j < i; j++) if (list[j].m!.op === 'READ' && list[j].stage === READ_DATA) return false;
    return true;
  }

  /** The message passed its checks and issued its DMA: a pipelined successor may start. */
  private commit(c: Ctx): void {
    if (c.committed) return;
    c.committed = true;
    const list = c.rq!.list;
    const i = list.indexOf(c);
    const next = list[i + 1];
    if (next !== undefined) this.activate(next); // it may start, or act on its translation
  }

  /** Steps one context as far as it goes this edge; true: step it again next edge. */
  private stepCtx(c: Ctx): boolean {
    for (let i = 0; i < 8; i++) {
      const before = c.stage;
      this.atuBlocked = false;
      const again = this.step(c);
      if (c.stage === IDLE) return false;
      if (c.stage === before) return again;
    }
    return true;
  }

  /** One step of a context's FSM; true: it has more to do without a new input. */
  private step(c: Ctx): boolean {
    switch (c.stage) {
      case WAIT_TURN:
        if (!this.mayStart(c)) return false;
        this.begin(c);
        return true;
      case XLATE:
        return this.xlate(c);
      case FETCH_RWQE:
        if (c.rwqeData !== null) {
          this.onRwqe(c, c.rwqeData);
          c.rwqeData = null;
          return true;
        }
        if (!c.rwqeAsked) return this.askRwqe(c);
        return false; // woken by the read data
      case XLATE_RECV:
        return this.xlateRecv(c);
      case WRITE_DATA:
        c.mover.step();
        if (c.mover.done) {
          if (c.partial > 0) {
            // the packets before the fault are placed: now the fault and the RNR NAK
            const rep = c.partialReport!;
            c.partialReport = null;
            this.pageFault(c, rep);
            return true;
          }
          this.commit(c);
          this.afterWrite(c);
          return true;
        }
        return true;
      case READ_DATA:
        c.mover.step();
        if (c.mover.waiting) this.commit(c);
        if (c.mover.done) {
          this.commit(c);
          this.ack(c, { kind: 'READ_DATA', data: c.mover.data, dataBuf: c.mover.takeBuf() });
          // a WRITE after it may go on now
          const list = c.rq!.list;
          for (let j = list.indexOf(c) + 1; j < list.length; j++) this.activate(list[j]);
          return true;
        }
        return !c.mover.waiting;
      case ATOMIC:
        return this.atomic(c);
      case INVALIDATE:
        return this.invalidate(c);
      case CQE:
        while (c.cqes.length > 0 && this.cqWriter.canPush()) this.cqWriter.push(c.cqes.shift()!);
        if (c.cqes.length > 0) return true; // the CQ writer is full: try again next edge
        c.stage = c.answer ? ANSWER : IDLE;
        if (c.stage === IDLE) this.done(c);
        return true;
      case ANSWER:
        return this.sendAnswer(c);
    }
    return false;
  }

  private begin(c: Ctx): void {
    const m = c.m!;
    this.rQpn.set(m.dstQpn);
    this.rOp.set(RC_OPS.indexOf(m.op) + 1);
    this.rKey.set(m.rkey >>> 0);
    if (c.cqes.length !== 0) c.cqes = [];
    c.answer = null;
    c.pending = null;
    c.issued = false;
    c.invIssued = false;
    c.invDone = null;
    c.rwqeData = null;
    // the QP moved to ERR (an earlier message failed) or was destroyed since the message came
    if (this.gone(c) || (c.qp!.state !== 'RTR' && c.qp!.state !== 'RTS')) {
      this.sDrops.inc();
      return this.done(c);
    }
    const rq = c.rq!;
    if (m.op === 'SEND' || m.op === 'SEND_IMM' || m.op === 'SEND_INV') {
      if (rq.ci >= rq.pi) return this.nak(c, 'RNR');
      return this.fetchRwqe(c);
    }
    // RDMA: the remote key, unless zero length (which checks nothing); a pipelined READ or
    // WRITE of zero length still takes its turn (it acts once the messages before it committed)
    if (m.length === 0 && Responder.pipelined(c)) {
      c.issued = true;
      c.pending = ZERO_LENGTH_OK;
      c.stage = XLATE;
      return;
    }
    if (m.length === 0 && m.op !== 'CMP_SWAP' && m.op !== 'FETCH_ADD') {
      if (m.op === 'WRITE_IMM' && rq.ci >= rq.pi) return this.nak(c, 'RNR');
      c.committed = true;
      return this.afterWrite(c);
    }
    c.stage = XLATE;
  }

  private xlate(c: Ctx): boolean {
    const m = c.m!;
    const qp = c.qp!;
    if (!c.issued) {
      if (!this.atu.req.canPush()) {
        this.atuBlocked = true; // the ATU port is full: parked until its turn finds room
        return true;
      }
      const access = m.op === 'READ' ? IB_REMOTE_READ : m.op === 'WRITE' || m.op === 'WRITE_IMM' ? IB_REMOTE_WRITE : IB_REMOTE_ATOMIC;
      const q = c.rkeyReq;
      q.key = m.rkey;
      q.va = m.raddr;
      q.length = m.length;
      q.access = access;
      q.pd = qp.pd;
      q.qpn = qp.qpn;
      this.atu.req.push(q);
      c.issued = true;
      return false;
    }
    if (c.pending === null) return false; // woken by the ATU's answer
    // the checks of a message take effect in PSN order: after the one before it committed
    if (!this.earlierCommitted(c)) return false; // woken by its commit (or its end)
    if (this.gone(c) || (c.qp!.state !== 'RTR' && c.qp!.state !== 'RTS')) {
      // an earlier message failed (the QP is in ERR) or the QP was destroyed: nothing more
      this.sDrops.inc();
      c.pending = null;
      this.done(c);
      return false;
    }
    const pend = c.pending;
    const r = pend.result;
    c.pending = null;
    if (c.stale) {
      // an earlier message of the QP was NAK'd RNR: this try is discarded before its checks (its
      // retry comes), so it neither acts nor fails
      this.sOutOfSeq.inc();
      this.done(c);
      return false;
    }
    if (r.kind === 'fault' && this.faults !== null) {
      const write = m.op !== 'READ';
      // the packets of a WRITE before the one the page is in are placed first (the hardware
      // moves a message packet by packet); the fault reports them as bytes_committed, of the
      // whole operation (rdma_va and rdma_op_len as its first packet's RETH gave them), and the
      // requester sends only the rest (odp.c:1455-1459 skips them in the fault's range)
      const part = this.placeable(c, r.bytesCommitted, pend);
      const report: FaultReport = {
        subType: PageFaultSubtype.RDMA,
        flags: PageFaultFlag.RDMA | (write ? PageFaultFlag.WRITE : 0),
        qpn: qp.qpn, bytesCommitted: m.offset + part, packetLength: Math.min(m.length - part, qp.mtu, 0xffff),
        rKey: m.rkey >>> 0, rdmaVa: m.raddr - m.offset, rdmaOpLen: m.length + m.offset,
      };
      if (part > 0) {
        c.partial = part;
        c.partialReport = report;
        c.mover.scatter(clip(pend.partial!, part), m.payload!.subarray(0, part), m.payloadBuf ?? null);
        c.stage = WRITE_DATA;
        return true;
      }
      this.pageFault(c, report);
      return true;
    }
    if (r.kind !== 'ok') {
      this.fatal(c, 'ACCESS', null);
      return true;
    }
    c.segs = r.segments;
    if (m.op === 'CMP_SWAP' || m.op === 'FETCH_ADD') {
      // (6) atomics must be 8-byte aligned, after the access checks
      if (m.raddr % 8 !== 0) {
        this.fatal(c, 'INV_REQ', null);
        return true;
      }
      c.atomicPhase = 0;
      c.stage = ATOMIC;
      return true;
    }
    if (m.op === 'READ') {
      c.mover.gather(c.segs);
      c.stage = READ_DATA;
      return true;
    }
    const rq = c.rq!;
    if (m.op === 'WRITE_IMM' && rq.ci >= rq.pi) {
      this.nak(c, 'RNR');
      return true;
    }
    c.mover.scatter(c.segs, m.payload!, m.payloadBuf ?? null);
    c.stage = WRITE_DATA;
    return true;
  }

  /**
   * A page of the access is not present (ODP): the driver is told once per QP (the page-fault
   * unit's EQE) and the message is answered RNR-NAK, so the requester sends it again after its
   * RNR timer (spec/semantics.md "On-demand paging"). After a resume with ERROR the access fails
   * as any access error: REM_ACCESS_ERR at the requester, the QP to ERR.
   */
  private pageFault(c: Ctx, report: FaultReport): void {
    const rq = c.rq!;
    if (c.stale) {
      // after an earlier RNR-NAK of the QP: discarded, its retry comes (no second NAK)
      c.answer = null;
      this.sOutOfSeq.inc();
      this.done(c);
      return;
    }
    if (rq.fault === 'error') {
      rq.fault = 'none';
      if (report.subType === PageFaultSubtype.RDMA) this.fatal(c, 'ACCESS', null);
      else this.fatal(c, 'REM_OP', CqeSyndrome.LOCAL_ACCESS_ERR);
      return;
    }
    if (rq.fault === 'none') {
      rq.fault = 'inflight';
      this.faults!.report(report, this, rq.qpn);
    }
    this.sFaultRnr.inc();
    this.nak(c, 'RNR');
  }

  /**
   * Bytes of a faulting WRITE placed before its RNR NAK: the whole packets (path MTU) of the
   * `translated` bytes before the page not present, when the fault will be reported now (the
   * QP has none with the driver, the message is not stale); 0 for any other operation.
   */
  private placeable(c: Ctx, translated: number, r: AtuResponse): number {
    const m = c.m!;
    if ((m.op !== 'WRITE' && m.op !== 'WRITE_IMM') || c.stale || c.rq!.fault !== 'none' || !r.partial) return 0;
    const mtu = c.qp!.mtu;
    return Math.floor(Math.min(translated, m.length) / mtu) * mtu;
  }

  /** @internal The driver resumed the QP's fault: later tries translate again, or fail after ERROR. */
  faultResumed(qpn: number, ok: boolean): void {
    const rq = this.rqs.get(qpn);
    if (rq !== undefined && rq.fault === 'inflight') rq.fault = ok ? 'none' : 'error';
  }

  /** Reads the next receive WQE of the QP. */
  private fetchRwqe(c: Ctx): void {
    c.rwqeAsked = false;
    c.stage = FETCH_RWQE;
  }

  /** Issues the receive WQE read once the PCIe port takes it. */
  private askRwqe(c: Ctx): boolean {
    if (!this.port.req.canPush()) return true; // the port is full: try again next edge
    const qp = c.qp!;
    const rq = c.rq!;
    const stride = rqStride(qp.maxRecvSge);
    // a receive WQE never crosses a page: its stride is a power of two up to 4 KiB
    this.port.req.push(dmaRead(queueAddr(qp.rqPages, (rq.ci & (qp.rqSize - 1)) * stride), stride, RWQE_CHUNK * MOVER_TAG_SPAN + c.idx));
    c.rwqeAsked = true;
    return false;
  }

  private onRwqe(c: Ctx, data: Uint8Array): void {
    const v = new DataView(data.buffer, data.byteOffset, data.length);
    c.recvSges = [];
    for (let off = 0; off + 16 <= data.length; off += 16) {
      const d = decodeDataSeg(v, off);
      if (d.lkey === MLX5_INVALID_LKEY) break;
      c.recvSges.push({ lkey: d.lkey, addr: d.addr, length: dataSegLength(d.byteCount) });
    }
    c.recvResults = [];
    c.recvIssued = 0;
    c.segs = [];
    c.stage = XLATE_RECV;
  }

  /** The receive SGEs that the message's bytes need, translated for LOCAL_WRITE in order. */
  private xlateRecv(c: Ctx): boolean {
    const m = c.m!;
    const qp = c.qp!;
    const len = m.op === 'WRITE_IMM' ? 0 : m.length;
    // how many SGEs the bytes take (later ones are not looked at)
    let need = 0;
    let cap = 0;
    while (cap < len && need < c.recvSges.length) cap += c.recvSges[need++].length;
    while (c.recvIssued < need && this.atu.req.canPush()) {
      const s = c.recvSges[c.recvIssued];
      const take = Math.min(s.length, len - sumLen(c.recvSges, c.recvIssued));
      this.atu.req.push({ key: s.lkey, va: s.addr, length: take, access: IB_LOCAL_WRITE, pd: qp.pd, qpn: qp.qpn, tag: c.idx * ATU_TAG_SPAN + c.recvIssued, local: true });
      c.recvIssued++;
    }
    if (c.recvIssued < need) {
      this.atuBlocked = true; // the ATU port is full: issue the rest when its turn finds room
      return true;
    }
    for (let i = 0; i < need; i++) if (!c.recvResults[i]) return false; // woken by the ATU's answers
    for (let i = 0; i < need; i++) {
      const r = c.recvResults[i]!.result;
      if (r.kind === 'fault' && this.faults !== null) {
        // a receive buffer's page not present: subtype WQE without REQUESTOR, the HCA writes it
        this.pageFault(c, {
          subType: PageFaultSubtype.WQE, flags: PageFaultFlag.WRITE, qpn: qp.qpn, bytesCommitted: 0,
          packetLength: Math.min(m.length, qp.mtu, 0xffff), wqeIndex: c.rq!.ci & 0xffff,
        });
        return true;
      }
      // a bad SGE met before the message ends: the receiver's protection error, the sender's remote op error
      if (r.kind !== 'ok') {
        this.fatal(c, 'REM_OP', CqeSyndrome.LOCAL_PROT_ERR);
        return true;
      }
      for (const s of r.segments) c.segs.push(s);
    }
    if (cap < len) {
      this.fatal(c, 'INV_REQ', CqeSyndrome.LOCAL_LENGTH_ERR);
      return true;
    }
    c.mover.scatter(c.segs, m.payload ?? EMPTY, m.payloadBuf ?? null);
    c.stage = WRITE_DATA;
    return true;
  }

  /** After the data is placed: invalidate (SEND_INV), the receive completion, the ACK. */
  private afterWrite(c: Ctx): void {
    const m = c.m!;
    if (m.op === 'SEND_INV') {
      c.stage = INVALIDATE;
      return;
    }
    if (m.op === 'SEND' || m.op === 'SEND_IMM' || m.op === 'WRITE_IMM') {
      const op = m.op === 'SEND' ? CqeOpcode.RESP_SEND : m.op === 'SEND_IMM' ? CqeOpcode.RESP_SEND_IMM : CqeOpcode.RESP_WR_IMM;
      this.recvCqe(c, op, 0, m.length + m.offset, m.op === 'SEND' ? 0 : m.imm, m.se);
    }
    this.ack(c, { kind: 'ACK' });
  }

  /**
   * Remote invalidate (spec/semantics.md "Remote invalidate"), by the UMR engine (umr_ops.ts
   * checkRemoteInv has the rules): on failure the key stays valid.
   */
  private invalidate(c: Ctx): boolean {
    const m = c.m!;
    const u = this.rinv;
    if (u === null) throw new Error(`${this.path}: SEND_WITH_INV needs the UMR engine's rinv queues`);
    const key = m.invRkey >>> 0;
    if (!c.invIssued) {
      if (!u.req.canPush()) return true; // the engine's queue is full: try again next edge
      const qp = c.qp!;
      encodeLocalInvWqe(c.invWqe, key, qp.qpn, c.rq!.ci & 0xffff);
      u.req.push({ tag: qp.qpn, qpn: qp.qpn, pd: qp.pd, fre: true, wqe: c.invWqe });
      this.rinvWaiting.push(c);
      c.invIssued = true;
      c.invStarted = this.sim.now;
      return false;
    }
    if (c.invDone === null) return false; // woken by the engine's completion
    const d = c.invDone;
    c.invDone = null;
    c.invIssued = false;
    this.sInvLatency.add(this.sim.now - c.invStarted);
    if (d.syndrome !== 0) {
      this.recvCqe(c, CqeOpcode.RESP_ERR, CqeSyndrome.REMOTE_INVAL_REQ_ERR, 0, 0, false);
      this.table.hwError(c.qp!.qpn, 'WQ_INVAL_REQ_ERROR');
      this.flushQ.push(c.qp!.qpn);
      this.ack(c, { kind: 'ACK' }); // the sender's SEND succeeded
      return true;
    }
    this.sInvalidations.inc();
    this.recvCqe(c, CqeOpcode.RESP_SEND_INV, 0, m.length, key, m.se);
    this.ack(c, { kind: 'ACK' });
    return true;
  }

  private atomic(c: Ctx): boolean {
    const m = c.m!;
    if (c.atomicPhase === 0) {
      c.mover.gather(c.segs);
      c.atomicPhase = 1;
    }
    if (c.atomicPhase === 1) {
      c.mover.step();
      if (!c.mover.done) return !c.mover.waiting;
      const orig = c.mover.data.slice();
      const v = new DataView(orig.buffer);
      const cur = v.getBigUint64(0, true);
      const swapAdd = new DataView(m.swapAdd!.buffer).getBigUint64(0, true);
      let next: bigint | null = null;
      if (m.op === 'FETCH_ADD') next = (cur + swapAdd) & 0xffffffffffffffffn;
      else if (cur === new DataView(m.compare!.buffer).getBigUint64(0, true)) next = swapAdd;
      c.answer = { dstHca: m.srcHca, dstQpn: m.srcQpn, seq: m.seq, kind: 'ATOMIC_DATA', data: orig };
      if (next !== null) {
        const out = new Uint8Array(8);
        new DataView(out.buffer).setBigUint64(0, next, true);
        c.mover.scatter(c.segs, out);
        c.atomicPhase = 2;
        return true;
      }
      c.stage = ANSWER;
      return true;
    }
    c.mover.step();
    if (c.mover.done) c.stage = ANSWER;
    return true;
  }

  /** A receive completion; `se`: the message was sent solicited (spec/mlx5.md CQE op_own bit 1). */
  private recvCqe(c: Ctx, opcode: number, syndrome: number, byteCnt: number, imm: number, se: boolean): void {
    const qp = c.qp!;
    const rq = c.rq!;
    const counter = rq.ci++;
    if (this.gone(c)) return; // a destroyed QP completes nothing
    c.cqes.push({
      cqn: qp.recvCqn, opcode, qpn: qp.qpn, wqeOpcode: 0, wqeCounter: counter & 0xffff,
      byteCnt: syndrome ? 0 : byteCnt, immInvalPkey: imm >>> 0, syndrome, se: se && syndrome === 0,
    });
  }

  private ack(c: Ctx, a: Pick<RcResponse, 'kind' | 'data' | 'dataBuf'>): void {
    const m = c.m!;
    c.answer = { dstHca: m.srcHca, dstQpn: m.srcQpn, seq: m.seq, kind: a.kind, data: a.data, dataBuf: a.dataBuf };
    c.stage = c.cqes.length > 0 ? CQE : ANSWER;
  }

  private nak(c: Ctx, k: RcNak): void {
    const m = c.m!;
    this.rNak.set(RcNakEnum.valueOf(k));
    if (k === 'RNR') {
      this.sRnr.inc();
      // the requester sends this message and the later ones again: expect it, drop what came after
      const rq = c.rq!;
      rq.ePsn = m.seq;
      const list = rq.list;
      for (let i = list.length - 1; i > 0 && list[i] !== c; i--) {
        const x = list[i];
        if (x.stage !== WAIT_TURN) break;
        list.pop();
        this.sOutOfSeq.inc();
        this.recycle(x);
      }
      // later messages already under way (pipelined READs / WRITEs) finish, but answer nothing
      for (let i = list.indexOf(c) + 1; i < list.length; i++) list[i].stale = true;
    } else this.sNaks.inc();
    c.answer = { dstHca: m.srcHca, dstQpn: m.srcQpn, seq: m.seq, kind: 'NAK', nak: k };
    if (k === 'RNR' && c.partial > 0) c.answer.committed = m.offset + c.partial;
    c.stage = c.cqes.length > 0 ? CQE : ANSWER;
  }

  /** An error that moves the responder's QP to ERR: a receive completion if any, then the NAK. */
  private fatal(c: Ctx, k: RcNak, recvSyndrome: number | null): void {
    if (recvSyndrome !== null) this.recvCqe(c, CqeOpcode.RESP_ERR, recvSyndrome, 0, 0, false);
    // spec/semantics.md "Events": an access violation raises QP_ACCESS_ERR, an invalid request QP_REQ_ERR
    this.table.hwError(c.qp!.qpn, k === 'ACCESS' ? 'WQ_ACCESS_ERROR' : k === 'INV_REQ' ? 'WQ_INVAL_REQ_ERROR' : 'WQ_CATAS_ERROR');
    this.flushQ.push(c.qp!.qpn);
    this.nak(c, k);
  }

  /** Answers in PSN order: the message's answer leaves once those before it have left. */
  private sendAnswer(c: Ctx): boolean {
    if (c.rq!.list[0] !== c) return false; // woken when the message before it is done
    if (this.gone(c) || c.stale) {
      // the QP was destroyed while the message was in progress, or an earlier message was
      // NAK'd RNR (this one comes again): it answers nothing
      if (c.stale) this.sOutOfSeq.inc();
      else this.sDrops.inc();
      c.answer?.dataBuf?.release();
    } else {
      const a = c.answer!;
      // READ responses are packets of the path MTU, as the request's (IBTA 9.7.4.1.4)
      this.link!.sendTo(a.dstHca, a.data ? a.data.length : 0, c.qp!.mtu, a);
    }
    c.answer = null;
    this.done(c);
    return false;
  }

  /** The message is over: its context is free and the next message of its QP may go on. */
  private done(c: Ctx): void {
    const list = c.rq!.list;
    const i = list.indexOf(c);
    if (i >= 0) {
      // out of the list in place (splice would build an array of the removed one)
      for (let j = i + 1; j < list.length; j++) list[j - 1] = list[j];
      list.pop();
    }
    this.recycle(c);
    // the new head may answer, start, or act on its translation; a pipelined successor may be
    // waiting for this one to have committed (it is gone now): both look again
    if (list.length > 0) this.activate(list[0]);
    if (list.length > 1) this.activate(list[1]);
  }

  private recycle(c: Ctx): void {
    const h = c.holds;
    if (c.nHolds > 0) {
      for (let i = 0; i < c.nHolds; i++) c.mover.releaseWhenLanded(this.fence!, h[i]);
      c.nHolds = 0; // by count: a length of 0 would drop the array's store
    }
    c.stage = IDLE;
    c.m = null;
    c.qp = null;
    c.rq = null;
    c.partial = 0;
    c.partialReport = null;
    c.segs = NO_SEGS;
    if (c.cqes.length !== 0) c.cqes = [];
    this.ctxTable.give(c);
  }

  /** Posted receives of a QP in ERR complete WR_FLUSH_ERR, once no message of the QP is in flight. */
  private flush(): boolean {
    const qpn = this.flushQ[0];
    const qp = this.table.getQp(qpn);
    const rq = qp ? this.rqs.get(qpn) : undefined;
    if (!qp || !rq || rq.ci >= rq.pi) {
      this.flushQ.shift();
      return false;
    }
    if (rq.list.length > 0 || !this.cqWriter.canPush()) return false;
    this.cqWriter.push({
      cqn: qp.recvCqn, opcode: CqeOpcode.RESP_ERR, qpn: qp.qpn, wqeOpcode: 0, wqeCounter: rq.ci & 0xffff,
      byteCnt: 0, immInvalPkey: 0, syndrome: CqeSyndrome.WR_FLUSH_ERR, se: false,
    });
    rq.ci++;
    return true;
  }
}


/** The first index of `list` (sorted by label) whose label is >= `label`. */
function lowerBound(list: readonly Ctx[], label: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (list[m].label < label) lo = m + 1;
    else hi = m;
  }
  return lo;
}

/** The first index whose label is > `label`. */
function upperBound(list: readonly Ctx[], label: number): number {
  return lowerBound(list, label + 1);
}

/** The first `n` bytes of a segment list. */
function clip(segs: readonly PhysSegment[], n: number): PhysSegment[] {
  const out: PhysSegment[] = [];
  for (let i = 0; i < segs.length && n > 0; i++) {
    const l = Math.min(segs[i].length, n);
    out.push({ pa: segs[i].pa, length: l });
    n -= l;
  }
  return out;
}

function sumLen(sges: readonly { length: number }[], n: number): number {
  let t = 0;
  for (let i = 0; i < n; i++) t += sges[i].length;
  return t;
}

const EMPTY = new Uint8Array(0);
/** What a zero-length READ or WRITE translates to: nothing, and no check (IBTA: no rkey check). */
/** A free context's segments: none (a message sets its own before its DMA; frozen, so a push would throw). */
const NO_SEGS: PhysSegment[] = Object.freeze([]) as unknown as PhysSegment[];

const ZERO_LENGTH_OK: AtuResponse = { tag: 0, result: { kind: 'ok', segments: [] } };
