/**
 * The RC requester (`tb.hcaN.requester`): executes the send queue engine's data work requests,
 * many at once. Each message takes a requester context (`config.requesterContexts`) for its
 * whole life: translate the local SGEs through the ATU (LOCAL_WRITE where the HCA writes: READ
 * and atomic destinations), gather the payload by DMA, send it, wait for the answer, place READ
 * and atomic results, report the completion syndrome (spec/semantics.md "Data path").
 *
 * Per QP the hardware keeps RC's rules, and only those serialize messages:
 * - messages go on the wire in WQE order, each with the QP's next PSN (translations and gathers
 *   of several messages of a QP overlap; a message waits to be sent until those before it are);
 * - at most the QP's `maxRdAtomic` (initiator depth, log_sra_max) READs and atomics are
 *   outstanding; the rest wait (counted in `rd_atomic_stalls`);
 * - answers come back in PSN order (the responder answers in order); an RNR NAK or an ACK
 *   timeout of a message sends it and every later sent message again (go-back-N), after the RNR
 *   timer or at once, and the retry counts are per message as in IB;
 * - a message that fails (local protection error, NAK, retries exhausted) flushes every later
 *   message of its QP: none of them is sent or placed again (WR_FLUSH_ERR).
 * A destroyed QP (DESTROY_QP) flushes its messages at their next safe point (translations
 * answered, gathered data read, or while waiting for an answer); the send queue engine drops
 * those completions.
 */
import { Fifo, Module, enumType, type EventTarget, type Reg, type Signal, type WireOptions } from '../../sim/index.ts';
import { TimerHeap } from '../../sim/timer_heap.ts';
import type { PayloadPool, PooledBuf } from '../memory/payload_pool.ts';
import type { DmaPort } from '../memory/pcie.ts';
import { DmaMover, MOVER_TAG_SPAN } from '../memory/dma_mover.ts';
import type { AtuPort } from '../translation/atu.ts';
import { AtuAnswer, type AtuRequest, type AtuResponse, type PhysSegment } from '../translation/atu_types.ts';
import type { Link } from './link.ts';
import type { RcOp, RcRequest, RcResponse } from './rc_types.ts';
import type { FaultClient, FaultReport } from '../translation/pagefault.ts';
import type { QpTable, QpView } from './qp_table.ts';
import { ContextTable } from './context_table.ts';
import { WqeOpcodeEnum } from './sq.ts';
import { CqeSyndromeEnum } from '../completion/cq_writer.ts';
import { CqeSyndrome, PageFaultFlag, PageFaultSubtype, WqeOpcode } from '../formats/constants.ts';
import { dataSegLength } from '../formats/data_seg.ts';
import type { ParsedWqe } from '../formats/wqe_parse.ts';
import { ackTimeoutPs, rnrTimerPs } from '../config.ts';
import { IB_LOCAL_WRITE } from '../memory/icm_mkey.ts';

/** A data WQE to execute. */
export interface ReqJob {
  tag: number;
  qpn: number;
  wqe: Extract<ParsedWqe, { kind: 'send' | 'rdma' | 'atomic' }>;
}

export interface ReqDone {
  tag: number;
  syndrome: number;
  byteLen: number;
}

/**
 * What a context is doing; the `state` trace shows the stage of the last context that moved.
 * SEND: translated and gathered, its turn on the wire; HOLD (untraced): translated, its gather
 * waits for an earlier READ or atomic of its QP to place its data; HOLD_SCATTER (untraced): its
 * READ or atomic data came, and waits for the QP's earlier data to be written (in order).
 */
export const [RequesterState, REQ_STATES] = enumType('requester_state', ['IDLE', 'XLATE', 'GATHER', 'SEND', 'WAIT_RESP', 'SCATTER', 'DONE', 'HOLD', 'HOLD_SCATTER', 'PAGE_FAULT']);
const { IDLE, XLATE, GATHER, SEND: READY, WAIT_RESP, SCATTER, DONE, HOLD, HOLD_SCATTER, PAGE_FAULT } = REQ_STATES;

const OP_OF: Record<number, RcOp> = {
  [WqeOpcode.SEND]: 'SEND',
  [WqeOpcode.SEND_IMM]: 'SEND_IMM',
  [WqeOpcode.SEND_INVAL]: 'SEND_INV',
  [WqeOpcode.RDMA_WRITE]: 'WRITE',
  [WqeOpcode.RDMA_WRITE_IMM]: 'WRITE_IMM',
  [WqeOpcode.RDMA_READ]: 'READ',
  [WqeOpcode.ATOMIC_CS]: 'CMP_SWAP',
  [WqeOpcode.ATOMIC_FA]: 'FETCH_ADD',
};

/** ATU tags: context index * ATU_TAG_SPAN + SGE index (a WQE has at most 63 data segments). */
const ATU_TAG_SPAN = 64;

/** Wiring and sizes of the requester (wired in hca.ts). */
/** Where a translation FAULT (an ODP page not present) is reported (translation/pagefault.ts). */
export interface FaultReporter {
  report(report: FaultReport, client: FaultClient, token: number): void;
}

export interface RequesterOptions extends WireOptions<
  { readonly atu: AtuPort; readonly dma: DmaPort },
  { readonly qps: QpTable; readonly payloads: PayloadPool; readonly faults?: FaultReporter; readonly fence?: DmaFenceHolds }
