/**
 * A pair of verbs implementations driven in lock step: the untimed reference model (VerbsModel,
 * src/model/verbs) and the cycle model behind the public API (Testbed with two adapters). Used by
 * the model-based property test (test/driver/model_based.test.ts).
 *
 * Every operation is described by plain data (the `*Spec` types below) that names objects by
 * slot (the n-th MR, window or QP of the pair) and addresses by (object, position), so the same
 * spec means the same thing on both sides. `VerbsPair.exec(spec)` performs it on both sides, runs
 * both to quiescence and compares everything observable: the synchronous outcome (success or
 * errno), the completions of every QP (wrId, status, opcode, byteLen, flags, immData,
 * invalidatedRkey), the QP states, the software view of every MR and window (keys, iova, length)
 * and the bytes of every host buffer. A difference throws a `PairMismatch` naming the command.
 *
 * Keys: the two sides number mkey indices differently (the model never reuses an index, the
 * firmware hands out the lowest free one) and may start their tag counters differently. The pair
 * records, per object, the testbed index and the tag difference at creation; a model key maps to
 * the testbed key of the same object (`tbKey`). A model key that names no object maps to an index
 * no testbed object has either (`BOGUS_INDEX`); so does the key of a destroyed object whose
 * testbed index now holds another object (both sides then see "names nothing"). (A deregistered
 * pooled user MR's index goes back to the driver's mkey pool, FREE under a fresh tag the driver
 * never handed out for it: a model key of the dead MR that happens to map onto that tag, e.g. a
 * tag + 1 variant or an updateKey tag, maps to BOGUS_INDEX too, since no handle ever had it.)
 *
 * Host addresses are identical on both sides: buffers are allocated in the testbed's hosts and
 * the model maps the same virtual ranges (`VerbsModel.mapHost`). Addresses the host itself
 * touches (regMr, mapSg, inline data) are kept inside the buffers or their guard gaps, since the
 * testbed's host also holds queues the model does not have.
 *
 * Quiescence: the model runs to completion; the testbed runs until every QP has as many
 * completions as the model's (waiting on each CQ), every send queue has executed every WQE the
 * testbed accepted, and posted DMA writes have landed. The generator never lets a SEND wait for a
 * receive (each SEND / WRITE_WITH_IMM posts one on its responder first), so no RNR retry loops.
 *
 * Completions are compared per QP and direction (send / receive), in order; across QPs and
 * between the two directions of a QP the order is not specified.
 *
 * Destroy verbs: a destroyed QP (or CQ) stays in its slot until its pair is re-created, so later
 * commands name it; it has no state, send queue or completions to compare any more. A destroy is
 * issued only at quiescence (every command settles both sides first): with work in flight the
 * cycle model's outcome depends on timing (how far the work got before DESTROY_QP executed),
 * which the untimed model cannot reproduce. The setup PDs are never deallocated (createPair
 * needs them): the rare deallocPd that would succeed on one is skipped.
 */
import { SIZE_MAX } from '../../src/index.ts';
import {
  Testbed,
  VerbsError,
  type Context,
  type HcaConfig,
  type Cq,
  type Mr,
  type Mw,
  type Pd,
  type Qp,
  type RecvWr,
  type SendWr,
  type Sge,
  type TraceOptions,
  type WorkCompletion,
} from '../../src/index.ts';
import {
  VerbsModel,
  VerbsModelError,
  type ModelCq,
  type ModelMr,
  type ModelMw,
  type ModelPd,
  type ModelQp,
  type ModelRecvWr,
  type ModelSendWr,
  type ModelSge,
  type ModelWc,
} from '../../src/model/verbs/index.ts';
import { keyIndex, keyTag, makeKey } from '../../src/model/keys.ts';
import { readMkey } from '../../src/rtl/firmware/icm_writer.ts';

// ----------------------------------------------------------------------------------------------
// Layout of the pair (the setup, identical on both sides)
// ----------------------------------------------------------------------------------------------

/** Adapters of the pair. */
export const HCAS = 2;
/** PDs per adapter. */
export const PDS_PER_HCA = 2;
/** Host buffers per adapter (bytes); buffer p is registered in PD p at setup, the last is not. */
export const BUFFER_SIZES = [16384, 16384, 8192] as const;
/** Pages of each adapter's ODP buffer. */
export const ODP_BUF_PAGES = 4;
/**
 * RC QP pairs: `a` on (hca, pd) connected to `b`, with their path MTU (messages of several
 * packets). Pair 2 is a loopback pair on adapter 0 with a 2-deep send queue (a batch of 3 work
 * requests meets ENOMEM).
 */
export const QP_PAIRS = [
  { a: { hca: 0, pd: 0 }, b: { hca: 1, pd: 0 }, maxSendWr: 16, mtu: 4096 },
  { a: { hca: 1, pd: 1 }, b: { hca: 0, pd: 1 }, maxSendWr: 16, mtu: 1024 },
  { a: { hca: 0, pd: 0 }, b: { hca: 0, pd: 1 }, maxSendWr: 2, mtu: 256 },
] as const;
/** Number of QP slots (two per pair: slot 2p is `a`, 2p+1 is `b`). */
export const QP_SLOTS = QP_PAIRS.length * 2;
/**
 * Requester slots whose work touches disjoint memory and keys when each uses only home keys:
 * pair 0's a side (adapter 0, PD 0 -> adapter 1, PD 0) and pair 1's (adapter 1, PD 1 -> adapter 0,
 * PD 1). Their batches may run concurrently and still have one right answer.
 */
export const CONCURRENT_SLOTS: readonly number[] = [0, 2];
const MAX_SGE = 4;
const MAX_RECV_WR = 16;
const CQE = 64;
/** maxNumSg of the setup's fast-registration MRs. */
const SETUP_MAX_NUM_SG = 4;
/** Access of the setup MRs: every data-path right and MW_BIND. */
export const SETUP_ACCESS = 1 | 2 | 4 | 8 | 16;
/** An mkey index no object has on either side (the model never gets this far, the firmware
 * allocates lowest first). */
export const BOGUS_INDEX = 0xfff0;
/** An mkey index beyond the adapter's ICM (the pair sets config.icmMkeyEntries to 2^16). */
export const BEYOND_INDEX = 0x123456;
/** Simulated time a command may take to complete (RETRY_EXC_ERR takes 8 ACK timeouts, ~0.54 s). */
const SETTLE_PS = 3e12;
/** Unmapped bytes after every host allocation (src/rtl/memory/host_space.ts GUARD_GAP). */
const GUARD_GAP = 4096;

// ----------------------------------------------------------------------------------------------
// Specs: what a command does, as plain data
// ----------------------------------------------------------------------------------------------

/** A key relative to an object's handle: its current key, or its tag one less / one more. */
export type KeyVariant = 'cur' | 'prev' | 'next';

/**
 * A key, resolved on the QP where it is used (the requester for lkeys, the responder for rkeys):
 * the setup MR of the QP's PD, the `pick`-th MR or window of the QP's adapter
 * (modulo their number; destroyed ones included), a key whose index names nothing, or one beyond
 * the ICM.
 */
export interface KeyRef {
  /**
   * home: the setup MR of the QP's own PD (every right); live: an MR or window of the adapter
   * that is VALID now (model view); mr / mw: any of the adapter's.
   */
  kind: 'home' | 'live' | 'mr' | 'mw' | 'odp' | 'bogus' | 'beyond';
  pick: number;
  variant: KeyVariant;
}

/** A position in an object's range for an access of `len` bytes. */
export type Pos =
  | { kind: 'in'; permille: number } // inside: start + permille/1000 of (span - len)
  | { kind: 'end'; delta: number } // the access ends `delta` bytes after the span's end
  | { kind: 'abs'; off: number }; // start + off (anything)

/** An SGE: `len` bytes at `pos` of the object `key` names, through that key. */
export interface SgeSpec {
  key: KeyRef;
  pos: Pos;
  len: number;
}

/** A remote address and key (the responder's adapter). */
export interface RemoteSpec {
  key: KeyRef;
  pos: Pos;
}

/** A send work request. */
export type WrSpec =
  | { op: 'SEND' | 'SEND_WITH_IMM'; sges: SgeSpec[]; inline: boolean; recv: SgeSpec[]; imm: number; signaled: boolean }
  | { op: 'SEND_WITH_INV'; sges: SgeSpec[]; inline: boolean; recv: SgeSpec[]; inv: KeyRef; signaled: boolean }
  | { op: 'RDMA_WRITE'; sges: SgeSpec[]; inline: boolean; remote: RemoteSpec; signaled: boolean }
  | { op: 'RDMA_WRITE_WITH_IMM'; sges: SgeSpec[]; inline: boolean; remote: RemoteSpec; recv: SgeSpec[]; imm: number; signaled: boolean }
  | { op: 'RDMA_READ'; sges: SgeSpec[]; remote: RemoteSpec; signaled: boolean }
  /** `inv`: the local key to invalidate (generated only when the pair has config.readWithInvalidate). */
  | { op: 'RDMA_READ_WITH_INV'; sges: SgeSpec[]; remote: RemoteSpec; inv: KeyRef; signaled: boolean }
  | {
      op: 'ATOMIC_CMP_AND_SWP' | 'ATOMIC_FETCH_AND_ADD';
      sges: SgeSpec[];
      remote: RemoteSpec;
      /** Round the remote address down to 8 bytes (else it stays as computed, often misaligned). */
      align: boolean;
      /** CMP_AND_SWP: compare with what the target holds now (so it swaps), else `compareAdd`. */
      peek: boolean;
      compareAdd: number;
      swap: number;
      signaled: boolean;
    }
  | { op: 'LOCAL_INV'; key: KeyRef; signaled: boolean }
  | {
      op: 'REG_MR';
      mr: number;
      /** The handle's key, its tag + 1, or the index of another object (EINVAL). */
      key: 'cur' | 'next' | 'otherIndex';
      access: number;
      signaled: boolean;
    }
  | {
      op: 'BIND_MW';
      mw: number;
      /** The MR to bind to (an MR of the QP's adapter, or the window's PD's setup MR), or none. */
      mr: number | 'home' | null;
      pos: Pos;
      len: number;
      access: number;
      /** incRkey of the handle's key (as an application does), the same key, or another index. */
      key: 'inc' | 'same' | 'otherIndex';
      signaled: boolean;
    };

