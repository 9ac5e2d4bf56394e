import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ALL_ACCESS,
  AccessBits,
  MkeyTable,
  NOT_BOUND_QPN,
  incRkey,
  keyIndex,
  keyTag,
  makeKey,
  mergeSegments,
  translate,
  type ModelMkey,
  type MttEntry,
  type Segment,
  type XlateError,
  type XlateRequest,
  type XlateResult,
} from '../../src/model/index.ts';
import { MAX_GENERATED_KLMS_DEPTH, keyOf, mkeyScenarioArb } from '../support/mkey_arb.ts';

const TAG = 0x5a;

/** A valid PA mkey over [0x10000, 0x20000), every access, PD 1, no QP, unless overridden. */
function mk(over: Partial<ModelMkey> & { index: number }): ModelMkey {
  return {
    tag: TAG,
    free: false,
    accessMode: 'PA',
    access: ALL_ACCESS,
    pd: 1,
    qpn: NOT_BOUND_QPN,
    start: 0x10000,
    length: 0x10000,
    len64: false,
    logPageSize: 12,
    pgAccess: false,
    mtt: [],
    klm: [],
    ...over,
  };
}

/** The key of index `index` with the default tag. */
function k(index: number): number {
  return makeKey(index, TAG);
}

/** A local-read request of 16 bytes at 0x10000 through index 1, PD 1, QP 7, unless overridden. */
function rq(over: Partial<XlateRequest> = {}): XlateRequest {
  return { key: k(1), va: 0x10000, length: 16, access: 0, pd: 1, qpn: 7, ...over };
}

function ok(...segments: Segment[]): XlateResult {
  return { kind: 'ok', segments };
}

function err(error: XlateError, key: number): XlateResult {
  return { kind: 'error', error, key };
}

function page(addr: number, read = true, write = true): MttEntry {
  return { addr, read, write };
}

function total(segs: readonly Segment[]): number {
  return segs.reduce((sum, s) => sum + s.length, 0);
}

describe('keys', () => {
  it('splits and builds 32-bit keys, including indices with bit 23 set', () => {
    expect(makeKey(0xabcdef, 0x12)).toBe(0xabcdef12);
    expect(keyIndex(0xabcdef12)).toBe(0xabcdef);
    expect(keyTag(0xabcdef12)).toBe(0x12);
    expect(incRkey(0x12345ff)).toBe(0x1234500);
    expect(incRkey(0xabcdef12)).toBe(0xabcdef13);
  });
});

describe('MkeyTable', () => {
  it('lists by increasing index whatever the insertion order; set replaces, delete removes', () => {
    const table = MkeyTable.from([mk({ index: 30 }), mk({ index: 2 }), mk({ index: 0xffffff }), mk({ index: 7 })]);
    expect(table.list().map((m) => m.index)).toEqual([2, 7, 30, 0xffffff]);
    table.set(mk({ index: 7, tag: 1 }));
    expect(table.get(7)?.tag).toBe(1);
    expect(table.size).toBe(4);
    expect(table.delete(30)).toBe(true);
    expect(table.delete(30)).toBe(false);
    expect(table.has(30)).toBe(false);
    expect(table.list().map((m) => m.index)).toEqual([2, 7, 0xffffff]);
  });
});

describe('mergeSegments', () => {
  it('merges touching neighbours only, drops zero-length ones, keeps the input', () => {
    const input = [
      { pa: 0x1000, length: 0x100 },
      { pa: 0x1100, length: 0x100 },
      { pa: 0x5000, length: 0 },
      { pa: 0x1200, length: 0x10 },
      { pa: 0x1300, length: 0x10 },
      { pa: 0x1000, length: 0x10 },
    ];
    const copy = structuredClone(input);
    expect(mergeSegments(input)).toEqual([
      { pa: 0x1000, length: 0x210 },
      { pa: 0x1300, length: 0x10 },
      { pa: 0x1000, length: 0x10 },
    ]);
    expect(input).toEqual(copy);
    expect(mergeSegments([])).toEqual([]);
    expect(mergeSegments([{ pa: 3, length: 0 }])).toEqual([]);
  });
});

