/**
 * The host's region lookup caches regions by page number (host_space.ts regionOf). Over hundreds
 * of allocations, many of them sharing a cache slot, visited in any order, every address still
 * finds its own region: what is written through one allocation reads back from it, and an
 * address in a guard gap between allocations is still unmapped.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { HostSpace, PAGE_SIZE } from '../../../src/rtl/memory/host_space.ts';
import { Rng } from '../../../src/sim/rng.ts';

describe('host region lookup cache', () => {
  it('hundreds of allocations, visited at random, each reads back its own bytes', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 2, max: 3 * PAGE_SIZE }), { minLength: 300, maxLength: 400 }), fc.array(fc.nat(), { minLength: 200, maxLength: 400 }), (lens, order) => {
        const h = new HostSpace(new HostMem(64 * 2 ** 20, new Rng(1)));
        const bufs = lens.map((n) => h.alloc(n));
        // write a stamp at a spot of each allocation, visiting them in the order given
        const spot = (i: number): number => bufs[i].addr + ((i * 97) % (bufs[i].length - 1));
        for (const k of order) {
          const i = k % bufs.length;
          h.write(spot(i), Uint8Array.of(i & 0xff, i >>> 8));
        }
        for (const k of order) {
          const i = k % bufs.length;
          expect(Array.from(h.read(spot(i), 2))).toEqual([i & 0xff, i >>> 8]);
          const end = bufs[i].addr + Math.ceil(bufs[i].length / PAGE_SIZE) * PAGE_SIZE;
          expect(h.isMapped(end, 1)).toBe(false); // the guard page after it
        }
      }),
      { numRuns: 5 },
    );
  });
});
