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
import type { Qp } from './qp.ts';
import type { Cq } from './cq.ts';
import { VerbsError } from './verbs_error.ts';
import { CmdError } from '../rtl/firmware/cmd_types.ts';
import { US } from '../sim/time.ts';
import { buildLocalInvWqe, buildRegMrWqe, buildXltUpdateWqe, ksmListBytes, mttListBytes, UMR_INLINE_THRESHOLD } from './wqe_builder.ts';
import { MkcAccessMode, MkeyMaskBit, makeKey } from '../rtl/formats/constants.ts';
import { IbAccess } from './types.ts';

/**
 * The most translation bytes one UMR writes: MLX5_MAX_UMR_CHUNK = (1 << (MLX5_MAX_UMR_SHIFT + 4))
 * - MLX5_UMR_FLEX_ALIGNMENT = 1 MiB - 64 B (drivers/infiniband/hw/mlx5/umr.c:487-488, umr.h:10
 * MLX5_MAX_UMR_SHIFT 16, include/linux/mlx5/device.h:296 MLX5_UMR_FLEX_ALIGNMENT 0x40): 131,064
 * MTT entries or 65,532 KLM/KSM entries, 65,532 octowords, within xlt_octowords' 16 bits.
 */
export const MAX_UMR_CHUNK = 2 ** 20 - 64;

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
  private qp: Qp | null = null;
  private cq: Cq | null = null;
  private setup: Promise<void> | null = null;
  private seq = 0;
  /** The UMR QP is shared (pool, ODP fault handler, MMU notifier): one UMR at a time, in order. */
  private umrTail: Promise<unknown> = Promise.resolve();

  constructor(private readonly ctx: Context) {}

  /** Runs `fn` (post one UMR and wait for it) when the UMRs before it have completed. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.umrTail.then(fn, fn);
    this.umrTail = run.catch(() => undefined);
    return run;
  }

  /**
   * Writes MTT entries of an MR by UMR (a translation update with an offset: ODP maps and zaps
   * pages this way). `firstEntry` and the entry count are whole 64-byte units (8 entries).
   */
  updateTranslations(key: number, firstEntry: number, entries: readonly number[]): Promise<void> {
    if (firstEntry % 8 !== 0 || entries.length % 8 !== 0) throw new Error('an MTT update covers whole 64-byte units (8 entries)');
    return this.updateXlt(key, firstEntry / 2, mttListBytes(entries));
  }

  /** Writes KSM entries of an implicit ODP parent by UMR: `firstEntry` a multiple of 4 (64 bytes). */
  updateKsm(key: number, firstEntry: number, entries: readonly { key: number; va: number }[]): Promise<void> {
    if (firstEntry % 4 !== 0 || entries.length % 4 !== 0) throw new Error('a KSM update covers whole 64-byte units (4 entries)');
    return this.updateXlt(key, firstEntry, ksmListBytes(entries));
  }

  /**
   * A translation update as mlx5r_umr_update_xlt posts it: one UMR per chunk of at most
   * MAX_UMR_CHUNK bytes of entries, each at its own offset (xlt_octowords is 16 bits: one UMR
   * writes less than 1 MiB). The chunks go in order, each after the one before completed.
   */
  private async updateXlt(key: number, xltOffsetOcto: number, list: Uint8Array): Promise<void> {
    const qp = await this.umrQp();
    for (let done = 0; done < list.length; done += MAX_UMR_CHUNK) {
      const chunk = list.subarray(done, Math.min(list.length, done + MAX_UMR_CHUNK));
      const offset = xltOffsetOcto + done / 16;
      await this.exclusive(async () => {
        const wrId = ++this.seq;
        const listAddr = chunk.length > UMR_INLINE_THRESHOLD ? qp.descriptorList(chunk) : undefined;
        qp.postBuilt(wrId, 'REG_MR', (view, common) =>
          buildXltUpdateWqe(view, 0, { ...common, key, xltOffsetOcto: offset, list: chunk, ...(listAddr !== undefined ? { listAddr, listLkey: 0x100 } : {}) }),
        );
        await this.complete(wrId, 'ODP translation update (UMR)');
      });
    }
  }


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
      await this.umrQp(); // the UMR QP (made once) ready before the first enable, meanwhile
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

  private pdObj: Pd | null = null;
  private async pd(): Promise<Pd> {
    if (!this.pdObj) this.pdObj = await this.ctx.allocPd();
    return this.pdObj;
  }

  /** Makes the driver's UMR QP if it does not exist yet (the first UMR user waits for it). */
  async ready(): Promise<void> {
    await this.umrQp();
  }

  /** The driver's UMR QP (a loopback pair, made once). */
  private async umrQp(): Promise<Qp> {
    if (!this.setup) {
      this.setup = (async () => {
        const pd = await this.pd();
        this.cq = await this.ctx.createCq(16);
        const a = await pd.createQp({ sendCq: this.cq, recvCq: this.cq, maxSendWr: 16, maxRecvWr: 1 }, true);
        const b = await pd.createQp({ sendCq: this.cq, recvCq: this.cq, maxSendWr: 1, maxRecvWr: 1 });
        await a.connect(b);
        this.qp = a;
      })();
    }
    await this.setup;
    return this.qp!;
  }

  /**
   * Enables pool mkey `index` as a user MR by UMR: new tag, the user's PD and access, its range
   * and pages (REG_MR with the PD added to the mask, no remote invalidation). Returns the key.
   */
  async enable(
    index: number, pd: Pd, access: number, start: number, length: number, mtt: readonly number[],
    zb: { zeroBased: boolean; fbo: number } = { zeroBased: false, fbo: 0 },
    logPageSize = 12,
  ): Promise<number> {
    const qp = await this.umrQp();
    return this.exclusive(() => this.enableNow(qp, index, pd, access, start, length, mtt, zb, logPageSize));
  }

  private async enableNow(
    qp: Qp, index: number, pd: Pd, access: number, start: number, length: number, mtt: readonly number[],
    zb: { zeroBased: boolean; fbo: number }, logPageSize: number,
  ): Promise<number> {
    const tag = this.ctx.nextTag();
    const key = makeKey(index, tag);
    const wrId = ++this.seq;
    const bytes = mtt.length * 8;
    let listAddr: number | undefined;
    if (bytes > 64) listAddr = qp.descriptorList(mttList(mtt));
    qp.postBuilt(wrId, 'REG_MR', (view, common) => {
      const ds = buildRegMrWqe(view, 0, {
        ...common, key,
        access: { localWrite: (access & 1) !== 0, remoteWrite: (access & 2) !== 0, remoteRead: (access & 4) !== 0, remoteAtomic: (access & 8) !== 0 },
        iova: start, length, translations: { mode: 'MTT', pages: mtt.map((v) => v - (v % 4096)), logPageSize },
        ...(listAddr !== undefined ? { listAddr, listLkey: 0x100 } : {}),
        // a pooled mkey may come back from a user with atomic: always set (or clear) A
        clearAtomic: true,
      });
      // START_ADDR in the mask also sets (or clears) the zero-based bit (a start of 0) and the
      // first byte offset, the access bits MW_BIND: passed beside the WQE (src/rtl/umr/umr_sideband.ts)
      this.ctx.hca.uar.umrExtras(common.qpn, common.wqeIndex, { mwBind: (access & IbAccess.MW_BIND) !== 0, fbo: zb.fbo });
      // the UMR also sets the PD (mask bit PD) and leaves remote invalidation off (a user MR)
      view.setUint8(24 + 7 - (MkeyMaskBit.PD >> 3), view.getUint8(24 + 7 - (MkeyMaskBit.PD >> 3)) | (1 << (MkeyMaskBit.PD & 7)));
      view.setUint32(64 + 12, pd.pdn & 0xffffff);
      return ds;
    });
    await this.complete(wrId, 'regMr (mkey pool UMR)');
    return key;
  }

  /**
   * Revokes a pool MR by UMR and returns the mkey to its bucket. The UMR frees the mkey and
   * retires its key (mask FREE | KEY, a new tag from the context's rolling counter), so the
   * deregistered key no longer names the free mkey: a LOCAL_INV or access through it fails as
   * for any key that names nothing (semantics.md "any call on a destroyed object").
   */
  async revoke(key: number, bucket: number): Promise<void> {
    const qp = await this.umrQp();
    await this.exclusive(async () => {
      const wrId = ++this.seq;
      let newTag = this.ctx.nextTag();
      if (newTag === (key & 0xff)) newTag = this.ctx.nextTag(); // the counter wrapped onto the old tag
      qp.postBuilt(wrId, 'LOCAL_INV', (view, common) => buildLocalInvWqe(view, 0, { ...common, key, newTag }));
      await this.complete(wrId, 'dereg (mkey pool UMR)');
    });
    const list = this.free.get(bucket)!;
    list.push(key >>> 8);
    if (list.length > 2 * POOL_LIMIT) this.shrinkLater(bucket);
  }

  private async complete(wrId: number, what: string): Promise<void> {
    const [wc] = await this.cq!.wait(1);
    if (wc.wrId !== wrId || wc.status !== 'SUCCESS') throw new VerbsError('EINVAL', `${what}: the UMR completed ${wc.status}`);
  }

}

/** The big-endian MTT list of a registration, padded to 64 bytes (UMR copies 64-byte units). */
function mttList(mtt: readonly number[]): Uint8Array {
  const buf = new Uint8Array(Math.ceil((mtt.length * 8) / 64) * 64);
  const v = new DataView(buf.buffer);
  for (let i = 0; i < mtt.length; i++) {
    v.setUint32(i * 8, Math.floor(mtt[i] / 2 ** 32));
    v.setUint32(i * 8 + 4, mtt[i] >>> 0);
  }
  return buf;
}
