/**
 * The UMR engine (`tb.hcaN.umr_engine`): executes the UMR WQEs the send queue hands it (fast
 * registration with MTTs or KLMs, local invalidate, memory-window bind and unbind, translation
 * updates) against ICM, and answers each with a completion syndrome (spec/mlx5.md "Send WQE",
 * "UMR control segment"; spec/semantics.md "Work requests (async outcomes)").
 *
 * One job at a time, an FSM traced as `umr_state`:
 *
 *   IDLE -> FETCH_MKEY/WAIT_MKEY   DMA read of the target's 64-byte context from ICM (and, for
 *                                  a bind, the MR's context named by the inline KLM, in parallel)
 *        -> FETCH_XLT/WAIT_XLT     a translation list given by pointer (REG_MR over 64 bytes), or
 *                                  the KLM of a bound window that the UMR releases
 *        -> FETCH_REF/WAIT_REF     the context of the MR that window counts on
 *        -> CHECK                  the rules (one cycle); errors skip the writes
 *        -> WRITE                  posted DMA writes, one per cycle: the bind's MR count, the
 *                                  translations, the target context, the released MR's count
 *        -> WAIT_LANDED            until every write has landed in ICM
 *        -> DONE                   the completion to `resp`
 *
 * Timing and function: CHECK computes every byte the UMR writes from the contexts and list the
 * engine read (a read-modify-write of its own copies, so two writes to one context compose).
 * Each posted write carries them to ICM, and the UMR takes effect when the write lands
 * (`pcieWritePs` after it is issued), not before: the ICM writer, told of the landing, updates
 * the mkey cache's copy of a context (a fill in flight goes stale and is read again) or drops
 * the cached lines of rewritten translations. Posted writes land in order, so translations are
 * in ICM before the context that makes them reachable, and a bind counts the window on its MR
 * before the window becomes valid: no lookup between two landings sees a half-done UMR. The
 * completion waits for the last landing, so whatever follows it (a later WQE, a CQE, the next
 * message at the responder) sees the new contexts.
 *
 * Errors never change ICM: every check runs before the first write.
 *
 * An invalidating UMR is a DMA fence (issue 18 item 5): a LOCAL_INV (a consumer's, or a
 * READ_WITH_INV's), a pooled MR's revoke (FREE | KEY), a window's unbind, or a translation
 * update that rewrites an entry that translated (an ODP zap: the engine reads the old entries it
 * replaces, FETCH_OLD, and compares) completes only once every DMA translated through the target
 * mkey before its writes landed has finished: the engine marks a point of the DMA fence
 * (translation/dma_fence.ts) for the target's index when the last write has landed and keeps
 * the completion until the point has passed. mlx5 relies on exactly this (Linux 6.12
 * drivers/infiniband/hw/mlx5/umr.c:414-421 mlx5r_umr_revoke_mr; odp.c:259-350
 * mlx5_ib_invalidate_range unmaps the pages once the zap UMR returned; a kernel consumer unmaps
 * its scatter list once its LOCAL_INV completed). The wait is per mkey: DMA through other mkeys
 * does not delay it, DMA through any KLM or KSM mkey does (README "Where the hardware has no
 * answer"). The engine does not wait in it: the job is parked (`fenced`, waves) and the next one
 * starts, and a parked completion goes out as soon as its own point passes, whatever the order;
 * a map (entries that were not present, or unchanged) fences nothing. A remote invalidation
 * (SEND_WITH_INV) is not fenced: the message carrying it may hold the very mkey it invalidates
 * (its receive buffer), and would wait for itself.
 *
 * A second pair of queues, `rinv`, takes the responder's remote invalidations (SEND_WITH_INV):
 * a LOCAL_INV WQE the responder builds, executed as kind REMOTE_INV under the "Remote
 * invalidate" rules (REM_INV_REQ_ERR), so a remote invalidation costs what a LOCAL_INV costs
 * (context read, check, posted write) and updates the mkey cache the same coherent way. The
 * engine takes the two queues in turn when both wait.
 */