describe('outer key checks', () => {
  const table = MkeyTable.from([
    mk({ index: 1 }),
    mk({ index: 2, free: true }),
    mk({ index: 3, length: 0 }), // an unbound window
    mk({ index: 4, length: 0, len64: true, start: 0 }), // LEN64: the length field means nothing
    mk({ index: 5, qpn: 9 }),
    mk({ index: 6, access: AccessBits.REMOTE_READ }),
    mk({ index: 7, access: 0 }),
    mk({ index: 8, start: 0, length: 0x1000 }), // zero-based
    mk({ index: 0xabcdef, tag: 0x12 }),
  ]);

  it('length 0 is ok with no segments before any lookup', () => {
    expect(translate(table, rq({ key: k(99), length: 0 }))).toEqual(ok());
    expect(translate(table, rq({ key: k(2), length: 0, pd: 3, access: ALL_ACCESS, va: 0 }))).toEqual(ok());
  });

  it('INVALID_KEY: missing index or stale tag', () => {
    expect(translate(table, rq({ key: k(99) }))).toEqual(err('INVALID_KEY', k(99)));
    expect(translate(table, rq({ key: incRkey(k(1)) }))).toEqual(err('INVALID_KEY', incRkey(k(1))));
    expect(translate(table, rq({ key: 0xabcdef12 }))).toEqual(ok({ pa: 0x10000, length: 16 }));
  });

  it('FREE: a disabled mkey, or a window bound with length 0 (but not a LEN64 one)', () => {
    expect(translate(table, rq({ key: k(2) }))).toEqual(err('FREE', k(2)));
    expect(translate(table, rq({ key: k(3) }))).toEqual(err('FREE', k(3)));
    expect(translate(table, rq({ key: k(4) }))).toEqual(ok({ pa: 0x10000, length: 16 }));
  });

  it('PD, then QPN of a bound window; an unbound mkey takes any QP', () => {
    expect(translate(table, rq({ pd: 2 }))).toEqual(err('PD', k(1)));
    expect(translate(table, rq({ key: k(5), qpn: 8 }))).toEqual(err('QPN', k(5)));
    expect(translate(table, rq({ key: k(5), qpn: 9 }))).toEqual(ok({ pa: 0x10000, length: 16 }));
    expect(translate(table, rq({ qpn: 0x123456 }))).toEqual(ok({ pa: 0x10000, length: 16 }));
  });

  it('ACCESS: every needed bit granted; local read needs none', () => {
    expect(translate(table, rq({ key: k(7), access: 0 }))).toEqual(ok({ pa: 0x10000, length: 16 }));
    expect(translate(table, rq({ key: k(7), access: AccessBits.LOCAL_WRITE }))).toEqual(err('ACCESS', k(7)));
    expect(translate(table, rq({ key: k(6), access: AccessBits.REMOTE_READ }))).toEqual(
      ok({ pa: 0x10000, length: 16 }),
    );
    const readWrite = AccessBits.REMOTE_READ | AccessBits.REMOTE_WRITE;
    expect(translate(table, rq({ key: k(6), access: readWrite }))).toEqual(err('ACCESS', k(6)));
    expect(translate(table, rq({ key: k(6), access: AccessBits.REMOTE_ATOMIC }))).toEqual(err('ACCESS', k(6)));
  });

  it('BOUNDS: [va, va + length) inside [start, start + length); none for LEN64', () => {
    expect(translate(table, rq({ va: 0xffff, length: 2 }))).toEqual(err('BOUNDS', k(1)));
    expect(translate(table, rq({ va: 0x1fff0, length: 0x10 }))).toEqual(ok({ pa: 0x1fff0, length: 0x10 }));
    expect(translate(table, rq({ va: 0x1fff0, length: 0x11 }))).toEqual(err('BOUNDS', k(1)));
    expect(translate(table, rq({ va: 0x10000, length: 0x10000 }))).toEqual(ok({ pa: 0x10000, length: 0x10000 }));
    expect(translate(table, rq({ key: k(4), va: 0x7654_3210_0000, length: 5 }))).toEqual(
      ok({ pa: 0x7654_3210_0000, length: 5 }),
    );
    expect(translate(table, rq({ key: k(8), va: 0, length: 0x1000 }))).toEqual(ok({ pa: 0, length: 0x1000 }));
    expect(translate(table, rq({ key: k(8), va: 0xfff, length: 2 }))).toEqual(err('BOUNDS', k(8)));
  });

  it('checks run in order and the first failure wins', () => {
    const strict = MkeyTable.from([
      mk({ index: 1, qpn: 9, access: AccessBits.REMOTE_READ }),
      mk({ index: 2, free: true, qpn: 9, access: 0 }),
      mk({ index: 3, length: 0, qpn: 9 }),
    ]);
    const wrong = { pd: 2, qpn: 8, access: ALL_ACCESS, va: 0, length: 0x100000 };
    // Stale tag with everything else wrong too.
    expect(translate(strict, rq({ ...wrong, key: incRkey(k(1)) }))).toEqual(err('INVALID_KEY', incRkey(k(1))));
    // Free (or unbound) with wrong PD, QPN, access, bounds.
    expect(translate(strict, rq({ ...wrong, key: k(2) }))).toEqual(err('FREE', k(2)));
    expect(translate(strict, rq({ ...wrong, key: k(3) }))).toEqual(err('FREE', k(3)));
    // Wrong PD and QPN and access and out of bounds.
    expect(translate(strict, rq({ ...wrong }))).toEqual(err('PD', k(1)));
    // Wrong QPN, access, bounds.
    expect(translate(strict, rq({ ...wrong, pd: 1 }))).toEqual(err('QPN', k(1)));
    // Missing access and out of bounds.
    expect(translate(strict, rq({ ...wrong, pd: 1, qpn: 9 }))).toEqual(err('ACCESS', k(1)));
    expect(translate(strict, rq({ ...wrong, pd: 1, qpn: 9, access: AccessBits.REMOTE_READ }))).toEqual(
      err('BOUNDS', k(1)),
    );
  });
});

