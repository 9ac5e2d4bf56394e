/**
 * The RC requester (`tb.hcaN.requester`): executes one data work request at a time for the send
 * queue engine: translates the local SGEs through the ATU (LOCAL_WRITE where the HCA writes:
 * READ and atomic destinations), gathers the payload by DMA, sends the message over the link,
 * waits for the answer (retrying after an RNR NAK or an ACK timeout), places READ and atomic
 * results, and reports the completion syndrome (spec/semantics.md "Data path"). When the job's
 * QP is destroyed (DESTROY_QP), the job stops at its next safe point (translations answered,
 * gathered data read, or while waiting for an answer) and reports WR_FLUSH_ERR, which the send
 * queue engine drops: nothing more is sent for a destroyed QP.
 */
import type { PooledBuf } from '../memory/payload_pool.ts';
import { EnumType, Fifo, Module, type EventTarget, type Reg, type Signal } from '../../sim/index.ts';
import type { Hca } from '../hca.ts';
import type { DmaPort } from '../memory/pcie.ts';
import type { AtuPort } from '../translation/atu.ts';
import type { AtuResponse, PhysSegment } from '../translation/atu_types.ts';
import type { Link } from './link.ts';
import type { RcOp, RcRequest, RcResponse } from './rc_types.ts';
import type { DmaMover } from '../memory/dma_mover.ts';
import { enginePorts } from './engine_ports.ts';
import { CqeSyndrome, WqeOpcode } from '../formats/constants.ts';
import { dataSegLength } from '../formats/data_seg.ts';
import type { ParsedWqe } from '../formats/wqe_parse.ts';
import { ackTimeoutPs, rnrTimerPs } from '../config.ts';
import { IB_LOCAL_WRITE } from '../memory/icm_mkey.ts';
import type { QpContext } from '../firmware/cmd_types.ts';

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

export const RequesterState = new EnumType('requester_state', ['IDLE', 'XLATE', 'GATHER', 'SEND', 'WAIT_RESP', 'SCATTER', 'DONE']);
const IDLE = 0;
const XLATE = 1;
const GATHER = 2;
const SEND = 3;
const WAIT_RESP = 4;
const SCATTER = 5;
const DONE = 6;

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

export class Requester extends Module implements EventTarget {
  readonly req: Fifo<ReqJob>;
  readonly resp: Fifo<ReqDone>;
  /** Answers from the peer's responder. */
  readonly inbox: Fifo<RcResponse>;
  link: Link<RcRequest> | null = null;
  private readonly atu: AtuPort;
  private readonly port: DmaPort;
  private readonly mover: DmaMover;
  /** FSM state: changes at once (several steps may run in one edge), traced when it changes. */
  private readonly state: Signal;
  private readonly rQpn: Reg;
  private readonly rOp: Reg;
  private readonly rLen: Reg;
  private readonly rSyndrome: Reg;
  // the job in progress
  private job: ReqJob | null = null;
  /** The job's QP context, taken at start (the firmware forgets it on DESTROY_QP). */
  private qp: Readonly<QpContext> | null = null;
  private op: RcOp = 'SEND';
  private ptrs: { lkey: number; addr: number; length: number }[] = [];
  private results: (AtuResponse | null)[] = [];
  private waiting = 0;
  private local: PhysSegment[] = [];
  private payload: Uint8Array | null = null;
  /** The pooled buffer behind `payload` (held until the message is answered), and READ data's. */
  private payloadBuf: PooledBuf | null = null;
  /** The newest try of the message was answered (ACK, NAK, data). */
  private answered = false;
  private readBuf: PooledBuf | null = null;
  private length = 0;
  private seq = 0;
  private tries = 0;
  private rnrTries = 0;
  private resendAt = -1;
  private timeoutAt = -1;
  private answer: RcResponse | null = null;
  private syndrome = 0;
  private readonly sMessages;
  private readonly sBytes;
  private readonly sRetries;
  private readonly sErrors;
  private readonly sLatency;
  private started = 0;