> {
  /** Messages in flight at most, across all QPs (contexts). */
  readonly contexts: number;
  /** This adapter's index on the link. */
  readonly hcaIndex: number;
  readonly rnrTimerCode: number;
  /**
   * Core cycles the gather/scatter engine spends per local SGE of a message (config
   * requesterSgeCycles; default 0): one engine for all QPs takes the SGEs in order, one every
   * this many cycles, before their translation.
   */
  readonly sgeCycles?: number;
}

/**
 * The DMA fence (translation/dma_fence.ts): the ATU's answers carry holds (the mkey's, the
 * INDIRECT slot's), which a message releases when its DMA through them is over.
 */
export interface DmaFenceHolds {
  release(token: number): void;
}

interface Ctx {
  readonly idx: number;
  /** The DMA fence holds its translations carry (the first nHolds), while its DMA through them is not over. */
  readonly holds: number[];
  nHolds: number;
  readonly mover: DmaMover;
  stage: number;
  job: ReqJob | null;
  q: ReqQp | null;
  op: RcOp;
  /** READ or atomic: counts against the QP's initiator depth while waiting for its answer. */
  rdAtomic: boolean;
  /**
   * The message's local pointers (the first nPtrs), each the ATU request that translates it,
   * with the answer the ATU writes: reused by every message of the context (the ATU drops a
   * request before it answers it; a message is translated again only once every answer is in,
   * and its segments, `local`, are rebuilt then; the next message starts after this one's DMA).
   */
  readonly ptrs: AtuRequest[];
  nPtrs: number;
  results: (AtuResponse | null)[];
  issued: number;
  answersDue: number;
  /** The translated segments, in order (reused: its length is set by each translation). */
  readonly local: PhysSegment[];
  length: number;
  payload: Uint8Array | null;
  payloadBuf: PooledBuf | null;
  readBuf: PooledBuf | null;
  /** READ or atomic data waiting for its turn to be written (HOLD_SCATTER). */
  answerData: Uint8Array | null;
  /** The newest try was answered: the payload's buffer may be recycled. */
  answered: boolean;
  psn: number;
  tries: number;
  rnrTries: number;
  timeoutAt: number;
  /** Flush at the next safe point (an earlier message failed, or the QP was destroyed). */
  abort: boolean;
  syndrome: number;
  started: number;
  /** The fault this message waits on (PAGE_FAULT), so a late resume never reaches a reused context. */
  faultToken: number;
  /**
   * Bytes of a WRITE the responder placed before an RNR NAK of a page fault (bytes_committed):
   * every later try sends only the rest (the NAK'd packet on).
   */
  placed: number;
}

interface ReqQp {
  readonly qpn: number;
  readonly qp: QpView;
  /** Unfinished messages in WQE (and PSN) order. */
  readonly list: Ctx[];
  /** Index in `list` of the next message to send. */
  sendNext: number;
  nextPsn: number;
  /** READs and atomics sent and not answered. */
  rdOut: number;
  /** After an RNR NAK: nothing is sent before this time (-1: no wait). */
  resendAt: number;
  /** A message failed: later messages are flushed. */
  flushing: boolean;
  /** The local ACK timeout (IBTA: 4.096 us x 2^timeout), per try. */
  readonly ackTimeout: number;
  /** Creation order: QPs whose timers are due are handled in it. */
  readonly seq: number;
  /** Collected as due by the deadlines pass of this stamp. */
  dueStamp: number;
  /** Its messages waiting on a page fault's resume (PAGE_FAULT with a fault token). */
  faulted: number;
}

/** Sees the requester's translations (the transaction log); null when untraced. */
export interface RequesterTap {
  /**
   * A message's local SGEs are translated: `outcome` ok, error or fault, with the lookups that
   * missed the mkey and MTT caches.
   */
  translated(qpn: number, wqeIndex: number, outcome: 'ok' | 'error' | 'fault', mkeyMisses: number, mttMisses: number): void;
}

export class Requester extends Module implements EventTarget, FaultClient {
  /** The transaction log's tap; null (one compare per message) when untraced. */
  tap: RequesterTap | null = null;
  readonly req: Fifo<ReqJob>;
  readonly resp: Fifo<ReqDone>;
  /** Answers from the peer's responder. */
  readonly inbox: Fifo<RcResponse>;
  link: Link<RcRequest> | null = null;
  private readonly atu: AtuPort;
  private readonly port: DmaPort;
  private readonly table: QpTable;
  private readonly faults: FaultReporter | null;
  private readonly fence: DmaFenceHolds | null;
  private faultSeq = 0;
  /** Per-SGE cost (ps; 0: none) and when the engine takes its next SGE. */
  private readonly sgePs: number;
  private sgeFreeAt = 0;
  private readonly faultCtx = new Map<number, Ctx>();
  private readonly hcaIndex: number;
  private readonly rnrTimerCode: number;
  private readonly ctxTable: ContextTable<Ctx>;
  private readonly ctxs: readonly Ctx[];
  private readonly qps = new Map<number, ReqQp>();
  /** Contexts whose SGE translations are not all issued, in order. */
  private readonly xlateQ: Ctx[] = [];
  /** Contexts whose mover has requests to issue: the first nStepping entries. */
  private readonly stepping: Ctx[] = [];
  private nStepping = 0;
  /** Finished contexts whose completion is not yet handed to the send queue engine. */
  private readonly doneQ: Ctx[] = [];
  private nDone = 0;
  private doneHead = 0;
  /** QPs that may send now (an answer freed initiator depth, a message became ready). */
  private readonly pumpQ: ReqQp[] = [];
  private timerDue = false;
  /** Time of the one pending timer event, or -1: one event at a time, re-armed lazily. */
  private timerAt = -1;
  /**
   * Every retry deadline set (a message's ACK timeout when sent, a QP's RNR wait), by time; an
   * entry outlives its deadline (answered, sent again) and is checked when it comes up.
   */
  private readonly deadlineHeap = new TimerHeap<ReqQp>();
  private readonly dueQps: ReqQp[] = [];
  private dueStamp = 0;
  private qpSeq = 0;
  private readonly state: Signal;
  private readonly rInflight: Reg;
  private readonly rQpn: Reg;
  private readonly rOp: Reg;
  private readonly rLen: Reg;
  private readonly rSyndrome: Reg;
  private readonly sMessages;
  private readonly sBytes;
  private readonly sRetries;
  private readonly sErrors;
  private readonly sLatency;
  private readonly sRdAtomicStalls;

