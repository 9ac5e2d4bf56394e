/**
 * The driver's on-demand paging (mlx5_ib odp.c, spec/semantics.md "On-demand paging"):
 *
 * - The page-fault handler: a PAGE_FAULT EQE (from the EQ interrupt handler) is queued to the
 *   fault workers, as mlx5 queues it to its page-fault work queue (odp.c mlx5_ib_eq_pf_process,
 *   queue_work); at most `odpFaultWorkers` faults are handled at once (the queue's max_active,
 *   32), the rest wait in order. A worker finds the ranges the faulting work touches (subtype
 *   WQE: every data segment of the WQE at wqe_index, in full, read from the queue in host memory
 *   as mlx5_ib_mr_initiator_pfault_handler does; subtype RDMA: r_key, va, the whole rdma_op_len),
 *   skips the bytes the hardware already moved (`bytes_committed`), faults the pages into the
 *   process (one hmm_range_fault per range: a page the process unmapped fails the whole range,
 *   nothing of it mapped), writes their MTT entries by UMR (a translation update with an
 *   offset), then sends PAGE_FAULT_RESUME, with ERROR when a range failed. Pages already mapped
 *   are mapped again (ib_umem_odp_map_dma_and_lock), so any number of QPs may fault on one page.
 * - Read-ahead only where mlx5 does it: an RDMA fault whose op length the hardware reports as 0
 *   maps the packet, resumes, then maps up to MAX_PREFETCH_LEN more (odp.c:1465-1505).
 * - A key that names a memory window is resolved to the MR the window was bound over, as
 *   pagefault_single_data_segment walks a window's KLM (odp.c:1031-1084).
 * - Its cost in simulated time: `odpFaultFixedPs` per fault plus `odpFaultPerPagePs` per page
 *   after the first (spec/timing.md "ODP fault handling in software", fitted to ASPLOS'17).
 * - The MMU notifier (madviseDontNeed / munmap): the MTT entries of the range are zapped by UMR
 *   (not present), which also drops them from the caches (the ICM writer's coherence), and the
 *   process's pages are freed only after that. A fault racing an invalidation retries: the
 *   handler checks the MR's invalidation sequence before its UMR (mmu_interval_read_retry). An
 *   implicit MR's child left with no page mapped is freed (destroy_unused_implicit_child_mr).
 * - The counters count pages, as mlx5_update_odp_stats does: `pageFaults` the pages each fault
 *   mapped, `pagePrefetch` the pages a prefetch mapped, `pageInvalidations` the mapped pages a
 *   notifier zapped.
 */
import type { Context } from './context.ts';
import { Mr as MrClass, type Mr } from './mr.ts';
import type { Qp } from './qp.ts';
import type { Pd } from './pd.ts';
import { decodeEqePageFault, EQE_DATA_OFFSET, type Eqe } from '../rtl/formats/eqe.ts';
import { MkcAccessMode, NULL_MKEY, PageFaultFlag, PageFaultSubtype, WqeOpcode } from '../rtl/formats/constants.ts';
import type { OdpTransportCap } from '../rtl/firmware/hca_caps.ts';
import { dataSegLength } from '../rtl/formats/data_seg.ts';
import { parseWqe } from '../rtl/formats/wqe_parse.ts';
import { decodeCtrlSeg } from '../rtl/formats/ctrl_seg.ts';
import { IbAccess } from './types.ts';
import { CmdError } from '../rtl/firmware/cmd_types.ts';
import { MkeyPool } from './mkey_pool.ts';
import { VerbsError } from './verbs_error.ts';

const PAGE = 4096;
/**
 * C's SIZE_MAX for regMr(0, SIZE_MAX, ON_DEMAND | ...) (implicit ODP, ibv_reg_mr(pd, NULL,
 * SIZE_MAX, ...)): a stand-in, as JS numbers stop at 2^53 (API.md).
 */
export const SIZE_MAX = Number.MAX_SAFE_INTEGER;
/**
 * The read-ahead of an RDMA fault whose op length the hardware reports as 0 (odp.c:91
 * MAX_PREFETCH_LEN). It bounds only that read-ahead: every other fault maps its whole range.
 */
export const MAX_PREFETCH_LEN = 4 * 1024 * 1024;
/** MTT entry bits (spec/mlx5.md "Translation entries"). */
const EN_RD = 1;
const EN_WR = 2;

/** `rdma statistic mr` of an ODP MR (API.md mr.odpStats()). */
export interface OdpStats {
  /** Pages mapped by page faults (mlx5 `page_faults`). */
  pageFaults: number;
  /** Mapped pages zapped by the MMU notifier (mlx5 `page_invalidations`). */
  pageInvalidations: number;
  /** Pages mapped by adviseMr (mlx5 `page_prefetch`). */
  pagePrefetch: number;
}

/** The driver's state of an ODP MR: its MTT entries as written, and its statistics. */
export class OdpMr {
  /** MTT entries as last written (0: not present). */
  readonly mtt: number[];
  /** Bumped by every invalidation of a range of the MR (a fault compares it before its UMR). */
  invalSeq = 0;
  readonly stats: OdpStats;
  /**
   * The translation update in flight for this MR, or null: a fault that finds its pages already
   * written in `mtt` waits for it, as mlx5's second fault waits on umem_mutex for the first's UMR.
   */
  umrInFlight: Promise<void> | null = null;
  /** The implicit MR this MR is a child of, or null. */
  parent: ImplicitOdp | null = null;
  /** The MR cache bucket the child's mkey came from (0: CREATE_MKEY). */
  poolBucket = 0;
  /** Faults, prefetches and zaps using the MR now (mlx5's mmkey.usecount): dereg waits for 0. */
  users = 0;
  /** Deregistration began: no new user, and a user's mapping stops short of its UMR. */
  dying = false;
  private idle: (() => void) | null = null;

