/** A memory region (ibv_mr): a user MR (regMr) or a fast-registration MR (allocMr). */
import type { OdpStats } from './odp.ts';
import type { Pd } from './pd.ts';
import { VerbsError, shown } from './verbs_error.ts';
import { readMkey } from '../rtl/firmware/icm_writer.ts';

const PAGE = 4096;
/**
 * The empty lists every MR starts with, shared (mapSg replaces them, nothing adds to them): two
 * arrays per MR were 60 bytes of each of a million live MRs.
 */
const NO_PAGES: number[] = [];
const NO_ELEMENTS: { dma: number; length: number }[] = [];
/**
 * KLMs reserved per SG_GAPS element: an element is a host virtual range, and host pages are
 * scattered, so it becomes one KLM per physically contiguous run (a DMA-mapped element on Linux
 * is contiguous already). 16 covers an element of 60 KiB over scattered pages.
 */
export const SG_GAPS_KLMS_PER_ELEMENT = 16;

/** The physically contiguous runs of `[addr, addr + len)` in host memory, as DMA segments. */
function dmaRuns(host: { dmaAddress(a: number): number }, addr: number, len: number): { dma: number; length: number }[] {
  const out: { dma: number; length: number }[] = [];
  let a = addr;
  while (a < addr + len) {
    const n = Math.min(addr + len - a, PAGE - (a % PAGE));
    const dma = host.dmaAddress(a);
    const last = out[out.length - 1];
    if (last && last.dma + last.length === dma) last.length += n;
    else out.push({ dma, length: n });
    a += n;
  }
  return out;
}

/**
 * The pageSize pages of one MEM_REG element `[addr, addr + len)` (mapped): per page the DMA base
 * (first registered byte's DMA address minus its offset in the page; 0 for a page without
 * registered bytes, a zero-length element), whether every page is physically contiguous over its
 * registered bytes with a pageSize-aligned base, and the same bytes as 4 KiB entries.
 */
function memRegPages(
  host: { dmaAddress(a: number): number },
  addr: number,
  len: number,
  pageSize: number,
): { pages: number[]; small: number[]; contiguous: boolean } {
  const pages: number[] = [];
  const small: number[] = [];
  let contiguous = true;
  const first = addr - (addr % pageSize);
  const n = Math.ceil((addr + len - first) / pageSize);
  for (let p = 0; p < n; p++) {
    const pStart = first + p * pageSize;
    const lo = Math.max(addr, pStart);
    const hi = Math.min(addr + len, pStart + pageSize);
    if (hi <= lo) {
      pages.push(0);
      continue;
    }
    const base = host.dmaAddress(lo) - (lo - pStart);
    pages.push(base);
    if (pageSize === PAGE) continue;
    if (base < 0 || base % pageSize !== 0) contiguous = false;
    for (let f = lo - (lo % PAGE); f < hi; f += PAGE) {
      const b = Math.max(f, lo);
      const frame = host.dmaAddress(b) - (b - f);
      small.push(frame);
      if (frame !== base + (f - pStart)) contiguous = false;
    }
  }
  return { pages, small, contiguous };
}

export type MrType = 'USER' | 'MEM_REG' | 'SG_GAPS';

