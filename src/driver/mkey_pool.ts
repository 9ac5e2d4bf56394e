/**
 * The driver's MR cache (mlx5_ib's mkey cache): free MTT mkeys made in advance by CREATE_MKEY,
 * enabled for a user MR by a UMR work request on the driver's own QP (~14 us for 64 pages
 * instead of ~230 us of firmware, spec/timing.md), and revoked by UMR on deregistration so the
 * mkey returns to the pool. Buckets by capacity in MTT entries: 8, 64, 512; bigger MRs, or an
 * empty bucket, fall back to CREATE_MKEY.
 *
 * Limits, as mlx5's cache entries have them: a bucket below POOL_LIMIT free mkeys refills to
 * twice that in the background, in bulk (background firmware commands, BACKGROUND_SLOTS at a
 * time: they never delay a user's command); a bucket above twice the limit gives the excess
 * back (DESTROY_MKEY in the background) once POOL_SHRINK_DELAY_PS has passed. A refill the
 * firmware refuses (no mkey left) stops it for POOL_FILL_DELAY_PS, and a user's registration
 * that finds no mkey left first takes back every free pooled one (`reclaim`), so the pool never
 * holds mkeys a caller is refused.
 */
import type { Context } from './context.ts';
import type { Pd } from './pd.ts';
import { CmdError } from '../rtl/firmware/cmd_types.ts';
import { US } from '../sim/time.ts';
import { MkcAccessMode } from '../rtl/formats/constants.ts';

/** Bucket capacities in MTT entries. */
export const POOL_BUCKETS = [8, 64, 512] as const;
/**
 * A bucket with fewer free mkeys refills to twice this many; one with more than twice this many
 * gives the excess back. mlx5's profile gives its cache entries limits of 250 (size 500); a
 * simulated run registers far fewer MRs, so 16 here (assumed).
 */
export const POOL_LIMIT = 16;
/**
 * How long free mkeys above the limit stay before they are destroyed. mlx5 removes them once its
 * cache has had no addition for 300 s (cache->last_add + 300 * HZ); a simulated run rarely lasts
 * a second, so 10 ms here (assumed).
 */
export const POOL_SHRINK_DELAY_PS = 10_000 * US;
/** After the firmware refuses a refill (NO_RESOURCES), none for this long: mlx5's fill_delay timer (1 s, delay_time_func). */
export const POOL_FILL_DELAY_PS = 1_000_000 * US;

/** What the pool holds and has done (for tests and benches). */
export interface MkeyPoolStats {
  /** Free mkeys per bucket, by capacity. */
  readonly free: Readonly<Record<number, number>>;
  /** Mkeys made by background refills, and destroyed by shrinking or reclaim. */
  readonly created: number;
  readonly destroyed: number;
  /** Refills the firmware refused (no mkey left). */
  readonly refillsRefused: number;
}

export class MkeyPool {
  private readonly free = new Map<number, number[]>(POOL_BUCKETS.map((b) => [b, []]));
  private readonly refilling = new Set<number>();
  private readonly shrinking = new Set<number>();
  private fillDelayUntil = -1;
  private nCreated = 0;
  private nDestroyed = 0;
  private nRefused = 0;

  constructor(private readonly ctx: Context) {}

  /** The bucket for an MR of `pages` pages, or 0 when too big for the pool. */
  static bucketOf(pages: number): number {
    for (const b of POOL_BUCKETS) if (pages <= b) return b;
    return 0;
  }

  /** A free pool mkey of the bucket (its index), or -1 when the bucket is empty. A bucket below its limit refills in the background. */
  take(bucket: number): number {
    const list = this.free.get(bucket);
    if (!list) return -1;
    const index = list.shift();
    if (list.length < POOL_LIMIT) this.refill(bucket);
    return index ?? -1;
  }

  /** What the pool holds and has done. */
  stats(): MkeyPoolStats {
    const free: Record<number, number> = {};
    for (const b of POOL_BUCKETS) free[b] = this.free.get(b)!.length;
    return { free, created: this.nCreated, destroyed: this.nDestroyed, refillsRefused: this.nRefused };
  }

