/**
 * The mkey context table's page list grows as pages are taken (icm.ts: 2^24 mkeys would be
 * 262,144 page slots, 2 MB an adapter, made at once). Indices in any order, far apart or close,
 * up to the table's last: each context keeps its address, a page is taken once per 64 contexts
 * touched, and TEARDOWN's releaseAll gives back exactly the pages taken, in page order.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { Icm, MKEY_CONTEXT_BYTES } from '../../../src/rtl/memory/icm.ts';
import { Rng } from '../../../src/sim/rng.ts';

const CONTEXTS_PER_PAGE = 4096 / MKEY_CONTEXT_BYTES;

describe('icm mkey table growth', () => {
  it('keeps every context where it first was, one page per 64 contexts, and releases exactly those pages', () => {
    const index = fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 2 ** 24 - 1 }), fc.constantFrom(63, 64, 4095, 4096, 2 ** 24 - 1));
    fc.assert(
      fc.property(fc.array(index, { minLength: 1, maxLength: 60 }), (indices) => {
        const c = new Icm(new HostMem(2 ** 30, new Rng(9)), { mkeyEntries: 2 ** 24 });
        const at = new Map<number, number>();
        const pageOf = new Map<number, number>();
        for (const i of indices) {
          const pa = c.mkeyContextAddr(i, true);
          if (at.has(i)) expect(pa).toBe(at.get(i));
          at.set(i, pa);
          const p = Math.floor(i / CONTEXTS_PER_PAGE);
          const base = pa - (i % CONTEXTS_PER_PAGE) * MKEY_CONTEXT_BYTES;
          if (pageOf.has(p)) expect(base).toBe(pageOf.get(p));
          pageOf.set(p, base);
        }
        // asked again, after every growth: the same addresses
        for (const [i, pa] of at) expect(c.mkeyContextAddr(i)).toBe(pa);
        expect(c.mkeyTablePages).toBe(pageOf.size);
        expect(new Set(pageOf.values()).size).toBe(pageOf.size);
        const released: number[] = [];
        const ci = c as unknown as { releaseFrames(pas: number[]): void };
        ci.releaseFrames = (pas) => released.push(...pas);
        c.releaseAll();
        expect(released).toEqual([...pageOf].sort((a, b) => a[0] - b[0]).map(([, pa]) => pa));
        expect(c.mkeyTablePages).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});
