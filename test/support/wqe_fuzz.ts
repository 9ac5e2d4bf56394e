/**
 * The WQE fuzzer (issue 12), shared by test/rtl/transport/wqe_fuzz.test.ts and
 * `npm run bench -- fuzz`: fast-check generators of valid WQEs (data and UMR) and of mutations
 * (random bytes, fields at their extremes, ds too big or too small, unknown opcodes, UMR lists
 * too long, segments pointing anywhere, MTTs naming pages past host memory), written into a
 * user-space or a kernel QP's send queue by hand and doorbelled, and what one case must hold:
 * - nothing throws (crash), nothing is left in flight (hang);
 * - every WQE the ring holds completes: the send queue engine consumes exactly the WQEs the
 *   bytes make (ds, cut at the producer index), CQEs come for the signaled ones until the first
 *   error and for every one from it on (the later ones WR_FLUSH_ERR), and the QP is in ERR
 *   exactly when one failed;
 * - no byte of the process's host memory outside the registered writable ranges and the rings
 *   the device writes (CQs, EQs) changes (every device write is recorded as it lands), unless a
 *   kernel QP registered memory in the case (the kernel may name any page);
 * - the DMA-ownership checker (src/rtl/memory/dma_check.ts) finds no DMA, read or write, to a
 *   frame nobody gave the device (same exemption: a kernel's REG_MR may name any page);
 * - when every WQE is valid and unmutated (REG_MR only on a kernel QP: the model has no user
 *   QPs), the verbs reference model gives the same statuses and the same bytes in both buffers.
 */
import fc from 'fast-check';
import { Access, Testbed, type Context, type Qp } from '../../src/index.ts';
import { buildAtomicWqe, buildBindMwWqe, buildLocalInvWqe, buildRdmaWqe, buildRegMrWqe, buildSendWqe, wqeBasicBlocks } from '../../src/driver/wqe_builder.ts';
import { CeMode, CqeOpcode, FenceMode, syndromeToWcStatus, WqeOpcode, incRkey } from '../../src/rtl/formats/constants.ts';
import { ctrlCe, ctrlWqebbs } from '../../src/rtl/formats/ctrl_seg.ts';
import { decodeCqe } from '../../src/rtl/formats/cqe.ts';
import { queueAddr } from '../../src/rtl/memory/pas.ts';
import { HOST_VA_BASE } from '../../src/rtl/memory/host_space.ts';
import type { HostMem } from '../../src/rtl/memory/host_mem.ts';
import { VerbsModel } from '../../src/model/verbs/verbs_model.ts';
import { describeViolation } from '../../src/rtl/memory/dma_check.ts';
import type { ModelSendWr } from '../../src/model/verbs/types.ts';

/** A valid WQE over the case's real keys, then mutated (byte offsets in the WQE). */
export interface ValidItem {
  kind: 'write' | 'read' | 'send' | 'cas' | 'fadd' | 'reg' | 'inv' | 'bind' | 'readf';
  len: number;
  sges: number;
  /** Atomic operands: any 64-bit value (-1 is 2^64 - 1). */
  operand: bigint;
  mutations: { at: number; value: number }[];
}
/** One WQE of a case: raw bytes, or a valid one (possibly mutated). */
export type FuzzItem = { raw: Uint8Array } | { valid: ValidItem };

const KINDS = ['write', 'read', 'send', 'cas', 'fadd', 'reg', 'inv', 'bind', 'readf'] as const;
const BUF = 8192;

/** Offsets worth hitting: ds, opcode, fence/CE, raddr (8 bytes at 16), atomic operands, data segments, UMR fields. */
const FIELD_OFFSETS = [3, 7, 11, 16, 20, 24, 32, 36, 40, 44, 48, 52, 56, 64 + 0, 64 + 4, 16 + 4, 16 + 5, 16 + 8, 64 + 16, 64 + 24, 128];

