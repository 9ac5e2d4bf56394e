/**
 * The address translation unit (`tb.hcaN.atu`): one request in (key, va, length, access, QP,
 * PD), physical segments, an error, or a page fault out. It sequences the mkey cache, the
 * checks of spec/semantics.md "Data path" 1-5, MTT translation and the KLM walker, recursing
 * into the keys of KLM entries (a memory window is just a KLMS mkey with one entry, so windows
 * need no path of their own). Several translation contexts run at once, each an FSM with a
 * stack of frames (one per indirection level); responses return on the requesting port.
 */
import { EnumType, enumType, Fifo, Module, type Nothing, type Reg, type ReqResp, type WireOptions } from '../../sim/index.ts';
import { BlockedStalls } from '../../sim/blocked_sleep.ts';
import type { Counter } from '../../sim/stats.ts';
import type { MkeyLookup, MkeyLookupResp } from './mkey_cache.ts';
import type { MttReq, MttResp } from './mtt_cache.ts';
import type { KlmWalkReq, KlmWalkResp } from './klm_walker.ts';
import type { MkeyEntry } from '../memory/icm_mkey.ts';
import { IB_LOCAL_WRITE, IB_REMOTE_ATOMIC, IB_REMOTE_WRITE } from '../memory/icm_mkey.ts';
import { MKEY_QPN_NONE, MkcAccessMode, NULL_MKEY, mkeyIndex } from '../formats/constants.ts';
import { MKEY_KIND_MR } from '../memory/icm_mkey.ts';
import type { AtuError, AtuRequest, AtuResponse, AtuResult, PhysSegment } from './atu_types.ts';
import { INDIRECT_SLOT } from './dma_fence.ts';

/** The DMA fence as the ATU uses it (translation/dma_fence.ts). */
export interface AtuFence {
  hold(index: number): number;
  release(token: number): void;
}

/** Bytes of a KSM entry (reserved u32, key u32, va u64). */
const KSM_ENTRY = 16;

export const [AtuCtxState, CTX] = enumType('atu_ctx_state', ['IDLE', 'LOOKUP', 'MKEY_WAIT', 'MTT_REQ', 'MTT_WAIT', 'KLM_REQ', 'KLM_WAIT', 'RESPOND']);

export const AtuResultKind = new EnumType('atu_result', ['OK', 'ERROR', 'FAULT']);
export const AtuErrorCode = new EnumType('atu_error', ['NONE', 'INVALID_KEY', 'FREE', 'PD', 'QPN', 'ACCESS', 'BOUNDS', 'INDIRECTION']);

const NOT_BOUND_QPN = MKEY_QPN_NONE;
/** 2^n for page sizes (a table: `2 ** n` with a variable exponent is a slow path). */
const POW2 = Array.from({ length: 64 }, (_, n) => 2 ** n);
const WRITE_ACCESS = IB_LOCAL_WRITE | IB_REMOTE_WRITE | IB_REMOTE_ATOMIC;

/** A client's connection to the ATU. */
export interface AtuPort {
  readonly name: string;
  /** Its translations hold the DMA fence (the requester's and responder's ports). */
  readonly fenced: boolean;
  req: Fifo<AtuRequest>;
  resp: Fifo<AtuResponse>;
}

/** One level of the walk: a key and the part of the range it maps. */
interface Frame {
  key: number;
  top: boolean;
  va: number;
  length: number;
  outerVa: number;
  klmsAbove: number;
  entry: MkeyEntry | null;
  done: number;
  // MTT piece in flight
  pieceOff: number;
  pieceLen: number;
  // KLMS walk position
  depth: number;
  klmIdx: number;
  klmOffset: number;
  pending: number;
  // KSM (implicit ODP parent): which half of the 16-byte entry is being read (0 key, 1 va), the key read
  ksmPhase: number;
  ksmKey: number;
}

