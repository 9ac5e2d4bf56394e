/**
 * The RC responder (`tb.hcaN.responder`): takes one incoming message at a time, checks it
 * (spec/semantics.md "Data path: remote access", "local access" of receive buffers, "Remote
 * invalidate"), moves the bytes by DMA, writes the receive completion, and answers the
 * requester (ACK, NAK, or READ / atomic data). A QP that is not ready to receive drops the
 * message (the requester times out), as does a destroyed QP (DESTROY_QP): the firmware forgets
 * it, and a message of it in progress writes no completion and sends no answer. Receive WQEs are fetched from the QP's receive queue
 * (`rq` doorbells), each a list of 16-byte data segments ended by the invalid lkey 0x100.
 *
 * SEND_WITH_INV's invalidation (state INVALIDATE, after the data is placed and before the
 * receive CQE) goes through the UMR engine's `rinv` queues as a LOCAL_INV WQE run under the
 * remote rules: it takes a UMR's time (the context read from ICM, the check, the posted write)
 * and updates the mkey cache coherently, as LOCAL_INV does.
 */
import { EnumType, Fifo, Module, type Reg, type Signal } from '../../sim/index.ts';
import type { Hca } from '../hca.ts';
import type { DmaPort } from '../memory/pcie.ts';
import type { AtuPort } from '../translation/atu.ts';
import type { AtuResponse, PhysSegment } from '../translation/atu_types.ts';
import type { Link } from './link.ts';
import type { RcNak, RcRequest, RcResponse } from './rc_types.ts';
import type { CqeJob } from '../completion/cq_writer.ts';
import type { DmaMover } from '../memory/dma_mover.ts';
import type { UmrDone, UmrJob } from '../umr/umr_types.ts';
import { enginePorts } from './engine_ports.ts';
import { CqeOpcode, CqeSyndrome, MLX5_INVALID_LKEY } from '../formats/constants.ts';
import { decodeDataSeg, dataSegLength } from '../formats/data_seg.ts';
import { IB_LOCAL_WRITE, IB_REMOTE_ATOMIC, IB_REMOTE_READ, IB_REMOTE_WRITE } from '../memory/icm_mkey.ts';
import { LOCAL_INV_WQE_BYTES, encodeLocalInvWqe } from '../umr/umr_ops.ts';
import type { QpContext } from '../firmware/cmd_types.ts';

/** A receive queue doorbell: the driver posted receive WQEs up to counter `pi`. */
export interface RqDoorbell {
  qpn: number;
  pi: number;
}

/** The `op` trace value: index in this list plus one (0: none), named in the waves. */
const RC_OPS = ['SEND', 'SEND_IMM', 'SEND_INV', 'WRITE', 'WRITE_IMM', 'READ', 'CMP_SWAP', 'FETCH_ADD'];
const RcOpEnum = new EnumType('rc_op', ['NONE', ...RC_OPS]);

export const ResponderState = new EnumType('responder_state', [
  'IDLE', 'XLATE', 'FETCH_RWQE', 'XLATE_RECV', 'WRITE_DATA', 'READ_DATA', 'ATOMIC', 'INVALIDATE', 'CQE', 'ANSWER', 'FLUSH',
]);
const IDLE = 0;
const XLATE = 1;
const FETCH_RWQE = 2;
const XLATE_RECV = 3;
const WRITE_DATA = 4;
const READ_DATA = 5;
const ATOMIC = 6;
const INVALIDATE = 7;
const CQE = 8;
const ANSWER = 9;
const FLUSH = 10;

interface RqState {
  pi: number;
  ci: number;
}

