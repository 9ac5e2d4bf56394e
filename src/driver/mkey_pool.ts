/**
 * The driver's MR cache, as mlx5_ib's mkey cache (Linux 6.12 drivers/infiniband/hw/mlx5/mr.c):
 * free MTT mkeys made in advance by CREATE_MKEY, enabled for a user MR by a UMR on the driver's
 * own QP (~14 us for 64 pages instead of ~230 us of firmware, spec/timing.md), and revoked by
 * UMR on deregistration so the mkey returns to the cache with its whole 32-bit key.
 *
 * - Buckets ("entries") of 4 x 2^i MTT entries, i = 0..mrCacheLastOrder (mlx5_mkey_cache_init,
 *   mr.c:941-996: MLX5_MR_CACHE_PERSISTENT_ENTRY_MIN_DESCS << i up to mkey_cache_max_order).
 * - A request of n entries takes the smallest bucket of at least n, if that bucket holds at most
 *   max(2n, 4) (mkey_cache_ent_from_rb_key, mr.c:679-718: the at-most-twice rule).
 * - Limits from mlx5_core's profile (mlx5r_cache_create_ent_locked, mr.c:896-906, profile 2 of
 *   core/main.c:112-180): `mrCacheLimit` for buckets up to 8 Ki entries, then 32, 16, 8, 4, then 0.
 * - Pre-fill at load: every bucket below its limit fills to twice it (mr.c:980-985 and
 *   queue_adjust_cache_locked, mr.c:505-532), one CREATE_MKEY per run of the bucket's work, the
 *   next one queued when it completes (create_mkey_callback, mr.c:193-223), in the firmware's
 *   background lane.
 * - A take from an empty bucket is a miss: a cache mkey made at once by CREATE_MKEY
 *   (_mlx5_mr_cache_alloc, mr.c:720-757; create_cache_mkey, mr.c:306-327).
 * - Deregistration revokes by UMR and stores the mkey in the bucket of exactly its size, or in a
 *   temporary entry of that size made for it (cache_ent_find_and_store, mr.c:1985-2024), whose
 *   mkeys are destroyed 30 s after the first store (mlx5r_handle_mkey_cleanup, mr.c:2101-2109).
 * - A bucket above twice its limit gives the excess back one mkey per work run, once no mkey was
 *   added to the cache for 300 s and no bucket is below its limit (__cache_work_func,
 *   mr.c:549-613). A fill the firmware refuses stops every fill for 1 s (mr.c:201-208).
 * The work of the buckets runs one item at a time, as on mlx5's ordered work queue (mr.c:956).
 */
import type { Context } from './context.ts';
import { removing } from './verbs_error.ts';
import { MS } from '../sim/time.ts';
import type { CmdOf } from '../rtl/firmware/cmd_types.ts';
import { MkcAccessMode, makeKey } from '../rtl/formats/constants.ts';
import { Module } from '../sim/module.ts';
import type { Counter } from '../sim/stats.ts';
import { DEFAULT_HCA_CONFIG } from '../rtl/config.ts';

/** The smallest bucket, in MTT entries: MLX5_MR_CACHE_PERSISTENT_ENTRY_MIN_DESCS (mr.c:52). */
export const MKEY_CACHE_MIN_DESCS = 4;
/** The last bucket's order with umr_extended_translation_offset: MKEY_CACHE_LAST_STD_ENTRY (include/linux/mlx5/driver.h:753). */
export const MKEY_CACHE_LAST_STD_ENTRY = 20;
/** Cache CREATE_MKEYs in flight per bucket at most: MAX_PENDING_REG_MR (mr.c:49). */
export const MAX_PENDING_REG_MR = 8;
/** Profile 2's limits of the buckets of order 12..15 (core/main.c:165-180); 0 from order 16. */
const PROFILE_LARGE_LIMITS = [32, 16, 8, 4] as const;
/** A work retried after a failure, or a shrink while fills are pending, waits 1 s (mr.c:526, 579). */
const RETRY_PS = 1_000 * MS;