  constructor(parent: Module, name: string, o: RequesterOptions) {
    super(parent.sim, parent, name);
    if (!Number.isInteger(o.contexts) || o.contexts < 1 || o.contexts > MOVER_TAG_SPAN) {
      throw new RangeError(`${this.path}: contexts ${o.contexts} must be an integer in 1..${MOVER_TAG_SPAN}`);
    }
    this.atu = o.ports.atu;
    this.port = o.ports.dma;
    this.table = o.deps.qps;
    this.faults = o.deps.faults ?? null;
    this.fence = o.deps.fence ?? null;
    this.hcaIndex = o.hcaIndex;
    this.rnrTimerCode = o.rnrTimerCode;
    this.sgePs = (o.sgeCycles ?? 0) * o.clock.period;
    this.state = this.signal('state', RequesterState.width, { enum: RequesterState });
    this.rInflight = this.probe('inflight', 9);
    this.rQpn = this.probe('qpn', 24);
    this.rOp = this.probe('wqe_opcode', 8, { enum: WqeOpcodeEnum });
    this.rLen = this.probe('length', 32);
    this.rSyndrome = this.probe('syndrome', 8, { enum: CqeSyndromeEnum });
    this.req = new Fifo<ReqJob>(this, 'req', { capacity: 4 });
    this.resp = new Fifo<ReqDone>(this, 'resp', { capacity: 16 });
    this.inbox = new Fifo<RcResponse>(this, 'inbox', { capacity: 1024 });
    this.req.consumer = this;
    this.inbox.consumer = this;
    this.resp.producer = this;
    this.atu.resp.consumer = this;
    this.atu.req.producer = this;
    this.port.resp.consumer = this;
    this.port.req.producer = this;
    this.ctxTable = new ContextTable<Ctx>(o.contexts, (i) => ({
        idx: i, holds: [], nHolds: 0, mover: new DmaMover(o.ports.dma, o.deps.payloads, i), stage: IDLE, job: null, q: null, op: 'SEND', rdAtomic: false,
        ptrs: [], nPtrs: 0, results: [], issued: 0, answersDue: 0, local: [], length: 0, payload: null, payloadBuf: null, readBuf: null, answerData: null,
        answered: false, psn: -1, tries: 0, rnrTries: 0, timeoutAt: Infinity, abort: false, syndrome: 0, started: 0, faultToken: 0, placed: 0,
      }), this.stats, 'contexts');
    this.ctxs = this.ctxTable.all;
    this.sMessages = this.stats.counter('messages');
    this.sBytes = this.stats.counter('bytes');
    this.sRetries = this.stats.counter('retries');
    this.sErrors = this.stats.counter('errors');
    this.sLatency = this.stats.histogram('latency_ps');
    this.sRdAtomicStalls = this.stats.counter('rd_atomic_stalls');
    this.clockedBy(o.clock);
  }

  /** Contexts in use (messages in flight). */
  get inFlight(): number {
    return this.ctxTable.inUse;
  }

  /** Work in flight: a message in a context or waiting to be taken. */
  override hasWork(): boolean {
    return this.inFlight > 0 || this.req.canPop() || this.inbox.canPop();
  }

  /** DESTROY_QP executed: the QP's messages are flushed at their next safe point. */
  forgetQp(qpn: number): void {
    const q = this.qps.get(qpn);
    if (q === undefined) return;
    this.qps.delete(qpn);
    for (let i = q.list.length - 1; i >= 0; i--) this.abortCtx(q.list[i]);
    this.wake();
  }

  /** Arms the timer for `t` (an earlier pending event re-arms itself when it fires). */
  private armTimer(t: number): void {
    // past the last whole picosecond a run can reach (2^53 ps, about 2.5 h: a 2^31 ACK timeout
    // after a very slow start-up) the deadline never comes: nothing to arm
    if (t > Number.MAX_SAFE_INTEGER) return;
    if (this.timerAt < 0 || t < this.timerAt) {
      this.timerAt = t;
      this.sim.at(t, this);
    }
  }

