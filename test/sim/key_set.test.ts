import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { KeySet } from '../../src/sim/key_set.ts';

describe('KeySet', () => {
  it('answers next, max, has and size as a sorted array of its members does, through clears of few members or many', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 31, 32, 33, 1024, 1025, 40_000),
        fc.array(fc.tuple(fc.constantFrom('add', 'add', 'add', 'delete', 'next', 'clear'), fc.nat()), { maxLength: 300 }),
        (cap, ops) => {
          const s = new KeySet(cap);
          const model = new Set<number>();
          for (const [op, raw] of ops) {
            const k = raw % cap;
            if (op === 'add') { s.add(k); model.add(k); }
            else if (op === 'delete') { s.delete(k); model.delete(k); }
            else if (op === 'clear') { s.clear(); model.clear(); }
            else {
              const sorted = [...model].sort((a, b) => a - b);
              expect(s.next(k)).toBe(sorted.find((x) => x >= k) ?? Infinity);
            }
            expect(s.size).toBe(model.size);
            expect(s.max()).toBe(model.size === 0 ? -1 : Math.max(...model));
            expect(s.has(k)).toBe(model.has(k));
          }
        },
      ),
    );
  });

  it('finds a member far past the key through every level, and none past the end', () => {
    const s = new KeySet(2 ** 20);
    s.add(5);
    s.add(2 ** 20 - 1);
    expect(s.next(6)).toBe(2 ** 20 - 1);
    expect(s.next(0)).toBe(5);
    expect(s.next(2 ** 20)).toBe(Infinity);
    s.delete(2 ** 20 - 1);
    expect(s.next(6)).toBe(Infinity);
    expect(s.max()).toBe(5);
    s.clear();
    expect(s.size).toBe(0);
    expect(s.next(0)).toBe(Infinity);
  });

  it('refuses a capacity it cannot hold', () => {
    expect(() => new KeySet(0)).toThrow(RangeError);
    expect(() => new KeySet(2 ** 31)).toThrow(RangeError);
  });
});