/** The limit of the bucket of `order` under a profile whose small buckets have limit `limit`. */
export function mkeyCacheLimit(order: number, limit: number): number {
  if (order < 12) return limit;
  if (order < 16) return Math.min(limit, PROFILE_LARGE_LIMITS[order - 12]);
  return 0;
}

/** Bucket capacities in MTT entries, with the default configuration (4, 8, ..., 4 x 2^20). */
export const POOL_BUCKETS: readonly number[] = Object.freeze(
  Array.from({ length: DEFAULT_HCA_CONFIG.mrCacheLastOrder + 1 }, (_, i) => MKEY_CACHE_MIN_DESCS << i),
);
/** @deprecated The limit of the buckets up to 8 Ki entries is the configuration's `mrCacheLimit` (default 250). */
export const POOL_LIMIT = DEFAULT_HCA_CONFIG.mrCacheLimit;
/** @deprecated The configuration's `mrCacheShrinkDelayPs` (default 300 s). */
export const POOL_SHRINK_DELAY_PS = DEFAULT_HCA_CONFIG.mrCacheShrinkDelayPs;
/** @deprecated The configuration's `mrCacheFillDelayPs` (default 1 s). */
export const POOL_FILL_DELAY_PS = DEFAULT_HCA_CONFIG.mrCacheFillDelayPs;

/** One bucket (a cache entry) as `ctx.pool.stats()` shows it. */
export interface MkeyCacheBucketStats {
  /** MTT entries of its mkeys. */
  readonly ndescs: number;
  /** A temporary entry (made by a deregistration of a size with no bucket). */
  readonly tmp: boolean;
  readonly limit: number;
  /** Mkeys of the entry: free plus handed out (mlx5's debugfs `size`). */
  readonly size: number;
  /** Free mkeys (debugfs `cur`). */
  readonly free: number;
  /** Takes served from the free mkeys, takes that found none (debugfs `miss`), and mkeys its fills made. */
  readonly hits: number;
  readonly misses: number;
  readonly fills: number;
}

/** What the pool holds and has done (for tests and benches). */
export interface MkeyPoolStats {
  /** Free mkeys per bucket, by capacity (temporary entries too). */
  readonly free: Readonly<Record<number, number>>;
  /** Mkeys made by fills and misses, and destroyed by shrinking and temporary entries' cleanup. */
  readonly created: number;
  readonly destroyed: number;
  /** Fills the firmware refused (no mkey left). */
  readonly refillsRefused: number;
  /** Every entry, smallest first. */
  readonly buckets: readonly MkeyCacheBucketStats[];
}

/** A cache entry (mlx5_cache_ent). */
interface Ent {
  /** Its place in `MkeyPool.byId`. */
  readonly id: number;
  readonly ndescs: number;
  readonly tmp: boolean;
  readonly limit: number;
  /** Free mkeys, whole 32-bit keys, last in first out (push_mkey_locked / pop_mkey_locked). */
  readonly keys: number[];
  pending: number;
  inUse: number;
  fillToHighWater: boolean;
  tmpCleanupScheduled: boolean;
  /** The generation of the work's timer (a newer mod_delayed_work replaces it), and when it is due (-1: not queued). */
  workGen: number;
  workAt: number;
  readonly hits: Counter;
  readonly misses: Counter;
  readonly fills: Counter;
}

/**
 * The cache's statistics scope, and the target of its timers: a timer of a module without work
 * does not keep a stalled run alive (sim.ts `stalled`), so a 300 s shrink timer never hides a
 * stall. `fire(id)` runs the callback armed with that id.
 */
class MrCacheModule extends Module {
  private readonly timers = new Map<number, () => void>();
  private nextId = 0;

  /** Runs `fn` `dt` ps from now, as an event of this module. */
  after(dt: number, fn: () => void): void {
    const id = ++this.nextId;
    this.timers.set(id, fn);
    this.sim.after(dt, this, id);
  }

  fire(id: number): void {
    const fn = this.timers.get(id);
    this.timers.delete(id);
    fn?.();
  }
}

