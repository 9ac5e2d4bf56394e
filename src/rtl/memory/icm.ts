/**
 * ICM (interconnect context memory): the device's context memory, which lives in host memory
 * (the driver gives the firmware pages with MANAGE_PAGES). Here: the mkey context table (64 B
 * per mkey index) and the translation tables (MTT / KLM lists) of mkeys. Pure bookkeeping over
 * HostMem: the hardware reads contexts and translations through Pcie.
 *
 * Translation tables live in ICM's own address space (from ICM_XLT_BASE, above every host
 * physical address), which the device maps onto 4 KiB host pages as real ICM is mapped onto
 * the pages firmware was given: a table is contiguous in ICM and scattered in host memory, so
 * a 1 M-entry (8 MiB) table needs no physically contiguous run. The Icm is also the device's
 * view of memory (`DeviceMemory`): PCIe reads and writes at an ICM address reach the host page
 * behind it.
 */
import { FRAME_SIZE, type HostMem } from './host_mem.ts';
import { hex } from '../formats/field.ts';
import { IcmContextTable } from './icm_ctx_table.ts';

/** Bytes of a QP context in ICM: mlx5_ifc.h qpc (0x480 bits, 144 B) rounded up to a power of two (model choice). */
export const QPC_ICM_BYTES = 256;
/** Bytes of a CQ context in ICM: mlx5_ifc.h cqc (0x200 bits). */
export const CQC_ICM_BYTES = 64;
/** Bytes of an EQ context in ICM: mlx5_ifc.h eqc (0x200 bits). */
export const EQC_ICM_BYTES = 64;

/** Bytes of one mkey context in the table (spec/mlx5.md "mkey context (64 bytes)"). */
export const MKEY_CONTEXT_BYTES = 64;
/** Mkey contexts per 4 KiB ICM page. */
const CONTEXTS_PER_FRAME = FRAME_SIZE / MKEY_CONTEXT_BYTES;
/** The mkey index is 24 bits (key bits 31:8). */
export const MKEY_INDEX_LIMIT = 2 ** 24;
/** Alignment of translation tables (one MTT cache line / four KLMs). */
export const XLT_ALIGN = 64;
/** ICM address space taken at a time for translation tables (its pages are backed when a table takes them). */
export const XLT_CHUNK_BYTES = 2 * 1024 * 1024;
/**
 * Where translation tables start in the device's address space: above every host physical
 * address (host memory is at most 16 TiB = 2^44) and far below 2^53, so table addresses are
 * exact numbers and a 64-bit field holds them.
 */
export const ICM_XLT_BASE = 2 ** 48;
/** Bytes of ICM address space for translation tables (64 TiB: more than host memory can back). */
export const ICM_XLT_SPAN = 2 ** 46;

/** What the device reads and writes through PCIe: host physical memory, and ICM above it. */
export interface DeviceMemory {
  read(addr: number, len: number): Uint8Array;
  readInto(addr: number, dst: Uint8Array, dstOff: number, len: number): void;
  /** Writes `bytes`; false (nothing written) where no memory is behind a byte of them. */
  write(addr: number, bytes: Uint8Array): boolean;
  /**
   * True when every byte of [addr, addr + len) is memory the device can reach: host memory, and
   * with `tables` (the translation clients: mkey cache, MTT cache, UMR) ICM table pages a
   * translation table holds.
   */
  covers(addr: number, len: number, tables?: boolean): boolean;
}

/** Host memory could not back a translation table (firmware answers NO_RESOURCES). */
export class IcmNoMemory extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'IcmNoMemory';
  }
}

/**
 * ICM needs `pages` more pages than the firmware holds (pool mode): the command retries once the
 * driver gives them (firmware/fw_pages.ts). Nothing was taken.
 */
export class IcmNeedPages extends Error {
  constructor(
    readonly pages: number,
    readonly what: string,
  ) {
    // a signal between ICM and the firmware (cmdif catches it and asks the driver for pages),
    // thrown at every page request of the MR cache's pre-fill: no stack trace to capture
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`icm: ${pages} more pages needed for ${what} than the firmware holds`);
    Error.stackTraceLimit = limit;
    this.name = 'IcmNeedPages';
  }
}