interface Ctx {
  id: number;
  state: number;
  port: AtuPort | null;
  req: AtuRequest | null;
  needWrite: boolean;
  /** The segments so far: the first nSegs (the request's answer's array, reused, or a new one). */
  segs: PhysSegment[];
  nSegs: number;
  committed: number;
  frames: Frame[];
  sp: number;
  result: AtuResult | null;
  started: number;
  mkeyMisses: number;
  mttMisses: number;
  /** DMA fence holds of the translation (0: none): its mkey's, and the INDIRECT slot's. */
  fenceKey: number;
  fenceInd: number;
  /** Reused request objects: a context has at most one lookup of each kind in flight. */
  mkReq: { index: number; ctx: number };
  mttReq: { ctx: number; addr: number };
  rState: Reg;
  rKey: Reg;
}

/** The ATU's ports onto the pipeline it sequences: the mkey cache, MTT entries, the KLM walker. */
export interface AtuPipelinePorts {
  readonly mkey: ReqResp<MkeyLookup, MkeyLookupResp>;
  readonly mtt: ReqResp<MttReq, MttResp>;
  readonly klm: ReqResp<KlmWalkReq, KlmWalkResp>;
}

/** Wiring of the ATU, its translation contexts and the deepest KLM nesting it follows. */
export interface AtuOptions extends WireOptions<AtuPipelinePorts, Nothing> {
  readonly contexts: number;
  readonly maxIndirection: number;
}

export class Atu extends Module {
  readonly ports: AtuPort[] = [];
  readonly maxIndirection: number;
  private readonly ctxs: Ctx[] = [];
  private readonly mkc: ReqResp<MkeyLookup, MkeyLookupResp>;
  private readonly mtt: ReqResp<MttReq, MttResp>;
  private readonly walker: ReqResp<KlmWalkReq, KlmWalkResp>;
  private rr = 0;
  /** The DMA fence fenced ports' translations hold (hca.ts sets it; null: none). */
  fence: AtuFence | null = null;
  /** Contexts not IDLE (so an idle ATU skips the context loop). */
  private nBusy = 0;
  /** contexts_full_stalls, counted for the edges of a sleep with every step refused too (a request waiting: a stall an edge). */
  private readonly ctxStalls: BlockedStalls;
  private readonly rReqValid: Reg;
  private readonly rReqKey: Reg;
  private readonly rReqVa: Reg;
  private readonly rRespValid: Reg;
  private readonly rRespKind: Reg;
  private readonly rRespError: Reg;
  private readonly rBusy: Reg;
  private readonly sRequests;
  private readonly sOk;
  private readonly sErrors;
  private readonly sFaults;
  private readonly sLatency;
  private readonly sPeak;
  private readonly sCtxStalls: Counter;
  private readonly sSegments;

  constructor(parent: Module, name: string, opts: AtuOptions) {
    super(parent.sim, parent, name);
    if (!(Number.isInteger(opts.contexts) && opts.contexts >= 1)) throw new RangeError(`${this.path}: contexts must be >= 1`);
    this.maxIndirection = opts.maxIndirection;
    this.mkc = opts.ports.mkey;
    this.mtt = opts.ports.mtt;
    this.walker = opts.ports.klm;
    this.rReqValid = this.probe('in_valid', 1);
    this.rReqKey = this.probe('in_key', 32);
    this.rReqVa = this.probe('in_va', 64);
    this.rRespValid = this.probe('out_valid', 1);
    this.rRespKind = this.probe('out_kind', AtuResultKind.width, { enum: AtuResultKind });
    this.rRespError = this.probe('out_error', AtuErrorCode.width, { enum: AtuErrorCode });
    this.rBusy = this.probe('busy_ctxs', Math.max(1, Math.ceil(Math.log2(opts.contexts + 1))));
    for (let i = 0; i < opts.contexts; i++) {
      const frames: Frame[] = [];
      for (let d = 0; d <= opts.maxIndirection + 1; d++) frames.push(newFrame());
      this.ctxs.push({
        id: i,
        state: CTX.IDLE,
        port: null,
        req: null,
        needWrite: false,
        segs: [],
        nSegs: 0,
        committed: 0,
        frames,
        sp: 0,
        result: null,
        started: 0,
        mkeyMisses: 0,
        mttMisses: 0,
        fenceKey: 0,
        fenceInd: 0,
        mkReq: { index: 0, ctx: i },
        mttReq: { ctx: i, addr: 0 },
        rState: this.probe(`ctx${i}_state`, AtuCtxState.width, { enum: AtuCtxState }),
        rKey: this.probe(`ctx${i}_key`, 32),
      });
    }
    this.mkc.resp.consumer = this;
    this.mkc.req.producer = this;
    this.mtt.resp.consumer = this;
    this.mtt.req.producer = this;
    this.walker.resp.consumer = this;
    this.walker.req.producer = this;
    this.sRequests = this.stats.counter('requests');
    this.sOk = this.stats.counter('ok');
    this.sErrors = this.stats.counter('errors');
    this.sFaults = this.stats.counter('faults');
    this.sSegments = this.stats.counter('segments');
    this.sLatency = this.stats.histogram('latency_ps');
    this.sPeak = this.stats.counter('contexts_peak');
    this.ctxStalls = new BlockedStalls(opts.clock.period);
    this.sCtxStalls = this.ctxStalls.counter;
    this.stats.gauge('contexts_full_stalls', () => this.ctxStalls.read(this.sim.now));
    this.clockedBy(opts.clock);
  }