export class MkeyPool {
  /** Entries ordered by size (mlx5's rb-tree: one access mode, no access flags or ATS here). */
  private readonly ents: Ent[] = [];
  /**
   * Mkeys handed out from an entry, by index: their entry's in-use count drops when they return.
   * The entry's id + 1 per mkey index (0: not handed out by the cache), in an array grown by
   * doubling: 4 bytes per index where a Map took some 45 per live MR (a million live MRs).
   */
  private out = new Int32Array(1024);
  /** Every entry ever made, by id (`out` holds id + 1; entries are never removed). */
  private readonly byId: Ent[] = [];
  private readonly mod: MrCacheModule;
  private loaded = false;
  /** The device is going away (tb.closeDevice): no more fills or shrinks. */
  private stopped = false;
  private pdn = -1;
  private fillDelay = false;
  private lastAdd = 0;
  /** The ordered work queue: one work item at a time. */
  private wqTail: Promise<void> = Promise.resolve();
  private readonly sCreated: Counter;
  private readonly sDestroyed: Counter;
  private readonly sRefused: Counter;

  constructor(private readonly ctx: Context) {
    // one per adapter (Context shares it among the adapter's contexts), as mlx5's dev->cache
    this.mod = new MrCacheModule(ctx.tb.sim, ctx.hca, 'mr_cache');
    this.sCreated = this.mod.stats.counter('created');
    this.sDestroyed = this.mod.stats.counter('destroyed');
    this.sRefused = this.mod.stats.counter('fills_refused');
    const cfg = ctx.hca.cfg;
    for (let i = 0; i <= cfg.mrCacheLastOrder; i++) this.insert(MKEY_CACHE_MIN_DESCS << i, false, mkeyCacheLimit(i, cfg.mrCacheLimit));
  }

  /**
   * The bucket a request of `entries` MTT entries takes with the default buckets (4 x 2^i, at
   * most twice the request), or 0 when none fits. Temporary entries are not buckets.
   */
  static bucketOf(entries: number): number {
    if (!(entries >= 1)) return 0;
    const b = Math.max(MKEY_CACHE_MIN_DESCS, 2 ** Math.ceil(Math.log2(entries)));
    return b <= MKEY_CACHE_MIN_DESCS << MKEY_CACHE_LAST_STD_ENTRY && b <= Math.max(2 * entries, MKEY_CACHE_MIN_DESCS) ? b : 0;
  }

  /**
   * Device load (mlx5r_umr_init, then mlx5_mkey_cache_init: main.c:4552-4563): the driver's PD,
   * then every bucket queued to fill to twice its limit, in the background.
   */
  async load(): Promise<void> {
    if (this.loaded) return;
    this.loaded = true;
    this.pdn = (await this.ctx.umr.pd()).pdn;
    for (const ent of this.ents) this.queueAdjust(ent);
  }

  /**
   * mkey_cache_ent_from_rb_key (mr.c:679-718): the entry of exactly `ndescs`, else the smallest
   * larger one if it holds at most max(2 x ndescs, 4) entries, else none.
   */
  private entFor(ndescs: number): Ent | null {
    for (const e of this.ents) {
      if (e.ndescs < ndescs) continue;
      return e.ndescs === ndescs || e.ndescs <= Math.max(2 * ndescs, MKEY_CACHE_MIN_DESCS) ? e : null;
    }
    return null;
  }

  /**
   * _mlx5_mr_cache_alloc (mr.c:720-757) for a registration of `entries` MTT entries: a free
   * mkey's whole key (a hit), or a cache mkey made now by CREATE_MKEY (a miss); null when no
   * entry fits (the caller creates an mkey of its own, as reg_create does). A miss the
   * firmware refuses throws its VerbsError.
   */
  async alloc(entries: number): Promise<{ key: number; bucket: number } | null> {
    const ent = this.entFor(entries);
    if (ent === null) return null;
    ent.inUse++;
    let key = ent.keys.pop();
    if (key === undefined) {
      this.queueAdjust(ent);
      ent.misses.inc();
      try {
        key = await this.createCacheMkey(ent);
      } catch (e) {
        ent.inUse--;
        throw e;
      }
    } else {
      ent.hits.inc();
      this.queueAdjust(ent);
    }
    this.setOut(key >>> 8, ent.id + 1);
    return { key, bucket: ent.ndescs };
  }

