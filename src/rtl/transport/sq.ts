/**
 * The send queue engine (`tb.hcaN.sq`): takes doorbells, fetches WQEs from the send queue
 * buffers in host memory by DMA (a WQEBB at a time, so a WQE may wrap the ring), parses them
 * and hands them to the UMR engine or the requester, one WQE at a time in order (so a REG_MR,
 * LOCAL_INV or BIND_MW is complete before any later WQE uses the key: the small fence holds).
 * It writes the requester's completions: always for errors, for successes when signaled. A QP
 * in ERR flushes: every WQE completes WR_FLUSH_ERR without touching memory. A destroyed QP
 * (DESTROY_QP) is forgotten: its doorbells are ignored, and a WQE of it in progress finishes its
 * current step (DMA reads, the engine's job) and is then dropped without a completion.
 *
 * RDMA_READ_WITH_INV (model-private encoding, formats/constants.ts WQE_OPMOD_READ_WITH_INV; only
 * with config.readWithInvalidate): the requester completes the read, then the engine hands the
 * UMR engine a LOCAL_INV WQE for the key in imm (state INVALIDATE), so the invalidation takes a
 * UMR's time and keeps the mkey cache coherent; then the CQE: opcode RDMA_READ, or
 * LOC_QP_OP_ERR when the LOCAL_INV rules fail (spec/semantics.md "Work requests").
 */
import { EnumType, Fifo, Module, type Reg, type Signal } from '../../sim/index.ts';
import type { Hca } from '../hca.ts';
import type { DmaPort } from '../memory/pcie.ts';
import type { CqeJob } from '../completion/cq_writer.ts';
import type { QpContext } from '../firmware/cmd_types.ts';
import type { ReqDone, ReqJob } from './requester.ts';
import type { UmrDone, UmrJob } from '../umr/umr_types.ts';
import { parseWqe } from '../formats/wqe_parse.ts';
import { CeMode, CqeOpcode, CqeSyndrome, WQE_OPMOD_READ_WITH_INV, WqeOpcode } from '../formats/constants.ts';
import { LOCAL_INV_WQE_BYTES, encodeLocalInvWqe } from '../umr/umr_ops.ts';

/** A send queue doorbell: the driver posted WQEBBs up to counter `pi`. */
export interface SqDoorbell {
  qpn: number;
  pi: number;
}

export const SqState = new EnumType('sq_state', ['IDLE', 'FETCH', 'WAIT_WQE', 'EXEC', 'WAIT_DONE', 'CQE', 'INVALIDATE']);
const IDLE = 0;
const FETCH = 1;
const WAIT_WQE = 2;
const EXEC = 3;
const WAIT_DONE = 4;
const CQE = 5;
/** RDMA_READ_WITH_INV: the read is done, the UMR engine invalidates the local key. */
const INVALIDATE = 6;

interface SqQp {
  qpn: number;
  /** The QP's firmware context (a live view), taken at its first doorbell. */
  ctx: Readonly<QpContext>;
  pi: number;
  ci: number;
  /** WQEs completed (executed or flushed). */
  done: number;
}