const mutation: fc.Arbitrary<{ at: number; value: number }[]> = fc.oneof(
  // one byte anywhere
  fc.record({ at: fc.integer({ min: 0, max: 255 }), value: fc.integer({ min: 0, max: 255 }) }).map((m) => [m]),
  // ds (byte 7) too small or too big: an atomic without its data segment, segments past the end
  fc.record({ at: fc.constant(7), value: fc.oneof(fc.integer({ min: 0, max: 12 }), fc.constant(63)) }).map((m) => [m]),
  // a field at its extremes: 8 bytes of 0xff (>= 2^53), 0x80.., or zeros
  fc.record({ at: fc.constantFrom(...FIELD_OFFSETS), fill: fc.constantFrom(0xff, 0x80, 0x00, 0x7f) }).map(({ at, fill }) => Array.from({ length: 8 }, (_, i) => ({ at: at + i, value: i === 0 || fill !== 0x80 ? fill : 0 }))),
  // a segment pointing anywhere: a random 64-bit address into a data segment's addr or the raddr
  // (and a UMR's first inline translation entry, at 128: an MTT naming any physical page)
  fc.record({ at: fc.constantFrom(16, 40, 56, 72, 128), bytes: fc.uint8Array({ minLength: 8, maxLength: 8 }) }).map(({ at, bytes }) => [...bytes].map((value, i) => ({ at: at + i, value }))),
  // an MTT entry naming a page past the end of host memory, readable and writable
  fc.integer({ min: 0, max: 2 ** 20 }).map((page) => {
    const pa = 2 ** 40 + page * 4096 + 3;
    return Array.from({ length: 8 }, (_, i) => ({ at: 128 + i, value: Number((BigInt(pa) >> BigInt(56 - 8 * i)) & 0xffn) }));
  }),
  // a UMR translation list too long: xlt_octowords (u16 at 16 + 4) large
  fc.record({ hi: fc.integer({ min: 0, max: 255 }), lo: fc.integer({ min: 0, max: 255 }) }).map(({ hi, lo }) => [{ at: 20, value: hi }, { at: 21, value: lo }]),
  // an unknown opcode
  fc.integer({ min: 0, max: 255 }).map((value) => [{ at: 3, value }]),
);

/** A valid WQE, with up to 3 mutations. */
export const validItem: fc.Arbitrary<ValidItem> = fc.record({
  kind: fc.constantFrom(...KINDS),
  len: fc.oneof(fc.integer({ min: 0, max: 64 }), fc.constantFrom(8, 4096, 8192)),
  sges: fc.integer({ min: 1, max: 3 }),
  operand: fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.constantFrom(0n, 1n, 2n ** 64n - 1n, 2n ** 53n)),
  mutations: fc.array(mutation, { maxLength: 3 }).map((ms) => ms.flat()),
});

/** Raw WQE bytes: 1..4 WQEBBs of random bytes, with a plausible control segment now and then. */
export const rawItem: fc.Arbitrary<Uint8Array> = fc
  .record({
    bbs: fc.integer({ min: 1, max: 4 }),
    bytes: fc.uint8Array({ minLength: 256, maxLength: 256 }),
    opcode: fc.constantFrom(0x00, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x10, 0x11, 0x12, 0x25, 0x01, 0x7f, 0xff),
    ds: fc.oneof(fc.integer({ min: 0, max: 63 }), fc.constantFrom(1, 3, 4)),
    keepCtrl: fc.boolean(),
  })
  .map(({ bbs, bytes, opcode, ds, keepCtrl }) => {
    const b = bytes.slice(0, bbs * 64);
    if (keepCtrl) {
      b[3] = opcode;
      b[7] = ds;
    }
    return b;
  });

/** A case: 1..4 WQEs posted together with one doorbell, on a user-space QP or a kernel one. */
export interface FuzzCase {
  /**
   * A kernel QP (qpc.fre): its REG_MR may point translations anywhere (the kernel is trusted), so
   * a case with a REG_MR or raw bytes there is not held to the stray-write check; every other
   * check holds.
   */
  kernel: boolean;
  items: FuzzItem[];
}