  /** A fault, prefetch or zap begins to use the MR (mlx5 find_odp_mkey's refcount_inc). */
  hold(): void {
    this.users++;
  }

  /** That use ended; the last one lets a waiting dereg go on (mlx5r_deref_odp_mkey). */
  release(): void {
    if (--this.users === 0 && this.idle !== null) {
      const go = this.idle;
      this.idle = null;
      go();
    }
  }

  private goneNow: (() => void) | null = null;
  /** Resolves once the MR's mkey is destroyed (the device can no longer reach its pages). */
  readonly gone: Promise<void> = new Promise((r) => {
    this.goneNow = r;
  });

  /** The mkey is destroyed. */
  markGone(): void {
    this.goneNow?.();
  }

  /** Resolves once nobody uses the MR (mlx5r_deref_wait_odp_mkey). */
  unused(): Promise<void> {
    if (this.users === 0) return Promise.resolve();
    return new Promise((r) => {
      this.idle = r;
    });
  }

  constructor(
    readonly mr: Mr,
    /** Host virtual address of the MR's first byte. */
    readonly hostAddr: number,
    pages: number,
    /** Statistics to count in (an implicit MR's children count in their parent's). */
    stats?: OdpStats,
  ) {
    this.mtt = new Array<number>(pages).fill(0);
    this.stats = stats ?? newStats();
  }

  /** True when some MTT entry is present (mlx5's umem_odp->npages != 0). */
  get anyMapped(): boolean {
    for (const e of this.mtt) if (e !== 0) return true;
    return false;
  }

  /** The MTT index of the page holding host address `va`. */
  pageIndex(va: number): number {
    return Math.floor(va / PAGE) - Math.floor(this.hostAddr / PAGE);
  }

  /** Host address of the MR's byte at `iova` (the MR's own address space). */
  hostOf(iova: number): number {
    return this.hostAddr + (iova - this.mr.iova);
  }

  /** ib_access_writable (include/rdma/ib_verbs.h:4374): MW_BIND counts, a window may grant write. */
  get writable(): boolean {
    return (this.mr.access & (IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC | IbAccess.MW_BIND)) !== 0;
  }
}

function newStats(): OdpStats {
  return { pageFaults: 0, pageInvalidations: 0, pagePrefetch: 0 };
}

/** Bytes an implicit ODP parent's KSM entry covers (log_page_size 30), and its entries. */
export const IMPLICIT_CHILD_BYTES = 2 ** 30;
/** The user address space (x86-64, 47 bits) in 1 GiB entries. */
export const IMPLICIT_ENTRIES = 2 ** 17;

/**
 * An implicit ODP MR (mlx5 odp.c): a KSM parent over the whole address space, every entry the
 * null mkey until a fault (or prefetch) in its 1 GiB creates the child, an MTT ODP mkey of 1 GiB
 * taken from the MR cache as implicit_get_child_mr does (mlx5_mr_cache_alloc; CREATE_MKEY when
 * the cache has no bucket for it), and writes the entry by UMR. A child whose last mapped page
 * is invalidated is freed and its entry written back to the null mkey.
 */
export class ImplicitOdp {
  /** Children by entry index (the address >> 30). */
  readonly children = new Map<number, OdpMr>();
  /** Children being made (two faults in one new GiB make it once). */
  readonly making = new Map<number, Promise<OdpMr>>();
  readonly stats: OdpStats = newStats();
  /** Deregistration began: no new child is made. */
  dying = false;
  /** Children being freed (left empty by an invalidation): dereg waits for them. */
  readonly freeing = new Set<Promise<void>>();

  constructor(readonly mr: Mr) {}
}

/** One range to map: host addresses within one ODP MR. */
interface FaultRange {
  odp: OdpMr;
  addr: number;
  length: number;
}

/** A range of a key's address space (an SGE, or an RDMA operation). */
interface KeyRange {
  key: number;
  addr: number;
  length: number;
}

/**
 * What a key resolves to: the ranges to map (held), or why not: ENOENT the key names no ODP MR
 * nor window (mlx5 treats such an SGE as mapped: "skipping non ODP MR"), EFAULT the range cannot
 * be mapped (outside the MR, a wrong key variant, an MR being deregistered).
 */
type Resolved = FaultRange[] | 'ENOENT' | 'EFAULT';

/** A memory window as its bind left it: the MR it covers and where (the window's KLM). */
interface WindowBinding {
  mr: Mr;
  /** The window's first byte in its own address space (0 when zero-based). */
  start: number;
  /** Its first byte in the MR's address space. */
  mrAddr: number;
  length: number;
}

type PageFault = ReturnType<typeof decodeEqePageFault>;

export class OdpHandler {
  /** ODP MRs by mkey index (implicit MRs' children included). */
  private readonly mrs = new Map<number, OdpMr>();
  /** Implicit ODP parents by mkey index. */
  private readonly implicits = new Map<number, ImplicitOdp>();
  /** Memory windows by mkey index, as their last BIND_MW posted them (mlx5 keeps windows in odp_mkeys). */
  private readonly windows = new Map<number, { rkey: number; bind: WindowBinding }>();
  /**
   * MRs being deregistered whose mkey still exists: an invalidation of their pages posts no UMR
   * (the mkey is about to go) but frees the frames only once the mkey is destroyed, as mlx5's
   * MMU notifier stays registered until after the mkey's cleanup (mr.c __mlx5_ib_dereg_mr:
   * mlx5r_handle_mkey_cleanup, then ib_umem_release).
   */
  private readonly dyingMrs = new Set<OdpMr>();
  /** Mappings redone because an invalidation of the MR came while they were in flight. */
  raceRetries = 0;
  /** Faults of QPs destroyed before their resume: dropped, as mlx5 drops them. */
  droppedFaults = 0;
  /** PAGE_FAULT_RESUMEs the firmware refused (the QP went meanwhile): logged by mlx5, no error. */
  failedResumes = 0;
  /** Translation updates (maps, zaps, KSM entries) that failed "fail if free": the mkey was freed meanwhile. */
  failedUpdates = 0;
  /** Faults being handled now (at most `odpFaultWorkers`), the most at once, and those waiting. */
  busyWorkers = 0;
  peakWorkers = 0;
  private readonly pending: PageFault[] = [];
  private pendingHead = 0;

