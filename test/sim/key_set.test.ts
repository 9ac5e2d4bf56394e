import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { KeySet, NextMember } from '../../src/sim/key_set.ts';

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

  it('NextMember answers as next() does over a forward pass, through changes to the set and a switch of sets', () => {
    const op = fc.oneof(fc.tuple(fc.constant('step' as const), fc.nat(40)), fc.tuple(fc.constantFrom('add' as const, 'delete' as const), fc.nat(2000)), fc.tuple(fc.constantFrom('clear' as const, 'swap' as const, 'reset' as const), fc.constant(0)));
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const sets = [new KeySet(2000), new KeySet(2000)];
        let cur = 0;
        let pos = 0;
        const nm = new NextMember();
        for (const [kind, n] of ops) {
          if (kind === 'step') pos += n;
          else if (kind === 'add') sets[cur].add(n);
          else if (kind === 'delete') sets[cur].delete(n);
          else if (kind === 'clear') sets[cur].clear();
          else if (kind === 'swap') cur = 1 - cur;
          else {
            nm.reset();
            pos = 0;
          }
          expect(nm.of(sets[cur], pos)).toBe(sets[cur].next(pos));
        }
      }),
    );
  });
});
