import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { TimerHeap } from '../../src/sim/timer_heap.ts';

describe('TimerHeap', () => {
  it('pops timers in time order, pushes and pops interleaved', () => {
    fc.assert(
      fc.property(fc.array(fc.option(fc.integer({ min: 0, max: 50 }), { nil: null }), { maxLength: 300 }), (ops) => {
        const h = new TimerHeap<number>();
        const model: number[] = [];
        for (const t of ops) {
          if (t === null) {
            model.sort((a, b) => a - b);
            const want = model.shift();
            expect(h.peekTime()).toBe(want ?? Infinity);
            expect(h.pop()).toBe(want);
          } else {
            h.push(t, t); // the item is its time: ties are interchangeable
            model.push(t);
          }
          expect(h.size).toBe(model.length);
        }
      }),
    );
  });
});