  /** A translation in a context (it may be waiting for a cache's host read). */
  override hasWork(): boolean {
    return this.nBusy > 0;
  }

  /** A new client port (declare before tracing starts). */
  port(name: string, capacity = 4, fenced = false): AtuPort {
    const p: AtuPort = {
      name,
      fenced,
      req: new Fifo<AtuRequest>(this, `${name}_req`, { capacity }),
      resp: new Fifo<AtuResponse>(this, `${name}_resp`, { capacity }),
    };
    p.req.consumer = this;
    p.resp.producer = this;
    this.ports.push(p);
    return p;
  }

  override tick(): void {
    this.ctxStalls.ticks(this.sim.now);
    // 1. responses from the pipeline, routed to their contexts
    while (this.mkc.resp.canPop()) this.onMkey(this.mkc.resp.pop());
    while (this.mtt.resp.canPop()) this.onMtt(this.mtt.resp.pop());
    while (this.walker.resp.canPop()) this.onKlm(this.walker.resp.pop());
    // 2. each context issues what it needs
    let respValid = 0;
    let busy = 0;
    let active = false;
    for (let ci = 0; ci < this.ctxs.length && this.nBusy > 0; ci++) {
      const c = this.ctxs[ci];
      if (c.state === CTX.IDLE) continue;
      if (c.state === CTX.RESPOND) {
        if (c.port!.resp.canPush()) {
          const a = c.req!.answer;
          if (a !== undefined) {
            const r = a.resp;
            r.tag = c.req!.tag;
            r.result = c.result!;
            r.mkeyMisses = c.mkeyMisses;
            r.mttMisses = c.mttMisses;
            r.fenceKey = c.fenceKey;
            r.fenceInd = c.fenceInd;
            r.partial = c.result!.kind === 'fault' ? c.segs : null;
            c.port!.resp.push(r);
          } else c.port!.resp.push({ tag: c.req!.tag, result: c.result!, mkeyMisses: c.mkeyMisses, mttMisses: c.mttMisses, fenceKey: c.fenceKey, fenceInd: c.fenceInd, partial: c.result!.kind === 'fault' ? c.segs : null });
          c.fenceKey = 0;
          c.fenceInd = 0;
          this.finish(c);
          respValid = 1;
        }
      } else if (c.state === CTX.LOOKUP) {
        if (this.mkc.req.canPush()) {
          c.mkReq.index = mkeyIndex(c.frames[c.sp - 1].key);
          this.mkc.req.push(c.mkReq);
          this.setState(c, CTX.MKEY_WAIT);
        }
      } else if (c.state === CTX.MTT_REQ) this.issueMtt(c);
      else if (c.state === CTX.KLM_REQ) {
        if (this.walker.req.canPush()) {
          const f = c.frames[c.sp - 1];
          const e = f.entry!;
          this.walker.req.push({ ctx: c.id, xltAddr: e.xltAddr, count: e.xltCount, startIdx: f.klmIdx, offset: f.klmOffset });
          this.setState(c, CTX.KLM_WAIT);
        }
      }
      if (c.state !== CTX.IDLE) busy++;
      if (c.state === CTX.LOOKUP || c.state === CTX.MTT_REQ || c.state === CTX.KLM_REQ || c.state === CTX.RESPOND) active = true;
    }
    // 3. accept one new request (round-robin over ports) into a free context
    let reqValid = 0;
    let free: Ctx | null = null;
    for (let i = 0; i < this.ctxs.length; i++) {
      if (this.ctxs[i].state === CTX.IDLE) {
        free = this.ctxs[i];
        break;
      }
    }
    if (free === null) {
      // every context busy while a request waits: the ATU is the limit this edge
      for (let i = 0; i < this.ports.length; i++) {
        if (this.ports[i].req.canPop()) {
          this.sCtxStalls.inc();
          break;
        }
      }
    } else {
      for (let i = 0; i < this.ports.length; i++) {
        const p = this.ports[(this.rr + i) % this.ports.length];
        if (!p.req.canPop()) continue;
        this.rr = (this.rr + i + 1) % this.ports.length;
        this.accept(free, p, p.req.pop());
        reqValid = 1;
        busy++;
        // a request that went on to the mkey cache has nothing to do next edge; untraced, the ATU
        // need not tick just to find that (its next input wakes it, another request keeps it awake)
        if (free.state !== CTX.MKEY_WAIT || this.sim.tracer !== null) active = true;
        break;
      }
    }
    this.rReqValid.set(reqValid);
    this.rRespValid.set(respValid);
    this.rBusy.set(busy);
    if (busy > this.sPeak.value) this.sPeak.value = busy;
    if (!active && !this.keepsPulse(reqValid | respValid)) {
      let waiting = false;
      for (let i = 0; i < this.ports.length; i++) if (this.ports[i].req.canPop()) waiting = true;
      if (waiting && free === null && (Atu.tookDelayed(this.mkc.resp) || Atu.tookDelayed(this.mtt.resp))) {
        // a response taken this edge from a FIFO with latency used to wake the ATU on the next
        // edge (src/sim/fifo.ts, armWake), which counted a stall there with every context busy
        // and a request waiting; it now sleeps until the next response is due, and that edge's
        // stall is still counted
        this.ctxStalls.oweNext(this.sim.now);
      }
      if (!(waiting && free !== null)) this.sleep();
    } else if (active && this.sim.tracer === null && this.allRefused()) {
      // every context that has a step to take found its FIFO full: the edges until one frees
      // would repeat this one (a pop of a FIFO found full wakes its producer), so sleep and
      // count their stalls on waking. Untraced only: a traced run keeps its clock's edges.
      let waiting = false;
      for (let i = 0; i < this.ports.length; i++) if (this.ports[i].req.canPop()) waiting = true;
      if (!(waiting && free !== null)) {
        this.ctxStalls.begin(this.sim.now, waiting ? 1 : 0);
        this.sleep();
      }
    }
  }