import { enumType, Fifo, Module, type Counter, type EventTarget, type Histogram, type Reg, type WireOptions } from '../../sim/index.ts';
import type { HostMem } from '../memory/host_mem.ts';
import type { Icm } from '../memory/icm.ts';
import { dmaRead, dmaWrite, type DmaPort, type DmaReq, type DmaResp } from '../memory/pcie.ts';
import type { UmrDone, UmrIcmWriter, UmrJob } from './umr_types.ts';
import { decodeIcmMkey, encodeIcmMkey, readIcmPrivate, unallocatedMkey, type IcmPrivate, type MkeyEntry } from '../memory/icm_mkey.ts';
import { MKEY_CONTEXT_SIZE, decodeMkeyContext, mkcTranslationsOctwordSize, type MkeyContext } from '../formats/mkey_context.ts';
import { decodeKlm, type Klm } from '../formats/klm.ts';
import { CqeSyndrome, UmrCtrlFlag, mkeyIndex } from '../formats/constants.ts';
import {
  UMR_KIND,
  UmrKind,
  UmrSyndrome,
  applyMask,
  bindsSomething,
  checkPointer,
  checkTranslations,
  checkUmr,
  decodeUmrWqe,
  entryBytes,
  releasesWindow,
  type UmrPolicy,
  type UmrWqe,
  type XltPlan,
} from './umr_ops.ts';
import { MKEY_KIND_MR, MKEY_KIND_MW1 } from '../memory/icm_mkey.ts';
import type { FencePoint } from '../translation/dma_fence.ts';

/** The DMA fence as the UMR engine uses it (translation/dma_fence.ts). */
export interface UmrDmaFence {
  mark(index: number): FencePoint;
  passed(point: FencePoint): boolean;
  notify(point: FencePoint, target: { fire(): void }): void;
}

/** An invalidating UMR done but for its fence: its completion waits for the point to pass. */
interface Fenced {
  point: FencePoint;
  remote: boolean;
  done: UmrDone;
  started: number;
}

export { UmrKind, UmrSyndrome } from './umr_ops.ts';

/** The engine's FSM states (trace enum `umr_state`). */
export const [UmrState, UMR] = enumType('umr_state', [
  'IDLE', 'FETCH_MKEY', 'WAIT_MKEY', 'FETCH_XLT', 'WAIT_XLT', 'FETCH_REF', 'WAIT_REF', 'CHECK', 'WRITE', 'WAIT_LANDED', 'DONE',
]);

/** DMA read tags: what a completion carries. */
const TAG_TARGET = 0;
const TAG_MR = 1;
const TAG_XLT = 2;
const TAG_OLD_KLM = 3;
const TAG_OLD_MR = 4;
/** The translation entries an update replaces (is it a zap?). */
const TAG_OLD_XLT = 5;

const CTX_BYTES = MKEY_CONTEXT_SIZE;
/** No reads (an idle engine's list). */
const NO_READS: DmaReq[] = [];

/** Options of the engine. */
export interface UmrEngineOptions {
  /**
   * What the builder's zero-length type-2 bind (mask FREE|KEY|QPN, CHECK_QPN, no KLM) does.
   * 'bind_error' (default): MW_BIND_ERR, as spec/semantics.md (o10-37.2.40) and the reference
   * model require. 'invalidate': real mlx5 with rdma-core, which posts exactly this WQE to
   * invalidate a type-2 window: full key match and CHECK_QPN (else LOC_QP_OP_ERR), then FREE.
   */
  type2Unbind?: 'bind_error' | 'invalidate';
  /** REG_MR fails (LOC_QP_OP_ERR) when the MR's PD is not the posting QP's (default true). */
  regMrPdCheck?: boolean;
  /** Capacity of `req` and `resp` (default 4). */
  queueCapacity?: number;
}

/** What the engine uses: the ICM's geometry, the ICM writer its writes land through, host memory's size. */
export interface UmrEngineDeps {
  readonly icm: Pick<Icm, 'mkeyContextAddr' | 'mkeyEntries' | 'xltSize'>;
  readonly writer: UmrIcmWriter;
  readonly mem: Pick<HostMem, 'size'>;
}

/** Wiring of the engine: its DMA port, its dependencies, and its policies. */
export interface UmrEngineWiring extends WireOptions<{ readonly dma: DmaPort }, UmrEngineDeps>, UmrEngineOptions {}

/** A posted write of the plan: where, the bytes, and what it changes (a context's index, or -1 and its translation entries). */
interface PlannedWrite {
  addr: number;
  data: Uint8Array;
  index: number;
  entries: number;
}

/**
 * The UMR engine. Push `UmrJob`s into `req`; completions come out of `resp` in order. It is
 * told of its own writes' landings (`fire`) by the ICM writer.
 */