  /** @internal A retry timer (RNR or ACK timeout) fired: the next edge looks at the deadlines. */
  fire(): void {
    if (this.sim.now !== this.timerAt) return; // superseded by an earlier arming
    this.timerAt = -1;
    this.timerDue = true;
    this.wake();
  }

  override tick(): void {
    let act = -1;
    while (this.inbox.canPop()) this.onAnswer(this.inbox.pop());
    while (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      const c = this.ctxs[r.tag % MOVER_TAG_SPAN];
      c.mover.complete(r.tag, r.data!);
      if (c.stage === GATHER && c.mover.done) this.gathered(c);
    }
    while (this.atu.resp.canPop()) {
      const r = this.atu.resp.pop();
      const c = this.ctxs[Math.floor(r.tag / ATU_TAG_SPAN)];
      c.results[r.tag % ATU_TAG_SPAN] = r;
      if (r.fenceKey) c.holds[c.nHolds++] = r.fenceKey;
      if (r.fenceInd) c.holds[c.nHolds++] = r.fenceInd;
      if (--c.answersDue === 0 && c.issued === c.nPtrs) this.translated(c);
    }
    if (this.timerDue) {
      this.timerDue = false;
      this.deadlines();
    }
    // new work requests, while contexts are free
    while (this.req.canPop()) {
      const c = this.ctxTable.take();
      if (c === undefined) break;
      this.start(c, this.req.pop());
      act = XLATE;
    }
    // translations, in order, as the ATU port takes them
    while (this.xlateQ.length > 0 && this.atu.req.canPush()) {
      if (this.sgePs > 0) {
        // the engine's per-SGE work: one SGE at a time
        if (this.sim.now < this.sgeFreeAt) break;
        this.sgeFreeAt = this.sim.now + this.sgePs;
      }
      const c = this.xlateQ[0];
      const qp = c.q!.qp;
      const p = c.ptrs[c.issued];
      p.access = c.rdAtomic ? IB_LOCAL_WRITE : 0;
      p.pd = qp.pd;
      p.qpn = qp.qpn;
      this.atu.req.push(p);
      c.issued++;
      c.answersDue++;
      if (c.issued === c.nPtrs) this.xlateQ.shift();
    }
    // DMA: each mover issues at most one request an edge (the list is compacted in place;
    // contexts added meanwhile, at its end, are stepped too)
    if (this.nStepping > 0) {
      const list = this.stepping;
      let w = 0;
      for (let i = 0; i < this.nStepping; i++) {
        const c = list[i];
        c.mover.step();
        if (c.stage === SCATTER) {
          act = SCATTER;
          if (c.mover.done) this.scattered(c);
          else list[w++] = c;
        } else if (c.stage === GATHER) {
          act = GATHER;
          if (c.mover.done) this.gathered(c);
          else if (!c.mover.waiting) list[w++] = c;
        }
      }
      this.nStepping = w;
    }
    while (this.pumpQ.length > 0) {
      if (this.pump(this.pumpQ.pop()!)) act = READY;
    }
    // completions to the send queue engine, in the order they finished
    while (this.doneHead < this.nDone && this.resp.canPush()) {
      const c = this.doneQ[this.doneHead++];
      this.resp.push({ tag: c.job!.tag, syndrome: c.syndrome, byteLen: c.length });
      this.release(c);
      act = DONE;
    }
    if (this.doneHead !== 0 && this.doneHead === this.nDone) {
      // emptied by counts: a length of 0 would drop the array's store, allocated again by the next push
      this.nDone = 0;
      this.doneHead = 0;
    }
    const busy = this.inFlight;
    this.rInflight.set(busy);
    if (act >= 0) this.state.setNow(act);
    else if (busy === 0) this.state.setNow(IDLE);
    // messages held by a page fault show as PAGE_FAULT while nothing else moves (the waves show the stall)
    else if (this.nStepping === 0 && this.xlateQ.length === 0) this.state.setNow(this.faultCtx.size > 0 ? PAGE_FAULT : WAIT_RESP);
    // asleep until an input arrives: answers, DMA and ATU results, jobs, room, the timer
    const more = this.nStepping > 0 || (this.xlateQ.length > 0 && this.atu.req.canPush()) || (this.req.canPop() && this.ctxTable.hasFree);
    if (!more) this.sleep();
  }