  /**
   * Refills a bucket to twice its limit in the background: all the CREATE_MKEYs at once in the
   * firmware's background lane (which runs them BACKGROUND_SLOTS at a time, beside the user's
   * commands). A refusal (no mkey left) ends it and holds refills off for POOL_FILL_DELAY_PS.
   */
  private refill(bucket: number): void {
    if (this.refilling.has(bucket) || this.ctx.tb.now < this.fillDelayUntil) return;
    this.refilling.add(bucket);
    const ctx = this.ctx;
    void ctx.tb.spawn(async () => {
      // let the caller post its own command first (the pool's one-time PD is a user command)
      await Promise.resolve();
      const pd = await this.pd();
      const list = this.free.get(bucket)!;
      const want = 2 * POOL_LIMIT - list.length;
      let refused = false;
      // each mkey joins the bucket as its round completes
      const made = Array.from({ length: Math.max(0, want) }, () =>
        ctx.cmdq
          .execBackground({
            op: 'CREATE_MKEY', tag: 0, free: true, accessMode: MkcAccessMode.MTT, access: 0, umrEn: true, remoteInval: false,
            pd: pd.pdn, start: 0, length: 0, logPageSize: 12, xltCapacity: bucket,
          })
          .then(
            (r) => {
              list.push(r.index);
              this.nCreated++;
            },
            (e: unknown) => {
              if (!(e instanceof CmdError)) throw e;
              refused = true;
            },
          ),
      );
      await this.ctx.umr.ready(); // the UMR QP (made once) ready before the first enable, meanwhile
      await Promise.all(made);
      if (refused) {
        this.nRefused++;
        this.fillDelayUntil = ctx.tb.now + POOL_FILL_DELAY_PS;
      }
      this.refilling.delete(bucket);
      if (list.length > 2 * POOL_LIMIT) this.shrinkLater(bucket);
      // takes during the round drained it again: another round (not only at the next take)
      else if (!refused && list.length < POOL_LIMIT) this.refill(bucket);
    });
  }

  /** Gives back the free mkeys of a bucket above twice its limit, POOL_SHRINK_DELAY_PS from now. */
  private shrinkLater(bucket: number): void {
    if (this.shrinking.has(bucket)) return;
    this.shrinking.add(bucket);
    const ctx = this.ctx;
    void ctx.tb.spawn(async () => {
      await ctx.tb.delay(POOL_SHRINK_DELAY_PS);
      const list = this.free.get(bucket)!;
      const excess = list.splice(2 * POOL_LIMIT); // the most recently returned go first
      await this.destroyAll(excess);
      this.shrinking.delete(bucket);
      if (list.length > 2 * POOL_LIMIT) this.shrinkLater(bucket);
    });
  }

  /** DESTROY_MKEY of pooled mkeys (taken off their lists already), in the background lane. */
  private async destroyAll(indices: readonly number[]): Promise<void> {
    const cmdq = this.ctx.cmdq;
    const done = await Promise.allSettled(indices.map((index) => cmdq.execBackground({ op: 'DESTROY_MKEY', index })));
    for (const r of done) {
      if (r.status === 'fulfilled') this.nDestroyed++;
      else throw r.reason; // a pooled mkey is always allocated: a failure is a bug
    }
  }

  /**
   * Destroys every free pooled mkey (a registration found no mkey left: the pool's reserve goes
   * back to the firmware first). Returns how many.
   */
  async reclaim(): Promise<number> {
    const all: number[] = [];
    for (const b of POOL_BUCKETS) all.push(...this.free.get(b)!.splice(0));
    await this.destroyAll(all);
    return all.length;
  }

  /**
   * Revokes a pool MR by UMR (umr.ts) and returns the mkey to its bucket.
   */
  async revoke(key: number, bucket: number): Promise<void> {
    await this.ctx.umr.revoke(key);
    const list = this.free.get(bucket)!;
    list.push(key >>> 8);
    if (list.length > 2 * POOL_LIMIT) this.shrinkLater(bucket);
  }

  /** The pool's PD (its free mkeys belong to it until a UMR gives them a user's PD). */
  private async pd(): Promise<Pd> {
    return this.ctx.umr.pd();
  }
}
