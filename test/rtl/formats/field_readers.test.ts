/**
 * The non-allocating field readers of src/rtl/formats (what the engines' hot paths use) read
 * exactly what the decoders read, at any offset.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  CTRL_SEG_SIZE,
  KLM_SIZE,
  MKEY_CONTEXT_SIZE,
  MTT_SIZE,
  ctrlCe,
  ctrlDs,
  ctrlFence,
  ctrlImm,
  ctrlOpcode,
  ctrlOpmod,
  ctrlQpn,
  ctrlSe,
  ctrlWqeIndex,
  ctrlWqebbs,
  decodeCtrlSeg,
  decodeKlm,
  decodeMkeyContext,
  encodeCtrlSeg,
  encodeKlm,
  encodeMkeyContext,
  klmBcount,
  klmKey,
  klmVa,
  mkcTranslationsOctwordSize,
  readMttRaw,
  writeMttRaw,
  zeroMkeyContext,
} from '../../../src/rtl/formats/index.ts';

const u = (bits: number): fc.Arbitrary<number> => fc.integer({ min: 0, max: 2 ** bits - 1 });
const u53 = fc.maxSafeNat();

describe('control segment readers', () => {
  it('read every field as decodeCtrlSeg does', () => {
    const ctrl = fc.record({
      opmod: u(8), wqeIndex: u(16), opcode: u(8), qpn: u(24), ds: u(6), signature: u(8), fence: u(3), ce: u(2), se: fc.boolean(), imm: u(32),
    });
    fc.assert(
      fc.property(ctrl, u(6), (f, off) => {
        const b = new Uint8Array(off + CTRL_SEG_SIZE).fill(0xa5);
        const view = new DataView(b.buffer);
        encodeCtrlSeg(view, off, f);
        const d = decodeCtrlSeg(view, off);
        expect([ctrlOpmod(b, off), ctrlWqeIndex(b, off), ctrlOpcode(b, off), ctrlQpn(b, off), ctrlDs(b, off)]).toEqual([d.opmod, d.wqeIndex, d.opcode, d.qpn, d.ds]);
        expect([ctrlFence(b, off), ctrlCe(b, off), ctrlSe(b, off), ctrlImm(b, off)]).toEqual([d.fence, d.ce, d.se, d.imm]);
        expect(ctrlWqebbs(b, off)).toBe(Math.max(1, Math.ceil((f.ds * 16) / 64)));
      }),
      { numRuns: 200 },
    );
  });

  it('known answers: ds 5 is two WQEBBs, ds 4 one, ds 0 still one', () => {
    const b = new Uint8Array(16);
    b[7] = 0xc5; // reserved bits 7:6 set: not part of ds
    expect([ctrlDs(b), ctrlWqebbs(b)]).toEqual([5, 2]);
    b[7] = 4;
    expect(ctrlWqebbs(b)).toBe(1);
    b[7] = 0;
    expect(ctrlWqebbs(b)).toBe(1);
  });
});

describe('translation entry readers', () => {
  it('KLM fields in place equal decodeKlm', () => {
    fc.assert(
      fc.property(fc.record({ bcount: u(32), key: u(32), va: u53 }), u(5), (k, off) => {
        const view = new DataView(new ArrayBuffer(off + KLM_SIZE));
        encodeKlm(view, off, k);
        expect({ bcount: klmBcount(view, off), key: klmKey(view, off), va: klmVa(view, off) }).toEqual(decodeKlm(view, off));
      }),
    );
  });

  it('a raw MTT entry round-trips and is big-endian', () => {
    fc.assert(
      fc.property(u53, u(5), (raw, off) => {
        const view = new DataView(new ArrayBuffer(off + MTT_SIZE));
        writeMttRaw(view, off, raw);
        expect(readMttRaw(view, off)).toBe(raw);
        expect(view.getUint32(off)).toBe(Math.floor(raw / 2 ** 32));
      }),
    );
  });

  it("an mkey context's translations_octword_size in place equals the decoded field", () => {
    fc.assert(
      fc.property(u(32), (n) => {
        const view = new DataView(new ArrayBuffer(MKEY_CONTEXT_SIZE));
        encodeMkeyContext(view, 0, { ...zeroMkeyContext(), translationsOctwordSize: n });
        expect(mkcTranslationsOctwordSize(view, 0)).toBe(decodeMkeyContext(view, 0).translationsOctwordSize);
        expect(view.getUint32(52)).toBe(n); // spec/mlx5.md "mkey context": u32 at byte 52
      }),
    );
  });
});