export class Responder extends Module {
  /** Requests from the link. */
  readonly inbox: Fifo<RcRequest>;
  /** Receive queue doorbells (rung through PCIe by the driver). */
  readonly rqDoorbell: Fifo<RqDoorbell>;
  /** QPs the send side moved to ERR: their posted receives are flushed. */
  readonly flushReq: Fifo<number>;
  link: Link<RcResponse> | null = null;
  cqWriter: Fifo<CqeJob> | null = null;
  /** The UMR engine's remote-invalidation queues (connectUmr). */
  private rinv: { readonly req: Fifo<UmrJob>; readonly resp: Fifo<UmrDone> } | null = null;
  /** The LOCAL_INV WQE of the invalidation in flight (one at a time: reused). */
  private readonly invWqe = new Uint8Array(LOCAL_INV_WQE_BYTES);
  private invIssued = false;
  private invStarted = 0;
  private readonly atu: AtuPort;
  private readonly port: DmaPort;
  /** The receive WQE read is issued (FETCH_RWQE waits for the port otherwise). */
  private rwqeAsked = false;
  private readonly mover: DmaMover;
  private readonly rqs = new Map<number, RqState>();
  /** FSM state: changes at once (several steps may run in one edge), traced when it changes. */
  private readonly state: Signal;
  private readonly rQpn: Reg;
  private readonly rOp: Reg;
  private readonly rKey: Reg;
  private readonly rNak: Reg;
  // the message in progress
  private m: RcRequest | null = null;
  private qpn = 0;
  /** The message's QP context and receive queue, taken when it begins (DESTROY_QP forgets both). */
  private qp: Readonly<QpContext> | null = null;
  private cur: RqState = { pi: 0, ci: 0 };
  private segs: PhysSegment[] = [];
  private pending: AtuResponse | null = null;
  private issued = false;
  private answer: RcResponse | null = null;
  private cqes: CqeJob[] = [];
  private recvSges: { lkey: number; addr: number; length: number }[] = [];
  private recvResults: (AtuResponse | null)[] = [];
  private recvIssued = 0;
  private atomicPhase = 0;
  private flushQpn = -1;
  private readonly sMessages;
  private readonly sNaks;
  private readonly sDrops;
  private readonly sRnr;
  private readonly sInvalidations;
  private readonly sInvLatency;

  constructor(private readonly hca: Hca) {
    super(hca.sim, hca, 'responder');
    this.state = this.signal('state', ResponderState.width, { enum: ResponderState });
    this.rQpn = this.probe('qpn', 24);
    this.rOp = this.probe('op', 4, { enum: RcOpEnum });
    this.rKey = this.probe('rkey', 32);
    this.rNak = this.probe('nak', 3);
    this.inbox = new Fifo<RcRequest>(this, 'inbox', { capacity: 16 });
    this.rqDoorbell = new Fifo<RqDoorbell>(this, 'rq_doorbell', { capacity: 16 });
    this.flushReq = new Fifo<number>(this, 'flush_req', { capacity: 16 });
    this.inbox.consumer = this;
    this.rqDoorbell.consumer = this;
    this.flushReq.consumer = this;
    ({ atu: this.atu, port: this.port, mover: this.mover } = enginePorts(this, hca, 'responder'));
    this.sMessages = this.stats.counter('messages');
    this.sNaks = this.stats.counter('naks');
    this.sDrops = this.stats.counter('drops');
    this.sRnr = this.stats.counter('rnr_naks');
    this.sInvalidations = this.stats.counter('remote_invalidations');
    this.sInvLatency = this.stats.histogram('remote_inv_latency_ps');
  }

  /** Wires the UMR engine's remote-invalidation queues (SEND_WITH_INV). */
  connectUmr(rinv: { readonly req: Fifo<UmrJob>; readonly resp: Fifo<UmrDone> }): void {
    this.rinv = rinv;
    rinv.req.producer = this;
    rinv.resp.consumer = this;
  }

  /** Receive WQEs of a QP consumed (or flushed) so far. */
  rqConsumed(qpn: number): number {
    return this.rqs.get(qpn)?.ci ?? 0;
  }

  /** DESTROY_QP executed: forget the QP's receive queue (its number may be handed out again). */
  forgetQp(qpn: number): void {
    this.rqs.delete(qpn);
  }

  /** The message's QP was destroyed since it began. */
  private gone(): boolean {
    return this.hca.cmdif.getQp(this.qpn) !== this.qp;
  }