const itemLists: fc.Arbitrary<FuzzItem[]> = fc.oneof(
  {
    arbitrary: fc.array(
      fc.oneof({ arbitrary: rawItem.map((raw): FuzzItem => ({ raw })), weight: 1 }, { arbitrary: validItem.map((valid): FuzzItem => ({ valid })), weight: 3 }),
      { minLength: 1, maxLength: 4 },
    ),
    weight: 4,
  },
  // valid WQEs only, unmutated: the reference model speaks for these
  {
    arbitrary: fc.array(validItem.map((v): FuzzItem => ({ valid: { ...v, mutations: [] } })), { minLength: 1, maxLength: 4 }),
    weight: 1,
  },
);

export const fuzzCase: fc.Arbitrary<FuzzCase> = fc.record({ kernel: fc.boolean(), items: itemLists });

/** What one case did wrong (all empty / zero: it held). */
export interface FuzzOutcome {
  crash: string | null;
  hang: string | null;
  /** Device writes that changed process memory outside the registered writable ranges and rings. */
  strayWrites: number;
  /** DMAs the DMA checker found reaching a frame nobody gave the device (reads too), with the first one. */
  dmaViolations: number;
  dmaViolation: string;
  /** Completion accounting that does not hold, or '' . */
  completion: string;
  /** Where the reference model disagrees (only for cases of valid, unmutated WQEs), or ''. */
  model: string;
  /** Whether the model could speak for this case. */
  modelChecked: boolean;
}


/** 64-bit operand as the builder takes it (a number below 2^53) or, past that, bytes written after. */
function pattern(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed) & 0xff;
  return out;
}

/**
 * A testbed cases run on one after another (the bench runs many cases per testbed; the test
 * gives each case its own, so a counterexample replays alone). Every case makes its own PDs,
 * CQs, QPs, MRs and buffers; the writable ranges of all of them stay allowed.
 */
export interface FuzzSession {
  readonly tb: Testbed;
  /** Device writes recorded while a case runs, per host: [pa, len]. */
  readonly writes: [number, number][][];
  armed: boolean;
  /** Per host, by physical frame: the byte ranges the device may write (writable MRs, rings). */
  readonly allowed: Map<number, [number, number][]>[];
  /** Rings already in `allowed`. */
  readonly ringsSeen: Set<string>[];
  /** The process's physical frames, per host, for the address space up to `vaEnd`. */
  readonly processFrames: Set<number>[];
  readonly vaEnd: number[];
  /** The device contexts, opened by the first case. */
  ctx: [Context, Context] | null;
}

/** A fresh two-adapter testbed whose device writes are recorded while a case runs. */
export function openSession(): FuzzSession {
  // the DMA checker records (a kernel QP's REG_MR may name any page: those cases are exempt)
  // a small MR cache profile: the default pre-fill (6,120 mkeys per adapter, ~1-2 s of wall
  // clock) is not what the fuzzer tests
  const tb = new Testbed({ hcas: 2, trace: { checkDma: true }, config: { mrCacheLimit: 4, mrCacheLastOrder: 4 } });
  for (const c of tb.checkers) c.mode = 'record';
  const s: FuzzSession = { tb, writes: [[], []], armed: false, allowed: [new Map(), new Map()], ringsSeen: [new Set(), new Set()], processFrames: [new Set(), new Set()], vaEnd: [HOST_VA_BASE, HOST_VA_BASE], ctx: null };
  for (const h of [0, 1]) record(tb.hca(h).mem, (pa, len) => { if (s.armed) s.writes[h].push([pa, len]); });
  return s;
}