/** The pages the driver gave the firmware (firmware/fw_pages.ts), pinned by the driver. */
export interface IcmPageSource {
  /** True once pages were given: ICM takes its pages here, else from host memory itself. */
  readonly enabled: boolean;
  /** `n` pages, or null (nothing taken) when fewer are held. */
  take(n: number): number[] | null;
  /** Pages no table uses any more. */
  release(pas: readonly number[]): void;
}

/** Options of the ICM. */
export interface IcmOptions {
  /** mkey indices reachable, 1..2^24 (default 2^16 here; config.icmMkeyEntries, 2^24 by default, in an adapter). */
  mkeyEntries?: number;
}

/** A free run of translation-table memory. */
interface Extent {
  addr: number;
  len: number;
}

/**
 * The ICM of one HCA. The mkey context table is one array in ICM space whose 4 KiB pages are
 * taken from host memory on first touch (a page holds 64 contexts; an untouched context reads
 * as zeros, i.e. a free mkey). Translation tables are placed first fit on an address-ordered
 * free list of ICM address space, with coalescing; each 4 KiB ICM page a table uses is backed
 * by a host frame taken when a table first needs it and given back when no table uses it.
 */
/**
 * The sizes of the allocated translation tables by address: per 2 MiB chunk of table space, one
 * slot per 64-byte unit (a table starts on one), 0 when no table starts there. 4 bytes per
 * 64-byte unit of space in use where a Map took some 45 per table (a million one-page MRs).
 */
class XltBlocks {
  private readonly chunks = new Map<number, Float64Array>();
  /** The chunk last looked up (tables are made and enabled one after another in one chunk). */
  private lastCi = -1;
  private lastChunk: Float64Array | undefined = undefined;

  private slot(addr: number): number {
    const off = addr - ICM_XLT_BASE;
    return Number.isSafeInteger(off) && off >= 0 && off % XLT_ALIGN === 0 ? off / XLT_ALIGN : -1;
  }

  private chunk(ci: number): Float64Array | undefined {
    if (ci !== this.lastCi) {
      this.lastCi = ci;
      this.lastChunk = this.chunks.get(ci);
    }
    return this.lastChunk;
  }

  get(addr: number): number | undefined {
    const k = this.slot(addr);
    if (k < 0) return undefined;
    const c = this.chunk(Math.floor(k / XLT_CHUNK_SLOTS));
    const v = c === undefined ? 0 : c[k % XLT_CHUNK_SLOTS];
    return v === 0 ? undefined : v;
  }

  /** `len` > 0 at `addr` (64-byte aligned, in table space: allocXlt's). */
  set(addr: number, len: number): void {
    const k = this.slot(addr);
    const ci = Math.floor(k / XLT_CHUNK_SLOTS);
    let c = this.chunk(ci);
    if (c === undefined) {
      this.chunks.set(ci, (c = new Float64Array(XLT_CHUNK_SLOTS)));
      this.lastChunk = c;
    }
    c[k % XLT_CHUNK_SLOTS] = len;
  }

  delete(addr: number): void {
    const k = this.slot(addr);
    const c = k < 0 ? undefined : this.chunk(Math.floor(k / XLT_CHUNK_SLOTS));
    if (c !== undefined) c[k % XLT_CHUNK_SLOTS] = 0;
  }

  clear(): void {
    this.chunks.clear();
    this.lastCi = -1;
    this.lastChunk = undefined;
  }
}
const XLT_CHUNK_SLOTS = XLT_CHUNK_BYTES / XLT_ALIGN;