/** Everything the pair can do. Objects are picked modulo the number of candidates. */
export type Spec =
  | { kind: 'regMr'; hca: number; pd: number; buf: number; off: number; len: number; fit: boolean; access: number }
  | { kind: 'allocMr'; hca: number; pd: number; type: 'MEM_REG' | 'SG_GAPS'; maxNumSg: number }
  /** On-demand paging, over the adapter's ODP buffer (no pinned MR covers it): an ODP MR of `pages` pages from `page` (+ `off` bytes). */
  | { kind: 'regOdp'; hca: number; pd: number; page: number; pages: number; off: number; access: number; implicit?: boolean }
  /** The process drops (madvise DONTNEED) or unmaps (munmap) pages of the ODP buffer. */
  | { kind: 'madvise' | 'munmap'; hca: number; page: number; pages: number }
  /** adviseMr of a whole ODP MR (the `mr`-th), flushed. */
  | { kind: 'prefetch'; mr: number; advice: 'PREFETCH' | 'PREFETCH_WRITE' | 'PREFETCH_NO_FAULT' }
  | { kind: 'mapSg'; mr: number; elems: { buf: number; off: number; len: number; fit: boolean }[]; pageSize: number }
  | { kind: 'updateKey'; mr: number; key8: number }
  | { kind: 'dereg'; mr: number }
  | { kind: 'allocMw'; hca: number; pd: number; type: number }
  | { kind: 'deallocMw'; mw: number }
  | {
      kind: 'bindMw';
      qp: number;
      mw: number;
      mr: number | 'home' | null;
      pos: Pos;
      len: number;
      access: number;
      signaled: boolean;
    }
  | { kind: 'postRecv'; qp: number; sges: SgeSpec[] }
  /** `fresh`: first re-create the QP's pair if either end is in ERR. */
  | { kind: 'postSend'; qp: number; wrs: WrSpec[]; fresh: boolean }
  /**
   * Work requests posted on several QPs before anything runs, so the adapters execute them at
   * once (the pipeline's concurrency across QPs). The generator keeps the QPs' effects disjoint
   * (CONCURRENT_SLOTS, home keys only): IB orders nothing across QPs, so only such batches have
   * one right answer.
   */
  | { kind: 'postMany'; posts: { qp: number; wrs: WrSpec[] }[] }
  | { kind: 'renewPair'; pair: number }
  /** DESTROY_QP of the slot's QP (EINVAL once destroyed); with `cq`, then its CQ too. */
  | { kind: 'destroyQp'; qp: number; cq: boolean }
  /** DESTROY_CQ of the slot's QP's CQ: EBUSY while that QP lives, EINVAL once destroyed. */
  | { kind: 'destroyCq'; qp: number }
  /** A PD beyond the setup's (regMr, allocMr and allocMw reach it with `pd` >= PDS_PER_HCA). */
  | { kind: 'allocPd'; hca: number }
  /** DEALLOC_PD of the adapter's PD `pd` (as regMr picks it): EBUSY while in use, EINVAL once gone. */
  | { kind: 'deallocPd'; hca: number; pd: number }
  /**
   * Fast registration in one go, on a QP of the MR's adapter and PD: a fast-registration MR of the
   * QP's PD (allocMr when there is none), mapSg, then REG_MR with its current key.
   */
  | {
      kind: 'fastReg';
      qp: number;
      mr: number;
      type: 'MEM_REG' | 'SG_GAPS';
      elems: { buf: number; off: number; len: number; fit: boolean }[];
      access: number;
      signaled: boolean;
      /**
       * What follows the REG_MR in the same postSend (the small fence orders them): nothing; an
       * RDMA_WRITE to the peer's setup MR gathering through the new key; or a LOCAL_INV of it then
       * that write (LOC_PROT_ERR; posted once the LOCAL_INV completed, since nothing orders them
       * on mlx5: racingFrom).
       */
      then: 'none' | 'use' | 'invUse';
    }
  /**
   * A window of the QP's PD (allocMw when there is none) bound to an MR of that PD (the setup MR,
   * or a VALID one): type 1 by bindMw, type 2 by BIND_MW on the QP.
   */
  | { kind: 'bindLive'; qp: number; mw: number; type: 1 | 2; mr: number; pos: Pos; len: number; access: number; signaled: boolean };

/** Short text of a spec (the command's toString). */
export function specText(s: Spec): string {
  return JSON.stringify(s);
}

// ----------------------------------------------------------------------------------------------
// Records of the objects on both sides
// ----------------------------------------------------------------------------------------------

interface BufRec {
  hca: number;
  addr: number;
  length: number;
}

interface MrRec {
  id: number;
  hca: number;
  /** The testbed's mkey index. */
  tIndex: number;
  pd: number;
  type: 'USER' | 'MEM_REG' | 'SG_GAPS';
  m: ModelMr;
  t: Mr;
  /** testbed tag - model tag, at creation (mod 256). */
  tagDelta: number;
  destroyed: boolean;
  /** A REG_MR with REMOTE_ATOMIC was posted for it. */
  atomicEver?: boolean;
  /** An ODP MR (regOdp): never bound to a window (a fault through a window is not handled). */
  odp?: boolean;
}

interface MwRec {
  id: number;
  hca: number;
  tIndex: number;
  pd: number;
  type: 1 | 2;
  m: ModelMw;
  t: Mw;
  tagDelta: number;
  destroyed: boolean;
}

interface QpRec {
  slot: number;
  name: string;
  hca: number;
  pd: number;
  m: ModelQp;
  t: Qp;
  mcq: ModelCq;
  tcq: Cq;
  /** Send WQEs the testbed accepted (to know when its send queue is drained). */
  postedT: number;
  /** destroyQp succeeded: the QP has no state, queue or completions any more. */
  destroyed: boolean;
  /** destroyCq of its CQ succeeded: nothing to poll. */
  cqDestroyed: boolean;
  /** settle(): the model's completions and the testbed's. */
  expect?: ModelWc[];
  got?: WorkCompletion[];
}

/** A difference between the two sides. */
export class PairMismatch extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PairMismatch';
  }
}

/** A synchronous outcome: ok, or the errno thrown. */
type Outcome<T> = { ok: true; value: T } | { ok: false; errno: string; message: string };

/** A completion in the form both sides are compared in. */
interface NormWc {
  wrId: number;
  status: string;
  opcode: string;
  byteLen: number;
  flags: string;
  immData: number | undefined;
  invalidatedRkey: number | undefined;
}

/** Options of a pair. */
export interface PairOptions {
  /** The testbed's seed (physical page placement etc.). */
  seed?: number;
  /** Testbed configuration (e.g. tiny caches, to stress eviction and coherence). */
  config?: Partial<HcaConfig>;
  /** Trace the testbed (a VCD and .gtkw). */
  trace?: TraceOptions;
}

/** Wall-clock accounting of a pair (for the test's report). */
export interface PairTimes {
  setupMs: number;
  commands: number;
  commandMs: number;
}

// ----------------------------------------------------------------------------------------------
// The pair
// ----------------------------------------------------------------------------------------------

export class VerbsPair {
  readonly m: VerbsModel;
  readonly tb: Testbed;
  private readonly mPds: ModelPd[][] = [];
  private readonly tPds: Pd[][] = [];
  private readonly ctxs: Context[] = [];
  readonly bufs: BufRec[] = [];
  /** Per adapter: the buffer ODP MRs, madvise and munmap use (no pinned MR covers it). */
  readonly odpBufs: BufRec[] = [];
  /** Per adapter: the page addresses the sequence munmapped (they are never mapped again). */
  private readonly munmapped: Set<number>[] = Array.from({ length: HCAS }, () => new Set<number>());
  readonly mrs: MrRec[] = [];
  readonly mws: MwRec[] = [];
  readonly qps: QpRec[] = [];
  /** Every QP created, those createPair replaced included (they still hold their PDs and CQs). */
  private readonly everQps: QpRec[] = [];
  /** Per adapter: model mkey index -> record. */
  private readonly byModelIndex: Map<number, MrRec | MwRec>[] = [];
  private nextWrId = 1;
  private nextObjId = 0;
  /** Commands executed so far (for failure messages). */
  readonly log: string[] = [];
  readonly times: PairTimes = { setupMs: 0, commands: 0, commandMs: 0 };
  /** Outcome counts (coverage): "call errno", "opcode status" of completions. */
  readonly counts = new Map<string, number>();
  /** wrId -> what its key named (coverage counts). */
  private readonly wrLabels = new Map<number, string>();

  private constructor(opts: PairOptions) {
    // RDMA_READ_WITH_INV is accepted by both sides or by neither (API.md config.readWithInvalidate)
    this.m = new VerbsModel({ hcas: HCAS, readWithInvalidate: opts.config?.readWithInvalidate ?? false });
    this.tb = new Testbed({
      hcas: HCAS,
      seed: opts.seed ?? 1,
      // an ICM mkey table of 2^16 entries, so BEYOND_INDEX lies past it (the default table has 2^24)
      config: { icmMkeyEntries: 2 ** 16, ...opts.config },
      ...(opts.trace ? { trace: opts.trace } : {}),
    });
    for (let h = 0; h < HCAS; h++) this.byModelIndex.push(new Map());
  }