  constructor(private readonly ctx: Context) {
    ctx.onPageFault = (e) => this.onEqe(e);
    ctx.hca.host.onUnmap((addr, length) => this.invalidate(addr, length));
  }

  register(odp: OdpMr): void {
    this.mrs.set(odp.mr.index, odp);
  }

  registerImplicit(imp: ImplicitOdp): void {
    this.implicits.set(imp.mr.index, imp);
  }

  /**
   * A BIND_MW was posted: the window `rkey` (its new key) covers [mrAddr, +length) of `mr`, its
   * own addresses starting at `start`. A fault through the window's key maps the MR's pages. The
   * driver keeps what it posted because this model's QUERY_MKEY returns no KLM; an access that
   * faults through the window passed the window's checks, so its bind succeeded.
   */
  windowBound(rkey: number, mr: Mr | null, start: number, mrAddr: number, length: number): void {
    if (mr === null) this.windows.delete(rkey >>> 8);
    else this.windows.set(rkey >>> 8, { rkey: rkey >>> 0, bind: { mr, start, mrAddr, length } });
  }

  /**
   * ODP MR registration (mlx5_ib_init_odp_mr: pagefault_real_mr with SNAPSHOT | ENABLE): maps
   * the pages the process already has resident, without faulting any, by one UMR. Not counted
   * (mlx5 counts only in the fault and prefetch paths).
   */
  async snapshot(odp: OdpMr): Promise<void> {
    const host = this.ctx.hca.host;
    const base = Math.floor(odp.hostAddr / PAGE) * PAGE;
    let any = false;
    for (let i = 0; i < odp.mtt.length && !any; i++) any = host.isResident(base + i * PAGE, 1);
    if (!any) return; // nothing resident: the UMR would write what CREATE_MKEY wrote
    odp.hold();
    try {
      await this.map({ odp, addr: odp.hostAddr, length: odp.mr.length }, 'no_fault');
    } finally {
      odp.release();
    }
  }

  /**
   * An ODP MR from the MR cache is enabled (mlx5_ib_init_odp_mr, odp.c:904-912:
   * pagefault_real_mr with SNAPSHOT | ENABLE over the whole MR): the pages the process already
   * has resident are mapped, none faulted, and one UMR writes every entry (the others not
   * present) and enables the mkey. Not counted (mlx5 counts only in the fault and prefetch
   * paths). An invalidation while the UMR is on its way (mlx5 serialises them on umem_mutex)
   * zapped entries of `odp.mtt` that the UMR may have written: they are written again.
   */
  async enable(odp: OdpMr, pd: Pd, access: number, start: number, length: number): Promise<void> {
    const host = this.ctx.hca.host;
    const base = Math.floor(odp.hostAddr / PAGE) * PAGE;
    const bits = EN_RD | (odp.writable ? EN_WR : 0);
    const mem = host.mem;
    for (let i = 0; i < odp.mtt.length; i++) {
      const va = base + i * PAGE;
      if (!host.isResident(va, 1)) continue;
      const e = host.dmaAddress(va) + bits;
      mem.pin(e - (e % PAGE)); // the device's until its zap drains, as a fault's mapping
      odp.mtt[i] = e;
    }
    const seq = odp.invalSeq;
    odp.hold();
    try {
      await this.ctx.umr.enableKey(odp.mr.deviceKey, pd, access, start, length, odp.mtt.slice(), 12, true);
      if (odp.invalSeq !== seq) {
        this.raceRetries++;
        await this.ctx.umr.updateTranslations(odp.mr.deviceKey, 0, padTo8(odp.mtt));
      }
    } finally {
      odp.release();
    }
  }

  /**
   * dereg: the MR (and an implicit MR's children, destroyed) are no longer the handler's. As
   * mlx5's __mlx5_ib_dereg_mr (mr.c: xa_erase from odp_mkeys, then mlx5r_deref_wait_odp_mkey):
   * no new fault or prefetch finds the MR, and the ones using it (a fault's or prefetch's
   * mapping, a zap) finish before the mkey is destroyed, so no UMR ever names a dead mkey. A
   * fault that finds the MR gone resumes as for any key that names no ODP MR; its access then
   * fails on the destroyed mkey. Returns their paging states: their mapped pages are released
   * (`unpinMapped`) once the DMA fence has drained.
   */
  async unregister(mr: Mr): Promise<OdpMr[]> {
    const out: OdpMr[] = [];
    const odp = this.mrs.get(mr.index);
    if (odp !== undefined && odp.mr === mr) {
      this.mrs.delete(mr.index);
      this.dyingMrs.add(odp);
      odp.dying = true;
      await odp.unused();
      out.push(odp);
    }
    const imp = this.implicits.get(mr.index);
    if (imp === undefined) return out;
    this.implicits.delete(mr.index);
    imp.dying = true;
    for (const m of imp.making.values()) await m.catch(() => undefined);
    for (const f of [...imp.freeing]) await f;
    for (const child of imp.children.values()) {
      this.mrs.delete(child.mr.index);
      this.dyingMrs.add(child);
      child.dying = true;
      await child.unused();
      child.mr.destroyed = true;
      out.push(child);
      await this.releaseChildMkey(child, 'dereg (implicit ODP child)');
    }
    imp.children.clear();
    return out;
  }