  constructor(private readonly hca: Hca) {
    super(hca.sim, hca, 'requester');
    this.state = this.signal('state', RequesterState.width, { enum: RequesterState });
    this.rQpn = this.probe('qpn', 24);
    this.rOp = this.probe('wqe_opcode', 8);
    this.rLen = this.probe('length', 32);
    this.rSyndrome = this.probe('syndrome', 8);
    this.req = new Fifo<ReqJob>(this, 'req', { capacity: 1 });
    this.resp = new Fifo<ReqDone>(this, 'resp', { capacity: 1 });
    this.inbox = new Fifo<RcResponse>(this, 'inbox', { capacity: 16 });
    this.req.consumer = this;
    this.inbox.consumer = this;
    this.resp.producer = this;
    ({ atu: this.atu, port: this.port, mover: this.mover } = enginePorts(this, hca, 'requester'));
    this.sMessages = this.stats.counter('messages');
    this.sBytes = this.stats.counter('bytes');
    this.sRetries = this.stats.counter('retries');
    this.sErrors = this.stats.counter('errors');
    this.sLatency = this.stats.histogram('latency_ps');
  }

  /** DESTROY_QP executed: a job of that QP stops at its next safe point (woken to see it). */
  forgetQp(qpn: number): void {
    if (this.job !== null && this.job.qpn === qpn) this.wake();
  }

  /** The job's QP was destroyed since the job started. */
  private gone(): boolean {
    return this.hca.cmdif.getQp(this.job!.qpn) !== this.qp;
  }

  /** Time of the one pending timer event, or -1: one event at a time, re-armed lazily. */
  private timerAt = -1;

  /** Arms the timer for `t` (an earlier pending event re-arms itself when it fires). */
  private armTimer(t: number): void {
    if (this.timerAt < 0 || t < this.timerAt) {
      this.timerAt = t;
      this.sim.at(t, this);
    }
  }

  /** @internal A retry timer (RNR or ACK timeout) fired: wake if a deadline is due, else re-arm. */
  fire(): void {
    if (this.sim.now !== this.timerAt) return; // superseded by an earlier arming
    this.timerAt = -1;
    const due = Math.min(this.timeoutAt, this.resendAt < 0 ? Infinity : this.resendAt);
    if (due <= this.sim.now) this.wake();
    else if (due !== Infinity) this.armTimer(due);
  }

  override tick(): void {
    while (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      this.mover.complete(r.tag, r.data!);
    }
    this.stepFsm(this.state);
  }

  protected override fsmStep(): void {
    switch (this.state.q) {
      case IDLE:
        if (!this.req.canPop()) return this.sleep();
        this.start(this.req.pop());
        return;
      case XLATE:
        return this.xlate();
      case GATHER:
        this.mover.step();
        if (this.mover.done) {
          this.payload = this.mover.data;
          this.payloadBuf = this.mover.takeBuf();
          this.state.setNow(SEND);
        } else if (this.mover.waiting) this.sleep(); // woken by read completions
        return;
      case SEND:
        return this.send();
      case WAIT_RESP:
        return this.waitResp();
      case SCATTER:
        this.mover.step();
        if (this.mover.done) {
          // every write of the READ data is issued (each holds the buffer): drop the responder's reference
          if (this.readBuf !== null) this.readBuf.release();
          this.readBuf = null;
          this.finish(0);
        }
        return;
      case DONE:
        if (!this.resp.canPush()) return this.sleep();
        this.resp.push({ tag: this.job!.tag, syndrome: this.syndrome, byteLen: this.length });
        if (this.syndrome !== 0) this.sErrors.inc();
        this.sLatency.add(this.sim.now - this.started);
        this.job = null;
        this.qp = null;
        // The payload's buffer goes back to the pool only if the newest try was answered: the
        // responder works in order, so every earlier copy was processed too. Ended without an
        // answer (retries exhausted, QP destroyed) a copy may still be on the wire and be
        // written from later: the buffer is dropped instead (the garbage collector takes it).
        if (this.payloadBuf !== null && this.answered) this.payloadBuf.release();
        this.payloadBuf = null;
        this.state.setNow(IDLE);
        return;
    }
  }