/** Runs one case, on `session` or on a fresh testbed. A crash leaves the session unusable. */
export async function runFuzzCase(fcase: FuzzCase, session: FuzzSession = openSession()): Promise<FuzzOutcome> {
  const items = fcase.items;
  const out: FuzzOutcome = { crash: null, hang: null, strayWrites: 0, dmaViolations: 0, dmaViolation: '', completion: '', model: '', modelChecked: false };
  const s = session;
  const tb = s.tb;
  const seen = tb.checkers.map((c) => c.violationCount);
  let qp0: Qp | null = null;
  let aAddr = 0;
  let bAddr = 0;
  try {
    await tb.run(async () => {
      s.ctx ??= [await tb.openDevice(0), await tb.openDevice(1)];
      const [c0, c1] = s.ctx;
      const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
      const [cq0, cq1] = [await c0.createCq(64), await c1.createCq(64)];
      // a user process's QP: the fuzzer writes its ring as any process can
      qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0, userSpace: !fcase.kernel });
      const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp0.connect(qp1);
      const a = tb.host(0).alloc(BUF);
      const b = tb.host(1).alloc(BUF);
      aAddr = a.addr;
      bAddr = b.addr;
      tb.host(0).write(a.addr, pattern(BUF, 1));
      tb.host(1).write(b.addr, pattern(BUF, 2));
      const mr0 = await pd0.regMr(a.addr, BUF, Access.LOCAL_WRITE | Access.MW_BIND);
      const mr1 = await pd1.regMr(b.addr, BUF, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC);
      for (let off = 0; off < BUF; off += 4096) {
        allow(s, 0, tb.host(0).dmaAddress(a.addr + off), 4096);
        allow(s, 1, tb.host(1).dmaAddress(b.addr + off), 4096);
      }
      const fmr = await pd0.allocMr('MEM_REG', 4);
      const mw = await pd0.allocMw(2);
      // receives for SENDs (an RNR NAK retries forever with rnr_retry 7: not a hang of the model)
      for (let k = 0; k < 8; k++) qp1.postRecv({ wrId: k, sgList: [{ addr: b.addr + 4096, length: 4096, lkey: mr1.lkey }] });
      const wqeBytes = items.map((it, i) => ('raw' in it ? it.raw : buildValid(it.valid, i, qp0!, fenceOf(items, i, fcase.kernel), { a: a.addr, b: b.addr, mr0: mr0.lkey, mr1: mr1.rkey, fmr: fmr.lkey, mw: mw.rkey, pa: tb.host(0).dmaAddress(a.addr) })));
      await tb.quiesce();
      // raw WQEs in qp0's ring, then the doorbell (the driver is bypassed on purpose)
      let pi = 0;
      for (const w of wqeBytes) {
        for (let k = 0; k < w.length / 64; k++) tb.host(0).write(qp0.sq.addr + ((pi + k) & (qp0.sq.wqeCnt - 1)) * 64, w.subarray(k * 64, k * 64 + 64));
        pi += w.length / 64;
      }
      // from here on only the device writes
      s.writes[0].length = 0;
      s.writes[1].length = 0;
      s.armed = true;
      tb.hca(0).uar.ringSq(qp0.qpNum, pi);
      try {
        await tb.quiesce({ timeout: 10e12 });
      } catch (e) {
        out.hang = String(e);
      }
      s.armed = false;
      const busy = tb.busyModules();
      if (out.hang === null && busy.length > 0) out.hang = `still busy: ${busy.join(', ')}`;
      out.completion = checkCompletion(tb, qp0, pi);
      const privileged = fcase.kernel && items.some((it) => 'raw' in it || it.valid.kind === 'reg' || it.valid.mutations.length > 0);
      out.strayWrites = strayWrites(s, privileged);
      tb.checkers.forEach((c, h) => {
        const n = c.violationCount - seen[h];
        if (n === 0 || privileged) return;
        out.dmaViolations += n;
        const v = c.violations[c.violations.length - 1];
        if (out.dmaViolation === '' && v !== undefined) out.dmaViolation = describeViolation(v, `tb.hca${h}`);
      });
    });
  } catch (e) {
    out.crash = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    return out;
  }
  // the reference model, where it can speak: every WQE a valid, unmutated one (a REG_MR only on
  // a kernel QP: the model has no user-space QPs); a work request the model refuses synchronously
  // (the simulator takes any bytes) leaves the case to the other checks
  // a WQE after a kernel LOCAL_INV carries no fence (wr.c): it may run before the invalidation
  // has landed, so either outcome is right and the sequential model cannot judge the case
  const racing = fcase.kernel && items.some((it, i) => i < items.length - 1 && 'valid' in it && it.valid.kind === 'inv');
  if (!racing && items.every((it) => 'valid' in it && it.valid.mutations.length === 0 && (fcase.kernel || it.valid.kind !== 'reg'))) {
    const m = modelDisagrees(tb, items.map((it) => (it as { valid: ValidItem }).valid), qp0!, aAddr, bAddr);
    if (m !== null) {
      out.modelChecked = true;
      out.model = m;
    }
  }
  return out;
}

