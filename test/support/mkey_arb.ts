/**
 * fast-check arbitraries of translation scenarios: an mkey table and requests against it.
 *
 * Shared by the reference-model tests and the cycle-model equivalence test, so it produces
 * plain `ModelMkey` / `XlateRequest` values and knows nothing of either implementation beyond
 * the types. Generation is in two steps so shrinking stays useful: first independent "drafts"
 * (plain records), then a deterministic `resolve` that turns drafts into consistent mkeys
 * (KLMs aimed at other mkeys' ranges, requests aimed at an mkey's range).
 */
import fc from 'fast-check';
import {
  ALL_ACCESS,
  NOT_BOUND_QPN,
  incRkey,
  makeKey,
  type AccessMode,
  type Klm,
  type ModelMkey,
  type MttEntry,
  type XlateRequest,
} from '../../src/model/index.ts';

/** A translation scenario: the table's mkeys and requests against it. */
export interface MkeyScenario {
  table: ModelMkey[];
  requests: XlateRequest[];
}

/** Size knobs of `mkeyScenarioArb`. */
export interface MkeyScenarioOptions {
  /** At most this many mkeys (at least 1). Default 12. */
  maxMkeys?: number;
  /** At most this many requests (at least 1). Default 4. */
  maxRequests?: number;
  /** PDs are 1..pds. Default 3. */
  pds?: number;
}

/** Deepest chain of KLMS mkeys the generator builds on purpose (cycles aside). */
export const MAX_GENERATED_KLMS_DEPTH = 5;

/** Fractions are integers in [0, FRACTION]; fast-check biases them towards the ends (edges). */
const FRACTION = 1 << 20;
/** Most pages (of the mkey's page size) in a PA or MTT range: "a few pages". */
const MAX_PAGES = 3;
/** MTT entries generated per mkey: enough for MAX_PAGES pages plus an unaligned start. */
const MTT_SLOTS = MAX_PAGES + 1;
const PAGE_4K = 12;
const PAGE_2M = 21;

const fraction = fc.integer({ min: 0, max: FRACTION });

/** `fraction` scaled to an integer in [0, n - 1] (0 when n <= 0). */
function scaled(frac: number, n: number): number {
  if (n <= 0) return 0;
  return Math.min(n - 1, Math.floor((frac / FRACTION) * n));
}

interface KlmDraft {
  /** previousKlms: the latest KLMS mkey (builds chains); earlier: any mkey resolved before. */
  target: 'previousKlms' | 'earlier' | 'self' | 'missing' | 'stale';
  pick: number;
  offsetFrac: number;
  countFrac: number;
  /** One byte past the target's range: a nested BOUNDS. */
  overrun: boolean;
  /** bcount 0 (skipped by the walk). */
  empty: boolean;
}

interface MkeyDraft {
  index: number;
  tag: number;
  free: boolean;
  /** A window bound with length 0. */
  unbound: boolean;
  mode: AccessMode;
  access: number;
  pd: number;
  qpn: number;
  zeroBased: boolean;
  basePage: number;
  firstOffsetFrac: number;
  pages: number;
  lastTrimFrac: number;
  len64: boolean;
  logPageSize: number;
  pgAccess: boolean;
  /** 2 MiB frame numbers (distinct, so pages are distinct for either page size). */
  frames: number[];
  /** 4 KiB pages within the 2 MiB frame, used when the page size is 4 KiB. */
  subFrames: number[];
  /** Physically consecutive pages (their segments merge). */
  contiguous: boolean;
  present: { read: boolean; write: boolean }[];
  /** One MTT entry fewer than the range needs (a BOUNDS inside the range). */
  shortMtt: boolean;
  klm: KlmDraft[];
  /** The KLMS range one byte longer than its list (running off the end). */
  klmTail: boolean;
}