  private start(job: ReqJob): void {
    this.job = job;
    this.qp = this.hca.cmdif.getQp(job.qpn) ?? null;
    this.answered = false;
    this.started = this.sim.now;
    this.op = OP_OF[job.wqe.ctrl.opcode];
    this.ptrs = [];
    let inline: Uint8Array[] = [];
    for (const d of job.wqe.data) {
      if (d.kind === 'inline') inline.push(d.data);
      else this.ptrs.push({ lkey: d.seg.lkey, addr: d.seg.addr, length: dataSegLength(d.seg.byteCount) });
    }
    this.length = this.ptrs.reduce((a, p) => a + p.length, 0) + inline.reduce((a, b) => a + b.length, 0);
    this.payload = null;
    if (inline.length > 0) {
      const buf = new Uint8Array(this.length);
      let o = 0;
      for (const b of inline) { buf.set(b, o); o += b.length; }
      this.payload = buf;
      inline = [];
    }
    this.results = this.ptrs.map(() => null);
    this.waiting = 0;
    this.local = [];
    this.tries = 0;
    this.rnrTries = 0;
    this.syndrome = 0;
    this.rQpn.set(job.qpn);
    this.rOp.set(job.wqe.ctrl.opcode);
    this.rLen.set(Math.min(this.length, 0xffffffff));
    // destroyed between the send queue engine's push and this pop: nothing to do for it
    if (this.qp === null) return this.finish(CqeSyndrome.WR_FLUSH_ERR);
    this.state.setNow(this.ptrs.length > 0 ? XLATE : SEND);
  }

  /** Issue the SGE translations, then collect them (one per SGE, in order). */
  private xlate(): void {
    const qp = this.qp!;
    const writes = this.op === 'READ' || this.op === 'CMP_SWAP' || this.op === 'FETCH_ADD';
    while (this.waiting < this.ptrs.length && this.atu.req.canPush()) {
      const p = this.ptrs[this.waiting];
      this.atu.req.push({ key: p.lkey, va: p.addr, length: p.length, access: writes ? IB_LOCAL_WRITE : 0, pd: qp.pd, qpn: qp.qpn, tag: this.waiting, local: true });
      this.waiting++;
    }
    while (this.atu.resp.canPop()) {
      const r = this.atu.resp.pop();
      this.results[r.tag] = r;
    }
    if (this.results.some((r) => r === null)) {
      if (this.waiting === this.ptrs.length) this.sleep(); // woken by the ATU's answers
      return;
    }
    if (this.gone()) return this.finish(CqeSyndrome.WR_FLUSH_ERR);
    for (const r of this.results) {
      if (r!.result.kind !== 'ok') return this.finish(CqeSyndrome.LOCAL_PROT_ERR);
      for (const s of (r!.result as { segments: PhysSegment[] }).segments) this.local.push(s);
    }
    if (writes) this.state.setNow(SEND);
    else {
      this.mover.gather(this.local);
      this.state.setNow(GATHER);
    }
  }

  private send(): void {
    const job = this.job!;
    const qp = this.qp!;
    if (this.gone()) return this.finish(CqeSyndrome.WR_FLUSH_ERR);
    const w = job.wqe;
    const isAtomic = w.kind === 'atomic';
    let compare: Uint8Array | null = null;
    let swapAdd: Uint8Array | null = null;
    if (isAtomic) {
      compare = le64(w.atomic.compare);
      swapAdd = le64(w.atomic.swapAdd);
    }
    const m: RcRequest = {
      op: this.op,
      srcHca: this.hcaIndex(),
      srcQpn: qp.qpn,
      dstQpn: qp.remoteQpn,
      seq: ++this.seq,
      raddr: w.kind === 'send' ? 0 : w.raddr.raddr,
      rkey: w.kind === 'send' ? 0 : w.raddr.rkey,
      length: isAtomic ? 8 : this.length,
      payload: this.op === 'READ' || isAtomic ? null : (this.payload ?? EMPTY),
      payloadBuf: this.op === 'READ' || isAtomic ? null : this.payloadBuf,
      imm: w.ctrl.imm,
      invRkey: w.ctrl.imm,
      se: w.ctrl.se,
      compare,
      swapAdd,
    };
    const bytes = m.payload ? m.payload.length : 0;
    this.link!.send({ to: qp.remoteHca, payloadBytes: bytes + (isAtomic ? 28 : 0), mtu: qp.mtu, body: m });
    this.sMessages.inc();
    this.sBytes.inc(bytes);
    this.answer = null;
    this.answered = false;
    // the ACK timeout (IBTA: 4.096 us x 2^timeout), armed per try
    this.timeoutAt = this.sim.now + ackTimeoutPs(qp.timeout === 0 ? 14 : qp.timeout);
    this.armTimer(this.timeoutAt);
    this.state.setNow(WAIT_RESP);
  }

