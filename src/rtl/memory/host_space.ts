/**
 * A host process address space over HostMem: what API.md calls the host (`tb.host(i)`).
 * Virtual addresses come from a bump allocator. A 4 KiB-page allocation is backed lazily, as
 * Linux backs anonymous memory: a page gets a scattered frame on its first touch (a CPU write,
 * pinning, a DMA address asked for) and reads as zeros until then; a huge-page allocation is
 * backed at once by physically contiguous 2 MiB pages (hugetlbfs reserves them at mmap).
 * madviseDontNeed drops pages (an ODP MR then faults on them) and faultIn brings them back, as
 * an ODP fault handler does. Page tables are sparse (chunks made on first touch), so a
 * terabyte of virtual memory costs nothing until it is used.
 */
import { FRAME_SIZE, isPow2, type HostMem } from './host_mem.ts';
import { hex } from '../formats/field.ts';

/** Bytes of a base page. */
export const PAGE_SIZE = 4096;
/** Bytes of a huge page (x86-64 PMD size). */
export const HUGE_PAGE_SIZE = 2 * 1024 * 1024;
/**
 * First virtual address handed out (mmap regions on x86-64 lie below the stack at the top of
 * the 47-bit space): 16 TiB below the end, room for as much memory as the config allows.
 */
export const HOST_VA_BASE = 0x7000_0000_0000;
/** End of the user address space (x86-64, 47 bits). */
export const HOST_VA_END = 0x8000_0000_0000;
/** Unmapped bytes left after every allocation, so an overrun faults instead of landing in a neighbour. */
export const GUARD_GAP = PAGE_SIZE;

/** A host buffer: the virtual address and length asked for. */
export interface HostBuffer {
  addr: number;
  length: number;
}

/** Options of `HostSpace.alloc`. */
export interface HostAllocOptions {
  /** Alignment of `addr` in bytes, a power of two (default 4096; buffers always start on a page). */
  align?: number;
  /** Back the buffer with 2 MiB physically contiguous pages (default false: scattered 4 KiB pages). */
  hugePages?: boolean;
}

/** The errno-style codes of host errors, as the kernel would return them. */
export type HostErrno = 'EFAULT' | 'EINVAL' | 'ENOMEM';

/** A failed host memory operation; `errno` says which rule, the message names the address. */
export class HostError extends Error {
  constructor(
    readonly errno: HostErrno,
    message: string,
  ) {
    super(message);
    this.name = 'HostError';
  }
}

/** Called after pages are dropped (the range is page-aligned), e.g. so the ODP driver zaps MTTs. */
/** An MMU notifier: told of a dropped range; a returned promise holds the frames until it settles. */
export type UnmapListener = (addr: number, length: number) => void | Promise<void>;

/**
 * Page-table values besides a frame address (frame 0 is never handed out, so 0 is free to mean
 * something): never touched (backed on first touch, reads as zeros), dropped by madvise
 * (faultIn refills; accesses through the space fault), unmapped (munmap).
 */
const LAZY = 0;
const DROPPED = -1;
const UNMAPPED = -2;
/** @internal The page-table values besides frame addresses (for tests). */
export const PAGE_STATE = { LAZY, DROPPED, UNMAPPED } as const;

/** Page-table entries per chunk: a chunk is made on the first change in its range. */
const PT_CHUNK = 512;

/** @internal The page table of one allocation: one number per page (a physical address, or LAZY, DROPPED, UNMAPPED). */
export class PageTable {
  private readonly chunks: (Float64Array | undefined)[];

  constructor(
    /** Pages. */
    readonly length: number,
  ) {
    this.chunks = new Array<Float64Array | undefined>(Math.ceil(length / PT_CHUNK));
  }

  get(i: number): number {
    const c = this.chunks[Math.floor(i / PT_CHUNK)];
    return c === undefined ? LAZY : c[i % PT_CHUNK];
  }