  /** Whether an item was popped this edge from `f`, a FIFO with latency. */
  private static tookDelayed(f: Fifo<unknown>): boolean {
    return f.latency > 0 && f.poppedNow;
  }

  /**
   * Whether every context with a step to take (a request to the caches or the walker, or its
   * answer) was refused by a full FIFO: nothing it holds moves until that FIFO pops.
   */
  private allRefused(): boolean {
    for (let ci = 0; ci < this.ctxs.length; ci++) {
      const c = this.ctxs[ci];
      const st = c.state;
      if (st === CTX.LOOKUP) {
        if (this.mkc.req.canPush()) return false;
      } else if (st === CTX.MTT_REQ) {
        if (this.mtt.req.canPush()) return false;
      } else if (st === CTX.KLM_REQ) {
        if (this.walker.req.canPush()) return false;
      } else if (st === CTX.RESPOND) {
        if (c.port!.resp.canPush()) return false;
      }
    }
    return true;
  }


  private setState(c: Ctx, s: number): void {
    c.state = s;
    c.rState.set(s);
  }

  private accept(c: Ctx, port: AtuPort, req: AtuRequest): void {
    this.sRequests.inc();
    this.nBusy++;
    c.port = port;
    c.req = req;
    c.needWrite = (req.access & WRITE_ACCESS) !== 0;
    // the client's answer's segment objects are overwritten in place (emit)
    c.segs = req.answer !== undefined ? req.answer.ok.segments : [];
    c.nSegs = 0;
    c.committed = 0;
    c.sp = 0;
    c.started = this.sim.now;
    c.mkeyMisses = 0;
    c.mttMisses = 0;
    c.rKey.set(req.key >>> 0);
    this.rReqKey.set(req.key >>> 0);
    this.rReqVa.set(req.va);
    // a zero-length access checks nothing (spec/semantics.md "Data path")
    if (req.length === 0) return this.respond(c, this.okResult(c));
    // the DMA fence: held from before the mkey is looked up, so an invalidation that lands
    // after this waits for the DMA this answer leads to (one before it is seen by the lookup)
    if (port.fenced && this.fence !== null) c.fenceKey = this.fence.hold(mkeyIndex(req.key));
    this.push(c, req.key, true, req.va, req.length, req.va, 0);
    // issue the lookup in this same cycle
    if (this.mkc.req.canPush()) {
      c.mkReq.index = mkeyIndex(req.key);
      this.mkc.req.push(c.mkReq);
      this.setState(c, CTX.MKEY_WAIT);
    }
  }

