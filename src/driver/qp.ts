/**
 * A queue pair (ibv_qp, RC): posts work requests by writing the exact mlx5 WQE bytes into the
 * send queue buffer in host memory and ringing the doorbell; posts receives likewise.
 */
import type { Pd } from './pd.ts';
import type { Cq } from './cq.ts';
import type { BindInfo, RecvWr, SendWr, WcOpcode } from './types.ts';
import { IbAccess } from './types.ts';
import { VerbsError, checkBool, checkObject, checkOperand64, checkU32, checkU53, checkWrId, shown } from './verbs_error.ts';
import { Mr } from './mr.ts';
import { Mw } from './mw.ts';
import { checkAccess, checkAccessBits } from './pd.ts';
import {
  buildAtomicWqe, buildBindMwWqe, buildLocalInvWqe, buildRdmaWqe, buildRegMrWqe, buildSendWqe, wqeBasicBlocks,
  type MrAccess, type Sge as WqeSge, encodeXltList, MAX_WQE_DS,
} from './wqe_builder.ts';
import { FenceMode, MLX5_INVALID_LKEY, WqeOpcode, incRkey } from '../rtl/formats/constants.ts';
import { decodeDataSeg, encodeDataSeg } from '../rtl/formats/data_seg.ts';
import { rqStride, rqWqeCount } from '../rtl/formats/rq_wqe.ts';
import type { Mtu } from '../rtl/config.ts';
import type { QpState } from '../rtl/firmware/cmd_types.ts';
import { driverAlloc, type DmaBuf } from './core/dma_pool.ts';
import { recvPostInfo, sendPostInfo } from './trace/txlog.ts';

/** ibv_qp_init_attr (RC). */
export interface QpInitAttr {
  sendCq: Cq;
  recvCq: Cq;
  maxSendWr?: number;
  maxRecvWr?: number;
  maxSendSge?: number;
  maxRecvSge?: number;
  /**
   * Bytes of inline data a work request may carry (ibv_qp_cap.max_inline_data), default 0. As
   * mlx5 does, the QP reports back what its WQE size really holds (`qp.attr.maxInlineData`, at
   * least what was asked), and postSend of more inline data than that is ENOMEM.
   */
  maxInlineData?: number;
  /**
   * A QP of a user process (ibv_create_qp through uverbs) instead of a kernel consumer's
   * (ib_create_qp, the default): mlx5_ib creates it without qpc.fre (fast registration
   * enabled), so it may not register memory by work request: postSend REG_MR is EINVAL, and a
   * REG_MR WQE written into its ring completes LOC_QP_OP_ERR (README "UMR privilege").
   * LOCAL_INV and memory-window binds work as on any QP.
   */
  userSpace?: boolean;
}

const GiB2 = 2 ** 31;
const NO_SGES: readonly WqeSge[] = [];
/** Control and remote-address segments, then the inline segment's 4-byte header. */
const INLINE_OVERHEAD = 16 + 16 + 4;
/** The inline data the largest WQE (ds 63) holds after them. */
const MAX_INLINE_DATA = MAX_WQE_DS * 16 - INLINE_OVERHEAD;

/**
 * Bytes of the largest WQE a send queue must hold, as mlx5's calc_send_wqe: control and remote
 * address (the atomic segment fits the same room with its one SGE), then maxSendSge data
 * segments or the inline data, in whole WQEBBs; at least 4 WQEBBs, the largest UMR this driver
 * writes (control, UMR control, mkey context, inline KLMs).
 */
export function sendWqeBytes(maxSendSge: number, maxInlineData: number): number {
  const bySge = 16 + 16 + 16 * maxSendSge;
  const byInline = maxInlineData > 0 ? INLINE_OVERHEAD + maxInlineData : 0;
  return Math.max(256, Math.ceil(Math.max(bySge, byInline) / 64) * 64);
}

const WC_OF: Record<string, WcOpcode> = {
  RDMA_WRITE: 'RDMA_WRITE', RDMA_WRITE_WITH_IMM: 'RDMA_WRITE', SEND: 'SEND', SEND_WITH_IMM: 'SEND', SEND_WITH_INV: 'SEND',
  RDMA_READ: 'RDMA_READ', RDMA_READ_WITH_INV: 'RDMA_READ', ATOMIC_CMP_AND_SWP: 'COMP_SWAP', ATOMIC_FETCH_AND_ADD: 'FETCH_ADD',
  LOCAL_INV: 'LOCAL_INV', REG_MR: 'REG_MR', BIND_MW: 'BIND_MW',
};

function mrAccess(a: number): MrAccess {
  return {
    localWrite: (a & IbAccess.LOCAL_WRITE) !== 0,
    remoteWrite: (a & IbAccess.REMOTE_WRITE) !== 0,
    remoteRead: (a & IbAccess.REMOTE_READ) !== 0,
    remoteAtomic: (a & IbAccess.REMOTE_ATOMIC) !== 0,
  };
}

export class Qp {
  /** The send queue buffer, for inspection: virtual address, WQEBBs, stride. */
  readonly sq: { addr: number; wqeCnt: number; stride: number };
  private sqPi = 0; // WQEBBs posted
  /** The producer counter last rung, and whether postSend rings once at the end of its list. */
  private sqRung = 0;
  private deferDoorbell = false;
  private posted = 0; // work requests posted
  /** Work requests known complete: up to the newest send CQE polled (it covers the unsignaled before it). */
  private sqDone = 0;
  private rqPi = 0;
  /** Receive WQEs consumed, as the receive CQEs polled tell (mlx5: the RQ tail moves in poll_cq). */
  private rqCi = 0;
  /** The driver's view of the QP's state: its modify commands, error completions, query(). */
  private swState: QpState = 'RESET';
  /** A connect of this QP (as either side) is in progress: its modify commands are under way. */
  private connecting = false;
  /** The fence the next WQE inherits (mlx5_ib qp->next_fence, libmlx5 fm_cache): see nextFenceAfter. */
  private nextFence: number = FenceMode.NONE;
  /** The work request behind each WQE index of the ring (slot = index & (wqeCnt - 1)): no map on the hot path. */
  private readonly sendWrId: (number | bigint)[];
  private readonly sendOp: (WcOpcode | undefined)[];
  /** The work request number (0, 1, ...) behind each ring slot's WQE, and where it ends (WQEBBs). */
  private readonly sendSeq: number[];
  private readonly sendEnd: number[];
  /** WQEBBs known free again: up to the end of the newest WQE a polled CQE completed. */
  private sqDoneBb = 0;
  private readonly recvRecs = new Map<number, number | bigint>();
  private readonly scratch = new Uint8Array(1024);
  private readonly scratchView = new DataView(this.scratch.buffer);
  private readonly rqBufVa: number;
  private readonly rqStride: number;
  destroyed = false;