  /**
   * A free mkey of the bucket of `bucket` entries (its index), or -1 when it has none (a miss,
   * counted; the bucket fills in the background). For callers that enable it themselves.
   */
  take(bucket: number): number {
    const key = this.takeKey(bucket);
    return key < 0 ? -1 : key >>> 8;
  }

  /** As `take`, but the whole 32-bit key mlx5 keeps across reuse, or -1. */
  takeKey(bucket: number): number {
    const ent = this.ents.find((e) => e.ndescs === bucket && !e.tmp);
    if (ent === undefined) return -1;
    const key = ent.keys.pop();
    if (key === undefined) {
      ent.misses.inc();
      this.queueAdjust(ent);
      return -1;
    }
    ent.hits.inc();
    ent.inUse++;
    this.setOut(key >>> 8, ent.id + 1);
    this.queueAdjust(ent);
    return key;
  }

  /**
   * Deregistration of a cacheable MR of `bucket` MTT entries: revoked by UMR keeping its key
   * (mlx5r_umr_revoke_mr, umr.c:422-441), then stored in the entry of exactly that size, or a
   * temporary one (cache_ent_find_and_store, mr.c:1985-2024) cleaned 30 s after its first store.
   */
  async revoke(key: number, bucket: number): Promise<void> {
    await this.ctx.umr.revokeKeepingKey(key);
    const index = key >>> 8;
    const id = index < this.out.length ? this.out[index] : 0;
    if (id !== 0) {
      this.byId[id - 1].inUse--;
      this.out[index] = 0;
    }
    let ent = this.entFor(bucket);
    if (ent === null || ent.ndescs !== bucket) ent = this.insert(bucket, true, 0);
    ent.keys.push(key);
    if (ent.tmp && !ent.tmpCleanupScheduled) {
      ent.tmpCleanupScheduled = true;
      this.modWork(ent, this.ctx.hca.cfg.mrCacheTmpDelayPs);
    }
  }

  private setOut(index: number, v: number): void {
    if (index >= this.out.length) {
      let len = this.out.length;
      while (len <= index) len *= 2;
      const grown = new Int32Array(len);
      grown.set(this.out);
      this.out = grown;
    }
    this.out[index] = v;
  }

  /** What the pool holds and has done. */
  stats(): MkeyPoolStats {
    const free: Record<number, number> = {};
    for (const e of this.ents) free[e.ndescs] = e.keys.length;
    return {
      free,
      created: this.sCreated.value,
      destroyed: this.sDestroyed.value,
      refillsRefused: this.sRefused.value,
      buckets: this.ents.map((e) => ({
        ndescs: e.ndescs, tmp: e.tmp, limit: e.limit, size: e.keys.length + e.inUse, free: e.keys.length,
        hits: e.hits.value, misses: e.misses.value, fills: e.fills.value,
      })),
    };
  }

  /** A new entry in size order (mlx5r_cache_create_ent_locked), its statistics under the cache's module. */
  private insert(ndescs: number, tmp: boolean, limit: number): Ent {
    const name = `${tmp ? 'tmp' : 'b'}${ndescs}`;
    const s = this.mod.stats;
    const ent: Ent = {
      id: this.byId.length,
      ndescs, tmp, limit, keys: [], pending: 0, inUse: 0, fillToHighWater: false, tmpCleanupScheduled: false, workGen: 0, workAt: -1,
      hits: s.counter(`${name}_hits`), misses: s.counter(`${name}_misses`), fills: s.counter(`${name}_fills`),
    };
    s.gauge(`${name}_size`, () => ent.keys.length + ent.inUse);
    s.gauge(`${name}_free`, () => ent.keys.length);
    this.byId.push(ent);
    let i = 0;
    while (i < this.ents.length && this.ents[i].ndescs < ndescs) i++;
    this.ents.splice(i, 0, ent);
    return ent;
  }