  /** Builds both sides: adapters, PDs, buffers (same bytes), setup MRs, CQs and connected QPs. */
  static async create(opts: PairOptions = {}): Promise<VerbsPair> {
    const t0 = performance.now();
    const p = new VerbsPair(opts);
    await p.tb.run(async () => {
      for (let h = 0; h < HCAS; h++) {
        const ctx = await p.tb.openDevice(h);
        p.ctxs.push(ctx);
        const mp: ModelPd[] = [];
        const tp: Pd[] = [];
        for (let i = 0; i < PDS_PER_HCA; i++) {
          mp.push(p.m.allocPd(h));
          tp.push(await ctx.allocPd());
        }
        p.mPds.push(mp);
        p.tPds.push(tp);
        BUFFER_SIZES.forEach((size, b) => {
          const { addr } = p.tb.host(h).alloc(size);
          p.m.mapHost(h, addr, size);
          const bytes = fillPattern(size, h, b);
          p.tb.host(h).write(addr, bytes);
          p.m.memWrite(h, addr, bytes);
          p.bufs.push({ hca: h, addr, length: size });
        });
        {
          const { addr } = p.tb.host(h).alloc(ODP_BUF_PAGES * 4096);
          p.m.mapHost(h, addr, ODP_BUF_PAGES * 4096);
          const bytes = fillPattern(ODP_BUF_PAGES * 4096, h, 7);
          p.tb.host(h).write(addr, bytes);
          p.m.memWrite(h, addr, bytes);
          p.odpBufs.push({ hca: h, addr, length: ODP_BUF_PAGES * 4096 });
        }
      }
      // setup MRs: buffer p of each adapter in PD p, every right
      for (let h = 0; h < HCAS; h++) {
        for (let pd = 0; pd < PDS_PER_HCA; pd++) {
          const buf = p.buf(h, pd);
          const mm = p.m.regMr(p.mPds[h][pd], buf.addr, buf.length, SETUP_ACCESS);
          const tm = await p.tPds[h][pd].regMr(buf.addr, buf.length, SETUP_ACCESS);
          p.addMr(h, pd, 'USER', mm, tm);
        }
      }
      // per adapter: two fast-registration MRs and a window of each type, FREE
      for (let h = 0; h < HCAS; h++) {
        for (const [pd, type] of [[0, 'MEM_REG'], [1, 'SG_GAPS']] as const) {
          p.addMr(h, pd, type, p.m.allocMr(p.mPds[h][pd], type, SETUP_MAX_NUM_SG), await p.tPds[h][pd].allocMr(type, SETUP_MAX_NUM_SG));
        }
        for (const type of [1, 2] as const) p.addMw(h, 0, type, p.m.allocMw(p.mPds[h][0], type), await p.tPds[h][0].allocMw(type));
      }
      for (let i = 0; i < QP_PAIRS.length; i++) await p.createPair(i);
    });
    p.times.setupMs = performance.now() - t0;
    return p;
  }

  /** Buffer `b` of adapter `h`. */
  buf(h: number, b: number): BufRec {
    return this.bufs[h * BUFFER_SIZES.length + (b % BUFFER_SIZES.length)];
  }

  /** Performs `spec` on both sides, runs both to quiescence and compares them. */
  async exec(spec: Spec): Promise<void> {
    const text = specText(spec);
    this.log.push(text);
    const t0 = performance.now();
    try {
      await this.tb.run(async () => {
        const faults = this.odpFaults();
        await this.perform(spec);
        await this.settle();
        await this.compareState();
        const d = this.odpFaults() - faults;
        if (d > 0) this.count(`odp faults (${spec.kind})`, d);
      });
    } catch (e) {
      if (e instanceof PairMismatch) {
        throw new PairMismatch(`${e.message}\n  in command #${this.log.length}: ${text}`);
      }
      throw new Error(`command #${this.log.length} threw: ${text}\n  ${(e as Error)?.stack ?? String(e)}`);
    } finally {
      this.times.commands++;
      this.times.commandMs += performance.now() - t0;
    }
  }

  /** Page faults raised so far on both adapters (coverage). */
  private odpFaults(): number {
    let n = 0;
    for (let h = 0; h < HCAS; h++) {
      // the page-fault unit's own statistics (the testbed's whole set, twice a command, was 6% of the run)
      const f = this.tb.hca(h).pagefault.stats.toJSON().faults;
      n += typeof f === 'number' ? f : 0;
    }
    return n;
  }

  /** Flushes the testbed's trace files. */
  async close(): Promise<void> {
    await this.tb.close();
  }

  // --------------------------------------------------------------------------------------------
  // Operations
  // --------------------------------------------------------------------------------------------

  private async perform(s: Spec): Promise<void> {
    switch (s.kind) {
      case 'regMr': {
        const h = s.hca % HCAS;
        const pd = this.pdIndex(h, s.pd);
        const b = this.buf(h, s.buf);
        let addr = this.hostAddr(h, b.addr + s.off);
        const len = fit(b, addr, s.len, s.fit);
        const r = await this.both(
          () => this.m.regMr(this.mPds[h][pd], addr, len, s.access),
          () => this.tPds[h][pd].regMr(addr, len, s.access),
          'regMr',
        );
        if (r) this.addMr(h, pd, 'USER', r[0], r[1]);
        return;
      }
      case 'allocMr': {
        const h = s.hca % HCAS;
        const pd = this.pdIndex(h, s.pd);
        const r = await this.both(
          () => this.m.allocMr(this.mPds[h][pd], s.type, s.maxNumSg),
          () => this.tPds[h][pd].allocMr(s.type, s.maxNumSg),
          'allocMr',
        );
        if (r) this.addMr(h, pd, s.type, r[0], r[1]);
        return;
      }
      case 'mapSg': {
        const fast = this.mrs.filter((r) => r.type !== 'USER');
        // mostly a fast-registration MR (s.mr odd: any MR)
        const mr = s.mr % 2 === 0 && fast.length > 0 ? fast[(s.mr >> 1) % fast.length] : this.mrs[(s.mr >> 1) % this.mrs.length];
        let elems = s.elems.map((e) => {
          const b = this.buf(mr.hca, e.buf);
          const addr = this.hostAddr(mr.hca, b.addr + e.off);
          return { addr, length: fit(b, addr, e.len, e.fit) };
        });
        const pageSize = s.pageSize;
        const r = await this.both(
          () => this.m.mapSg(mr.m, elems, pageSize),
          () => mr.t.mapSg(elems, pageSize),
          'mapSg',
        );
        if (r && r[0] !== r[1]) this.fail(`mapSg returned ${r[0]} (model) vs ${r[1]} (testbed)`);
        return;
      }
      case 'updateKey': {
        const mr = this.mrs[s.mr % this.mrs.length];
        await this.both(
          () => this.m.updateKey(mr.m, s.key8),
          () => mr.t.updateKey((s.key8 + mr.tagDelta) & 0xff),
          'updateKey',
        );
        return;
      }
      case 'dereg': {
        const mr = this.mrs[s.mr % this.mrs.length];
        const r = await this.both(() => this.m.dereg(mr.m), () => mr.t.dereg(), 'dereg');
        if (r) mr.destroyed = true;
        return;
      }
      case 'allocMw': {
        const h = s.hca % HCAS;
        const pd = this.pdIndex(h, s.pd);
        const r = await this.both(
          () => this.m.allocMw(this.mPds[h][pd], s.type as 1 | 2),
          () => this.tPds[h][pd].allocMw(s.type as 1 | 2),
          'allocMw',
        );
        if (r) this.addMw(h, pd, s.type as 1 | 2, r[0], r[1]);
        return;
      }
      case 'deallocMw': {
        if (this.mws.length === 0) return;
        const mw = this.mws[s.mw % this.mws.length];
        const r = await this.both(() => this.m.deallocMw(mw.m), () => mw.t.dealloc(), 'deallocMw');
        if (r) mw.destroyed = true;
        return;
      }
      case 'bindMw': {
        const q = this.qps[s.qp % QP_SLOTS];
        // mostly a type-1 window (s.mw odd: any window)
        const mw = (s.mw % 2 === 0 ? this.pickMw(q.hca, s.mw >> 1, 1) : undefined) ?? this.pickMw(q.hca, s.mw >> 1);
        if (mw === undefined) return;
        const mr = this.bindMr(q.hca, mw, s.mr);
        const span = mr ? this.mrSpan(mr) : { start: 0, length: 0 };
        const addr = Math.max(0, span.start + offsetOf(s.pos, span.length, s.len));
        const wrId = this.nextWrId++;
        const r = await this.both(
          () => this.m.bindMw(q.m, mw.m, { mr: mr?.m ?? null, addr, length: s.len, access: s.access }, { wrId, signaled: s.signaled }),
          () => q.t.bindMw(mw.t, { mr: mr?.t ?? null, addr, length: s.len, access: s.access }, { wrId, signaled: s.signaled }),
          'bindMw',
        );
        if (r) {
          q.postedT++;
          if (this.tbKey(q.hca, r[0]) !== r[1] >>> 0) {
            this.fail(`bindMw returned rkey 0x${r[0].toString(16)} (model, testbed 0x${this.tbKey(q.hca, r[0]).toString(16)}) vs 0x${r[1].toString(16)} (testbed)`);
          }
        }
        return;
      }
      case 'postRecv': {
        const q = this.qps[s.qp % QP_SLOTS];
        await this.postRecv(q, s.sges);
        return;
      }
      case 'postSend': {
        const slot = s.qp % QP_SLOTS;
        const broken = (q: QpRec): boolean => q.destroyed || q.m.state === 'ERR';
        if (s.fresh && (broken(this.qps[slot]) || broken(this.qps[slot ^ 1]))) await this.createPair(slot >> 1);
        await this.postSend(this.qps[slot], s.wrs);
        return;
      }
      case 'postMany': {
        const broken = (q: QpRec): boolean => q.destroyed || q.m.state === 'ERR';
        for (const p of s.posts) {
          const slot = p.qp % QP_SLOTS;
          if (broken(this.qps[slot]) || broken(this.qps[slot ^ 1])) await this.createPair(slot >> 1);
        }
        for (const p of s.posts) await this.postSend(this.qps[p.qp % QP_SLOTS], p.wrs);
        return;
      }
      case 'renewPair':
        await this.createPair(s.pair % QP_PAIRS.length);
        return;
      case 'destroyQp': {
        const q = this.qps[s.qp % QP_SLOTS];
        if (await this.both(() => this.m.destroyQp(q.m), () => q.t.destroy(), 'destroyQp')) q.destroyed = true;
        if (s.cq) await this.perform({ kind: 'destroyCq', qp: q.slot });
        return;
      }
      case 'destroyCq': {
        const q = this.qps[s.qp % QP_SLOTS];
        if (await this.both(() => this.m.destroyCq(q.mcq), () => q.tcq.destroy(), 'destroyCq')) q.cqDestroyed = true;
        return;
      }
      case 'allocPd': {
        const h = s.hca % HCAS;
        this.mPds[h].push(this.m.allocPd(h));
        this.tPds[h].push(await this.ctxs[h].allocPd());
        return;
      }
      case 'regOdp': {
        const h = s.hca % HCAS;
        const pd = this.pdIndex(h, s.pd);
        const b = this.odpBufs[h];
        const first = s.page % ODP_BUF_PAGES;
        const addr = b.addr + first * 4096 + (s.off % 4096);
        const len = Math.max(1, Math.min(s.pages, ODP_BUF_PAGES - first) * 4096 - (s.off % 4096));
        const access = s.access | 64; // ON_DEMAND
        // implicit: regMr(0, SIZE_MAX), one key for every address of the process
        const [ra, rl] = s.implicit === true ? [0, SIZE_MAX] : [addr, len];
        const r = await this.both(() => this.m.regMr(this.mPds[h][pd], ra, rl, access), () => this.tPds[h][pd].regMr(ra, rl, access), s.implicit === true ? 'regOdp implicit' : 'regOdp');
        if (r) {
          this.addMr(h, pd, 'USER', r[0], r[1]);
          this.mrs[this.mrs.length - 1].odp = true;
        }
        return;
      }
      case 'madvise':
      case 'munmap': {
        const h = s.hca % HCAS;
        const b = this.odpBufs[h];
        const first = s.page % ODP_BUF_PAGES;
        const addr = b.addr + first * 4096;
        const len = Math.max(1, Math.min(s.pages, ODP_BUF_PAGES - first)) * 4096;
        if (s.kind === 'madvise') {
          this.m.dropHost(h, addr, len);
          await this.tb.host(h).madviseDontNeed(addr, len);
        } else {
          this.m.unmapHost(h, addr, len);
          for (let a = addr; a < addr + len; a += 4096) this.munmapped[h].add(a);
          await this.tb.host(h).munmap(addr, len);
        }
        this.count(s.kind);
        return;
      }
      case 'prefetch': {
        const odp = this.mrs.filter((r) => r.odp === true);
        if (odp.length === 0) return;
        const mr = odp[s.mr % odp.length];
        // a consumer's LOCAL_INV freed its mkey: the prefetch fails EFAULT if it has pages to map
        // (the map UMR's "fail if free", umr.c:594-597) and succeeds if all are mapped already; the
        // model does not track which pages are mapped (an ODP MR is a pinned one to it)
        if (mr.m.dev.state === 'FREE') {
          this.count('prefetch of an invalidated ODP MR: skipped');
          return;
        }
        // the whole MR; an implicit one: the adapter's ODP buffer
        const span = mr.m.length === SIZE_MAX ? { start: this.odpBufs[mr.hca].addr, length: this.odpBufs[mr.hca].length } : { start: mr.m.iova, length: mr.m.length };
        const iova = span.start;
        const len = span.length;
        await this.both(
          () => this.m.adviseMr(this.mPds[mr.hca][mr.pd], mr.m.lkey, span.start, span.length, s.advice),
          // tbKey: a dead MR's key whose index the MR cache has since handed to a live MR names
          // that MR on the testbed (the cache keeps an mkey's key); it maps to nothing, as in the model
          () => this.tPds[mr.hca][mr.pd].adviseMr(s.advice, [{ addr: iova, length: len, lkey: this.tbKey(mr.hca, mr.m.lkey) }], { flush: true }),
          'prefetch',
        );
        return;
      }
      case 'deallocPd': {
        const h = s.hca % HCAS;
        const pd = this.pdIndex(h, s.pd);
        const mpd = this.mPds[h][pd];
        // the layout needs the setup PDs (createPair makes QPs in them): one that would go (its QPs
        // destroyed, its MRs and windows gone, rare) is left alone; its EBUSY and EINVAL are not
        if (pd < PDS_PER_HCA && !mpd.destroyed && !this.pdInUse(h, pd)) {
          this.count('deallocPd of an unused setup PD: skipped');
          return;
        }
        await this.both(() => this.m.deallocPd(mpd), () => this.tPds[h][pd].dealloc(), 'deallocPd');
        return;
      }
      case 'fastReg':
        await this.fastReg(s);
        return;
      case 'bindLive':
        await this.bindLive(s);
        return;
    }
  }

