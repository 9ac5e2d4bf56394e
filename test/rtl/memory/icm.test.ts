import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FRAME_SIZE, HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { Icm, MKEY_CONTEXT_BYTES, XLT_CHUNK_BYTES } from '../../../src/rtl/memory/icm.ts';
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
    c.mem.fill(a, 256, 0xff);
    c.freeXlt(a);
    c.freeXlt(b);
    const e = c.allocXlt(192); // a and b coalesced: fits exactly where a was
    expect(e).toBe(a);
    expect(c.mem.read(e, 192).every((x) => x === 0)).toBe(true); // zeroed for the new owner
    expect(() => c.freeXlt(a + 64)).toThrow(/not an allocated translation table/);
    c.freeXlt(d);
    expect(() => c.freeXlt(d)).toThrow(/double free/);
  });

  it('gives a large table its own contiguous host memory', () => {
    const c = icm();
    const big = c.allocXlt(XLT_CHUNK_BYTES + 1000);
    expect(c.mem.isAllocated(big)).toBe(true);
    expect(c.mem.isAllocated(big + XLT_CHUNK_BYTES + 999)).toBe(true);
    expect(c.xltBytesReserved).toBeGreaterThanOrEqual(XLT_CHUNK_BYTES + 1000);
    expect(() => c.allocXlt(0)).toThrow(/bytes must be a positive integer/);
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