  private start(c: Ctx, job: ReqJob): void {
    c.job = job;
    c.mover.qpn = job.qpn;
    c.mover.wqe = job.wqe.ctrl.wqeIndex;
    c.started = this.sim.now;
    c.op = OP_OF[job.wqe.ctrl.opcode];
    c.rdAtomic = c.op === 'READ' || c.op === 'CMP_SWAP' || c.op === 'FETCH_ADD';
    c.nPtrs = 0;
    c.issued = 0;
    c.answersDue = 0;
    // `local` is rebuilt when the pointers are translated, or emptied below when there are none
    c.payload = null;
    c.payloadBuf = null;
    c.readBuf = null;
    c.answered = false;
    c.psn = -1;
    c.tries = 0;
    c.rnrTries = 0;
    c.timeoutAt = Infinity;
    c.abort = false;
    c.syndrome = 0;
    c.placed = 0;
    let inline: Uint8Array[] | null = null;
    let length = 0;
    const data = job.wqe.data;
    for (let i = 0; i < data.length; i++) {
      const d = data[i];
      if (d.kind === 'inline') (inline ??= []).push(d.data);
      else {
        const n = c.nPtrs++;
        if (n === c.ptrs.length) c.ptrs.push({ key: 0, va: 0, length: 0, access: 0, pd: 0, qpn: 0, tag: c.idx * ATU_TAG_SPAN + n, local: true, answer: new AtuAnswer() });
        const p = c.ptrs[n];
        p.key = d.seg.lkey;
        p.va = d.seg.addr;
        p.length = dataSegLength(d.seg.byteCount);
        length += p.length;
      }
    }
    // what the hardware cannot execute completes with the error it would give, never a throw:
    // inline data mixed with pointers, inline data in a READ (its data has nowhere to land), an
    // atomic whose local buffer is not one 8-byte segment (malformed: LOC_QP_OP_ERR), a message
    // over IB's 2 GiB (LOC_LEN_ERR)
    const malformed =
      (inline !== null && (c.nPtrs > 0 || c.rdAtomic)) || (c.rdAtomic && c.op !== 'READ' && (c.nPtrs !== 1 || length !== 8));
    const refused = malformed ? CqeSyndrome.LOCAL_QP_OP_ERR : length > 2 ** 31 ? CqeSyndrome.LOCAL_LENGTH_ERR : 0;
    if (refused !== 0) length = 0;
    if (inline !== null && refused === 0) {
      for (const b of inline) length += b.length;
      const buf = new Uint8Array(length);
      let o = 0;
      for (const b of inline) { buf.set(b, o); o += b.length; }
      c.payload = buf;
    }
    c.length = length;
    if (c.results.length !== c.nPtrs) c.results = new Array<AtuResponse | null>(c.nPtrs);
    c.results.fill(null);
    this.rQpn.set(job.qpn);
    this.rOp.set(job.wqe.ctrl.opcode);
    this.rLen.set(Math.min(length, 0xffffffff));
    const q = this.qpOf(job.qpn);
    c.q = q;
    // destroyed between the send queue engine's push and this pop, or behind a failed message
    if (q === null || q.flushing) return this.finish(c, CqeSyndrome.WR_FLUSH_ERR);
    q.list.push(c);
    if (refused !== 0) return this.finish(c, refused); // its QP's later messages are flushed
    if (c.nPtrs > 0) {
      c.stage = XLATE;
      this.xlateQ.push(c);
    } else {
      if (c.local.length !== 0) c.local.length = 0; // nothing to place or gather
      c.stage = READY;
      this.pumpQ.push(q);
    }
  }

  private qpOf(qpn: number): ReqQp | null {
    let q = this.qps.get(qpn);
    if (q === undefined) {
      const qp = this.table.getQp(qpn);
      if (qp === undefined) return null;
      q = { qpn, qp, list: [], sendNext: 0, nextPsn: 0, rdOut: 0, resendAt: -1, flushing: false, ackTimeout: ackTimeoutPs(qp.timeout === 0 ? 14 : qp.timeout), seq: this.qpSeq++, dueStamp: -1, faulted: 0 };
      this.qps.set(qpn, q);
    }
    return q;
  }

  /** Every SGE translation answered. */
  private translated(c: Ctx): void {
    if (c.abort) return this.finish(c, CqeSyndrome.WR_FLUSH_ERR);
    if (c.q!.faulted > 0 && this.behindFault(c)) return this.park(c);
    if (this.tap !== null) this.tapTranslated(c);
    const local = c.local;
    let n = 0;
    for (const r of c.results) {
      const res = r!.result;
      if (res.kind === 'fault' && this.faults !== null) return this.pageFault(c, res.write);
      if (res.kind !== 'ok') return this.finish(c, CqeSyndrome.LOCAL_PROT_ERR);
      for (const s of res.segments) local[n++] = s;
    }
    // the array is the context's: set, not rebuilt (the same length for the same SGE shape)
    if (local.length !== n) local.length = n;
    if (c.rdAtomic) {
      c.stage = READY;
      this.pumpQ.push(c.q!);
    } else if (this.readsBefore(c)) {
      c.stage = HOLD;
    } else this.startGather(c);
  }

  private tapTranslated(c: Ctx): void {
    let mk = 0;
    let mtt = 0;
    let outcome: 'ok' | 'error' | 'fault' = 'ok';
    for (const r of c.results) {
      mk += r!.mkeyMisses ?? 0;
      mtt += r!.mttMisses ?? 0;
      if (r!.result.kind !== 'ok' && outcome === 'ok') outcome = r!.result.kind;
    }
    this.tap!.translated(c.q!.qpn, c.job!.wqe.ctrl.wqeIndex, outcome, mk, mtt);
  }