export class Sq extends Module {
  readonly doorbell: Fifo<SqDoorbell>;
  cqWriter: Fifo<CqeJob> | null = null;
  requester: { req: Fifo<ReqJob>; resp: Fifo<ReqDone> } | null = null;
  umr: { req: Fifo<UmrJob>; resp: Fifo<UmrDone> } | null = null;
  /** Where QPs moved to ERR are told (the responder flushes their receives). */
  flush: Fifo<number> | null = null;
  private readonly port: DmaPort;
  private readonly qps = new Map<number, SqQp>();
  private readonly ready: number[] = [];
  /** FSM state: changes at once (several steps may run in one edge), traced when it changes. */
  private readonly state: Signal;
  private readonly rQpn: Reg;
  private readonly rWqeIndex: Reg;
  private readonly rOpcode: Reg;
  private readonly rSyndrome: Reg;
  // the WQE in progress
  private cur: SqQp | null = null;
  /** The WQE being fetched (reused: the largest WQE is 16 WQEBBs). */
  private readonly bytes = new Uint8Array(64 * 16);
  private readonly views: (DataView | undefined)[] = new Array<DataView | undefined>(17).fill(undefined);
  private bbs = 0; // WQEBBs of the WQE
  private got = 0; // WQEBBs received
  private asked = 0;
  private cqe: CqeJob | null = null;
  /** RDMA_READ_WITH_INV in progress: the key to invalidate once the read is done, or -1. */
  private invKey = -1;
  /** Bytes the read placed (the CQE's byte_cnt after the invalidation). */
  private readLen = 0;
  /** The LOCAL_INV WQE of that invalidation (one at a time: reused). */
  private readonly invWqe = new Uint8Array(LOCAL_INV_WQE_BYTES);
  private readonly sWqes;
  private readonly sFlushed;
  private readonly sErrors;

  constructor(private readonly hca: Hca) {
    super(hca.sim, hca, 'sq');
    this.state = this.signal('state', SqState.width, { enum: SqState });
    this.rQpn = this.probe('qpn', 24);
    this.rWqeIndex = this.probe('wqe_index', 16);
    this.rOpcode = this.probe('opcode', 8);
    this.rSyndrome = this.probe('syndrome', 8);
    this.doorbell = new Fifo<SqDoorbell>(this, 'doorbell', { capacity: 16 });
    this.doorbell.consumer = this;
    this.port = hca.pcie.port('sq', { reqCapacity: 4, respCapacity: 16 });
    this.port.resp.consumer = this;
    this.port.req.producer = this;
    this.sWqes = this.stats.counter('wqes');
    this.sFlushed = this.stats.counter('flushed');
    this.sErrors = this.stats.counter('errors');
  }

  /** Work requests of a QP the engine has completed (what a driver learns from its CQ and doorbell record). */
  completedWqes(qpn: number): number {
    return this.qps.get(qpn)?.done ?? 0;
  }

  /**
   * DESTROY_QP executed: forget the QP (its number may be handed out again). A WQE of it in
   * progress is dropped when its current step is done (`gone`).
   */
  forgetQp(qpn: number): void {
    this.qps.delete(qpn);
    const i = this.ready.indexOf(qpn);
    if (i >= 0) this.ready.splice(i, 1);
  }

  /** The QP of `q` was destroyed since `q` was made. */
  private gone(q: SqQp): boolean {
    return this.qps.get(q.qpn) !== q;
  }

  /** Drops the WQE in progress of a destroyed QP: no completion, no error (its work is not completed). */
  private drop(): void {
    this.cqe = null;
    this.invKey = -1;
    this.state.setNow(CQE);
  }

  /** Wires the engines (after they exist). */
  connect(o: { cqWriter: Fifo<CqeJob>; requester: { req: Fifo<ReqJob>; resp: Fifo<ReqDone> }; umr: { req: Fifo<UmrJob>; resp: Fifo<UmrDone> } | null; flush: Fifo<number> }): void {
    this.cqWriter = o.cqWriter;
    this.requester = o.requester;
    this.umr = o.umr;
    this.flush = o.flush;
    o.requester.resp.consumer = this;
    o.requester.req.producer = this;
    if (o.umr) {
      o.umr.resp.consumer = this;
      o.umr.req.producer = this;
    }
  }

  override tick(): void {
    while (this.doorbell.canPop()) {
      const d = this.doorbell.pop();
      let q = this.qps.get(d.qpn);
      if (!q) {
        // a doorbell for a QP the firmware does not know (destroyed) is ignored
        const ctx = this.hca.cmdif.getQp(d.qpn);
        if (ctx === undefined) continue;
        this.qps.set(d.qpn, (q = { qpn: d.qpn, ctx, pi: 0, ci: 0, done: 0 }));
      }
      q.pi = d.pi;
      if (q !== this.cur && !this.ready.includes(d.qpn)) this.ready.push(d.qpn);
    }
    this.stepFsm(this.state);
  }

