/**
 * The host memory of one HCA as the verbs model sees it: a process address space of virtual
 * addresses, made of mapped ranges, holding bytes. Physical pages are the cycle model's business;
 * the model moves bytes by virtual address.
 */

/** Granule of the sparse byte store (not a page size of any mapping). */
const CHUNK = 4096;

/** A mapped range `[start, end)`. */
interface Range {
  start: number;
  end: number;
}

/** A sparse byte store over mapped virtual ranges; unwritten bytes read as zero. */
export class HostMemory {
  private readonly chunks = new Map<number, Uint8Array>();
  /** Mapped ranges, sorted by start, disjoint and not touching (merged). */
  private readonly ranges: Range[] = [];
  /** Next address the bump allocator hands out. */
  private next: number;

  /** A memory whose allocator starts at `base`. */
  constructor(base = 0x10_0000) {
    this.next = base;
  }

  /**
   * Maps `length` bytes (zeroed) at the next address aligned to `align`, and returns it. A one-page
   * unmapped guard follows every allocation, so overruns hit unmapped memory.
   */
  alloc(length: number, align = 4096): number {
    const addr = Math.ceil(this.next / align) * align;
    this.map(addr, length);
    this.next = addr + length + 4096;
    return addr;
  }

  /** Maps `[addr, addr + length)` (already mapped parts stay as they are). */
  map(addr: number, length: number): void {
    if (length <= 0) return;
    let start = addr;
    let end = addr + length;
    const kept: Range[] = [];
    for (const r of this.ranges) {
      if (r.end < start || r.start > end) {
        kept.push(r);
      } else {
        start = Math.min(start, r.start);
        end = Math.max(end, r.end);
      }
    }
    kept.push({ start, end });
    kept.sort((a, b) => a.start - b.start);
    this.ranges.splice(0, this.ranges.length, ...kept);
    if (end > this.next) this.next = end + 4096;
  }

  /** Unmaps `[addr, addr + length)` (munmap): its bytes are gone; mapped parts around it stay. */
  unmap(addr: number, length: number): void {
    if (length <= 0) return;
    const end = addr + length;
    const kept: Range[] = [];
    for (const r of this.ranges) {
      if (r.end <= addr || r.start >= end) kept.push(r);
      else {
        if (r.start < addr) kept.push({ start: r.start, end: addr });
        if (r.end > end) kept.push({ start: end, end: r.end });
      }
    }
    this.ranges.splice(0, this.ranges.length, ...kept);
    this.zero(addr, length);
  }

  /** Zeroes `[addr, addr + length)` (the new pages after madvise DONTNEED). */
  zero(addr: number, length: number): void {
    this.pieces(addr, length, (chunkNo, off, n) => this.chunks.get(chunkNo)?.fill(0, off, off + n));
  }

  /** Calls `fn` for each piece of `[addr, addr + length)` within one chunk, in order. */
  private pieces(addr: number, length: number, fn: (chunkNo: number, off: number, n: number, done: number) => void): void {
    let done = 0;
    while (done < length) {
      const a = addr + done;
      const chunkNo = Math.floor(a / CHUNK);
      const off = a - chunkNo * CHUNK;
      const n = Math.min(length - done, CHUNK - off);
      fn(chunkNo, off, n, done);
      done += n;
    }
  }

  /** Whether every byte of `[addr, addr + length)` is mapped (true for length 0). */
  isMapped(addr: number, length: number): boolean {
    if (length === 0) return true;
    return this.ranges.some((r) => addr >= r.start && addr + length <= r.end);
  }

  /** The bytes `[addr, addr + length)`; the caller has checked the range is mapped. */
  read(addr: number, length: number): Uint8Array {
    const out = new Uint8Array(length);
    this.pieces(addr, length, (chunkNo, off, n, done) => {
      const chunk = this.chunks.get(chunkNo);
      if (chunk !== undefined) out.set(chunk.subarray(off, off + n), done);
    });
    return out;
  }

  /** Writes `bytes` at `addr`; the caller has checked the range is mapped. */
  write(addr: number, bytes: Uint8Array): void {
    this.pieces(addr, bytes.length, (chunkNo, off, n, done) => {
      let chunk = this.chunks.get(chunkNo);
      if (chunk === undefined) {
        chunk = new Uint8Array(CHUNK);
        this.chunks.set(chunkNo, chunk);
      }
      chunk.set(bytes.subarray(done, done + n), off);
    });
  }
}