  private async fastReg(s: Extract<Spec, { kind: 'fastReg' }>): Promise<void> {
    const q = this.qps[s.qp % QP_SLOTS];
    const c = this.mrs.filter((r) => r.hca === q.hca && r.pd === q.pd && r.type === s.type && !r.destroyed);
    const free = c.filter((r) => r.m.dev.state === 'FREE');
    let mr = free.length > 0 ? free[s.mr % free.length] : c.length > 0 ? c[s.mr % c.length] : undefined;
    if (mr === undefined) {
      await this.perform({ kind: 'allocMr', hca: q.hca, pd: q.pd, type: s.type, maxNumSg: SETUP_MAX_NUM_SG });
      mr = this.mrs[this.mrs.length - 1];
    }
    const fast = this.mrs.filter((r) => r.type !== 'USER');
    // mapSg picks fast MRs by (2 * index in that list)
    await this.perform({ kind: 'mapSg', mr: 2 * fast.indexOf(mr), elems: s.elems, pageSize: 4096 });
    const picks = this.mrs.filter((r) => r.hca === q.hca && r.type !== 'USER');
    const wrs: WrSpec[] = [{ op: 'REG_MR', mr: picks.indexOf(mr), key: 'cur', access: s.access, signaled: s.signaled }];
    const own: KeyRef = { kind: 'mr', pick: this.mrs.filter((r) => r.hca === q.hca).indexOf(mr), variant: 'cur' };
    const remote: RemoteSpec = { key: { kind: 'home', pick: 0, variant: 'cur' }, pos: { kind: 'in', permille: 500 } };
    // the write's local SGE is resolved at post time, before the REG_MR runs: use the mapping's range
    const use: WrSpec = { op: 'RDMA_WRITE', sges: [{ key: own, pos: { kind: 'in', permille: 0 }, len: 64 }], inline: false, remote, signaled: true };
    if (s.then === 'invUse') wrs.push({ op: 'LOCAL_INV', key: own, signaled: false });
    if (s.then !== 'none') wrs.push(use);
    await this.postSend(q, wrs);
  }

  private async bindLive(s: Extract<Spec, { kind: 'bindLive' }>): Promise<void> {
    const q = this.qps[s.qp % QP_SLOTS];
    const c = this.mws.filter((r) => r.hca === q.hca && r.pd === q.pd && r.type === s.type && !r.destroyed);
    const free = c.filter((r) => r.m.dev.state === 'FREE');
    let mw = free.length > 0 ? free[s.mw % free.length] : c.length > 0 ? c[s.mw % c.length] : undefined;
    if (mw === undefined) {
      await this.perform({ kind: 'allocMw', hca: q.hca, pd: q.pd, type: s.type });
      mw = this.mws[this.mws.length - 1];
    }
    const ofType = this.mws.filter((r) => r.hca === q.hca && r.type === s.type);
    const mrs = this.mrs.filter((r) => r.hca === q.hca && r.pd === q.pd && !r.destroyed && r.odp !== true && r.m.dev.state === 'VALID' && r.m.dev.length > 0);
    const mr = mrs.length > 0 && s.mr % 3 !== 0 ? mrs[s.mr % mrs.length] : this.mrs[q.hca * PDS_PER_HCA + q.pd];
    const mrPick = this.mrs.filter((r) => r.hca === q.hca).indexOf(mr);
    if (mrPick < 0) return;
    // the specs pick "mostly type 1 / 2" windows by 2 * (index among that type)
    if (s.type === 1) {
      await this.perform({ kind: 'bindMw', qp: q.slot, mw: 2 * ofType.indexOf(mw), mr: mrPick, pos: s.pos, len: s.len, access: s.access, signaled: s.signaled });
    } else {
      await this.postSend(q, [{ op: 'BIND_MW', mw: 2 * ofType.indexOf(mw), mr: mrPick, pos: s.pos, len: s.len, access: s.access, key: 'inc', signaled: s.signaled }]);
    }
  }

  /** Posts one receive on both sides (the SGEs resolved on `q`'s adapter). */
  private async postRecv(q: QpRec, sges: SgeSpec[]): Promise<void> {
    const [msg, tsg] = this.sgl(q, sges);
    const wrId = this.nextWrId++;
    const mwr: ModelRecvWr = { wrId, sgList: msg };
    const twr: RecvWr = { wrId, sgList: tsg };
    await this.both(() => this.m.postRecv(q.m, mwr), () => q.t.postRecv(twr), 'postRecv');
  }