describe('MTT mode', () => {
  // 4 KiB pages, start 0x234 into its page: entry 0 holds [start, start + 0xdcc).
  const unaligned = mk({
    index: 2,
    accessMode: 'MTT',
    start: 0x4000_0234,
    length: 0x3000,
    mtt: [page(0xa000_0000), page(0xb000_0000), page(0xc000_0000), page(0xd000_0000)],
  });
  // 2 MiB pages, start 1 MiB into its page.
  const huge = mk({
    index: 3,
    accessMode: 'MTT',
    logPageSize: 21,
    start: 0x1_0030_0000,
    length: 0x30_0000,
    mtt: [page(0x4_0000_0000), page(0x8_0020_0000)],
  });
  const contiguous = mk({ index: 4, accessMode: 'MTT', start: 0x10000, length: 0x2000, mtt: [page(0x5000), page(0x6000)] });
  const short = mk({ index: 5, accessMode: 'MTT', start: 0x10000, length: 0x3000, mtt: [page(0x5000), page(0x9000)] });
  const table = MkeyTable.from([unaligned, huge, contiguous, short]);

  it('indexes entries from the page holding start, with the first page offset', () => {
    expect(translate(table, rq({ key: k(2), va: 0x4000_0234, length: 4 }))).toEqual(ok({ pa: 0xa000_0234, length: 4 }));
    expect(translate(table, rq({ key: k(2), va: 0x4000_0f00, length: 0x1200 }))).toEqual(
      ok({ pa: 0xa000_0f00, length: 0x100 }, { pa: 0xb000_0000, length: 0x1000 }, { pa: 0xc000_0000, length: 0x100 }),
    );
    expect(translate(table, rq({ key: k(2), va: 0x4000_3233, length: 1 }))).toEqual(ok({ pa: 0xd000_0233, length: 1 }));
  });

  it('handles 2 MiB pages', () => {
    expect(translate(table, rq({ key: k(3), va: 0x1_0038_0000, length: 0x10_0000 }))).toEqual(
      ok({ pa: 0x4_0018_0000, length: 0x8_0000 }, { pa: 0x8_0020_0000, length: 0x8_0000 }),
    );
    expect(translate(table, rq({ key: k(3), va: 0x1_0030_0000, length: 0x30_0000 }))).toEqual(
      ok({ pa: 0x4_0010_0000, length: 0x10_0000 }, { pa: 0x8_0020_0000, length: 0x20_0000 }),
    );
  });

  it('merges physically consecutive pages', () => {
    expect(translate(table, rq({ key: k(4), va: 0x10800, length: 0x1000 }))).toEqual(ok({ pa: 0x5800, length: 0x1000 }));
  });

  it('a range beyond the entries is BOUNDS; the part that has entries translates', () => {
    expect(translate(table, rq({ key: k(5), va: 0x10000, length: 0x3000 }))).toEqual(err('BOUNDS', k(5)));
    expect(translate(table, rq({ key: k(5), va: 0x11f00, length: 0x100 }))).toEqual(ok({ pa: 0x9f00, length: 0x100 }));
  });

  describe('ODP (pgAccess)', () => {
    const entries = [page(0xa000), page(0xd000, true, false), page(0xf000, false, false)];
    const odp = mk({ index: 6, accessMode: 'MTT', start: 0x20000, length: 0x3000, pgAccess: true, mtt: entries });
    const pinned = mk({ ...odp, index: 7, pgAccess: false });
    const odpTable = MkeyTable.from([odp, pinned]);

    it('a read faults on a page without RD, after the bytes before it', () => {
      expect(translate(odpTable, rq({ key: k(6), va: 0x20800, length: 0x2000 }))).toEqual({
        kind: 'fault',
        va: 0x22000,
        bytesCommitted: 0x1800,
        write: false,
      });
      expect(translate(odpTable, rq({ key: k(6), va: 0x22000, length: 4 }))).toEqual({
        kind: 'fault',
        va: 0x22000,
        bytesCommitted: 0,
        write: false,
      });
      const remoteRead = rq({ key: k(6), va: 0x21000, length: 0x10, access: AccessBits.REMOTE_READ });
      expect(translate(odpTable, remoteRead)).toEqual(ok({ pa: 0xd000, length: 0x10 }));
    });

    it('a write (local or remote) or an atomic also needs WR', () => {
      const write = rq({ key: k(6), va: 0x20800, length: 0x2000, access: AccessBits.LOCAL_WRITE });
      expect(translate(odpTable, write)).toEqual({ kind: 'fault', va: 0x21000, bytesCommitted: 0x800, write: true });
      for (const access of [AccessBits.REMOTE_WRITE, AccessBits.REMOTE_ATOMIC]) {
        expect(translate(odpTable, rq({ key: k(6), va: 0x21000, length: 8, access }))).toEqual({
          kind: 'fault',
          va: 0x21000,
          bytesCommitted: 0,
          write: true,
        });
      }
      const firstPage = rq({ key: k(6), va: 0x20000, length: 0x1000, access: AccessBits.REMOTE_WRITE });
      expect(translate(odpTable, firstPage)).toEqual(ok({ pa: 0xa000, length: 0x1000 }));
    });

    it('without pgAccess the bits are ignored', () => {
      const write = rq({ key: k(7), va: 0x20800, length: 0x2000, access: AccessBits.LOCAL_WRITE });
      expect(translate(odpTable, write)).toEqual(
        ok({ pa: 0xa800, length: 0x800 }, { pa: 0xd000, length: 0x1000 }, { pa: 0xf000, length: 0x800 }),
      );
    });
  });
});