export class UmrEngine extends Module implements EventTarget {
  readonly req: Fifo<UmrJob>;
  readonly resp: Fifo<UmrDone>;
  /** Remote invalidations from the responder: LOCAL_INV WQEs run as REMOTE_INV; completions in order. */
  readonly rinv: { readonly req: Fifo<UmrJob>; readonly resp: Fifo<UmrDone> };
  readonly port: DmaPort;
  readonly policy: Readonly<UmrPolicy>;
  private readonly icm: UmrEngineDeps['icm'];
  private readonly writer: UmrIcmWriter;
  private readonly memBytes: number;

  private readonly rState: Reg;
  private readonly rKey: Reg;
  private readonly rKind: Reg;
  private readonly rSyndrome: Reg;
  private readonly rQpn: Reg;
  private readonly rBusy: Reg;
  private readonly rFenced: Reg;
  /** The DMA fence invalidating UMRs complete behind (hca.ts sets it; null: none, no waiting). */
  fence: UmrDmaFence | null = null;
  /** Invalidating UMRs whose completion waits for the fence, oldest first. */
  private readonly fenced: Fenced[] = [];
  private readonly fenceWake = { fire: (): void => this.wake() };
  private readonly sFenced: Counter;
  private readonly sFenceWait: Histogram;

  private readonly sJobs: Counter;
  private readonly sByKind: Counter[] = [];
  private readonly sErrors: Counter;
  private readonly sErrQpOp: Counter;
  private readonly sErrMwBind: Counter;
  private readonly sErrProt: Counter;
  private readonly sErrRemInv: Counter;
  private readonly sErrOther: Counter;
  private readonly sCtxReads: Counter;
  private readonly sXltReads: Counter;
  private readonly sWrites: Counter;
  private readonly sXltEntries: Counter;
  private readonly sLatency: Histogram;

  // the job in progress
  private job: UmrJob | null = null;
  /** The job came from `rinv` (its completion goes back there). */
  private remote = false;
  /** When both queues wait, the remote one goes next (they alternate). */
  private remoteTurn = false;
  private w: UmrWqe | null = null;
  private started = 0;
  private syn = 0;
  private target: MkeyEntry | null = null;
  private targetOcto = 0;
  private mr: MkeyEntry | null = null;
  private list: Uint8Array | null = null;
  private oldKlm: Klm | null = null;
  private oldMr: MkeyEntry | null = null;
  private oldXlt: Uint8Array | null = null;
  private reads: DmaReq[] = [];
  private nIssued = 0;
  private nPending = 0;
  /**
   * Where each context read of a job lands, by tag (TAG_TARGET, TAG_MR, TAG_OLD_MR): the job's own
   * copies, reused job after job (a job's writes carry snapshots, and the next job starts only
   * once they have landed).
   */
  private readonly ctxBuf: Uint8Array[] = [new Uint8Array(CTX_BYTES), new Uint8Array(CTX_BYTES), new Uint8Array(0), new Uint8Array(0), new Uint8Array(CTX_BYTES)];
  /** A DataView over each of `ctxBuf` (made once: a job decodes and edits its contexts through them). */
  private readonly ctxView: DataView[] = this.ctxBuf.map((b) => new DataView(b.buffer, b.byteOffset, b.byteLength));
  /** The 64 context bytes read of each index this job, edited in place by the plan. */
  private readonly fetchedIndex: number[] = [];
  private readonly fetchedBytes: Uint8Array[] = [];
  /** Contexts in `fetched*` this job (at most three: target, MR, old MR): a scan, where a Map's clear made a table per job. */
  private nFetched = 0;
  private readonly writes: PlannedWrite[] = [];
  private nWritten = 0;
  private nLanded = 0;