export class Icm implements DeviceMemory {
  /** mkey indices reachable. */
  readonly mkeyEntries: number;
  /**
   * Physical address of each page of the mkey context table, 0 until touched (frame 0 is never
   * allocated); grown as pages are taken, up to the table's (2^24 mkeys are 262,144 pages: 2 MB an
   * adapter, made at once, were most of building one).
   */
  private mkeyPages = new Float64Array(64);
  private readonly mkeyPagesMax: number;
  private mkeyPagesUsed = 0;
  private readonly freeList: Extent[] = []; // ascending addr, never adjacent (coalesced)
  private readonly blocks = new XltBlocks(); // allocated translation tables: addr -> bytes
  private xltInUse = 0;
  /** ICM address space handed to the free list so far (bytes from ICM_XLT_BASE). */
  private xltTop = 0;
  /** The host frame behind each 4 KiB page of translation-table space, 0 when none. */
  private xltPages = new Float64Array(512);
  private xltPagesBacked = 0;
  /** The firmware's given pages (null: ICM takes host frames itself, as a lone module does). */
  pages: IcmPageSource | null = null;
  /** In pool mode, the page an untouched mkey table page reads as (all zeros: free mkeys), 0 before one. */
  private zeroPage = 0;
  /** The QP, CQ and EQ context tables (icm_ctx_table.ts): a page per so many objects, taken as they are made. */
  readonly qpc: IcmContextTable;
  readonly cqc: IcmContextTable;
  readonly eqc: IcmContextTable;

  constructor(
    /** The host memory ICM lives in. */
    readonly mem: HostMem,
    opts: IcmOptions = {},
  ) {
    const n = opts.mkeyEntries ?? 2 ** 16;
    if (!(Number.isInteger(n) && n >= 1 && n <= MKEY_INDEX_LIMIT)) {
      throw new RangeError(`Icm: mkeyEntries must be an integer in 1..2^24, got ${n}`);
    }
    this.mkeyEntries = n;
    this.mkeyPagesMax = Math.ceil(n / CONTEXTS_PER_FRAME);
    const take = (k: number, what: string): number[] => this.takeFrames(k, what);
    const release = (pas: number[]): void => this.releaseFrames(pas);
    this.qpc = new IcmContextTable('QP contexts', QPC_ICM_BYTES, take, release);
    this.cqc = new IcmContextTable('CQ contexts', CQC_ICM_BYTES, take, release);
    this.eqc = new IcmContextTable('EQ contexts', EQC_ICM_BYTES, take, release);
  }

  /** Host pages holding mkey contexts so far. */
  get mkeyTablePages(): number {
    return this.mkeyPagesUsed;
  }

  /** Bytes of translation tables allocated (rounded to 64 B each). */
  get xltBytesInUse(): number {
    return this.xltInUse;
  }

  /** Bytes of host memory backing translation tables (whole 4 KiB pages). */
  get xltBytesReserved(): number {
    return this.xltPagesBacked * FRAME_SIZE;
  }

  /**
   * Physical address of the 64-byte context of mkey `index`, taking its ICM page on first touch.
   * Once the firmware's pages are in use (`pages` enabled), only a write (`take`: CREATE_MKEY)
   * takes a page; a reader of an untouched page gets the zero page, and a shortage throws
   * IcmNeedPages.
   */
  mkeyContextAddr(index: number, take = false): number {
    if (!(Number.isInteger(index) && index >= 0 && index < MKEY_INDEX_LIMIT)) {
      throw new RangeError(`icm.mkeyContextAddr: index must be a 24-bit integer, got ${index}`);
    }
    if (index >= this.mkeyEntries) {
      throw new RangeError(`icm.mkeyContextAddr: index ${hex(index)} is beyond the mkey table (${this.mkeyEntries} entries)`);
    }
    const page = Math.floor(index / CONTEXTS_PER_FRAME);
    let pa = page < this.mkeyPages.length ? this.mkeyPages[page] : 0;
    if (pa === 0) {
      if (this.pages?.enabled === true) {
        if (this.zeroPage === 0) this.zeroPage = this.takeFrames(1, 'the zero page')[0];
        if (!take) return this.zeroPage + (index % CONTEXTS_PER_FRAME) * MKEY_CONTEXT_BYTES;
      }
      pa = this.takeFrames(1, 'the mkey table')[0];
      if (page >= this.mkeyPages.length) {
        let len = this.mkeyPages.length;
        while (len <= page) len *= 2;
        const grown = new Float64Array(Math.min(len, this.mkeyPagesMax));
        grown.set(this.mkeyPages);
        this.mkeyPages = grown;
      }
      this.mkeyPages[page] = pa;
      this.mkeyPagesUsed++;
    }
    return pa + (index % CONTEXTS_PER_FRAME) * MKEY_CONTEXT_BYTES;
  }