  private rq(qpn: number): RqState {
    let r = this.rqs.get(qpn);
    if (!r) this.rqs.set(qpn, (r = { pi: 0, ci: 0 }));
    return r;
  }

  override tick(): void {
    while (this.rqDoorbell.canPop()) {
      const d = this.rqDoorbell.pop();
      const qp = this.hca.cmdif.getQp(d.qpn);
      if (qp === undefined) continue; // a destroyed QP's doorbell is ignored
      this.rq(d.qpn).pi = d.pi;
      if (qp.state === 'ERR' && this.flushReq.canPush()) this.flushReq.push(d.qpn);
    }
    while (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      if (r.tag === 0x7fffffff) this.onRwqe(r.data!);
      else this.mover.complete(r.tag, r.data!);
    }
    while (this.atu.resp.canPop()) {
      const r = this.atu.resp.pop();
      if (this.state.q === XLATE_RECV) this.recvResults[r.tag] = r;
      else this.pending = r;
    }
    this.stepFsm(this.state);
  }

  protected override fsmStep(): void {
    switch (this.state.q) {
      case IDLE:
        if (this.flushReq.canPop()) {
          this.flushQpn = this.flushReq.pop();
          this.state.setNow(FLUSH);
          return;
        }
        if (!this.inbox.canPop()) return this.sleep();
        return this.begin(this.inbox.pop());
      case FLUSH:
        return this.flush();
      case XLATE:
        return this.xlate();
      case FETCH_RWQE:
        if (!this.rwqeAsked) return this.askRwqe();
        return this.sleep(); // woken by the read data
      case XLATE_RECV:
        return this.xlateRecv();
      case WRITE_DATA:
        this.mover.step();
        if (this.mover.done) this.afterWrite();
        return;
      case READ_DATA:
        this.mover.step();
        if (this.mover.done) this.ack({ kind: 'READ_DATA', data: this.mover.data, dataBuf: this.mover.takeBuf() });
        else if (this.mover.waiting) this.sleep();
        return;
      case ATOMIC:
        return this.atomic();
      case INVALIDATE:
        return this.invalidate();
      case CQE:
        while (this.cqes.length > 0 && this.cqWriter!.canPush()) this.cqWriter!.push(this.cqes.shift()!);
        if (this.cqes.length === 0) this.state.setNow(this.answer ? ANSWER : IDLE);
        return;
      case ANSWER:
        if (this.gone()) {
          // the QP was destroyed while the message was in progress: it answers nothing
          this.sDrops.inc();
          this.answer = null;
          this.m = null;
          this.state.setNow(IDLE);
          return;
        }
        this.link!.send({ to: this.answer!.dstHca, payloadBytes: this.answer!.data?.length ?? 0, mtu: 4096, body: this.answer! });
        this.answer = null;
        this.m = null;
        this.state.setNow(IDLE);
        return;
    }
  }

  private begin(m: RcRequest): void {
    this.m = m;
    this.qpn = m.dstQpn;
    this.sMessages.inc();
    this.rQpn.set(m.dstQpn);
    this.rOp.set(RC_OPS.indexOf(m.op) + 1);
    this.rKey.set(m.rkey >>> 0);
    this.cqes = [];
    this.answer = null;
    this.pending = null;
    this.issued = false;
    this.invIssued = false;
    const qp = this.hca.cmdif.getQp(m.dstQpn);
    // a QP that cannot receive drops the message; the requester's ACK timer runs out
    if (!qp || (qp.state !== 'RTR' && qp.state !== 'RTS') || qp.remoteQpn !== m.srcQpn) {
      this.sDrops.inc();
      this.m = null;
      return;
    }
    this.qp = qp;
    this.cur = this.rq(m.dstQpn);
    const needsRecv = m.op === 'SEND' || m.op === 'SEND_IMM' || m.op === 'SEND_INV' || m.op === 'WRITE_IMM';
    const rq = this.cur;
    if (m.op === 'SEND' || m.op === 'SEND_IMM' || m.op === 'SEND_INV') {
      if (rq.ci >= rq.pi) return this.nak('RNR');
      return this.fetchRwqe();
    }
    // RDMA: the remote key, unless zero length (which checks nothing)
    if (m.length === 0 && m.op !== 'CMP_SWAP' && m.op !== 'FETCH_ADD') {
      if (needsRecv && rq.ci >= rq.pi) return this.nak('RNR');
      return this.afterWrite();
    }
    this.state.setNow(XLATE);
  }