  set(i: number, v: number): void {
    const k = Math.floor(i / PT_CHUNK);
    let c = this.chunks[k];
    if (c === undefined) {
      if (v === LAZY) return;
      // the last chunk only as long as the pages it covers (a one-page driver allocation, as
      // each ICM page the firmware asks for, takes 8 bytes, not 4 KiB)
      this.chunks[k] = c = new Float64Array(Math.min(PT_CHUNK, this.length - k * PT_CHUNK));
    }
    c[i % PT_CHUNK] = v;
  }

  /**
   * The first page of [from, to) whose entry is at most `worst`, or -1. A chunk never made holds
   * LAZY pages only, so a range of a terabyte costs its few chunks, not its pages.
   */
  firstAtMost(from: number, to: number, worst: number): number {
    let i = from;
    while (i < to) {
      const k = Math.floor(i / PT_CHUNK);
      const base = k * PT_CHUNK;
      const end = Math.min(to, base + PT_CHUNK);
      const c = this.chunks[k];
      if (c === undefined) {
        if (LAZY <= worst) return i;
      } else {
        for (let j = i - base; j < end - base; j++) if (c[j] <= worst) return base + j;
      }
      i = end;
    }
    return -1;
  }
}

/** One allocation: a run of pages, each mapped to a physical address, not yet touched, dropped or unmapped. */
interface Region {
  readonly addr: number;
  readonly length: number;
  readonly pageSize: number;
  readonly pages: PageTable;
}

/** Slots of the region lookup cache (a power of two). */
const REGION_SLOTS = 256;

/**
 * A process address space. Addresses are JS numbers (user addresses are below 2^47). Pages are
 * 4 KiB, or 2 MiB for `hugePages` allocations. Reads and writes through the space fault with a
 * HostError (EFAULT) on dropped or never-allocated memory.
 */
export class HostSpace {
  private readonly regions: Region[] = []; // ascending addr (bump allocation)
  private readonly listeners: UnmapListener[] = [];
  private cursor = HOST_VA_BASE;
  private last: Region | null = null; // lookup cache: accesses are local
  /**
   * Regions by page number, direct-mapped (REGION_SLOTS slots): a registration's path touches a
   * dozen regions in turn (the command queue's page, mailboxes, the UMR QP's and the CQ's and EQ's
   * buffers, the MR's pages, the ICM pages given one by one), so `last` alone missed most lookups
   * into a binary search over thousands of regions. Regions are never removed: a slot holding a
   * region that covers the address is always right.
   */
  private readonly regionSlots: (Region | null)[] = new Array<Region | null>(REGION_SLOTS).fill(null);
  private pieceLen = 0; // set by translate: bytes contiguous from the address it returned
  private spanLo = 0; // set by spanOne: the page run of the range in its allocation
  private spanHi = 0;

  /** @internal The adapter makes its host's space. */
  constructor(
    /** @internal The physical memory under this space. */
    readonly mem: HostMem,
  ) {}

  /**
   * Allocates `length` bytes of zeroed memory: 4 KiB pages backed on first touch, huge pages at
   * once. ENOMEM when the huge pages are not available, or (Linux's overcommit heuristic,
   * OVERCOMMIT_GUESS: mm/util.c __vm_enough_memory) when one allocation is larger than all of
   * physical memory.
   */
  alloc(length: number, opts: HostAllocOptions = {}): HostBuffer {
    if (!Number.isSafeInteger(length) || length < 1) {
      throw new RangeError(`host.alloc: length must be a positive integer, got ${length}`);
    }
    const align = opts.align ?? PAGE_SIZE;
    if (!isPow2(align) || align > 2 ** 30) {
      throw new RangeError(`host.alloc: align must be a power of two up to 1 GiB, got ${align}`);
    }
    const pageSize = opts.hugePages === true ? HUGE_PAGE_SIZE : PAGE_SIZE;
    const a = Math.max(align, pageSize);
    const addr = Math.ceil(this.cursor / a) * a;
    const nPages = Math.ceil(length / pageSize);
    const end = addr + nPages * pageSize;
    if (end > HOST_VA_END) {
      throw new HostError('ENOMEM', `host.alloc: ENOMEM: ${length} bytes do not fit the address space (next free ${hex(this.cursor)})`);
    }
    if (nPages * pageSize > this.mem.size) {
      throw new HostError('ENOMEM', `host.alloc: ENOMEM: ${length} bytes are more than the host's physical memory (${this.mem.size} bytes)`);
    }
    const region: Region = { addr, length, pageSize, pages: new PageTable(nPages) };
    if (pageSize === HUGE_PAGE_SIZE) this.populate(region, 0, nPages, 'alloc');
    this.regions.push(region);
    this.cursor = end + GUARD_GAP;
    return { addr, length };
  }

