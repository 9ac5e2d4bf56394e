/**
 * Host physical memory: sparse, byte-addressed, with storage for a 4 KiB frame created on the
 * first write to it (reads of untouched memory return zeros). Plus the physical frame
 * allocator the host's page tables and the device's ICM draw from.
 */
import type { Rng } from '../../sim/rng.ts';
import { hex } from '../formats/field.ts';

/** Bytes per physical frame. */
export const FRAME_SIZE = 4096;
/** log2(FRAME_SIZE). */
export const FRAME_SHIFT = 12;
const FRAME_MASK = FRAME_SIZE - 1;
const TWO_32 = 2 ** 32;
/** Random probes before the allocator falls back to a scan (which only a nearly full memory needs). */
const PROBES = 32;
/**
 * Frames per chunk of the bookkeeping (2^20 frames = 4 GiB): the allocation bitmap and the
 * frames' storage are kept per chunk, made on first use, so a 16 TiB memory costs nothing until
 * it is used and no JavaScript collection grows past its limit (a Set or Map holds at most 2^24
 * entries: 64 GiB of 4 KiB frames).
 */
const CHUNK_SHIFT = 20;
const CHUNK_FRAMES = 2 ** CHUNK_SHIFT;
/** Frames of a 2 MiB block: what a huge page needs free, aligned. */
const BLOCK_FRAMES = 512;
/**
 * Blocks open for single frames at a time. Single 4 KiB frames are taken at random from a few
 * open blocks (a new one opened when one fills), as Linux's buddy allocator splits one large
 * block after another: pages still land on scattered frames, and the rest of memory keeps its
 * whole 2 MiB blocks for huge pages. (Frames drawn from all of memory at random left no free
 * 2 MiB block after about 1 GiB of 4 KiB pages on a 64 GiB host.)
 */
const OPEN_BLOCKS = 16;
const BLOCKS_PER_CHUNK = CHUNK_FRAMES / BLOCK_FRAMES;

/** Options of `HostMem.allocFrames`. */
export interface AllocFramesOptions {
  /** One physically contiguous run of frames (default: scattered frames). */
  contiguous?: boolean;
  /**
   * Alignment in bytes of the physical address of the run (contiguous) or of every frame
   * (scattered): a power of two; at most 4096 means any frame (default 4096).
   */
  align?: number;
}

/** True for 1, 2, 4, ... (exact for any safe integer, unlike bit tricks past 2^31). */
export function isPow2(v: number): boolean {
  if (!Number.isSafeInteger(v) || v < 1) return false;
  while (v % 2 === 0) v /= 2;
  return v === 1;
}

/**
 * Sparse host physical memory of `size` bytes. All multi-byte helpers are big-endian (the
 * byte order of every mlx5 structure). Frame 0 is never handed out, so physical address 0 is
 * never a valid DMA address (it catches unset pointers).
 *
 * The frame allocator is deterministic: frames are picked with the seeded `Rng`, so consecutive
 * virtual pages land on scattered physical frames (as on a real host, and what makes MTTs
 * meaningful) while the same seed gives the same addresses.
 */
/**
 * A watched range of physical memory `[lo, hi)`: what a CPU polling memory sees. A write that
 * touches it calls `fire()` (the owner may move the range, e.g. to the next CQE it needs).
 */
export interface MemWatch {
  lo: number;
  hi: number;
  fire(): void;
}

/** Frames per slab of frame storage (256 KiB arrays). */
const SLAB_FRAMES = 64;

/**
 * Copies of a part of a buffer up to this many bytes are done by a loop (a doorbell record's
 * word, a small payload); longer ones by `set` of a view. A byte loop costs some 3-6 ns a byte
 * here (64 bytes: 150-400 ns), a `subarray` view and `set` about 150 ns whatever the size, and
 * `set` of a whole source (no view) about 40 ns.
 */
const SMALL_COPY = 16;

