import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FRAME_SIZE, HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { ICM_XLT_BASE, Icm, IcmNoMemory, MKEY_CONTEXT_BYTES, XLT_CHUNK_BYTES } from '../../../src/rtl/memory/icm.ts';
import { Rng } from '../../../src/sim/rng.ts';

const MiB = 2 ** 20;

function icm(entries?: number): Icm {
  return new Icm(new HostMem(64 * MiB, new Rng(2)), entries === undefined ? {} : { mkeyEntries: entries });
}

describe('icm', () => {
  it('places each mkey context at its own 64-byte slot, taking 4 KiB pages lazily', () => {
    const c = icm();
    expect(c.mkeyEntries).toBe(65536);
    expect(c.mkeyTablePages).toBe(0);
    const a0 = c.mkeyContextAddr(0);
    expect(c.mkeyTablePages).toBe(1);
    expect(a0 % FRAME_SIZE).toBe(0);
    expect(a0).toBeGreaterThan(0);
    expect(c.mkeyContextAddr(63)).toBe(a0 + 63 * MKEY_CONTEXT_BYTES); // same page
    expect(c.mkeyTablePages).toBe(1);
    const a64 = c.mkeyContextAddr(64);
    expect(c.mkeyTablePages).toBe(2);
    expect(a64 % FRAME_SIZE).toBe(0);
    expect(Math.floor(a64 / FRAME_SIZE)).not.toBe(Math.floor(a0 / FRAME_SIZE)); // a new page
    expect(c.mkeyContextAddr(65535) % MKEY_CONTEXT_BYTES).toBe(0);
    expect(c.mkeyContextAddr(5)).toBe(a0 + 5 * 64); // stable
    expect(c.mem.read(c.mkeyContextAddr(7), 64)).toEqual(new Uint8Array(64)); // a free context reads as zeros
    expect(c.mem.isAllocated(a64)).toBe(true);
  });

  it('never gives two indices overlapping contexts', () => {
    const c = icm(4096);
    const seen = new Set<number>();
    for (let i = 0; i < 4096; i++) {
      const pa = c.mkeyContextAddr(i);
      expect(pa % 64).toBe(0);
      seen.add(pa);
    }
    expect(seen.size).toBe(4096);
    expect(c.mkeyTablePages).toBe(64);
  });

  it('rejects indices outside the table, naming the rule', () => {
    const c = icm(1000);
    expect(() => c.mkeyContextAddr(1000)).toThrow(/index 0x3e8 is beyond the mkey table \(1000 entries\)/);
    expect(() => c.mkeyContextAddr(2 ** 24)).toThrow(/index must be a 24-bit integer/);
    expect(() => c.mkeyContextAddr(-1)).toThrow(RangeError);
    expect(() => icm(2 ** 24 + 1)).toThrow(/mkeyEntries must be an integer in 1\.\.2\^24/);
  });

  it('allocates translation tables 64-byte aligned, contiguous, zeroed, first fit with coalescing', () => {
    const c = icm();
    const a = c.allocXlt(100); // 128 bytes
    const b = c.allocXlt(64);
    const d = c.allocXlt(8);
    expect(a % 64).toBe(0);
    expect([b - a, d - b]).toEqual([128, 64]); // first fit in one chunk
    expect(c.xltSize(a)).toBe(128);
    expect(c.xltBytesInUse).toBe(256);
    c.write(a, new Uint8Array(256).fill(0xff));
    c.freeXlt(a);
    c.freeXlt(b);
    const e = c.allocXlt(192); // a and b coalesced: fits exactly where a was
    expect(e).toBe(a);
    expect(c.read(e, 192).every((x) => x === 0)).toBe(true); // zeroed for the new owner
    expect(() => c.freeXlt(a + 64)).toThrow(/not an allocated translation table/);
    c.freeXlt(d);
    expect(() => c.freeXlt(d)).toThrow(/double free/);
  });

  it('places tables in ICM space over scattered host pages, backed as used and given back when free', () => {
    const c = icm();
    const big = c.allocXlt(XLT_CHUNK_BYTES + 1000);
    expect(big).toBeGreaterThanOrEqual(ICM_XLT_BASE);
    expect(c.covers(big, XLT_CHUNK_BYTES + 1000)).toBe(true);
    expect(c.covers(c.mem.size - 8, 8)).toBe(true); // host memory too
    expect(c.covers(c.mem.size, 8)).toBe(false);
    const pages = Math.ceil((XLT_CHUNK_BYTES + 1000) / FRAME_SIZE);
    expect(c.xltBytesReserved).toBe(pages * FRAME_SIZE);
    expect(c.mem.framesInUse).toBe(pages);
    // bytes cross ICM pages intact though their host frames are scattered
    const bytes = Uint8Array.from({ length: 3 * FRAME_SIZE }, (_, i) => (i * 7) & 0xff);
    c.write(big + FRAME_SIZE - 64, bytes);
    expect(c.read(big + FRAME_SIZE - 64, bytes.length)).toEqual(bytes);
    const dst = new Uint8Array(bytes.length + 2);
    c.readInto(big + FRAME_SIZE - 64, dst, 2, bytes.length);
    expect(dst.subarray(2)).toEqual(bytes);
    c.freeXlt(big);
    expect(c.xltBytesReserved).toBe(0);
    expect(c.mem.framesInUse).toBe(0);
    expect(() => c.allocXlt(0)).toThrow(/bytes must be a positive integer/);
  });

  it('backs a 1 M-entry table (8 MiB) from scattered memory with no contiguous run, and reports a real shortage', () => {
    const mem = new HostMem(16 * MiB, new Rng(4)); // 4,096 frames
    const c = new Icm(mem);
    // fragment host memory: every other frame taken, so no two free frames are adjacent
    const all = mem.allocFrames(mem.frameCount - 1);
    mem.freeFrames(all.filter((pa) => (pa / FRAME_SIZE) % 2 === 0));
    expect(() => mem.allocFrames(2, { contiguous: true })).toThrow(/ENOMEM/);
    const t = c.allocXlt(4 * MiB); // 1,024 pages, as a 512 K-entry MTT table
    expect(c.xltBytesReserved).toBe(4 * MiB);
    expect(() => c.allocXlt(8 * MiB)).toThrow(IcmNoMemory);
    expect(c.xltBytesReserved).toBe(4 * MiB); // the failed one took nothing
    c.freeXlt(t);
    const big = new Icm(new HostMem(64 * MiB, new Rng(4)));
    const m = big.allocXlt(2 ** 20 * 8); // 1 M MTT entries
    big.write(m + 8 * (2 ** 20 - 1), Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8));
    expect(big.read(m + 8 * (2 ** 20 - 1), 8)).toEqual(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8));
  });

  it('never overlaps live tables under random alloc/free (model check)', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.integer({ min: 1, max: 20_000 }), fc.constant(-1)), { maxLength: 80 }), (ops) => {
        const c = icm();
        const live: [number, number][] = [];
        let k = 0;
        for (const op of ops) {
          if (op === -1 && live.length > 0) {
            const [addr] = live.splice((k++ * 7) % live.length, 1)[0];
            c.freeXlt(addr);
          } else if (op > 0) {
            const addr = c.allocXlt(op);
            expect(addr % 64).toBe(0);
            for (const [x, n] of live) expect(addr + op <= x || x + n <= addr).toBe(true);
            live.push([addr, op]);
          }
        }
        expect(c.xltBytesInUse).toBe(live.reduce((s, [, n]) => s + Math.ceil(n / 64) * 64, 0));
        for (const [x] of live) c.freeXlt(x);
        expect(c.xltBytesInUse).toBe(0);
      }),
      { numRuns: 100 },
    );
  });
});