  /** Host pages ICM holds now: the mkey table's, the context tables', the translation tables', the zero page. */
  get pagesInUse(): number {
    return this.mkeyPagesUsed + this.xltPagesBacked + (this.zeroPage !== 0 ? 1 : 0) + this.qpc.pagesInUse + this.cqc.pagesInUse + this.eqc.pagesInUse;
  }

  /**
   * TEARDOWN_HCA: the firmware lets all of ICM go (every object was destroyed first, cmdif.ts):
   * the mkey table's pages, the zero page, the context tables' and any translation table's go
   * back to the firmware's pool, from which the driver reclaims them.
   */
  releaseAll(): void {
    const pas: number[] = [];
    for (let p = 0; p < this.mkeyPages.length; p++) {
      if (this.mkeyPages[p] === 0) continue;
      pas.push(this.mkeyPages[p]);
      this.mkeyPages[p] = 0;
    }
    this.mkeyPagesUsed = 0;
    if (this.zeroPage !== 0) pas.push(this.zeroPage);
    this.zeroPage = 0;
    for (let p = 0; p < this.xltPages.length; p++) {
      if (this.xltPages[p] === 0) continue;
      pas.push(this.xltPages[p]);
      this.xltPages[p] = 0;
    }
    this.xltPagesBacked = 0;
    this.blocks.clear();
    this.xltInUse = 0;
    this.freeList.length = 0;
    if (this.xltTop > 0) this.freeList.push({ addr: ICM_XLT_BASE, len: this.xltTop });
    if (pas.length > 0) this.releaseFrames(pas);
    this.qpc.clear();
    this.cqc.clear();
    this.eqc.clear();
  }

  /**
   * `n` zeroed 4 KiB pages for ICM: the firmware's given pages (IcmNeedPages when short), or,
   * before the driver gave any, host frames pinned here (the DMA checker's "ICM page").
   */
  private takeFrames(n: number, what: string): number[] {
    if (this.pages?.enabled === true) {
      const got = this.pages.take(n);
      if (got === null) throw new IcmNeedPages(n, what);
      for (const pa of got) this.mem.fill(pa, FRAME_SIZE, 0);
      return got;
    }
    let frames: number[];
    try {
      frames = this.mem.allocFrames(n);
    } catch (e) {
      throw new IcmNoMemory(`icm: no host pages for ${what} (${n}): ${(e as Error).message}`);
    }
    for (const pa of frames) this.mem.pin(pa);
    return frames;
  }

  /** Pages ICM no longer uses: back to the firmware's pool, or to host memory. */
  private releaseFrames(pas: number[]): void {
    if (this.pages?.enabled === true) {
      this.pages.release(pas);
      return;
    }
    for (const pa of pas) this.mem.unpin(pa);
    this.mem.freeFrames(pas);
  }

