/**
 * The driver's on-demand paging (mlx5_ib odp.c, spec/semantics.md "On-demand paging"):
 *
 * - The page-fault handler: a PAGE_FAULT EQE (from the EQ interrupt handler) starts a process,
 *   as mlx5's page-fault workqueue. It finds the ranges the faulting work touches (subtype WQE:
 *   the data segments of the WQE at wqe_index, read from the queue in host memory, as
 *   mlx5_ib_mr_initiator_pfault_handler does; subtype RDMA: r_key, va, op length), faults the
 *   pages into the process (host_space faultIn), writes their MTT entries by UMR (a translation
 *   update with an offset), then sends PAGE_FAULT_RESUME. A range the process has not mapped
 *   resumes with ERROR.
 * - How much is mapped: the whole range the faulting work touches in each ODP MR, at most
 *   4 MiB from its start (MAX_FAULT_BYTES; mlx5 bounds a fault's prefetch the same way), so one
 *   fault maps a 4 MB message (spec/timing.md: ~350 us, not 1024 faults).
 * - Its cost in simulated time: `odpFaultFixedPs` per fault plus `odpFaultPerPagePs` per page
 *   after the first (spec/timing.md "ODP fault handling in software", fitted to ASPLOS'17).
 * - The MMU notifier (madviseDontNeed / munmap): the MTT entries of the range are zapped by UMR
 *   (not present), which also drops them from the caches (the ICM writer's coherence), and the
 *   process's pages are freed only after that. A fault racing an invalidation retries: the
 *   handler checks the MR's invalidation sequence before its UMR (mmu_interval_read_retry).
 */
import type { Context } from './context.ts';
import { Mr as MrClass, type Mr } from './mr.ts';
import type { Qp } from './qp.ts';
import { decodeEqePageFault, EQE_DATA_OFFSET, type Eqe } from '../rtl/formats/eqe.ts';
import { MkcAccessMode, NULL_MKEY, PageFaultFlag, PageFaultSubtype, WqeOpcode } from '../rtl/formats/constants.ts';
import type { OdpTransportCap } from '../rtl/firmware/hca_caps.ts';
import { dataSegLength } from '../rtl/formats/data_seg.ts';
import { parseWqe } from '../rtl/formats/wqe_parse.ts';
import { decodeCtrlSeg } from '../rtl/formats/ctrl_seg.ts';
import { IbAccess } from './types.ts';
import { CmdError } from '../rtl/firmware/cmd_types.ts';

const PAGE = 4096;
/**
 * C's SIZE_MAX for regMr(0, SIZE_MAX, ON_DEMAND | ...) (implicit ODP, ibv_reg_mr(pd, NULL,
 * SIZE_MAX, ...)): a stand-in, as JS numbers stop at 2^53 (API.md).
 */
export const SIZE_MAX = Number.MAX_SAFE_INTEGER;
/** The most one fault maps from the start of a range. */
export const MAX_FAULT_BYTES = 4 * 1024 * 1024;
/** MTT entry bits (spec/mlx5.md "Translation entries"). */
const EN_RD = 1;
const EN_WR = 2;

/** `rdma statistic mr` of an ODP MR (API.md mr.odpStats()). */
export interface OdpStats {
  pageFaults: number;
  pageFaultsHandled: number;
  pageInvalidations: number;
  pageInvalidationsHandled: number;
  pagePrefetch: number;
}

/** The driver's state of an ODP MR: its MTT entries as written, and its statistics. */
export class OdpMr {
  /** MTT entries as last written (0: not present). */
  readonly mtt: number[];
  /** Bumped by every invalidation of a range of the MR (a fault compares it before its UMR). */
  invalSeq = 0;
  readonly stats: OdpStats;
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

  /** The MTT index of the page holding host address `va`. */
  pageIndex(va: number): number {
    return Math.floor(va / PAGE) - Math.floor(this.hostAddr / PAGE);
  }

  /** Host address of the MR's byte at `iova` (the MR's own address space). */
  hostOf(iova: number): number {
    return this.hostAddr + (iova - this.mr.iova);
  }

  get writable(): boolean {
    return (this.mr.access & (IbAccess.LOCAL_WRITE | IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC)) !== 0;
  }
}

function newStats(): OdpStats {
  return { pageFaults: 0, pageFaultsHandled: 0, pageInvalidations: 0, pageInvalidationsHandled: 0, pagePrefetch: 0 };
}

/** Bytes an implicit ODP parent's KSM entry covers (log_page_size 30), and its entries. */
export const IMPLICIT_CHILD_BYTES = 2 ** 30;
/** The user address space (x86-64, 47 bits) in 1 GiB entries. */
export const IMPLICIT_ENTRIES = 2 ** 17;