  private xlate(): void {
    const m = this.m!;
    const qp = this.qp!;
    if (!this.issued) {
      if (!this.atu.req.canPush()) return;
      const access = m.op === 'READ' ? IB_REMOTE_READ : m.op === 'WRITE' || m.op === 'WRITE_IMM' ? IB_REMOTE_WRITE : IB_REMOTE_ATOMIC;
      this.atu.req.push({ key: m.rkey, va: m.raddr, length: m.length, access, pd: qp.pd, qpn: qp.qpn, tag: 0 });
      this.issued = true;
      return;
    }
    if (this.pending === null) return this.sleep(); // woken by the ATU's answer
    const r = this.pending.result;
    this.pending = null;
    if (r.kind !== 'ok') return this.fatal('ACCESS', null);
    this.segs = r.segments;
    if (m.op === 'CMP_SWAP' || m.op === 'FETCH_ADD') {
      // (6) atomics must be 8-byte aligned, after the access checks
      if (m.raddr % 8 !== 0) return this.fatal('INV_REQ', null);
      this.atomicPhase = 0;
      this.state.setNow(ATOMIC);
      return;
    }
    if (m.op === 'READ') {
      this.mover.gather(this.segs);
      this.state.setNow(READ_DATA);
      return;
    }
    const rq = this.cur;
    if (m.op === 'WRITE_IMM' && rq.ci >= rq.pi) return this.nak('RNR');
    this.mover.scatter(this.segs, m.payload!, m.payloadBuf ?? null);
    this.state.setNow(WRITE_DATA);
  }

  /** Reads the next receive WQE of the QP. */
  private fetchRwqe(): void {
    this.rwqeAsked = false;
    this.state.setNow(FETCH_RWQE);
    this.askRwqe();
  }

  /** Issues the receive WQE read once the PCIe port takes it (woken when it pops, if full). */
  private askRwqe(): void {
    if (!this.port.req.canPush()) return this.sleep();
    const qp = this.qp!;
    const rq = this.cur;
    const stride = rqStride(qp.maxRecvSge);
    this.port.req.push({ kind: 'read', addr: qp.rqBufAddr + (rq.ci & (qp.rqSize - 1)) * stride, length: stride, tag: 0x7fffffff });
    this.rwqeAsked = true;
  }

  private onRwqe(data: Uint8Array): void {
    const v = new DataView(data.buffer, data.byteOffset, data.length);
    this.recvSges = [];
    for (let off = 0; off + 16 <= data.length; off += 16) {
      const d = decodeDataSeg(v, off);
      if (d.lkey === MLX5_INVALID_LKEY) break;
      this.recvSges.push({ lkey: d.lkey, addr: d.addr, length: dataSegLength(d.byteCount) });
    }
    this.recvResults = [];
    this.recvIssued = 0;
    this.segs = [];
    this.state.setNow(XLATE_RECV);
  }