type RequestKind =
  | 'valid'
  | 'stale'
  | 'missing'
  | 'wrongPd'
  | 'wrongQpn'
  | 'extraAccess'
  | 'overRange'
  | 'belowStart'
  | 'zeroLength';

interface RequestDraft {
  kind: RequestKind;
  pick: number;
  accessBits: number;
  qpn: number;
  offsetFrac: number;
  lengthFrac: number;
}

/** true with probability 1/n. */
function oneIn(n: number): fc.Arbitrary<boolean> {
  return fc.integer({ min: 1, max: n }).map((x) => x === 1);
}

function klmDraftArb(): fc.Arbitrary<KlmDraft> {
  return fc.record({
    target: fc.oneof(
      { weight: 4, arbitrary: fc.constant('previousKlms' as const) },
      { weight: 8, arbitrary: fc.constant('earlier' as const) },
      { weight: 1, arbitrary: fc.constant('self' as const) },
      { weight: 1, arbitrary: fc.constant('missing' as const) },
      { weight: 1, arbitrary: fc.constant('stale' as const) },
    ),
    pick: fc.nat(),
    offsetFrac: fraction,
    countFrac: fraction,
    overrun: oneIn(25),
    empty: oneIn(15),
  });
}

function mkeyDraftArb(pds: number): fc.Arbitrary<MkeyDraft> {
  const presence = fc.oneof(
    { weight: 8, arbitrary: fc.constant({ read: true, write: true }) },
    { weight: 1, arbitrary: fc.constant({ read: true, write: false }) },
    { weight: 1, arbitrary: fc.constant({ read: false, write: false }) },
  );
  return fc.record({
    // Mostly a small index range (collisions with KLM targets), a few full 24-bit indices.
    index: fc.oneof(
      { weight: 5, arbitrary: fc.integer({ min: 1, max: 40 }) },
      { weight: 1, arbitrary: fc.integer({ min: 0x100, max: 0xffffff }) },
    ),
    tag: fc.integer({ min: 0, max: 0xff }),
    free: oneIn(12),
    unbound: oneIn(40),
    mode: fc.oneof(
      { weight: 3, arbitrary: fc.constant('PA' as const) },
      { weight: 4, arbitrary: fc.constant('MTT' as const) },
      { weight: 3, arbitrary: fc.constant('KLMS' as const) },
    ),
    access: fc.integer({ min: 0, max: ALL_ACCESS }),
    pd: fc.integer({ min: 1, max: pds }),
    qpn: fc.oneof(
      { weight: 3, arbitrary: fc.constant(NOT_BOUND_QPN) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }) },
    ),
    zeroBased: oneIn(4),
    basePage: fc.integer({ min: 1, max: 1 << 18 }),
    firstOffsetFrac: fc.oneof(fc.constant(0), fraction),
    pages: fc.integer({ min: 1, max: MAX_PAGES }),
    lastTrimFrac: fc.oneof(fc.constant(0), fraction),
    len64: oneIn(5),
    logPageSize: fc.constantFrom(PAGE_4K, PAGE_2M),
    pgAccess: oneIn(3),
    // Room left for MTT_SLOTS contiguous 2 MiB pages below 2^40.
    frames: fc.uniqueArray(fc.integer({ min: 0, max: 2 ** (40 - PAGE_2M) - MTT_SLOTS }), {
      minLength: MTT_SLOTS,
      maxLength: MTT_SLOTS,
    }),
    subFrames: fc.array(fc.integer({ min: 0, max: 2 ** (PAGE_2M - PAGE_4K) - 1 }), {
      minLength: MTT_SLOTS,
      maxLength: MTT_SLOTS,
    }),
    contiguous: oneIn(3),
    present: fc.array(presence, { minLength: MTT_SLOTS, maxLength: MTT_SLOTS }),
    shortMtt: oneIn(25),
    klm: fc.array(klmDraftArb(), { minLength: 1, maxLength: 4 }),
    klmTail: oneIn(25),
  });
}

