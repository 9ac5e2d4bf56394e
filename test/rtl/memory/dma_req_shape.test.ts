/**
 * DMA requests have one shape (pcie.ts dmaRead / dmaWrite): every field present, in the DMA
 * mover's order, so the link's reads of them stay monomorphic; and absent values are what the
 * link reads as absent (undefined; qpn and wqe -1, as `?? -1` gave).
 */
import { describe, expect, it } from 'vitest';
import { dmaRead, dmaWrite } from '../../../src/rtl/memory/pcie.ts';

const ORDER = ['kind', 'addr', 'length', 'tag', 'data', 'landed', 'owned', 'dst', 'dstOff', 'qpn', 'wqe'];

describe('DMA request shape', () => {
  it('reads and writes carry every field in one order', () => {
    const dst = new Uint8Array(8);
    const land = { fire: (): void => undefined };
    expect(Object.keys(dmaRead(64, 8, 3))).toEqual(ORDER);
    expect(Object.keys(dmaRead(64, 8, 3, dst, 0))).toEqual(ORDER);
    expect(Object.keys(dmaWrite(64, dst, 0, land, true))).toEqual(ORDER);
  });

  it('the values are those of the literals they replace', () => {
    const dst = new Uint8Array(8);
    expect(dmaRead(64, 8, 3)).toEqual({ kind: 'read', addr: 64, length: 8, tag: 3, data: undefined, landed: undefined, owned: undefined, dst: undefined, dstOff: undefined, qpn: -1, wqe: -1 });
    expect(dmaRead(64, 8, 3, dst, 4).dst).toBe(dst);
    expect(dmaRead(64, 8, 3, dst, 4).dstOff).toBe(4);
    const w = dmaWrite(128, dst, 7, undefined, undefined);
    expect([w.kind, w.addr, w.length, w.tag, w.data, w.owned, w.landed]).toEqual(['write', 128, 8, 7, dst, undefined, undefined]);
  });
});