  private constructor(
    readonly pd: Pd,
    readonly qpNum: number,
    readonly attr: Required<Omit<QpInitAttr, 'sendCq' | 'recvCq' | 'userSpace'>> & Pick<QpInitAttr, 'sendCq' | 'recvCq'> & { userSpace: boolean },
    /** The queues' buffer: the receive queue, then the send queue at `sqOffset`. */
    private readonly buf: DmaBuf,
    sqOffset: number,
    sqWqebbs: number,
    private readonly rqSize: number,
  ) {
    this.sq = { addr: buf.addr + sqOffset, wqeCnt: sqWqebbs, stride: 64 };
    this.sendWrId = new Array<number | bigint>(sqWqebbs).fill(0);
    this.sendOp = new Array<WcOpcode | undefined>(sqWqebbs).fill(undefined);
    this.sendSeq = new Array<number>(sqWqebbs).fill(0);
    this.sendEnd = new Array<number>(sqWqebbs).fill(0);
    this.rqBufVa = buf.addr;
    this.rqStride = rqStride(attr.maxRecvSge);
    attr.sendCq.qps.set(qpNum, this);
    attr.recvCq.qps.set(qpNum, this);
  }

  /** Creates the QP: queue buffers in host memory (physically contiguous), CREATE_QP. */
  static async create(pd: Pd, a: QpInitAttr, umr = false): Promise<Qp> {
    const ctx = pd.ctx;
    const dev = await ctx.queryDevice();
    if (a.userSpace !== undefined && typeof a.userSpace !== 'boolean') throw new VerbsError('EINVAL', `createQp: userSpace must be a boolean, got ${shown(a.userSpace)}`);
    // absent means the default; anything else (null included) is checked, never coerced
    const or = (v: number | undefined, d: number): number => (v === undefined ? d : v);
    const attr = {
      maxSendWr: or(a.maxSendWr, 64), maxRecvWr: or(a.maxRecvWr, 64), maxSendSge: or(a.maxSendSge, 4), maxRecvSge: or(a.maxRecvSge, 4),
      maxInlineData: or(a.maxInlineData, 0), sendCq: a.sendCq, recvCq: a.recvCq, userSpace: a.userSpace ?? false,
    };
    for (const [k, v, min, max] of [['maxSendWr', attr.maxSendWr, 1, dev.maxQpWr], ['maxRecvWr', attr.maxRecvWr, 1, dev.maxQpWr], ['maxSendSge', attr.maxSendSge, 1, dev.maxSge], ['maxRecvSge', attr.maxRecvSge, 1, dev.maxSge], ['maxInlineData', attr.maxInlineData, 0, MAX_INLINE_DATA]] as const) {
      if (!(Number.isInteger(v) && v >= min && v <= max)) throw new VerbsError('EINVAL', `createQp: ${k} must be in ${min}..${max}, got ${shown(v)}`);
    }
    // the ring holds maxSendWr WQEs of the largest size this QP may post (mlx5 calc_sq_size)
    const wqeBytes = sendWqeBytes(attr.maxSendSge, attr.maxInlineData);
    attr.maxInlineData = Math.min(wqeBytes, MAX_WQE_DS * 16) - INLINE_OVERHEAD;
    const sqWqebbs = pow2(attr.maxSendWr * (wqeBytes / 64));
    if (sqWqebbs > dev.maxQpWr) {
      throw new VerbsError('EINVAL', `createQp: maxSendWr ${attr.maxSendWr} needs a ring of ${sqWqebbs} WQEBBs (${wqeBytes / 64} per request), more than the device's ${dev.maxQpWr}`);
    }
    const rqSize = rqWqeCount(attr.maxRecvWr, attr.maxRecvSge);
    const stride = rqStride(attr.maxRecvSge);
    // one buffer, the receive queue first and the send queue after it (mlx5 qp.c), over
    // scattered 4 KiB pages the device reaches through the command's page list (pas)
    const rqBytes = rqSize * stride;
    const buf = ctx.dma.alloc(rqBytes + sqWqebbs * 64, 'createQp');
    let qpn: number;
    try {
      ({ qpn } = await ctx.cmd(
        ctx.cmdq.exec({
          op: 'CREATE_QP', pd: pd.pdn, sendCqn: a.sendCq.cqn, recvCqn: a.recvCq.cqn, sqSize: sqWqebbs, rqSize,
          maxSendSge: attr.maxSendSge, maxRecvSge: attr.maxRecvSge, pas: buf.pas, logPageSize: 0,
          // a kernel consumer's QP: fast registration enabled (mlx5_ib create_kernel_qp sets
          // qpc.fre); a user process's QP is created without it (create_user_qp)
          fre: !attr.userSpace,
          // the driver's own UMR QP (mlx5 MLX5_IB_QPT_REG_UMR): the engine keeps a slot for it
          ...(umr ? { umr } : {}),
        }),
        'createQp',
      ));
    } catch (e) {
      ctx.dma.release(buf);
      throw e;
    }
    const qp = new Qp(pd, qpn, attr, buf, rqBytes, sqWqebbs, rqSize);
    ctx.qps.set(qpn, qp);
    return qp;
  }

  /** The data segments of receive WQE `index` as posted (read back from the queue in host memory). */
  recvSges(index: number): { lkey: number; addr: number; length: number }[] {
    const host = this.pd.ctx.hca.host;
    const bytes = host.read(this.rqBufVa + (index & (this.rqSize - 1)) * this.rqStride, this.rqStride);
    const v = new DataView(bytes.buffer);
    const out: { lkey: number; addr: number; length: number }[] = [];
    for (let off = 0; off + 16 <= bytes.length; off += 16) {
      const d = decodeDataSeg(v, off);
      if (d.lkey === MLX5_INVALID_LKEY) break;
      out.push({ lkey: d.lkey, addr: d.addr, length: d.byteCount === 0 ? GiB2 : d.byteCount });
    }
    return out;
  }

  /**
   * 'RESET' | 'INIT' | 'RTR' | 'RTS' | 'ERR', as the driver knows it: from its modify commands
   * and the error completions it has polled (a QP the hardware moved to ERR with no completion,
   * e.g. a responder after a remote access error, shows here after `query()`).
   */
  get state(): QpState {
    return this.swState;
  }