  /**
   * An SGE's page is not present (ODP): the message waits in PAGE_FAULT, nothing of it moved yet
   * (translation comes before any DMA here, so bytes_committed is 0), and the page-fault unit
   * stalls the QP and tells the driver (subtype WQE, REQUESTOR, + WRITE when the HCA writes the
   * page: a READ's or atomic's destination). Later messages of the QP wait behind it: messages
   * go on the wire in order.
   */
  private pageFault(c: Ctx, write: boolean): void {
    this.releaseFence(c); // nothing of it moves until it is translated again
    c.stage = PAGE_FAULT;
    c.faultToken = ++this.faultSeq;
    this.faultCtx.set(c.faultToken, c);
    this.state.setNow(PAGE_FAULT);
    const q = c.q!;
    q.faulted++;
    // the QP stops at the faulting WQE and goes on from it after the resume: the later messages
    // translated meanwhile drop their translations and are translated again then, so none of
    // them holds the DMA fence while it waits on this fault (an invalidating UMR waiting for it
    // would wait for the fault's own map UMR behind it on the driver's UMR QP)
    for (let j = q.list.indexOf(c) + 1; j < q.list.length; j++) {
      const x = q.list[j];
      if (x.stage === HOLD || (x.stage === READY && x.rdAtomic)) this.park(x);
    }
    const w = c.job!.wqe;
    this.faults!.report(
      {
        subType: PageFaultSubtype.WQE,
        flags: PageFaultFlag.REQUESTOR | (write ? PageFaultFlag.WRITE : 0),
        qpn: c.q!.qpn,
        wqeIndex: w.ctrl.wqeIndex,
        bytesCommitted: 0,
        packetLength: Math.min(c.length, c.q!.qp.mtu, 0xffff),
      },
      this,
      c.faultToken,
    );
  }

  /** @internal The driver resumed a fault: translate the message again, or end it LOC_ACCESS_ERR. */
  faultResumed(token: number, ok: boolean): void {
    const c = this.faultCtx.get(token);
    this.faultCtx.delete(token);
    if (c === undefined || c.stage !== PAGE_FAULT || c.faultToken !== token) return; // flushed meanwhile
    c.q!.faulted--;
    c.faultToken = 0;
    if (c.abort) this.finish(c, CqeSyndrome.WR_FLUSH_ERR);
    else if (!ok) this.finish(c, CqeSyndrome.LOCAL_ACCESS_ERR);
    else {
      c.results.fill(null);
      c.issued = 0;
      c.answersDue = 0;
      c.local.length = 0;
      this.translateAgain(c);
      this.unpark(c.q!);
    }
    this.wake();
  }

  /** A message behind one of its QP's messages that waits on a page fault. */
  private behindFault(c: Ctx): boolean {
    const list = c.q!.list;
    for (let i = 0; i < list.length && list[i] !== c; i++) if (list[i].stage === PAGE_FAULT && list[i].faultToken !== 0) return true;
    return false;
  }

  /** Drops a message's translations (and its fence hold) until the fault before it is resumed. */
  private park(x: Ctx): void {
    this.releaseFence(x);
    x.results.fill(null);
    x.issued = 0;
    x.answersDue = 0;
    x.local.length = 0;
    x.stage = PAGE_FAULT; // with no fault token: parked, not faulted
    x.faultToken = 0;
  }

  /** Translates again the parked messages of the QP up to its first one still waiting on a fault. */
  private unpark(q: ReqQp): void {
    for (const x of q.list) {
      if (x.stage !== PAGE_FAULT) continue;
      if (x.faultToken !== 0) return;
      this.translateAgain(x);
    }
  }

  /**
   * Back to translation, as `start` sends a message: one without pointers (a zero-length READ
   * parked behind a fault) has nothing to translate and is ready at once; in the translation
   * queue it would be asked for a pointer it does not have.
   */
  private translateAgain(x: Ctx): void {
    if (x.nPtrs > 0) {
      x.stage = XLATE;
      this.xlateQ.push(x);
    } else {
      x.stage = READY;
      this.pumpQ.push(x.q!);
    }
  }

  /**
   * An earlier READ or atomic of the QP has not placed its data yet: the gather of a later
   * message would read what it is about to overwrite (work requests of a send queue execute in
   * order, spec/semantics.md "Ordering").
   */
  private readsBefore(c: Ctx): boolean {
    const list = c.q!.list;
    for (let i = 0; i < list.length && list[i] !== c; i++) if (list[i].rdAtomic) return true;
    return false;
  }

  private startGather(c: Ctx): void {
    c.mover.gather(c.local);
    c.stage = GATHER;
    this.stepping[this.nStepping++] = c;
  }

  /** The payload is read from host memory. */
  private gathered(c: Ctx): void {
    c.payload = c.mover.data;
    c.payloadBuf = c.mover.takeBuf();
    this.releaseFence(c); // its DMA is over: a resend sends the gathered bytes
    if (c.abort) return this.finish(c, CqeSyndrome.WR_FLUSH_ERR);
    c.stage = READY;
    this.pumpQ.push(c.q!);
  }

  /** Sends the QP's ready messages in order, as far as its RNR wait and initiator depth allow. */
  private pump(q: ReqQp): boolean {
    if (this.qps.get(q.qpn) !== q) return false;
    if (q.resendAt >= 0) {
      if (this.sim.now < q.resendAt) return false;
      q.resendAt = -1;
    }
    let sent = false;
    while (q.sendNext < q.list.length) {
      const c = q.list[q.sendNext];
      if (c.stage !== READY) break;
      if (c.rdAtomic && q.rdOut >= q.qp.maxRdAtomic) {
        this.sRdAtomicStalls.inc();
        break;
      }
      this.transmit(q, c);
      q.sendNext++;
      sent = true;
    }
    return sent;
  }