function requestDraftArb(): fc.Arbitrary<RequestDraft> {
  const kind = fc.oneof(
    { weight: 30, arbitrary: fc.constant('valid' as const) },
    { weight: 1, arbitrary: fc.constant('stale' as const) },
    { weight: 1, arbitrary: fc.constant('missing' as const) },
    { weight: 1, arbitrary: fc.constant('wrongPd' as const) },
    { weight: 1, arbitrary: fc.constant('wrongQpn' as const) },
    { weight: 1, arbitrary: fc.constant('extraAccess' as const) },
    { weight: 1, arbitrary: fc.constant('overRange' as const) },
    { weight: 1, arbitrary: fc.constant('belowStart' as const) },
    { weight: 1, arbitrary: fc.constant('zeroLength' as const) },
  );
  return fc.record({
    kind,
    pick: fc.nat(),
    accessBits: fc.integer({ min: 0, max: ALL_ACCESS }),
    qpn: fc.integer({ min: 1, max: 3 }),
    offsetFrac: fraction,
    lengthFrac: fraction,
  });
}

/** The key of an mkey (index and current tag). */
export function keyOf(mkey: ModelMkey): number {
  return makeKey(mkey.index, mkey.tag);
}

/** An index no mkey of `used` holds (the reserved 0x100 upward), for keys that name nothing. */
function missingIndex(used: ReadonlySet<number>): number {
  let index = 0x100;
  while (used.has(index)) index++;
  return index;
}

/**
 * The range shape shared by PA and MTT: unaligned start and a length of a few pages. A zero-based
 * range starts at 0, at byte 0 of its first page: mlx5's start_addr is also the first byte's page
 * offset (mlx5_ib.h:1720-1723), so no mkey has a first byte offset of its own.
 */
function rangeOf(d: MkeyDraft, pageSize: number): { start: number; length: number } {
  const firstOffset = d.zeroBased ? 0 : scaled(d.firstOffsetFrac, pageSize);
  const start = d.zeroBased ? 0 : d.basePage * pageSize + firstOffset;
  const length = Math.max(1, d.pages * pageSize - firstOffset - scaled(d.lastTrimFrac, pageSize));
  return { start, length };
}

function mttOf(d: MkeyDraft, start: number, length: number, pageSize: number): MttEntry[] {
  const needed = Math.ceil(((start % pageSize) + length) / pageSize);
  const count = d.shortMtt ? needed - 1 : needed;
  const entries: MttEntry[] = [];
  for (let i = 0; i < count; i++) {
    const frame = d.contiguous ? d.frames[0] : d.frames[i];
    const sub = pageSize === 2 ** PAGE_4K ? d.subFrames[d.contiguous ? 0 : i] : 0;
    // Contiguous pages may cross a 2 MiB frame for 4 KiB pages; still page-aligned and < 2^40.
    const addr = frame * 2 ** PAGE_2M + sub * 2 ** PAGE_4K + (d.contiguous ? i * pageSize : 0);
    entries.push({ addr, read: d.present[i].read, write: d.present[i].write });
  }
  return entries;
}

