import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ReuseRing } from '../../src/sim/reuse_ring.ts';

describe('ReuseRing', () => {
  it('hands an object out again only after as many others as its FIFO holds, in the same order', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 16 }), fc.integer({ min: 0, max: 100 }), (capacity, n) => {
        let made = 0;
        const ring = new ReuseRing({ capacity }, () => ({ id: made++ }));
        const out = Array.from({ length: n }, () => ring.next().id);
        expect(made).toBe(Math.min(n, capacity + 1)); // new objects only while it fills
        // a FIFO of `capacity` pushed each object in turn: the one handed out again left it
        out.forEach((id, i) => expect(id).toBe(i % (capacity + 1)));
      }),
    );
  });
});