  private transmit(q: ReqQp, c: Ctx): void {
    const w = c.job!.wqe;
    const qp = q.qp;
    if (c.psn < 0) c.psn = q.nextPsn++;
    const isAtomic = w.kind === 'atomic';
    const carries = !(c.op === 'READ' || isAtomic);
    // after an RNR NAK that placed part of a WRITE: from the NAK'd packet on
    const off = c.placed;
    const whole = carries ? (c.payload ?? EMPTY) : null;
    const m: RcRequest = {
      op: c.op,
      srcHca: this.hcaIndex,
      srcQpn: qp.qpn,
      dstQpn: qp.remoteQpn,
      seq: c.psn,
      wqeIndex: w.ctrl.wqeIndex,
      raddr: w.kind === 'send' ? 0 : w.raddr.raddr + off,
      rkey: w.kind === 'send' ? 0 : w.raddr.rkey,
      length: isAtomic ? 8 : c.length - off,
      offset: off,
      payload: whole !== null && off > 0 ? whole.subarray(off) : whole,
      payloadBuf: carries ? c.payloadBuf : null,
      imm: w.ctrl.imm,
      invRkey: w.ctrl.imm,
      se: w.ctrl.se,
      compare: isAtomic ? le64(w.atomic.compare) : null,
      swapAdd: isAtomic ? le64(w.atomic.swapAdd) : null,
    };
    const bytes = m.payload ? m.payload.length : 0;
    this.link!.sendTo(qp.remoteHca, bytes + (isAtomic ? 28 : 0), qp.mtu, m);
    this.sMessages.inc();
    this.sBytes.inc(bytes);
    c.stage = WAIT_RESP;
    c.answered = false;
    if (c.rdAtomic) q.rdOut++;
    // the ACK timeout (IBTA: 4.096 us x 2^timeout), per try
    c.timeoutAt = this.sim.now + q.ackTimeout;
    this.deadlineHeap.push(c.timeoutAt, q);
    this.armTimer(c.timeoutAt);
  }

  /** A message stops waiting for its answer. */
  private leaveWait(c: Ctx): void {
    if (c.stage === WAIT_RESP && c.rdAtomic) c.q!.rdOut--;
    c.timeoutAt = Infinity;
  }

  private onAnswer(a: RcResponse): void {
    const q = this.qps.get(a.dstQpn);
    let c: Ctx | null = null;
    if (q !== undefined) {
      for (let i = 0; i < q.sendNext; i++) {
        const x = q.list[i];
        if (x.psn === a.seq && x.stage === WAIT_RESP) {
          c = x;
          break;
        }
      }
    }
    if (c === null) {
      a.dataBuf?.release(); // an answer to an earlier try, or to a flushed message: dropped
      return;
    }
    c.answered = true;
    this.pumpQ.push(q!);
    if (a.kind === 'NAK') {
      switch (a.nak) {
        case 'RNR': {
          // receiver not ready: wait the RNR timer, then send it and the later ones again (a
          // WRITE whose first packets were placed before a page fault: only the rest of it)
          const qp = q!.qp;
          if (a.committed !== undefined && a.committed > c.placed) c.placed = a.committed;
          if (qp.rnrRetry !== 7 && c.rnrTries++ >= qp.rnrRetry) return this.finish(c, CqeSyndrome.RNR_RETRY_EXC_ERR);
          this.sRetries.inc();
          this.goBack(q!, c);
          q!.resendAt = this.sim.now + rnrTimerPs(this.rnrTimerCode);
          this.deadlineHeap.push(q!.resendAt, q!);
          this.armTimer(q!.resendAt);
          return;
        }
        case 'ACCESS':
          return this.finish(c, CqeSyndrome.REMOTE_ACCESS_ERR);
        case 'INV_REQ':
          return this.finish(c, CqeSyndrome.REMOTE_INVAL_REQ_ERR);
        default:
          return this.finish(c, CqeSyndrome.REMOTE_OP_ERR);
      }
    }
    if (a.kind === 'READ_DATA' || a.kind === 'ATOMIC_DATA') {
      this.leaveWait(c);
      c.readBuf = a.dataBuf ?? null;
      c.answerData = a.data!;
      // the QP's results are written in order (their ranges may overlap): after an earlier scatter
      if (this.scatterBefore(c)) c.stage = HOLD_SCATTER;
      else this.startScatter(c);
      return;
    }
    this.finish(c, 0);
  }

  private scatterBefore(c: Ctx): boolean {
    const list = c.q!.list;
    for (let i = 0; i < list.length && list[i] !== c; i++) if (list[i].stage === SCATTER || list[i].stage === HOLD_SCATTER) return true;
    return false;
  }

  private startScatter(c: Ctx): void {
    c.mover.scatter(c.local, c.answerData!, c.readBuf);
    c.answerData = null;
    c.stage = SCATTER;
    this.stepping[this.nStepping++] = c;
  }

  /** Go-back-N: `c` and every later message already sent will be sent again, in order. */
  private goBack(q: ReqQp, c: Ctx): void {
    const from = q.list.indexOf(c);
    for (let i = from; i < q.sendNext; i++) {
      const x = q.list[i];
      this.leaveWait(x);
      x.stage = READY;
    }
    q.sendNext = from;
  }