  /** Writes `bytes` at virtual address `addr`. */
  write(addr: number, bytes: Uint8Array): void {
    this.writeFrom(addr, bytes, 0, bytes.length);
  }

  /** Writes `len` bytes of `src` from `srcOff` at virtual address `addr` (no view allocated). */
  writeFrom(addr: number, src: Uint8Array, srcOff: number, len: number): void {
    if (!(Number.isSafeInteger(srcOff) && Number.isSafeInteger(len) && srcOff >= 0 && len >= 0 && srcOff + len <= src.length)) {
      throw new RangeError(`host.writeFrom: bytes ${srcOff}+${len} are not within the source (${src.length} bytes)`);
    }
    let done = 0;
    this.checkRange('write', addr, len);
    // a write within one 4 KiB page faults, if it does, at its first translate, before any byte
    // is written: only a longer one is checked whole first
    if ((addr % PAGE_SIZE) + len > PAGE_SIZE) this.requireMapped('write', addr, len);
    while (done < len) {
      const pa = this.translate('write', addr, len, addr + done, len - done, true, true);
      const n = this.pieceLen;
      this.mem.writeFrom(pa, src, srcOff + done, n);
      done += n;
    }
  }

  /** A copy of `length` bytes at virtual address `addr`. */
  read(addr: number, length: number): Uint8Array {
    this.checkRange('read', addr, length);
    const out = new Uint8Array(length);
    this.readInto(addr, out, 0, length);
    return out;
  }

  /** Copies `length` bytes at virtual address `addr` into `dst` from `dstOff` (no allocation). */
  readInto(addr: number, dst: Uint8Array, dstOff: number, length: number): void {
    this.checkRange('read', addr, length);
    let done = 0;
    while (done < length) {
      const pa = this.translate('read', addr, length, addr + done, length - done, false, true);
      const n = this.pieceLen;
      if (pa === LAZY) dst.fill(0, dstOff + done, dstOff + done + n); // never touched: zeros, still no frame
      else this.mem.readInto(pa, dst, dstOff + done, n);
      done += n;
    }
  }

  /** Sets `len` bytes at `addr` to `byte`. */
  fill(addr: number, len: number, byte: number): void {
    this.checkRange('fill', addr, len);
    if (!Number.isInteger(byte) || byte < 0 || byte > 255) throw new RangeError(`host.fill: byte must be 0..255, got ${byte}`);
    this.requireMapped('fill', addr, len);
    let done = 0;
    while (done < len) {
      const pa = this.translate('fill', addr, len, addr + done, len - done, byte !== 0, true);
      const n = this.pieceLen;
      if (pa !== LAZY) this.mem.fill(pa, n, byte); // zeros over an untouched page: nothing to do
      done += n;
    }
  }

  /**
   * The physical (DMA) address behind virtual address `addr` (a page never touched gets its frame
   * now, as pinning it would); HostError EFAULT when unmapped or dropped.
   */
  dmaAddress(addr: number): number {
    this.checkRange('dmaAddress', addr, 1);
    return this.translate('dmaAddress', addr, 1, addr, 1, true);
  }


  /** The page size (4 KiB or 2 MiB) of the allocation holding `addr`; HostError EFAULT outside any. */
  pageSizeAt(addr: number): number {
    this.checkRange('pageSizeAt', addr, 1);
    const r = this.regionOf(addr);
    if (r === null) throw new HostError('EFAULT', `host.pageSizeAt: ${hex(addr)} is not in any allocation`);
    return r.pageSize;
  }