export class Mr {
  lkey: number;
  rkey: number;
  iova: number;
  length: number;
  readonly access: number;
  /**
   * Software view of the registration's access: regMr's, or that of the last REG_MR posted for
   * this fast-registration MR (a driver cannot know the device's state synchronously); the
   * bindMw verb's "MR zero-based: EINVAL" looks at it.
   */
  regAccess: number;
  /** The key the device holds for a pooled user MR (updateKey changes only the handle's). */
  deviceKey: number;
  readonly maxNumSg: number;
  /**
   * Fast registration: the mapped list (mapSg): the MTT entries REG_MR writes (MEM_REG: DMA
   * addresses of pages of 2^mttLogPageSize bytes) or the KLM elements (SG_GAPS).
   */
  pages: number[] = NO_PAGES;
  elements: { dma: number; length: number }[] = NO_ELEMENTS;
  /** mapSg's page size. */
  pageSize = PAGE;
  /**
   * MEM_REG: the page list's length in pageSize pages (what the maxNumSg rules count), which is
   * `pages.length` unless the list fell back to 4 KiB MTT entries (see mapSg).
   */
  pageCount = 0;
  /** MEM_REG: log2 of the page size of the MTT entries in `pages` (log2(pageSize), or 12). */
  mttLogPageSize = 12;
  /** MEM_REG: MTT entries the MR's translation table holds (allocMr). */
  readonly mttCapacity: number;
  /** Elements mapped by the last mapSg (SG_GAPS counts these against maxNumSg, not KLMs). */
  mappedCount = 0;
  destroyed = false;
  /** @internal Its place in its PD's list of MRs (-1: not listed). */
  pdSlot = -1;
  /** @internal Its creation number among the context's verbs objects (Context.uobjects). */
  useq = 0;
  /**
   * A REG_MR posted for this MR granted REMOTE_ATOMIC (sticky): every later REG_MR puts A in
   * the mkey mask so a registration without it clears the right (RegMrWqeParams.clearAtomic).
   */
  atomicGranted = false;
  /** A user MR from the driver's mkey pool: its bucket (dereg revokes it by UMR), else 0. */
  readonly poolBucket: number;
  /**
   * The frames this registration pins (regMr: pin_user_pages over its range), released by dereg
   * once the device can no longer reach them; null for ODP and fast-registration MRs.
   */
  get pins(): Float64Array | null {
    const p = this.pinned;
    return typeof p === 'number' ? Float64Array.of(p) : p;
  }

  set pins(frames: Float64Array | null) {
    this.pinned = frames !== null && frames.length === 1 ? frames[0] : frames;
  }

  /**
   * `pins` as held: a one-page MR's single frame as a number (a typed array and its buffer per
   * MR were some 300 bytes each of a million live MRs), else the list.
   */
  private pinned: number | Float64Array | null = null;
  /** Fast registration: every frame a mapSg of this MR mapped for the device, held until dereg. */
  private sgPins: Set<number> | null = null;
  /** An ODP MR (Access.ON_DEMAND; an implicit one too): the driver's paging state, else null. */
  odp: { readonly stats: OdpStats } | null = null;

  constructor(
    readonly pd: Pd,
    key: number,
    readonly type: MrType,
    o: { iova: number; length: number; access: number; maxNumSg: number; poolBucket?: number; mttCapacity?: number },
  ) {
    this.poolBucket = o.poolBucket ?? 0;
    this.mttCapacity = o.mttCapacity ?? 0;
    this.lkey = key >>> 0;
    this.rkey = key >>> 0;
    this.iova = o.iova;
    this.length = o.length;
    this.access = o.access;
    this.regAccess = o.access;
    this.deviceKey = key >>> 0;
    this.maxNumSg = o.maxNumSg;
  }

  /** ODP statistics (`rdma statistic mr`): faults, invalidations and prefetches of this MR. */
  odpStats(): OdpStats {
    this.checkAlive('odpStats');
    if (this.odp === null) throw new VerbsError('EINVAL', 'odpStats: the MR is not an ODP MR (Access.ON_DEMAND)');
    return { ...this.odp.stats };
  }

  /** The mkey index (the 24 high bits of the key). */
  get index(): number {
    return this.lkey >>> 8;
  }

  checkAlive(what: string): void {
    if (this.destroyed) throw new VerbsError('EINVAL', `${what}: the MR was deregistered`);
  }