  /**
   * ibv_query_qp: the hardware's view of the QP (QUERY_QP, 0x50b): state, peer, path MTU,
   * timeouts, initiator depth. Updates `state`.
   */
  async query(): Promise<{ state: QpState; remoteQpn: number; mtu: number; timeout: number; retryCnt: number; rnrRetry: number; maxRdAtomic: number }> {
    this.checkAlive('query');
    this.pd.ctx.tb.checkInRun('query');
    const ctx = this.pd.ctx;
    const q = await ctx.cmd(ctx.cmdq.exec({ op: 'QUERY_QP', qpn: this.qpNum }), 'query');
    this.swState = q.state;
    return { state: q.state, remoteQpn: q.remoteQpn, mtu: q.mtu, timeout: q.timeout, retryCnt: q.retryCnt, rnrRetry: q.rnrRetry, maxRdAtomic: q.maxRdAtomic };
  }

  /** @internal An error completion of this QP was polled: the QP is in ERR. */
  sawError(): void {
    this.swState = 'ERR';
  }

  /**
   * RC connection: RESET -> INIT -> RTR -> RTS on both sides (the peer may be on another adapter).
   * `maxRdAtomic`: RDMA READs and atomics each side may have outstanding (ibv_qp_attr
   * max_rd_atomic; a power of two in 1..128, the QPC's 3-bit log_sra_max), default 16.
   */
  async connect(peer: Qp, opts: { mtu?: Mtu; maxRdAtomic?: number } = {}): Promise<void> {
    this.checkAlive('connect');
    this.pd.ctx.tb.checkInRun('connect');
    if (!(peer instanceof Qp)) throw new VerbsError('EINVAL', `connect: the peer must be a QP, got ${peer === null ? 'null' : typeof peer}`);
    peer.checkAlive('connect (peer)');
    checkObject('connect: options', opts);
    if (peer === this) throw new VerbsError('EINVAL', 'connect: a QP cannot be its own peer (connect two QPs, on one adapter or two)');
    if (peer.pd.ctx.tb !== this.pd.ctx.tb) throw new VerbsError('EINVAL', 'connect: the peer QP belongs to another Testbed (no link joins them)');
    if (this.connecting || peer.connecting) {
      throw new VerbsError('EBUSY', `connect: a connect of ${this.connecting ? 'this QP' : 'the peer QP'} is already in progress`);
    }
    if (this.swState !== 'RESET' || peer.swState !== 'RESET') {
      throw new VerbsError('EINVAL', `connect: both QPs must be in RESET (this one is ${this.swState}, the peer ${peer.swState})`);
    }
    const mtu = opts.mtu === undefined ? this.pd.ctx.hca.cfg.mtu : opts.mtu;
    if (!([256, 512, 1024, 2048, 4096] as unknown[]).includes(mtu)) throw new VerbsError('EINVAL', `connect: mtu ${String(mtu)} is not an IB MTU (256, 512, 1024, 2048, 4096)`);
    const maxRdAtomic = opts.maxRdAtomic === undefined ? 16 : opts.maxRdAtomic;
    if (!Number.isSafeInteger(maxRdAtomic) || maxRdAtomic < 1 || maxRdAtomic > 128 || (maxRdAtomic & (maxRdAtomic - 1)) !== 0) {
      throw new VerbsError('EINVAL', `connect: maxRdAtomic ${String(maxRdAtomic)} must be a power of two in 1..128 (log_sra_max is 3 bits)`);
    }
    // the checks above and the commands below are one step to other callers: a second connect
    // of either QP while these commands are under way is refused before it sends any, instead of
    // failing half-way and leaving its own QP in INIT
    this.connecting = peer.connecting = true;
    try {
      await this.modifyToRts(peer, mtu, maxRdAtomic);
    } finally {
      this.connecting = peer.connecting = false;
    }
  }

  /** RST2INIT, INIT2RTR, RTR2RTS on both QPs (connect's commands). */
  private async modifyToRts(peer: Qp, mtu: Mtu, maxRdAtomic: number): Promise<void> {
    const sides: [Qp, Qp][] = [[this, peer], [peer, this]];
    for (const [q] of sides) {
      const c = q.pd.ctx;
      await c.cmd(c.cmdq.exec({ op: 'RST2INIT_QP', qpn: q.qpNum, accessFlags: 15 }), 'connect');
      q.swState = 'INIT';
    }
    for (const [q, p] of sides) {
      const c = q.pd.ctx;
      await c.cmd(c.cmdq.exec({ op: 'INIT2RTR_QP', qpn: q.qpNum, remoteQpn: p.qpNum, remoteHca: p.pd.ctx.index, mtu }), 'connect');
      q.swState = 'RTR';
    }
    for (const [q] of sides) {
      const c = q.pd.ctx;
      await c.cmd(c.cmdq.exec({ op: 'RTR2RTS_QP', qpn: q.qpNum, maxRdAtomic }), 'connect');
      q.swState = 'RTS';
    }
  }

  /** ibv_post_send: synchronous; the first bad work request throws (those before it stay posted). */
  postSend(wr: SendWr | readonly SendWr[]): void {
    this.pd.ctx.tb.checkInRun('postSend');
    this.pd.ctx.tb.workPosted();
    checkObject('postSend: the work request', wr);
    const list = Array.isArray(wr) ? (wr as readonly SendWr[]) : [wr as SendWr];
    // one doorbell for the whole list, after its last WQE (libmlx5's mlx5_post_send rings once),
    // also when a request fails: those before it stay posted
    this.deferDoorbell = true;
    try {
      list.forEach((w, i) => {
        try {
          this.postOne(w);
        } catch (e) {
          if (e instanceof VerbsError && list.length > 1) throw new VerbsError(e.errno, `${e.message.replace(/^\w+: /, '')} (work request ${i})`);
          throw e;
        }
      });
    } finally {
      this.deferDoorbell = false;
      this.ringDoorbell();
    }
  }

  /** Rings the send queue's doorbell with the producer counter, if WQEs were written since. */
  private ringDoorbell(): void {
    if (this.sqRung === this.sqPi) return;
    this.sqRung = this.sqPi;
    this.pd.ctx.hca.uar.ringSq(this.qpNum, this.sqPi);
  }