  constructor(parent: Module, name: string, opts: UmrEngineWiring) {
    super(parent.sim, parent, name);
    this.icm = opts.deps.icm;
    this.writer = opts.deps.writer;
    this.memBytes = opts.deps.mem.size;
    this.policy = Object.freeze({ type2Unbind: opts.type2Unbind ?? 'bind_error', regMrPdCheck: opts.regMrPdCheck ?? true });
    const cap = opts.queueCapacity ?? 4;
    this.rState = this.stateReg('state', UmrState);
    this.rKey = this.probe('key', 32);
    this.rKind = this.probe('kind', UmrKind.width, { enum: UmrKind });
    this.rSyndrome = this.probe('syndrome', 8, { enum: UmrSyndrome });
    this.rQpn = this.probe('qpn', 24);
    this.rBusy = this.probe('busy', 1);
    this.rFenced = this.probe('fenced', 8);
    this.req = new Fifo<UmrJob>(this, 'req', { capacity: cap });
    this.resp = new Fifo<UmrDone>(this, 'resp', { capacity: cap });
    this.req.consumer = this;
    this.resp.producer = this;
    this.rinv = { req: new Fifo<UmrJob>(this, 'rinv_req', { capacity: cap }), resp: new Fifo<UmrDone>(this, 'rinv_resp', { capacity: cap }) };
    this.rinv.req.consumer = this;
    this.rinv.resp.producer = this;
    this.port = opts.ports.dma;
    this.port.req.producer = this;
    this.port.resp.consumer = this;

    this.sJobs = this.stats.counter('jobs');
    for (const [v, n] of UmrKind.entries()) if (v !== 0) this.sByKind[v] = this.stats.counter(`jobs_${n.toLowerCase()}`);
    this.sErrors = this.stats.counter('errors');
    this.sErrQpOp = this.stats.counter('errors_loc_qp_op_err');
    this.sErrMwBind = this.stats.counter('errors_mw_bind_err');
    this.sErrProt = this.stats.counter('errors_loc_prot_err');
    this.sErrRemInv = this.stats.counter('errors_rem_inv_req_err');
    this.sErrOther = this.stats.counter('errors_other');
    this.sCtxReads = this.stats.counter('ctx_reads');
    this.sXltReads = this.stats.counter('xlt_reads');
    this.sWrites = this.stats.counter('posted_writes');
    this.sXltEntries = this.stats.counter('xlt_entries_written');
    this.sLatency = this.stats.histogram('latency_ps');
    this.sFenced = this.stats.counter('fenced');
    this.sFenceWait = this.stats.histogram('fence_wait_ps');
    this.clockedBy(opts.clock);
  }

  override tick(): void {
    const s = this.rState.q;
    switch (s) {
      case UMR.IDLE: {
        if (this.fenced.length > 0) this.releaseFenced();
        const local = this.req.canPop();
        const remote = this.rinv.req.canPop();
        if (!local && !remote) {
          this.rBusy.set(0);
          return this.sleep(); // woken by a job, or by the fence passing
        }
        const takeRemote = remote && (!local || this.remoteTurn);
        this.remoteTurn = !takeRemote;
        return this.start(takeRemote ? this.rinv.req.pop() : this.req.pop(), takeRemote);
      }
      case UMR.FETCH_MKEY:
      case UMR.FETCH_XLT:
      case UMR.FETCH_REF:
        // one read request per cycle; a full port puts the engine to sleep until the PCIe block pops
        if (this.nIssued < this.reads.length) {
          if (!this.port.req.canPush()) return this.sleep();
          const r = this.reads[this.nIssued++];
          this.port.req.push(r);
          this.nPending++;
          if (r.tag === TAG_XLT || r.tag === TAG_OLD_KLM) this.sXltReads.inc();
          else this.sCtxReads.inc();
        }
        if (this.nIssued === this.reads.length) this.rState.set(s + 1); // the matching WAIT_*
        return;
      case UMR.WAIT_MKEY:
      case UMR.WAIT_XLT:
      case UMR.WAIT_REF:
        while (this.port.resp.canPop()) this.onRead(this.port.resp.pop());
        if (this.nPending > 0) return this.sleep(); // woken by the completion
        if (s === UMR.WAIT_MKEY) return this.afterContexts();
        if (s === UMR.WAIT_XLT) return this.afterXlt();
        return this.rState.set(UMR.CHECK);
      case UMR.CHECK:
        return this.check();
      case UMR.WRITE: {
        if (this.nWritten < this.writes.length) {
          if (!this.port.req.canPush()) return this.sleep();
          const op = this.writes[this.nWritten++];
          // the ICM writer is told when it lands (the caches follow), then tells this engine
          // FREE | KEY on an MR is the driver's pool retiring it: a deregistration
          const dereg = op.index >= 0 && op.index === this.target!.index && this.w!.kind === UMR_KIND.UNBIND && this.target!.kind === MKEY_KIND_MR;
          const tag = this.writer.posting(op.index, op.addr, op.data.length, this, 0, dereg);
          this.port.req.push(dmaWrite(op.addr, op.data, tag, this.writer, true));
          this.sWrites.inc();
          if (op.index < 0) this.sXltEntries.inc(op.entries);
        }
        if (this.nWritten === this.writes.length) this.rState.set(UMR.WAIT_LANDED);
        return;
      }
      case UMR.WAIT_LANDED:
        if (this.nLanded < this.writes.length) return this.sleep(); // woken by the last landing
        return this.rState.set(UMR.DONE);
      case UMR.DONE:
        if (this.fenced.length > 0) this.releaseFenced();
        if (!(this.remote ? this.rinv.resp : this.resp).canPush()) return this.sleep(); // woken when the consumer pops
        return this.finish();
    }
  }

