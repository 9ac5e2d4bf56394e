/**
 * Two savings on the command encoders must not change a byte: `zero` clears a structure of 32
 * bytes or more through a byte view of its buffer (kept per buffer), and an encode into a
 * sender's scratch reuses the views it made of that scratch for the same length. Zeroing equals
 * the word-by-word form over any window of any view; encodes into one scratch, of commands of
 * different sizes in any order, equal encodes into fresh bytes.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { zero } from '../../../src/rtl/formats/field.ts';
import { encodeCmdInput, encodeCmdOutput } from '../../../src/rtl/firmware/cmd_codec.ts';
import type { Cmd } from '../../../src/rtl/firmware/cmd_types.ts';

describe('zero through a byte view', () => {
  it('clears exactly [off, off + len) of the view, whatever its place in the buffer', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: 20 }), (viewOff, viewLen, off, extra) => {
        const buf = new Uint8Array(viewOff + viewLen + extra).fill(0xa5);
        const v = new DataView(buf.buffer, viewOff, viewLen);
        const len = Math.min(viewLen - Math.min(off, viewLen), 120);
        const o = Math.min(off, viewLen);
        const want = buf.slice();
        want.fill(0, viewOff + o, viewOff + o + len);
        zero(v, o, len);
        expect(buf).toEqual(want);
        zero(v, o, len); // the kept byte view, again
        expect(buf).toEqual(want);
      }),
    );
  });

  it('a window past the view is a RangeError, nothing written', () => {
    const buf = new Uint8Array(100).fill(1);
    expect(() => zero(new DataView(buf.buffer, 10, 50), 20, 40)).toThrow(RangeError);
    expect(buf.every((b) => b === 1)).toBe(true);
  });
});

describe('encodes into a scratch', () => {
  const cmds: Cmd[] = [
    { op: 'CREATE_MKEY', tag: 3, free: true, accessMode: 1, access: 5, umrEn: true, remoteInval: false, pd: 7, start: 0x700000000000, length: 4096, logPageSize: 12, xltCapacity: 1 },
    { op: 'CREATE_MKEY', tag: 1, free: false, accessMode: 1, access: 1, pd: 2, start: 4096, length: 8192, mtt: [0x100003, 0x101003] },
    { op: 'ALLOC_PD' },
    { op: 'DESTROY_MKEY', index: 77 },
    { op: 'MANAGE_PAGES', opMod: 1, pas: [0x10000, 0x11000, 0x12000] },
  ] as Cmd[];

  it('equal fresh encodes, in any order of sizes, the scratch reused', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: cmds.length - 1 }), { minLength: 1, maxLength: 12 }), (order) => {
        const scratch = new Uint8Array(4096);
        const out = new Uint8Array(4096);
        for (const i of order) {
          expect(Array.from(encodeCmdInput(cmds[i], scratch))).toEqual(Array.from(encodeCmdInput(cmds[i])));
          expect(Array.from(encodeCmdOutput('CREATE_MKEY', { mkey: (i + 5) << 8, index: i + 5 }, out))).toEqual(Array.from(encodeCmdOutput('CREATE_MKEY', { mkey: (i + 5) << 8, index: i + 5 })));
        }
      }),
      { numRuns: 40 },
    );
  });
});