export class HostMem {
  /** Bytes of physical memory. */
  readonly size: number;
  /** Frames of physical memory. */
  readonly frameCount: number;
  /**
   * Storage of written frames: the bytes of each in a slot of a slab (SLAB_FRAMES frames in one
   * array), found through a slot number per frame (per chunk, per 2 MiB block, an Int32Array of
   * its 512 frames' slot + 1, made on the first write in it; 0: never written). Not an array per
   * frame: reaching a cold frame then took one object (and its cache miss) more, and a Map keyed
   * by frame, before that, a hash-table walk per access.
   */
  private readonly stores: ((Int32Array | undefined)[] | undefined)[] = [];
  private readonly slabs: Uint8Array[] = [];
  /** Slots handed out so far (the next new one), and the slots given back (zeroed), reused first. */
  private nSlots = 0;
  private readonly freeSlots: number[] = [];
  /** Where the frame frameOf or frameForWrite last returned starts in its slab. */
  private fBase = 0;
  /** The frame the last lookup found (accesses are local: a WQE, a CQE, a mailbox): -1 for none. */
  private lastFn = -1;
  private lastSlab: Uint8Array | undefined = undefined;
  private lastBase = 0;
  private nBacked = 0;
  /** Allocated frames: one bit per frame, a Uint32Array per chunk (made on first allocation). */
  private readonly bitmap: (Uint32Array | undefined)[] = [];
  private nUsed = 0;
  private readonly watches: MemWatch[] = [];
  /** Allocated frames per 2 MiB block, a Uint16Array per chunk (made on first allocation, as the bitmap). */
  private readonly blockUsed: (Uint16Array | undefined)[] = [];
  private readonly blockCount: number;
  /** Blocks single frames are taken from (see OPEN_BLOCKS), and each one's place in the list. */
  private readonly open: number[] = [];
  private readonly openAt = new Map<number, number>();
  private readonly openTarget: number;
  /**
   * Device references per frame (pin_user_pages by a registration, a queue buffer, an ODP
   * mapping, an ICM page): a Uint16Array per 2 MiB block, made on the first pin in it; counts
   * past 0xfffe spill into `refsOver`. What the DMA checker asks (`owned`).
   */
  private readonly refs: (Uint16Array | undefined)[][] = [];
  private readonly refsOver = new Map<number, number>();
  private nPinned = 0;
  /** Frames the process let go (munmap, madvise) while pinned: freed by their last unpin. */
  private readonly orphans = new Set<number>();

  constructor(size: number, private readonly rng: Rng) {
    if (!Number.isSafeInteger(size) || size < 2 * FRAME_SIZE || size % FRAME_SIZE !== 0 || size > 2 ** 44) {
      throw new RangeError(`HostMem: size must be a multiple of 4096 in 8 KiB..16 TiB, got ${size}`);
    }
    this.size = size;
    this.frameCount = size / FRAME_SIZE;
    this.blockCount = Math.ceil(this.frameCount / BLOCK_FRAMES);
    this.openTarget = Math.max(1, Math.min(OPEN_BLOCKS, this.blockCount >>> 3));
  }

  /** Frames handed out by allocFrames and not freed. */
  get framesInUse(): number {
    return this.nUsed;
  }

  /** Frames with at least one device reference (pinned, mapped for DMA, ICM). */
  get framesPinned(): number {
    return this.nPinned;
  }

  /** Frames the process freed while pinned: no process can get them until their last unpin. */
  get framesOrphaned(): number {
    return this.orphans.size;
  }

  /** Frames with storage (written at least once since allocation): the simulator's memory use. */
  get framesBacked(): number {
    return this.nBacked;
  }

  // --- bytes -----------------------------------------------------------------------------------

  /** A copy of `len` bytes at physical address `pa`. */
  read(pa: number, len: number): Uint8Array {
    this.check('read', pa, len);
    const out = new Uint8Array(len);
    this.copyOut(pa, out, 0, len);
    return out;
  }