  private push(c: Ctx, key: number, top: boolean, va: number, length: number, outerVa: number, klmsAbove: number): void {
    const f = c.frames[c.sp++];
    f.key = key >>> 0;
    f.top = top;
    f.va = va;
    f.length = length;
    f.outerVa = outerVa;
    f.klmsAbove = klmsAbove;
    f.entry = null;
    f.done = 0;
    f.pending = 0;
    c.rKey.set(f.key);
    this.setState(c, CTX.LOOKUP);
  }

  /** The mkey context arrived: the checks of this level, then the mode's translation. */
  private onMkey(r: MkeyLookupResp): void {
    const c = this.ctxs[r.ctx];
    const f = c.frames[c.sp - 1];
    const e = r.entry;
    f.entry = e;
    if (r.miss === true) c.mkeyMisses++;
    // (1) the index holds an mkey and the full key matches
    if (!e.allocated || e.tag !== (f.key & 0xff)) return this.fail(c, 'INVALID_KEY', f.key);
    // (2) valid: not free, and not a window bound with length 0
    if (e.free || (!e.len64 && e.len === 0)) return this.fail(c, 'FREE', f.key);
    if (f.top) {
      // an lkey must name an MR: a window's key gives remote access only (IBTA; rxe looks up MRs only)
      if (c.req!.local === true && e.kind !== MKEY_KIND_MR) return this.fail(c, 'ACCESS', f.key);
      // (3) PD, then the QP of a type-2 window; (4) access; nested keys get none of these
      if (e.pd !== c.req!.pd) return this.fail(c, 'PD', f.key);
      if (e.qpn !== NOT_BOUND_QPN && e.qpn !== c.req!.qpn) return this.fail(c, 'QPN', f.key);
      if ((c.req!.access & ~e.access) !== 0) return this.fail(c, 'ACCESS', f.key);
    }
    // (5) bounds, unless LEN64
    if (!e.len64 && !(f.va >= e.start && f.va + f.length <= e.start + e.len)) return this.fail(c, 'BOUNDS', f.key);
    switch (e.accessMode) {
      case MkcAccessMode.PA:
        this.emit(c, f.va, f.length);
        return this.frameDone(c);
      case MkcAccessMode.MTT:
        f.done = 0;
        return this.setState(c, CTX.MTT_REQ);
      case MkcAccessMode.KLMS: {
        this.holdIndirect(c);
        f.depth = f.klmsAbove + 1;
        if (f.depth > this.maxIndirection) return this.fail(c, 'INDIRECTION', f.key);
        const off = f.va - e.start;
        if (off < 0) return this.fail(c, 'BOUNDS', f.key);
        f.klmIdx = 0;
        f.klmOffset = off;
        f.done = 0;
        return this.setState(c, CTX.KLM_REQ);
      }
      case MkcAccessMode.KSM: {
        // fixed-size entries of 2^log_page_size bytes (implicit ODP: 1 GiB), read through the MTT
        // cache as two 8-byte halves (key, then va): spec/mlx5.md "Implicit ODP"
        this.holdIndirect(c);
        f.depth = f.klmsAbove + 1;
        if (f.depth > this.maxIndirection) return this.fail(c, 'INDIRECTION', f.key);
        if (f.va < e.start) return this.fail(c, 'BOUNDS', f.key);
        f.done = 0;
        f.ksmPhase = 0;
        return this.setState(c, CTX.MTT_REQ);
      }
      default:
        return this.fail(c, 'INVALID_KEY', f.key); // other modes are not modelled
    }
  }

