/**
 * The driver's MR cache (mlx5_ib's mkey cache): free MTT mkeys made in advance by CREATE_MKEY,
 * enabled for a user MR by a UMR work request on the driver's own QP (~14 us for 64 pages
 * instead of ~230 us of firmware, spec/timing.md), and revoked by UMR on deregistration so the
 * mkey returns to the pool. Buckets by capacity in pages: 8, 64, 512; bigger MRs, or an empty
 * bucket, fall back to CREATE_MKEY (and the empty bucket refills in the background).
 */
import type { Context } from './context.ts';
import type { Pd } from './pd.ts';
import type { Qp } from './qp.ts';
import type { Cq } from './cq.ts';
import { VerbsError } from './verbs_error.ts';
import { buildLocalInvWqe, buildRegMrWqe, buildXltUpdateWqe, ksmListBytes, mttListBytes, UMR_INLINE_THRESHOLD } from './wqe_builder.ts';
import { MkcAccessMode, MkeyMaskBit, makeKey } from '../rtl/formats/constants.ts';
import { IbAccess } from './types.ts';

/** Bucket capacities in 4 KiB pages, and how many mkeys a refill makes. */
export const POOL_BUCKETS = [8, 64, 512] as const;
const REFILL = 4;

export class MkeyPool {
  private readonly free = new Map<number, number[]>(POOL_BUCKETS.map((b) => [b, []]));
  private readonly refilling = new Set<number>();
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

  private async updateXlt(key: number, xltOffsetOcto: number, list: Uint8Array): Promise<void> {
    const qp = await this.umrQp();
    return this.exclusive(async () => {
      const wrId = ++this.seq;
      const listAddr = list.length > UMR_INLINE_THRESHOLD ? qp.descriptorList(list) : undefined;
      qp.postBuilt(wrId, 'REG_MR', (view, common) =>
        buildXltUpdateWqe(view, 0, { ...common, key, xltOffsetOcto, list, ...(listAddr !== undefined ? { listAddr, listLkey: 0x100 } : {}) }),
      );
      await this.complete(wrId, 'ODP translation update (UMR)');
    });
  }


  /** The bucket for an MR of `pages` pages, or 0 when too big for the pool. */
  static bucketOf(pages: number): number {
    for (const b of POOL_BUCKETS) if (pages <= b) return b;
    return 0;
  }

  /** A free pool mkey of the bucket (its index), or -1 when the bucket is empty (a refill starts). */
  take(bucket: number): number {
    const list = this.free.get(bucket);
    if (!list) return -1;
    const index = list.shift();
    if (list.length === 0) this.refill(bucket);
    return index ?? -1;
  }

  /** Makes `REFILL` free mkeys of a bucket in the background (firmware commands, serialized). */
  private refill(bucket: number): void {
    if (this.refilling.has(bucket)) return;
    this.refilling.add(bucket);
    const ctx = this.ctx;
    void ctx.tb.spawn(async () => {
      const pd = await this.pd();
      for (let i = 0; i < REFILL; i++) {
        const r = await ctx.cmd(
          ctx.hca.cmdif.exec({
            op: 'CREATE_MKEY', tag: 0, free: true, accessMode: MkcAccessMode.MTT, access: 0, umrEn: true, remoteInval: false,
            pd: pd.pdn, start: 0, length: 0, logPageSize: 12, xltCapacity: bucket,
          }),
          'mkey pool refill',
        );
        this.free.get(bucket)!.push(r.index);
      }
      await this.umrQp(); // ready before the first enable
      this.refilling.delete(bucket);
    });
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
        const a = await pd.createQp({ sendCq: this.cq, recvCq: this.cq, maxSendWr: 16, maxRecvWr: 1 });
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
        // START_ADDR in the mask also sets (or clears) the zero-based bit and first byte offset
        zeroBased: zb.zeroBased, fbo: zb.fbo,
      });
      // the UMR also sets the PD (mask bit PD) and leaves remote invalidation off (a user MR)
      view.setUint8(24 + 7 - (MkeyMaskBit.PD >> 3), view.getUint8(24 + 7 - (MkeyMaskBit.PD >> 3)) | (1 << (MkeyMaskBit.PD & 7)));
      view.setUint32(64 + 12, pd.pdn & 0xffffff);
      if ((access & IbAccess.MW_BIND) !== 0) view.setUint8(64 + 3, view.getUint8(64 + 3) | 0x02);
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
    this.free.get(bucket)!.push(key >>> 8);
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
