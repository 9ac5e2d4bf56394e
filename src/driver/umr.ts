/**
 * The driver's UMR QP (mlx5_ib's umr.c): the one send queue the driver posts its own memory
 * registration work requests on. The MR cache enables and revokes its mkeys through it, and the
 * ODP fault handler and MMU notifier write translation entries through it (mlx5r_umr_update_xlt).
 *
 * Many UMRs are in flight at once, as mlx5r_umr_post_send_wait keeps them (Linux 6.12
 * drivers/infiniband/hw/mlx5/umr.c:346-404): each caller takes a slot of a semaphore of
 * MAX_UMR_WR (the config field `umrMaxInFlight`, the UMR QP's send queue size: umr.c:168, :185),
 * posts its WQE and waits for its own completion, matched by wr id (mlx5: the WR's ib_cqe). The
 * chunks of one translation update go one after the other, each waited for (umr.c:850-857).
 * A UMR that fails takes the QP to ERR: its caller gets the error, the WQEs after it complete
 * WR_FLUSH_ERR and are posted again once the QP is back (umr.c:385-399 and mlx5r_umr_recover,
 * umr.c:270-330: mlx5 resets the same QP and brings it to RTS; here a new loopback pair takes its
 * place, which is the same to the device: a QP in RESET, then RTS).
 */
import type { Context } from './context.ts';
import type { Pd } from './pd.ts';
import type { Qp } from './qp.ts';
import type { Cq } from './cq.ts';
import type { WorkCompletion } from './types.ts';
import { VerbsError, removing } from './verbs_error.ts';
import { TagTable } from '../sim/tag_table.ts';
import { buildLocalInvWqe, buildRegMrWqe, buildXltUpdateWqe, ksmListBytes, mttListBytes, type MrAccess, type RegMrWqeParams } from './wqe_builder.ts';
import { MkeyMaskBit, makeKey } from '../rtl/formats/constants.ts';

/**
 * The most translation bytes one UMR writes: MLX5_MAX_UMR_CHUNK = (1 << (MLX5_MAX_UMR_SHIFT + 4))
 * - MLX5_UMR_FLEX_ALIGNMENT = 1 MiB - 64 B (drivers/infiniband/hw/mlx5/umr.c:487-488, umr.h:10
 * MLX5_MAX_UMR_SHIFT 16, include/linux/mlx5/device.h:296 MLX5_UMR_FLEX_ALIGNMENT 0x40): 131,064
 * MTT entries or 65,532 KLM/KSM entries, 65,532 octowords, within xlt_octowords' 16 bits.
 */
export const MAX_UMR_CHUNK = 2 ** 20 - 64;

/**
 * The lkey of the UMR PD's local DMA lkey the data segment of a translation list carries
 * (umr.c:585 `sg->lkey = dev->umrc.pd->local_dma_lkey`): the device's reserved lkey, which the
 * UMR engine takes as physical addressing (src/rtl/umr/umr_engine.ts).
 */
const UMR_LIST_LKEY = 0x100;

/** The access object of each IB access mask's low four bits (LOCAL_WRITE 1, REMOTE_WRITE 2, REMOTE_READ 4, REMOTE_ATOMIC 8), made once. */
const ACCESS_BITS: readonly MrAccess[] = Array.from({ length: 16 }, (_, access) =>
  Object.freeze({ localWrite: (access & 1) !== 0, remoteWrite: (access & 2) !== 0, remoteRead: (access & 4) !== 0, remoteAtomic: (access & 8) !== 0 }),
);
const NO_MTT: readonly number[] = [];

type Waiter = { resolve: (wc: WorkCompletion) => void; reject: (e: unknown) => void };