  /** A child's mkey goes back to the MR cache (revoked by UMR) or, made by CREATE_MKEY, is destroyed. */
  private async releaseChildMkey(child: OdpMr, what: string): Promise<void> {
    if (child.poolBucket > 0) await this.ctx.pool.revoke(child.mr.deviceKey, child.poolBucket);
    else await this.ctx.cmd(this.ctx.cmdq.exec({ op: 'DESTROY_MKEY', index: child.mr.index }), what);
    this.destroyed(child);
  }

  /** A deregistered ODP MR's mapped pages are no longer the device's (after the DMA fence drained). */
  unpinMapped(odp: OdpMr): void {
    const mem = this.ctx.hca.mem;
    for (let i = 0; i < odp.mtt.length; i++) {
      const e = odp.mtt[i];
      if (e !== 0) mem.unpin(e - (e % PAGE));
      odp.mtt[i] = 0;
    }
  }

  /** dereg destroyed the MR's mkey (DESTROY_MKEY or the pool's revoke): frames waiting on it go. */
  mkeyDestroyed(mr: Mr): void {
    for (const odp of this.dyingMrs) if (odp.mr === mr) this.destroyed(odp);
    this.windows.forEach((w, i) => {
      if (w.bind.mr === mr) this.windows.delete(i);
    });
  }

  private destroyed(odp: OdpMr): void {
    this.dyingMrs.delete(odp);
    odp.markGone();
  }

  /**
   * The ranges of [iova, iova + length) of `key`'s address space, as host addresses in ODP MRs
   * (pagefault_single_data_segment's walk): an ODP MR directly, an implicit MR through its
   * children (made on first need), a window through the MR it was bound over. Every range's MR
   * is held (`OdpMr.hold`): the caller releases them (`releaseAll`), and a dereg waits for that.
   */
  private async resolveKey(key: number, iova: number, length: number, depth = 0): Promise<Resolved> {
    const index = key >>> 8;
    const odp = this.mrs.get(index);
    if (odp !== undefined) {
      // find_odp_mkey: a key whose variant is not the MR's is EFAULT; pagefault_mr: a range not
      // inside the MR is EFAULT (odp.c:870-899)
      if (odp.mr.deviceKey !== key >>> 0 || odp.dying) return 'EFAULT';
      if (iova < odp.mr.iova || iova + length > odp.mr.iova + odp.mr.length) return 'EFAULT';
      odp.hold();
      return [{ odp, addr: odp.hostOf(iova), length }];
    }
    const imp = this.implicits.get(index);
    if (imp !== undefined) return imp.mr.deviceKey === key >>> 0 ? this.implicitRanges(imp, iova, length) : 'EFAULT';
    const w = this.windows.get(index);
    if (w !== undefined) {
      // a window's KLM names an MR: one more level (mlx5 bounds the depth by max_indirection)
      if (w.rkey !== key >>> 0 || depth > 0) return 'EFAULT';
      const off = iova - w.bind.start;
      if (off < 0 || off + length > w.bind.length) return 'EFAULT';
      return this.resolveKey(w.bind.mr.deviceKey, w.bind.mrAddr + off, length, depth + 1);
    }
    return 'ENOENT';
  }

  /** pagefault_implicit_mr: each GiB of the range through its child, made on first need. */
  private async implicitRanges(imp: ImplicitOdp, iova: number, length: number): Promise<Resolved> {
    if (iova + length > IMPLICIT_ENTRIES * IMPLICIT_CHILD_BYTES) return 'EFAULT';
    const out: FaultRange[] = [];
    for (let lo = iova; lo < iova + length; ) {
      const ci = Math.floor(lo / IMPLICIT_CHILD_BYTES);
      const hi = Math.min(iova + length, (ci + 1) * IMPLICIT_CHILD_BYTES);
      // a GiB with nothing of the process in it: hmm_range_fault would fail there, so no child
      // is made for it and the range fails
      if (imp.dying || !this.ctx.hca.host.overlapsAllocation(lo, hi - lo)) {
        releaseAll(out);
        return 'EFAULT';
      }
      let child: OdpMr;
      try {
        child = await this.childOf(imp, ci);
      } catch (e) {
        // the parent's KSM update failed "fail if free" (a consumer's LOCAL_INV freed it)
        if (!(e instanceof VerbsError)) throw e;
        this.failedUpdates++;
        releaseAll(out);
        return 'EFAULT';
      }
      if (imp.dying || child.dying) {
        releaseAll(out);
        return 'EFAULT';
      }
      child.hold();
      out.push({ odp: child, addr: lo, length: hi - lo });
      lo = hi;
    }
    return out;
  }

  /**
   * The child of entry `ci`, made on first need (implicit_get_child_mr): an mkey from the MR
   * cache (enabled by UMR) or, with no bucket for it, CREATE_MKEY; then the KSM entry by UMR.
   */
  private childOf(imp: ImplicitOdp, ci: number): Promise<OdpMr> {
    const have = imp.children.get(ci);
    if (have !== undefined) return Promise.resolve(have);
    let making = imp.making.get(ci);
    if (making === undefined) {
      making = (async () => {
        const ctx = this.ctx;
        const pd = imp.mr.pd;
        const base = ci * IMPLICIT_CHILD_BYTES;
        const entries = IMPLICIT_CHILD_BYTES / PAGE;
        const bucket = MkeyPool.bucketOf(entries);
        const pooled = bucket > 0 ? ctx.pool.take(bucket) : -1;
        let key: number;
        if (pooled >= 0) {
          // mlx5r_umr_update_xlt(ZAP | ENABLE) over every entry: all not present
          key = await ctx.umr.enable(pooled, pd, imp.mr.access, base, IMPLICIT_CHILD_BYTES, new Array<number>(entries).fill(0));
        } else {
          const r = await ctx.cmd(
            ctx.cmdq.exec({
              op: 'CREATE_MKEY', tag: ctx.nextTag(), free: false, accessMode: MkcAccessMode.MTT, access: imp.mr.access & 15, umrEn: true,
              remoteInval: false, pd: pd.pdn, start: base, length: IMPLICIT_CHILD_BYTES, logPageSize: 12, pgAccess: true,
              xltCapacity: entries,
            }),
            'implicit ODP child',
          );
          key = r.mkey;
        }
        const mr = new MrClass(pd, key, 'USER', { iova: base, length: IMPLICIT_CHILD_BYTES, access: imp.mr.access, maxNumSg: 0 });
        const child = new OdpMr(mr, base, entries, imp.stats);
        child.parent = imp;
        child.poolBucket = pooled >= 0 ? bucket : 0;
        this.mrs.set(mr.index, child);
        imp.children.set(ci, child);
        try {
          await this.writeKsm(imp, ci);
        } finally {
          imp.making.delete(ci);
        }
        return child;
      })();
      imp.making.set(ci, making);
    }
    return making;
  }