  /** Copies `len` bytes at `pa` into `dst` from `dstOff` (no allocation). */
  readInto(pa: number, dst: Uint8Array, dstOff: number, len: number): void {
    this.check('readInto', pa, len);
    if (!Number.isSafeInteger(dstOff) || dstOff < 0 || dstOff + len > dst.length) {
      throw new RangeError(`host_mem.readInto: dstOff ${dstOff} + len ${len} exceeds dst (${dst.length} bytes)`);
    }
    this.copyOut(pa, dst, dstOff, len);
  }

  /** Writes `bytes` at `pa`. */
  write(pa: number, bytes: Uint8Array): void {
    this.writeFrom(pa, bytes, 0, bytes.length);
  }

  /** Writes `len` bytes of `src` from `srcOff` at `pa` (no view allocated). */
  writeFrom(pa: number, src: Uint8Array, srcOff: number, len: number): void {
    this.check('write', pa, len);
    if (!(Number.isSafeInteger(srcOff) && srcOff >= 0 && srcOff + len <= src.length)) {
      throw new RangeError(`host_mem.writeFrom: bytes ${srcOff}+${len} are not within the source (${src.length} bytes)`);
    }
    let done = 0;
    while (done < len) {
      const a = pa + done;
      const off = a & FRAME_MASK;
      const n = Math.min(len - done, FRAME_SIZE - off);
      const f = this.frameForWrite(Math.floor(a / FRAME_SIZE));
      const at = this.fBase + off;
      const from = srcOff + done;
      // the whole source at once (no view), small pieces by hand, the rest through a view
      if (from === 0 && n === src.length) f.set(src, at);
      else if (n <= SMALL_COPY) for (let i = 0; i < n; i++) f[at + i] = src[from + i];
      else f.set(src.subarray(from, from + n), at);
      done += n;
    }
    if (this.watches.length !== 0) this.fireWatches(pa, pa + len);
  }

  /** Starts watching `w` (see MemWatch). */
  watch(w: MemWatch): void {
    if (!this.watches.includes(w)) this.watches.push(w);
  }

  /** Stops watching `w`. */
  unwatch(w: MemWatch): void {
    const i = this.watches.indexOf(w);
    if (i >= 0) this.watches.splice(i, 1);
  }

  private fireWatches(lo: number, hi: number): void {
    for (let i = 0; i < this.watches.length; i++) {
      const w = this.watches[i];
      if (lo < w.hi && w.lo < hi) w.fire();
    }
  }

  /** Sets `len` bytes at `pa` to `byte`. Zeros over untouched frames cost nothing. */
  fill(pa: number, len: number, byte: number): void {
    this.check('fill', pa, len);
    if (!Number.isInteger(byte) || byte < 0 || byte > 255) throw new RangeError(`host_mem.fill: byte must be 0..255, got ${byte}`);
    let done = 0;
    while (done < len) {
      const a = pa + done;
      const off = a & FRAME_MASK;
      const n = Math.min(len - done, FRAME_SIZE - off);
      const fn = Math.floor(a / FRAME_SIZE);
      const f = byte === 0 ? this.frameOf(fn) : this.frameForWrite(fn);
      if (f !== undefined) f.fill(byte, this.fBase + off, this.fBase + off + n);
      done += n;
    }
  }

  /** The big-endian u32 at `pa`. */
  readU32BE(pa: number): number {
    this.check('readU32BE', pa, 4);
    const off = pa & FRAME_MASK;
    if (off <= FRAME_SIZE - 4) {
      const f = this.frameOf(Math.floor(pa / FRAME_SIZE));
      if (f === undefined) return 0;
      const at = this.fBase + off;
      return ((f[at] << 24) | (f[at + 1] << 16) | (f[at + 2] << 8) | f[at + 3]) >>> 0;
    }
    let v = 0;
    for (let i = 0; i < 4; i++) v = v * 256 + this.byteAt(pa + i);
    return v;
  }