/** Keys and addresses a valid WQE is built over. */
interface Ctx {
  a: number;
  b: number;
  mr0: number;
  mr1: number;
  fmr: number;
  mw: number;
  /** DMA address of the first page of a (REG_MR's MTT). */
  pa: number;
}

/** The local SGEs of a valid data WQE. */
function sgesOf(v: ValidItem, c: Ctx, lkey: number): { addr: number; length: number; lkey: number }[] {
  const atomic = v.kind === 'cas' || v.kind === 'fadd';
  return Array.from({ length: atomic ? 1 : v.sges }, (_, k) => ({ addr: c.a + k * 64, length: atomic ? 8 : v.len, lkey }));
}

/**
 * The fence mode the driver would write on item `i` (src/driver/qp.ts fenceOf, as mlx5 wr.c and
 * libmlx5): a REG_MR the default umr_fence (INITIATOR_SMALL), the WQE after a valid REG_MR or
 * BIND_MW (or a user QP's LOCAL_INV) INITIATOR_SMALL, else none. The model orders them so.
 */
function fenceOf(items: FuzzCase['items'], i: number, kernel: boolean): number {
  const it = items[i];
  if ('valid' in it && it.valid.kind === 'reg') return FenceMode.INITIATOR_SMALL;
  const prev = i > 0 ? items[i - 1] : undefined;
  if (prev === undefined || !('valid' in prev)) return FenceMode.NONE;
  const k = prev.valid.kind;
  return k === 'reg' || k === 'bind' || (k === 'inv' && !kernel) ? FenceMode.INITIATOR_SMALL : FenceMode.NONE;
}

function buildValid(v: ValidItem, i: number, qp: Qp, fence: number, c: Ctx): Uint8Array {
  const buf = new Uint8Array(1024);
  const view = new DataView(buf.buffer);
  const common = { wqeIndex: i, qpn: qp.qpNum, signaled: true, fence };
  const sgList = sgesOf(v, c, c.mr0);
  let ds: number;
  switch (v.kind) {
    case 'write':
    case 'read':
      ds = buildRdmaWqe(view, 0, { ...common, opcode: v.kind === 'write' ? WqeOpcode.RDMA_WRITE : WqeOpcode.RDMA_READ, sgList, remoteAddr: c.b, rkey: c.mr1 });
      break;
    case 'send':
      ds = buildSendWqe(view, 0, { ...common, opcode: WqeOpcode.SEND, sgList });
      break;
    case 'cas':
    case 'fadd':
      ds = buildAtomicWqe(view, 0, v.kind === 'cas'
        ? { ...common, opcode: WqeOpcode.ATOMIC_CS, sgList, remoteAddr: c.b, rkey: c.mr1, compare: 0, swap: 0 }
        : { ...common, opcode: WqeOpcode.ATOMIC_FA, sgList, remoteAddr: c.b, rkey: c.mr1, add: 0 });
      // the operands as the hardware sees them: any 64-bit value (swap_add @16+16, compare @16+24)
      view.setBigUint64(32, v.operand);
      if (v.kind === 'cas') view.setBigUint64(40, v.operand ^ 0x5555n);
      break;
    case 'reg':
      ds = buildRegMrWqe(view, 0, {
        ...common, key: c.fmr, iova: c.a, length: 4096,
        access: { localWrite: true, remoteWrite: true, remoteRead: true, remoteAtomic: false },
        translations: { mode: 'MTT', pages: [c.pa], logPageSize: 12 },
      });
      break;
    case 'inv':
      ds = buildLocalInvWqe(view, 0, { ...common, key: c.mw });
      break;
    case 'readf':
      // an RDMA READ into what a REG_MR of the case registered (the fast-registration MR's key)
      ds = buildRdmaWqe(view, 0, { ...common, opcode: WqeOpcode.RDMA_READ, sgList: [{ addr: c.a, length: Math.min(v.len, 4096), lkey: c.fmr }], remoteAddr: c.b, rkey: c.mr1 });
      break;
    case 'bind':
      ds = buildBindMwWqe(view, 0, {
        ...common, mwType: 2, mwRkey: c.mw, newRkey: incRkey(c.mw),
        bind: { mrLkey: c.mr0, addr: c.a, length: 64, access: { localWrite: false, remoteWrite: true, remoteRead: true, remoteAtomic: false }, zeroBased: false },
      });
      break;
  }
  const n = wqeBasicBlocks(ds);
  for (const m of v.mutations) if (m.at < n * 64) buf[m.at] = m.value;
  return buf.slice(0, n * 64);
}