  /** A job is popped: decode it and read the target's context (and a bind's MR context). */
  private start(job: UmrJob, remote: boolean): void {
    this.job = job;
    this.remote = remote;
    this.started = this.sim.now;
    const w = decodeUmrWqe(job.wqe);
    // a remote invalidation is a LOCAL_INV WQE checked by the remote rules (anything else is malformed)
    if (remote) w.kind = w.kind === UMR_KIND.LOCAL_INV ? UMR_KIND.REMOTE_INV : UMR_KIND.INVALID;
    this.w = w;
    this.syn = 0;
    this.target = null;
    this.targetOcto = 0;
    this.mr = null;
    this.list = w.inlineXlt;
    this.oldKlm = null;
    this.oldMr = null;
    this.oldXlt = null;
    this.nFetched = 0;
    if (this.writes.length !== 0) this.writes.length = 0; // (a setter call even on an empty array)
    this.nWritten = 0;
    this.nLanded = 0;
    // the waves' view, only when traced: untraced, each probe is one more object touched per job
    if (this.traced) {
      this.rKey.set(w.key);
      this.rKind.set(w.kind);
      this.rQpn.set(job.qpn & 0xffffff);
      this.rSyndrome.set(0);
      this.rBusy.set(1);
    }
    if (w.kind === UMR_KIND.INVALID) {
      this.syn = CqeSyndrome.LOCAL_QP_OP_ERR; // a malformed WQE is a local QP operation error
      return this.rState.set(UMR.CHECK);
    }
    const reads: DmaReq[] = [];
    this.readCtx(reads, mkeyIndex(w.key), TAG_TARGET);
    if (w.kind === UMR_KIND.BIND_MW && w.bindKlm !== null) this.readCtx(reads, mkeyIndex(w.bindKlm.key), TAG_MR);
    this.beginReads(reads, UMR.FETCH_MKEY);
    if (reads.length === 0) this.afterContexts();
  }

  /** Queues the read of a context, or records an index beyond the ICM table as never allocated (no read). */
  private readCtx(reads: DmaReq[], index: number, tag: number): void {
    if (index < this.icm.mkeyEntries) {
      // into the engine's buffer for this tag: the job's copy of the context (no allocation per read)
      reads.push(dmaRead(this.icm.mkeyContextAddr(index), CTX_BYTES, tag, this.ctxBuf[tag], 0));
      return;
    }
    const e = unallocatedMkey(index); // as the mkey cache answers
    if (tag === TAG_TARGET) this.target = e;
    else if (tag === TAG_MR) this.mr = e;
    else this.oldMr = e;
  }

  private beginReads(reads: DmaReq[], fetchState: number): void {
    this.reads = reads;
    this.nIssued = 0;
    this.nPending = 0;
    this.rState.set(reads.length > 0 ? fetchState : UMR.CHECK);
  }

  private onRead(r: DmaResp): void {
    this.nPending--;
    const d = r.data!;
    const view = this.viewOf(d);
    switch (r.tag) {
      case TAG_TARGET:
        this.target = decodeIcmMkey(view, 0, mkeyIndex(this.w!.key));
        this.targetOcto = mkcTranslationsOctwordSize(view, 0);
        this.setFetched(this.target.index, d);
        return;
      case TAG_MR:
        this.mr = decodeIcmMkey(view, 0, mkeyIndex(this.w!.bindKlm!.key));
        this.setFetched(this.mr.index, d);
        return;
      case TAG_XLT:
        this.list = d;
        return;
      case TAG_OLD_KLM:
        try {
          this.oldKlm = decodeKlm(view, 0);
        } catch {
          this.oldKlm = null; // not a KLM a bind wrote: nothing to release
        }
        return;
      case TAG_OLD_XLT:
        this.oldXlt = d;
        return;
      case TAG_OLD_MR:
        // read after the others: the newest copy of its index, should it be the bind's MR too
        this.oldMr = decodeIcmMkey(view, 0, mkeyIndex(this.oldKlm!.key));
        this.setFetched(this.oldMr.index, d);
        return;
    }
  }