  /** ibv_bind_mw (type 1): returns the new rkey (incRkey) and sets mw.rkey at once. */
  bindMw(mw: Mw, bind: BindInfo, opts: { wrId?: number | bigint; signaled?: boolean } = {}): number {
    this.pd.ctx.tb.checkInRun('bindMw');
    this.pd.ctx.tb.workPosted();
    this.checkAlive('bindMw');
    if (!(mw instanceof Mw)) throw new VerbsError('EINVAL', `bindMw: the window must be a memory window (pd.allocMw), got ${mw === null ? 'null' : typeof mw}`);
    checkObject('bindMw: options', opts);
    if (opts.wrId !== undefined) checkWrId('bindMw: wrId', opts.wrId);
    checkBool('bindMw: signaled', opts.signaled);
    mw.checkAlive('bindMw');
    this.sameDevice(mw.pd.ctx, 'bindMw: the window');
    checkObject('bindMw: bind', bind);
    checkU53('bindMw: addr', bind.addr);
    checkU53('bindMw: length', bind.length);
    if (bind.mr !== null && !(bind.mr instanceof Mr)) throw new VerbsError('EINVAL', `bindMw: mr must be an MR or null, got ${typeof bind.mr}`);
    checkAccessBits(bind.access, 'bindMw');
    if (bind.mr) this.sameDevice(bind.mr.pd.ctx, 'bindMw: the MR');
    if (mw.type !== 1) throw new VerbsError('EINVAL', 'bindMw: the verb binds type-1 windows; post BIND_MW for type 2');
    if (bind.mr === null && bind.length !== 0) throw new VerbsError('EINVAL', 'bindMw: no MR but length != 0');
    if (bind.mr && bind.mr.destroyed) throw new VerbsError('EINVAL', 'bindMw: the MR was deregistered');
    if (bind.mr && bind.mr.pd !== mw.pd) throw new VerbsError('EPERM', "bindMw: the window's PD differs from the MR's");
    if ((bind.access & IbAccess.ZERO_BASED) !== 0) throw new VerbsError('EINVAL', 'bindMw: ZERO_BASED windows are not supported for type 1');
    // the software view (regMr's access, or the last REG_MR posted): the device's is not known yet
    if (bind.mr && (bind.mr.regAccess & IbAccess.ZERO_BASED) !== 0) throw new VerbsError('EINVAL', 'bindMw: the MR is zero-based');
    const newRkey = incRkey(mw.rkey);
    this.postOne({ wrId: opts.wrId ?? 0, opcode: 'BIND_MW', signaled: opts.signaled ?? true, mw, rkey: newRkey, bindInfo: bind }, true);
    return newRkey;
  }

  /** ibv_post_recv */
  postRecv(wr: RecvWr | readonly RecvWr[]): void {
    this.pd.ctx.tb.checkInRun('postRecv');
    this.pd.ctx.tb.workPosted();
    checkObject('postRecv: the work request', wr);
    const list = Array.isArray(wr) ? (wr as readonly RecvWr[]) : [wr as RecvWr];
    const ctx = this.pd.ctx;
    for (const w of list) {
      this.checkAlive('postRecv');
      checkObject('postRecv: the work request', w);
      checkWrId('postRecv: wrId', w.wrId);
      if (!Array.isArray(w.sgList)) throw new VerbsError('EINVAL', 'postRecv: sgList must be an array');
      w.sgList.forEach((s, i) => {
        checkObject(`postRecv: SGE ${i}`, s);
        checkU53(`postRecv: SGE ${i} addr`, s.addr);
        // no coercion: a length of 2 GiB or more is refused, not cut to 2 GiB
        if (!(Number.isSafeInteger(s.length) && s.length >= 0 && s.length < GiB2)) throw new VerbsError('EINVAL', `postRecv: SGE ${i} length must be an integer in 0 .. 2 GiB - 1, got ${shown(s.length)}`);
        checkU32(`postRecv: SGE ${i} lkey`, s.lkey);
      });
      if (this.state === 'RESET') throw new VerbsError('EINVAL', 'postRecv: the QP is in RESET');
      if (w.sgList.length > this.attr.maxRecvSge) throw new VerbsError('EINVAL', `postRecv: ${w.sgList.length} SGEs > maxRecvSge ${this.attr.maxRecvSge}`);
      if (this.rqPi - this.rqCi >= Math.min(this.rqSize, this.attr.maxRecvWr)) {
        throw new VerbsError('ENOMEM', 'postRecv: receive queue full');
      }
      const buf = new Uint8Array(this.rqStride);
      const v = new DataView(buf.buffer);
      let off = 0;
      for (const s of w.sgList) {
        if (s.length === 0) continue;
        encodeDataSeg(v, off, { byteCount: s.length >= GiB2 ? 0 : s.length, inline: false, lkey: s.lkey >>> 0, addr: s.addr });
        off += 16;
      }
      if (off < this.rqStride) encodeDataSeg(v, off, { byteCount: 0, inline: false, lkey: MLX5_INVALID_LKEY, addr: 0 });
      ctx.hca.host.write(this.rqBufVa + (this.rqPi & (this.rqSize - 1)) * this.rqStride, buf);
      this.recvRecs.set(this.rqPi & 0xffff, w.wrId);
      if (ctx.tb.txlog !== null) ctx.tb.txlog.postedRecv(ctx.index, this.qpNum, this.rqPi, recvPostInfo(w));
      this.rqPi++;
      ctx.hca.uar.ringRq(this.qpNum, this.rqPi);
    }
  }

  /** @internal The work request of a send CQE (which completes every earlier one too). */
  takeSendRecord(wqeIndex: number): { wrId: number | bigint; opcode: WcOpcode } | undefined {
    const slot = wqeIndex & (this.sq.wqeCnt - 1);
    if (this.sendSeq[slot] + 1 > this.sqDone) this.sqDone = this.sendSeq[slot] + 1;
    if (this.sendEnd[slot] > this.sqDoneBb) this.sqDoneBb = this.sendEnd[slot];
    const opcode = this.sendOp[slot];
    if (opcode === undefined) return undefined;
    this.sendOp[slot] = undefined;
    return { wrId: this.sendWrId[slot], opcode };
  }

  /** @internal The wrId of a receive CQE (its counter is the receive WQE's, 16 bits). */
  takeRecvRecord(counter: number): number | bigint | undefined {
    this.rqCi += ((counter - this.rqCi) & 0xffff) + 1;
    const r = this.recvRecs.get(counter);
    this.recvRecs.delete(counter);
    return r;
  }

  /** Any call on a destroyed object: EINVAL (spec/semantics.md "Verbs calls"). */
  checkAlive(what: string): void {
    if (this.destroyed) throw new VerbsError('EINVAL', `${what}: the QP was destroyed`);
  }

  /**
   * An object of another adapter (or another testbed) is refused (EINVAL): its keys and
   * physical addresses mean nothing here, and a UMR with them would rewrite this adapter's mkey
   * of the same index with another host's addresses.
   */
  private sameDevice(ctx: unknown, what: string): void {
    if (ctx !== this.pd.ctx) throw new VerbsError('EINVAL', `${what} belongs to another device context (adapter) than the QP`);
  }

