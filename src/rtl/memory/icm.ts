/**
 * ICM (interconnect context memory): the device's context memory, which lives in host memory
 * (the driver gives the firmware pages with MANAGE_PAGES). Here: the mkey context table (64 B
 * per mkey index) and the translation tables (MTT / KLM lists) of mkeys. Pure bookkeeping over
 * HostMem: the hardware reads contexts and translations through Pcie.
 */
import { FRAME_SIZE, type HostMem } from './host_mem.ts';
import { hex } from '../formats/field.ts';

/** Bytes of one mkey context in the table (spec/mlx5.md "mkey context (64 bytes)"). */
export const MKEY_CONTEXT_BYTES = 64;
/** Mkey contexts per 4 KiB ICM page. */
const CONTEXTS_PER_FRAME = FRAME_SIZE / MKEY_CONTEXT_BYTES;
/** The mkey index is 24 bits (key bits 31:8). */
export const MKEY_INDEX_LIMIT = 2 ** 24;
/** Alignment of translation tables (one MTT cache line / four KLMs). */
export const XLT_ALIGN = 64;
/** Host memory taken at a time for translation tables (one huge-page-sized contiguous run). */
export const XLT_CHUNK_BYTES = 2 * 1024 * 1024;

/** Options of the ICM. */
export interface IcmOptions {
  /** mkey indices reachable, 1..2^24 (default 2^16; config.icmMkeyEntries). */
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
 * as zeros, i.e. a free mkey). Translation tables come from contiguous host memory, first fit
 * on an address-ordered free list with coalescing.
 */
export class Icm {
  /** mkey indices reachable. */
  readonly mkeyEntries: number;
  /** Physical address of each page of the mkey context table, 0 until touched (frame 0 is never allocated). */
  private readonly mkeyPages: Float64Array;
  private mkeyPagesUsed = 0;
  private readonly freeList: Extent[] = []; // ascending addr, never adjacent (coalesced)
  private readonly blocks = new Map<number, number>(); // allocated translation tables: addr -> bytes
  private xltInUse = 0;
  private xltReserved = 0;

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
    this.mkeyPages = new Float64Array(Math.ceil(n / CONTEXTS_PER_FRAME));
  }

  /** Host pages holding mkey contexts so far. */
  get mkeyTablePages(): number {
    return this.mkeyPagesUsed;
  }

  /** Bytes of translation tables allocated (rounded to 64 B each). */
  get xltBytesInUse(): number {
    return this.xltInUse;
  }

  /** Bytes of host memory reserved for translation tables. */
  get xltBytesReserved(): number {
    return this.xltReserved;
  }

  /** Physical address of the 64-byte context of mkey `index` (taking its ICM page on first touch). */
  mkeyContextAddr(index: number): number {
    if (!(Number.isInteger(index) && index >= 0 && index < MKEY_INDEX_LIMIT)) {
      throw new RangeError(`icm.mkeyContextAddr: index must be a 24-bit integer, got ${index}`);
    }
    if (index >= this.mkeyEntries) {
      throw new RangeError(`icm.mkeyContextAddr: index ${hex(index)} is beyond the mkey table (${this.mkeyEntries} entries)`);
    }
    const page = Math.floor(index / CONTEXTS_PER_FRAME);
    let pa = this.mkeyPages[page];
    if (pa === 0) {
      pa = this.mem.allocFrames(1)[0];
      this.mkeyPages[page] = pa;
      this.mkeyPagesUsed++;
    }
    return pa + (index % CONTEXTS_PER_FRAME) * MKEY_CONTEXT_BYTES;
  }

  /**
   * Allocates a zeroed, physically contiguous translation table of `bytes` (rounded up to 64)
   * and returns its 64-byte-aligned physical address.
   */
  allocXlt(bytes: number): number {
    if (!(Number.isSafeInteger(bytes) && bytes >= 1)) throw new RangeError(`icm.allocXlt: bytes must be a positive integer, got ${bytes}`);
    const len = Math.ceil(bytes / XLT_ALIGN) * XLT_ALIGN;
    let i = this.freeList.findIndex((e) => e.len >= len);
    if (i < 0) {
      const chunk = Math.max(XLT_CHUNK_BYTES, Math.ceil(len / FRAME_SIZE) * FRAME_SIZE);
      const base = this.mem.allocFrames(chunk / FRAME_SIZE, { contiguous: true })[0];
      this.xltReserved += chunk;
      i = this.insertFree(base, chunk);
    }
    const e = this.freeList[i];
    const addr = e.addr;
    if (e.len === len) this.freeList.splice(i, 1);
    else {
      e.addr += len;
      e.len -= len;
    }
    this.blocks.set(addr, len);
    this.xltInUse += len;
    this.mem.fill(addr, len, 0); // no stale translations from an earlier owner
    return addr;
  }

  /** Frees a translation table allocated by allocXlt. */
  freeXlt(addr: number): void {
    const len = this.blocks.get(addr);
    if (len === undefined) throw new Error(`icm.freeXlt: ${hex(addr)} is not an allocated translation table (double free?)`);
    this.blocks.delete(addr);
    this.xltInUse -= len;
    this.insertFree(addr, len);
  }

  /** Bytes of the translation table at `addr` (as allocated, rounded to 64), or 0 if none. */
  xltSize(addr: number): number {
    return this.blocks.get(addr) ?? 0;
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