  private waitResp(): void {
    const qp = this.qp!;
    while (this.inbox.canPop()) {
      const a = this.inbox.pop();
      if (a.seq === this.seq && a.dstQpn === qp.qpn) this.answer = a; // stale answers of earlier tries are dropped
    }
    if (this.gone()) {
      this.answer?.dataBuf?.release(); // READ data never scattered: its pooled buffer goes back
      this.answer = null;
      return this.finish(CqeSyndrome.WR_FLUSH_ERR);
    }
    if (this.resendAt >= 0) {
      if (this.sim.now < this.resendAt) return this.sleep();
      this.resendAt = -1;
      this.state.setNow(SEND);
      return;
    }
    const a = this.answer;
    this.answered = a !== null;
    if (a === null) {
      if (this.sim.now >= this.timeoutAt) {
        // no answer: retry up to retry_cnt times, then give up
        if (this.tries++ >= qp.retryCnt) return this.finish(CqeSyndrome.TRANSPORT_RETRY_EXC_ERR);
        this.sRetries.inc();
        this.state.setNow(SEND);
        return;
      }
      return this.sleep(); // woken by the inbox or the timer
    }
    this.timeoutAt = Infinity;
    if (a.kind === 'NAK') {
      switch (a.nak) {
        case 'RNR':
          // receiver not ready: wait the RNR timer and resend (rnr_retry 7 means forever)
          if (qp.rnrRetry !== 7 && this.rnrTries++ >= qp.rnrRetry) return this.finish(CqeSyndrome.RNR_RETRY_EXC_ERR);
          this.sRetries.inc();
          this.resendAt = this.sim.now + rnrTimerPs(this.hca.cfg.rnrTimerCode);
          this.armTimer(this.resendAt);
          this.answer = null;
          return;
        case 'ACCESS':
          return this.finish(CqeSyndrome.REMOTE_ACCESS_ERR);
        case 'INV_REQ':
          return this.finish(CqeSyndrome.REMOTE_INVAL_REQ_ERR);
        default:
          return this.finish(CqeSyndrome.REMOTE_OP_ERR);
      }
    }
    if (a.kind === 'READ_DATA' || a.kind === 'ATOMIC_DATA') {
      this.readBuf = a.dataBuf ?? null;
      this.mover.scatter(this.local, a.data!, this.readBuf);
      this.state.setNow(SCATTER);
      return;
    }
    this.finish(0);
  }

  private finish(syndrome: number): void {
    this.syndrome = syndrome;
    this.rSyndrome.set(syndrome);
    this.timeoutAt = Infinity;
    this.resendAt = -1;
    this.state.setNow(DONE);
  }

  private hcaIndex(): number {
    return Number(this.hca.name.slice(3));
  }
}

const EMPTY = new Uint8Array(0);

/** An 8-byte operand as a little-endian host word. */
function le64(v: number): Uint8Array {
  const b = new Uint8Array(8);
  const dv = new DataView(b.buffer);
  dv.setUint32(0, v >>> 0, true);
  dv.setUint32(4, Math.floor(v / 2 ** 32), true);
  return b;
}