  /**
   * ibv_destroy_qp: DESTROY_QP (0x501). The hardware forgets the QP (doorbells ignored, messages
   * to it dropped, so the peer's requester times out); its outstanding work never completes: its
   * CQEs are cleaned from its CQs (rdma-core mlx5_destroy_qp -> __mlx5_cq_clean). Type-2 windows
   * bound to it stay bound (IBTA does not unbind them; rxe keeps the window's QP reference), so
   * their rkeys stop working for every other QP but are not FREE.
   */
  async destroy(): Promise<void> {
    this.checkAlive('destroy');
    this.pd.ctx.tb.checkInRun('destroy');
    if (this.connecting) throw new VerbsError('EBUSY', 'destroy: a connect of this QP is in progress (await it first)');
    await this.removeHw();
  }

  /** @internal DESTROY_QP; also the device's removal (Context.disassociate). False (nothing done) while a connect is in progress. */
  async removeHw(): Promise<boolean> {
    if (this.destroyed) return true;
    if (this.connecting) return false;
    this.destroyed = true;
    this.pd.ctx.qps.delete(this.qpNum);
    this.attr.sendCq.qps.delete(this.qpNum);
    this.attr.recvCq.qps.delete(this.qpNum);
    const ctx = this.pd.ctx;
    this.pd.untrack(this);
    await ctx.cmd(ctx.cmdq.exec({ op: 'DESTROY_QP', qpn: this.qpNum }), 'destroy');
    // the device forgot the QP: its rings and UMR descriptor lists serve later QPs
    ctx.dma.release(this.buf);
    for (const d of this.descLent) ctx.descFree.push({ addr: d.addr, cap: d.cap });
    for (const d of this.descFree) ctx.descFree.push(d);
    this.descLent.length = 0;
    this.descFree.length = 0;
    this.sendWrId.fill(0);
    this.recvRecs.clear();
    return true;
  }

  private postOne(w: SendWr, fromBindVerb = false): void {
    this.checkAlive('postSend');
    checkObject('postSend: the work request', w);
    this.pd.ctx.tb.checkInRun('postSend');
    const st = this.state;
    if (st !== 'RTS' && st !== 'ERR') throw new VerbsError('EINVAL', `postSend: the QP is in ${st} (needs RTS)`);
    const inFlight = this.posted - this.sqDone;
    if (inFlight >= this.attr.maxSendWr) throw new VerbsError('ENOMEM', 'postSend: send queue full');
    const view = this.scratchView;
    const wqeIndex = this.sqPi & 0xffff;
    const fence = this.fenceOf(w);
    // a plain READ or WRITE (the hot path) builds its parameters itself: no objects for them
    const plain = (w.opcode === 'RDMA_READ' || w.opcode === 'RDMA_WRITE') && !w.inline;
    const common = plain ? null : { wqeIndex, qpn: this.qpNum, signaled: w.signaled ?? false, solicited: w.solicited ?? false, fence };
    // the user's SGEs are used as they are (no copy on the hot path), after checking them
    checkWrId('postSend: wrId', w.wrId);
    checkBool('postSend: signaled', w.signaled);
    checkBool('postSend: fence', w.fence);
    checkBool('postSend: solicited', w.solicited);
    checkBool('postSend: inline', w.inline);
    // absent means none; null or anything else that is not a list is refused
    const sg: readonly WqeSge[] = w.sgList === undefined ? NO_SGES : w.sgList;
    if (!Array.isArray(sg)) throw new VerbsError('EINVAL', `postSend: sgList must be an array, got ${sg === null ? 'null' : typeof sg}`);
    if (sg.length > this.attr.maxSendSge) throw new VerbsError('EINVAL', `postSend: ${sg.length} SGEs > maxSendSge ${this.attr.maxSendSge}`);
    for (let i = 0; i < sg.length; i++) {
      const s = sg[i];
      checkObject(`postSend: SGE ${i}`, s);
      checkU53(`postSend: SGE ${i} addr`, s.addr);
      if (!(Number.isSafeInteger(s.length) && s.length >= 0 && s.length <= GiB2)) throw new VerbsError('EINVAL', `postSend: SGE ${i} length must be an integer in 0 .. 2 GiB, got ${shown(s.length)}`);
      if (!(Number.isInteger(s.lkey) && s.lkey >= 0 && s.lkey < 2 ** 32)) throw new VerbsError('EINVAL', `postSend: lkey ${s.lkey} is not a 32-bit key`);
    }
    if (w.remoteAddr !== undefined) checkU53('postSend: remoteAddr', w.remoteAddr);
    if (w.rkey !== undefined) checkU32('postSend: rkey', w.rkey);
    if (w.compareAdd !== undefined) checkOperand64('postSend: compareAdd', w.compareAdd);
    if (w.swap !== undefined) checkOperand64('postSend: swap', w.swap);
    if (w.immData !== undefined) checkU32('postSend: immData', w.immData);
    if (w.invalidateRkey !== undefined) checkU32('postSend: invalidateRkey', w.invalidateRkey);
    if ((w.opcode === 'LOCAL_INV' || w.opcode === 'SEND_WITH_INV') && w.invalidateRkey === undefined) {
      throw new VerbsError('EINVAL', `postSend: ${w.opcode} needs invalidateRkey`);
    }
    if (w.inline) {
      // as libmlx5's set_data_inl_seg: more than the QP's max_inline_data is ENOMEM
      const bytes = sg.reduce((n, e) => n + e.length, 0);
      if (bytes > this.attr.maxInlineData) {
        throw new VerbsError('ENOMEM', `postSend: ${bytes} bytes of inline data exceed the QP's maxInlineData ${this.attr.maxInlineData} (createQp's maxInlineData, at most ${MAX_INLINE_DATA})`);
      }
    }
    const data = plain ? null : w.inline ? { inlineData: this.inlineBytes(sg) } : { sgList: sg };
    let ds: number;
    try {
      ds = this.build(view, w, common, sg, data, fence, wqeIndex, fromBindVerb);
    } catch (e) {
      // a field the WQE cannot hold that no check above named: still the caller's argument
      if (e instanceof RangeError) throw new VerbsError('EINVAL', `postSend: ${e.message}`);
      throw e;
    }
    if (w.opcode === 'BIND_MW') {
      w.mw!.rkey = (w.rkey ?? 0) >>> 0;
      // the ODP fault handler resolves the window to its MR (mlx5 walks the window's KLM)
      const b = w.bindInfo!;
      this.pd.ctx.odp.windowBound(w.mw!.rkey, b.length > 0 ? b.mr : null, (b.access & IbAccess.ZERO_BASED) !== 0 ? 0 : b.addr, b.addr, b.length);
    }
    this.ring(ds, w.wrId, WC_OF[w.opcode], w);
    this.nextFence = this.nextFenceAfter(w.opcode);
  }