/** Records every write to host physical memory (the device's DMA and ICM writes all come here). */
function record(mem: HostMem, on: (pa: number, len: number) => void): void {
  const m = mem as unknown as Record<string, (...a: never[]) => unknown>;
  let depth = 0; // write() goes through writeFrom(): one record per outside call
  const wrap = (name: string, lenOf: (args: unknown[]) => number): void => {
    const orig = m[name].bind(mem) as (...a: unknown[]) => unknown;
    m[name] = ((...args: unknown[]) => {
      if (depth === 0) on(args[0] as number, lenOf(args));
      depth++;
      try {
        return orig(...args);
      } finally {
        depth--;
      }
    }) as never;
  };
  wrap('write', (a) => (a[1] as Uint8Array).length);
  wrap('writeFrom', (a) => a[3] as number);
  wrap('fill', (a) => a[1] as number);
  wrap('writeU32BE', () => 4);
  wrap('writeU64BE', () => 8);
}

/** Marks [pa, pa + len) writable in the session's per-frame map of allowed byte ranges. */
function allow(s: FuzzSession, h: number, pa: number, len: number): void {
  let p = pa;
  while (p < pa + len) {
    const f = Math.floor(p / 4096);
    const q = Math.min(pa + len, (f + 1) * 4096);
    let list = s.allowed[h].get(f);
    if (list === undefined) s.allowed[h].set(f, (list = []));
    list.push([p, q]);
    p = q;
  }
}

/** True when [p, q) (within one frame) lies inside the union of the frame's allowed ranges. */
function covered(list: readonly [number, number][] | undefined, p: number, q: number): boolean {
  if (list === undefined) return false;
  let at = p;
  for (let moved = true; moved && at < q; ) {
    moved = false;
    for (const [lo, hi] of list) {
      if (lo <= at && hi > at) {
        at = hi;
        moved = true;
      }
    }
  }
  return at >= q;
}

/**
 * Device writes that landed in the process's memory outside what it may write: the registered
 * writable buffers and the CQ and EQ rings. Pages outside the process (ICM) are the device's own.
 */
export function strayWrites(s: FuzzSession, privileged = false): number {
  let stray = 0;
  const tb = s.tb;
  for (const h of [0, 1]) {
    const host = tb.host(h);
    const hca = tb.hca(h);
    // what is new since the last case: buffers, rings, and the process's pages (a bump allocator)
    for (const cq of hca.cmdif.cqList()) {
      if (s.ringsSeen[h].has(`cq${cq.cqn}.${cq.pages.pas[0] ?? cq.pages.base}`)) continue;
      s.ringsSeen[h].add(`cq${cq.cqn}.${cq.pages.pas[0] ?? cq.pages.base}`);
      for (let off = 0; off < cq.size * 64; off += 4096) allow(s, h, queueAddr(cq.pages, off), Math.min(4096, cq.size * 64 - off));
    }
    for (const eq of hca.cmdif.eqList()) {
      if (s.ringsSeen[h].has(`eq${eq.eqn}`)) continue;
      s.ringsSeen[h].add(`eq${eq.eqn}`);
      allow(s, h, eq.bufAddr, eq.size * 64);
    }
    if (s.writes[h].length === 0 || privileged) continue;
    const end = host.alloc(1).addr;
    for (let va = s.vaEnd[h]; va < end; va += 4096) if (host.isMapped(va, 1)) s.processFrames[h].add(Math.floor(host.dmaAddress(va) / 4096));
    s.vaEnd[h] = end;
    for (const [pa, len] of s.writes[h]) {
      let p = pa;
      while (p < pa + len) {
        const f = Math.floor(p / 4096);
        const q = Math.min(pa + len, (f + 1) * 4096);
        // (a page the driver gave the firmware with MANAGE_PAGES is the device's ICM, not the process's)
        if (s.processFrames[h].has(f) && !hca.pages.holds(f * 4096) && !covered(s.allowed[h].get(f), p, q)) {
          stray++;
          break;
        }
        p = q;
      }
    }
  }
  return stray;
}

