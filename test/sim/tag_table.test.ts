import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { TagTable } from '../../src/sim/tag_table.ts';

describe('TagTable', () => {
  it('holds what a Map would under tags that count up, colliding cells included, and gives them all back in tag order', () => {
    // ops: true = a new tag waits (tags count up, as DMA tags and work request ids do); a number = the i-th waiting one leaves
    const op = fc.oneof(fc.constant<true>(true), fc.nat(40));
    fc.assert(
      fc.property(fc.array(op, { maxLength: 400 }), fc.boolean(), (ops, endAll) => {
        const t = new TagTable<string>(4); // few cells: most tags collide
        const model = new Map<number, string>();
        let next = 0;
        for (const o of ops) {
          if (o === true) {
            t.set(next, `v${next}`);
            model.set(next, `v${next}`);
            next += 1 + (next % 3); // gaps too
          } else {
            const keys = [...model.keys()];
            const k = keys.length > 0 ? keys[o % keys.length] : next + 1;
            expect(t.take(k)).toBe(model.get(k));
            model.delete(k);
            expect(t.take(k)).toBeUndefined(); // gone once taken
          }
          expect(t.size).toBe(model.size);
        }
        if (endAll) {
          expect(t.takeAll()).toEqual([...model.keys()].sort((a, b) => a - b).map((k) => model.get(k)));
          expect(t.size).toBe(0);
        }
      }),
    );
  });

  it('refuses a cell count that is not a power of two', () => {
    expect(() => new TagTable(6)).toThrow(/power of two/);
  });
});