  /**
   * The walk enters an indirect mkey: the keys it reaches are not the request's, so the answer
   * also holds the INDIRECT slot (every invalidation waits for it), taken before those lookups.
   */
  private holdIndirect(c: Ctx): void {
    if (c.fenceKey !== 0 && c.fenceInd === 0) c.fenceInd = this.fence!.hold(INDIRECT_SLOT);
  }

  /** The KSM entry of the parent frame's next byte: key (phase 0) or va (phase 1). */
  private issueKsm(c: Ctx, f: Frame, e: MkeyEntry): void {
    const size = POW2[e.logPageSize];
    const index = Math.floor((f.va + f.done - e.start) / size);
    if (index >= e.xltCount) return this.fail(c, 'BOUNDS', f.key);
    if (!this.mtt.req.canPush()) return;
    c.mttReq.addr = e.xltAddr + KSM_ENTRY * index + (f.ksmPhase === 0 ? 0 : 8);
    this.mtt.req.push(c.mttReq);
    this.setState(c, CTX.MTT_WAIT);
  }

  private onKsm(c: Ctx, f: Frame, e: MkeyEntry, value: number): void {
    if (f.ksmPhase === 0) {
      const key = value % 2 ** 32;
      // the null mkey (QUERY_SPECIAL_CONTEXTS): no child yet, the access faults on the parent
      if (key === NULL_MKEY) return this.respond(c, { kind: 'fault', va: f.outerVa + f.done, bytesCommitted: c.committed, write: c.needWrite });
      f.ksmKey = key;
      f.ksmPhase = 1;
      return this.setState(c, CTX.MTT_REQ);
    }
    const size = POW2[e.logPageSize];
    const off = (f.va + f.done - e.start) % size;
    const piece = Math.min(f.length - f.done, size - off);
    f.ksmPhase = 0;
    f.pending = piece;
    this.push(c, f.ksmKey, false, value + off, piece, f.outerVa + f.done, f.depth);
  }

  private issueMtt(c: Ctx): void {
    const f = c.frames[c.sp - 1];
    const e = f.entry!;
    if (e.accessMode === MkcAccessMode.KSM) return this.issueKsm(c, f, e);
    const P = POW2[e.logPageSize];
    // integers below 2^53 and P a power of two: `>>> 0` keeps the low bits exactly
    const small = e.logPageSize <= 30;
    // entry index: start_addr is both the iova and the first byte's offset in its page
    // (mlx5_ib.h:1720-1723), so a zero-based MR starts at byte 0 of its first page
    const rel = f.va + f.done - e.start + (small ? (e.start >>> 0) & (P - 1) : e.start % P);
    if (rel < 0) return this.fail(c, 'BOUNDS', f.key);
    const index = Math.floor(rel / P);
    if (index >= e.xltCount) return this.fail(c, 'BOUNDS', f.key);
    if (!this.mtt.req.canPush()) return;
    f.pieceOff = small ? (rel >>> 0) & (P - 1) : rel % P;
    f.pieceLen = Math.min(f.length - f.done, P - f.pieceOff);
    c.mttReq.addr = e.xltAddr + 8 * index;
    this.mtt.req.push(c.mttReq);
    this.setState(c, CTX.MTT_WAIT);
  }

