/**
 * The experiments' axis checks: the shared integer-range check (experiments/support/shape.ts)
 * accepts exactly the safe integers of its range, and every value of every experiment's default
 * and quick grids passes its axis's check.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { experiments } from '../../experiments/index.ts';
import { intIn, isSizeFrom4k, positiveInt } from '../../experiments/support/shape.ts';
import indirection from '../../experiments/indirection.ts';
import { UsageError } from '../../src/cli/args.ts';
import { expandGrid } from '../../src/cli/sweep/grid.ts';

describe('axis checks', () => {
  it('intIn(lo, hi) accepts exactly the safe integers in lo..hi', () => {
    fc.assert(
      fc.property(fc.integer({ min: -100, max: 100 }), fc.integer({ min: 0, max: 100 }), fc.oneof(fc.integer({ min: -300, max: 300 }), fc.double(), fc.string(), fc.boolean()), (lo, span, v) => {
        const ok = typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= lo + span;
        expect(intIn(lo, lo + span)(v)).toBe(ok ? null : `must be an integer in ${lo}..${lo + span}`);
      }),
    );
    expect(intIn(1, 8, 'one to eight')(9)).toBe('one to eight');
    expect(positiveInt(2 ** 53)).toBe('must be a positive integer');
    expect(positiveInt(0)).toBe('must be a positive integer');
    expect(positiveInt(1)).toBeNull();
  });

  it('isSizeFrom4k: whole byte counts of at least 4 KiB, powers of two or not', () => {
    expect([4096, 4097, 3 * 2 ** 20, 2 ** 40].map(isSizeFrom4k)).toEqual([true, true, true, true]);
    expect([4095, 0, 4096.5, '4k', true, 2 ** 53].map(isSizeFrom4k)).toEqual([false, false, false, false, false, false]);
  });

  it("every value of every experiment's grids passes its axis check", () => {
    for (const e of experiments) {
      for (const block of [...e.grid.full, ...e.grid.quick]) {
        for (const [axis, values] of Object.entries(block)) {
          const check = e.axes[axis]?.check;
          if (!check) continue;
          for (const v of values) expect(check(v), `${e.name} ${axis}=${String(v)}`).toBeNull();
        }
      }
    }
  });

  it('indirection: depths past klmMaxIndirection (4) are refused before any point runs', async () => {
    const check = indirection.axes.depth.check!;
    expect([0, 4].map(check)).toEqual([null, null]);
    expect(check(5)).toMatch(/^must be an integer in 0\.\.4 \(klmMaxIndirection/);
    expect(() => expandGrid(indirection, { quick: true, sets: [{ field: 'depth', values: ['6'] }] })).toThrow(UsageError);
    expect(() => expandGrid(indirection, { quick: true, sets: [{ field: 'depth', values: ['6'] }] })).toThrow(/--set depth: must be an integer in 0\.\.4 \(klmMaxIndirection/);
    // a lower klmMaxIndirection set beside it: the point says which limit it passed
    await expect(indirection.run({ depth: 3 }, { seed: 1, config: { klmMaxIndirection: 2 } })).rejects.toThrow('indirection: depth 3 is past klmMaxIndirection 2');
  });
});
