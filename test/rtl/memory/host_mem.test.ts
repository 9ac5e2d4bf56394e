import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FRAME_SIZE, HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { Rng } from '../../../src/sim/rng.ts';

const MiB = 2 ** 20;

/** Byte equality with a useful message (vitest's deep equality is slow on large arrays). */
function expectBytes(got: Uint8Array, want: Uint8Array): void {
  expect(got.length).toBe(want.length);
  const i = got.findIndex((b, j) => b !== want[j]);
  expect(i === -1 ? 'equal' : `differ at ${i}: ${got[i]} != ${want[i]}`).toBe('equal');
}

type Op =
  | { k: 'write'; off: number; bytes: Uint8Array }
  | { k: 'fill'; off: number; len: number; byte: number }
  | { k: 'u32'; off: number; v: number }
  | { k: 'u64'; off: number; v: number }
  | { k: 'read'; off: number; len: number };

describe('host_mem', () => {
  it('is byte-exact against a flat reference across frame boundaries (random ops)', () => {
    const WIN = 3 * FRAME_SIZE + 100; // a window straddling frames, starting mid-frame
    const BASE = 5 * FRAME_SIZE - 37;
    const off = (max: number): fc.Arbitrary<number> => fc.integer({ min: 0, max: WIN - max });
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.uint8Array({ minLength: 0, maxLength: 5000 }).chain((b) => off(b.length).map((o) => ({ k: 'write' as const, off: o, bytes: b }))),
      fc.record({ len: fc.integer({ min: 0, max: 5000 }), byte: fc.integer({ min: 0, max: 255 }) }).chain(({ len, byte }) =>
        off(len).map((o) => ({ k: 'fill' as const, off: o, len, byte }))),
      fc.record({ off: off(4), v: fc.integer({ min: 0, max: 2 ** 32 - 1 }) }).map((r) => ({ k: 'u32' as const, ...r })),
      fc.record({ off: off(8), v: fc.maxSafeNat() }).map((r) => ({ k: 'u64' as const, ...r })),
      fc.integer({ min: 0, max: 5000 }).chain((len) => off(len).map((o) => ({ k: 'read' as const, off: o, len }))),
    );
    // aim offsets at frame boundaries, where the bugs live
    const nearEdge = fc.integer({ min: -9, max: 9 }).chain((d) =>
      fc.record({ off: fc.constant(Math.max(0, FRAME_SIZE + 37 + d)), v: fc.integer({ min: 0, max: 2 ** 32 - 1 }) })
        .map((r) => ({ k: 'u32' as const, ...r })));
    fc.assert(
      fc.property(fc.array(fc.oneof(op, nearEdge), { maxLength: 40 }), (ops) => {
        const mem = new HostMem(MiB, new Rng(1));
        const ref = new Uint8Array(WIN);
        const dv = new DataView(ref.buffer);
        for (const o of ops) {
          switch (o.k) {
            case 'write': mem.write(BASE + o.off, o.bytes); ref.set(o.bytes, o.off); break;
            case 'fill': mem.fill(BASE + o.off, o.len, o.byte); ref.fill(o.byte, o.off, o.off + o.len); break;
            case 'u32':
              mem.writeU32BE(BASE + o.off, o.v); dv.setUint32(o.off, o.v);
              expect(mem.readU32BE(BASE + o.off)).toBe(o.v);
              break;
            case 'u64':
              mem.writeU64BE(BASE + o.off, o.v); dv.setBigUint64(o.off, BigInt(o.v));
              expect(mem.readU64BE(BASE + o.off)).toBe(o.v);
              break;
            case 'read': {
              expectBytes(mem.read(BASE + o.off, o.len), ref.subarray(o.off, o.off + o.len));
              const dst = new Uint8Array(o.len + 3).fill(0xee);
              mem.readInto(BASE + o.off, dst, 3, o.len);
              expectBytes(dst.subarray(3), ref.subarray(o.off, o.off + o.len));
              expect(dst[0]).toBe(0xee);
              break;
            }
          }
        }
        expectBytes(mem.read(BASE, WIN), ref);
        for (let i = 0; i + 4 <= WIN; i += 613) expect(mem.readU32BE(BASE + i)).toBe(dv.getUint32(i));
      }),
      { numRuns: 150 },
    );
  });

  it('reads untouched memory as zeros without backing it, and backs a frame on first write', () => {
    const mem = new HostMem(MiB, new Rng(1));
    expect(mem.read(12345, 100)).toEqual(new Uint8Array(100));
    mem.fill(0, MiB, 0);
    expect(mem.framesBacked).toBe(0);
    mem.write(FRAME_SIZE - 1, Uint8Array.of(1, 2));
    expect(mem.framesBacked).toBe(2);
  });

  it('checks bounds and arguments, naming them', () => {
    const mem = new HostMem(MiB, new Rng(1));
    expect(() => mem.read(MiB - 4, 8)).toThrow(/host_mem\.read: 0xffffc\+8 is outside physical memory/);
    expect(() => mem.read(-1, 1)).toThrow(/pa must be a non-negative integer/);
    expect(() => mem.write(0.5, new Uint8Array(1))).toThrow(RangeError);
    expect(() => mem.writeU32BE(0, 2 ** 32)).toThrow(/does not fit 32 bits/);
    expect(() => mem.writeU64BE(0, 2 ** 53)).toThrow(/writeU64BE: value/);
    mem.writeU32BE(8, 0x0020_0000); // hi word of a u64 >= 2^53
    expect(() => mem.readU64BE(8)).toThrow(/2\^53 or more/);
    expect(() => mem.readInto(0, new Uint8Array(4), 2, 4)).toThrow(/exceeds dst/);
    expect(() => new HostMem(5000, new Rng(1))).toThrow(/size must be a multiple of 4096/);
  });

  it('hands out scattered frames, deterministically from the seed, never frame 0, never twice', () => {
    const alloc = (seed: number): number[] => new HostMem(64 * 2 ** 30, new Rng(seed)).allocFrames(64);
    const a = alloc(7);
    expect(alloc(7)).toEqual(a);
    expect(alloc(8)).not.toEqual(a);
    expect(new Set(a).size).toBe(64);
    for (const pa of a) {
      expect(pa % FRAME_SIZE).toBe(0);
      expect(pa).toBeGreaterThan(0);
    }
    let consecutive = 0;
    for (let i = 1; i < a.length; i++) if (a[i] === a[i - 1] + FRAME_SIZE) consecutive++;
    expect(consecutive).toBeLessThan(3);
  });

  it('allocates contiguous aligned runs, zeroed, and reuses freed frames', () => {
    const mem = new HostMem(16 * MiB, new Rng(3));
    const run = mem.allocFrames(512, { contiguous: true, align: 2 * MiB });
    expect(run[0] % (2 * MiB)).toBe(0);
    run.forEach((pa, i) => expect(pa).toBe(run[0] + i * FRAME_SIZE));
    mem.write(run[3], Uint8Array.of(9, 9, 9));
    mem.freeFrames(run);
    expect(mem.framesInUse).toBe(0);
    expect(() => mem.freeFrames([run[0]])).toThrow(/not allocated \(double free\?\)/);
    // fill the memory completely, so the freed frames must come back, zeroed
    const all = mem.allocFrames(mem.frameCount - 1);
    expect(new Set(all).size).toBe(mem.frameCount - 1);
    expect(all).toContain(run[3]);
    expect(mem.read(run[3], 3)).toEqual(new Uint8Array(3));
    expect(() => mem.allocFrames(1)).toThrow(/ENOMEM/);
  });

  it('finds a contiguous run in fragmented memory by scanning, or reports ENOMEM', () => {
    const mem = new HostMem(MiB, new Rng(5)); // 256 frames
    const all = mem.allocFrames(255);
    // free every other frame (none in 96..113), then frames 100..109 in one run
    mem.freeFrames(all.filter((pa) => (pa / FRAME_SIZE) % 2 === 0 && !(pa / FRAME_SIZE >= 96 && pa / FRAME_SIZE < 114)));
    mem.freeFrames(all.filter((pa) => pa / FRAME_SIZE >= 100 && pa / FRAME_SIZE < 110));
    const run = mem.allocFrames(10, { contiguous: true });
    expect(run[0]).toBe(100 * FRAME_SIZE);
    expect(() => mem.allocFrames(3, { contiguous: true })).toThrow(/ENOMEM: no 3 contiguous/);
  });

  it('keeps whole 2 MiB blocks for huge pages while 4 KiB frames are taken: 1 GiB of single frames leaves 1,000 huge pages allocatable', () => {
    const mem = new HostMem(64 * 2 ** 30, new Rng(11));
    // 1 GiB of 4 KiB pages, one frame at a time as first touches take them
    const small: number[] = [];
    for (let i = 0; i < 2 ** 18; i++) small.push(mem.allocFrames(1)[0]);
    // still scattered: hardly a frame follows the one before it
    let consecutive = 0;
    for (let i = 1; i < small.length; i++) if (small[i] === small[i - 1] + FRAME_SIZE) consecutive++;
    expect(consecutive / small.length).toBeLessThan(0.01);
    // and 2 GiB of huge pages still fit (frames drawn from all of memory left 12)
    for (let i = 0; i < 1000; i++) mem.allocFrames(512, { contiguous: true, align: 2 * MiB });
    // freed single frames are taken again before another whole block is opened
    mem.freeFrames(small.slice(0, 1000));
    const before = mem.framesInUse;
    const again = mem.allocFrames(1000);
    expect(mem.framesInUse).toBe(before + 1000);
    const freed = new Set(small.slice(0, 1000));
    expect(again.filter((pa) => freed.has(pa)).length).toBeGreaterThan(100);
  });
});