describe('KLMS mode', () => {
  const pa = mk({ index: 1, start: 0, length: 0x10000 });
  const stale = incRkey(k(1));

  it('splits across entries, skipping bcount 0 ones', () => {
    const klms = mk({
      index: 10,
      accessMode: 'KLMS',
      start: 0x1000_0000,
      length: 0x300,
      klm: [
        { bcount: 0x100, key: k(1), va: 0x5000 },
        { bcount: 0, key: k(99), va: 0 }, // never used: a missing key here is no error
        { bcount: 0x200, key: k(1), va: 0x9000 },
      ],
    });
    const table = MkeyTable.from([pa, klms]);
    expect(translate(table, rq({ key: k(10), va: 0x1000_0080, length: 0x200 }))).toEqual(
      ok({ pa: 0x5080, length: 0x80 }, { pa: 0x9000, length: 0x180 }),
    );
    expect(translate(table, rq({ key: k(10), va: 0x1000_0150, length: 0x10 }))).toEqual(ok({ pa: 0x9050, length: 0x10 }));
    expect(translate(table, rq({ key: k(10), va: 0x1000_0100, length: 0x200 }))).toEqual(ok({ pa: 0x9000, length: 0x200 }));
    expect(translate(table, rq({ key: k(10), va: 0x1000_00ff, length: 1 }))).toEqual(ok({ pa: 0x50ff, length: 1 }));
  });

  it('merges pieces that are physically consecutive', () => {
    const klms = mk({
      index: 10,
      accessMode: 'KLMS',
      start: 0,
      length: 0x200,
      klm: [
        { bcount: 0x100, key: k(1), va: 0x5000 },
        { bcount: 0x100, key: k(1), va: 0x5100 },
      ],
    });
    expect(translate(MkeyTable.from([pa, klms]), rq({ key: k(10), va: 0x80, length: 0x100 }))).toEqual(
      ok({ pa: 0x5080, length: 0x100 }),
    );
  });

  it('running off the end of the list is BOUNDS on the indirect key', () => {
    const klms = mk({
      index: 10,
      accessMode: 'KLMS',
      start: 0x1000,
      length: 0x400,
      klm: [
        { bcount: 0x100, key: k(1), va: 0x5000 },
        { bcount: 0x200, key: k(1), va: 0x9000 },
      ],
    });
    const table = MkeyTable.from([pa, klms]);
    expect(translate(table, rq({ key: k(10), va: 0x12f0, length: 0x20 }))).toEqual(err('BOUNDS', k(10)));
    expect(translate(table, rq({ key: k(10), va: 0x1300, length: 1 }))).toEqual(err('BOUNDS', k(10)));
    expect(translate(table, rq({ key: k(10), va: 0x12f0, length: 0x10 }))).toEqual(ok({ pa: 0x91f0, length: 0x10 }));
  });

  it('walks nested KLMS keys down to MTT and PA', () => {
    const mtt = mk({ index: 2, accessMode: 'MTT', start: 0x30000, length: 0x1000, mtt: [page(0xe000)] });
    const inner = mk({
      index: 21,
      accessMode: 'KLMS',
      start: 0,
      length: 0x200,
      klm: [
        { bcount: 0x80, key: k(2), va: 0x30000 },
        { bcount: 0x180, key: k(1), va: 0x7000 },
      ],
    });
    const outer = mk({ index: 20, accessMode: 'KLMS', start: 0, length: 0x100, klm: [{ bcount: 0x100, key: k(21), va: 0x50 }] });
    const table = MkeyTable.from([pa, mtt, inner, outer]);
    expect(translate(table, rq({ key: k(20), va: 0, length: 0x100 }))).toEqual(
      ok({ pa: 0xe050, length: 0x30 }, { pa: 0x7000, length: 0xd0 }),
    );
  });

  it('nested keys get no PD, QPN or access check', () => {
    const foreign = mk({ index: 2, start: 0, length: 0x10000, pd: 9, qpn: 77, access: 0 });
    const klms = mk({ index: 10, accessMode: 'KLMS', start: 0, length: 0x100, klm: [{ bcount: 0x100, key: k(2), va: 0x4000 }] });
    const req = rq({ key: k(10), va: 0, length: 0x100, access: AccessBits.REMOTE_WRITE, qpn: 3 });
    expect(translate(MkeyTable.from([foreign, klms]), req)).toEqual(ok({ pa: 0x4000, length: 0x100 }));
  });

  it('nested INVALID_KEY, FREE and BOUNDS report the nested key', () => {
    const nested = [
      mk({ index: 2, free: true, start: 0 }),
      mk({ index: 3, length: 0, start: 0 }),
      mk({ index: 4, start: 0, length: 0x80 }),
      mk({ index: 5, accessMode: 'MTT', start: 0, length: 0x2000, mtt: [page(0x1000)] }),
    ];
    const through = (key: number, va = 0): ModelMkey =>
      mk({
        index: 10,
        accessMode: 'KLMS',
        start: 0,
        length: 0x200,
        klm: [
          { bcount: 0x100, key: k(1), va: 0x5000 },
          { bcount: 0x100, key, va },
        ],
      });
    const req = rq({ key: k(10), va: 0x80, length: 0x100 });
    const run = (key: number, va = 0): XlateResult => translate(MkeyTable.from([pa, ...nested, through(key, va)]), req);
    expect(run(stale)).toEqual(err('INVALID_KEY', stale));
    expect(run(k(99))).toEqual(err('INVALID_KEY', k(99)));
    expect(run(k(2))).toEqual(err('FREE', k(2)));
    expect(run(k(3))).toEqual(err('FREE', k(3)));
    expect(run(k(4), 0x70)).toEqual(err('BOUNDS', k(4)));
    expect(run(k(4), 0)).toEqual(ok({ pa: 0x5080, length: 0x80 }, { pa: 0, length: 0x80 }));
    expect(run(k(5), 0xfc0)).toEqual(err('BOUNDS', k(5)));
    expect(run(k(5), 0xf80)).toEqual(ok({ pa: 0x5080, length: 0x80 }, { pa: 0x1f80, length: 0x80 }));
  });

  it('the indirection limit counts the KLMS mkeys on the path', () => {
    // c1 -> PA, c2 -> c1, ..., c6 -> c5: c_n has n KLMS mkeys on its path.
    const chain: ModelMkey[] = [pa];
    for (let n = 1; n <= 6; n++) {
      const klm = n === 1 ? { bcount: 0x100, key: k(1), va: 0x2000 } : { bcount: 0x100, key: k(100 + n - 1), va: 0 };
      chain.push(mk({ index: 100 + n, accessMode: 'KLMS', start: 0, length: 0x100, klm: [klm] }));
    }
    const table = MkeyTable.from(chain);
    const via = (n: number): XlateRequest => rq({ key: k(100 + n), va: 0x10, length: 0x20 });
    expect(translate(table, via(4))).toEqual(ok({ pa: 0x2010, length: 0x20 }));
    // Five KLMS mkeys: the fifth, c1, is one too many under the default limit of 4.
    expect(translate(table, via(5))).toEqual(err('INDIRECTION', k(101)));
    expect(translate(table, via(5), { maxIndirection: 5 })).toEqual(ok({ pa: 0x2010, length: 0x20 }));
    expect(translate(table, via(6), { maxIndirection: 5 })).toEqual(err('INDIRECTION', k(101)));
    expect(translate(table, via(3), { maxIndirection: 2 })).toEqual(err('INDIRECTION', k(101)));
    expect(translate(table, via(1), { maxIndirection: 0 })).toEqual(err('INDIRECTION', k(101)));
    // PA and MTT mkeys are not indirections.
    expect(translate(table, rq({ key: k(1), va: 0x100 }), { maxIndirection: 0 })).toEqual(ok({ pa: 0x100, length: 16 }));
  });

  it('a KLM cycle ends at the indirection limit', () => {
    const loop = mk({ index: 10, accessMode: 'KLMS', start: 0, length: 0x100, klm: [{ bcount: 0x100, key: k(10), va: 0 }] });
    expect(translate(MkeyTable.from([loop]), rq({ key: k(10), va: 0, length: 8 }))).toEqual(err('INDIRECTION', k(10)));
  });

  describe('faults through KLMs', () => {
    const odp = mk({
      index: 2,
      accessMode: 'MTT',
      start: 0x40000,
      length: 0x3000,
      pgAccess: true,
      mtt: [page(0xa000), page(0, false, false), page(0xc000)],
    });

    it('report the outer va and the bytes committed over all pieces', () => {
      const klms = mk({
        index: 10,
        accessMode: 'KLMS',
        start: 0x1000,
        length: 0x2100,
        klm: [
          { bcount: 0x100, key: k(1), va: 0x5000 },
          { bcount: 0x2000, key: k(2), va: 0x40800 },
        ],
      });
      const table = MkeyTable.from([pa, odp, klms]);
      // 0x80 bytes through PA, then 0x800 through page 0, then page 1 is not present.
      const req = rq({ key: k(10), va: 0x1080, length: 0x1000, access: AccessBits.REMOTE_WRITE });
      expect(translate(table, req)).toEqual({ kind: 'fault', va: 0x1900, bytesCommitted: 0x880, write: true });
    });

    it('the first error or fault in va order wins', () => {
      const faultFirst = mk({
        index: 10,
        accessMode: 'KLMS',
        start: 0,
        length: 0x1100,
        klm: [
          { bcount: 0x1000, key: k(2), va: 0x41000 },
          { bcount: 0x100, key: stale, va: 0 },
        ],
      });
      const errorFirst = mk({
        index: 11,
        accessMode: 'KLMS',
        start: 0,
        length: 0x1100,
        klm: [
          { bcount: 0x100, key: stale, va: 0 },
          { bcount: 0x1000, key: k(2), va: 0x41000 },
        ],
      });
      const table = MkeyTable.from([pa, odp, faultFirst, errorFirst]);
      expect(translate(table, rq({ key: k(10), va: 0, length: 0x1100 }))).toEqual({
        kind: 'fault',
        va: 0,
        bytesCommitted: 0,
        write: false,
      });
      expect(translate(table, rq({ key: k(11), va: 0, length: 0x1100 }))).toEqual(err('INVALID_KEY', stale));
    });
  });
});