  /**
   * Allocates a zeroed translation table of `bytes` (rounded up to 64), contiguous in ICM
   * space, and returns its 64-byte-aligned ICM address (ICM_XLT_BASE and up). Throws
   * IcmNoMemory, changing nothing, when host memory cannot back its pages.
   */
  allocXlt(bytes: number): number {
    if (!(Number.isSafeInteger(bytes) && bytes >= 1)) throw new RangeError(`icm.allocXlt: bytes must be a positive integer, got ${bytes}`);
    const len = Math.ceil(bytes / XLT_ALIGN) * XLT_ALIGN;
    let i = this.freeList.findIndex((e) => e.len >= len);
    if (i < 0) {
      // more ICM space: a chunk past the top (joined to a free tail there, if any)
      const chunk = Math.max(XLT_CHUNK_BYTES, Math.ceil(len / XLT_CHUNK_BYTES) * XLT_CHUNK_BYTES);
      if (this.xltTop + chunk > ICM_XLT_SPAN) throw new IcmNoMemory(`icm.allocXlt: ${len} bytes do not fit the ICM table space`);
      const base = ICM_XLT_BASE + this.xltTop;
      this.xltTop += chunk;
      i = this.insertFree(base, chunk);
    }
    const e = this.freeList[i];
    const addr = e.addr;
    this.backPages(addr, len); // may throw IcmNoMemory: nothing taken yet
    if (e.len === len) this.freeList.splice(i, 1);
    else {
      e.addr += len;
      e.len -= len;
    }
    this.blocks.set(addr, len);
    this.xltInUse += len;
    this.zero(addr, len); // no stale translations from an earlier owner
    return addr;
  }

  /** Frees a translation table allocated by allocXlt; host pages no table uses any more go back. */
  freeXlt(addr: number): void {
    const len = this.blocks.get(addr);
    if (len === undefined) throw new Error(`icm.freeXlt: ${hex(addr)} is not an allocated translation table (double free?)`);
    this.blocks.delete(addr);
    this.xltInUse -= len;
    const e = this.freeList[this.insertFree(addr, len)];
    // pages wholly inside the (coalesced) free extent hold no table: give their frames back
    const lo = Math.ceil((Math.max(e.addr, addr - FRAME_SIZE) - ICM_XLT_BASE) / FRAME_SIZE);
    const hi = Math.floor((Math.min(e.addr + e.len, addr + len + FRAME_SIZE) - ICM_XLT_BASE) / FRAME_SIZE);
    const freed: number[] = [];
    for (let p = lo; p < hi; p++) {
      const pa = this.xltPages[p];
      if (pa === 0) continue;
      freed.push(pa);
      this.xltPages[p] = 0;
    }
    if (freed.length > 0) {
      this.releaseFrames(freed);
      this.xltPagesBacked -= freed.length;
    }
  }

  /** Bytes of the translation table at `addr` (as allocated, rounded to 64), or 0 if none. */
  xltSize(addr: number): number {
    return this.blocks.get(addr) ?? 0;
  }

  // --- the device's view of memory: host physical addresses, and ICM table space ---------------

  /**
   * True for host physical memory, and with `tables` for ICM table pages a table holds: a data
   * DMA (a WQE's buffer, an MTT entry naming any address) never reaches the device's tables.
   */
  covers(addr: number, len: number, tables = true): boolean {
    if (!(Number.isSafeInteger(addr) && Number.isSafeInteger(len) && addr >= 0 && len >= 0)) return false;
    if (addr + len <= this.mem.size) return true;
    return tables && addr >= ICM_XLT_BASE && addr + len <= ICM_XLT_BASE + this.xltTop && this.xltBacked(addr, len);
  }

  /** Every ICM table page of [addr, addr + len) is backed. */
  private xltBacked(addr: number, len: number): boolean {
    const last = Math.floor((addr + Math.max(len, 1) - 1 - ICM_XLT_BASE) / FRAME_SIZE);
    for (let p = Math.floor((addr - ICM_XLT_BASE) / FRAME_SIZE); p <= last; p++) if (this.xltPages[p] === 0) return false;
    return true;
  }

  /** A copy of `len` bytes at device address `addr`. */
  read(addr: number, len: number): Uint8Array {
    if (addr < ICM_XLT_BASE) return this.mem.read(addr, len);
    const out = new Uint8Array(len);
    this.readInto(addr, out, 0, len);
    return out;
  }