  protected override fsmStep(): void {
    switch (this.state.q) {
      case IDLE: {
        const qpn = this.ready.shift();
        if (qpn === undefined) return this.sleep();
        const q = this.qps.get(qpn)!;
        if (q.ci >= q.pi) return;
        this.cur = q;
        this.bbs = 1;
        this.got = 0;
        this.asked = 0;
        this.rQpn.set(qpn);
        this.state.setNow(FETCH);
        return;
      }
      case FETCH:
      case WAIT_WQE:
        return this.fetch();
      case EXEC:
        return this.exec();
      case WAIT_DONE:
        return this.waitDone();
      case INVALIDATE:
        return this.invalidate();
      case CQE:
        if (this.cqe !== null) {
          if (!this.cqWriter!.canPush()) return;
          this.cqWriter!.push(this.cqe);
          this.cqe = null;
        }
        return this.next();
    }
  }

  /** Reads the WQE a WQEBB at a time (the first tells its size). */
  private fetch(): void {
    const q = this.cur!;
    const qp = q.ctx;
    while (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      if (r.data !== this.bytes) this.bytes.set(r.data!, r.tag * 64);
      this.got++;
      if (r.tag === 0) {
        const ds = this.bytes[7] & 0x3f;
        this.bbs = Math.max(1, Math.ceil((ds * 16) / 64));
      }
    }
    if (this.asked < this.bbs && this.port.req.canPush() && (this.asked === 0 || this.got > 0)) {
      const idx = (q.ci + this.asked) & (qp.sqSize - 1);
      this.port.req.push({ kind: 'read', addr: qp.sqBufAddr + idx * 64, length: 64, tag: this.asked, dst: this.bytes, dstOff: this.asked * 64 });
      this.asked++;
      this.state.setNow(WAIT_WQE);
    }
    if (this.got === this.bbs && this.asked === this.bbs) this.state.setNow(EXEC);
    else if (this.asked === this.bbs || (this.asked > 0 && this.got === 0)) this.sleep(); // woken by the read data
  }

  private exec(): void {
    const q = this.cur!;
    const qp = q.ctx;
    if (this.gone(q)) return this.drop();
    // a view bounded by the WQE's basic blocks (the parser checks ds against it), one per size
    const view = this.views[this.bbs] ??= new DataView(this.bytes.buffer, 0, this.bbs * 64);
    const w = parseWqe(view, 0);
    this.rWqeIndex.set(w.ctrl.wqeIndex);
    this.rOpcode.set(w.ctrl.opcode);
    this.sWqes.inc();
    if (qp.state === 'ERR') {
      this.sFlushed.inc();
      return this.complete(CqeSyndrome.WR_FLUSH_ERR, 0);
    }
    this.invKey = -1;
    if (w.ctrl.opmod !== 0) {
      // opmod is defined only for this model's RDMA_READ_WITH_INV, and only when configured:
      // any other is an unknown operation, a local QP operation error
      if (w.kind !== 'rdma' || w.ctrl.opcode !== WqeOpcode.RDMA_READ || w.ctrl.opmod !== WQE_OPMOD_READ_WITH_INV || !this.hca.cfg.readWithInvalidate || !this.umr) {
        return this.complete(CqeSyndrome.LOCAL_QP_OP_ERR, 0);
      }
      this.invKey = w.ctrl.imm >>> 0;
    }
    switch (w.kind) {
      case 'nop':
        return this.complete(0, 0);
      case 'invalid':
        // a malformed WQE: the local QP operation error the hardware reports
        return this.complete(CqeSyndrome.LOCAL_QP_OP_ERR, 0);
      case 'umr':
        if (!this.umr) return this.complete(CqeSyndrome.LOCAL_QP_OP_ERR, 0);
        if (!this.umr.req.canPush()) return this.sleep();
        this.umr.req.push({ tag: q.ci, qpn: qp.qpn, pd: qp.pd, wqe: this.bytes.subarray(0, w.ctrl.ds * 16) }); // a view: the next fetch waits for this UMR's completion
        this.state.setNow(WAIT_DONE);
        return;
      default:
        if (!this.requester!.req.canPush()) return this.sleep();
        this.requester!.req.push({ tag: q.ci, qpn: qp.qpn, wqe: w });
        this.state.setNow(WAIT_DONE);
    }
  }