  /**
   * True when every byte of [addr, addr + len) lies in an allocation and was not munmapped: the
   * process may touch it (a page madvise dropped comes back zeroed on first touch). len 0: true.
   */
  inVma(addr: number, len: number): boolean {
    this.checkRange('inVma', addr, len);
    if (len === 0) return true;
    let va = addr;
    const end = addr + len;
    while (va < end) {
      const r = this.regionOf(va);
      if (r === null) return false;
      const p = Math.floor((va - r.addr) / r.pageSize);
      if (r.pages.get(p) === UNMAPPED) return false;
      va = r.addr + (p + 1) * r.pageSize;
    }
    return true;
  }

  /**
   * pin_user_pages: takes a device reference on every frame of the pages holding
   * [addr, addr + len) (all of a 2 MiB page's frames, as the kernel pins the whole compound
   * page), which must be present (faultIn first; HostError EFAULT otherwise). Returns the frames
   * pinned, for `unpin`: munmap and madvise of pinned pages remove the process's mapping but
   * free no pinned frame until its last unpin (HostMem.freeFrames).
   */
  pin(addr: number, len: number): Float64Array {
    this.checkRange('pin', addr, len);
    if (len === 0) return new Float64Array(0);
    // one allocation (every registration but one over neighbouring allocations): no list of spans
    const one = this.spanOne(addr, len);
    const spans = one === null ? this.spans('pin', addr, len, 'EFAULT') : null;
    const nSpans = spans === null ? 1 : spans.length;
    let n = 0;
    for (let k = 0; k < nSpans; k++) {
      const r = spans === null ? one! : spans[k].r;
      const lo = spans === null ? this.spanLo : spans[k].lo;
      const hi = spans === null ? this.spanHi : spans[k].hi;
      for (let p = lo; p < hi; p++) {
        if (r.pages.get(p) <= 0) throw new HostError('EFAULT', `host.pin: ${hex(addr)}+${len} is not present (page ${hex(r.addr + p * r.pageSize)}: fault it in first)`);
      }
      n += (hi - lo) * (r.pageSize / FRAME_SIZE);
    }
    const out = new Float64Array(n);
    let i = 0;
    for (let k = 0; k < nSpans; k++) {
      const r = spans === null ? one! : spans[k].r;
      const lo = spans === null ? this.spanLo : spans[k].lo;
      const hi = spans === null ? this.spanHi : spans[k].hi;
      for (let p = lo; p < hi; p++) {
        const pa = r.pages.get(p);
        for (let off = 0; off < r.pageSize; off += FRAME_SIZE) {
          this.mem.pin(pa + off);
          out[i++] = pa + off;
        }
      }
    }
    return out;
  }

  /** Drops the references `pin` took (deregistration): a frame the process let go meanwhile is freed now. */
  unpin(frames: Float64Array): void {
    for (let i = 0; i < frames.length; i++) this.mem.unpin(frames[i]);
  }

  /** True when some allocation overlaps [addr, addr + len). */
  overlapsAllocation(addr: number, len: number): boolean {
    this.checkRange('overlapsAllocation', addr, len);
    return this.regions.some((r) => r.addr < addr + len && addr < r.addr + r.pages.length * r.pageSize);
  }

  /** True when every byte of [addr, addr + len) is mapped and present (len 0: true). */
  isMapped(addr: number, len: number): boolean {
    this.checkRange('isMapped', addr, len);
    return len === 0 || this.firstUnmapped(addr, len) < 0;
  }

  /**
   * True when every page of [addr, addr + len) has a frame (resident: touched, and not dropped
   * since); an untouched page reads as zero but is not resident. What a snapshot without
   * faulting (hmm_range_fault without HMM_PFN_REQ_FAULT) finds valid.
   */
  isResident(addr: number, len: number): boolean {
    this.checkRange('isResident', addr, len);
    return len === 0 || this.firstUnmapped(addr, len, LAZY) < 0;
  }