  /** The receive SGEs that the message's bytes need, translated for LOCAL_WRITE in order. */
  private xlateRecv(): void {
    const m = this.m!;
    const qp = this.qp!;
    const len = m.op === 'WRITE_IMM' ? 0 : m.length;
    // how many SGEs the bytes take (later ones are not looked at)
    let need = 0;
    let cap = 0;
    while (cap < len && need < this.recvSges.length) cap += this.recvSges[need++].length;
    while (this.recvIssued < need && this.atu.req.canPush()) {
      const s = this.recvSges[this.recvIssued];
      const take = Math.min(s.length, len - sumLen(this.recvSges, this.recvIssued));
      this.atu.req.push({ key: s.lkey, va: s.addr, length: take, access: IB_LOCAL_WRITE, pd: qp.pd, qpn: qp.qpn, tag: this.recvIssued, local: true });
      this.recvIssued++;
    }
    for (let i = 0; i < need; i++) {
      if (!this.recvResults[i]) {
        if (this.recvIssued === need) this.sleep();
        return;
      }
    }
    for (let i = 0; i < need; i++) {
      const r = this.recvResults[i]!.result;
      // a bad SGE met before the message ends: the receiver's protection error, the sender's remote op error
      if (r.kind !== 'ok') return this.fatal('REM_OP', CqeSyndrome.LOCAL_PROT_ERR);
      for (const s of r.segments) this.segs.push(s);
    }
    if (cap < len) return this.fatal('INV_REQ', CqeSyndrome.LOCAL_LENGTH_ERR);
    this.mover.scatter(this.segs, m.payload ?? EMPTY, m.payloadBuf ?? null);
    this.state.setNow(WRITE_DATA);
  }

  /** After the data is placed: invalidate (SEND_INV), the receive completion, the ACK. */
  private afterWrite(): void {
    const m = this.m!;
    if (m.op === 'SEND_INV') {
      this.state.setNow(INVALIDATE);
      return;
    }
    if (m.op === 'SEND' || m.op === 'SEND_IMM' || m.op === 'WRITE_IMM') {
      const op = m.op === 'SEND' ? CqeOpcode.RESP_SEND : m.op === 'SEND_IMM' ? CqeOpcode.RESP_SEND_IMM : CqeOpcode.RESP_WR_IMM;
      this.recvCqe(op, 0, m.length, m.op === 'SEND' ? 0 : m.imm, m.se);
    }
    this.ack({ kind: 'ACK' });
  }

  /**
   * Remote invalidate (spec/semantics.md "Remote invalidate"), by the UMR engine (umr_ops.ts
   * checkRemoteInv has the rules): on failure the key stays valid.
   */
  private invalidate(): void {
    const m = this.m!;
    const u = this.rinv;
    if (u === null) throw new Error(`${this.path}: SEND_WITH_INV needs the UMR engine (connectUmr)`);
    const key = m.invRkey >>> 0;
    if (!this.invIssued) {
      if (!u.req.canPush()) return this.sleep(); // woken when the engine pops
      const qp = this.qp!;
      encodeLocalInvWqe(this.invWqe, key, qp.qpn, this.cur.ci & 0xffff);
      u.req.push({ tag: qp.qpn, qpn: qp.qpn, pd: qp.pd, wqe: this.invWqe });
      this.invIssued = true;
      this.invStarted = this.sim.now;
      return;
    }
    if (!u.resp.canPop()) return this.sleep(); // woken by the engine's completion
    const d = u.resp.pop();
    this.invIssued = false;
    this.sInvLatency.add(this.sim.now - this.invStarted);
    if (d.syndrome !== 0) {
      this.recvCqe(CqeOpcode.RESP_ERR, CqeSyndrome.REMOTE_INVAL_REQ_ERR, 0, 0, false);
      this.hca.cmdif.hwError(this.qpn);
      this.queueFlush(this.qpn);
      this.ack({ kind: 'ACK' }); // the sender's SEND succeeded
      return;
    }
    this.sInvalidations.inc();
    this.recvCqe(CqeOpcode.RESP_SEND_INV, 0, m.length, key, m.se);
    this.ack({ kind: 'ACK' });
  }

  private atomic(): void {
    const m = this.m!;
    if (this.atomicPhase === 0) {
      this.mover.gather(this.segs);
      this.atomicPhase = 1;
    }
    if (this.atomicPhase === 1) {
      this.mover.step();
      if (!this.mover.done) {
        if (this.mover.waiting) this.sleep();
        return;
      }
      const orig = this.mover.data.slice();
      const v = new DataView(orig.buffer);
      const cur = v.getBigUint64(0, true);
      const swapAdd = new DataView(m.swapAdd!.buffer).getBigUint64(0, true);
      let next: bigint | null = null;
      if (m.op === 'FETCH_ADD') next = (cur + swapAdd) & 0xffffffffffffffffn;
      else if (cur === new DataView(m.compare!.buffer).getBigUint64(0, true)) next = swapAdd;
      this.answer = { dstHca: m.srcHca, dstQpn: m.srcQpn, seq: m.seq, kind: 'ATOMIC_DATA', data: orig };
      if (next !== null) {
        const out = new Uint8Array(8);
        new DataView(out.buffer).setBigUint64(0, next, true);
        this.mover.scatter(this.segs, out);
        this.atomicPhase = 2;
        return;
      }
      this.state.setNow(ANSWER);
      return;
    }
    this.mover.step();
    if (this.mover.done) this.state.setNow(ANSWER);
  }