  /** Writes the parent's KSM entries around `ci` as its children are now, a 64-byte unit (4 entries) at a time. */
  private async writeKsm(imp: ImplicitOdp, ci: number): Promise<void> {
    const g = Math.floor(ci / 4) * 4;
    const entries: { key: number; va: number }[] = [];
    for (let i = g; i < g + 4; i++) {
      const c = imp.children.get(i);
      entries.push(c === undefined ? { key: NULL_MKEY, va: 0 } : { key: c.mr.deviceKey, va: i * IMPLICIT_CHILD_BYTES });
    }
    await this.ctx.umr.updateKsm(imp.mr.deviceKey, g, entries);
  }

  /**
   * An invalidation left `child` with no page mapped: it is freed (destroy_unused_implicit_child_mr
   * and free_implicit_child_mr_work, odp.c): out of the parent's children, then, once nobody uses
   * it, the parent's KSM entry is written as the children now are (the null mkey, or a newer
   * child), and its mkey goes back to the cache or is destroyed. An access there faults on the
   * parent again and makes a new child.
   */
  private freeEmptyChild(child: OdpMr): void {
    const imp = child.parent;
    if (imp === null || imp.dying || child.dying) return;
    const ci = Math.floor(child.mr.iova / IMPLICIT_CHILD_BYTES);
    if (imp.children.get(ci) !== child) return;
    imp.children.delete(ci);
    this.mrs.delete(child.mr.index);
    this.dyingMrs.add(child);
    child.dying = true;
    const done: Promise<void> = this.ctx.tb.spawn(async () => {
      await child.unused();
      try {
        await this.writeKsm(imp, ci);
      } catch (e) {
        // "fail if free": a consumer's LOCAL_INV freed the parent; mlx5 ignores this update's
        // result and frees the child all the same (Linux 6.12 odp.c:216-220)
        if (!(e instanceof VerbsError)) throw e;
        this.failedUpdates++;
      }
      child.mr.destroyed = true;
      await this.releaseChildMkey(child, 'implicit ODP child (freed empty)');
      // the KSM rewrite and the revoke (or DESTROY_MKEY) completed only once the DMA translated
      // through the child had landed (the UMR engine's and firmware's DMA fence): its pages may go
      this.unpinMapped(child);
      imp.freeing.delete(done);
    });
    imp.freeing.add(done);
  }

  private onEqe(e: Eqe): void {
    const full = new Uint8Array(64);
    full[3] = e.subType;
    full.set(e.data, EQE_DATA_OFFSET);
    this.pending.push(decodeEqePageFault(new DataView(full.buffer), 0));
    this.startWorkers();
  }

  /** Starts a worker for each queued fault while fewer than `odpFaultWorkers` run (the work queue's max_active). */
  private startWorkers(): void {
    while (this.busyWorkers < this.ctx.hca.cfg.odpFaultWorkers && this.pendingHead < this.pending.length) {
      const f = this.pending[this.pendingHead++];
      if (this.pendingHead === this.pending.length) {
        this.pending.length = 0;
        this.pendingHead = 0;
      }
      this.busyWorkers++;
      if (this.busyWorkers > this.peakWorkers) this.peakWorkers = this.busyWorkers;
      void this.ctx.tb.spawn(async () => {
        try {
          await this.handle(f);
        } finally {
          this.busyWorkers--;
          this.startWorkers();
        }
      });
    }
  }

  /** Faults waiting for a worker. */
  get queuedFaults(): number {
    return this.pending.length - this.pendingHead;
  }

  private async handle(f: PageFault): Promise<void> {
    // the QP the fault is of: gone already, the fault is dropped without a resume (odp.c
    // mlx5_ib_mr_wqe_pfault_handler: "wqe page fault for missing resource", no resume; the
    // device forgot the QP's fault at DESTROY_QP)
    const qp = this.ctx.qps.get(f.qpn);
    if (qp === undefined) {
      this.droppedFaults++;
      return;
    }
    const requestor = (f.flags & PageFaultFlag.REQUESTOR) !== 0;
    const rdma = f.subType === PageFaultSubtype.RDMA;
    let ranges: KeyRange[];
    let readAhead: KeyRange | null = null;
    if (rdma) {
      // mlx5_ib_mr_rdma_pfault_handler (odp.c:1440-1505): skip what was committed; an op length
      // of 0 (the hardware could not tell) maps the packet, then reads ahead after the resume
      const committed = f.bytesCommitted;
      const va = f.rdmaVa + committed;
      const len = f.rdmaOpLen - Math.min(committed, f.rdmaOpLen);
      if (len === 0) {
        ranges = [{ key: f.rKey, addr: va, length: Math.max(1, f.packetLength) }];
        const ahead = Math.min(MAX_PREFETCH_LEN, committed);
        if (ahead > 0) readAhead = { key: f.rKey, addr: va, length: ahead };
      } else ranges = [{ key: f.rKey, addr: va, length: len }];
    } else ranges = skipCommitted(this.wqeSegs(qp, f.wqeIndex, requestor), f.bytesCommitted);
    // the operation's RC ODP capability (mlx5 odp.c checks the transport caps per opcode)
    const cap = rdma ? ((f.flags & PageFaultFlag.WRITE) !== 0 ? 'WRITE' : 'READ') : requestor ? this.initiatorCap(qp, f.wqeIndex) : 'RECV';
    let ok = this.ctx.deviceAttr.odpCaps.rcOdpCaps.has(cap);
    if (ok) ok = await this.faultRanges(ranges, rdma);
    const flags = (f.flags & (PageFaultFlag.REQUESTOR | PageFaultFlag.WRITE | PageFaultFlag.RDMA)) | (ok ? 0 : PageFaultFlag.ERROR);
    // destroyed while the fault was handled (its number maybe another QP's by now): nothing
    // waits for the resume, and it must not resume another QP's fault
    if (this.ctx.qps.get(f.qpn) !== qp) this.droppedFaults++;
    else await this.resume(flags, f.qpn);
    if (ok && readAhead !== null) await this.faultRanges([readAhead], true);
  }

