/**
 * Every byte layout of src/rtl/formats: decode(encode(x)) = x for all valid x, an encode
 * touches only its own bytes, and a value too wide for its field throws a RangeError naming it.
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  ATOMIC_SEG_SIZE,
  CQE_SIZE,
  CTRL_SEG_SIZE,
  DATA_SEG_SIZE,
  EQE_SIZE,
  KLM_SIZE,
  MKEY_CONTEXT_SIZE,
  MTT_SIZE,
  PAGE_FAULT_RESUME_IN_SIZE,
  PageFaultSubtype,
  RADDR_SEG_SIZE,
  UMR_CTRL_SEG_SIZE,
  decodeAtomicSeg,
  decodeCqe,
  decodeCtrlSeg,
  decodeDataSeg,
  decodeEqe,
  decodeEqeCompletion,
  decodeEqePageFault,
  decodeInlineSeg,
  decodeKlm,
  decodeMkeyContext,
  decodeMtt,
  decodePageFaultResumeIn,
  decodeRaddrSeg,
  decodeUmrCtrlSeg,
  encodeAtomicSeg,
  encodeCqe,
  encodeCtrlSeg,
  encodeDataSeg,
  encodeEqe,
  encodeEqeCompletion,
  encodeEqePageFault,
  encodeInlineSeg,
  encodeKlm,
  encodeMkeyContext,
  encodeMtt,
  encodePageFaultResumeIn,
  encodeRaddrSeg,
  encodeUmrCtrlSeg,
  inlineSegDs,
} from '../../../src/rtl/formats/index.ts';
import type { EqePageFault } from '../../../src/rtl/formats/index.ts';

/** An integer field of `bits` bits. */
const u = (bits: number) => fc.integer({ min: 0, max: 2 ** bits - 1 });
/** A u64 field: any number below 2^53. */
const u64 = fc.maxSafeNat();
/** Field widths; 64 marks a u64 (limited to 2^53). */
type Widths = Record<string, number>;

/** Arbitrary of a record whose numeric fields have the given widths, plus boolean fields. */
function record(widths: Widths, bools: readonly string[] = []) {
  const model: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [k, bits] of Object.entries(widths)) model[k] = bits === 64 ? u64 : u(bits);
  for (const k of bools) model[k] = fc.boolean();
  return fc.record(model);
}

type Enc<T> = (view: DataView, off: number, f: T) => void;
type Dec<T> = (view: DataView, off: number) => T;

interface Layout<T> {
  name: string;
  arb: fc.Arbitrary<T>;
  enc: Enc<T>;
  dec: Dec<T>;
  /** Byte ranges [start, end) relative to the layout's offset that an encode may write. */
  touches: [number, number][];
  /** Numeric fields and their widths, for the out-of-range checks. */
  widths: Widths;
}

function layout<T>(l: Layout<T>): Layout<unknown> {
  return l as unknown as Layout<unknown>;
}

const mkeyWidths: Widths = {
  pcieControl: 8,
  accessMode: 5,
  qpn: 24,
  tag: 8,
  pd: 24,
  startAddr: 64,
  len: 64,
  bsfOctwordSize: 32,
  translationsOctwordSize: 32,
  logPageSize: 6,
};
const ctrlWidths: Widths = { opmod: 8, wqeIndex: 16, opcode: 8, qpn: 24, ds: 6, signature: 8, fence: 3, ce: 2, imm: 32 };
const umrWidths: Widths = { flags: 8, xltOctowords: 16, xltOffset: 48, mkeyMask: 64 };
const dataWidths: Widths = { byteCount: 31, lkey: 32, addr: 64 };
const cqeWidths: Widths = {
  immInvalPkey: 32,
  byteCnt: 32,
  vendorErrSynd: 8,
  syndrome: 8,
  wqeOpcode: 8,
  qpn: 24,
  wqeCounter: 16,
  signature: 8,
  opcode: 4,
  format: 2,
  owner: 1,
};
const eqeWidths: Widths = { type: 8, subType: 8, signature: 8, owner: 8 };
const resumeWidths: Widths = { opcode: 16, opMod: 16, flags: 8, qpn: 24 };

const pfCommon = { bytesCommitted: u(32), flags: u(8), qpn: u(24), packetLength: u(16) };
const pageFaultArb: fc.Arbitrary<EqePageFault> = fc.oneof(
  fc.record({ ...pfCommon, subType: fc.constant(PageFaultSubtype.WQE), wqeIndex: u(16) }),
  fc.record({ ...pfCommon, subType: fc.constant(PageFaultSubtype.RDMA), rKey: u(32), rdmaOpLen: u(32), rdmaVa: u64 }),
);