  /** A receive completion; `se`: the message was sent solicited (spec/mlx5.md CQE op_own bit 1). */
  private recvCqe(opcode: number, syndrome: number, byteCnt: number, imm: number, se: boolean): void {
    const qp = this.qp!;
    const rq = this.cur;
    const counter = rq.ci++;
    if (this.gone()) return; // a destroyed QP completes nothing
    this.cqes.push({
      cqn: qp.recvCqn, opcode, qpn: qp.qpn, wqeOpcode: 0, wqeCounter: counter & 0xffff,
      byteCnt: syndrome ? 0 : byteCnt, immInvalPkey: imm >>> 0, syndrome, se: se && syndrome === 0,
    });
  }

  private ack(a: Pick<RcResponse, 'kind' | 'data' | 'dataBuf'>): void {
    const m = this.m!;
    this.answer = { dstHca: m.srcHca, dstQpn: m.srcQpn, seq: m.seq, ...a };
    this.state.setNow(this.cqes.length > 0 ? CQE : ANSWER);
  }

  private nak(k: RcNak): void {
    const m = this.m!;
    this.rNak.set(['ACCESS', 'INV_REQ', 'REM_OP', 'RNR'].indexOf(k) + 1);
    if (k === 'RNR') this.sRnr.inc();
    else this.sNaks.inc();
    this.answer = { dstHca: m.srcHca, dstQpn: m.srcQpn, seq: m.seq, kind: 'NAK', nak: k };
    this.state.setNow(this.cqes.length > 0 ? CQE : ANSWER);
  }

  /** An error that moves the responder's QP to ERR: a receive completion if any, then the NAK. */
  private fatal(k: RcNak, recvSyndrome: number | null): void {
    if (recvSyndrome !== null) this.recvCqe(CqeOpcode.RESP_ERR, recvSyndrome, 0, 0, false);
    this.hca.cmdif.hwError(this.qpn);
    this.queueFlush(this.qpn);
    this.nak(k);
  }

  private queueFlush(qpn: number): void {
    if (this.flushReq.canPush()) this.flushReq.push(qpn);
  }

  /** Posted receives of a QP in ERR complete WR_FLUSH_ERR. */
  private flush(): void {
    const qp = this.hca.cmdif.getQp(this.flushQpn);
    const rq = qp ? this.rq(this.flushQpn) : null;
    if (!qp || !rq || rq.ci >= rq.pi) {
      this.state.setNow(IDLE);
      return;
    }
    if (!this.cqWriter!.canPush()) return;
    this.cqWriter!.push({
      cqn: qp.recvCqn, opcode: CqeOpcode.RESP_ERR, qpn: qp.qpn, wqeOpcode: 0, wqeCounter: rq.ci & 0xffff,
      byteCnt: 0, immInvalPkey: 0, syndrome: CqeSyndrome.WR_FLUSH_ERR, se: false,
    });
    rq.ci++;
  }
}

/** Bytes of a receive WQE: 16 per SGE, a power of two (the list ends with the invalid lkey). */
export function rqStride(maxRecvSge: number): number {
  let s = 16;
  while (s < 16 * Math.max(1, maxRecvSge + 1)) s *= 2;
  return s;
}

function sumLen(sges: readonly { length: number }[], n: number): number {
  let t = 0;
  for (let i = 0; i < n; i++) t += sges[i].length;
  return t;
}

const EMPTY = new Uint8Array(0);