/** The send queue's WQEs as the bytes make them (ds, cut at the producer index): signaled or not. */
function partition(tb: Testbed, qp: Qp, pi: number): boolean[] {
  const out: boolean[] = [];
  let pos = 0;
  while (pos < pi) {
    const ctrl = tb.host(0).read(qp.sq.addr + (pos & (qp.sq.wqeCnt - 1)) * 64, 16);
    const bbs = Math.min(ctrlWqebbs(ctrl), pi - pos);
    const ce = ctrlCe(ctrl);
    out.push(ce === CeMode.CQ_UPDATE || ce === CeMode.CQ_UPDATE_AND_EQE);
    pos += bbs;
  }
  return out;
}

/** The statuses of the CQEs the hardware wrote to the QP's send CQ, in order. */
function sendCqes(tb: Testbed, qp: Qp): string[] {
  const cq = tb.hca(0).cmdif.getCq(tb.hca(0).cmdif.getQp(qp.qpNum)!.sendCqn)!;
  const n = tb.hca(0).cqWriter.produced(cq.cqn);
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const bytes = tb.hca(0).mem.read(queueAddr(cq.pages, (i % cq.size) * 64), 64);
    const c = decodeCqe(new DataView(bytes.buffer), 0);
    if (c.qpn !== qp.qpNum) continue;
    out.push(c.opcode === CqeOpcode.REQ_ERR || c.opcode === CqeOpcode.RESP_ERR ? syndromeToWcStatus(c.syndrome) : 'SUCCESS');
  }
  return out;
}

/** '' when the completions account for every WQE, else what does not hold. */
function checkCompletion(tb: Testbed, qp: Qp, pi: number): string {
  const wqes = partition(tb, qp, pi);
  const consumed = tb.hca(0).sq.completedWqes(qp.qpNum);
  if (consumed !== wqes.length) return `the engine completed ${consumed} WQEs, the ring holds ${wqes.length}`;
  const cqes = sendCqes(tb, qp);
  const state = tb.hca(0).cmdif.getQp(qp.qpNum)!.state;
  // some k (the first failed WQE, or none): a CQE for each signaled one before k, one for each from k on
  for (let k = 0; k <= wqes.length; k++) {
    const want = wqes.slice(0, k).filter((s) => s).length + (wqes.length - k);
    if (want !== cqes.length) continue;
    const before = wqes.slice(0, k).filter((s) => s).length;
    if (cqes.slice(0, before).some((s) => s !== 'SUCCESS')) continue;
    if (k < wqes.length && (cqes[before] === 'SUCCESS' || cqes.slice(before + 1).some((s) => s !== 'WR_FLUSH_ERR'))) continue;
    if ((k < wqes.length) !== (state === 'ERR')) return `QP state ${state} after completions ${cqes.join(',')}`;
    return '';
  }
  return `completions ${cqes.join(',') || 'none'} do not account for ${wqes.length} WQEs (signaled ${wqes.map((s) => (s ? 1 : 0)).join('')})`;
}

/**
 * Runs the valid WQEs on the reference model: '' when statuses and both buffers agree, what
 * differs otherwise, null when the model refuses a work request synchronously.
 */