export class DriverUmr {
  private qp: Qp | null = null;
  private peer: Qp | null = null;
  private cq: Cq | null = null;
  private setup: Promise<void> | null = null;
  /** `setup` has settled with the QP up (postWait takes `qp` without awaiting it). */
  private qpReady = false;
  private seq = 0;
  /** Posted UMRs waiting for their completion, by wr id. */
  private readonly waiters = new TagTable<Waiter>();
  private polling = false;
  /** Free slots of the MAX_UMR_WR semaphore, and the callers waiting for one (FIFO: down()). */
  private free = -1;
  private readonly slotQ: (() => void)[] = [];
  /** The QP is being brought back after an error (MLX5_UMR_STATE_RECOVER): posts wait for it. */
  private recovering: Promise<void> | null = null;
  private drained: (() => void) | null = null;
  /** UMRs at most in flight, and the most seen (`inFlightPeak`, for tests and stats). */
  readonly maxInFlight: number;
  inFlightPeak = 0;
  /** Times the UMR QP was recovered after a failed UMR. */
  recoveries = 0;

  constructor(private readonly ctx: Context) {
    this.maxInFlight = ctx.hca.cfg.umrMaxInFlight;
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
   * A translation update as mlx5r_umr_update_xlt posts it: the list in a DMA-mapped buffer behind
   * the WQE's data segment, one UMR per chunk of at most MAX_UMR_CHUNK bytes, each at its own
   * offset (xlt_octowords is 16 bits), each waited for before the next (umr.c:838-857).
   */
  private async updateXlt(key: number, xltOffsetOcto: number, list: Uint8Array): Promise<void> {
    for (let done = 0; done < list.length; done += MAX_UMR_CHUNK) {
      const chunk = list.subarray(done, Math.min(list.length, done + MAX_UMR_CHUNK));
      const offset = xltOffsetOcto + done / 16;
      await this.postWait('ODP translation update (UMR)', (qp, wrId) => {
        const listAddr = qp.descriptorList(chunk);
        qp.postBuilt(wrId, 'REG_MR', (view, common) =>
          buildXltUpdateWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, fence: common.fence, key, xltOffsetOcto: offset, list: chunk, listAddr, listLkey: UMR_LIST_LKEY }),
        );
      });
    }
  }

  /**
   * mlx5r_umr_post_send_wait (umr.c:346-404): takes a slot, posts (`post` writes the WQE with the
   * wr id given), waits for that WQE's completion; a flushed one is posted again once the QP is
   * back, a failed one recovers the QP and throws.
   */
  private async postWait(what: string, post: (qp: Qp, wrId: number) => void): Promise<void> {
    // a free slot and the QP up (every UMR but the first few and those behind a recovery): no
    // hop through down() and umrQp(), nothing to wait for
    if (this.free > 0) this.free--;
    else await this.down();
    try {
      for (;;) {
        while (this.recovering !== null) await this.recovering;
        const qp = this.qpReady ? this.qp! : await this.umrQp();
        if (this.recovering !== null) continue;
        const wrId = ++this.seq;
        const wc = await new Promise<WorkCompletion>((resolve, reject) => {
          this.waiters.set(wrId, { resolve, reject });
          try {
            post(qp, wrId);
          } catch (e) {
            this.waiters.take(wrId);
            reject(e);
            return;
          }
          const n = this.waiters.size;
          if (n > this.inFlightPeak) this.inFlightPeak = n;
          this.poll();
        });
        if (wc.status === 'SUCCESS') return;
        if (wc.status === 'WR_FLUSH_ERR') continue; // behind a failed UMR: again, after the recovery
        this.recover();
        throw new VerbsError('EINVAL', `${what}: the UMR completed ${wc.status}`);
      }
    } finally {
      this.up();
    }
  }

  /** down(&umrc->sem): a slot of MAX_UMR_WR. */
  private down(): Promise<void> {
    if (this.free < 0) this.free = this.maxInFlight;
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => this.slotQ.push(resolve));
  }

  /** up(&umrc->sem): the slot goes to the longest waiter, or back. */
  private up(): void {
    const next = this.slotQ.shift();
    if (next !== undefined) next();
    else this.free++;
  }

  /**
   * The UMR CQ's handler (mlx5r_umr_done): each completion to the UMR that posted it. A
   * completion handler, not a process: it waits on the CQ (`Cq.waitOne`, a wait for one CQE
   * then a poll of what else is there) for as long as UMRs are in flight.
   */
  private poll(): void {
    if (this.polling) return;
    this.polling = true;
    this.cq!.waitOne(this.onCompletions);
  }

  private readonly onCompletions = (wcs: WorkCompletion[] | null, err: unknown): void => {
    try {
      if (wcs === null) throw err;
      for (const wc of wcs) this.deliver(wc);
      for (const wc of this.cq!.poll(this.maxInFlight)) this.deliver(wc);
    } catch (e) {
      // the device failed (the wait's error): every UMR waiting fails with it
      const ws = this.waiters.takeAll();
      for (const w of ws) w.reject(e);
    }
    if (this.waiters.size > 0) this.cq!.waitOne(this.onCompletions);
    else this.polling = false;
  };

  private deliver(wc: WorkCompletion): void {
    const id = Number(wc.wrId);
    const w = this.waiters.take(id);
    if (w === undefined) return; // a completion of the QP a recovery replaced
    w.resolve(wc);
    if (this.waiters.size === 0 && this.drained !== null) this.drained();
  }

  /**
   * mlx5r_umr_recover: no new post until every WQE posted before has completed (the failed one's
   * followers flush), then the QP back to RTS (here: a new pair in place of the one in ERR).
   */
  private recover(): void {
    if (this.recovering !== null) return;
    this.recoveries++;
    this.recovering = (async () => {
      if (this.waiters.size > 0) await new Promise<void>((resolve) => { this.drained = resolve; });
      this.drained = null;
      const old = [this.qp, this.peer];
      this.qpReady = false;
      this.setup = null;
      this.qp = null;
      this.peer = null;
      await this.umrQp(true);
      for (const q of old) if (q !== null) await q.destroy();
      this.recovering = null;
    })();
  }

  /** @internal The UMR QP's objects (not the application's: a context's removal leaves them). */
  owns(o: unknown): boolean {
    return o !== null && (o === this.qp || o === this.peer || o === this.cq || o === this.pdObj);
  }

  /**
   * @internal mlx5r_umr_resource_cleanup (umr.c:202-210): the UMR QP, then its CQ; then
   * mlx5r_umr_cleanup (umr.c:228-235): the PD. After the MR cache's cleanup, which needs the PD.
   */
  async destroyResources(): Promise<void> {
    await this.setup?.catch(() => undefined);
    await this.recovering?.catch(() => undefined);
    for (const o of [this.qp, this.peer, this.cq, this.pdObj]) if (o !== null) await removing(o.removeHw());
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

  /**
   * The driver's UMR QP (a loopback pair, made once; again by a recovery): a send queue of
   * MAX_UMR_WR WQEs and a CQ of 128 entries (mlx5r_umr_resource_init, umr.c:160-168), at least
   * the UMRs in flight.
   */
  private async umrQp(again = false): Promise<Qp> {
    if (!this.setup) {
      this.setup = (async () => {
        const pd = await this.pd();
        if (!again) {
          this.cq = await this.ctx.createCq(Math.max(128, this.maxInFlight));
          this.cq.kernel = true;
        }
        const cq = this.cq!;
        const a = await pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: this.maxInFlight, maxRecvWr: 1 }, true);
        const b = await pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 1, maxRecvWr: 1 });
        await a.connect(b);
        this.qp = a;
        this.peer = b;
        this.qpReady = true;
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
    logPageSize = 12,
  ): Promise<number> {
    return this.enableKey(makeKey(index, this.ctx.nextTag()), pd, access, start, length, mtt, logPageSize);
  }

  /**
   * As `enable`, keeping the mkey's whole key: mlx5's MR cache hands out stored keys and the
   * enabling UMR writes the key's own variant (mkey_7_0, umr.c:615).
   */
  async enableKey(
    key: number, pd: Pd, access: number, start: number, length: number, mtt: readonly number[],
    logPageSize = 12,
    /** ODP: the entries carry their own RD/WR bits (0: not present), always behind a data segment. */
    raw = false,
  ): Promise<number> {
    if (mtt.length * 8 <= MAX_UMR_CHUNK) {
      await this.postWait('regMr (mkey pool UMR)', (qp, wrId) => this.postEnable(qp, wrId, key, pd, access, start, length, mtt, logPageSize, undefined, raw));
      return key;
    }
    // (an ODP MR's list, `raw`, goes in the same chunks: every chunk is behind a data segment)
    // translations past one UMR: mlx5r_umr_update_mr_pas with MLX5_IB_UPD_XLT_ENABLE (umr.c:671-750)
    // posts one UMR per MLX5_MAX_UMR_CHUNK of entries (the buffer's size, umr.c:487-488; refilled
    // when full, :706-724), each waited for, each at its offset (umr.c:719-721); the chunks before
    // the last write translations into the still free mkey ("fail if not free", mask 0), the last
    // enables it (mlx5r_umr_final_update_xlt, umr.c:637-668, :747-750)
    const list = mttList(mtt);
    const lastAt = Math.floor((list.length - 1) / MAX_UMR_CHUNK) * MAX_UMR_CHUNK;
    for (let done = 0; done < lastAt; done += MAX_UMR_CHUNK) {
      const chunk = list.subarray(done, done + MAX_UMR_CHUNK);
      const offset = done / 16;
      await this.postWait('regMr (chunk of the enabling UMR)', (qp, wrId) => {
        const listAddr = qp.descriptorList(chunk);
        qp.postBuilt(wrId, 'REG_MR', (view, common) =>
          buildXltUpdateWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, fence: common.fence, key, xltOffsetOcto: offset, list: chunk, listAddr, listLkey: UMR_LIST_LKEY, enabling: true }),
        );
      });
    }
    const last = list.subarray(lastAt);
    await this.postWait('regMr (mkey pool UMR)', (qp, wrId) =>
      this.postEnable(qp, wrId, key, pd, access, start, length, mtt, logPageSize, { list: last, xltOffsetOcto: lastAt / 16 }),
    );
    return key;
  }

  private postEnable(
    qp: Qp, wrId: number, key: number, pd: Pd, access: number, start: number, length: number, mtt: readonly number[],
    logPageSize: number, chunk?: { list: Uint8Array; xltOffsetOcto: number },
    raw = false,
  ): void {
    const bytes = mtt.length * 8;
    let listAddr: number | undefined;
    if (chunk !== undefined) listAddr = qp.descriptorList(chunk.list);
    else if (bytes > 64 || raw) listAddr = qp.descriptorList(mttList(mtt));
    this.enableArgs.key = key;
    this.enableArgs.pdn = pd.pdn;
    this.enableArgs.access = access;
    this.enableArgs.start = start;
    this.enableArgs.length = length;
    this.enableArgs.mtt = mtt;
    this.enableArgs.logPageSize = logPageSize;
    this.enableArgs.listAddr = listAddr;
    this.enableArgs.chunk = chunk;
    qp.postBuilt(wrId, 'REG_MR', this.buildEnable);
  }

  /** What postEnable's WQE carries (set just before qp.postBuilt calls buildEnable, synchronously). */
  private readonly enableArgs: {
    key: number; pdn: number; access: number; start: number; length: number; mtt: readonly number[]; logPageSize: number;
    listAddr: number | undefined; chunk: { list: Uint8Array; xltOffsetOcto: number } | undefined;
  } = { key: 0, pdn: 0, access: 0, start: 0, length: 0, mtt: [], logPageSize: 12, listAddr: undefined, chunk: undefined };

  /** The enabling REG_MR's parameters: one object, and one page list, reused WQE after WQE (one WQE per registration). */
  private readonly enableParams: RegMrWqeParams & { translations: { mode: 'MTT'; pages: number[]; logPageSize: number } } = {
    wqeIndex: 0, qpn: 0, signaled: true, fence: 0, key: 0, access: ACCESS_BITS[0],
    iova: 0, length: 0, translations: { mode: 'MTT', pages: [], logPageSize: 12 },
    listAddr: undefined, listLkey: undefined, clearAtomic: true, chunk: undefined,
  };

  /** Writes the enabling REG_MR WQE of `enableArgs` (postBuilt's builder: made once, not a closure per MR). */
  private readonly buildEnable = (view: DataView, common: { wqeIndex: number; qpn: number; signaled: boolean; fence: number }): number => {
    const a = this.enableArgs;
    const p = this.enableParams;
    const mtt = a.mtt;
    const pages = p.translations.pages;
    pages.length = mtt.length;
    for (let i = 0; i < mtt.length; i++) pages[i] = mtt[i] - (mtt[i] % 4096);
    p.wqeIndex = common.wqeIndex;
    p.qpn = common.qpn;
    p.signaled = common.signaled;
    p.fence = common.fence;
    p.key = a.key;
    p.access = ACCESS_BITS[a.access & 15];
    p.iova = a.start;
    p.length = a.length;
    p.translations.logPageSize = a.logPageSize;
    p.listAddr = a.listAddr;
    p.listLkey = a.listAddr !== undefined ? UMR_LIST_LKEY : undefined;
    // a pooled mkey may come back from a user with atomic: always set (or clear) A
    p.clearAtomic = true;
    p.chunk = a.chunk !== undefined ? { xltOffsetOcto: a.chunk.xltOffsetOcto, listBytes: a.chunk.list.length } : undefined;
    const ds = buildRegMrWqe(view, 0, p);
    // as mlx5_ib, the WQE carries the access bits A/RW/RR/LW and nothing of IB_ACCESS_MW_BIND
    // (umr.c:443-459 mlx5r_umr_set_access_flags); a start of 0 is what makes it zero-based
    // the UMR also sets the PD (mask bit PD) and leaves remote invalidation off (a user MR)
    view.setUint8(24 + 7 - (MkeyMaskBit.PD >> 3), view.getUint8(24 + 7 - (MkeyMaskBit.PD >> 3)) | (1 << (MkeyMaskBit.PD & 7)));
    view.setUint32(64 + 12, a.pdn & 0xffffff);
    a.mtt = NO_MTT; // the caller's list is not kept
    a.chunk = undefined;
    if (pages.length > 512) pages.length = 0; // nor a long list's pages (only a one-UMR list's are reused)
    return ds;
  };

  /**
   * Revokes an MR by UMR (before its mkey returns to the MR cache). The UMR frees the mkey and
   * retires its key (mask FREE | KEY, a new tag from the context's rolling counter), so the
   * deregistered key no longer names the free mkey: a LOCAL_INV or access through it fails as
   * for any key that names nothing (semantics.md "any call on a destroyed object").
   */
  async revoke(key: number): Promise<void> {
    let newTag = this.ctx.nextTag();
    if (newTag === (key & 0xff)) newTag = this.ctx.nextTag(); // the counter wrapped onto the old tag
    await this.postWait('dereg (mkey pool UMR)', (qp, wrId) => qp.postBuilt(wrId, 'LOCAL_INV', (view, common) => buildLocalInvWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, fence: common.fence, key, newTag })));
  }

  /**
   * mlx5r_umr_revoke_mr (umr.c:422-441): frees the mkey and keeps its key (mkey_7_0 is the key's
   * own variant), so the MR cache stores and hands out the whole 32-bit key again.
   */
  async revokeKeepingKey(key: number): Promise<void> {
    // KEY in the mask with the key's own tag (mlx5 masks PD instead): the device tells a
    // deregistration from a LOCAL_INV this way, for the destroyInvalidates policy (src/rtl/umr/umr_ops.ts UNBIND)
    await this.postWait('dereg (MR cache revoke UMR)', (qp, wrId) => qp.postBuilt(wrId, 'LOCAL_INV', (view, common) => buildLocalInvWqe(view, 0, { wqeIndex: common.wqeIndex, qpn: common.qpn, signaled: common.signaled, fence: common.fence, key, newTag: key & 0xff })));
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