describe('properties over generated scenarios', () => {
  const outcome = (r: XlateResult): string => (r.kind === 'error' ? r.error : r.kind);

  it('ok results cover exactly the request, in canonical (merged) form', () => {
    fc.assert(
      fc.property(mkeyScenarioArb(), ({ table, requests }) => {
        const t = MkeyTable.from(table);
        for (const req of requests) {
          const r = translate(t, req);
          if (r.kind === 'ok') {
            expect(total(r.segments)).toBe(req.length);
            expect(mergeSegments(r.segments)).toEqual(r.segments);
          }
          if (r.kind === 'fault') {
            // Translation runs in va order, so the bytes before the fault are exactly va - req.va.
            expect(r.bytesCommitted).toBe(r.va - req.va);
            expect(r.bytesCommitted).toBeGreaterThanOrEqual(0);
            expect(r.bytesCommitted).toBeLessThan(req.length);
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('an ok range split in two translates to the same merged segments', () => {
    fc.assert(
      fc.property(mkeyScenarioArb(), fc.integer({ min: 1, max: 2 ** 30 }), ({ table, requests }, cut) => {
        const t = MkeyTable.from(table);
        for (const req of requests) {
          const whole = translate(t, req);
          if (whole.kind !== 'ok' || req.length < 2) continue;
          const head = 1 + (cut % (req.length - 1));
          const a = translate(t, { ...req, length: head });
          const b = translate(t, { ...req, va: req.va + head, length: req.length - head });
          if (a.kind !== 'ok' || b.kind !== 'ok') throw new Error('a part of an ok range failed');
          expect(mergeSegments([...a.segments, ...b.segments])).toEqual(whole.segments);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('outcomes do not depend on the order mkeys were stored', () => {
    fc.assert(
      fc.property(mkeyScenarioArb(), ({ table, requests }) => {
        const forward = MkeyTable.from(table);
        const backward = MkeyTable.from([...table].reverse());
        for (const req of requests) expect(translate(backward, req)).toEqual(translate(forward, req));
      }),
      { numRuns: 200 },
    );
  });

  it('mergeSegments is idempotent and keeps the total length', () => {
    const segment = fc.record({ pa: fc.integer({ min: 0, max: 64 }), length: fc.integer({ min: 0, max: 16 }) });
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 12 }), (segs) => {
        const once = mergeSegments(segs);
        expect(mergeSegments(once)).toEqual(once);
        expect(total(once)).toBe(total(segs));
        expect(once.every((s) => s.length > 0)).toBe(true);
      }),
    );
  });

  it('the generator is well formed', () => {
    fc.assert(
      fc.property(mkeyScenarioArb(), ({ table, requests }) => {
        expect(new Set(table.map((m) => m.index)).size).toBe(table.length);
        expect(requests.length).toBeGreaterThan(0);
        for (const m of table) {
          expect(m.index).toBeGreaterThanOrEqual(0);
          expect(m.index).toBeLessThanOrEqual(0xffffff);
          expect(m.tag).toBeGreaterThanOrEqual(0);
          expect(m.tag).toBeLessThanOrEqual(0xff);
          const pageSize = 2 ** m.logPageSize;
          const addrs = m.mtt.map((e) => e.addr);
          expect(new Set(addrs).size).toBe(addrs.length);
          for (const addr of addrs) {
            expect(addr % pageSize).toBe(0);
            expect(addr).toBeLessThan(2 ** 40);
          }
        }
      }),
      { numRuns: 200 },
    );
  });

  it('1,000 sampled scenarios: at least 30% ok, and every outcome kind occurs', () => {
    const samples = fc.sample(mkeyScenarioArb(), { numRuns: 1000, seed: 0x5eed });
    const counts = new Map<string, number>();
    let requests = 0;
    let deepest = 0;
    for (const { table, requests: reqs } of samples) {
      const t = MkeyTable.from(table);
      for (const req of reqs) {
        const kind = outcome(translate(t, req));
        counts.set(kind, (counts.get(kind) ?? 0) + 1);
        requests++;
      }
      deepest = Math.max(deepest, klmsDepth(t));
    }
    expect((counts.get('ok') ?? 0) / requests).toBeGreaterThanOrEqual(0.3);
    for (const kind of ['ok', 'fault', 'INVALID_KEY', 'FREE', 'PD', 'QPN', 'ACCESS', 'BOUNDS', 'INDIRECTION']) {
      expect(counts.get(kind) ?? 0, kind).toBeGreaterThan(0);
    }
    expect(deepest).toBe(MAX_GENERATED_KLMS_DEPTH);
  });
});

/** The longest acyclic chain of KLMS mkeys in a table (cycles are not counted). */
function klmsDepth(table: MkeyTable): number {
  const depthOf = (m: ModelMkey, onPath: Set<number>): number => {
    if (m.accessMode !== 'KLMS' || onPath.has(m.index)) return 0;
    onPath.add(m.index);
    let below = 0;
    for (const klm of m.klm) {
      const target = table.get(keyIndex(klm.key));
      if (target !== undefined && keyOf(target) === klm.key) below = Math.max(below, depthOf(target, onPath));
    }
    onPath.delete(m.index);
    return 1 + below;
  };
  return Math.max(0, ...table.list().map((m) => depthOf(m, new Set())));
}