const LAYOUTS: Layout<unknown>[] = [
  layout({
    name: 'mkey context',
    arb: record(mkeyWidths, ['free', 'umrEn', 'atomic', 'remoteWrite', 'remoteRead', 'localWrite', 'localRead', 'len64', 'bsfEn', 'syncUmr', 'remoteInval']),
    enc: encodeMkeyContext as Enc<unknown>,
    dec: decodeMkeyContext,
    touches: [[0, MKEY_CONTEXT_SIZE]],
    widths: mkeyWidths,
  }),
  layout({
    name: 'ctrl seg',
    arb: record(ctrlWidths, ['se']),
    enc: encodeCtrlSeg as Enc<unknown>,
    dec: decodeCtrlSeg,
    touches: [[0, CTRL_SEG_SIZE]],
    widths: ctrlWidths,
  }),
  layout({
    name: 'umr ctrl seg',
    arb: record(umrWidths),
    enc: encodeUmrCtrlSeg as Enc<unknown>,
    dec: decodeUmrCtrlSeg,
    touches: [[0, UMR_CTRL_SEG_SIZE]],
    widths: umrWidths,
  }),
  layout({
    name: 'data seg',
    arb: record(dataWidths, ['inline']),
    enc: encodeDataSeg as Enc<unknown>,
    dec: decodeDataSeg,
    touches: [[0, DATA_SEG_SIZE]],
    widths: dataWidths,
  }),
  layout({
    name: 'raddr seg',
    arb: record({ raddr: 64, rkey: 32 }),
    enc: encodeRaddrSeg as Enc<unknown>,
    dec: decodeRaddrSeg,
    touches: [[0, RADDR_SEG_SIZE]],
    widths: { raddr: 64, rkey: 32 },
  }),
  layout({
    name: 'atomic seg',
    arb: record({ swapAdd: 64, compare: 64 }),
    enc: encodeAtomicSeg as Enc<unknown>,
    dec: decodeAtomicSeg,
    touches: [[0, ATOMIC_SEG_SIZE]],
    widths: { swapAdd: 64, compare: 64 },
  }),
  layout({
    name: 'klm',
    arb: record({ bcount: 32, key: 32, va: 64 }),
    enc: encodeKlm as Enc<unknown>,
    dec: decodeKlm,
    touches: [[0, KLM_SIZE]],
    widths: { bcount: 32, key: 32, va: 64 },
  }),
  layout({
    name: 'mtt',
    arb: fc.record({ addr: u(41).map((p) => p * 4096), read: fc.boolean(), write: fc.boolean() }),
    enc: encodeMtt as Enc<unknown>,
    dec: decodeMtt,
    touches: [[0, MTT_SIZE]],
    widths: { addr: 64 },
  }),
  layout({
    name: 'cqe',
    arb: record(cqeWidths, ['se']),
    enc: encodeCqe as Enc<unknown>,
    dec: decodeCqe,
    touches: [[0, CQE_SIZE]],
    widths: cqeWidths,
  }),
  layout({
    name: 'eqe',
    arb: fc.record({
      type: u(8),
      subType: u(8),
      data: fc.uint8Array({ minLength: 28, maxLength: 28 }),
      signature: u(8),
      owner: u(8),
    }),
    enc: encodeEqe as Enc<unknown>,
    dec: decodeEqe,
    touches: [[0, EQE_SIZE]],
    widths: eqeWidths,
  }),
  layout({
    name: 'eqe completion data',
    arb: fc.record({ cqn: u(24) }),
    enc: encodeEqeCompletion as Enc<unknown>,
    dec: decodeEqeCompletion,
    touches: [[32, 60]],
    widths: { cqn: 24 },
  }),
  layout({
    name: 'eqe page-fault data',
    arb: pageFaultArb,
    enc: encodeEqePageFault as Enc<unknown>,
    dec: decodeEqePageFault,
    touches: [
      [3, 4],
      [32, 60],
    ],
    widths: { bytesCommitted: 32, flags: 8, qpn: 24, packetLength: 16 },
  }),
  layout({
    name: 'page fault resume in',
    arb: record(resumeWidths),
    enc: encodePageFaultResumeIn as Enc<unknown>,
    dec: decodePageFaultResumeIn,
    touches: [[0, PAGE_FAULT_RESUME_IN_SIZE]],
    widths: resumeWidths,
  }),
];

const SLACK = 80;

function span(l: Layout<unknown>): number {
  return Math.max(...l.touches.map(([, e]) => e));
}