  /** Posts a list of send work requests (after one receive on the peer per SEND / WRITE_WITH_IMM). */
  private async postSend(q: QpRec, wrs: WrSpec[]): Promise<void> {
    const stateOf = (r: QpRec): string => (r.destroyed ? 'destroyed' : r.m.state);
    this.count(`postSend on ${stateOf(q)} (peer ${stateOf(this.qps[q.slot ^ 1])})`);
    const peer = this.qps[q.slot ^ 1];
    for (const w of wrs) {
      if (w.op === 'SEND' || w.op === 'SEND_WITH_IMM' || w.op === 'SEND_WITH_INV' || w.op === 'RDMA_WRITE_WITH_IMM') {
        await this.postRecv(peer, w.recv);
      }
    }
    const mList: ModelSendWr[] = [];
    const tList: SendWr[] = [];
    for (const w of wrs) {
      const [mw, tw] = this.sendWr(q, peer, w);
      mList.push(mw);
      tList.push(tw);
    }
    // a batch whose work requests race on the same host bytes is posted in parts, each settled
    // before the next (see racingFrom): the untimed model's answer is then the only right one
    let from = 0;
    while (from < wrs.length) {
      const to = this.racingFrom(q, peer, mList, from);
      if (from > 0) {
        this.count('postSend split at a race');
        await this.settle();
      }
      let posted = 0;
      await this.both(
        () => this.m.postSend(q.m, mList.slice(from, to)),
        () => {
          // count what the testbed accepted, whatever happens
          for (const tw of tList.slice(from, to)) {
            q.t.postSend(tw);
            posted++;
          }
        },
        'postSend',
      );
      q.postedT += posted;
      from = to;
    }
  }

  /**
   * The end of the longest run of `wrs` from `from` whose host accesses do not race: the index of
   * the first work request that touches a byte an earlier one of the run touches on the same
   * host, at least one of them writing, by agents IB does not order. The requester gathers a
   * work request's data when it sends it and scatters READ and atomic answers when they return;
   * the responder (of a loopback pair: on the same host) places and reads in order. So a gather
   * after an earlier WR's remote write on a loopback pair, or after an earlier READ's scatter,
   * may see the old bytes or the new ones (IB orders them only with the fence bit): found by this
   * test, a loopback WRITE delayed by a responder page fault and the next WR gathering its bytes.
   */
  private racingFrom(q: QpRec, peer: QpRec, wrs: ModelSendWr[], from: number): number {
    type Access = { h: number; bytes: Set<number>; write: boolean; responder: boolean };
    const bytesOf = (h: number, key: number, addr: number, len: number): Set<number> => {
      const out = new Set<number>();
      for (let k = 0; k < len; k++) {
        const va = this.modelVa(h, key, addr + k, 0);
        if (va !== undefined) out.add(va);
      }
      return out;
    };
    const loop = peer.hca === q.hca;
    const accessesOf = (w: ModelSendWr): Access[] => {
      const out: Access[] = [];
      const sges = w.sgList ?? [];
      const remoteLen = sges.reduce((n, s) => n + s.length, 0);
      switch (w.opcode) {
        case 'RDMA_WRITE':
        case 'RDMA_WRITE_WITH_IMM':
        case 'SEND':
        case 'SEND_WITH_IMM':
        case 'SEND_WITH_INV':
          if (w.inline !== true) for (const s of sges) out.push({ h: q.hca, bytes: bytesOf(q.hca, s.lkey, s.addr, s.length), write: false, responder: false });
          if (loop && (w.opcode === 'RDMA_WRITE' || w.opcode === 'RDMA_WRITE_WITH_IMM') && w.rkey !== undefined && w.remoteAddr !== undefined) {
            out.push({ h: peer.hca, bytes: bytesOf(peer.hca, w.rkey, w.remoteAddr, remoteLen), write: true, responder: true });
          }
          // a loopback SEND lands in a receive buffer on this host: any byte of it may race
          if (loop && w.opcode.startsWith('SEND')) out.push({ h: peer.hca, bytes: new Set([-1]), write: true, responder: true });
          break;
        case 'RDMA_READ':
        case 'RDMA_READ_WITH_INV':
        case 'ATOMIC_CMP_AND_SWP':
        case 'ATOMIC_FETCH_AND_ADD': {
          for (const s of sges) out.push({ h: q.hca, bytes: bytesOf(q.hca, s.lkey, s.addr, s.length), write: true, responder: false });
          const atomic = w.opcode.startsWith('ATOMIC');
          if (loop && w.rkey !== undefined && w.remoteAddr !== undefined) {
            out.push({ h: peer.hca, bytes: bytesOf(peer.hca, w.rkey, w.remoteAddr, atomic ? 8 : remoteLen), write: atomic, responder: true });
          }
          break;
        }
        default:
          break;
      }
      return out;
    };
    const seen: Access[] = [];
    for (let i = from; i < wrs.length; i++) {
      // fence modes (mlx5 wr.c): a UMR (REG_MR with the small umr_fence, LOCAL_INV, BIND_MW)
      // does not wait for the earlier data WRs, so it has run when one of them fails and IB
      // reports it flushed (the untimed model knows only the flush): it starts a run; and nothing
      // orders a work request after a kernel LOCAL_INV (no fence): it may use the key before it
      // is invalid, so it starts a run too
      const op = wrs[i].opcode;
      if (i > from && (op === 'LOCAL_INV' || op === 'REG_MR' || op === 'BIND_MW' || wrs[i - 1].opcode === 'LOCAL_INV')) return i;
      const mine = accessesOf(wrs[i]);
      for (const a of mine) {
        for (const b of seen) {
          if (a.h !== b.h || !(a.write || b.write)) continue;
          // the responder's accesses are in order; so are the requester's scatters (in order per QP)
          if (a.responder && b.responder) continue;
          if (!a.responder && !b.responder && a.write && b.write) continue;
          const wild = a.bytes.has(-1) || b.bytes.has(-1);
          if (wild ? a.bytes.size > 0 && b.bytes.size > 0 : [...a.bytes].some((x) => b.bytes.has(x))) return i > from ? i : i + 1;
        }
      }
      seen.push(...mine);
    }
    return wrs.length;
  }

  /** The two sides' versions of one send work request on `q` (remote keys on `peer`'s adapter). */
  private sendWr(q: QpRec, peer: QpRec, w: WrSpec): [ModelSendWr, SendWr] {
    const wrId = this.nextWrId++;
    const base = { wrId, signaled: w.signaled };
    switch (w.op) {
      case 'SEND':
      case 'SEND_WITH_IMM':
      case 'SEND_WITH_INV':
      case 'RDMA_WRITE':
      case 'RDMA_WRITE_WITH_IMM': {
        const [ms, ts] = this.sgl(q, w.sges, w.inline);
        const mw: ModelSendWr = { ...base, opcode: w.op, sgList: ms, inline: w.inline };
        const tw: SendWr = { ...base, opcode: w.op, sgList: ts, inline: w.inline };
        if (w.op === 'SEND_WITH_IMM' || w.op === 'RDMA_WRITE_WITH_IMM') mw.immData = tw.immData = w.imm;
        if (w.op === 'SEND_WITH_INV') {
          const k = this.key(peer, w.inv);
          this.wrLabels.set(wrId, `inv ${k.what}`);
          mw.invalidateRkey = k.m;
          tw.invalidateRkey = k.t;
        }
        if (w.op === 'RDMA_WRITE' || w.op === 'RDMA_WRITE_WITH_IMM') {
          const len = ms.reduce((n, s) => n + s.length, 0);
          const k = this.key(peer, w.remote.key);
          this.wrLabels.set(wrId, `via ${k.what}`);
          mw.rkey = k.m;
          tw.rkey = k.t;
          mw.remoteAddr = tw.remoteAddr = Math.max(0, k.span.start + offsetOf(w.remote.pos, k.span.length, len));
        }
        return [mw, tw];
      }
      case 'RDMA_READ':
      case 'RDMA_READ_WITH_INV': {
        const [ms, ts] = this.sgl(q, w.sges);
        const len = ms.reduce((n, s) => n + s.length, 0);
        const k = this.key(peer, w.remote.key);
        this.wrLabels.set(wrId, `via ${k.what}`);
        const addr = Math.max(0, k.span.start + offsetOf(w.remote.pos, k.span.length, len));
        const mw: ModelSendWr = { ...base, opcode: w.op, sgList: ms, rkey: k.m, remoteAddr: addr };
        const tw: SendWr = { ...base, opcode: w.op, sgList: ts, rkey: k.t, remoteAddr: addr };
        if (w.op === 'RDMA_READ_WITH_INV') {
          const inv = this.key(q, w.inv);
          this.wrLabels.set(wrId, `via ${k.what} inv ${inv.what}`);
          mw.invalidateRkey = inv.m;
          tw.invalidateRkey = inv.t;
        }
        return [mw, tw];
      }
      case 'ATOMIC_CMP_AND_SWP':
      case 'ATOMIC_FETCH_AND_ADD': {
        const [ms, ts] = this.sgl(q, w.sges);
        const k = this.key(peer, w.remote.key);
        this.wrLabels.set(wrId, `via ${k.what}${w.peek ? ' peek' : ''}`);
        let addr = Math.max(0, k.span.start + offsetOf(w.remote.pos, k.span.length, 8));
        if (w.align) addr -= addr % 8;
        let compareAdd = w.compareAdd;
        if (w.op === 'ATOMIC_CMP_AND_SWP' && w.peek) {
          const now = this.peek64(peer.hca, k.m, addr);
          if (now !== undefined && now < 2n ** 53n) compareAdd = Number(now);
        }
        const mw: ModelSendWr = { ...base, opcode: w.op, sgList: ms, rkey: k.m, remoteAddr: addr, compareAdd, swap: w.swap };
        const tw: SendWr = { ...base, opcode: w.op, sgList: ts, rkey: k.t, remoteAddr: addr, compareAdd, swap: w.swap };
        return [mw, tw];
      }
      case 'LOCAL_INV': {
        const k = this.key(q, w.key);
        this.wrLabels.set(wrId, `of ${k.what}`);
        return [
          { ...base, opcode: 'LOCAL_INV', invalidateRkey: k.m },
          { ...base, opcode: 'LOCAL_INV', invalidateRkey: k.t },
        ];
      }
      case 'REG_MR': {
        const mr = this.pickMr(q.hca, w.mr, true) ?? this.pickMr(q.hca, w.mr, false, false, true) ?? this.mrs[0];
        let mkey = mr.m.lkey;
        if (w.key === 'next') mkey = makeKey(keyIndex(mkey), keyTag(mkey) + 1);
        if (w.key === 'otherIndex') {
          const other = this.pickMr(q.hca, w.mr + 1);
          mkey = makeKey(other && other !== mr ? other.m.index : BOGUS_INDEX, keyTag(mkey));
        }
        let access = w.access;
        if ((access & 8) !== 0) mr.atomicEver = true;
        return [
          { ...base, opcode: 'REG_MR', mr: mr.m, key: mkey, access },
          { ...base, opcode: 'REG_MR', mr: mr.t, key: this.tbKey(q.hca, mkey), access },
        ];
      }
      case 'BIND_MW': {
        // mostly a type-2 window (w.mw odd: any window)
        const mw = (w.mw % 2 === 0 ? this.pickMw(q.hca, w.mw >> 1, 2) : undefined) ?? this.pickMw(q.hca, w.mw >> 1);
        let mr = mw === undefined ? this.bindMr(q.hca, undefined, w.mr) : this.bindMr(q.hca, mw, w.mr);
        const span = mr ? this.mrSpan(mr) : { start: 0, length: 0 };
        const addr = Math.max(0, span.start + offsetOf(w.pos, span.length, w.len));
        if (mw === undefined) {
          // no window on this adapter: a BIND_MW without one (EINVAL on both sides)
          return [
            { ...base, opcode: 'BIND_MW', rkey: 0, bindInfo: { mr: mr?.m ?? null, addr, length: w.len, access: w.access } },
            { ...base, opcode: 'BIND_MW', rkey: 0, bindInfo: { mr: mr?.t ?? null, addr, length: w.len, access: w.access } },
          ];
        }
        let mkey = mw.m.rkey;
        if (w.key === 'inc') mkey = makeKey(keyIndex(mkey), keyTag(mkey) + 1);
        if (w.key === 'otherIndex') mkey = makeKey(BOGUS_INDEX, keyTag(mkey) + 1);
        return [
          { ...base, opcode: 'BIND_MW', mw: mw.m, rkey: mkey, bindInfo: { mr: mr?.m ?? null, addr, length: w.len, access: w.access } },
          { ...base, opcode: 'BIND_MW', mw: mw.t, rkey: this.tbKey(q.hca, mkey), bindInfo: { mr: mr?.t ?? null, addr, length: w.len, access: w.access } },
        ];
      }
    }
  }