  /** The contexts are in: the rules that need only them, then the list or the released window's KLM. */
  private afterContexts(): void {
    const w = this.w!;
    const t = this.target!;
    const syn = checkUmr(w, this.job!, t, this.mr, this.policy);
    if (syn !== 0) {
      this.syn = syn;
      return this.rState.set(UMR.CHECK);
    }
    const reads: DmaReq[] = [];
    if (w.ptr !== null) {
      // Non-inline translations: the data segment's address is the host physical (DMA) address
      // of the driver's descriptor list; its lkey (the PD's local DMA lkey / reserved lkey) is
      // taken to mean physical addressing and is not looked up.
      const p = checkPointer(w, this.memBytes);
      if (p !== 0) {
        this.syn = p;
        return this.rState.set(UMR.CHECK);
      }
      reads.push(dmaRead(w.ptr.addr, w.xltBytes, TAG_XLT));
    } else if (releasesWindow(w, t, this.policy) && t.xltCount >= 1 && t.xltAddr !== 0) {
      // the window's one KLM names the MR it counts on
      reads.push(dmaRead(t.xltAddr, 16, TAG_OLD_KLM));
    }
    if (reads.length === 0) return this.afterXlt(); // an inline list: on to what it replaces
    this.beginReads(reads, UMR.FETCH_XLT);
  }

  /** After the list / KLM: read the released MR's context, or the entries an update replaces. */
  private afterXlt(): void {
    const reads: DmaReq[] = [];
    if (this.oldKlm !== null) this.readCtx(reads, mkeyIndex(this.oldKlm.key), TAG_OLD_MR);
    const old = this.oldXltRange();
    if (old > 0) reads.push(dmaRead(this.target!.xltAddr + this.w!.xltOffsetOcto * 16, old, TAG_OLD_XLT));
    this.beginReads(reads, UMR.FETCH_REF);
  }

  /**
   * Bytes of old entries a translation update replaces, read to tell a zap (an entry that
   * translated, rewritten) from a map (only when there is a fence to wait for), else 0.
   */
  private oldXltRange(): number {
    const w = this.w!;
    const t = this.target!;
    if (this.fence === null || w.kind !== UMR_KIND.XLT_UPDATE || this.list === null || t.xltAddr === 0) return 0;
    const at = w.xltOffsetOcto * 16;
    return Math.max(0, Math.min(this.list.length, this.icm.xltSize(t.xltAddr) - at));
  }

  /** Whether the job's writes take away a translation DMA may have used (it completes behind the fence). */
  private invalidates(w: UmrWqe, t: MkeyEntry): boolean {
    switch (w.kind) {
      // a consumer's LOCAL_INV: once it completes the consumer may unmap the pages (a kernel
      // ULP's ib_dma_unmap_sg); per mkey, so FRWR I/Os through other MRs still pipeline
      case UMR_KIND.LOCAL_INV:
      case UMR_KIND.UNBIND:
        return true; // the MR cache's revoke (FREE | KEY), a window's unbind
      case UMR_KIND.XLT_UPDATE: {
        const old = this.oldXlt;
        const list = this.list;
        if (old === null || list === null) return false;
        const eb = entryBytes(t.accessMode);
        for (let e = 0; e + eb <= old.length; e += eb) {
          let was = false;
          let same = true;
          for (let i = e; i < e + eb; i++) {
            if (old[i] !== 0) was = true;
            if (old[i] !== list[i]) same = false;
          }
          if (was && !same) return true;
        }
        return false;
      }
      default:
        return false;
    }
  }

  /**
   * A translation update that failed "fail if free" (umr.c:594-597) on a target that a LOCAL_INV
   * just freed: the driver takes that failure as leave to let the pages go (odp.c:327-340), so
   * it completes behind the same fence as that LOCAL_INV (which may still be held).
   */
  private failedOnFree(w: UmrWqe, t: MkeyEntry | null): boolean {
    return w.kind === UMR_KIND.XLT_UPDATE && t !== null && t.allocated && t.free && (w.flags & UmrCtrlFlag.CHECK_NOT_FREE) !== 0;
  }