  /**
   * Maps each range in full, at a fault's software cost (pagefault_data_segments /
   * pagefault_single_data_segment): false when one cannot be mapped. A key that names no ODP MR
   * is skipped in a WQE (its SGE is not ODP) and fails an RDMA fault (odp.c:1476-1483).
   */
  private async faultRanges(ranges: readonly KeyRange[], rdma: boolean): Promise<boolean> {
    const cfg = this.ctx.hca.cfg;
    const held: FaultRange[] = [];
    try {
      for (const r of ranges) {
        const rs = await this.resolveKey(r.key, r.addr, r.length);
        if (rs === 'EFAULT' || (rs === 'ENOENT' && rdma)) return false;
        if (rs !== 'ENOENT') held.push(...rs);
      }
      let pages = 0;
      for (const r of held) pages += pagesOf(r);
      await this.ctx.tb.delay(cfg.odpFaultFixedPs + Math.max(0, pages - 1) * cfg.odpFaultPerPagePs);
      for (const r of held) {
        if ((await this.map(r)) < 0) return false;
        r.odp.stats.pageFaults += pagesOf(r); // mlx5_update_odp_stats(mr, faults, pages mapped)
      }
      return true;
    } finally {
      releaseAll(held);
    }
  }

  /** PAGE_FAULT_RESUME of the QP's fault (flags as the EQE's, + ERROR). */
  private async resume(flags: number, qpn: number): Promise<void> {
    try {
      await this.ctx.cmdq.exec({ op: 'PAGE_FAULT_RESUME', flagsQpn: ((flags << 24) | qpn) >>> 0 });
    } catch (e) {
      // a resume the firmware refuses (the QP went while the command was on its way) is only
      // logged by mlx5 (odp.c mlx5_ib_page_fault_resume: mlx5_ib_err, no error to anyone)
      if (!(e instanceof CmdError)) throw e;
      this.failedResumes++;
    }
  }

  /** The ODP capability a requester WQE needs: SEND for sends, WRITE, READ, ATOMIC by opcode. */
  private initiatorCap(qp: Qp, wqeIndex: number): OdpTransportCap {
    const head = this.ctx.hca.host.read(qp.sq.addr + (wqeIndex & (qp.sq.wqeCnt - 1)) * 64, 16);
    const op = decodeCtrlSeg(new DataView(head.buffer), 0).opcode;
    if (op === WqeOpcode.RDMA_WRITE || op === WqeOpcode.RDMA_WRITE_IMM) return 'WRITE';
    if (op === WqeOpcode.RDMA_READ) return 'READ';
    if (op === WqeOpcode.ATOMIC_CS || op === WqeOpcode.ATOMIC_FA) return 'ATOMIC';
    return 'SEND';
  }