  /**
   * ib_map_mr_sg: maps host virtual ranges onto the MR's page list (MEM_REG: every element but
   * the first starts page-aligned, every element but the last ends page-aligned; the first that
   * breaks this ends the mapping) or element list (SG_GAPS); at most maxNumSg elements (for
   * MEM_REG too, whatever their pages: semantics.md "mapSg: more entries than maxNumSg: maps the
   * first maxNumSg", as the reference model; a page list longer than maxNumSg is then refused
   * by REG_MR with EINVAL, so nothing is written past the MR's translation table). Sets iova (the
   * first element's address) and length. Returns the number of elements mapped.
   *
   * MEM_REG with pageSize > 4096 over host memory of scattered 4 KiB frames (documented choice):
   * when every pageSize page of the list is physically contiguous over its registered bytes, and
   * its DMA base (the first registered byte's DMA address minus its offset in the page) is
   * pageSize-aligned (a device MTT entry holds a page-aligned address; the kernel's
   * ib_umem_find_best_pgsz asks the same), REG_MR posts one MTT per page with log_page_size =
   * log2(pageSize); otherwise the same bytes as 4 KiB MTT entries (log_page_size 12). The DMA
   * address is always taken from a registered byte, never from an unmapped page start. The
   * table holds 2 * ALIGN(maxNumSg, 4) entries (allocMr), which fits the 4 KiB fallback of
   * pageSize 8192; a larger fallback that would not fit (within maxNumSg pages) ends the mapping
   * before its element.
   */
  mapSg(sg: readonly { addr: number; length: number }[], pageSize = PAGE): number {
    this.checkAlive('mapSg');
    this.pd.ctx.tb.checkInRun('mapSg');
    if (!Array.isArray(sg)) throw new VerbsError('EINVAL', `mapSg: the scatter list must be an array, got ${sg === null ? 'null' : typeof sg}`);
    sg.forEach((e, i) => {
      if (e === null || typeof e !== 'object') throw new VerbsError('EINVAL', `mapSg: element ${i} must be an object`);
      if (!(Number.isSafeInteger(e.addr) && e.addr >= 0)) throw new VerbsError('EINVAL', `mapSg: element ${i} addr must be a non-negative integer below 2^53, got ${shown(e.addr)}`);
      if (!(Number.isSafeInteger(e.length) && e.length >= 0)) throw new VerbsError('EINVAL', `mapSg: element ${i} length must be a non-negative integer, got ${shown(e.length)}`);
    });
    if (this.type === 'USER') throw new VerbsError('EINVAL', 'mapSg: only fast-registration MRs (allocMr) have a page list');
    if (!(Number.isInteger(pageSize) && pageSize >= PAGE && pageSize <= 2 ** 31 && 2 ** Math.round(Math.log2(pageSize)) === pageSize)) {
      throw new VerbsError('EINVAL', `mapSg: pageSize must be a power of two in 4 KiB .. 2 GiB (the mkey's 5-bit log_page_size), got ${shown(pageSize)}`);
    }
    // every element's numbers first, as the reference model: the host is never asked about a bad address
    for (const e of sg) {
      if (!(Number.isSafeInteger(e.addr) && e.addr >= 0 && Number.isSafeInteger(e.length) && e.length >= 0)) {
        throw new VerbsError('EINVAL', `mapSg: element [${e.addr}, +${e.length}) is not a non-negative address and length`);
      }
    }
    const host = this.pd.ctx.hca.host;
    // built aside and committed only when every element checks out (EFAULT leaves the MR as it was)
    const pages: number[] = []; // one entry per pageSize page
    const small: number[] = []; // the same bytes in 4 KiB entries (pageSize > 4096 only)
    let contiguous = true;
    const elements: { dma: number; length: number }[] = [];
    let mapped = 0;
    let length = 0;
    for (let i = 0; i < sg.length; i++) {
      const e = sg[i];
      if (mapped >= this.maxNumSg) break;
      if (this.type === 'MEM_REG') {
        if (i > 0 && e.addr % pageSize !== 0) break;
        if (i > 0 && (sg[i - 1].addr + sg[i - 1].length) % pageSize !== 0) break;
        if (!host.inVma(e.addr, e.length)) throw new VerbsError('EFAULT', `mapSg: element ${i} [0x${e.addr.toString(16)}, +${e.length}) is not mapped`);
        host.faultIn(e.addr, e.length); // ib_map_mr_sg takes DMA addresses of pinned, present pages
        this.pinSg(e.addr, e.length);
        const p = memRegPages(host, e.addr, e.length, pageSize);
        if (pageSize > PAGE) {
          const fallback = !(contiguous && p.contiguous);
          // the 4 KiB fallback must fit the table (while the list is within maxNumSg pages)
          if (fallback && small.length + p.small.length > this.mttCapacity && pages.length + p.pages.length <= this.maxNumSg) break;
          contiguous &&= p.contiguous;
          for (let k = 0; k < p.small.length; k++) small.push(p.small[k]); // (no spread: lists reach 10^5+ entries)
        }
        for (let k = 0; k < p.pages.length; k++) pages.push(p.pages[k]);
      } else {
        if (!host.inVma(e.addr, e.length)) throw new VerbsError('EFAULT', `mapSg: element ${i} [0x${e.addr.toString(16)}, +${e.length}) is not mapped`);
        host.faultIn(e.addr, e.length); // ib_map_mr_sg takes DMA addresses of pinned, present pages
        this.pinSg(e.addr, e.length);
        // host pages are scattered: one KLM per physically contiguous run of the element
        const runs = dmaRuns(host, e.addr, e.length);
        if (elements.length + runs.length > this.klmCapacity) break;
        for (let k = 0; k < runs.length; k++) elements.push(runs[k]);
      }
      length += e.length;
      mapped++;
    }
    const big = pageSize === PAGE || contiguous;
    this.pages = big ? pages : small;
    this.pageCount = pages.length;
    this.mttLogPageSize = big ? Math.log2(pageSize) : 12;
    this.elements = elements;
    this.mappedCount = mapped;
    this.pageSize = pageSize;
    this.iova = mapped > 0 ? sg[0].addr : 0;
    this.length = length;
    return mapped;
  }

