/**
 * The driver's UMR QP (mlx5_ib's umr.c): the one send queue the driver posts its own memory
 * registration work requests on. The MR cache enables and revokes its mkeys through it, and the
 * ODP fault handler and MMU notifier write translation entries through it (mlx5r_umr_update_xlt).
 * UMRs run one at a time, in posting order, each waited for by its completion.
 */
import type { Context } from './context.ts';
import type { Pd } from './pd.ts';
import type { Qp } from './qp.ts';
import type { Cq } from './cq.ts';
import { VerbsError } from './verbs_error.ts';
import { buildLocalInvWqe, buildRegMrWqe, buildXltUpdateWqe, ksmListBytes, mttListBytes, UMR_INLINE_THRESHOLD } from './wqe_builder.ts';
import { MkeyMaskBit, makeKey } from '../rtl/formats/constants.ts';
import { IbAccess } from './types.ts';

/**
 * The most translation bytes one UMR writes: MLX5_MAX_UMR_CHUNK = (1 << (MLX5_MAX_UMR_SHIFT + 4))
 * - MLX5_UMR_FLEX_ALIGNMENT = 1 MiB - 64 B (drivers/infiniband/hw/mlx5/umr.c:487-488, umr.h:10
 * MLX5_MAX_UMR_SHIFT 16, include/linux/mlx5/device.h:296 MLX5_UMR_FLEX_ALIGNMENT 0x40): 131,064
 * MTT entries or 65,532 KLM/KSM entries, 65,532 octowords, within xlt_octowords' 16 bits.
 */
export const MAX_UMR_CHUNK = 2 ** 20 - 64;

export class DriverUmr {
  private qp: Qp | null = null;
  private cq: Cq | null = null;
  private setup: Promise<void> | null = null;
  private seq = 0;
  /** The UMR QP is shared (MR cache, ODP fault handler, MMU notifier): one UMR at a time, in order. */
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


  private pdObj: Pd | null = null;
  /** The driver's own PD (the UMR QP's, and the MR cache's free mkeys'). */
  async pd(): Promise<Pd> {
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
    return this.exclusive(() => this.enableNow(qp, makeKey(index, this.ctx.nextTag()), pd, access, start, length, mtt, zb, logPageSize));
  }

  /**
   * As `enable`, keeping the mkey's whole key: mlx5's MR cache hands out stored keys and the
   * enabling UMR writes the key's own variant (mkey_7_0, umr.c:615).
   */
  async enableKey(
    key: number, pd: Pd, access: number, start: number, length: number, mtt: readonly number[],
    zb: { zeroBased: boolean; fbo: number }, logPageSize: number,
  ): Promise<number> {
    const qp = await this.umrQp();
    return this.exclusive(() => this.enableNow(qp, key, pd, access, start, length, mtt, zb, logPageSize));
  }

  private async enableNow(
    qp: Qp, key: number, pd: Pd, access: number, start: number, length: number, mtt: readonly number[],
    zb: { zeroBased: boolean; fbo: number }, logPageSize: number,
  ): Promise<number> {
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
   * Revokes an MR by UMR (before its mkey returns to the MR cache). The UMR frees the mkey and
   * retires its key (mask FREE | KEY, a new tag from the context's rolling counter), so the
   * deregistered key no longer names the free mkey: a LOCAL_INV or access through it fails as
   * for any key that names nothing (semantics.md "any call on a destroyed object").
   */
  async revoke(key: number): Promise<void> {
    const qp = await this.umrQp();
    await this.exclusive(async () => {
      const wrId = ++this.seq;
      let newTag = this.ctx.nextTag();
      if (newTag === (key & 0xff)) newTag = this.ctx.nextTag(); // the counter wrapped onto the old tag
      qp.postBuilt(wrId, 'LOCAL_INV', (view, common) => buildLocalInvWqe(view, 0, { ...common, key, newTag }));
      await this.complete(wrId, 'dereg (mkey pool UMR)');
    });
  }

  /**
   * mlx5r_umr_revoke_mr (umr.c:422-441): frees the mkey and keeps its key (mkey_7_0 is the key's
   * own variant), so the MR cache stores and hands out the whole 32-bit key again.
   */
  async revokeKeepingKey(key: number): Promise<void> {
    const qp = await this.umrQp();
    await this.exclusive(async () => {
      const wrId = ++this.seq;
      // KEY in the mask with the key's own tag (mlx5 masks PD instead): the device tells a
      // deregistration from a LOCAL_INV this way, for the destroyInvalidates policy (src/rtl/umr/umr_ops.ts UNBIND)
      qp.postBuilt(wrId, 'LOCAL_INV', (view, common) => buildLocalInvWqe(view, 0, { ...common, key, newTag: key & 0xff }));
      await this.complete(wrId, 'dereg (MR cache revoke UMR)');
    });
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