function modelDisagrees(tb: Testbed, vs: readonly ValidItem[], qp: Qp, a: number, b: number): string | null {
  const m = new VerbsModel({ hcas: 2 });
  const ma = m.alloc(0, BUF);
  const mb = m.alloc(1, BUF);
  m.memWrite(0, ma, pattern(BUF, 1));
  m.memWrite(1, mb, pattern(BUF, 2));
  const [pd0, pd1] = [m.allocPd(0), m.allocPd(1)];
  const [cq0, cq1] = [m.createCq(0), m.createCq(1)];
  const q0 = m.createQp(pd0, { sendCq: cq0, recvCq: cq0 });
  const q1 = m.createQp(pd1, { sendCq: cq1, recvCq: cq1 });
  m.connect(q0, q1);
  const mr0 = m.regMr(pd0, ma, BUF, Access.LOCAL_WRITE | Access.MW_BIND);
  const mr1 = m.regMr(pd1, mb, BUF, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC);
  for (let k = 0; k < 8; k++) m.postRecv(q1, { wrId: k, sgList: [{ addr: mb + 4096, length: 4096, lkey: mr1.lkey }] });
  // the case's fast-registration MR (its page list: the first page of the local buffer) and window
  const fmr = m.allocMr(pd0, 'MEM_REG', 4);
  m.mapSg(fmr, [{ addr: ma, length: 4096 }]);
  const mw = m.allocMw(pd0, 2);
  const mwKey = mw.rkey;
  const c: Ctx = { a: ma, b: mb, mr0: mr0.lkey, mr1: mr1.rkey, fmr: fmr.lkey, mw: mwKey, pa: 0 };
  const wrs: ModelSendWr[] = vs.map((v, i) => {
    const sgList = sgesOf(v, c, mr0.lkey);
    const remote = { remoteAddr: mb, rkey: mr1.rkey };
    switch (v.kind) {
      case 'write': return { wrId: i, opcode: 'RDMA_WRITE', sgList, ...remote, signaled: true };
      case 'read': return { wrId: i, opcode: 'RDMA_READ', sgList, ...remote, signaled: true };
      case 'send': return { wrId: i, opcode: 'SEND', sgList, signaled: true };
      case 'cas': return { wrId: i, opcode: 'ATOMIC_CMP_AND_SWP', sgList, ...remote, compareAdd: v.operand ^ 0x5555n, swap: v.operand, signaled: true };
      case 'fadd': return { wrId: i, opcode: 'ATOMIC_FETCH_AND_ADD', sgList, ...remote, compareAdd: v.operand, signaled: true };
      case 'reg': return { wrId: i, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ, signaled: true };
      case 'inv': return { wrId: i, opcode: 'LOCAL_INV', invalidateRkey: mwKey, signaled: true };
      case 'bind': return { wrId: i, opcode: 'BIND_MW', mw, rkey: incRkey(mwKey), bindInfo: { mr: mr0, addr: ma, length: 64, access: Access.REMOTE_WRITE | Access.REMOTE_READ }, signaled: true };
      case 'readf': return { wrId: i, opcode: 'RDMA_READ', sgList: [{ addr: ma, length: Math.min(v.len, 4096), lkey: fmr.lkey }], ...remote, signaled: true };
    }
  });
  try {
    m.postSend(q0, wrs);
  } catch {
    return null;
  }
  m.runToCompletion();
  const want = m.pollCq(cq0).map((w) => w.status);
  const got = sendCqes(tb, qp);
  if (want.join(',') !== got.join(',')) return `statuses: model ${want.join(',')}, simulator ${got.join(',')}`;
  const [sa, sb] = [tb.host(0).read(a, BUF), tb.host(1).read(b, BUF)];
  const [xa, xb] = [m.memRead(0, ma, BUF), m.memRead(1, mb, BUF)];
  for (const [name, s, x] of [['local buffer', sa, xa], ['remote buffer', sb, xb]] as const) {
    const i = s.findIndex((v, j) => v !== x[j]);
    if (i >= 0) return `${name} byte ${i}: model 0x${x[i].toString(16)}, simulator 0x${s[i].toString(16)}`;
  }
  return '';
}