/**
 * An implicit ODP MR (mlx5 odp.c): a KSM parent over the whole address space, every entry the
 * null mkey until a fault (or prefetch) in its 1 GiB creates the child, an MTT ODP mkey of 1 GiB
 * (CREATE_MKEY here; mlx5 takes it from its MR cache), and writes the entry by UMR.
 */
export class ImplicitOdp {
  /** Children by entry index (the address >> 30). */
  readonly children = new Map<number, OdpMr>();
  /** Children being made (two faults in one new GiB make it once). */
  readonly making = new Map<number, Promise<OdpMr>>();
  readonly stats: OdpStats = newStats();
  /** Deregistration began: no new child is made. */
  dying = false;

  constructor(readonly mr: Mr) {}
}

/** One range to map: host addresses within one ODP MR. */
interface FaultRange {
  odp: OdpMr;
  addr: number;
  length: number;
}

export class OdpHandler {
  /** ODP MRs by mkey index (implicit MRs' children included). */
  private readonly mrs = new Map<number, OdpMr>();
  /** Implicit ODP parents by mkey index. */
  private readonly implicits = new Map<number, ImplicitOdp>();
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
    for (const child of imp.children.values()) {
      this.mrs.delete(child.mr.index);
      this.dyingMrs.add(child);
      child.dying = true;
      await child.unused();
      child.mr.destroyed = true;
      out.push(child);
      await this.ctx.cmd(this.ctx.cmdq.exec({ op: 'DESTROY_MKEY', index: child.mr.index }), 'dereg (implicit ODP child)');
      this.destroyed(child);
    }
    return out;
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
  }

  private destroyed(odp: OdpMr): void {
    this.dyingMrs.delete(odp);
    odp.markGone();
  }

  /**
   * The ranges of [iova, iova + length) of the ODP MR `key` names (its device key), as host
   * addresses in ODP MRs, at most `cap` bytes; an implicit MR's missing children are made. Null
   * when the key names no ODP MR. Every range's MR is held (`OdpMr.hold`): the caller releases
   * them (`releaseAll`) when done, and a deregistration waits for that.
   */
  private async rangesOf(key: number, iova: number, length: number, cap: number): Promise<FaultRange[] | null> {
    const odp = this.mrs.get(key >>> 8);
    if (odp !== undefined) {
      const r = this.clip(odp, iova, length, cap);
      if (r !== null) odp.hold();
      return r === null ? [] : [r];
    }
    const imp = this.implicits.get(key >>> 8);
    if (imp === undefined) return null;
    const out: FaultRange[] = [];
    const end = iova + Math.min(length, cap);
    for (let lo = iova; lo < end; ) {
      const ci = Math.floor(lo / IMPLICIT_CHILD_BYTES);
      if (ci >= IMPLICIT_ENTRIES) break;
      const hi = Math.min(end, (ci + 1) * IMPLICIT_CHILD_BYTES);
      // a GiB with nothing of the process in it gets no child: its access cannot be mapped (a
      // fault there resumes with ERROR; a prefetch over it maps nothing)
      if (this.ctx.hca.host.overlapsAllocation(lo, hi - lo)) {
        if (imp.dying) break; // being deregistered: no new child
        const child = await this.childOf(imp, ci);
        if (imp.dying || child.dying) break;
        child.hold();
        out.push({ odp: child, addr: lo, length: hi - lo });
      } else if (cap !== Infinity) return out.length === 0 ? [] : out;
      lo = hi;
    }
    return out;
  }

  /** The child of entry `ci`, made (CREATE_MKEY, then the KSM entry by UMR) on first need. */
  private childOf(imp: ImplicitOdp, ci: number): Promise<OdpMr> {
    const have = imp.children.get(ci);
    if (have !== undefined) return Promise.resolve(have);
    let making = imp.making.get(ci);
    if (making === undefined) {
      making = (async () => {
        const ctx = this.ctx;
        const pd = imp.mr.pd;
        const base = ci * IMPLICIT_CHILD_BYTES;
        const r = await ctx.cmd(
          ctx.cmdq.exec({
            op: 'CREATE_MKEY', tag: ctx.nextTag(), free: false, accessMode: MkcAccessMode.MTT, access: imp.mr.access & 15, umrEn: true,
            remoteInval: false, pd: pd.pdn, start: base, length: IMPLICIT_CHILD_BYTES, logPageSize: 12, pgAccess: true,
            xltCapacity: IMPLICIT_CHILD_BYTES / PAGE,
          }),
          'implicit ODP child',
        );
        const mr = new MrClass(pd, r.mkey, 'USER', { iova: base, length: IMPLICIT_CHILD_BYTES, access: imp.mr.access, maxNumSg: 0 });
        const child = new OdpMr(mr, base, IMPLICIT_CHILD_BYTES / PAGE, imp.stats);
        this.mrs.set(mr.index, child);
        imp.children.set(ci, child);
        // the parent's KSM entries, a 64-byte unit (4 entries) at a time
        const g = Math.floor(ci / 4) * 4;
        const entries: { key: number; va: number }[] = [];
        for (let i = g; i < g + 4; i++) {
          const c = imp.children.get(i);
          entries.push(c === undefined ? { key: NULL_MKEY, va: 0 } : { key: c.mr.deviceKey, va: i * IMPLICIT_CHILD_BYTES });
        }
        await ctx.umr.updateKsm(imp.mr.deviceKey, g, entries);
        imp.making.delete(ci);
        return child;
      })();
      imp.making.set(ci, making);
    }
    return making;
  }

  private onEqe(e: Eqe): void {
    const full = new Uint8Array(64);
    full[3] = e.subType;
    full.set(e.data, EQE_DATA_OFFSET);
    const f = decodeEqePageFault(new DataView(full.buffer), 0);
    void this.ctx.tb.spawn(() => this.handle(f));
  }

  private async handle(f: ReturnType<typeof decodeEqePageFault>): Promise<void> {
    // the QP the fault is of: gone already, the fault is dropped without a resume (odp.c
    // mlx5_ib_mr_wqe_pfault_handler: "wqe page fault for missing resource", no resume; the
    // device forgot the QP's fault at DESTROY_QP)
    const qp = this.ctx.qps.get(f.qpn);
    if (qp === undefined) {
      this.droppedFaults++;
      return;
    }
    const requestor = (f.flags & PageFaultFlag.REQUESTOR) !== 0;
    const segs = f.subType === PageFaultSubtype.RDMA ? [{ lkey: f.rKey, addr: f.rdmaVa, length: Math.max(1, f.rdmaOpLen) }] : this.wqeSegs(f.qpn, f.wqeIndex, requestor);
    const held: FaultRange[] = [];
    let handled = segs !== null;
    try {
      for (const sg of segs ?? []) {
        const rs = await this.rangesOf(sg.lkey, sg.addr, sg.length, MAX_FAULT_BYTES);
        // an RDMA access's key that names no ODP MR (a window over one): not handled
        if (rs === null && f.subType === PageFaultSubtype.RDMA) handled = false;
        held.push(...(rs ?? []));
      }
      await this.resolve(f, qp, handled ? held : null, requestor);
    } finally {
      releaseAll(held);
    }
  }

  /** Maps what the fault needs of its ranges (held) and resumes the QP (unless it went). */
  private async resolve(f: ReturnType<typeof decodeEqePageFault>, qp: Qp, ranges: FaultRange[] | null, requestor: boolean): Promise<void> {
    const cfg = this.ctx.hca.cfg;
    const statsOf = new Set((ranges ?? []).map((r) => r.odp.stats));
    for (const st of statsOf) st.pageFaults++;
    // the operation's RC ODP capability (mlx5 odp.c checks the transport caps per opcode)
    const cap = f.subType === PageFaultSubtype.RDMA ? ((f.flags & PageFaultFlag.WRITE) !== 0 ? 'WRITE' : 'READ') : requestor ? this.initiatorCap(f.qpn, f.wqeIndex) : 'RECV';
    let ok = ranges !== null && ranges.length > 0 && cap !== null && this.ctx.deviceAttr.odpCaps.rcOdpCaps.has(cap);
    if (ok) {
      let pages = 0;
      for (const r of ranges!) pages += this.pagesOf(r);
      await this.ctx.tb.delay(cfg.odpFaultFixedPs + Math.max(0, pages - 1) * cfg.odpFaultPerPagePs);
      // resumed with ERROR only when nothing new could be mapped: the access that faulted needs
      // a page the process does not have (a second fault of the same access ends here)
      let changed = 0;
      for (const r of ranges!) changed += await this.map(r);
      ok = changed > 0;
    }
    const flags = (f.flags & (PageFaultFlag.REQUESTOR | PageFaultFlag.WRITE | PageFaultFlag.RDMA)) | (ok ? 0 : PageFaultFlag.ERROR);
    // destroyed while the fault was handled (its number maybe another QP's by now): nothing
    // waits for the resume, and it must not resume another QP's fault
    if (this.ctx.qps.get(f.qpn) !== qp) this.droppedFaults++;
    else await this.resume(flags, f.qpn);
    for (const st of statsOf) st.pageFaultsHandled++;
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
  private initiatorCap(qpn: number, wqeIndex: number): OdpTransportCap | null {
    const qp = this.ctx.qps.get(qpn);
    if (qp === undefined) return null;
    const head = this.ctx.hca.host.read(qp.sq.addr + (wqeIndex & (qp.sq.wqeCnt - 1)) * 64, 16);
    const op = decodeCtrlSeg(new DataView(head.buffer), 0).opcode;
    if (op === WqeOpcode.RDMA_WRITE || op === WqeOpcode.RDMA_WRITE_IMM) return 'WRITE';
    if (op === WqeOpcode.RDMA_READ) return 'READ';
    if (op === WqeOpcode.ATOMIC_CS || op === WqeOpcode.ATOMIC_FA) return 'ATOMIC';
    return 'SEND';
  }

  /** Pages of a range (clipped to MAX_FAULT_BYTES). */
  private pagesOf(r: FaultRange): number {
    return Math.floor((r.addr + r.length - 1) / PAGE) - Math.floor(r.addr / PAGE) + 1;
  }

  /**
   * Faults the range's pages into the process and writes their MTT entries by UMR; false when
   * the process has not mapped some page (munmap, or never allocated). Retries while an
   * invalidation of the MR happened in between (never maps a page that was just dropped).
   */
  /**
   * Maps what it can of the range: each page the process has (faulting it in: a page madvise
   * dropped comes back zeroed; PREFETCH_NO_FAULT only those present), writing their MTT entries
   * by UMR. A page the process unmapped stays not present: an access that needs it faults again
   * and then fails, but the rest of the range works, as with a pinned MR. Returns the MTT entries
   * it changed (0: nothing new to map). Retries while an invalidation of the MR came in between
   * (never maps a page that was just dropped).
   */
  async map(r: FaultRange, mode: 'fault' | 'read' | 'write' | 'no_fault' = 'fault'): Promise<number> {
    const host = this.ctx.hca.host;
    const odp = r.odp;
    let total = 0; // entries this call changed, over its attempts
    for (let attempt = 0; attempt < 16; attempt++) {
      const seq = odp.invalSeq;
      const first = odp.pageIndex(r.addr);
      const last = odp.pageIndex(r.addr + r.length - 1);
      const base = Math.floor(odp.hostAddr / PAGE) * PAGE;
      const lo = Math.floor(first / 8) * 8;
      const hi = Math.min(Math.ceil((last + 1) / 8) * 8, Math.ceil(odp.mtt.length / 8) * 8);
      const entries: number[] = [];
      // a fault maps writable pages of a writable MR; PREFETCH maps them readable only
      const bits = EN_RD | (odp.writable && mode !== 'read' ? EN_WR : 0);
      let changed = 0;
      for (let i = lo; i < hi; i++) {
        const old = i < odp.mtt.length ? odp.mtt[i] : 0;
        const va = base + i * PAGE;
        let present = false;
        if (i >= first && i <= last) {
          if (mode === 'no_fault') present = host.isMapped(va, 1);
          else {
            try {
              host.faultIn(va, 1);
              present = true;
            } catch {
              present = false; // not in the process (munmap): stays not present
            }
          }
        }
        const e = present ? host.dmaAddress(va) + bits : old;
        if (e !== old) changed++;
        entries.push(e);
      }
      if (odp.invalSeq !== seq) {
        this.raceRetries++;
        continue; // dropped meanwhile: fault the pages in again
      }
      // the MR is being deregistered: nothing more is mapped (the fault fails, as on a gone MR)
      if (changed === 0 || odp.dying || odp.mr.destroyed) return total;
      total += changed;
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
      await this.ctx.umr.updateTranslations(odp.mr.deviceKey, lo, entries);
      if (odp.invalSeq === seq) return total;
      this.raceRetries++;
      // an invalidation zapped (part of) the range while the UMR was in flight: its zap UMR
      // came after ours, so the pages it dropped are not present; map again
    }
    return total;
  }

  /**
   * ibv_advise_mr (pd.adviseMr checked the arguments): maps the ranges exactly as a fault would,
   * with no EQE and no QP stalled, at the software cost of a fault's handling. Resolves once
   * they are mapped (pages the process lacks stay not present).
   */
  async prefetch(advice: 'PREFETCH' | 'PREFETCH_WRITE' | 'PREFETCH_NO_FAULT', list: readonly { lkey: number; addr: number; length: number }[]): Promise<void> {
    const ranges: FaultRange[] = [];
    try {
      for (const e of list) ranges.push(...((await this.rangesOf(e.lkey, e.addr, e.length, Infinity)) ?? []));
      await this.prefetchRanges(advice, ranges);
    } finally {
      releaseAll(ranges);
    }
  }

  /** Maps a prefetch's ranges (held), at a fault's software cost. */
  private async prefetchRanges(advice: 'PREFETCH' | 'PREFETCH_WRITE' | 'PREFETCH_NO_FAULT', ranges: readonly FaultRange[]): Promise<void> {
    const cfg = this.ctx.hca.cfg;
    let pages = 0;
    for (const r of ranges) pages += this.pagesOf(r);
    await this.ctx.tb.delay(cfg.odpFaultFixedPs + Math.max(0, pages - 1) * cfg.odpFaultPerPagePs);
    const mode = advice === 'PREFETCH' ? 'read' : advice === 'PREFETCH_WRITE' ? 'write' : 'no_fault';
    const host = this.ctx.hca.host;
    for (const r of ranges) {
      // PREFETCH_NO_FAULT maps (and counts) only the pages the process has present
      let pages = this.pagesOf(r);
      if (mode === 'no_fault') {
        pages = 0;
        for (let va = Math.floor(r.addr / PAGE) * PAGE; va < r.addr + r.length; va += PAGE) if (host.isMapped(va, 1)) pages++;
      }
      await this.map(r, mode); // pages the process lacks stay not present, as a fault leaves them
      r.odp.stats.pagePrefetch += pages;
    }
  }

  /** The ODP MR (or implicit ODP MR) of `key` (its index, and the device's full key matching), or undefined. */
  mrOf(key: number): { mr: Mr } | undefined {
    const odp = this.mrs.get(key >>> 8) ?? this.implicits.get(key >>> 8);
    // the key the device holds (updateKey changes only the handle: mlx5 compares mmkey->key)
    return odp !== undefined && odp.mr.deviceKey === key >>> 0 ? odp : undefined;
  }

  /** The data segments of the WQE at `wqeIndex` of QP `qpn` (send queue, or receive queue without REQUESTOR). */
  private wqeSegs(qpn: number, wqeIndex: number, requestor: boolean): { lkey: number; addr: number; length: number }[] | null {
    const qp: Qp | undefined = this.ctx.qps.get(qpn);
    if (qp === undefined) return null;
    const host = this.ctx.hca.host;
    const segs: { lkey: number; addr: number; length: number }[] = [];
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
        for (const d of w.data) if (d.kind === 'ptr') segs.push({ lkey: d.seg.lkey, addr: d.seg.addr, length: dataSegLength(d.seg.byteCount) });
      }
    } else {
      for (const s of qp.recvSges(wqeIndex)) segs.push(s);
    }
    return segs.filter((sg) => sg.length > 0);
  }



  /** The part of [iova, iova + length) inside the MR, as host addresses, at most MAX_FAULT_BYTES. */
  private clip(odp: OdpMr, iova: number, length: number, cap = MAX_FAULT_BYTES): FaultRange | null {
    const lo = Math.max(iova, odp.mr.iova);
    const hi = Math.min(iova + length, odp.mr.iova + odp.mr.length, lo + cap);
    if (hi <= lo) return null;
    return { odp, addr: odp.hostOf(lo), length: hi - lo };
  }

  /**
   * The MMU notifier: the process dropped [addr, addr + length). Every ODP MR page in it is
   * zapped (MTT entry not present) by UMR, which drops it from the caches too.
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
      let present = false;
      const unpin: number[] = [];
      for (let i = first; i <= last; i++) {
        const e = odp.mtt[i];
        if (e !== 0) {
          present = true;
          unpin.push(e - (e % PAGE));
        }
        odp.mtt[i] = 0;
      }
      odp.stats.pageInvalidations++;
      if (!present) {
        odp.stats.pageInvalidationsHandled++;
        continue;
      }
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
            await this.ctx.umr.updateTranslations(odp.mr.deviceKey, blo, entries);
            for (const f of unpin) this.ctx.hca.mem.unpin(f);
          } finally {
            odp.release();
          }
          odp.stats.pageInvalidationsHandled++;
        }),
      );
    }
    // the process's frames are freed once the device can no longer reach them
    return zaps.length === 0 ? undefined : Promise.all(zaps).then(() => undefined);
  }
}

/** Releases the MRs `rangesOf` held for these ranges. */
function releaseAll(ranges: readonly FaultRange[] | null): void {
  for (const r of ranges ?? []) r.odp.release();
}