  /** Writes `v` (a u32) big-endian at `pa`. */
  writeU32BE(pa: number, v: number): void {
    if (!Number.isInteger(v) || v < 0 || v >= TWO_32) throw new RangeError(`host_mem.writeU32BE: value ${v} does not fit 32 bits`);
    this.check('writeU32BE', pa, 4);
    for (let i = 3; i >= 0; i--) {
      const a = pa + i;
      const f = this.frameForWrite(Math.floor(a / FRAME_SIZE));
      f[this.fBase + (a & FRAME_MASK)] = v & 0xff;
      v >>>= 8;
    }
  }

  /** The big-endian u64 at `pa`; throws a RangeError if it is 2^53 or more (numbers, not bigint). */
  readU64BE(pa: number): number {
    this.check('readU64BE', pa, 8);
    const hi = this.readU32BE(pa);
    if (hi >= 2 ** 21) throw new RangeError(`host_mem.readU64BE: the u64 at ${hex(pa)} is 2^53 or more (hi word ${hex(hi)})`);
    return hi * TWO_32 + this.readU32BE(pa + 4);
  }

  /** Writes `v` (an integer below 2^53) big-endian at `pa` as a u64. */
  writeU64BE(pa: number, v: number): void {
    if (!Number.isSafeInteger(v) || v < 0) throw new RangeError(`host_mem.writeU64BE: value ${v} is not an integer in 0..2^53-1`);
    this.check('writeU64BE', pa, 8);
    this.writeU32BE(pa, Math.floor(v / TWO_32));
    this.writeU32BE(pa + 4, v % TWO_32);
  }

  // --- frames ----------------------------------------------------------------------------------

