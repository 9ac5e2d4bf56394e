/**
 * The on-chip cache of mkey contexts (`tb.hcaN.mkey_cache`): set-associative with LRU,
 * configurable geometry and hit latency. A miss reads the 64-byte context from ICM over PCIe;
 * several misses may be outstanding (MSHRs), and later lookups of a missing index wait on the
 * same read. Commands and UMR keep it coherent through `write` (update a cached copy) and
 * `invalidate` / `invalidateAll`, which also cancel in-flight fills of the indices concerned.
 */
import { Fifo, Module, type Reg, type WireOptions } from '../../sim/index.ts';
import { SetAssoc } from './set_assoc.ts';
import { MissQueue } from './miss_queue.ts';
import { decodeIcmMkey, unallocatedMkey, type MkeyEntry } from '../memory/icm_mkey.ts';
import { dmaRead, type DmaPort } from '../memory/pcie.ts';
import type { Icm } from '../memory/icm.ts';

/**
 * A lookup of an mkey index on behalf of an ATU context. Requests and responses are reused per
 * context (a context has one lookup in flight), so a warm hit allocates nothing.
 */
export interface MkeyLookup {
  index: number;
  ctx: number;
}

/** The context of the index (`allocated` false for an index never created). */
export interface MkeyLookupResp {
  ctx: number;
  entry: MkeyEntry;
  /** The context was read from ICM (a miss) rather than found in the cache. */
  miss?: boolean;
}

/** Wiring, geometry and timing of the mkey cache: misses read contexts over its DMA port. */
export interface MkeyCacheOptions extends WireOptions<{ readonly dma: DmaPort }, { readonly icm: Pick<Icm, 'mkeyContextAddr' | 'mkeyEntries'> }> {
  readonly entries: number;
  readonly ways: number;
  /** Cycles of the clock from a lookup to its response on a hit (>= 1). */
  readonly hitCycles: number;
  /** Outstanding misses. */
  readonly mshrs: number;
}

export class MkeyCache extends Module {
  readonly req: Fifo<MkeyLookup>;
  readonly resp: Fifo<MkeyLookupResp>;
  private readonly tags: SetAssoc;
  private readonly data: (MkeyEntry | null)[];
  private readonly mq: MissQueue;
  private readonly ready: MkeyLookupResp[] = [];
  private readonly respOf: MkeyLookupResp[] = [];
  private readonly icm: Pick<Icm, 'mkeyContextAddr' | 'mkeyEntries'>;
  readonly port: DmaPort;
  // traced
  private readonly rReqValid: Reg;
  private readonly rReqIndex: Reg;
  private readonly rHit: Reg;
  private readonly rMiss: Reg;
  private readonly rFillValid: Reg;
  private readonly rFillIndex: Reg;
  private readonly rMshrBusy: Reg;
  // stats
  private readonly sLookups;
  private readonly sHits;
  private readonly sMisses;
  private readonly sMerged;
  private readonly sEvictions;
  private readonly sInvalidations;
  private readonly sStaleFills;
  private readonly sMissLatency;

  constructor(parent: Module, name: string, opts: MkeyCacheOptions) {
    super(parent.sim, parent, name);
    if (!(Number.isInteger(opts.hitCycles) && opts.hitCycles >= 1)) throw new RangeError(`${this.path}: hitCycles must be >= 1`);
    this.tags = new SetAssoc(opts.entries, opts.ways);
    this.data = new Array<MkeyEntry | null>(opts.entries).fill(null);
    this.mq = new MissQueue(opts.mshrs);
    // occupancy of the MSHRs, read when the stats are taken (the hot path only bumps two fields)
    const mq = this.mq;
    this.stats.gauge('mshrs_peak', () => mq.peak);
    this.stats.gauge('mshrs_full_stalls', () => mq.fullStalls);
    this.icm = opts.deps.icm;
    this.port = opts.ports.dma;
    this.rReqValid = this.probe('lookup_valid', 1);
    this.rReqIndex = this.probe('lookup_index', 24);
    this.rHit = this.probe('hit', 1);
    this.rMiss = this.probe('miss', 1);
    this.rFillValid = this.probe('fill_valid', 1);
    this.rFillIndex = this.probe('fill_index', 24);
    this.rMshrBusy = this.probe('mshr_busy', Math.max(1, Math.ceil(Math.log2(opts.mshrs + 1))));
    this.req = new Fifo<MkeyLookup>(this, 'req', { capacity: 4 });
    this.resp = new Fifo<MkeyLookupResp>(this, 'resp', { capacity: 8, latency: (opts.hitCycles - 1) * opts.clock.period });
    this.req.consumer = this;
    this.resp.producer = this;
    this.port.resp.consumer = this;
    this.port.req.producer = this;
    this.sLookups = this.stats.counter('lookups');
    this.sHits = this.stats.counter('hits');
    this.sMisses = this.stats.counter('misses');
    this.sMerged = this.stats.counter('merged_misses');
    this.sEvictions = this.stats.counter('evictions');
    this.sInvalidations = this.stats.counter('invalidations');
    this.sStaleFills = this.stats.counter('stale_fills');
    this.sMissLatency = this.stats.histogram('miss_latency_ps');
    this.clockedBy(opts.clock);
  }