  /** Copies `len` bytes at device address `addr` into `dst` from `dstOff`. */
  readInto(addr: number, dst: Uint8Array, dstOff: number, len: number): void {
    if (addr < ICM_XLT_BASE) {
      this.mem.readInto(addr, dst, dstOff, len);
      return;
    }
    this.checkXlt('read', addr, len);
    let done = 0;
    while (done < len) {
      const a = addr + done - ICM_XLT_BASE;
      const off = a % FRAME_SIZE;
      const n = Math.min(len - done, FRAME_SIZE - off);
      const pa = this.xltPages[Math.floor(a / FRAME_SIZE)];
      if (pa === 0) dst.fill(0, dstOff + done, dstOff + done + n); // no table there: zeros
      else this.mem.readInto(pa + off, dst, dstOff + done, n);
      done += n;
    }
  }

  /**
   * Writes `bytes` at device address `addr`. In ICM table space only pages a table holds take a
   * write: false, nothing written, where one does not (a UMR's table write still in flight when
   * its table was freed lands nowhere).
   */
  write(addr: number, bytes: Uint8Array): boolean {
    if (addr < ICM_XLT_BASE) {
      this.mem.write(addr, bytes);
      return true;
    }
    const len = bytes.length;
    this.checkXlt('write', addr, len);
    if (!this.xltBacked(addr, len)) return false;
    let done = 0;
    while (done < len) {
      const a = addr + done - ICM_XLT_BASE;
      const off = a % FRAME_SIZE;
      const n = Math.min(len - done, FRAME_SIZE - off);
      this.mem.writeFrom(this.xltPages[Math.floor(a / FRAME_SIZE)] + off, bytes, done, n);
      done += n;
    }
    return true;
  }

  private checkXlt(op: string, addr: number, len: number): void {
    if (!(Number.isSafeInteger(addr) && Number.isSafeInteger(len) && len >= 0 && addr + len <= ICM_XLT_BASE + this.xltTop)) {
      throw new RangeError(`icm.${op}: ${hex(addr)}+${len} is outside host memory and the ICM table space`);
    }
  }

  /** Zeroes [addr, addr + len) of table space (every page backed). */
  private zero(addr: number, len: number): void {
    let done = 0;
    while (done < len) {
      const a = addr + done - ICM_XLT_BASE;
      const off = a % FRAME_SIZE;
      const n = Math.min(len - done, FRAME_SIZE - off);
      this.mem.fill(this.xltPages[Math.floor(a / FRAME_SIZE)] + off, n, 0);
      done += n;
    }
  }

  /** Backs every page of [addr, addr + len) with a host frame (scattered); all or nothing. */
  private backPages(addr: number, len: number): void {
    const lo = Math.floor((addr - ICM_XLT_BASE) / FRAME_SIZE);
    const hi = Math.ceil((addr + len - ICM_XLT_BASE) / FRAME_SIZE);
    if (hi > this.xltPages.length) {
      let n = this.xltPages.length;
      while (n < hi) n *= 2;
      const grown = new Float64Array(n);
      grown.set(this.xltPages);
      this.xltPages = grown;
    }
    let need = 0;
    for (let p = lo; p < hi; p++) if (this.xltPages[p] === 0) need++;
    if (need === 0) return;
    const frames = this.takeFrames(need, `a ${len}-byte translation table`);
    let k = 0;
    for (let p = lo; p < hi; p++) if (this.xltPages[p] === 0) this.xltPages[p] = frames[k++];
    this.xltPagesBacked += need;
  }

  /** Inserts a free extent in address order, merging with its neighbours; returns its index. */
  private insertFree(addr: number, len: number): number {
    const fl = this.freeList;
    let lo = 0;
    let hi = fl.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (fl[mid].addr < addr) lo = mid + 1;
      else hi = mid;
    }
    let i = lo;
    fl.splice(i, 0, { addr, len });
    if (i + 1 < fl.length && fl[i].addr + fl[i].len === fl[i + 1].addr) {
      fl[i].len += fl[i + 1].len;
      fl.splice(i + 1, 1);
    }
    if (i > 0 && fl[i - 1].addr + fl[i - 1].len === fl[i].addr) {
      fl[i - 1].len += fl[i].len;
      fl.splice(i, 1);
      i--;
    }
    return i;
  }
}