  /**
   * The fence mode of a work request's control segment, as the driver that posts it chooses:
   * - a kernel QP as mlx5_ib wr.c:1107-1119 (mlx5_ib_post_send): REG_MR carries the device's
   *   umr_fence (dev->umr_fence, Context.umrFence); any other work request IB_SEND_FENCE as
   *   SMALL_AND_FENCE when the WQE before it left the small fence (qp->next_fence), else FENCE;
   *   without it, qp->next_fence (INITIATOR_SMALL right after a REG_MR, else none: a LOCAL_INV
   *   carries none of its own);
   * - a user-space QP as libmlx5 (rdma-core providers/mlx5/qp.c:858-862, _mlx5_post_send):
   *   IBV_SEND_FENCE is MLX5_WQE_CTRL_FENCE, which is 4 << 5, SMALL_AND_FENCE
   *   (providers/mlx5/mlx5dv.h:1272); without it, the fence left by the WQE before.
   */
  private fenceOf(w: SendWr): number {
    if (this.attr.userSpace) return w.fence ? FenceMode.SMALL_AND_FENCE : this.nextFence;
    if (w.opcode === 'REG_MR') return this.pd.ctx.umrFence;
    if (w.fence) return this.nextFence !== FenceMode.NONE ? FenceMode.SMALL_AND_FENCE : FenceMode.FENCE;
    return this.nextFence;
  }

  /**
   * The fence the next work request inherits (qp->next_fence): INITIATOR_SMALL after a REG_MR
   * (wr.c:1110), so the WQE after it cannot use the key before the registration is done, and
   * after a BIND_MW (libmlx5 qp.c:920: the kernel posts no binds, so its rule is libmlx5's);
   * after a LOCAL_INV only on a user-space QP (libmlx5 qp.c:936; the kernel's next_fence is 0,
   * wr.c:1068, 1184); none after anything else.
   */
  private nextFenceAfter(opcode: SendWr['opcode']): number {
    if (opcode === 'REG_MR' || opcode === 'BIND_MW') return FenceMode.INITIATOR_SMALL;
    if (opcode === 'LOCAL_INV' && this.attr.userSpace) return FenceMode.INITIATOR_SMALL;
    return FenceMode.NONE;
  }