  /** Resolves SGE specs on adapter `h`: the model's and the testbed's SGE lists. */
  /**
   * A list with an SGE through an ODP MR keeps only such SGEs, each with the MR's current key
   * and inside the MR's span (an implicit one's: the ODP buffer). When a WQE faults, mlx5's
   * handler maps every data segment of the WQE whole (odp.c:1139-1205,
   * pagefault_data_segments), not only the bytes the message takes, and any segment it cannot map
   * (a wrong key, past the MR, unmapped memory) fails the fault: the WQE then ends in an access
   * error where the HCA, had it not faulted, would have met that segment's own error, or none.
   * Whether a WQE faults depends on which pages the device holds, which the untimed model does
   * not track; such lists are left out rather than given an answer the model cannot know.
   * Pages the sequence munmapped are the same kind of case: the first ODP SGE stops before its
   * first unmapped page (or, starting on one, stays inside that page, which any byte the message
   * takes then fails on both sides), and the list ends after the first SGE that meets one.
   */
  /** The start of the first page of `[addr, addr + len)` the sequence munmapped on adapter `h`, or -1. */
  private firstUnmapped(h: number, addr: number, len: number): number {
    if (this.munmapped[h].size === 0) return -1;
    for (let p = addr - (addr % 4096); p < addr + len; p += 4096) if (this.munmapped[h].has(p)) return p;
    return -1;
  }

  private sgl(q: QpRec, sges: SgeSpec[], hostRead = false): [ModelSge[], Sge[]] {
    const h = q.hca;
    const ms: ModelSge[] = [];
    const ts: Sge[] = [];
    const ks = sges.map((s) => this.key(q, s.key));
    const odp = ks.some((k) => k.odp);
    if (odp) this.count('SGE list with an ODP MR: only its ODP SGEs, current keys, inside the span');
    let odpSeen = 0;
    for (let i = 0; i < sges.length; i++) {
      const s = sges[i];
      const k = ks[i];
      if (odp && !k.odp) continue;
      let addr = Math.max(0, k.span.start + offsetOf(s.pos, k.span.length, s.len));
      // inline data is read by the CPU at post time: keep it off the testbed's own queues
      if (hostRead) addr = this.hostAddr(h, addr);
      let len = s.len;
      let mk = k.m;
      let tk = k.t;
      if (odp) {
        const end = k.span.start + k.span.length;
        addr = Math.min(Math.max(addr, k.span.start), end - 1);
        len = Math.max(1, Math.min(len, end - addr));
        mk = k.cur.m;
        tk = k.cur.t;
        const gap = this.firstUnmapped(h, addr, len);
        if (gap >= 0) {
          if (odpSeen > 0) {
            this.count('ODP SGE list cut before an SGE over a munmapped page');
            break;
          }
          this.count('ODP SGE kept off a munmapped page');
          len = gap > addr ? gap - addr : Math.min(len, 4096 - (addr % 4096));
          ms.push({ addr, length: len, lkey: mk });
          ts.push({ addr, length: len, lkey: tk });
          break;
        }
        odpSeen++;
      }
      ms.push({ addr, length: len, lkey: mk });
      ts.push({ addr, length: len, lkey: tk });
    }
    return [ms, ts];
  }

  /** Creates QP pair `i` (two CQs, two QPs, connected) on both sides, in slots 2i and 2i+1. */
  private async createPair(i: number): Promise<void> {
    const d = QP_PAIRS[i];
    const made: QpRec[] = [];
    for (const [end, e] of [['a', d.a], ['b', d.b]] as const) {
      const mcq = this.m.createCq(e.hca, CQE);
      const tcq = await this.ctxs[e.hca].createCq(CQE);
      const caps = { maxSendWr: d.maxSendWr, maxRecvWr: MAX_RECV_WR, maxSendSge: MAX_SGE, maxRecvSge: MAX_SGE };
      const mqp = this.m.createQp(this.mPds[e.hca][e.pd], { sendCq: mcq, recvCq: mcq, ...caps });
      const tqp = await this.tPds[e.hca][e.pd].createQp({ sendCq: tcq, recvCq: tcq, ...caps });
      const slot = 2 * i + (end === 'a' ? 0 : 1);
      made.push({ slot, name: `qp${slot}(hca${e.hca},pd${e.pd})`, hca: e.hca, pd: e.pd, m: mqp, t: tqp, mcq, tcq, postedT: 0, destroyed: false, cqDestroyed: false });
    }
    this.m.connect(made[0].m, made[1].m);
    await made[0].t.connect(made[1].t, { mtu: d.mtu });
    for (const q of made) this.qps[q.slot] = q;
    this.everQps.push(...made);
  }

  // --------------------------------------------------------------------------------------------
  // Objects and keys
  // --------------------------------------------------------------------------------------------

  private addMr(h: number, pd: number, type: MrRec['type'], m: ModelMr, t: Mr): void {
    const rec: MrRec = { id: this.nextObjId++, hca: h, tIndex: keyIndex(t.lkey), pd, type, m, t, tagDelta: (keyTag(t.lkey) - keyTag(m.lkey)) & 0xff, destroyed: false };
    this.mrs.push(rec);
    this.byModelIndex[h].set(m.index, rec);
    this.compareMr(rec);
  }

  private addMw(h: number, pd: number, type: 1 | 2, m: ModelMw, t: Mw): void {
    const rec: MwRec = { id: this.nextObjId++, hca: h, tIndex: keyIndex(t.rkey), pd, type, m, t, tagDelta: (keyTag(t.rkey) - keyTag(m.rkey)) & 0xff, destroyed: false };
    this.mws.push(rec);
    this.byModelIndex[h].set(m.index, rec);
  }

  /**
   * The PD a spec's `pd` names on adapter `h`: below PDS_PER_HCA a setup PD, else (when allocPd
   * made some) one of the extra PDs, destroyed ones included.
   */
  private pdIndex(h: number, pd: number): number {
    const extra = this.mPds[h].length - PDS_PER_HCA;
    return pd < PDS_PER_HCA || extra === 0 ? pd % PDS_PER_HCA : PDS_PER_HCA + ((pd - PDS_PER_HCA) % extra);
  }

  /** Whether a live MR, window or QP (current or left behind by createPair) uses PD `pd` of `h` (model view). */
  private pdInUse(h: number, pd: number): boolean {
    const mpd = this.mPds[h][pd];
    return [...this.mrs, ...this.mws].some((r) => r.hca === h && r.pd === pd && !r.destroyed) ||
      this.everQps.some((q) => q.m.pd === mpd && !q.destroyed);
  }

  /** The setup MR of PD `pd` of adapter `h` (an extra PD has none: PD 0's, another PD's MR). */
  private homeMr(h: number, pd: number): MrRec {
    return this.mrs[h * PDS_PER_HCA + (pd < PDS_PER_HCA ? pd : 0)];
  }

  /** The MR a bind names: none, the setup MR of the window's PD, or the `pick`-th MR. */
  private bindMr(h: number, mw: MwRec | undefined, pick: number | 'home' | null): MrRec | undefined {
    if (pick === null) return undefined;
    if (pick === 'home') {
      const home = this.homeMr(h, mw?.pd ?? 0);
      return home;
      pick = 0;
    }
    return this.pickMr(h, pick, false, false, true);
  }

  /** The `pick`-th ODP MR of `q`'s adapter, live ones in `q`'s PD first; none: any MR. */
  private pickOdp(q: QpRec, pick: number): MrRec | undefined {
    const all = this.mrs.filter((r) => r.hca === q.hca && r.odp === true);
    const live = all.filter((r) => !r.destroyed && r.pd === q.pd);
    this.count(`odp key ${live.length > 0 ? 'live' : all.length > 0 ? 'any' : 'miss'}`);
    if (live.length > 0) return live[pick % live.length];
    return all.length > 0 ? all[pick % all.length] : this.pickMr(q.hca, pick);
  }