  private onMtt(r: MttResp): void {
    const c = this.ctxs[r.ctx];
    const f = c.frames[c.sp - 1];
    const e = f.entry!;
    if (r.miss === true) c.mttMisses++;
    if (e.accessMode === MkcAccessMode.KSM) return this.onKsm(c, f, e, r.value);
    const low = r.value >>> 0; // the flag bits are the low bits of the entry
    const read = (low & 1) !== 0;
    const write = (low & 2) !== 0;
    // ODP (pg_access): a page needs RD, and WR too for a write; else it is not present
    if (e.pgAccess && !(read && (write || !c.needWrite))) {
      return this.respond(c, { kind: 'fault', va: f.outerVa + f.done, bytesCommitted: c.committed, write: c.needWrite });
    }
    const page = r.value - (low & 4095);
    this.emit(c, page + f.pieceOff, f.pieceLen);
    f.done += f.pieceLen;
    if (f.done === f.length) this.frameDone(c);
    else this.setState(c, CTX.MTT_REQ);
  }

  private onKlm(r: KlmWalkResp): void {
    const c = this.ctxs[r.ctx];
    const f = c.frames[c.sp - 1];
    if (!r.found) return this.fail(c, 'BOUNDS', f.key); // the list ended before the range
    const piece = Math.min(f.length - f.done, r.avail);
    f.klmIdx = r.idx + 1;
    f.klmOffset = 0;
    f.pending = piece;
    this.push(c, r.key, false, r.va, piece, f.outerVa + f.done, f.depth);
  }

  /** The top frame is translated: pop it; a KLMS parent continues with its next entry. */
  private frameDone(c: Ctx): void {
    c.sp--;
    if (c.sp === 0) return this.respond(c, this.okResult(c));
    const p = c.frames[c.sp - 1];
    c.rKey.set(p.key);
    p.done += p.pending;
    p.pending = 0;
    if (p.done === p.length) return this.frameDone(c);
    this.setState(c, p.entry!.accessMode === MkcAccessMode.KSM ? CTX.MTT_REQ : CTX.KLM_REQ);
  }

  /** The ok result: the answer's own (reused), or a new one. */
  private okResult(c: Ctx): AtuResult {
    const a = c.req!.answer;
    return a !== undefined ? a.ok : { kind: 'ok', segments: c.segs };
  }

  private emit(c: Ctx, pa: number, length: number): void {
    const n = c.nSegs;
    const segs = c.segs;
    if (n > 0 && segs[n - 1].pa + segs[n - 1].length === pa) segs[n - 1].length += length;
    else {
      if (n < segs.length) {
        segs[n].pa = pa;
        segs[n].length = length;
      } else segs.push({ pa, length });
      c.nSegs = n + 1;
    }
    c.committed += length;
  }

  private fail(c: Ctx, error: AtuError, key: number): void {
    this.respond(c, { kind: 'error', error, key: key >>> 0 });
  }

  private respond(c: Ctx, result: AtuResult): void {
    c.result = result;
    // a reused array keeps what its last answer had beyond this one's segments
    if (c.segs.length !== c.nSegs) c.segs.length = c.nSegs;
    if (result.kind === 'error' && c.fenceKey !== 0) {
      // no DMA follows an error: its holds end here
      this.fence!.release(c.fenceKey);
      this.fence!.release(c.fenceInd);
      c.fenceKey = 0;
      c.fenceInd = 0;
    }
    this.rRespKind.set(result.kind === 'ok' ? 0 : result.kind === 'error' ? 1 : 2);
    this.rRespError.set(result.kind === 'error' ? AtuErrorCode.valueOf(result.error) : 0);
    if (result.kind === 'ok') {
      this.sOk.inc();
      this.sSegments.inc(result.segments.length);
    } else if (result.kind === 'error') this.sErrors.inc();
    else this.sFaults.inc();
    this.setState(c, CTX.RESPOND);
  }

  private finish(c: Ctx): void {
    this.nBusy--;
    this.sLatency.add(this.sim.now - c.started);
    c.req = null;
    c.result = null;
    c.port = null;
    c.sp = 0;
    this.setState(c, CTX.IDLE);
  }
}

function newFrame(): Frame {
  return {
    key: 0, top: false, va: 0, length: 0, outerVa: 0, klmsAbove: 0, entry: null, done: 0,
    pieceOff: 0, pieceLen: 0, depth: 0, klmIdx: 0, klmOffset: 0, pending: 0, ksmPhase: 0, ksmKey: 0,
  };
}