  /** Writes the WQE of `w` into the scratch buffer; returns its ds. */
  private build(
    view: DataView, w: SendWr, c: { wqeIndex: number; qpn: number; signaled: boolean; solicited: boolean; fence: number } | null,
    sg: readonly WqeSge[], d: { inlineData?: Uint8Array; sgList?: readonly WqeSge[] } | null, fence: number, wqeIndex: number, fromBindVerb: boolean,
  ): number {
    // null only for a plain READ or WRITE, whose branch below does not read them
    const common = c!;
    const data = d!;
    const ctx = this.pd.ctx;
    const compareAdd = w.compareAdd === undefined ? 0n : checkOperand64('postSend: compareAdd', w.compareAdd);
    const swap = w.swap === undefined ? 0n : checkOperand64('postSend: swap', w.swap);
    let ds: number;
    switch (w.opcode) {
      case 'RDMA_WRITE':
      case 'RDMA_READ':
        // the most common work requests: parameters built without object spreads
        ds = w.opcode === 'RDMA_WRITE' && w.inline
          ? buildRdmaWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, inlineData: data.inlineData!, opcode: WqeOpcode.RDMA_WRITE, remoteAddr: w.remoteAddr ?? 0, rkey: (w.rkey ?? 0) >>> 0 })
          : buildRdmaWqe(view, 0, {
              wqeIndex, qpn: this.qpNum, signaled: w.signaled ?? false, solicited: w.solicited ?? false, fence, sgList: sg,
              opcode: w.opcode === 'RDMA_WRITE' ? WqeOpcode.RDMA_WRITE : WqeOpcode.RDMA_READ,
              remoteAddr: w.remoteAddr ?? 0, rkey: (w.rkey ?? 0) >>> 0,
            });
        break;
      case 'RDMA_WRITE_WITH_IMM':
        ds = buildRdmaWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, inlineData: data.inlineData, sgList: data.sgList, opcode: WqeOpcode.RDMA_WRITE_IMM, immData: (w.immData ?? 0) >>> 0, remoteAddr: w.remoteAddr ?? 0, rkey: (w.rkey ?? 0) >>> 0 });
        break;
      case 'SEND':
        ds = buildSendWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, inlineData: data.inlineData, sgList: data.sgList, opcode: WqeOpcode.SEND });
        break;
      case 'SEND_WITH_IMM':
        ds = buildSendWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, inlineData: data.inlineData, sgList: data.sgList, opcode: WqeOpcode.SEND_IMM, immData: (w.immData ?? 0) >>> 0 });
        break;
      case 'SEND_WITH_INV':
        ds = buildSendWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, inlineData: data.inlineData, sgList: data.sgList, opcode: WqeOpcode.SEND_INVAL, invalidateRkey: (w.invalidateRkey ?? 0) >>> 0 });
        break;
      case 'RDMA_READ_WITH_INV':
        // iWARP-only: mlx5 has no opcode for it; a model-private encoding when configured (constants.ts)
        if (!ctx.hca.cfg.readWithInvalidate) {
          throw new VerbsError('EOPNOTSUPP', 'postSend: RDMA_READ_WITH_INV is iWARP-only; mlx5 has no opcode for it (config.readWithInvalidate is off)');
        }
        if (w.invalidateRkey === undefined) throw new VerbsError('EINVAL', 'postSend: RDMA_READ_WITH_INV needs invalidateRkey');
        ds = buildRdmaWqe(view, 0, {
          wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, sgList: sg, opcode: WqeOpcode.RDMA_READ, remoteAddr: w.remoteAddr ?? 0, rkey: (w.rkey ?? 0) >>> 0,
          invalidateRkey: w.invalidateRkey >>> 0,
        });
        break;
      case 'ATOMIC_CMP_AND_SWP':
      case 'ATOMIC_FETCH_AND_ADD': {
        const total = sg.reduce((a, s) => a + s.length, 0);
        if (total !== 8) throw new VerbsError('EINVAL', `postSend: an atomic's local SGL must total 8 bytes, got ${shown(total)}`);
        const remoteAddr = w.remoteAddr ?? 0;
        const rkey = (w.rkey ?? 0) >>> 0;
        ds = w.opcode === 'ATOMIC_CMP_AND_SWP'
          ? buildAtomicWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, remoteAddr, rkey, sgList: sg, opcode: WqeOpcode.ATOMIC_CS, compare: compareAdd, swap })
          : buildAtomicWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, remoteAddr, rkey, sgList: sg, opcode: WqeOpcode.ATOMIC_FA, add: compareAdd });
        break;
      }
      case 'LOCAL_INV':
        ds = buildLocalInvWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, key: (w.invalidateRkey ?? 0) >>> 0 });
        break;
      case 'REG_MR':
        ds = this.regMrWqe(view, common, w);
        break;
      case 'BIND_MW':
        ds = this.bindMwWqe(view, common, w, fromBindVerb);
        break;
      default:
        throw new VerbsError('EINVAL', `postSend: unknown opcode ${String(w.opcode)}`);
    }
    return ds;
  }

  /** Copies the WQE built in `scratch` into the ring (a WQEBB at a time: it may wrap), rings the doorbell. */
  private ring(ds: number, wrId: number | bigint, opcode: WcOpcode, w: SendWr | null = null): void {
    const ctx = this.pd.ctx;
    const n = wqeBasicBlocks(ds);
    // the ring holds WQEBBs, not requests: a long WQE (many SGEs, inline data) takes up to 16
    if (this.sqPi + n - this.sqDoneBb > this.sq.wqeCnt) {
      throw new VerbsError('ENOMEM', `postSend: send queue full (the ring has ${this.sq.wqeCnt - (this.sqPi - this.sqDoneBb)} free WQEBBs, the WQE needs ${n})`);
    }
    const host = ctx.hca.host;
    const first = this.sqPi & (this.sq.wqeCnt - 1);
    // WQEBBs that do not wrap are contiguous in the ring: one copy (the same bytes in the same place)
    if (first + n <= this.sq.wqeCnt) host.writeFrom(this.sq.addr + first * 64, this.scratch, 0, n * 64);
    else for (let b = 0; b < n; b++) host.writeFrom(this.sq.addr + ((this.sqPi + b) & (this.sq.wqeCnt - 1)) * 64, this.scratch, b * 64, 64);
    const slot = this.sqPi & (this.sq.wqeCnt - 1);
    this.sendWrId[slot] = wrId;
    this.sendOp[slot] = opcode;
    this.sendSeq[slot] = this.posted;
    this.sendEnd[slot] = this.sqPi + n;
    if (ctx.tb.txlog !== null) ctx.tb.txlog.postedSend(ctx.index, this.qpNum, this.sqPi & 0xffff, sendPostInfo(w, wrId, opcode));
    this.sqPi += n;
    this.posted++;
    if (!this.deferDoorbell) this.ringDoorbell();
  }

  /**
   * @internal The driver's own UMR work (the mkey pool): `build` writes a WQE into the scratch
   * buffer given the control fields; it is posted signaled like any work request.
   */
  postBuilt(wrId: number, opcode: WcOpcode, build: (view: DataView, common: { wqeIndex: number; qpn: number; signaled: boolean; fence: number }) => number): void {
    this.checkAlive('postSend');
    // mlx5r_umr_post_send (umr.c:273-274) posts every UMR with the initiator-small fence
    const ds = build(this.scratchView, { wqeIndex: this.sqPi & 0xffff, qpn: this.qpNum, signaled: true, fence: FenceMode.INITIATOR_SMALL });
    this.ring(ds, wrId, opcode);
  }

  private inlineBytes(sg: readonly WqeSge[]): Uint8Array {
    const host = this.pd.ctx.hca.host;
    const parts = sg.map((s) => {
      if (!host.inVma(s.addr, s.length)) throw new VerbsError('EFAULT', `postSend: inline data at 0x${s.addr.toString(16)} is not mapped`);
      host.faultIn(s.addr, s.length); // the CPU's copy touches the pages (a dropped one comes back zeroed)
      return host.read(s.addr, s.length);
    });
    const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
    let o = 0;
    for (const p of parts) { out.set(p, o); o += p.length; }
    return out;
  }

  private regMrWqe(view: DataView, common: { wqeIndex: number; qpn: number; signaled: boolean; solicited: boolean; fence: number }, w: SendWr): number {
    const mr = w.mr;
    if (!(mr instanceof Mr)) throw new VerbsError('EINVAL', `postSend: REG_MR needs \`mr\`, an MR (pd.allocMr), got ${mr === null ? 'null' : typeof mr}`);
    if (w.key !== undefined) checkU32('postSend: REG_MR key', w.key);
    mr.checkAlive('postSend REG_MR');
    this.sameDevice(mr.pd.ctx, 'postSend REG_MR: the MR');
    if (mr.type === 'USER') throw new VerbsError('EINVAL', 'postSend: REG_MR needs a fast-registration MR (allocMr)');
    if (this.attr.userSpace) throw new VerbsError('EINVAL', 'postSend: REG_MR needs a kernel QP (qpc.fre); a user-space QP may not register memory by work request');
    const key = (w.key ?? mr.lkey) >>> 0;
    if (key >>> 8 !== mr.index) throw new VerbsError('EINVAL', `postSend: REG_MR key 0x${key.toString(16)} does not name the MR's index 0x${mr.index.toString(16)}`);
    const access = w.access === undefined ? 0 : w.access;
    checkAccess(access, 'postSend REG_MR');
    // the page list in mapSg's pages (MEM_REG; its MTTs may be 4 KiB ones, see Mr.mapSg) or elements
    const n = mr.type === 'MEM_REG' ? mr.pageCount : mr.mappedCount;
    if (n > mr.maxNumSg) throw new VerbsError('EINVAL', `postSend: REG_MR page list of ${n} > maxNumSg ${mr.maxNumSg}`);
    const zeroBased = (access & IbAccess.ZERO_BASED) !== 0;
    // zero-based: start_addr 0, as mlx5 writes the iova (wr.c:206 set_reg_mkey_seg). The mkey's
    // start_addr is also its first byte's offset in the first page (mlx5_ib.h:1720-1723), so a
    // page list whose first byte is not page aligned cannot start at 0: the rule the kernel
    // applies to every MR (uverbs_cmd.c:710, iova and address in the same page offset, EINVAL).
    // A KLM list (SG_GAPS) starts at its first byte and has no such rule
    if (zeroBased && mr.type === 'MEM_REG' && mr.iova % mr.pageSize !== 0) {
      throw new VerbsError(
        'EINVAL',
        `postSend: REG_MR ZERO_BASED over a page list whose first byte 0x${mr.iova.toString(16)} is not ${mr.pageSize}-aligned: the iova (0) and the first byte must have the same page offset (uverbs_cmd.c:710)`,
      );
    }
    const translations = mr.type === 'MEM_REG'
      ? { mode: 'MTT' as const, pages: mr.pages, logPageSize: mr.mttLogPageSize }
      : { mode: 'KLM' as const, klms: mr.elements.map((e) => ({ bcount: e.length, key: mr.pd.dmaLkeyNow >>> 0, va: e.dma })) };
    // a list over 64 bytes goes by pointer: the driver's descriptor buffer (its DMA address)
    const bytes = mr.type === 'MEM_REG' ? mr.pages.length * 8 : mr.elements.length * 16;
    let listAddr: number | undefined;
    if (bytes > 64) {
      const lv = new DataView(new ArrayBuffer(Math.ceil(bytes / 64) * 64));
      encodeXltList(lv, 0, translations);
      listAddr = this.descriptorList(new Uint8Array(lv.buffer));
    }
    // documented choice (RegMrWqeParams.clearAtomic): A in the mask once any REG_MR granted atomic
    const clearAtomic = mr.atomicGranted;
    const ds = buildRegMrWqe(view, 0, {
      wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence,
      key, access: mrAccess(access), iova: zeroBased ? 0 : mr.iova, length: mr.length, translations, clearAtomic,
      listAddr, listLkey: listAddr !== undefined ? MLX5_INVALID_LKEY : undefined,
    });
    if ((access & IbAccess.REMOTE_ATOMIC) !== 0) mr.atomicGranted = true;
    mr.regAccess = access;
    return ds;
  }

  private bindMwWqe(view: DataView, common: { wqeIndex: number; qpn: number; signaled: boolean; solicited: boolean; fence: number }, w: SendWr, fromBindVerb: boolean): number {
    const mw = w.mw;
    if (!(mw instanceof Mw)) throw new VerbsError('EINVAL', `postSend: BIND_MW needs \`mw\`, a memory window (pd.allocMw), got ${mw === null ? 'null' : typeof mw}`);
    if (w.rkey !== undefined) checkU32('postSend: BIND_MW rkey', w.rkey);
    const bi = w.bindInfo;
    if (bi !== undefined) {
      checkObject('postSend: BIND_MW bindInfo', bi);
      if (bi.mr !== null && !(bi.mr instanceof Mr)) throw new VerbsError('EINVAL', `postSend: BIND_MW bindInfo.mr must be an MR or null, got ${typeof bi.mr}`);
      checkU53('postSend: BIND_MW bindInfo.addr', bi.addr);
      checkU53('postSend: BIND_MW bindInfo.length', bi.length);
      checkAccessBits(bi.access, 'postSend BIND_MW');
    }
    mw.checkAlive('postSend BIND_MW');
    this.sameDevice(mw.pd.ctx, 'postSend BIND_MW: the window');
    if (w.bindInfo?.mr) this.sameDevice(w.bindInfo.mr.pd.ctx, 'postSend BIND_MW: the MR');
    if (mw.type === 1 && !fromBindVerb) throw new VerbsError('EINVAL', 'postSend: BIND_MW on a type-1 window (type 1 binds through bindMw)');
    const newRkey = (w.rkey ?? 0) >>> 0;
    if (newRkey >>> 8 !== mw.index) throw new VerbsError('EINVAL', `postSend: BIND_MW rkey 0x${newRkey.toString(16)} does not name the window's index`);
    const b = w.bindInfo;
    if (b && b.mr && b.mr.destroyed) throw new VerbsError('EINVAL', 'postSend: BIND_MW names a deregistered MR');
    if (b && b.length > GiB2) throw new VerbsError('EOPNOTSUPP', `postSend: a window of ${b.length} bytes is over 2 GiB`);
    const bind = b && b.mr && b.length > 0
      ? { mrLkey: b.mr.lkey >>> 0, addr: b.addr, length: b.length, access: mrAccess(b.access), zeroBased: (b.access & IbAccess.ZERO_BASED) !== 0 }
      : undefined;
    return buildBindMwWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, solicited: common.solicited, fence: common.fence, mwType: mw.type, mwRkey: mw.rkey >>> 0, newRkey, bind });
  }

  /** Descriptor buffers lent to posted UMRs: the work request's index, and the buffer. */
  private readonly descLent: { wr: number; addr: number; cap: number }[] = [];
  private readonly descFree: { addr: number; cap: number }[] = [];

  /**
   * @internal Writes a UMR's translation list into a physically contiguous descriptor buffer
   * for the work request about to be posted, and returns its DMA address. The UMR engine reads
   * the list when it executes the WQE, so each posted WQE has its own buffer until it
   * completes (then the buffer is reused): two registrations in flight never share a list.
   */
  descriptorList(list: Uint8Array): number {
    const host = this.pd.ctx.hca.host;
    const done = this.sqDone;
    for (let i = this.descLent.length - 1; i >= 0; i--) {
      const d = this.descLent[i];
      if (d.wr < done) {
        this.descFree.push({ addr: d.addr, cap: d.cap });
        this.descLent.splice(i, 1);
      }
    }
    let at = -1;
    for (let i = 0; i < this.descFree.length; i++) {
      if (this.descFree[i].cap >= list.length && (at < 0 || this.descFree[i].cap < this.descFree[at].cap)) at = i;
    }
    let buf: { addr: number; cap: number };
    const shared = this.pd.ctx.descFree;
    let sat = -1;
    if (at < 0) {
      // lists of destroyed QPs of the context, before new memory
      for (let i = 0; i < shared.length; i++) {
        if (shared[i].cap >= list.length && (sat < 0 || shared[i].cap < shared[sat].cap)) sat = i;
      }
    }
    if (at >= 0) buf = this.descFree.splice(at, 1)[0];
    else if (sat >= 0) buf = shared.splice(sat, 1)[0];
    else {
      const cap = Math.max(4096, list.length);
      // one 4 KiB page, or 2 MiB pages, is physically contiguous (a list is at most 1 MiB)
      const b = driverAlloc(host, 'postSend (UMR descriptor list)', cap, { hugePages: cap > 4096 });
      buf = { addr: host.dmaAddress(b.addr), cap };
      host.pin(b.addr, cap); // the device reads it; kept for later lists (never freed)
    }
    this.descLent.push({ wr: this.posted, ...buf });
    this.pd.ctx.hca.mem.write(buf.addr, list);
    return buf.addr;
  }
}

function pow2(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}