/** Turns drafts into a consistent table. KLMS mkeys are resolved last, each after its targets. */
function resolveTable(drafts: MkeyDraft[]): ModelMkey[] {
  // Non-KLMS first, so KLMs can aim at earlier mkeys; KLMS ones keep their relative order.
  const ordered = [...drafts.filter((d) => d.mode !== 'KLMS'), ...drafts.filter((d) => d.mode === 'KLMS')];
  const used = new Set(drafts.map((d) => d.index));
  const missing = missingIndex(used);
  const table: ModelMkey[] = [];
  // KLMS chain depth of each resolved mkey (0 for PA/MTT), to cap deliberate nesting.
  const depth: number[] = [];

  for (const d of ordered) {
    const base = {
      index: d.index,
      tag: d.tag,
      free: d.free,
      accessMode: d.mode,
      access: d.access,
      pd: d.pd,
      qpn: d.qpn,
      len64: false,
      logPageSize: PAGE_4K,
      pgAccess: false,
      mtt: [] as MttEntry[],
      klm: [] as Klm[],
    };
    let mkey: ModelMkey;
    let myDepth = 0;
    if (d.mode === 'PA') {
      const { start, length } = rangeOf(d, 2 ** PAGE_4K);
      mkey = { ...base, start, length, len64: d.len64 };
    } else if (d.mode === 'MTT') {
      const pageSize = 2 ** d.logPageSize;
      const { start, length } = rangeOf(d, pageSize);
      const mtt = mttOf(d, start, length, pageSize);
      mkey = { ...base, start, length, logPageSize: d.logPageSize, pgAccess: d.pgAccess, mtt };
    } else {
      const start = d.zeroBased ? 0 : d.basePage * 2 ** PAGE_4K + scaled(d.firstOffsetFrac, 2 ** PAGE_4K);
      const klm: Klm[] = [];
      for (const k of d.klm) {
        const resolved = resolveKlm(k, table, depth, missing, start);
        klm.push(resolved.klm);
        myDepth = Math.max(myDepth, resolved.depth + 1);
      }
      const total = klm.reduce((sum, k) => sum + k.bcount, 0);
      mkey = { ...base, start, length: total + (d.klmTail ? 1 : 0), klm };
    }
    if (d.unbound) mkey = { ...mkey, length: 0, len64: false };
    table.push(mkey);
    depth.push(myDepth);
  }
  return table;
}

/** One KLM aimed inside its target's range (or deliberately not), with the target's depth. */
function resolveKlm(
  k: KlmDraft,
  table: readonly ModelMkey[],
  depth: readonly number[],
  missing: number,
  selfStart: number,
): { klm: Klm; depth: number } {
  // Only targets that keep the deliberate chain within MAX_GENERATED_KLMS_DEPTH.
  const eligible = table.map((_, i) => i).filter((i) => depth[i] < MAX_GENERATED_KLMS_DEPTH);
  let kind = k.target;
  if (kind === 'previousKlms') {
    const klmsTargets = eligible.filter((i) => table[i].accessMode === 'KLMS');
    if (klmsTargets.length > 0) {
      const target = klmsTargets[klmsTargets.length - 1];
      return { klm: aimAt(k, table[target], keyOf(table[target])), depth: depth[target] };
    }
    kind = 'earlier';
  }
  if ((kind === 'earlier' || kind === 'stale') && eligible.length === 0) kind = 'self';
  switch (kind) {
    case 'earlier':
    case 'stale': {
      const target = eligible[k.pick % eligible.length];
      const key = keyOf(table[target]);
      return { klm: aimAt(k, table[target], kind === 'stale' ? incRkey(key) : key), depth: depth[target] };
    }
    case 'missing':
      return { klm: { bcount: k.empty ? 0 : 1 + scaled(k.countFrac, 2 ** PAGE_4K), key: makeKey(missing, 0), va: 0 }, depth: 0 };
    case 'self':
      // A cycle (only the indirection limit ends it). The mkey's own key is filled in later.
      return { klm: selfKlm(k, selfStart), depth: 0 };
  }
}

/** Placeholder key for a self-reference, fixed up by `fixSelfKeys`. */
const SELF_KEY = -1;

function selfKlm(k: KlmDraft, selfStart: number): Klm {
  return { bcount: k.empty ? 0 : 1 + scaled(k.countFrac, 2 ** PAGE_4K), key: SELF_KEY, va: selfStart };
}