  /**
   * Maps the range's pages (ib_umem_odp_map_dma_and_lock) and writes their MTT entries by UMR.
   * `fault` (and PREFETCH, PREFETCH_WRITE): one hmm_range_fault over the range brings every page
   * in (a page madvise dropped comes back zeroed); a page the process unmapped fails the whole
   * range and nothing of it is mapped. `no_fault` (PREFETCH_NO_FAULT, registration's snapshot):
   * only the pages present are mapped, the others left as they are. Pages already mapped are
   * mapped again (their access bits rewritten). Returns the range's pages, or -1 when it could
   * not be mapped (or the MR is being deregistered). Retries while an invalidation of the MR came
   * in between (mmu_interval_read_retry: never maps a page that was just dropped).
   */
  async map(r: FaultRange, mode: 'fault' | 'read' | 'write' | 'no_fault' = 'fault'): Promise<number> {
    const host = this.ctx.hca.host;
    const odp = r.odp;
    const first = odp.pageIndex(r.addr);
    const last = odp.pageIndex(r.addr + r.length - 1);
    const base = Math.floor(odp.hostAddr / PAGE) * PAGE;
    for (let attempt = 0; attempt < 16; attempt++) {
      const seq = odp.invalSeq;
      if (mode !== 'no_fault') {
        try {
          host.faultIn(base + first * PAGE, (last - first + 1) * PAGE);
        } catch {
          return -1; // hmm_range_fault: -EFAULT for the whole range
        }
      }
      const lo = Math.floor(first / 8) * 8;
      const hi = Math.min(Math.ceil((last + 1) / 8) * 8, Math.ceil(odp.mtt.length / 8) * 8);
      const entries: number[] = [];
      // a fault maps writable pages of a writable MR; PREFETCH maps them readable only (DOWNGRADE)
      const bits = EN_RD | (odp.writable && mode !== 'read' ? EN_WR : 0);
      let changed = 0;
      for (let i = lo; i < hi; i++) {
        const old = i < odp.mtt.length ? odp.mtt[i] : 0;
        const va = base + i * PAGE;
        const present = i >= first && i <= last && (mode !== 'no_fault' || host.isResident(va, 1));
        const e = present ? host.dmaAddress(va) + bits : old;
        if (e !== old) changed++;
        entries.push(e);
      }
      if (odp.invalSeq !== seq) {
        this.raceRetries++;
        continue; // dropped meanwhile: fault the pages in again
      }
      // the MR is being deregistered: nothing more is mapped (the fault fails, as on a gone MR)
      if (odp.dying || odp.mr.destroyed) return -1;
      // mapped already: the UMR would rewrite the same entries; if another mapping's UMR is still
      // on its way, the device sees them only once it lands
      if (changed === 0) {
        if (odp.umrInFlight !== null) await odp.umrInFlight;
        return last - first + 1;
      }
      // a page mapped for the device is the device's (the DMA checker's owner) until its zap drains
      const mem = host.mem;
      for (let i = first; i <= last; i++) {
        const e = entries[i - lo];
        const old = odp.mtt[i];
        const fNew = e === 0 ? 0 : e - (e % PAGE);
        const fOld = old === 0 ? 0 : old - (old % PAGE);
        if (fNew !== fOld) {
          if (fNew !== 0) mem.pin(fNew);
          if (fOld !== 0) mem.unpin(fOld);
        }
        odp.mtt[i] = e;
      }
      const umr = this.ctx.umr.updateTranslations(odp.mr.deviceKey, lo, entries);
      const mark = umr.catch(() => undefined);
      odp.umrInFlight = mark;
      try {
        await umr;
      } catch (e) {
        // "fail if free" (umr.c:594-597): the mkey was freed (a consumer's LOCAL_INV): the
        // update wrote nothing and the fault fails, as pagefault_real_mr's does (odp.c:712-718);
        // the pages stay mapped for the MR until its invalidation or dereg, as ib_umem_odp's
        if (!(e instanceof VerbsError)) throw e;
        this.failedUpdates++;
        return -1;
      } finally {
        if (odp.umrInFlight === mark) odp.umrInFlight = null;
      }
      if (odp.invalSeq === seq) return last - first + 1;
      this.raceRetries++;
      // an invalidation zapped (part of) the range while the UMR was in flight: its zap UMR
      // came after ours, so the pages it dropped are not present; map again
    }
    return -1;
  }

  /**
   * ibv_advise_mr (pd.adviseMr checked the keys: `prefetchable`): maps the ranges as a fault
   * would (mlx5_ib_prefetch_sg_list, pagefault_mr), with no EQE and no QP stalled, at the
   * software cost of a fault's handling. Returns 0, or EFAULT when a range could not be mapped
   * (outside its MR, or over pages the process unmapped): mlx5 reports that to a flushed call
   * and drops it for a queued one.
   */
  async prefetch(advice: 'PREFETCH' | 'PREFETCH_WRITE' | 'PREFETCH_NO_FAULT', list: readonly { lkey: number; addr: number; length: number }[]): Promise<0 | 'EFAULT'> {
    const cfg = this.ctx.hca.cfg;
    const mode = advice === 'PREFETCH' ? 'read' : advice === 'PREFETCH_WRITE' ? 'write' : 'no_fault';
    for (const e of list) {
      if (e.length === 0) continue;
      const rs = await this.resolveKey(e.lkey, e.addr, e.length);
      if (rs === 'ENOENT' || rs === 'EFAULT') return 'EFAULT';
      try {
        let pages = 0;
        for (const r of rs) pages += pagesOf(r);
        await this.ctx.tb.delay(cfg.odpFaultFixedPs + Math.max(0, pages - 1) * cfg.odpFaultPerPagePs);
        for (const r of rs) {
          if ((await this.map(r, mode)) < 0) return 'EFAULT';
          r.odp.stats.pagePrefetch += pagesOf(r); // mlx5_update_odp_stats(mr, prefetch, pages)
        }
      } finally {
        releaseAll(rs);
      }
    }
    return 0;
  }

  /**
   * get_prefetchable_mr (odp.c:1926-1963): the errno adviseMr reports for `lkey`, or null when
   * it may prefetch: ENOENT the key names no ODP mkey (or another variant of it), EINVAL it names
   * one that is not an MR (a window), EPERM the MR is another PD's, or PREFETCH_WRITE on an MR
   * that is not writable.
   */
  prefetchable(pd: object, lkey: number, write: boolean): { errno: 'ENOENT' | 'EINVAL' | 'EPERM'; why: string } | null {
    const index = lkey >>> 8;
    const odp = this.mrs.get(index) ?? this.implicits.get(index);
    if (odp === undefined || odp.mr.deviceKey !== lkey >>> 0) {
      const w = this.windows.get(index);
      if (w !== undefined && w.rkey === lkey >>> 0) return { errno: 'EINVAL', why: 'names a memory window, not an MR' };
      return { errno: 'ENOENT', why: 'names no ODP MR' };
    }
    if (odp.mr.pd !== pd) return { errno: 'EPERM', why: "names an ODP MR of another PD" };
    const writable = (odp.mr.access & (IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC | IbAccess.MW_BIND)) !== 0;
    if (write && !writable) return { errno: 'EPERM', why: 'PREFETCH_WRITE of an MR that is not writable' };
    return null;
  }

  /** The ODP MR (or implicit ODP MR) of `key` (its index, and the device's full key matching), or undefined. */
  mrOf(key: number): { mr: Mr } | undefined {
    const odp = this.mrs.get(key >>> 8) ?? this.implicits.get(key >>> 8);
    // the key the device holds (updateKey changes only the handle: mlx5 compares mmkey->key)
    return odp !== undefined && odp.mr.deviceKey === key >>> 0 ? odp : undefined;
  }

