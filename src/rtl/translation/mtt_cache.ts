/**
 * MTT translation (`tb.hcaN.mtt`): a cache of 64-byte lines of translation tables in ICM,
 * serving 8-byte MTT entries to the ATU and whole lines to the KLM walker (KLM lists live in the
 * same tables). Set-associative with LRU; misses read the line over PCIe with several
 * outstanding (MSHRs). UMR writes of translations call `invalidateRange` for coherence.
 */
import { Fifo, Module, type Nothing, type Reg, type WireOptions } from '../../sim/index.ts';
import { SetAssoc } from './set_assoc.ts';
import { MissQueue } from './miss_queue.ts';
import { dmaRead, type DmaPort } from '../memory/pcie.ts';
import { readMttRaw } from '../formats/mtt.ts';

/** One 8-byte MTT entry at physical address `addr`. */
export interface MttReq {
  ctx: number;
  addr: number;
}
/** The entry: page address with RD (bit 0) and WR (bit 1). */
export interface MttResp {
  ctx: number;
  value: number;
  /** The line was read from ICM (a miss) rather than found in the cache. */
  miss?: boolean;
}
/** One 64-byte line of a translation table. */
export interface LineReq {
  ctx: number;
  lineAddr: number;
}
export interface LineResp {
  ctx: number;
  lineAddr: number;
  line: Uint8Array;
}

/** Wiring, geometry and timing of the MTT cache: misses read lines over its DMA port. */
export interface MttOptions extends WireOptions<{ readonly dma: DmaPort }, Nothing> {
  readonly lineBytes: number;
  readonly lines: number;
  readonly ways: number;
  /** Cycles of the clock from a lookup to its response on a hit (>= 1). */
  readonly hitCycles: number;
  /** Outstanding misses. */
  readonly mshrs: number;
}

const ENTRY = 0;
const LINE = 1;

export class Mtt extends Module {
  /** From the ATU: MTT entries. */
  readonly req: Fifo<MttReq>;
  readonly resp: Fifo<MttResp>;
  /** From the KLM walker: lines. */
  readonly lineReq: Fifo<LineReq>;
  readonly lineResp: Fifo<LineResp>;
  readonly lineBytes: number;
  private readonly tags: SetAssoc;
  private readonly store: Uint8Array;
  private readonly view: DataView;
  private readonly mq: MissQueue;
  /** Waiters are encoded as ctx * 2 + kind, with the address kept per waiter. */
  private readonly waitAddr: number[][];
  private readonly port: DmaPort;
  private rr = 0;
  private readonly rReqValid: Reg;
  private readonly rReqAddr: Reg;
  private readonly rHit: Reg;
  private readonly rMiss: Reg;
  private readonly rFillValid: Reg;
  private readonly rMshrBusy: Reg;
  private readonly sEntryLookups;
  private readonly sLineLookups;
  private readonly sHits;
  private readonly sMisses;
  private readonly sMerged;
  private readonly sEvictions;
  private readonly sInvalidations;
  private readonly sMissLatency;

  constructor(parent: Module, name: string, opts: MttOptions) {
    super(parent.sim, parent, name);
    if (opts.lineBytes !== 64) throw new RangeError(`${this.path}: only 64-byte lines are modelled (got ${opts.lineBytes})`);
    this.lineBytes = opts.lineBytes;
    this.tags = new SetAssoc(opts.lines, opts.ways);
    this.store = new Uint8Array(opts.lines * opts.lineBytes);
    this.view = new DataView(this.store.buffer);
    this.mq = new MissQueue(opts.mshrs);
    // occupancy of the MSHRs, read when the stats are taken (the hot path only bumps two fields)
    const mq = this.mq;
    this.stats.gauge('mshrs_peak', () => mq.peak);
    this.stats.gauge('mshrs_full_stalls', () => mq.fullStalls);
    this.waitAddr = Array.from({ length: opts.mshrs }, () => []);
    this.port = opts.ports.dma;
    this.rReqValid = this.probe('lookup_valid', 1);
    this.rReqAddr = this.probe('lookup_addr', 64);
    this.rHit = this.probe('hit', 1);
    this.rMiss = this.probe('miss', 1);
    this.rFillValid = this.probe('fill_valid', 1);
    this.rMshrBusy = this.probe('mshr_busy', Math.max(1, Math.ceil(Math.log2(opts.mshrs + 1))));
    const latency = (opts.hitCycles - 1) * opts.clock.period;
    this.req = new Fifo<MttReq>(this, 'req', { capacity: 4 });
    this.resp = new Fifo<MttResp>(this, 'resp', { capacity: 8, latency });
    this.lineReq = new Fifo<LineReq>(this, 'line_req', { capacity: 2 });
    this.lineResp = new Fifo<LineResp>(this, 'line_resp', { capacity: 4, latency });
    this.req.consumer = this;
    this.lineReq.consumer = this;
    this.resp.producer = this;
    this.lineResp.producer = this;
    this.port.resp.consumer = this;
    this.port.req.producer = this;
    this.sEntryLookups = this.stats.counter('entry_lookups');
    this.sLineLookups = this.stats.counter('line_lookups');
    this.sHits = this.stats.counter('hits');
    this.sMisses = this.stats.counter('misses');
    this.sMerged = this.stats.counter('merged_misses');
    this.sEvictions = this.stats.counter('evictions');
    this.sInvalidations = this.stats.counter('invalidations');
    this.sMissLatency = this.stats.histogram('miss_latency_ps');
    this.clockedBy(opts.clock);
  }

