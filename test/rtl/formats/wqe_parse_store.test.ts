/**
 * parseWqeInto reuses one store for every WQE (a send queue slot's): whatever was parsed into it
 * before (more data segments, inline data, a parse that threw half way), the next parse returns
 * exactly what a fresh parseWqe returns, or throws the same error.
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { WqeOpcode } from '../../../src/rtl/formats/constants.ts';
import { WqeParseStore, parseWqe, parseWqeInto, type ParsedWqe } from '../../../src/rtl/formats/wqe_parse.ts';

const WQE_BYTES = 16 * 16;

/** A WQE's bytes: random, with a chosen opcode and ds, each DS kept random, made a small pointer or small inline data. */
const wqeArb = fc
  .record({
    opcode: fc.constantFrom(WqeOpcode.NOP, WqeOpcode.SEND, WqeOpcode.RDMA_READ, WqeOpcode.RDMA_WRITE, WqeOpcode.ATOMIC_FA, WqeOpcode.UMR, 0x55),
    ds: fc.integer({ min: 0, max: 16 }),
    bytes: fc.uint8Array({ minLength: WQE_BYTES, maxLength: WQE_BYTES }),
    shapes: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 16, maxLength: 16 }),
  })
  .map(({ opcode, ds, bytes, shapes }) => {
    const b = bytes.slice();
    b[0] = 0; // opmod
    b[3] = opcode;
    b[7] = ds;
    for (let i = 1; i < 16; i++) {
      const at = 16 * i;
      if (shapes[i] === 1) {
        // a pointer (or remote address) whose 64-bit address fits 2^53
        b[at] = 0;
        b[at + 1] &= 0x1f;
        b[at + 8] = 0;
        b[at + 9] &= 0x1f;
      } else if (shapes[i] === 2) {
        // inline data of at most 40 bytes
        b[at] = 0x80;
        b[at + 1] = 0;
        b[at + 2] = 0;
        b[at + 3] %= 41;
      }
    }
    return b;
  });

function outcome(parse: () => ParsedWqe): { ok: ParsedWqe } | { err: string } {
  try {
    return { ok: parse() };
  } catch (e) {
    return { err: String(e) };
  }
}

describe('parseWqeInto', () => {
  it('parses each WQE of a sequence into one store as parseWqe does into a fresh one', () => {
    fc.assert(
      fc.property(fc.array(wqeArb, { minLength: 2, maxLength: 8 }), (wqes) => {
        const store = new WqeParseStore();
        for (const bytes of wqes) {
          const view = new DataView(bytes.buffer);
          expect(outcome(() => parseWqeInto(view, 0, store))).toEqual(outcome(() => parseWqe(view, 0)));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('returns the store\'s own objects for the common shapes', () => {
    const b = new Uint8Array(64);
    b[3] = WqeOpcode.RDMA_READ;
    b[7] = 3; // ctrl, raddr, one pointer
    const store = new WqeParseStore();
    const w = parseWqeInto(new DataView(b.buffer), 0, store);
    expect(w).toBe(store.rdma);
    expect(w.kind === 'rdma' && w.data.length).toBe(1);
    expect(parseWqeInto(new DataView(b.buffer), 0, store)).toBe(w);
  });
});