  /**
   * Drops the pages of [addr, addr + length) (MADV_DONTNEED): the process's own later accesses
   * refault a zero page (anonymous private memory, as Linux), a device's (an ODP MR) fault until
   * faultIn maps them again. Pinned frames (a registration's) stay allocated until their last
   * unpin, no longer the process's. `addr` must be page-aligned (2 MiB in a huge-page allocation:
   * hugetlbfs rules) and `length` is rounded up to whole pages; the range must lie inside
   * allocations. Listeners (MMU notifiers) are told the page-aligned range; the frames go back
   * to the free pool once every listener's returned promise settles (a device may still reach
   * them until its mappings are zapped), at once when none holds them. The promise resolves then.
   */
  madviseDontNeed(addr: number, length: number): Promise<void> {
    return this.drop('madviseDontNeed', addr, length, DROPPED);
  }

  /**
   * Unmaps the pages of [addr, addr + length) (munmap, within allocations): as madviseDontNeed,
   * but faultIn cannot bring them back (an ODP access there fails).
   */
  munmap(addr: number, length: number): Promise<void> {
    return this.drop('munmap', addr, length, UNMAPPED);
  }

  private drop(op: string, addr: number, length: number, mark: number): Promise<void> {
    this.checkRange(op, addr, length);
    if (length === 0) return Promise.resolve();
    const spans = this.spans(op, addr, length, 'ENOMEM');
    const first = spans[0].r;
    if ((addr - first.addr) % first.pageSize !== 0) {
      throw new HostError('EINVAL', `host.${op}: EINVAL: ${hex(addr)} is not aligned to the ${first.pageSize === HUGE_PAGE_SIZE ? '2 MiB huge' : '4 KiB'} page size`);
    }
    let end = addr;
    const freed: number[] = [];
    for (const { r, lo, hi } of spans) {
      for (let p = lo; p < hi; p++) {
        const pa = r.pages.get(p);
        if (pa > 0) for (let off = 0; off < r.pageSize; off += FRAME_SIZE) freed.push(pa + off);
        // an untouched page is dropped too: a device access faults until faultIn, as for any dropped page
        if (pa >= LAZY || mark === UNMAPPED) r.pages.set(p, mark);
      }
      end = r.addr + hi * r.pageSize;
    }
    const holds: Promise<void>[] = [];
    for (const cb of [...this.listeners]) {
      const h = cb(addr, end - addr);
      if (h !== undefined) holds.push(h);
    }
    if (holds.length === 0) {
      this.mem.freeFrames(freed);
      return Promise.resolve();
    }
    return Promise.all(holds).then(() => this.mem.freeFrames(freed));
  }