  private waitDone(): void {
    if (this.umr && this.umr.resp.canPop()) {
      const d = this.umr.resp.pop();
      return this.complete(d.syndrome, 0);
    }
    if (this.requester!.resp.canPop()) {
      const d = this.requester!.resp.pop();
      if (d.syndrome === 0 && this.invKey >= 0) {
        // the read data is placed: now the local invalidation (no CQE before it is done)
        this.readLen = d.byteLen;
        this.state.setNow(INVALIDATE);
        return;
      }
      return this.complete(d.syndrome, d.byteLen);
    }
    this.sleep(); // woken by the engine's completion
  }

  /** RDMA_READ_WITH_INV: a LOCAL_INV of the key through the UMR engine, then the CQE. */
  private invalidate(): void {
    const umr = this.umr!;
    if (this.invKey >= 0) {
      if (!umr.req.canPush()) return this.sleep(); // woken when the engine pops
      const q = this.cur!;
      const qp = q.ctx;
      if (this.gone(q)) return this.drop();
      encodeLocalInvWqe(this.invWqe, this.invKey, qp.qpn, q.ci & 0xffff);
      umr.req.push({ tag: q.ci, qpn: qp.qpn, pd: qp.pd, wqe: this.invWqe });
      this.invKey = -1;
      return;
    }
    if (!umr.resp.canPop()) return this.sleep(); // woken by the UMR completion
    const d = umr.resp.pop();
    this.complete(d.syndrome, d.syndrome === 0 ? this.readLen : 0);
  }

  /** The WQE is done: a CQE when signaled or in error; an error moves the QP to ERR. */
  private complete(syndrome: number, byteLen: number): void {
    const q = this.cur!;
    const qp = q.ctx;
    if (this.gone(q)) return this.drop();
    const ctrl = parseCtrl(this.bytes);
    this.rSyndrome.set(syndrome);
    if (syndrome !== 0) {
      this.sErrors.inc();
      if (qp.state !== 'ERR') {
        this.hca.cmdif.hwError(qp.qpn);
        if (this.flush!.canPush()) this.flush!.push(qp.qpn);
      }
    }
    const signaled = ctrl.ce === CeMode.CQ_UPDATE || ctrl.ce === CeMode.CQ_UPDATE_AND_EQE;
    this.cqe =
      syndrome !== 0 || signaled
        ? {
            cqn: qp.sendCqn,
            opcode: syndrome !== 0 ? CqeOpcode.REQ_ERR : CqeOpcode.REQ,
            qpn: qp.qpn,
            wqeOpcode: ctrl.opcode,
            wqeCounter: ctrl.wqeIndex,
            byteCnt: syndrome !== 0 ? 0 : ctrl.opcode === WqeOpcode.ATOMIC_CS || ctrl.opcode === WqeOpcode.ATOMIC_FA ? 8 : byteLen,
            immInvalPkey: 0,
            syndrome,
            se: false, // SE marks receive completions only
          }
        : null;
    q.ci += this.bbs;
    q.done++;
    this.state.setNow(CQE);
  }

  private next(): void {
    const q = this.cur!;
    this.cur = null;
    if (!this.gone(q) && q.ci < q.pi && !this.ready.includes(q.qpn)) this.ready.push(q.qpn);
    this.state.setNow(IDLE);
  }
}

function parseCtrl(b: Uint8Array): { opcode: number; wqeIndex: number; ce: number } {
  return { opcode: b[3], wqeIndex: (b[1] << 8) | b[2], ce: (b[11] >> 2) & 3 };
}