  /** queue_adjust_cache_locked (mr.c:505-532): fill below the limit up to twice it, shrink above twice it. */
  private queueAdjust(ent: Ent): void {
    if (ent.tmp || this.fillDelay || !this.loaded || this.stopped) return;
    const ci = ent.keys.length;
    if (ci < ent.limit) {
      ent.fillToHighWater = true;
      this.modWork(ent, 0);
    } else if (ent.fillToHighWater && ci + ent.pending < 2 * ent.limit) {
      this.modWork(ent, 0);
    } else if (ci === 2 * ent.limit) {
      ent.fillToHighWater = false;
    } else if (ci > 2 * ent.limit) {
      ent.fillToHighWater = false;
      if (ent.pending > 0) this.queueWork(ent, RETRY_PS);
      else this.modWork(ent, 0);
    }
  }

  /** mod_delayed_work: the entry's work runs `delay` from now (an earlier timer is replaced). */
  private modWork(ent: Ent, delay: number): void {
    const gen = ++ent.workGen;
    ent.workAt = this.ctx.tb.now + delay;
    // (no closure for the work queued now: a registration queues one per MR)
    if (delay === 0) this.startWork(ent, gen);
    else this.mod.after(delay, () => this.startWork(ent, gen));
  }

  /** The entry's work joins the ordered queue, unless a newer mod_delayed_work replaced it. */
  private startWork(ent: Ent, gen: number): void {
    if (ent.workGen !== gen || this.stopped) return;
    ent.workAt = -1;
    const run = this.wqTail.then(() => this.work(ent));
    this.wqTail = run;
    // a failure of the work fails the run (as a spawned process's would)
    void this.ctx.tb.sim.spawn(() => run);
  }

  /** queue_delayed_work: as modWork, unless the work is already queued. */
  private queueWork(ent: Ent, delay: number): void {
    if (ent.workAt < 0) this.modWork(ent, delay);
  }

  /** delayed_cache_work_func / __cache_work_func (mr.c:549-625). */
  private async work(ent: Ent): Promise<void> {
    if (ent.tmp) {
      // clean_keys (mr.c:534-547): a temporary entry is never filled, only emptied
      const keys = ent.keys.splice(0);
      ent.tmpCleanupScheduled = false;
      await this.destroyAll(keys);
      return;
    }
    if (ent.fillToHighWater && ent.keys.length + ent.pending < 2 * ent.limit && !this.fillDelay) {
      this.addKey(ent);
    } else if (ent.keys.length > 2 * ent.limit) {
      const cfg = this.ctx.hca.cfg;
      const needDelay = this.someoneAdding() || !(this.ctx.tb.now > this.lastAdd + cfg.mrCacheShrinkDelayPs);
      if (needDelay) {
        this.queueWork(ent, cfg.mrCacheShrinkDelayPs);
        return;
      }
      const key = ent.keys.pop()!;
      await this.destroyAll([key]);
      this.queueAdjust(ent);
    }
  }

  /**
   * The device is going away: no work starts from now on (mr.c:1011-1021 mlx5_mkey_cache_cleanup
   * disables every entry and cancels its work); `cleanup` destroys the mkeys once the user MRs are gone.
   */
  stop(): void {
    this.stopped = true;
  }

  /**
   * mlx5_mkey_cache_cleanup (mr.c:998-1027), at the device's removal, after every user MR has
   * gone (and stored its mkey here): entries disabled (stop), the work and the fills in flight
   * finished (flush_workqueue, mlx5_cmd_cleanup_async_ctx), then every free mkey destroyed, entry
   * by entry from the smallest (mlx5r_destroy_cache_entries, mr.c:925-940; clean_keys, mr.c:534-547).
   * clean_keys sends one DESTROY_MKEY at a time; here they go together in the background lane
   * (a choice: the same commands, in less simulated time).
   */
  async cleanup(): Promise<void> {
    this.stop();
    await this.wqTail.catch(() => undefined);
    await this.ctx.cmdq.drain();
    const cmdq = this.ctx.cmdq;
    for (const ent of this.ents) {
      const done = await Promise.all(ent.keys.splice(0).map((key) => removing(this.ctx.cmd(cmdq.execBackground({ op: 'DESTROY_MKEY', index: key >>> 8 }), 'close'))));
      for (const _ of done) this.sDestroyed.inc();
    }
  }