  /**
   * Allocates `n` free frames and returns their physical addresses (in allocation order;
   * ascending and consecutive when `contiguous`). The frames read as zeros. Throws when there
   * is not enough free memory (ENOMEM).
   */
  allocFrames(n: number, opts?: AllocFramesOptions): number[] {
    if (n === 1 && opts === undefined) {
      // one page, any frame (a page's first touch): the general path's steps without its checks of options
      if (this.frameCount - 1 - this.nUsed < 1) throw new Error(`host_mem.allocFrames: ENOMEM: 1 frames asked, 0 free of ${this.frameCount}`);
      const f = this.pickFrame();
      if (f < 0) throw new Error(`host_mem.allocFrames: ENOMEM: no free frame aligned to ${hex(FRAME_SIZE)}`);
      return [this.take(f)];
    }
    opts ??= {};
    if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`host_mem.allocFrames: n must be a positive integer, got ${n}`);
    const align = opts.align ?? FRAME_SIZE;
    if (!isPow2(align) || align > this.size) {
      throw new RangeError(`host_mem.allocFrames: align must be a power of two up to the memory size, got ${align}`);
    }
    const step = Math.max(1, align / FRAME_SIZE);
    const free = this.frameCount - 1 - this.nUsed;
    if (n > free) {
      throw new Error(`host_mem.allocFrames: ENOMEM: ${n} frames asked, ${free} free of ${this.frameCount}`);
    }
    const out: number[] = [];
    if (opts.contiguous === true || (n === 1 && step > 1)) {
      const start = this.findRun(n, step);
      if (start < 0) throw new Error(`host_mem.allocFrames: ENOMEM: no ${n} contiguous free frames aligned to ${hex(align)}`);
      for (let i = 0; i < n; i++) out.push(this.take(start + i));
    } else {
      for (let i = 0; i < n; i++) {
        const f = step === 1 ? this.pickFrame() : this.findRun(1, step);
        if (f < 0) {
          for (const pa of out) this.release(pa / FRAME_SIZE);
          throw new Error(`host_mem.allocFrames: ENOMEM: no free frame aligned to ${hex(align)}`);
        }
        out.push(this.take(f));
      }
    }
    return out;
  }

  /**
   * Returns frames (their physical addresses, as allocFrames gave them) to the free pool and
   * drops their contents. A frame still pinned (`pin`) is not freed: as the kernel's page
   * reference held by pin_user_pages, it stays allocated, out of every allocation's reach, until
   * its last `unpin`; what a device writes there meanwhile no process sees.
   */
  freeFrames(addrs: readonly number[]): void {
    for (const pa of addrs) {
      if (!Number.isSafeInteger(pa) || pa % FRAME_SIZE !== 0 || pa < 0 || pa >= this.size) {
        throw new RangeError(`host_mem.freeFrames: ${pa} is not a frame address`);
      }
      const fn = pa / FRAME_SIZE;
      if (!this.isUsed(fn) || this.orphans.has(fn)) throw new Error(`host_mem.freeFrames: frame ${hex(pa)} is not allocated (double free?)`);
    }
    for (const pa of addrs) {
      const fn = pa / FRAME_SIZE;
      if (this.refOf(fn) > 0) this.orphans.add(fn);
      else this.release(fn);
    }
  }

  /**
   * Takes a device reference on the frame holding `pa` (allocated): pin_user_pages for a
   * registration, a queue buffer or ICM page given to the device, an ODP page mapped for DMA.
   */
  pin(pa: number): void {
    const fn = Math.floor(pa / FRAME_SIZE);
    if (!(Number.isSafeInteger(pa) && pa >= 0 && pa < this.size) || !this.isUsed(fn)) {
      throw new Error(`host_mem.pin: frame ${hex(pa)} is not allocated`);
    }
    const a = this.refBlock(fn, true)!;
    const i = fn & (BLOCK_FRAMES - 1);
    const v = a[i];
    if (v === 0) this.nPinned++;
    if (v < 0xffff) a[i] = v + 1;
    else this.refsOver.set(fn, (this.refsOver.get(fn) ?? 0) + 1);
  }

  /** Drops a reference `pin` took; the last one frees a frame the process already let go. */
  unpin(pa: number): void {
    const fn = Math.floor(pa / FRAME_SIZE);
    const a = this.refBlock(fn, false);
    const i = fn & (BLOCK_FRAMES - 1);
    if (a === undefined || a[i] === 0) throw new Error(`host_mem.unpin: frame ${hex(pa)} is not pinned`);
    const over = this.refsOver.get(fn);
    if (over !== undefined) {
      if (over > 1) this.refsOver.set(fn, over - 1);
      else this.refsOver.delete(fn);
      return;
    }
    a[i]--;
    if (a[i] !== 0) return;
    this.nPinned--;
    if (this.orphans.delete(fn)) this.release(fn);
  }

  /** Device references on the frame holding `pa` (0 outside memory). */
  pins(pa: number): number {
    if (!(Number.isSafeInteger(pa) && pa >= 0 && pa < this.size)) return 0;
    return this.refOf(Math.floor(pa / FRAME_SIZE));
  }

  /**
   * The first frame of [pa, pa + len) with no device reference, or -1 when every one has one:
   * the DMA checker's question (allocation-free; a DMA spans one or two frames).
   */
  firstUnowned(pa: number, len: number): number {
    const last = Math.floor((pa + len - 1) / FRAME_SIZE);
    for (let fn = Math.floor(pa / FRAME_SIZE); fn <= last; fn++) {
      const a = this.refBlock(fn, false);
      if (a === undefined || a[fn & (BLOCK_FRAMES - 1)] === 0) return fn * FRAME_SIZE;
    }
    return -1;
  }

  /** True when the frame holding `pa` was freed by its process while pinned (see freeFrames). */
  isOrphan(pa: number): boolean {
    return this.orphans.has(Math.floor(pa / FRAME_SIZE));
  }

  private refOf(fn: number): number {
    const a = this.refBlock(fn, false);
    if (a === undefined) return 0;
    const v = a[fn & (BLOCK_FRAMES - 1)];
    return v === 0xffff ? v + (this.refsOver.get(fn) ?? 0) : v;
  }

  private refBlock(fn: number, make: boolean): Uint16Array | undefined {
    const c = Math.floor(fn / CHUNK_FRAMES);
    let blocks = this.refs[c];
    if (blocks === undefined) {
      if (!make) return undefined;
      this.refs[c] = blocks = new Array<Uint16Array | undefined>(BLOCKS_PER_CHUNK);
    }
    const k = (fn % CHUNK_FRAMES) >>> 9;
    let a = blocks[k];
    if (a === undefined && make) blocks[k] = a = new Uint16Array(BLOCK_FRAMES);
    return a;
  }

  /** True when [pa, pa + len) lies in physical memory (what a DMA may reach). */
  covers(pa: number, len: number): boolean {
    return Number.isSafeInteger(pa) && Number.isSafeInteger(len) && pa >= 0 && len >= 0 && pa + len <= this.size;
  }

  /** True when the frame holding `pa` is allocated. */
  isAllocated(pa: number): boolean {
    return Number.isSafeInteger(pa) && pa >= 0 && pa < this.size && this.isUsed(Math.floor(pa / FRAME_SIZE));
  }

  // --- internals -------------------------------------------------------------------------------

  private check(op: string, pa: number, len: number): void {
    if (!Number.isSafeInteger(pa) || pa < 0) throw new RangeError(`host_mem.${op}: pa must be a non-negative integer, got ${pa}`);
    if (!Number.isSafeInteger(len) || len < 0) throw new RangeError(`host_mem.${op}: len must be a non-negative integer, got ${len}`);
    if (pa + len > this.size) {
      throw new RangeError(`host_mem.${op}: ${hex(pa)}+${len} is outside physical memory (${hex(this.size)} bytes)`);
    }
  }

  private copyOut(pa: number, dst: Uint8Array, dstOff: number, len: number): void {
    let done = 0;
    while (done < len) {
      const a = pa + done;
      const off = a & FRAME_MASK;
      const n = Math.min(len - done, FRAME_SIZE - off);
      const f = this.frameOf(Math.floor(a / FRAME_SIZE));
      const at = this.fBase + off;
      if (f === undefined) dst.fill(0, dstOff + done, dstOff + done + n);
      else if (n <= SMALL_COPY) for (let i = 0, d = dstOff + done; i < n; i++) dst[d + i] = f[at + i];
      else dst.set(f.subarray(at, at + n), dstOff + done);
      done += n;
    }
  }

  private byteAt(a: number): number {
    const f = this.frameOf(Math.floor(a / FRAME_SIZE));
    return f === undefined ? 0 : f[this.fBase + (a & FRAME_MASK)];
  }

  /**
   * The slab holding frame `fn`'s bytes (from `fBase`), or undefined when it was never written
   * (reads as zeros). Read `fBase` before the next lookup.
   */
  private frameOf(fn: number): Uint8Array | undefined {
    if (fn === this.lastFn) {
      this.fBase = this.lastBase;
      return this.lastSlab;
    }
    const b = this.stores[Math.floor(fn / CHUNK_FRAMES)]?.[(fn % CHUNK_FRAMES) >>> 9];
    if (b === undefined) return undefined;
    const slot = b[fn & (BLOCK_FRAMES - 1)] - 1;
    if (slot < 0) return undefined;
    return this.found(fn, slot);
  }

  /** As frameOf, giving a frame never written its (zeroed) storage. */
  private frameForWrite(fn: number): Uint8Array {
    if (fn === this.lastFn) {
      this.fBase = this.lastBase;
      return this.lastSlab!;
    }
    const c = Math.floor(fn / CHUNK_FRAMES);
    let blocks = this.stores[c];
    if (blocks === undefined) this.stores[c] = blocks = new Array<Int32Array | undefined>(BLOCKS_PER_CHUNK);
    const k = (fn % CHUNK_FRAMES) >>> 9;
    let b = blocks[k];
    if (b === undefined) blocks[k] = b = new Int32Array(BLOCK_FRAMES);
    const i = fn & (BLOCK_FRAMES - 1);
    let slot = b[i] - 1;
    if (slot < 0) {
      slot = this.freeSlots.pop() ?? this.nSlots++;
      if (slot === this.slabs.length * SLAB_FRAMES) this.slabs.push(new Uint8Array(SLAB_FRAMES * FRAME_SIZE));
      b[i] = slot + 1;
      this.nBacked++;
    }
    return this.found(fn, slot);
  }

  /** Remembers frame `fn` in `slot` as the last found; its slab, its start in `fBase`. */
  private found(fn: number, slot: number): Uint8Array {
    const slab = this.slabs[Math.floor(slot / SLAB_FRAMES)];
    const base = (slot % SLAB_FRAMES) * FRAME_SIZE;
    this.lastFn = fn;
    this.lastSlab = slab;
    this.lastBase = base;
    this.fBase = base;
    return slab;
  }

  /** Drops frame `fn`'s storage (it reads as zeros again); its slot, zeroed, goes back for reuse. */
  private dropStore(fn: number): void {
    if (fn === this.lastFn) {
      this.lastFn = -1;
      this.lastSlab = undefined;
    }
    const b = this.stores[Math.floor(fn / CHUNK_FRAMES)]?.[(fn % CHUNK_FRAMES) >>> 9];
    if (b === undefined) return;
    const i = fn & (BLOCK_FRAMES - 1);
    const slot = b[i] - 1;
    if (slot < 0) return;
    b[i] = 0;
    this.nBacked--;
    const base = (slot % SLAB_FRAMES) * FRAME_SIZE;
    this.slabs[Math.floor(slot / SLAB_FRAMES)].fill(0, base, base + FRAME_SIZE);
    this.freeSlots.push(slot);
  }

  private isUsed(fn: number): boolean {
    const b = this.bitmap[Math.floor(fn / CHUNK_FRAMES)];
    return b !== undefined && (b[(fn % CHUNK_FRAMES) >>> 5] & (1 << (fn & 31))) !== 0;
  }

  private take(fn: number): number {
    const c = Math.floor(fn / CHUNK_FRAMES);
    let b = this.bitmap[c];
    if (b === undefined) this.bitmap[c] = b = new Uint32Array(CHUNK_FRAMES / 32);
    b[(fn % CHUNK_FRAMES) >>> 5] |= 1 << (fn & 31);
    this.nUsed++;
    this.addBlockUsed(Math.floor(fn / BLOCK_FRAMES), 1);
    this.dropStore(fn); // a fresh frame reads as zeros, whatever a stray DMA left there
    return fn * FRAME_SIZE;
  }

  private release(fn: number): void {
    const b = this.bitmap[Math.floor(fn / CHUNK_FRAMES)];
    if (b === undefined) return;
    const w = (fn % CHUNK_FRAMES) >>> 5;
    const bit = 1 << (fn & 31);
    if ((b[w] & bit) === 0) return;
    b[w] &= ~bit;
    this.nUsed--;
    this.dropStore(fn);
    const k = Math.floor(fn / BLOCK_FRAMES);
    const used = this.addBlockUsed(k, -1);
    // a hole in a block of single frames is used again; a block left empty is whole again
    if (used === 0) this.closeBlock(k);
    else if (!this.openAt.has(k)) this.openBlock(k);
  }

  /** A free frame for a single 4 KiB page: at random in one of the open blocks (see OPEN_BLOCKS). */
  private pickFrame(): number {
    if (this.open.length < this.openTarget) this.openFreeBlock();
    while (this.open.length > 0) {
      const k = this.open[this.rng.int(0, this.open.length - 1)];
      const f = this.freeFrameIn(k);
      if (f >= 0) return f;
      this.closeBlock(k); // full
      if (this.open.length < this.openTarget) this.openFreeBlock();
    }
    return this.findRun(1, 1); // no block with room left to open: anywhere
  }

  /** A free frame of block `k`, or -1: random probes, then a scan from a random one. */
  private freeFrameIn(k: number): number {
    const lo = Math.max(1, k * BLOCK_FRAMES);
    const hi = Math.min(this.frameCount, (k + 1) * BLOCK_FRAMES);
    const span = hi - lo;
    if (span <= 0) return -1;
    for (let p = 0; p < 8; p++) {
      const f = lo + this.rng.int(0, span - 1);
      if (!this.isUsed(f)) return f;
    }
    const first = this.rng.int(0, span - 1);
    for (let i = 0; i < span; i++) {
      const f = lo + ((first + i) % span);
      if (!this.isUsed(f)) return f;
    }
    return -1;
  }

  /** Opens a wholly free block for single frames, chosen at random (none when no block is wholly free). */
  private openFreeBlock(): void {
    const n = this.blockCount;
    const free = (k: number): boolean => k < n && this.usedIn(k) === 0 && !this.openAt.has(k);
    // block 0 holds frame 0 (never handed out): it is opened only by a release
    for (let p = 0; p < PROBES; p++) {
      const k = this.rng.int(1, Math.max(1, n - 1));
      if (free(k)) return this.openBlock(k);
    }
    const first = this.rng.int(1, Math.max(1, n - 1));
    for (let i = 0; i < n - 1; i++) {
      const k = 1 + ((first - 1 + i) % (n - 1));
      if (free(k)) return this.openBlock(k);
    }
  }

  /** Allocated frames of block `k`. */
  private usedIn(k: number): number {
    return this.blockUsed[Math.floor(k / BLOCKS_PER_CHUNK)]?.[k % BLOCKS_PER_CHUNK] ?? 0;
  }

  /** Adds `d` to block `k`'s count; returns the new count. */
  private addBlockUsed(k: number, d: number): number {
    const c = Math.floor(k / BLOCKS_PER_CHUNK);
    let a = this.blockUsed[c];
    if (a === undefined) this.blockUsed[c] = a = new Uint16Array(BLOCKS_PER_CHUNK);
    return (a[k % BLOCKS_PER_CHUNK] += d);
  }

  private openBlock(k: number): void {
    this.openAt.set(k, this.open.length);
    this.open.push(k);
  }

  private closeBlock(k: number): void {
    const at = this.openAt.get(k);
    if (at === undefined) return;
    const last = this.open.pop()!;
    if (last !== k) {
      this.open[at] = last;
      this.openAt.set(last, at);
    }
    this.openAt.delete(k);
  }

  private runFree(start: number, n: number): boolean {
    if (start < 1 || start + n > this.frameCount) return false;
    for (let i = 0; i < n; i++) if (this.isUsed(start + i)) return false;
    return true;
  }

  /** The first frame of a free run of `n` frames starting at a multiple of `step`, or -1. */
  private findRun(n: number, step: number): number {
    const slots = Math.floor((this.frameCount - n) / step) + 1; // aligned starts that fit
    if (slots < 1) return -1;
    for (let p = 0; p < PROBES; p++) {
      const s = this.rng.int(0, slots - 1) * step;
      if (this.runFree(s, n)) return s;
    }
    // nearly full (or fragmented): scan every aligned start once, from a random one
    const first = this.rng.int(0, slots - 1);
    for (let k = 0; k < slots; k++) {
      const s = ((first + k) % slots) * step;
      if (this.runFree(s, n)) return s;
    }
    return -1;
  }
}