  /**
   * The retry timer fired: RNR waits that are over, and ACK timeouts, of the QPs whose deadlines
   * are due (in the order the QPs were created); then the timer is armed for the earliest
   * deadline still standing.
   */
  private deadlines(): void {
    const now = this.sim.now;
    const heap = this.deadlineHeap;
    const due = this.dueQps;
    const stamp = ++this.dueStamp;
    while (heap.peekTime() <= now) {
      const q = heap.pop()!;
      if (q.dueStamp !== stamp && this.qps.get(q.qpn) === q) {
        q.dueStamp = stamp;
        due.push(q);
      }
    }
    if (due.length > 1) due.sort((a, b) => a.seq - b.seq);
    for (const q of due) {
      if (q.resendAt >= 0 && q.resendAt <= now) this.pumpQ.push(q);
      // the oldest message waiting for its answer times out first (messages are sent, and so
      // time out, in order)
      const c = this.oldestWaiting(q);
      if (c !== null && c.timeoutAt <= now) {
        // no answer: send again up to retry_cnt times, then give up
        if (c.tries++ >= q.qp.retryCnt) this.finish(c, CqeSyndrome.TRANSPORT_RETRY_EXC_ERR);
        else {
          this.sRetries.inc();
          this.goBack(q, c);
          this.pumpQ.push(q);
        }
      }
    }
    due.length = 0;
    // the earliest deadline still standing: a QP's RNR wait, or its oldest message's timeout
    while (heap.size > 0) {
      const t = heap.peekTime();
      const q = heap.peek()!;
      if (this.qps.get(q.qpn) === q && (q.resendAt === t || this.oldestWaiting(q)?.timeoutAt === t)) {
        this.armTimer(t);
        break;
      }
      heap.pop();
    }
  }

  /** The QP's oldest message waiting for its answer, or null. */
  private oldestWaiting(q: ReqQp): Ctx | null {
    for (let i = 0; i < q.sendNext; i++) if (q.list[i].stage === WAIT_RESP) return q.list[i];
    return null;
  }

  /** READ or atomic data placed. */
  private scattered(c: Ctx): void {
    // every write of the data is issued (each holds the buffer): drop the responder's reference
    if (c.readBuf !== null) c.readBuf.release();
    c.readBuf = null;
    this.finish(c, c.abort ? CqeSyndrome.WR_FLUSH_ERR : 0);
  }

  /** Flushes a message at its next safe point (at once if it has no DMA or translation under way). */
  private abortCtx(c: Ctx): void {
    if (c.stage === HOLD_SCATTER) {
      c.readBuf?.release();
      c.readBuf = null;
      c.answerData = null;
    }
    if (c.stage === PAGE_FAULT && c.faultToken !== 0) {
      this.faultCtx.delete(c.faultToken); // its resume will find nothing
      c.q!.faulted--;
      c.faultToken = 0;
    }
    if (c.stage === READY || c.stage === WAIT_RESP || c.stage === HOLD || c.stage === HOLD_SCATTER || c.stage === PAGE_FAULT) this.finish(c, CqeSyndrome.WR_FLUSH_ERR);
    else c.abort = true;
  }

  /** The message is over: out of its QP's order, later messages flushed after an error. */
  private finish(c: Ctx, syndrome: number): void {
    const q = c.q;
    this.releaseFence(c);
    this.leaveWait(c);
    c.syndrome = syndrome;
    this.rSyndrome.set(syndrome);
    if (syndrome !== 0) this.sErrors.inc();
    this.sLatency.add(this.sim.now - c.started);
    c.stage = DONE;
    this.doneQ[this.nDone++] = c;
    if (q === null) return;
    const list = q.list;
    const i = list.indexOf(c);
    if (i < 0) return;
    // out of the list in place (splice would build an array of the removed one)
    for (let j = i + 1; j < list.length; j++) list[j - 1] = list[j];
    list.pop();
    if (i < q.sendNext) q.sendNext--;
    // gathers held behind a READ or atomic may go on, and the next held scatter
    for (let j = i; j < q.list.length; j++) {
      const x = q.list[j];
      if (x.stage === HOLD && !this.readsBefore(x)) this.startGather(x);
      else if (x.stage === HOLD_SCATTER && !this.scatterBefore(x)) this.startScatter(x);
    }
    if (syndrome !== 0 && syndrome !== CqeSyndrome.WR_FLUSH_ERR) {
      q.flushing = true;
      for (let j = q.list.length - 1; j >= i; j--) this.abortCtx(q.list[j]);
    }
  }

  /** The message's DMA through its translations is over (once its posted writes land). */
  private releaseFence(c: Ctx): void {
    const h = c.holds;
    const n = c.nHolds;
    if (n === 0) return;
    for (let i = 0; i < n; i++) c.mover.releaseWhenLanded(this.fence!, h[i]);
    c.nHolds = 0; // by count: a length of 0 would drop the array's store
  }

  /** A completion was handed over: the context is free again. */
  private release(c: Ctx): void {
    // The payload's buffer goes back to the pool only if the newest try was answered: the
    // responder works in order, so every earlier copy was processed too. Ended without an
    // answer (retries exhausted, QP destroyed, flushed) a copy may still be on the wire and be
    // written from later: the buffer is dropped instead (the garbage collector takes it).
    if (c.payloadBuf !== null && (c.answered || c.psn < 0)) c.payloadBuf.release();
    c.payloadBuf = null;
    c.payload = null;
    c.job = null;
    c.q = null;
    c.stage = IDLE;
    this.ctxTable.give(c);
  }
}

const EMPTY = new Uint8Array(0);

/** An 8-byte operand as a little-endian host word. */
function le64(v: bigint): Uint8Array {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, v, true);
  return b;
}
