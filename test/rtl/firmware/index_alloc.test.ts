/**
 * The QP number allocator: numbers in turn, around the range again, never one still live; a
 * freed number comes back only after every other had its turn (so QP churn past the range's
 * size keeps working: before, QP numbers were never reused and createQp failed after max_qp).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RoundRobinAllocator } from '../../../src/rtl/firmware/index_alloc.ts';

describe('RoundRobinAllocator', () => {
  it('hands out numbers in turn, wraps, skips live ones, and says -1 when all are live', () => {
    const a = new RoundRobinAllocator(10, 14);
    const live = new Set<number>();
    const take = (): number => {
      const n = a.alloc((x) => live.has(x));
      if (n >= 0) live.add(n);
      return n;
    };
    expect([take(), take(), take()]).toEqual([10, 11, 12]);
    live.delete(10);
    expect([take(), take(), take()]).toEqual([13, 10, -1]);
  });

  it('any create/destroy sequence: a new number is never live; -1 only when all are', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.constant(-1), fc.nat(7)), { maxLength: 200 }), (ops) => {
        const a = new RoundRobinAllocator(0, 8);
        const live = new Set<number>();
        for (const op of ops) {
          if (op === -1) {
            const n = a.alloc((x) => live.has(x));
            if (live.size === 8) {
              expect(n).toBe(-1);
              continue;
            }
            expect(live.has(n)).toBe(false);
            live.add(n);
          } else live.delete(op);
        }
      }),
    );
  });
});