  /**
   * A kernel consumer DMA-maps the pages it hands ib_map_mr_sg (ib_dma_map_sg) and keeps them
   * until it is done with the MR: each frame once per MR, until dereg (a registration the device
   * may still hold can name the pages of any earlier mapSg).
   */
  private pinSg(addr: number, len: number): void {
    if (len === 0) return;
    const host = this.pd.ctx.hca.host;
    const got = host.pin(addr, len);
    const set = (this.sgPins ??= new Set<number>());
    for (let i = 0; i < got.length; i++) {
      if (set.has(got[i])) host.mem.unpin(got[i]);
      else set.add(got[i]);
    }
  }

  /**
   * A kernel consumer's ib_dma_unmap_sg once its LOCAL_INV (or a remote invalidation) of the MR
   * has completed (as NVMe-oF's nvme_rdma_unmap_data after nvme_rdma_inv_rkey_done): the frames
   * every mapSg of this MR DMA-mapped go back to their process (or, unmapped meanwhile, free).
   * The device must not reach them any more: EBUSY while the MR's mkey is not free (register
   * again with mapSg and REG_MR). Safe the moment the LOCAL_INV completes: the UMR engine
   * completes it only once every DMA translated through the mkey has finished (issue 18 item 5).
   */
  unmapSg(): void {
    this.checkAlive('unmapSg');
    this.pd.ctx.tb.checkInRun('unmapSg');
    if (this.type === 'USER') throw new VerbsError('EINVAL', 'unmapSg: only fast-registration MRs (allocMr) have a page list');
    if (!readMkey(this.pd.ctx.hca, this.index).free) throw new VerbsError('EBUSY', 'unmapSg: the MR is registered (its mkey is not free): invalidate it first (LOCAL_INV)');
    const mem = this.pd.ctx.hca.mem;
    if (this.sgPins !== null) for (const f of this.sgPins) mem.unpin(f);
    this.sgPins = null;
  }