describe.each(LAYOUTS.map((l) => [l.name, l] as const))('%s', (_name, l) => {
  it('decode(encode(x)) equals x', () => {
    fc.assert(
      fc.property(l.arb, (x) => {
        const view = new DataView(new ArrayBuffer(span(l)));
        l.enc(view, 0, x);
        expect(l.dec(view, 0)).toEqual(x);
      }),
    );
  });

  it('encoding at an offset in a bigger buffer leaves the other bytes untouched', () => {
    fc.assert(
      fc.property(
        l.arb,
        fc.uint8Array({ minLength: span(l) + SLACK, maxLength: span(l) + SLACK }),
        fc.integer({ min: 0, max: SLACK }),
        (x, before, off) => {
          const bytes = before.slice();
          const view = new DataView(bytes.buffer);
          l.enc(view, off, x);
          expect(l.dec(view, off)).toEqual(x);
          for (let i = 0; i < bytes.length; i++) {
            const inside = l.touches.some(([s, e]) => i >= off + s && i < off + e);
            if (!inside && bytes[i] !== before[i]) expect.fail(`byte ${i} changed (layout at ${off})`);
          }
        },
      ),
      { numRuns: 50 },
    );
  });

  it('a value that does not fit its field throws a RangeError naming the field', () => {
    const fields = Object.keys(l.widths);
    fc.assert(
      fc.property(
        l.arb,
        fc.constantFrom(...fields),
        fc.oneof(fc.constant('over'), fc.constant('negative'), fc.constant('fraction')),
        fc.nat(1000),
        (x, field, how, extra) => {
          const bits = l.widths[field];
          const limit = bits === 64 ? 2 ** 53 : 2 ** bits;
          const bad = how === 'over' ? limit + extra : how === 'negative' ? -1 - extra : 0.5 + extra;
          const view = new DataView(new ArrayBuffer(span(l)));
          const call = () => l.enc(view, 0, { ...(x as object), [field]: bad });
          expect(call).toThrow(RangeError);
          expect(call).toThrow(field);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('specific range rules', () => {
  it('names the field and the width in the message', () => {
    const view = new DataView(new ArrayBuffer(CTRL_SEG_SIZE));
    const ok = { opmod: 0, wqeIndex: 0, opcode: 0, qpn: 0, ds: 1, signature: 0, fence: 0, ce: 0, se: false, imm: 0 };
    expect(() => encodeCtrlSeg(view, 0, { ...ok, qpn: 0x1000000 })).toThrow('qpn 0x1000000 does not fit 24 bits');
  });

  it('an MTT address must be 4 KiB aligned', () => {
    fc.assert(
      fc.property(u(40), fc.integer({ min: 1, max: 4095 }), (page, low) => {
        const view = new DataView(new ArrayBuffer(MTT_SIZE));
        expect(() => encodeMtt(view, 0, { addr: page * 4096 + low, read: true, write: true })).toThrow(RangeError);
      }),
    );
  });

  it('a u64 of 2^53 or more in memory throws on decode instead of rounding', () => {
    const view = new DataView(new ArrayBuffer(KLM_SIZE));
    view.setUint32(8, 0x00200000);
    expect(() => decodeKlm(view, 0)).toThrow(/va .* does not fit 53 bits/);
  });

  it('EQE data must be exactly 28 bytes', () => {
    const view = new DataView(new ArrayBuffer(EQE_SIZE));
    expect(() => encodeEqe(view, 0, { type: 0, subType: 0, data: new Uint8Array(27), signature: 0, owner: 1 })).toThrow(
      RangeError,
    );
  });

  it('a page-fault EQE of another sub_type does not decode as a page fault', () => {
    const view = new DataView(new ArrayBuffer(EQE_SIZE));
    view.setUint8(3, 7);
    expect(() => decodeEqePageFault(view, 0)).toThrow(RangeError);
  });
});

describe('inline data segment', () => {
  it('round-trips its data, padded to 16 bytes, and touches nothing past the padding', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.integer({ min: 0, max: 40 }), (data, off) => {
        const before = new Uint8Array(off + 400).fill(0xee);
        const bytes = before.slice();
        const view = new DataView(bytes.buffer);
        const ds = encodeInlineSeg(view, off, data);
        expect(ds).toBe(inlineSegDs(data.length));
        expect(ds).toBe(Math.ceil((data.length + 4) / 16));
        expect(decodeInlineSeg(view, off)).toEqual(data);
        for (let i = off + 4 + data.length; i < off + ds * 16; i++) expect(bytes[i]).toBe(0);
        for (let i = 0; i < bytes.length; i++) {
          if ((i < off || i >= off + ds * 16) && bytes[i] !== before[i]) expect.fail(`byte ${i} changed`);
        }
      }),
      { numRuns: 50 },
    );
  });
});