  /** The data segments of the WQE at `wqeIndex` of the QP (send queue, or receive queue without REQUESTOR). */
  private wqeSegs(qp: Qp, wqeIndex: number, requestor: boolean): KeyRange[] {
    const host = this.ctx.hca.host;
    const segs: KeyRange[] = [];
    if (requestor) {
      const at = qp.sq.addr + (wqeIndex & (qp.sq.wqeCnt - 1)) * 64;
      const head = host.read(at, 16);
      const ctrl = decodeCtrlSeg(new DataView(head.buffer), 0);
      // the WQE may wrap the ring: read it a WQEBB at a time
      const bbs = Math.ceil((ctrl.ds * 16) / 64);
      const bytes = new Uint8Array(bbs * 64);
      for (let b = 0; b < bbs; b++) host.readInto(qp.sq.addr + ((wqeIndex + b) & (qp.sq.wqeCnt - 1)) * 64, bytes, b * 64, 64);
      const w = parseWqe(new DataView(bytes.buffer), 0);
      if (w.kind === 'send' || w.kind === 'rdma' || w.kind === 'atomic') {
        for (const d of w.data) if (d.kind === 'ptr') segs.push({ key: d.seg.lkey, addr: d.seg.addr, length: dataSegLength(d.seg.byteCount) });
      }
    } else {
      for (const s of qp.recvSges(wqeIndex)) segs.push({ key: s.lkey, addr: s.addr, length: s.length });
    }
    return segs.filter((sg) => sg.length > 0);
  }

  /**
   * The MMU notifier: the process dropped [addr, addr + length). Every ODP MR page in it is
   * zapped (MTT entry not present) by UMR, which drops it from the caches too; the mapped pages
   * zapped count in pageInvalidations (mlx5_ib_invalidate_range).
   */
  private invalidate(addr: number, length: number): Promise<void> | undefined {
    const zaps: Promise<void>[] = [];
    for (const odp of this.dyingMrs) {
      // being deregistered: no UMR to its mkey; the frames wait until the mkey is gone
      if (Math.min(addr + length, odp.hostAddr + odp.mr.length) <= Math.max(addr, odp.hostAddr)) continue;
      odp.invalSeq++;
      zaps.push(odp.gone);
    }
    for (const odp of this.mrs.values()) {
      const lo = Math.max(addr, odp.hostAddr);
      const hi = Math.min(addr + length, odp.hostAddr + odp.mr.length);
      if (hi <= lo) continue;
      odp.invalSeq++;
      const first = odp.pageIndex(lo);
      const last = odp.pageIndex(hi - 1);
      const unpin: number[] = [];
      for (let i = first; i <= last; i++) {
        const e = odp.mtt[i];
        if (e !== 0) unpin.push(e - (e % PAGE));
        odp.mtt[i] = 0;
      }
      if (unpin.length === 0) continue; // nothing mapped: no UMR, nothing counted (npages 0)
      odp.stats.pageInvalidations += unpin.length;
      const blo = Math.floor(first / 8) * 8;
      const bhi = Math.min(Math.ceil((last + 1) / 8) * 8, Math.ceil(odp.mtt.length / 8) * 8);
      const entries: number[] = [];
      for (let i = blo; i < bhi; i++) entries.push(i < odp.mtt.length ? odp.mtt[i] : 0);
      odp.hold(); // a deregistration waits for the zap (mlx5: the notifier's invalidation ends first)
      zaps.push(
        this.ctx.tb.spawn(async () => {
          try {
            // the zap UMR is a DMA fence: it completes once what was translated through the old
            // entries (a READ response on its way) has landed (src/rtl/umr/umr_engine.ts), so
            // the pages go back to the process or are freed only then
            try {
              await this.ctx.umr.updateTranslations(odp.mr.deviceKey, blo, entries);
            } catch (e) {
              // "fail if free": a consumer's LOCAL_INV freed the mkey (its completion came once
              // the DMA through it was over, and so does this failure: umr_engine.ts); mlx5
              // ignores the zap's result and unmaps the pages all the same (odp.c:327-340)
              if (!(e instanceof VerbsError)) throw e;
              this.failedUpdates++;
            }
            for (const f of unpin) this.ctx.hca.mem.unpin(f);
          } finally {
            odp.release();
          }
          // an implicit MR's child left with nothing mapped is freed (odp.c mlx5_ib_invalidate_range)
          if (odp.parent !== null && !odp.anyMapped) this.freeEmptyChild(odp);
        }),
      );
    }
    // the process's frames are freed once the device can no longer reach them
    return zaps.length === 0 ? undefined : Promise.all(zaps).then(() => undefined);
  }
}

/** The entries padded with not-present ones to whole 64-byte units (8 MTT entries). */
function padTo8(mtt: readonly number[]): number[] {
  const out = mtt.slice();
  while (out.length % 8 !== 0) out.push(0);
  return out;
}

/** Pages of a range. */
function pagesOf(r: FaultRange): number {
  return Math.floor((r.addr + r.length - 1) / PAGE) - Math.floor(r.addr / PAGE) + 1;
}

/**
 * A WQE's data segments less the bytes the hardware already moved (pagefault_data_segments,
 * odp.c:1139-1204): segments wholly committed are skipped, the one the fault is in starts where
 * it stopped.
 */
export function skipCommitted(segs: readonly KeyRange[], committed: number): KeyRange[] {
  const out: KeyRange[] = [];
  let left = committed;
  for (const s of segs) {
    if (s.length <= left) {
      left -= s.length;
      continue;
    }
    out.push({ key: s.key, addr: s.addr + left, length: s.length - left });
    left = 0;
  }
  return out;
}

/** Releases the MRs `resolveKey` held for these ranges. */
function releaseAll(ranges: readonly FaultRange[] | null): void {
  for (const r of ranges ?? []) r.odp.release();
}