  /** @internal dereg, once the device can no longer reach them: the frames go back to their process (or, unmapped meanwhile, free). */
  releasePins(): void {
    const mem = this.pd.ctx.hca.mem;
    const p = this.pinned;
    if (typeof p === 'number') mem.unpin(p);
    else if (p !== null) this.pd.ctx.hca.host.unpin(p);
    this.pinned = null;
    if (this.sgPins !== null) for (const f of this.sgPins) mem.unpin(f);
    this.sgPins = null;
  }

  /** KLM entries the MR's mkey holds (SG_GAPS: room for elements split at page boundaries). */
  get klmCapacity(): number {
    return Math.min(Math.ceil(this.maxNumSg / 4) * 4 * SG_GAPS_KLMS_PER_ELEMENT, 2 ** 16);
  }

  /** ib_update_fast_reg_key: the next registration uses tag `key8`. */
  updateKey(key8: number): void {
    this.checkAlive('updateKey');
    if (!(Number.isInteger(key8) && key8 >= 0 && key8 <= 0xff)) throw new VerbsError('EINVAL', `updateKey: key must be 8 bits, got ${shown(key8)}`);
    this.lkey = ((this.lkey & 0xffffff00) | key8) >>> 0;
    this.rkey = ((this.rkey & 0xffffff00) | key8) >>> 0;
  }

  /** ibv_dereg_mr: EBUSY while windows are bound to it (DESTROY_MKEY otherwise). */
  async dereg(): Promise<void> {
    this.checkAlive('dereg');
    this.pd.ctx.tb.checkInRun('dereg');
    if (!(await this.removeHw(false))) throw new VerbsError('EBUSY', 'dereg: memory windows are still bound to the MR');
  }

  /**
   * @internal The MR goes: false (nothing done) while windows are bound to it. `removing`: the
   * device's removal (Context.disassociate), where a revoke that fails (the device in error)
   * destroys the mkey instead, as mlx5r_handle_mkey_cleanup does (mr.c:2096-2125).
   */
  async removeHw(removing = true): Promise<boolean> {
    if (this.destroyed) return true;
    const ctx = this.pd.ctx;
    if (readMkey(ctx.hca, this.index).mwCount > 0) return false;
    this.destroyed = true;
    this.pd.untrack(this);
    const odp = this.odp !== null ? await ctx.odp.unregister(this) : [];
    try {
      if (this.poolBucket > 0) {
        try {
          await ctx.pool.revoke(this.deviceKey, this.poolBucket);
        } catch (e) {
          if (!removing || !(e instanceof VerbsError)) throw e;
          ctx.pool.forget(this.deviceKey);
          await ctx.cmd(ctx.cmdq.exec({ op: 'DESTROY_MKEY', index: this.index }), 'dereg');
        }
      } else await ctx.cmd(ctx.cmdq.exec({ op: 'DESTROY_MKEY', index: this.index }), 'dereg');
    } finally {
      if (this.odp !== null) ctx.odp.mkeyDestroyed(this); // an invalidation waiting for it frees its frames
    }
    // the revoke UMR (or DESTROY_MKEY) completed only once every DMA translated through the
    // mkey had finished (the UMR engine's DMA fence, mlx5r_umr_revoke_mr, umr.c:406-413): the
    // pages can go now, and dereg returns after
    this.releasePins();
    for (const o of odp) ctx.odp.unpinMapped(o);
    this.released = Promise.resolve();
    return true;
  }

  /**
   * After dereg: resolved (dereg returns once the MR's pages are unpinned, every DMA translated
   * through the MR over). Null before dereg.
   */
  released: Promise<void> | null = null;
}