  /** Coherence: translations in `[addr, addr + len)` changed; drop cached lines and fills. */
  invalidateRange(addr: number, len: number): void {
    const first = addr - (addr % 64);
    for (let a = first; a < addr + len; a += 64) if (this.tags.invalidate(a, a / 64)) this.sInvalidations.inc();
    this.mq.invalidateWhere((k) => k + 64 > addr && k < addr + len);
  }

  /** Drops every line. */
  invalidateAll(): void {
    this.sInvalidations.inc(this.tags.invalidateAll());
    this.mq.invalidateWhere(() => true);
  }

  private readonly respOf: MttResp[] = [];

  private answer(kind: number, ctx: number, addr: number, slot: number, miss = false): void {
    if (kind === ENTRY) {
      const off = slot * 64 + ((addr >>> 0) & 63); // low bits of an integer address
      // one entry lookup in flight per ATU context: its response object is reused
      let r = this.respOf[ctx];
      if (r === undefined) this.respOf[ctx] = r = { ctx, value: 0 };
      r.value = readMttRaw(this.view, off);
      r.miss = miss;
      this.resp.push(r);
    } else {
      const off = slot * 64;
      this.lineResp.push({ ctx, lineAddr: addr, line: this.store.slice(off, off + 64) });
    }
  }

  override tick(): void {
    let fill = 0;
    // 1. a line came back: install it and answer waiters that fit (others retry as lookups)
    if (this.port.resp.canPop() && this.resp.canPush() && this.lineResp.canPush()) {
      const r = this.port.resp.pop();
      const m = r.tag;
      const lineAddr = this.mq.keyOf(m);
      if (this.mq.completed(m)) {
        const slot = this.tags.insert(lineAddr, lineAddr / 64);
        if (this.tags.evictedKey >= 0) this.sEvictions.inc();
        this.store.set(r.data!, slot * 64);
        const w = this.mq.waiters[m];
        const wa = this.waitAddr[m];
        for (let i = 0; i < w.length; i++) {
          const kind = w[i] & 1;
          const ctx = w[i] >> 1;
          if ((kind === ENTRY ? this.resp : this.lineResp).canPush()) this.answer(kind, ctx, wa[i], slot, true);
          else this.requeue.push([kind, ctx, wa[i]]);
        }
        wa.length = 0;
        this.sMissLatency.add(this.sim.now - this.mq.sinceOf(m));
        this.mq.release(m);
        fill = 1;
      }
    }
    this.rFillValid.set(fill);
    // 2. (re)issue a miss read
    const mi = this.mq.nextToIssue();
    if (mi >= 0 && this.port.req.canPush()) {
      this.port.req.push(dmaRead(this.mq.keyOf(mi), 64, mi));
      this.mq.issued(mi);
    }
    // 3. one lookup per cycle: requeued waiters first, then round-robin between the inputs
    let valid = 0;
    let hit = 0;
    let miss = 0;
    let kind = -1;
    let ctx = 0;
    let addr = 0;
    if (this.requeue.length > 0) {
      const w = this.requeue[0];
      kind = w[0];
      ctx = w[1];
      addr = w[2];
    } else {
      const entryReady = this.req.canPop();
      const lineReady = this.lineReq.canPop();
      // round-robin between the ATU's entries and the walker's lines
      if (entryReady && (this.rr === 0 || !lineReady)) {
        const q = this.req.peek();
        kind = ENTRY;
        ctx = q.ctx;
        addr = q.addr;
      } else if (lineReady) {
        const q = this.lineReq.peek();
        kind = LINE;
        ctx = q.ctx;
        addr = q.lineAddr;
      }
    }
    if (kind >= 0 && (kind === ENTRY ? this.resp : this.lineResp).canPush()) {
      valid = 1;
      this.rReqAddr.set(addr);
      const lineAddr = addr - ((addr >>> 0) & 63);
      const slot = this.tags.lookup(lineAddr, lineAddr / 64);
      let taken = false;
      if (slot >= 0) {
        this.answer(kind, ctx, addr, slot);
        this.sHits.inc();
        hit = 1;
        taken = true;
      } else {
        let m = this.mq.find(lineAddr);
        if (m >= 0) this.sMerged.inc();
        else m = this.mq.alloc(lineAddr, this.sim.now);
        if (m >= 0) {
          this.mq.waiters[m].push(ctx * 2 + kind);
          this.waitAddr[m].push(addr);
          this.sMisses.inc();
          miss = 1;
          taken = true;
        }
      }
      if (taken) {
        if (this.requeue.length > 0) this.requeue.shift();
        else {
          (kind === ENTRY ? this.req : this.lineReq).pop();
          (kind === ENTRY ? this.sEntryLookups : this.sLineLookups).inc();
          this.rr ^= 1;
        }
      }
    }
    this.rReqValid.set(valid);
    this.rHit.set(hit);
    this.rMiss.set(miss);
    this.rMshrBusy.set(this.mq.busy);
    // (a second read completion visible in the same cycle is taken at the next edge)
    if (!this.req.canPop() && !this.lineReq.canPop() && !this.port.resp.canPop() && this.requeue.length === 0 && this.mq.nextToIssue() < 0 && !this.keepsPulse(fill | hit | miss | valid)) {
      this.sleep();
    }
  }

  private readonly requeue: [number, number, number][] = [];
}
