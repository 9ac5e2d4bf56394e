/**
 * The command queue's byte codecs (cmd_layout.ts) write and read bytes directly rather than
 * through a DataView per entry; they must give exactly what the DataView form gave: setUint32's
 * ToUint32 of each half, a Uint8Array's ToUint8 of each byte field, and a pointer of 2^53 or
 * more read as null / -1. The reference below is the DataView form they replaced.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  CMD_BLOCK_BYTES,
  CMD_ENTRY_BYTES,
  CmdBlockOff,
  CmdEntryOff,
  decodeCmdBlockCtrl,
  decodeCmdEntry,
  decodeCmdEntryInto,
  encodeCmdBlockCtrl,
  encodeCmdEntry,
  signCmdBlock,
  type CmdEntry,
} from '../../../src/rtl/formats/cmd_layout.ts';
import { getU64, setU64 } from '../../../src/rtl/formats/field.ts';
import { readMttRaw, readMttRawAt } from '../../../src/rtl/formats/mtt.ts';

/** The DataView encoder cmd_layout had. */
function refEncodeEntry(b: Uint8Array, off: number, e: CmdEntry): void {
  const v = new DataView(b.buffer, b.byteOffset + off, CMD_ENTRY_BYTES);
  b.fill(0, off, off + CMD_ENTRY_BYTES);
  v.setUint8(CmdEntryOff.TYPE, e.type);
  v.setUint32(CmdEntryOff.INLEN, e.inlen >>> 0);
  setU64(v, CmdEntryOff.IN_PTR, e.inPtr);
  b.set(e.in.subarray(0, 16), off + CmdEntryOff.IN);
  b.set(e.out.subarray(0, 16), off + CmdEntryOff.OUT);
  setU64(v, CmdEntryOff.OUT_PTR, e.outPtr);
  v.setUint32(CmdEntryOff.OUTLEN, e.outlen >>> 0);
  v.setUint8(CmdEntryOff.TOKEN, e.token);
  v.setUint8(CmdEntryOff.SIG, e.sig);
  v.setUint8(CmdEntryOff.STATUS_OWN, e.statusOwn);
}

// numbers as callers (and the fuzzer) may give them: small, u32, u53, past 2^53, negative
const num = fc.oneof(fc.integer({ min: 0, max: 255 }), fc.nat(), fc.integer({ min: 0, max: 2 ** 32 - 1 }), fc.maxSafeNat(), fc.double({ min: -1e17, max: 1e17, noNaN: true }));
const bytes16 = fc.uint8Array({ minLength: 0, maxLength: 20 });
const entry = fc.record({
  type: num, inlen: num, inPtr: num, in: bytes16, out: bytes16, outPtr: num, outlen: num, token: num, sig: num, rsvd: fc.constant(0), statusOwn: num,
});

