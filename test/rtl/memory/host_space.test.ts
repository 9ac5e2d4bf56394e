import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FRAME_SIZE, HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { HOST_VA_BASE, HUGE_PAGE_SIZE, HostError, HostSpace, PAGE_SIZE } from '../../../src/rtl/memory/host_space.ts';
import { Rng } from '../../../src/sim/rng.ts';

const MiB = 2 ** 20;
import { hex } from '../../../src/rtl/formats/field.ts';

function space(size = 64 * MiB, seed = 1): HostSpace {
  return new HostSpace(new HostMem(size, new Rng(seed)));
}

function caught(f: () => unknown): HostError {
  try {
    f();
  } catch (e) {
    if (e instanceof HostError) return e;
    throw e;
  }
  throw new Error('expected a HostError');
}

describe('host_space', () => {
  it('allocates aligned, zeroed, guarded buffers from 0x700000000000 up', () => {
    const h = space();
    const a = h.alloc(100);
    expect(a).toEqual({ addr: HOST_VA_BASE, length: 100 });
    expect(h.read(a.addr, PAGE_SIZE)).toEqual(new Uint8Array(PAGE_SIZE)); // the whole page is mapped and zero
    const b = h.alloc(3 * PAGE_SIZE, { align: 65536 });
    expect(b.addr % 65536).toBe(0);
    expect(b.addr).toBeGreaterThan(a.addr + PAGE_SIZE); // a guard gap after `a`
    expect(h.isMapped(a.addr + PAGE_SIZE, 1)).toBe(false);
    const c = h.alloc(10, { align: 64 });
    expect(c.addr % PAGE_SIZE).toBe(0); // buffers start on a page
    expect(() => h.alloc(0)).toThrow(/length must be a positive integer/);
    expect(() => h.alloc(10, { align: 3 })).toThrow(/align must be a power of two/);
  });

  it('writes, reads and fills across scattered pages, byte-exact', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ off: fc.integer({ min: 0, max: 5 * PAGE_SIZE }), len: fc.integer({ min: 0, max: 3 * PAGE_SIZE }), byte: fc.integer({ min: 0, max: 255 }), fill: fc.boolean() }),
          { maxLength: 20 },
        ),
        (ops) => {
          const h = space(8 * MiB);
          const SIZE = 8 * PAGE_SIZE;
          const buf = h.alloc(SIZE);
          const ref = new Uint8Array(SIZE);
          let seq = 0;
          for (const o of ops) {
            if (o.fill) {
              h.fill(buf.addr + o.off, o.len, o.byte);
              ref.fill(o.byte, o.off, o.off + o.len);
            } else {
              const bytes = Uint8Array.from({ length: o.len }, () => (seq++ * 31 + o.byte) & 0xff);
              h.write(buf.addr + o.off, bytes);
              ref.set(bytes, o.off);
            }
          }
          expect(Buffer.from(h.read(buf.addr, SIZE)).equals(Buffer.from(ref))).toBe(true);
          // the same bytes through the physical pages
          for (let p = 0; p < SIZE; p += PAGE_SIZE) {
            const pa = h.dmaAddress(buf.addr + p);
            expect(Buffer.from(h.mem.read(pa, PAGE_SIZE)).equals(Buffer.from(ref.subarray(p, p + PAGE_SIZE)))).toBe(true);
          }
        },
      ),
      { numRuns: 50 },
    );
  });

  it('maps every virtual page to its own scattered physical frame, keeping the page offset', () => {
    const h = space(1024 * MiB, 9);
    const buf = h.alloc(32 * PAGE_SIZE);
    const pas = Array.from({ length: 32 }, (_, i) => h.dmaAddress(buf.addr + i * PAGE_SIZE));
    expect(new Set(pas).size).toBe(32);
    for (const pa of pas) expect(pa % PAGE_SIZE).toBe(0);
    let consecutive = 0;
    for (let i = 1; i < 32; i++) if (pas[i] === pas[i - 1] + PAGE_SIZE) consecutive++;
    expect(consecutive).toBeLessThan(3);
    expect(h.dmaAddress(buf.addr + 5 * PAGE_SIZE + 123)).toBe(pas[5] + 123);
    expect(h.pageSizeAt(buf.addr)).toBe(PAGE_SIZE);
    // deterministic: the same seed and the same order of first touches give the same physical pages
    const h2 = space(1024 * MiB, 9);
    const b2 = h2.alloc(32 * PAGE_SIZE);
    expect(Array.from({ length: 32 }, (_, i) => h2.dmaAddress(b2.addr + i * PAGE_SIZE))).toEqual(pas);
  });

  it('faults on never-allocated addresses with EFAULT naming the address', () => {
    const h = space();
    const a = h.alloc(PAGE_SIZE);
    const e = caught(() => h.read(a.addr + PAGE_SIZE - 8, 16));
    expect(e.errno).toBe('EFAULT');
    expect(e.message).toBe(`host.read: ${hex(a.addr + PAGE_SIZE - 8)}+16 is not mapped (${hex(a.addr + PAGE_SIZE)} was never allocated)`);
    expect(() => h.dmaAddress(0x1000)).toThrow(/host\.dmaAddress: 0x1000\+1 is not mapped/);
    // a faulting write changes nothing
    expect(() => h.write(a.addr + PAGE_SIZE - 2, Uint8Array.of(1, 2, 3, 4))).toThrow(HostError);
    expect(h.read(a.addr + PAGE_SIZE - 2, 2)).toEqual(new Uint8Array(2));
  });

  it('madviseDontNeed drops pages: the CPU refaults zeros, frames are freed, listeners hear the range', () => {
    const h = space();
    const buf = h.alloc(4 * PAGE_SIZE);
    h.fill(buf.addr, 4 * PAGE_SIZE, 0xab);
    const heard: [number, number][] = [];
    const off = h.onUnmap((addr, len) => { heard.push([addr, len]); });
    const before = h.mem.framesInUse;
    const pa1 = h.dmaAddress(buf.addr + PAGE_SIZE);
    h.madviseDontNeed(buf.addr + PAGE_SIZE, PAGE_SIZE + 1); // rounds up to 2 pages
    expect(heard).toEqual([[buf.addr + PAGE_SIZE, 2 * PAGE_SIZE]]);
    expect(h.mem.framesInUse).toBe(before - 2);
    expect(h.mem.isAllocated(pa1)).toBe(false);
    expect(h.isMapped(buf.addr, PAGE_SIZE)).toBe(true);
    expect(h.isMapped(buf.addr, PAGE_SIZE + 1)).toBe(false);
    expect(h.isMapped(buf.addr + 3 * PAGE_SIZE, PAGE_SIZE)).toBe(true);
    // anonymous private memory, as Linux: a read after MADV_DONTNEED sees the zero page (no frame
    // taken), a write refaults a new zeroed frame; the device's view (dmaAddress) stays dropped
    expect(h.read(buf.addr + PAGE_SIZE - 8, 24)).toEqual(Uint8Array.from([...new Array<number>(8).fill(0xab), ...new Array<number>(16).fill(0)]));
    expect(h.mem.framesInUse).toBe(before - 2);
    expect(() => h.dmaAddress(buf.addr + PAGE_SIZE)).toThrow(/dropped by madvise DONTNEED/);
    h.write(buf.addr + 2 * PAGE_SIZE + 10, Uint8Array.of(7));
    expect(h.read(buf.addr + 2 * PAGE_SIZE + 9, 3)).toEqual(Uint8Array.of(0, 7, 0));
    expect(h.mem.framesInUse).toBe(before - 1);
    h.fill(buf.addr + PAGE_SIZE, 4, 0x11);
    expect(h.read(buf.addr + PAGE_SIZE, 5)).toEqual(Uint8Array.of(0x11, 0x11, 0x11, 0x11, 0));
    expect(h.mem.framesInUse).toBe(before);
    expect(caught(() => h.madviseDontNeed(buf.addr + 5, 10)).errno).toBe('EINVAL');
    expect(caught(() => h.madviseDontNeed(buf.addr, 5 * PAGE_SIZE)).errno).toBe('ENOMEM'); // runs past the allocation
    off();
    h.madviseDontNeed(buf.addr, PAGE_SIZE);
    expect(heard.length).toBe(1); // unsubscribed
  });

  it('faultIn repopulates dropped pages with new zeroed frames and returns them', () => {
    const h = space();
    const buf = h.alloc(4 * PAGE_SIZE);
    h.fill(buf.addr, 4 * PAGE_SIZE, 0x5a);
    h.madviseDontNeed(buf.addr + PAGE_SIZE, 2 * PAGE_SIZE);
    expect(h.faultIn(buf.addr + 100, 4 * PAGE_SIZE - 200)).toEqual([buf.addr + PAGE_SIZE, buf.addr + 2 * PAGE_SIZE]);
    expect(h.isMapped(buf.addr, 4 * PAGE_SIZE)).toBe(true);
    const got = h.read(buf.addr, 4 * PAGE_SIZE);
    expect(got.subarray(0, PAGE_SIZE).every((b) => b === 0x5a)).toBe(true);
    expect(got.subarray(PAGE_SIZE, 3 * PAGE_SIZE).every((b) => b === 0)).toBe(true);
    expect(got.subarray(3 * PAGE_SIZE).every((b) => b === 0x5a)).toBe(true);
    expect(h.faultIn(buf.addr, 4 * PAGE_SIZE)).toEqual([]); // nothing left to fault
    expect(caught(() => h.faultIn(buf.addr + 4 * PAGE_SIZE, 1)).errno).toBe('EFAULT');
  });

  it('backs hugePages allocations with 2 MiB physically contiguous, aligned pages', () => {
    const h = space(256 * MiB, 4);
    const buf = h.alloc(5 * MiB, { hugePages: true });
    expect(buf.addr % HUGE_PAGE_SIZE).toBe(0);
    expect(h.pageSizeAt(buf.addr)).toBe(HUGE_PAGE_SIZE);
    for (let hp = 0; hp < 3; hp++) {
      const base = h.dmaAddress(buf.addr + hp * HUGE_PAGE_SIZE);
      expect(base % HUGE_PAGE_SIZE).toBe(0);
      for (let off = 0; off < HUGE_PAGE_SIZE; off += 64 * FRAME_SIZE + 7) {
        expect(h.dmaAddress(buf.addr + hp * HUGE_PAGE_SIZE + off)).toBe(base + off);
      }
    }
    expect(h.mem.framesInUse).toBe(3 * 512);
    // a write across a huge page boundary lands in two physical runs
    const at = buf.addr + HUGE_PAGE_SIZE - 3;
    h.write(at, Uint8Array.of(1, 2, 3, 4, 5, 6));
    expect(h.read(at, 6)).toEqual(Uint8Array.of(1, 2, 3, 4, 5, 6));
    expect(h.mem.read(h.dmaAddress(buf.addr + HUGE_PAGE_SIZE), 3)).toEqual(Uint8Array.of(4, 5, 6));
    // hugetlb rules: drop whole 2 MiB pages only
    expect(caught(() => h.madviseDontNeed(buf.addr + PAGE_SIZE, PAGE_SIZE)).errno).toBe('EINVAL');
    h.madviseDontNeed(buf.addr + HUGE_PAGE_SIZE, 1);
    expect(h.mem.framesInUse).toBe(2 * 512);
    expect(h.isMapped(buf.addr + HUGE_PAGE_SIZE, 1)).toBe(false);
    expect(h.faultIn(buf.addr, 5 * MiB)).toEqual([buf.addr + HUGE_PAGE_SIZE]);
    expect(h.dmaAddress(buf.addr + HUGE_PAGE_SIZE) % HUGE_PAGE_SIZE).toBe(0);
    expect(h.read(at, 6)).toEqual(Uint8Array.of(1, 2, 3, 0, 0, 0));
  });

  it('reports ENOMEM when host memory runs out, and leaves nothing half-done', () => {
    const h = space(8 * MiB);
    const before = h.mem.framesInUse;
    expect(caught(() => h.alloc(9 * MiB)).errno).toBe('ENOMEM');
    expect(h.mem.framesInUse).toBe(before);
    expect(caught(() => h.alloc(8 * MiB, { hugePages: true })).errno).toBe('ENOMEM'); // frame 0 is reserved
    expect(h.mem.framesInUse).toBe(before);
  });

  it('backs 4 KiB pages lazily: 1 TiB of virtual memory, frames only where touched', () => {
    const TiB = 2 ** 40;
    const h = space(2 * TiB, 11);
    const buf = h.alloc(TiB);
    expect(h.mem.framesInUse).toBe(0);
    const at = [0, TiB / 2 - 3, TiB - 8]; // the middle write straddles two pages
    at.forEach((o, i) => h.write(buf.addr + o, Uint8Array.of(1, 2, 3, 4, 5, 6, 7, i)));
    expect(h.mem.framesInUse).toBe(4);
    at.forEach((o, i) => expect(h.read(buf.addr + o, 8)).toEqual(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, i)));
    // untouched memory reads as zeros and stays without a frame; a DMA address backs its page
    expect(h.read(buf.addr + TiB / 4, 3 * PAGE_SIZE)).toEqual(new Uint8Array(3 * PAGE_SIZE));
    h.fill(buf.addr + TiB / 8, 2 * PAGE_SIZE, 0);
    expect(h.mem.framesInUse).toBe(4);
    const pa = h.dmaAddress(buf.addr + 3 * TiB / 4);
    expect(h.mem.isAllocated(pa)).toBe(true);
    expect(h.mem.framesInUse).toBe(5);
    expect(h.isMapped(buf.addr, TiB)).toBe(true);
    // faultIn backs a range (what pinning does), and returns the pages it backed
    expect(h.faultIn(buf.addr + PAGE_SIZE, 2 * PAGE_SIZE)).toEqual([buf.addr + PAGE_SIZE, buf.addr + 2 * PAGE_SIZE]);
    expect(h.mem.framesInUse).toBe(7);
    // one allocation larger than physical memory: ENOMEM (the kernel's overcommit heuristic)
    expect(caught(() => h.alloc(4 * TiB)).errno).toBe('ENOMEM');
  });

  it('tracks more than 2^24 frames (a JavaScript Set stops there)', () => {
    const h = space(80 * 2 ** 30, 12);
    const buf = h.alloc(65 * 2 ** 30, { hugePages: true }); // 33,280 huge pages of 512 frames
    expect(h.mem.framesInUse).toBe(65 * 2 ** 18);
    expect(h.mem.framesInUse).toBeGreaterThan(2 ** 24);
    h.write(buf.addr + 64 * 2 ** 30, Uint8Array.of(7));
    expect(h.read(buf.addr + 64 * 2 ** 30, 1)).toEqual(Uint8Array.of(7));
    h.madviseDontNeed(buf.addr, HUGE_PAGE_SIZE);
    expect(h.mem.framesInUse).toBe(65 * 2 ** 18 - 512);
  });
});