  /** The `pick`-th MR of adapter `h` (fast-registration ones only with `fastOnly`). */
  private pickMr(h: number, pick: number, fastOnly = false, liveOnly = false, noOdp = false): MrRec | undefined {
    const c = this.mrs.filter((r) => r.hca === h && (!fastOnly || r.type !== 'USER') && (!liveOnly || !r.destroyed) && !(noOdp && r.odp === true));
    return c.length === 0 ? undefined : c[pick % c.length];
  }

  /**
   * The `pick`-th MR or window usable by `q` now (model view): VALID with a length, in `q`'s PD,
   * a type-2 window bound to `q`; fast-registration MRs and windows first. None: the `pick`-th
   * MR of the adapter.
   */
  private pickLive(q: QpRec, pick: number): MrRec | MwRec | undefined {
    const h = q.hca;
    const c: (MrRec | MwRec)[] = [...this.mrs, ...this.mws].filter((r) => {
      if (r.hca !== h || r.destroyed || r.pd !== q.pd) return false;
      const st = this.m.keyState('lkey' in r.m ? r.m.lkey : r.m.rkey, h);
      if (st.kind === 'MW' && st.type === 2 && st.qpNum !== q.m.qpNum) return false;
      return st.kind !== 'NONE' && st.state === 'VALID' && st.length > 0;
    });
    // fast-registration MRs and windows first (the setup MRs are there through `home`)
    const special = c.filter((r) => !('lkey' in r.m) || (r as MrRec).type !== 'USER');
    this.count(`live ${special.length > 0 ? 'hit' : c.length > 0 ? 'user' : 'miss'}`);
    if (special.length > 0) return special[pick % special.length];
    return c.length === 0 ? this.pickMr(h, pick) : c[pick % c.length];
  }

  /** The `pick`-th window of adapter `h` (of `type` when given). */
  private pickMw(h: number, pick: number, type?: 1 | 2): MwRec | undefined {
    const c = this.mws.filter((r) => r.hca === h && (type === undefined || r.type === type));
    return c.length === 0 ? undefined : c[pick % c.length];
  }

  /**
   * An address the host may touch directly (regMr, mapSg, inline data): inside one of the pair's
   * buffers or its guard gap, else moved into the last buffer's guard gap. (Beyond a guard gap
   * the testbed's host holds its queues, which the model does not map.)
   */
  private hostAddr(h: number, addr: number): number {
    const mine = this.bufs.filter((b) => b.hca === h);
    if (addr < mine[0].addr) return addr; // below every allocation: unmapped on both sides
    if (mine.some((b) => addr >= b.addr && addr < b.addr + b.length + GUARD_GAP)) return addr;
    const last = mine[mine.length - 1];
    return last.addr + last.length + (addr % GUARD_GAP);
  }

  /** The testbed key of the object a model key names on adapter `h` (see the file comment). */
  tbKey(h: number, modelKey: number): number {
    const index = keyIndex(modelKey);
    const tag = keyTag(modelKey);
    if (index === BOGUS_INDEX || index === BEYOND_INDEX) return modelKey >>> 0;
    const rec = this.byModelIndex[h].get(index);
    if (rec === undefined) return makeKey(BOGUS_INDEX, tag);
    if (rec.destroyed && this.liveTbIndex(h, rec.tIndex)) return makeKey(BOGUS_INDEX, tag);
    const key = makeKey(rec.tIndex, tag + rec.tagDelta);
    if (rec.destroyed && this.poolTag(h, rec.tIndex) === keyTag(key)) return makeKey(BOGUS_INDEX, tag);
    return key;
  }

  /** The tag of testbed index `tIndex` while it is a free mkey of the driver's pool (else -1). */
  private poolTag(h: number, tIndex: number): number {
    if (tIndex >= this.tb.hca(h).icm.mkeyEntries) return -1;
    const e = readMkey(this.tb.hca(h), tIndex);
    return e.allocated && e.free ? e.tag : -1;
  }

  /**
   * Whether testbed index `tIndex` of adapter `h` now holds another object: a live MR or window
   * of the pair, or a PD's local DMA lkey (the driver's own PA mkey, made for SG_GAPS MRs).
   */
  private liveTbIndex(h: number, tIndex: number): boolean {
    return this.mrs.some((r) => r.hca === h && !r.destroyed && r.tIndex === tIndex) ||
      this.mws.some((r) => r.hca === h && !r.destroyed && r.tIndex === tIndex) ||
      this.tPds[h].some((pd) => pd.dmaLkeyNow >= 0 && pd.dmaLkeyNow >>> 8 === tIndex);
  }

  /** A key on `q`'s adapter: the model's, the testbed's, and the range of what it names (model view). */
  private key(q: QpRec, ref: KeyRef): { m: number; t: number; span: { start: number; length: number }; what: string; odp: boolean; cur: { m: number; t: number } } {
    const h = q.hca;
    let mkey: number;
    let span = { start: 0, length: 4096 };
    const rec =
      ref.kind === 'home' ? this.mrs[h * PDS_PER_HCA + q.pd]
      : ref.kind === 'mr' ? this.pickMr(h, ref.pick)
      : ref.kind === 'mw' ? this.pickMw(h, ref.pick)
      : ref.kind === 'live' ? this.pickLive(q, ref.pick)
      : ref.kind === 'odp' ? this.pickOdp(q, ref.pick)
      : undefined;
    if (rec === undefined) {
      mkey = makeKey(ref.kind === 'beyond' ? BEYOND_INDEX : BOGUS_INDEX, 1 + (ref.pick & 0x7f));
    } else if ('lkey' in rec.m) {
      mkey = rec.m.lkey;
      span = this.mrSpan(rec as MrRec);
    } else {
      const mw = rec as MwRec;
      mkey = mw.m.rkey;
      const st = this.m.keyState(mkey, h);
      if (st.kind === 'MW' && st.length > 0) {
        span = { start: (st.access & 32) !== 0 ? 0 : st.addr, length: st.length };
      }
    }
    if (ref.variant === 'prev') mkey = makeKey(keyIndex(mkey), keyTag(mkey) - 1);
    if (ref.variant === 'next') mkey = makeKey(keyIndex(mkey), keyTag(mkey) + 1);
    const what = rec === undefined ? ref.kind : 'lkey' in rec.m ? `${(rec as MrRec).type}${rec.destroyed ? '-dead' : ''}` : `mw${(rec as MwRec).type}${rec.destroyed ? '-dead' : ''}`;
    const odp = rec !== undefined && 'lkey' in rec.m && (rec as MrRec).odp === true && !rec.destroyed && span.length > 0;
    const cur = odp ? { m: (rec as MrRec).m.lkey, t: this.tbKey(h, (rec as MrRec).m.lkey) } : { m: mkey, t: this.tbKey(h, mkey) };
    return { m: mkey, t: this.tbKey(h, mkey), span, what: `${what}${ref.variant === 'cur' ? '' : '-' + ref.variant}`, odp, cur };
  }

  /** An MR's range as the device has it while VALID (else the handle's: the next registration's). */
  private mrSpan(mr: MrRec): { start: number; length: number } {
    // an implicit ODP MR covers everything: aim its accesses at the adapter's ODP buffer
    if (mr.m.length === SIZE_MAX) return { start: this.odpBufs[mr.hca].addr, length: this.odpBufs[mr.hca].length };
    const st = this.m.keyState(mr.m.lkey, mr.hca);
    if (st.kind === 'MR' && st.state === 'VALID' && st.length > 0) return { start: st.iova, length: st.length };
    return { start: mr.m.iova, length: mr.m.length };
  }