describe('cmd_layout byte codecs equal the DataView form', () => {
  it('encodeCmdEntry writes the bytes the DataView encoder wrote; decodeCmdEntry reads what getU64 read', () => {
    fc.assert(
      fc.property(entry, fc.integer({ min: 0, max: 8 }), (e, off) => {
        const a = new Uint8Array(off + CMD_ENTRY_BYTES + 3).fill(0xa5);
        const r = a.slice();
        encodeCmdEntry(a, off, e);
        refEncodeEntry(r, off, e);
        expect(a).toEqual(r);
        const d = decodeCmdEntry(a, off);
        const v = new DataView(a.buffer, off, CMD_ENTRY_BYTES);
        let ptrs: [number, number] | null;
        try {
          ptrs = [getU64(v, CmdEntryOff.IN_PTR, 'in_ptr'), getU64(v, CmdEntryOff.OUT_PTR, 'out_ptr')];
        } catch {
          ptrs = null;
        }
        if (ptrs === null) expect(d).toBeNull();
        else {
          expect(d).not.toBeNull();
          expect([d!.inPtr, d!.outPtr]).toEqual(ptrs);
          expect([d!.inlen, d!.outlen, d!.type, d!.token, d!.sig, d!.statusOwn]).toEqual([
            v.getUint32(CmdEntryOff.INLEN), v.getUint32(CmdEntryOff.OUTLEN), v.getUint8(0), v.getUint8(CmdEntryOff.TOKEN), v.getUint8(CmdEntryOff.SIG), v.getUint8(CmdEntryOff.STATUS_OWN),
          ]);
          expect(d!.in).toEqual(a.slice(off + 16, off + 32));
        }
      }),
    );
  });

  it('decodeCmdEntryInto fills one record, entry after entry, with what decodeCmdEntry returns (false where it gives null)', () => {
    // one record for every decode, as the firmware keeps one per queue entry: nothing of an
    // earlier entry may stay in it
    const rec: CmdEntry = { type: 0, inlen: 0, inPtr: 0, in: new Uint8Array(16), out: new Uint8Array(16), outPtr: 0, outlen: 0, token: 0, sig: 0, rsvd: 0, statusOwn: 0 };
    // random bytes, mostly with pointers below 2^53 (else both give null): reserved bytes set too
    const raw = fc.tuple(fc.uint8Array({ minLength: CMD_ENTRY_BYTES, maxLength: CMD_ENTRY_BYTES }), fc.boolean(), fc.boolean()).map(([b, inOk, outOk]) => {
      if (inOk) b[CmdEntryOff.IN_PTR] = b[CmdEntryOff.IN_PTR + 1] = 0;
      if (outOk) b[CmdEntryOff.OUT_PTR] = b[CmdEntryOff.OUT_PTR + 1] = 0;
      return b;
    });
    const bytes = fc.oneof(raw, entry.map((e) => {
      const b = new Uint8Array(CMD_ENTRY_BYTES);
      encodeCmdEntry(b, 0, e);
      return b;
    }));
    fc.assert(
      fc.property(fc.array(fc.tuple(bytes, fc.integer({ min: 0, max: 8 })), { minLength: 1, maxLength: 6 }), (list) => {
        for (const [b, off] of list) {
          const a = new Uint8Array(off + CMD_ENTRY_BYTES);
          a.set(b, off);
          const d = decodeCmdEntry(a, off);
          const ok = decodeCmdEntryInto(a, off, rec);
          expect(ok).toBe(d !== null);
          if (d !== null) expect(rec).toEqual(d);
        }
      }),
    );
  });

  it('encodeCmdBlockCtrl and decodeCmdBlockCtrl: the DataView form\'s bytes and fields (next -1 past 2^53)', () => {
    fc.assert(
      fc.property(num, num, num, fc.uint8Array({ minLength: CMD_BLOCK_BYTES, maxLength: CMD_BLOCK_BYTES }), (next, blockNum, token, init) => {
        const a = init.slice();
        const r = init.slice();
        encodeCmdBlockCtrl(a, 0, next, blockNum, token);
        const v = new DataView(r.buffer);
        r.fill(0, CmdBlockOff.RSVD0);
        setU64(v, CmdBlockOff.NEXT, next);
        v.setUint32(CmdBlockOff.BLOCK_NUM, blockNum >>> 0);
        v.setUint8(CmdBlockOff.TOKEN, token);
        signCmdBlock(r, 0);
        expect(a).toEqual(r);
        let n: number;
        try {
          n = getU64(v, CmdBlockOff.NEXT, 'next');
        } catch {
          n = -1;
        }
        expect(decodeCmdBlockCtrl(a, 0)).toEqual({ next: n, blockNum: v.getUint32(CmdBlockOff.BLOCK_NUM), token: v.getUint8(CmdBlockOff.TOKEN) });
      }),
    );
  });

  it('a buffer too short for an entry or a block is a RangeError, as the DataView over it was', () => {
    expect(() => decodeCmdEntry(new Uint8Array(63), 0)).toThrow(RangeError);
    expect(() => decodeCmdBlockCtrl(new Uint8Array(CMD_BLOCK_BYTES), 1)).toThrow(RangeError);
  });

  it('readMttRawAt over bytes equals readMttRaw over a DataView', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 8, maxLength: 40 }), (b) => {
        const v = new DataView(b.buffer);
        for (let off = 0; off + 8 <= b.length; off += 8) expect(readMttRawAt(b, off)).toBe(readMttRaw(v, off));
      }),
    );
  });
});