  /**
   * Registers `cb` to hear of every madviseDontNeed; returns a function that unregisters it.
   * @internal The driver's MMU notifier listens here.
   */
  onUnmap(cb: UnmapListener): () => void {
    this.listeners.push(cb);
    return () => {
      const i = this.listeners.indexOf(cb);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /**
   * Populates the dropped and never-touched pages of [addr, addr + length) with new zeroed
   * frames (what the kernel does for an ODP fault or get_user_pages). The range must lie inside allocations
   * (HostError EFAULT otherwise). Returns the virtual addresses of the pages it populated,
   * ascending (empty when all were mapped).
   */
  faultIn(addr: number, length: number): number[] {
    this.checkRange('faultIn', addr, length);
    if (length === 0) return [];
    const out: number[] = [];
    const one = this.spanOne(addr, length);
    if (one !== null) {
      this.faultInSpan(one, this.spanLo, this.spanHi, out);
      return out;
    }
    for (const { r, lo, hi } of this.spans('faultIn', addr, length, 'EFAULT')) this.faultInSpan(r, lo, hi, out);
    return out;
  }

  /** faultIn over pages [lo, hi) of `r`: the addresses of the pages populated go to `out`. */
  private faultInSpan(r: Region, lo: number, hi: number, out: number[]): void {
    let p = lo;
    while (p < hi) {
      const v = r.pages.get(p);
      if (v > 0) { p++; continue; }
      if (v === UNMAPPED) throw new HostError('EFAULT', `host.faultIn: ${hex(r.addr + p * r.pageSize)} is not mapped (munmap)`);
      let q = p;
      while (q < hi && (r.pages.get(q) === DROPPED || r.pages.get(q) === LAZY)) q++;
      this.populate(r, p, q, 'faultIn');
      for (let i = p; i < q; i++) out.push(r.addr + i * r.pageSize);
      p = q;
    }
  }

  // --- internals -------------------------------------------------------------------------------

  private checkRange(op: string, addr: number, len: number): void {
    if (!Number.isSafeInteger(addr) || addr < 0) throw new RangeError(`host.${op}: addr must be a non-negative integer, got ${addr}`);
    if (!Number.isSafeInteger(len) || len < 0) throw new RangeError(`host.${op}: length must be a non-negative integer, got ${len}`);
  }

  /** Maps pages [lo, hi) of `r` (none with a frame) to fresh frames. */
  private populate(r: Region, lo: number, hi: number, op: string): void {
    // what a failed huge-page population puts back (4 KiB pages are set only once all frames are
    // taken: nothing to undo)
    let was: number[] | null = null;
    if (r.pageSize !== PAGE_SIZE) {
      was = [];
      for (let i = lo; i < hi; i++) was.push(r.pages.get(i));
    }
    try {
      if (r.pageSize === PAGE_SIZE) {
        const frames = this.mem.allocFrames(hi - lo);
        for (let i = lo; i < hi; i++) r.pages.set(i, frames[i - lo]);
      } else {
        for (let i = lo; i < hi; i++) {
          r.pages.set(i, this.mem.allocFrames(HUGE_PAGE_SIZE / FRAME_SIZE, { contiguous: true, align: HUGE_PAGE_SIZE })[0]);
        }
      }
    } catch (e) {
      // undo a partial huge-page population so a failed call changes nothing
      for (let i = lo; i < hi; i++) {
        const pa = r.pages.get(i);
        if (pa <= 0) continue;
        const fr: number[] = [];
        for (let off = 0; off < r.pageSize; off += FRAME_SIZE) fr.push(pa + off);
        this.mem.freeFrames(fr);
        r.pages.set(i, was![i - lo]);
      }
      throw new HostError('ENOMEM', `host.${op}: ENOMEM: ${(hi - lo) * r.pageSize} bytes of host memory not available (${(e as Error).message})`);
    }
  }

  /** The allocation whose pages hold `va`, or null. */
  private regionOf(va: number): Region | null {
    const l = this.last;
    if (l !== null && va >= l.addr && va < l.addr + l.pages.length * l.pageSize) return l;
    const slot = Math.floor(va / PAGE_SIZE) & (REGION_SLOTS - 1);
    const q = this.regionSlots[slot];
    if (q !== null && va >= q.addr && va < q.addr + q.pages.length * q.pageSize) {
      this.last = q;
      return q;
    }
    const rs = this.regions;
    let lo = 0;
    let hi = rs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (rs[mid].addr <= va) lo = mid + 1;
      else hi = mid - 1;
    }
    if (hi < 0) return null;
    const r = rs[hi];
    if (va >= r.addr + r.pages.length * r.pageSize) return null;
    this.regionSlots[slot] = r;
    this.last = r;
    return r;
  }

  /**
   * The physical address of `va` and how many bytes (at most `want`) follow it contiguously in
   * its page (set in `pieceLen`). A page never touched gets its frame when `touch`, else the
   * result is LAZY (0: the page reads as zeros). `cpu`: the process's own access, which refaults
   * a page madvise dropped as Linux refaults anonymous private memory (a zero page: zeros to a
   * read, a new zeroed frame to a write). Throws HostError EFAULT naming the access
   * [addr, addr + len) and why.
   */
  private translate(op: string, addr: number, len: number, va: number, want: number, touch: boolean, cpu = false): number {
    const r = this.regionOf(va);
    if (r === null) {
      throw new HostError('EFAULT', `host.${op}: ${hex(addr)}+${len} is not mapped (${hex(va)} was never allocated)`);
    }
    const off = va - r.addr;
    const p = Math.floor(off / r.pageSize);
    let pa = r.pages.get(p);
    if (pa === DROPPED && cpu) {
      if (!touch) {
        this.pieceLen = Math.min(want, r.pageSize - (off - p * r.pageSize));
        return LAZY; // reads as the zero page, no frame taken
      }
      pa = LAZY;
    }
    if (pa === LAZY && touch) {
      this.populate(r, p, p + 1, op);
      pa = r.pages.get(p);
    }
    if (pa < 0) {
      throw new HostError('EFAULT', `host.${op}: ${hex(addr)}+${len} is not mapped (page ${hex(r.addr + p * r.pageSize)} was ${pa === UNMAPPED ? 'unmapped (munmap)' : 'dropped by madvise DONTNEED'})`);
    }
    const inPage = off - p * r.pageSize;
    this.pieceLen = Math.min(want, r.pageSize - inPage);
    return pa === LAZY ? LAZY : pa + inPage;
  }

  /**
   * Throws the fault of the first byte the process cannot touch (never allocated, or munmapped;
   * a dropped page refaults), so a faulting write or fill changes nothing.
   */
  private requireMapped(op: string, addr: number, len: number): void {
    const va = len === 0 ? -1 : this.firstUnmapped(addr, len, UNMAPPED);
    if (va >= 0) this.translate(op, addr, len, va, 1, false);
  }

  /** The first address in [addr, addr + len) not present (below `worst`: dropped or unmapped; UNMAPPED: unmapped only), or -1. */
  private firstUnmapped(addr: number, len: number, worst = DROPPED): number {
    let va = addr;
    const end = addr + len;
    while (va < end) {
      const r = this.regionOf(va);
      if (r === null) return va;
      // the region's pages of the range at once (a lookup per page made isMapped of 1 TiB 7 s)
      const p0 = Math.floor((va - r.addr) / r.pageSize);
      const pEnd = Math.min(r.pages.length, Math.ceil((end - r.addr) / r.pageSize));
      const p = r.pages.firstAtMost(p0, pEnd, worst);
      if (p >= 0) return p === p0 ? va : r.addr + p * r.pageSize;
      va = r.addr + pEnd * r.pageSize;
    }
    return -1;
  }

  /**
   * The allocation holding all of [addr, addr + length) (length > 0), its page run in `spanLo`
   * and `spanHi`; null when the range is not inside one allocation (then `spans` says what).
   */
  private spanOne(addr: number, length: number): Region | null {
    const r = this.regionOf(addr);
    if (r === null) return null;
    const end = addr + length;
    if (end > r.addr + r.pages.length * r.pageSize) return null;
    this.spanLo = Math.floor((addr - r.addr) / r.pageSize);
    this.spanHi = Math.ceil((end - r.addr) / r.pageSize);
    return r;
  }

  /** The page runs [lo, hi) of each allocation covering [addr, addr + length); throws if a byte is outside all. */
  private spans(op: string, addr: number, length: number, errno: HostErrno): { r: Region; lo: number; hi: number }[] {
    const out: { r: Region; lo: number; hi: number }[] = [];
    let va = addr;
    const end = addr + length;
    while (va < end) {
      const r = this.regionOf(va);
      if (r === null) {
        throw new HostError(errno, `host.${op}: ${errno}: ${hex(addr)}+${length} is not inside an allocation (${hex(va)} was never allocated)`);
      }
      const rEnd = r.addr + r.pages.length * r.pageSize;
      const lo = Math.floor((va - r.addr) / r.pageSize);
      const hi = Math.ceil((Math.min(end, rEnd) - r.addr) / r.pageSize);
      out.push({ r, lo, hi });
      va = rEnd;
    }
    return out;
  }
}