  /** @internal A handed-out mkey that will not come back (its MR destroyed it): its entry no longer counts it. */
  forget(key: number): void {
    const index = key >>> 8;
    const id = index < this.out.length ? this.out[index] : 0;
    if (id === 0) return;
    this.byId[id - 1].inUse--;
    this.out[index] = 0;
  }

  /** someone_adding (mr.c:479-498): some bucket is below its limit. */
  private someoneAdding(): boolean {
    return this.ents.some((e) => e.keys.length < e.limit);
  }

  /** add_keys(ent, 1) (mr.c:262-304): one asynchronous cache CREATE_MKEY in the background lane. */
  private addKey(ent: Ent): void {
    if (ent.pending >= MAX_PENDING_REG_MR) return; // -EAGAIN: requeued by the pending ones' completion
    ent.pending++;
    const tag = this.ctx.nextTag(); // assign_mkey_variant (mr.c:90-98)
    this.ctx.cmdq.execBackground(this.cacheMkc(ent, tag)).then(
      (r) => {
        // create_mkey_callback (mr.c:193-223)
        this.lastAdd = this.ctx.tb.now;
        ent.pending--;
        ent.keys.push(makeKey(r.index, tag));
        ent.fills.inc();
        this.sCreated.inc();
        this.queueAdjust(ent);
      },
      () => {
        ent.pending--;
        this.sRefused.inc();
        this.fillDelay = true;
        // delay_time_func (mr.c:840-845) clears it; nothing is requeued then (the next take adjusts)
        this.mod.after(this.ctx.hca.cfg.mrCacheFillDelayPs, () => {
          this.fillDelay = false;
        });
      },
    );
  }

  /**
   * create_cache_mkey (mr.c:306-327): a cache mkey made now, for a miss, by the firmware's
   * foreground queue. mlx5_core_create_mkey with no variant assigned: the key's low byte is 0.
   */
  private async createCacheMkey(ent: Ent): Promise<number> {
    if (this.pdn < 0) await this.load();
    const r = await this.ctx.cmd(this.ctx.cmdq.exec(this.cacheMkc(ent, 0)), 'regMr');
    this.lastAdd = this.ctx.tb.now;
    this.sCreated.inc();
    return makeKey(r.index, 0);
  }

  /**
   * set_cache_mkc (mr.c:244-259): free, UMR-enabled, the driver's PD, room for the entry's
   * translations. With pg_access (a choice): mlx5 takes ODP MRs from the same entries
   * (create_user_odp_mr, mr.c:1507; the rb key has no ODP bit), so the hardware honours the
   * RD/WR bits of UMR-loaded MTT entries, and in this model that is what pg_access means; every
   * other user of a cache mkey loads its entries with RD | WR (umr.c mlx5r_umr_update_mr_pas:
   * MLX5_IB_MTT_PRESENT), so for them nothing changes.
   */
  private cacheMkc(ent: Ent, tag: number): CmdOf<'CREATE_MKEY'> {
    return {
      op: 'CREATE_MKEY', tag, free: true, accessMode: MkcAccessMode.MTT, access: 0, umrEn: true, remoteInval: false,
      pd: this.pdn, start: 0, length: 0, logPageSize: 12, xltCapacity: ent.ndescs, pgAccess: true,
    };
  }

  /** DESTROY_MKEY of cache mkeys (taken off their entries already), in the background lane. */
  private async destroyAll(keys: readonly number[]): Promise<void> {
    const cmdq = this.ctx.cmdq;
    const done = await Promise.allSettled(keys.map((key) => cmdq.execBackground({ op: 'DESTROY_MKEY', index: key >>> 8 })));
    for (const r of done) {
      if (r.status === 'fulfilled') this.sDestroyed.inc();
      else throw r.reason; // a cache mkey is always allocated: a failure is a bug
    }
  }
}