  /** The 8 bytes (little-endian) at `raddr` through model key `key` on adapter `h`, if reachable. */
  private peek64(h: number, key: number, raddr: number): bigint | undefined {
    const va = this.modelVa(h, key, raddr, 0);
    if (va === undefined) return undefined;
    try {
      const b = this.m.memRead(h, va, 8);
      return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true);
    } catch {
      return undefined;
    }
  }

  private modelVa(h: number, key: number, addr: number, depth: number): number | undefined {
    const rec = this.byModelIndex[h].get(keyIndex(key));
    if (rec === undefined || rec.destroyed || depth > 2) return undefined;
    if ('lkey' in rec.m) {
      const d = (rec.m as ModelMr).dev;
      let off = addr - d.iova;
      for (const e of d.extents) {
        if (off < e.length) return off >= 0 ? e.addr + off : undefined;
        off -= e.length;
      }
      return undefined;
    }
    const d = (rec.m as ModelMw).dev;
    if (d.mr === undefined) return undefined;
    const mrAddr = (d.access & 32) !== 0 ? d.addr + addr : addr;
    return this.modelVa(h, d.mr.dev.key, mrAddr, depth + 1);
  }

  // --------------------------------------------------------------------------------------------
  // Running both sides and comparing
  // --------------------------------------------------------------------------------------------

  /**
   * Runs a verbs call on both sides and compares the outcome (both succeed, or both fail with
   * the same errno). Returns both results when both succeeded.
   */
  private async both<A, B>(mf: () => A, tf: () => B | Promise<B>, what: string): Promise<[A, B] | undefined> {
    const mo = capture(mf);
    let to: Outcome<B>;
    try {
      to = { ok: true, value: await tf() };
    } catch (e) {
      if (e instanceof VerbsError) to = { ok: false, errno: e.errno, message: e.message };
      else throw new PairMismatch(`${what}: the testbed threw a non-VerbsError: ${(e as Error)?.stack ?? String(e)}\n  (model: ${outcomeText(mo)})`);
    }
    this.count(`${what} ${mo.ok ? 'ok' : mo.message.replace(/\(.*/, '').slice(0, 90)}`);
    if (mo.ok !== to.ok || (!mo.ok && !to.ok && mo.errno !== to.errno)) {
      this.fail(`${what}: model ${outcomeText(mo)}, testbed ${outcomeText(to)}`);
    }
    return mo.ok && to.ok ? [mo.value, to.value] : undefined;
  }

  /**
   * Runs both sides to quiescence: the model to completion; the testbed until every QP has the
   * completions the model has (then its send queues are drained), then compares completions.
   */
  private async settle(): Promise<void> {
    this.m.runToCompletion();
    const stuck = this.qps.filter((q) => q.m.sq.length > 0);
    if (stuck.length > 0) {
      throw new Error(`harness: the model still has queued send WRs on ${stuck.map((q) => q.name).join(', ')} (an RNR wait the generator should avoid)`);
    }
    const deadline = this.tb.now + SETTLE_PS;
    const problems: string[] = [];
    for (const q of this.qps) {
      // a destroyed CQ has nothing to poll (both sides would throw EINVAL)
      const expect = q.cqDestroyed ? [] : this.m.pollCq(q.mcq);
      for (const w of expect) this.count(`wc ${w.opcode} ${this.wrLabels.get(w.wrId) ?? ''} ${w.status}${w.wcFlags.has('WITH_INV') ? ' WITH_INV' : ''}`);
      const got: WorkCompletion[] = [];
      while (got.length < expect.length) {
        const left = deadline - this.tb.now;
        if (left <= 0) break;
        try {
          got.push(...(await q.tcq.wait(1, { timeout: left })));
        } catch (e) {
          if (e instanceof VerbsError && e.errno === 'ETIMEDOUT') break;
          throw e;
        }
      }
      q.expect = expect;
      q.got = got;
    }
    // the send queues drain (unsignaled successes leave no completion to wait for), and the
    // posted writes of unsignaled READs and atomics land: run until nothing is in flight
    await this.tb.quiesce({ timeout: Math.max(1, deadline - this.tb.now) }).catch((e: unknown) => problems.push(`testbed not quiescent: ${(e as Error).message}`));
    for (const q of this.qps) {
      // a destroyed QP's send queue engine forgot it (and its work never completes)
      const done = this.tb.hca(q.hca).sq.completedWqes(q.t.qpNum);
      if (!q.destroyed && done < q.postedT) problems.push(`${q.name}: testbed send queue not drained (${done} of ${q.postedT} WQEs done)`);
      // anything more the testbed completed
      if (!q.cqDestroyed) q.got!.push(...q.tcq.poll(64));
      this.compareCompletions(q, q.expect!, q.got!, problems);
      q.expect = undefined;
      q.got = undefined;
    }
    if (problems.length > 0) this.fail(problems.join('\n  '));
  }

  private compareCompletions(q: QpRec, expect: ModelWc[], got: WorkCompletion[], problems: string[]): void {
    for (const dir of ['send', 'recv'] as const) {
      const isDir = (op: string): boolean => (dir === 'recv') === (op === 'RECV' || op === 'RECV_RDMA_WITH_IMM');
      const e = expect.filter((w) => isDir(w.opcode)).map((w) => this.normModel(q, w));
      const g = got.filter((w) => isDir(w.opcode)).map((w) => normTb(w));
      const es = e.map(wcText);
      const gs = g.map(wcText);
      if (es.join('\n') !== gs.join('\n')) {
        problems.push(`${q.name} ${dir} completions differ:\n    model:   ${es.join('\n             ') || '(none)'}\n    testbed: ${gs.join('\n             ') || '(none)'}`);
      }
      for (const w of got) {
        if (w.qpNum !== q.t.qpNum) problems.push(`${q.name}: a completion names qpNum 0x${w.qpNum.toString(16)}, not 0x${q.t.qpNum.toString(16)}`);
      }
    }
  }

  private normModel(q: QpRec, w: ModelWc): NormWc {
    return {
      wrId: w.wrId,
      status: w.status,
      opcode: w.opcode,
      byteLen: w.byteLen,
      flags: [...w.wcFlags].sort().join('|'),
      immData: w.immData,
      invalidatedRkey: w.invalidatedRkey === undefined ? undefined : this.tbKey(q.hca, w.invalidatedRkey),
    };
  }

  /** QP states, MR and window handles, and every buffer's bytes. */
  private async compareState(): Promise<void> {
    const problems: string[] = [];
    for (const q of this.qps) {
      // a destroyed QP has no state to compare (ibv_query_qp on it is EINVAL)
      if (!q.destroyed) {
        // the hardware's view (QUERY_QP): a responder moved to ERR by a remote access error has no completion telling its driver
        const hw = (await q.t.query()).state;
        if (q.m.state !== hw) problems.push(`${q.name}: state ${q.m.state} (model) vs ${hw} (testbed)`);
      }
    }
    for (const mr of this.mrs) {
      const p = this.mrProblem(mr);
      if (p) problems.push(p);
    }
    for (const mw of this.mws) {
      const want = this.tbKey(mw.hca, mw.m.rkey);
      if (!mw.destroyed && want !== mw.t.rkey >>> 0) {
        problems.push(`mw#${mw.id}: rkey 0x${mw.m.rkey.toString(16)} (model, expected testbed 0x${want.toString(16)}) vs 0x${mw.t.rkey.toString(16)}`);
      }
    }
    for (const b of this.bufs) {
      const mb = this.m.memRead(b.hca, b.addr, b.length);
      const tbb = this.tb.host(b.hca).read(b.addr, b.length);
      const at = firstDiff(mb, tbb);
      if (at >= 0) {
        problems.push(
          `host ${b.hca} buffer 0x${b.addr.toString(16)}: bytes differ from +${at} (0x${(b.addr + at).toString(16)}): ` +
            `model ${hexBytes(mb, at)} testbed ${hexBytes(tbb, at)}; ${countDiff(mb, tbb)} bytes differ`,
        );
      }
    }
    if (problems.length > 0) this.fail(problems.join('\n  '));
  }

  private compareMr(mr: MrRec): void {
    const p = this.mrProblem(mr);
    if (p) this.fail(p);
  }

  private mrProblem(mr: MrRec): string | undefined {
    if (mr.destroyed) return undefined;
    const want = this.tbKey(mr.hca, mr.m.lkey);
    const got = { lkey: mr.t.lkey >>> 0, rkey: mr.t.rkey >>> 0, iova: mr.t.iova, length: mr.t.length };
    if (got.lkey !== want || got.rkey !== want || got.iova !== mr.m.iova || got.length !== mr.m.length) {
      return `mr#${mr.id} (${mr.type}): model {lkey 0x${mr.m.lkey.toString(16)} -> testbed 0x${want.toString(16)}, iova 0x${mr.m.iova.toString(16)}, length ${mr.m.length}} ` +
        `vs testbed {lkey 0x${got.lkey.toString(16)}, rkey 0x${got.rkey.toString(16)}, iova 0x${got.iova.toString(16)}, length ${got.length}}`;
    }
    return undefined;
  }

  private count(k: string, n = 1): void {
    this.counts.set(k, (this.counts.get(k) ?? 0) + n);
  }

  private fail(msg: string): never {
    throw new PairMismatch(msg);
  }
}

// ----------------------------------------------------------------------------------------------
// Helpers
// ----------------------------------------------------------------------------------------------

/** A length from `addr` that stays inside buffer `b` when `fit` (else as asked). */
function fit(b: BufRec, addr: number, len: number, fits: boolean): number {
  if (!fits) return len;
  return Math.max(1, Math.min(len, b.addr + b.length - addr));
}

/** The offset of an access of `len` bytes at `pos` in a span of `span` bytes. */
export function offsetOf(pos: Pos, span: number, len: number): number {
  switch (pos.kind) {
    case 'in':
      return Math.floor((pos.permille / 1000) * Math.max(0, span - len));
    case 'end':
      return span - len + pos.delta;
    case 'abs':
      return pos.off;
  }
}

/**
 * The initial bytes of buffer `b` of adapter `h`: a pattern whose aligned 64-bit words stay below
 * 2^48 (bytes 6 and 7 of each word are 0), so an atomic's operands fit a JS number.
 */
export function fillPattern(size: number, h: number, b: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = i % 8 >= 6 ? 0 : (i * 7 + b * 31 + h * 101 + (i >> 8)) & 0xff;
  return out;
}

function capture<T>(f: () => T): Outcome<T> {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    if (e instanceof VerbsModelError) return { ok: false, errno: e.errno, message: e.message };
    throw new PairMismatch(`the model threw a non-VerbsModelError: ${(e as Error)?.stack ?? String(e)}`);
  }
}

function outcomeText(o: Outcome<unknown>): string {
  return o.ok ? 'succeeded' : `threw ${o.message}`;
}

function normTb(w: WorkCompletion): NormWc {
  return {
    wrId: Number(w.wrId),
    status: w.status,
    opcode: w.opcode,
    byteLen: w.byteLen,
    flags: [...w.wcFlags].sort().join('|'),
    immData: w.immData,
    invalidatedRkey: w.invalidatedRkey === undefined ? undefined : w.invalidatedRkey >>> 0,
  };
}

function wcText(w: NormWc): string {
  let s = `wr ${w.wrId} ${w.status} ${w.opcode} len ${w.byteLen}`;
  if (w.flags) s += ` [${w.flags}]`;
  if (w.immData !== undefined) s += ` imm 0x${w.immData.toString(16)}`;
  if (w.invalidatedRkey !== undefined) s += ` inv 0x${w.invalidatedRkey.toString(16)}`;
  return s;
}

function firstDiff(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return 0;
  if (Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length))) return -1;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

function countDiff(a: Uint8Array, b: Uint8Array): number {
  let n = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) n++;
  return n;
}

function hexBytes(a: Uint8Array, at: number): string {
  return Array.from(a.subarray(at, at + 8), (x) => x.toString(16).padStart(2, '0')).join(' ');
}