  /**
   * Completions whose fence point has passed go out (each mkey's wait is its own: not in the
   * order they were parked), while their queue has room.
   */
  private releaseFenced(): void {
    const f = this.fenced;
    let kept = 0;
    for (let i = 0; i < f.length; i++) {
      const j = f[i];
      const out = j.remote ? this.rinv.resp : this.resp;
      if (this.fence!.passed(j.point) && out.canPush()) {
        out.push(j.done);
        this.sFenceWait.add(this.sim.now - j.started);
      } else f[kept++] = j; // not passed, or no room (woken when the consumer pops)
    }
    f.length = kept;
    this.rFenced.set(kept);
  }

  /** CHECK: the translation rules, then the plan of writes (none on error). */
  private check(): void {
    if (this.syn === 0) this.plan();
    if (this.traced) this.rSyndrome.set(this.syn);
    this.rState.set(this.syn === 0 && this.writes.length > 0 ? UMR.WRITE : UMR.DONE);
  }

  private plan(): void {
    const w = this.w!;
    const t = this.target!;
    const binds = bindsSomething(w, t);
    let xlt: XltPlan | null = null;
    if (this.list !== null && (w.kind === UMR_KIND.REG_MR || w.kind === UMR_KIND.XLT_UPDATE || binds)) {
      const r = checkTranslations(w, t, this.targetOcto, this.icm.xltSize(t.xltAddr), this.list);
      if (typeof r === 'number') {
        this.syn = r;
        return;
      }
      xlt = r;
    }
    const writes = this.writes;
    // 1. a bind counts the window on its MR first: a deregistration in between sees it bound
    if (binds) writes.push(this.ctxWrite(this.mr!.index, (_c, p) => { p.mwCount = (p.mwCount ?? 0) + 1; }));
    // 2. the translations, before the context that makes them reachable
    if (xlt !== null && xlt.count > 0) writes.push(this.xltWrite(t, xlt, this.list!));
    // 3. the target's context
    if (this.targetChanges(w, t, xlt)) {
      const x = xlt;
      const kind = w.kind;
      writes.push(
        this.ctxWrite(t.index, (c, p) => {
          applyMask(c, p, w);
          if (kind === UMR_KIND.BIND_MW && !binds) c.free = true; // a type-1 bind of length 0 unbinds
          // an ODP table's (pg_access) zero entries are "not present", not padding: they count,
          // as CREATE_MKEY with pg_access counts its whole table (icm_writer.ts createMkey)
          if (kind === UMR_KIND.REG_MR && p.pgAccess) p.xltCount = x === null ? 0 : x.first + x.count;
          else if (kind === UMR_KIND.REG_MR || binds) p.xltCount = x === null ? 0 : x.first + x.used;
          else if (kind === UMR_KIND.XLT_UPDATE && x !== null) p.xltCount = Math.max(p.xltCount, x.first + x.used);
        }),
      );
    }
    // 4. the MR a released window counted on
    const old = this.oldMr;
    if (old !== null && old.allocated && releasesWindow(w, t, this.policy)) {
      writes.push(this.ctxWrite(old.index, (_c, p) => { p.mwCount = Math.max(0, (p.mwCount ?? 0) - 1); }));
    }
  }

  /** Whether the target's context is rewritten (an invalidation of a FREE target changes nothing). */
  private targetChanges(w: UmrWqe, t: MkeyEntry, xlt: XltPlan | null): boolean {
    switch (w.kind) {
      case UMR_KIND.REG_MR:
      case UMR_KIND.BIND_MW:
        return true;
      case UMR_KIND.XLT_UPDATE:
        return w.mask !== 0 || xlt !== null;
      case UMR_KIND.LOCAL_INV:
      case UMR_KIND.REMOTE_INV:
        return !t.free;
      case UMR_KIND.UNBIND:
        // a type-1 unbind, and an MR's retire (umr_ops.ts), always take the new tag
        return t.kind === MKEY_KIND_MW1 || t.kind === MKEY_KIND_MR || !t.free;
      default:
        return false;
    }
  }

