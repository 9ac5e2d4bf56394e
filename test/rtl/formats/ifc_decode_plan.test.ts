/**
 * decodeIfc reads a layout through a plan made once (its fields as an array, a blank object of
 * its keys copied per decode). It must give what reading each field by name into a new object
 * gave: the same values, the same keys in the same order, and a u64 past 2^53 a RangeError.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decodeIfc, type IfcLayout } from '../../../src/rtl/formats/cmd_hdr.ts';
import { getBits } from '../../../src/rtl/formats/field.ts';
import * as mkey from '../../../src/rtl/formats/cmd_mkey.ts';
import * as qp from '../../../src/rtl/formats/cmd_qp.ts';
import * as pages from '../../../src/rtl/formats/cmd_pages.ts';

/** Every exported layout of these modules. */
const LAYOUTS: IfcLayout[] = [mkey, qp, pages].flatMap((m) => Object.values(m).filter((x): x is IfcLayout => typeof x === 'object' && x !== null && 'keys' in x && 'fields' in x && 'ifc' in x));

/** The decoder before the plan: each field by name into a new object. */
function reference(v: DataView, off: number, l: IfcLayout): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of l.keys) out[k] = getBits(v, off, l.fields[k].bit, l.fields[k].width, l.fields[k].name);
  return out;
}

function outcome(f: () => Record<string, number>): { keys: string[]; value: Record<string, number> } | string {
  try {
    const value = f();
    return { keys: Object.keys(value), value };
  } catch (e) {
    return String(e);
  }
}

describe('decodeIfc by plan', () => {
  it('equals the by-name decode over random bytes, every layout, decoded twice', () => {
    expect(LAYOUTS.length).toBeGreaterThan(10);
    fc.assert(
      fc.property(fc.constantFrom(...LAYOUTS), fc.integer({ min: 0, max: 8 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), (l, off, seed) => {
        const b = new Uint8Array(off + l.bytes);
        let x = seed | 1;
        for (let i = 0; i < b.length; i++) {
          x ^= x << 13;
          x ^= x >>> 17;
          x ^= x << 5;
          b[i] = x & 0xff;
        }
        const v = new DataView(b.buffer);
        const want = outcome(() => reference(v, off, l));
        expect(outcome(() => decodeIfc(v, off, l))).toEqual(want);
        expect(outcome(() => decodeIfc(v, off, l))).toEqual(want); // the plan, once made, again
      }),
    );
  });
});