  /** Coherent update by a command or UMR: a cached copy takes the new context. */
  write(entry: MkeyEntry): void {
    const s = this.tags.find(entry.index);
    if (s >= 0) this.data[s] = entry;
    this.mq.invalidateWhere((k) => k === entry.index);
  }

  /** Drops the cached copy of an index (and cancels an in-flight fill of it). */
  invalidate(index: number): void {
    if (this.tags.invalidate(index)) this.sInvalidations.inc();
    this.mq.invalidateWhere((k) => k === index);
  }

  /** Drops every cached context (the "flush on deregistration" policy). */
  invalidateAll(): void {
    this.sInvalidations.inc(this.tags.invalidateAll());
    this.mq.invalidateWhere(() => true);
  }

  /** True when the index is cached (for tests and inspection). */
  holds(index: number): boolean {
    return this.tags.find(index) >= 0;
  }

  /** The response object of a context, filled in. */
  private answer(ctx: number, entry: MkeyEntry, miss = false): MkeyLookupResp {
    let r = this.respOf[ctx];
    if (r === undefined) this.respOf[ctx] = r = { ctx, entry, miss };
    r.entry = entry;
    r.miss = miss;
    return r;
  }

  override tick(): void {
    let fill = 0;
    // 1. a read came back: install it and answer its waiters
    if (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      const m = r.tag;
      const index = this.mq.keyOf(m);
      if (!this.mq.completed(m)) this.sStaleFills.inc();
      else {
        const entry = decodeIcmMkey(new DataView(r.data!.buffer, r.data!.byteOffset, 64), 0, index);
        const slot = this.tags.insert(index);
        if (this.tags.evictedKey >= 0) this.sEvictions.inc();
        this.data[slot] = entry;
        for (const ctx of this.mq.waiters[m]) this.ready.push(this.answer(ctx, entry, true));
        this.sMissLatency.add(this.sim.now - this.mq.sinceOf(m));
        this.mq.release(m);
        fill = 1;
        this.rFillIndex.set(index);
      }
    }
    this.rFillValid.set(fill);
    // 2. answers waiting for room in the response FIFO go first (in order)
    let k = 0;
    while (k < this.ready.length && this.resp.canPush()) this.resp.push(this.ready[k++]);
    if (k > 0) this.ready.splice(0, k);
    // 3. (re)issue a miss read
    const mi = this.mq.nextToIssue();
    if (mi >= 0 && this.port.req.canPush()) {
      this.port.req.push(dmaRead(this.icm.mkeyContextAddr(this.mq.keyOf(mi)), 64, mi));
      this.mq.issued(mi);
    }
    // 4. one new lookup per cycle
    let hit = 0;
    let miss = 0;
    let valid = 0;
    if (this.req.canPop() && this.ready.length === 0 && this.resp.canPush()) {
      const q = this.req.peek();
      valid = 1;
      this.rReqIndex.set(q.index);
      const slot = q.index < this.icm.mkeyEntries ? this.tags.lookup(q.index) : -2;
      if (slot === -2) {
        // beyond the mkey table: no context exists, the key is invalid (no host read)
        this.req.pop();
        this.resp.push(this.answer(q.ctx, unallocatedMkey(q.index)));
        this.sLookups.inc();
      } else if (slot >= 0) {
        this.req.pop();
        this.resp.push(this.answer(q.ctx, this.data[slot]!));
        this.sLookups.inc();
        this.sHits.inc();
        hit = 1;
      } else {
        let m = this.mq.find(q.index);
        if (m >= 0) this.sMerged.inc();
        else m = this.mq.alloc(q.index, this.sim.now);
        if (m >= 0) {
          this.req.pop();
          this.mq.waiters[m].push(q.ctx);
          this.sLookups.inc();
          this.sMisses.inc();
          miss = 1;
        }
      }
    }
    this.rReqValid.set(valid);
    this.rHit.set(hit);
    this.rMiss.set(miss);
    this.rMshrBusy.set(this.mq.busy);
    // asleep when nothing can progress without an input (a lookup, a read completion, room)
    // (a second read completion visible in the same cycle is taken at the next edge)
    if (!this.req.canPop() && !this.port.resp.canPop() && this.ready.length === 0 && this.mq.nextToIssue() < 0 && !this.keepsPulse(fill | hit | miss)) {
      this.sleep();
    }
  }
}