  /** A DataView over `d`: the kept one when `d` is one of the job's context buffers (a context read lands there). */
  private viewOf(d: Uint8Array): DataView {
    for (let i = 0; i < this.ctxBuf.length; i++) if (d === this.ctxBuf[i]) return this.ctxView[i];
    return new DataView(d.buffer, d.byteOffset, d.byteLength);
  }

  /** Records the context bytes `d` read of mkey `index` (a second read of it replaces the first, as Map.set did). */
  private setFetched(index: number, d: Uint8Array): void {
    for (let i = 0; i < this.nFetched; i++) {
      if (this.fetchedIndex[i] === index) {
        this.fetchedBytes[i] = d;
        return;
      }
    }
    this.fetchedIndex[this.nFetched] = index;
    this.fetchedBytes[this.nFetched++] = d;
  }

  /** The context bytes read of mkey `index` this job, or undefined. */
  private fetchedOf(index: number): Uint8Array | undefined {
    for (let i = 0; i < this.nFetched; i++) if (this.fetchedIndex[i] === index) return this.fetchedBytes[i];
    return undefined;
  }

  /**
   * A context write: `edit` applied to the engine's copy of the context as it read it (and as
   * earlier writes of this job left it); the write carries a snapshot of the result.
   */
  private ctxWrite(index: number, edit: (c: MkeyContext, p: IcmPrivate) => void): PlannedWrite {
    const bytes = this.fetchedOf(index);
    if (bytes === undefined) throw new Error(`${this.path}: a write of mkey index ${index}, whose context was not read`);
    const view = this.viewOf(bytes);
    const c = decodeMkeyContext(view, 0);
    const p = readIcmPrivate(view, 0);
    edit(c, p);
    encodeIcmMkey(view, 0, c, p);
    return { addr: this.icm.mkeyContextAddr(index), data: bytes.slice(), index, entries: 0 };
  }

  /** The translations: the list's own bytes (ICM holds entries in the same format), clipped to the table. */
  private xltWrite(t: MkeyEntry, x: XltPlan, list: Uint8Array): PlannedWrite {
    const eb = entryBytes(t.accessMode);
    return { addr: t.xltAddr + x.first * eb, data: list.slice(0, x.count * eb), index: -1, entries: x.count };
  }

  /** @internal A posted write of this job has landed and the caches have followed it. */
  fire(): void {
    this.nLanded++;
    if (this.nLanded === this.writes.length) this.wake();
  }

  /** DONE: the completion (or, for an invalidation, its place behind the fence), the statistics, and back to IDLE. */
  private finish(): void {
    const w = this.w!;
    const syn = this.syn;
    const done = { tag: this.job!.tag, syndrome: syn };
    const fence = this.fence;
    if (fence !== null && !this.remote && (syn === 0 ? this.writes.length > 0 && this.invalidates(w, this.target!) : this.failedOnFree(w, this.target))) {
      const point = fence.mark(this.target!.index);
      if (!fence.passed(point)) {
        // held: later jobs go on meanwhile (IDLE); the fence wakes the engine when it passes
        this.fenced.push({ point, remote: false, done, started: this.sim.now });
        this.rFenced.set(this.fenced.length);
        this.sFenced.inc();
        fence.notify(point, this.fenceWake);
      } else this.resp.push(done);
    } else (this.remote ? this.rinv.resp : this.resp).push(done);
    this.sJobs.inc();
    this.sByKind[w.kind]?.inc();
    if (syn !== 0) {
      this.sErrors.inc();
      if (syn === CqeSyndrome.LOCAL_QP_OP_ERR) this.sErrQpOp.inc();
      else if (syn === CqeSyndrome.MW_BIND_ERR) this.sErrMwBind.inc();
      else if (syn === CqeSyndrome.LOCAL_PROT_ERR) this.sErrProt.inc();
      else if (syn === CqeSyndrome.REMOTE_INVAL_REQ_ERR) this.sErrRemInv.inc();
      else this.sErrOther.inc();
    }
    this.sLatency.add(this.sim.now - this.started);
    this.job = null;
    this.w = null;
    this.target = null;
    this.mr = null;
    this.list = null;
    this.oldKlm = null;
    this.oldMr = null;
    this.oldXlt = null;
    // the job's reads, writes and contexts go (the arrays and the map are reused by the next job)
    this.reads = NO_READS;
    if (this.writes.length !== 0) this.writes.length = 0; // (a setter call even on an empty array)
    this.nFetched = 0;
    this.rState.set(UMR.IDLE);
  }
}