/** A KLM covering part of `target`'s range, through `key`. */
function aimAt(k: KlmDraft, target: ModelMkey, key: number): Klm {
  const targetLength = Math.max(1, target.length);
  const offset = scaled(k.offsetFrac, targetLength);
  let bcount = 1 + scaled(k.countFrac, targetLength - offset);
  if (k.overrun) bcount += 1;
  if (k.empty) bcount = 0;
  return { bcount, key, va: target.start + offset };
}

/** Replaces the self-reference placeholder by the mkey's own key. */
function fixSelfKeys(table: ModelMkey[]): ModelMkey[] {
  return table.map((m) =>
    m.klm.some((k) => k.key === SELF_KEY)
      ? { ...m, klm: m.klm.map((k) => (k.key === SELF_KEY ? { ...k, key: keyOf(m) } : k)) }
      : m,
  );
}

/** One request from its draft, aimed at `table[pick % n]`. */
function resolveRequest(r: RequestDraft, table: readonly ModelMkey[], pds: number): XlateRequest {
  const mkey = table[r.pick % table.length];
  const length = Math.max(1, mkey.length);
  const offset = scaled(r.offsetFrac, length);
  const req: XlateRequest = {
    key: keyOf(mkey),
    va: mkey.start + offset,
    length: 1 + scaled(r.lengthFrac, length - offset),
    access: r.accessBits & mkey.access,
    pd: mkey.pd,
    qpn: mkey.qpn === NOT_BOUND_QPN ? r.qpn : mkey.qpn,
  };
  switch (r.kind) {
    case 'valid':
      return req;
    case 'stale':
      return { ...req, key: incRkey(req.key) };
    case 'missing':
      return { ...req, key: makeKey(missingIndex(new Set(table.map((m) => m.index))), mkey.tag) };
    case 'wrongPd':
      return { ...req, pd: pds > 1 ? (mkey.pd % pds) + 1 : mkey.pd + 1 };
    case 'wrongQpn':
      return { ...req, qpn: mkey.qpn === NOT_BOUND_QPN ? r.qpn : mkey.qpn + 1 };
    case 'extraAccess': {
      // A bit the mkey lacks, if it lacks any (else the request stays valid).
      const lacking = ALL_ACCESS & ~mkey.access;
      const bit = lacking & -lacking;
      return { ...req, access: req.access | bit };
    }
    case 'overRange':
      return { ...req, length: mkey.start + length - req.va + 1 + scaled(r.lengthFrac, 2 ** PAGE_4K) };
    case 'belowStart':
      // One or more bytes before the range (va stays >= 0; a start-0 mkey gets an over-range).
      return mkey.start > 0
        ? { ...req, va: mkey.start - 1 - scaled(r.offsetFrac, Math.min(mkey.start, 2 ** PAGE_4K)) }
        : { ...req, length: length + 1 };
    case 'zeroLength':
      return { ...req, length: 0, key: r.pick % 2 === 0 ? req.key : incRkey(req.key) };
  }
}

/**
 * Scenarios of 1..maxMkeys mkeys with distinct indices (PA, MTT, KLMS, nested KLMS up to
 * MAX_GENERATED_KLMS_DEPTH, plus rare self-cycles, missing keys and stale tags in KLMs) and
 * 1..maxRequests requests, most of them valid and in range.
 */
export function mkeyScenarioArb(opts: MkeyScenarioOptions = {}): fc.Arbitrary<MkeyScenario> {
  const maxMkeys = opts.maxMkeys ?? 12;
  const maxRequests = opts.maxRequests ?? 4;
  const pds = opts.pds ?? 3;
  return fc
    .record({
      mkeys: fc.uniqueArray(mkeyDraftArb(pds), { minLength: 1, maxLength: maxMkeys, selector: (d) => d.index }),
      requests: fc.array(requestDraftArb(), { minLength: 1, maxLength: maxRequests }),
    })
    .map(({ mkeys, requests }) => {
      const table = fixSelfKeys(resolveTable(mkeys));
      return { table, requests: requests.map((r) => resolveRequest(r, table, pds)) };
    });
}
