/**
 * Property tests of the verbs model over random operation sequences (fast-check):
 * - the HCA writes only bytes of VALID MRs with LOCAL_WRITE (every write path needs it: receive
 *   buffers, READ destinations, atomic results, and remote writes, whose REMOTE_WRITE /
 *   REMOTE_ATOMIC require LOCAL_WRITE of the MR or of the window's MR, C10-74);
 * - a step whose requester completion is an error writes nothing;
 * - after a QP's first error completion, all its later completions are WR_FLUSH_ERR;
 * - a work request completes at most once; error completions carry byteLen 0;
 * - REG_MR / LOCAL_INV against a two-state oracle: the key after REG_MR is the key posted.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  VerbsAccess as A,
  VerbsModel,
  VerbsModelError,
  incRkey,
  makeKey,
  type ModelCq,
  type ModelMr,
  type ModelMw,
  type ModelQp,
  type ModelPd,
  type ModelSendWr,
  type WrOpcode,
} from '../../../src/model/index.ts';

// ---------------------------------------------------------------------------------------------
// The world: two HCAs, one connection, a few MRs and windows per side
// ---------------------------------------------------------------------------------------------

interface SideObjs {
  hca: number;
  pd: ModelPd;
  cq: ModelCq;
  qp: ModelQp;
  buf: number;
  /** mr0, mr1 (user, random access), mrX (user, other PD), fr0 (MEM_REG), fr1 (SG_GAPS). */
  mrs: ModelMr[];
  /** mw1 (type 1), mw2 (type 2). */
  mws: ModelMw[];
}

interface World {
  m: VerbsModel;
  sides: [SideObjs, SideObjs];
  /** Violations seen by the DMA observer. */
  violations: string[];
  /** Bytes the HCAs wrote since the last reset of this counter. */
  written: number;
  /** Per side: index of the first completion since the last recover (an ERR epoch ends there). */
  epochStart: [number, number];
  /** wrIds completed so far (unique over the run). */
  seen: Set<number>;
}

/** Makes a registration access valid: REMOTE_WRITE / REMOTE_ATOMIC bring LOCAL_WRITE. */
function validAccess(acc: number): number {
  return (acc & (A.REMOTE_WRITE | A.REMOTE_ATOMIC)) !== 0 ? acc | A.LOCAL_WRITE : acc;
}

function buildWorld(acc: readonly number[]): World {
  const world: World = { m: undefined as unknown as VerbsModel, sides: undefined as unknown as [SideObjs, SideObjs], violations: [], written: 0, epochStart: [0, 0], seen: new Set() };
  const m = new VerbsModel({
    hcas: 2,
    onDmaWrite: (hca, addr, length) => {
      world.written += length;
      // Every byte must lie in a VALID MR with LOCAL_WRITE on that HCA (at the time of writing).
      const ok = world.sides[hca].mrs.filter((mr) => !mr.destroyed && mr.dev.state === 'VALID' && (mr.dev.access & A.LOCAL_WRITE) !== 0);
      for (let x = addr; x < addr + length; x++) {
        if (!ok.some((mr) => mr.dev.extents.some((e) => x >= e.addr && x < e.addr + e.length))) {
          world.violations.push(`HCA ${hca} wrote 0x${x.toString(16)} outside every VALID LOCAL_WRITE MR`);
          return;
        }
      }
    },
  });
  world.m = m;
  const side = (hca: number): SideObjs => {
    const pd = m.allocPd(hca);
    const cq = m.createCq(hca);
    const qp = m.createQp(pd, { sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16 });
    const buf = m.alloc(hca, 4096);
    const other = m.allocPd(hca);
    const mrs = [
      m.regMr(pd, buf, 1024, validAccess(acc[hca * 2])),
      m.regMr(pd, buf + 512, 1536, validAccess(acc[hca * 2 + 1])),
      m.regMr(other, buf, 4096, A.LOCAL_WRITE | A.REMOTE_WRITE | A.REMOTE_READ | A.REMOTE_ATOMIC | A.MW_BIND),
      m.allocMr(pd, 'MEM_REG', 4),
      m.allocMr(pd, 'SG_GAPS', 4),
    ];
    return { hca, pd, cq, qp, buf, mrs, mws: [m.allocMw(pd, 1), m.allocMw(pd, 2)] };
  };
  world.sides = [side(0), side(1)];
  m.connect(world.sides[0].qp, world.sides[1].qp);
  return world;
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

/** A key chosen among a side's objects (0-4 MRs, 5-6 windows, 7 garbage), in one of three variants. */
interface KeySel {
  obj: number;
  /** 0: the device's key, 1: the handle's key, 2: a stale tag. */
  variant: number;
}

/** An address: `off` bytes from the start of the range of the key it goes with (`rel`), or near the buffer. */
interface AddrSel {
  rel: boolean;
  base: number;
  off: number;
}

type Command =
  | { kind: 'data'; side: number; op: WrOpcode; lkey: KeySel; laddr: AddrSel; len: number; rkey: KeySel; raddr: AddrSel; signaled: boolean; inv: KeySel; cmp: bigint; swap: bigint }
  | { kind: 'recv'; side: number; lkey: KeySel; laddr: AddrSel; len: number }
  | { kind: 'reg'; side: number; which: number; addr: AddrSel; len: number; tag: number; access: number; handleKey: boolean; signaled: boolean }
  | { kind: 'inv'; side: number; key: KeySel; signaled: boolean }
  | { kind: 'bind'; side: number; type: 1 | 2; mr: number; addr: AddrSel; len: number; access: number; signaled: boolean }
  | { kind: 'run' }
  /** Both QPs back to RTS through RESET (queued work is dropped), when either is in ERR. */
  | { kind: 'recover' };

/** Mostly the two user MRs of the QP's PD with their current key, sometimes anything else. */
const keySel = fc.record({
  obj: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(0, 1) }, { weight: 4, arbitrary: fc.integer({ min: 2, max: 7 }) }),
  variant: fc.constantFrom(0, 0, 0, 0, 1, 2),
});
const addrSel = fc.record({
  rel: fc.constantFrom(true, true, true, false),
  base: fc.constantFrom(0, 512, 1024, 2048, 4080),
  off: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 64 }) }, { weight: 1, arbitrary: fc.integer({ min: -8, max: -1 }) }),
});
/** Local buffers: nearly always a user MR's current key, inside its range (remote checks are the point). */
const localKeySel = fc.record({
  obj: fc.oneof({ weight: 15, arbitrary: fc.constantFrom(0, 1) }, { weight: 1, arbitrary: fc.integer({ min: 2, max: 7 }) }),
  variant: fc.oneof({ weight: 15, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.constant(2) }),
});
const localAddrSel = fc.record({
  rel: fc.oneof({ weight: 15, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
  base: fc.constantFrom(0, 512, 4080),
  off: fc.oneof({ weight: 15, arbitrary: fc.integer({ min: 0, max: 64 }) }, { weight: 1, arbitrary: fc.integer({ min: -8, max: -1 }) }),
});
/** Keys to invalidate: mostly the fast-registration MRs and windows (a user MR stays FREE for good). */
const invKeySel = fc.record({
  obj: fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 3, max: 6 }) }, { weight: 1, arbitrary: fc.constantFrom(0, 1, 2, 7) }),
  variant: fc.constantFrom(0, 0, 0, 1, 2),
});
const side = fc.integer({ min: 0, max: 1 });
const ALL_RIGHTS = A.LOCAL_WRITE | A.REMOTE_WRITE | A.REMOTE_READ | A.REMOTE_ATOMIC | A.MW_BIND;
const accessArb = fc.oneof({ weight: 2, arbitrary: fc.constant(ALL_RIGHTS) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 31 }) });
const dataOps: WrOpcode[] = ['SEND', 'SEND_WITH_IMM', 'SEND_WITH_INV', 'RDMA_WRITE', 'RDMA_WRITE_WITH_IMM', 'RDMA_READ', 'ATOMIC_CMP_AND_SWP', 'ATOMIC_FETCH_AND_ADD'];

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('data' as const), side, op: fc.constantFrom(...dataOps), lkey: localKeySel, laddr: localAddrSel, len: fc.integer({ min: 0, max: 48 }), rkey: keySel, raddr: addrSel, signaled: fc.boolean(), inv: invKeySel, cmp: fc.bigInt({ min: 0n, max: 3n }), swap: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('recv' as const), side, lkey: localKeySel, laddr: localAddrSel, len: fc.integer({ min: 0, max: 64 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('reg' as const), side, which: fc.integer({ min: 3, max: 4 }), addr: addrSel, len: fc.integer({ min: 1, max: 300 }), tag: fc.integer({ min: 0, max: 255 }), access: accessArb, handleKey: fc.boolean(), signaled: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('inv' as const), side, key: invKeySel, signaled: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('bind' as const), side, type: fc.constantFrom(1 as const, 2 as const), mr: fc.integer({ min: 0, max: 4 }), addr: addrSel, len: fc.integer({ min: 0, max: 128 }), access: accessArb, signaled: fc.boolean() }) },
  { weight: 2, arbitrary: fc.constant({ kind: 'run' as const }) },
  { weight: 4, arbitrary: fc.constant({ kind: 'recover' as const }) },
);

function keyOf(s: SideObjs, k: KeySel): number {
  if (k.obj === 7) return makeKey(0x3456, 7);
  const obj = k.obj < 5 ? s.mrs[k.obj] : s.mws[k.obj - 5];
  const handle = 'lkey' in obj ? obj.lkey : obj.rkey;
  const device = obj.dev.key;
  return k.variant === 0 ? device : k.variant === 1 ? handle : incRkey(device);
}

/** The address `a` selects; relative to the range start of the object `k` names, when `a.rel`. */
function addrOf(s: SideObjs, a: AddrSel, k?: KeySel): number {
  if (!a.rel || k === undefined || k.obj === 7) return Math.max(0, s.buf + a.base + a.off);
  const start = k.obj < 5 ? s.mrs[k.obj].dev.iova : windowStart(s.mws[k.obj - 5]);
  return Math.max(0, start + a.off);
}

function windowStart(mw: ModelMw): number {
  return (mw.dev.access & A.ZERO_BASED) !== 0 ? 0 : mw.dev.addr;
}

/** Runs `fn`, ignoring synchronous verbs failures (they are legal outcomes of random input). */
function tolerate(fn: () => unknown): void {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof VerbsModelError)) throw e;
  }
}

/** Applies one command; wrIds are unique over the run. */
function apply(w: World, c: Command, nextWrId: () => number): void {
  const m = w.m;
  if (c.kind === 'run') {
    runChecked(w);
    return;
  }
  if (c.kind === 'recover') {
    const [a, b] = w.sides;
    if (a.qp.state !== 'ERR' && b.qp.state !== 'ERR') return;
    checkEpochs(w);
    for (const s of w.sides) {
      // A new epoch of the flush property starts here.
      w.epochStart[s.hca] = s.cq.completions.length;
      m.modifyQp(s.qp, 'RESET');
    }
    m.connect(a.qp, b.qp);
    return;
  }
  const s = w.sides[c.side];
  const peer = w.sides[1 - c.side];
  switch (c.kind) {
    case 'data': {
      const isAtomic = c.op === 'ATOMIC_CMP_AND_SWP' || c.op === 'ATOMIC_FETCH_AND_ADD';
      const len = isAtomic ? 8 : c.len;
      const wr: ModelSendWr = {
        wrId: nextWrId(), opcode: c.op, signaled: c.signaled,
        sgList: [{ addr: addrOf(s, c.laddr, c.lkey), length: len, lkey: keyOf(s, c.lkey) }],
        remoteAddr: isAtomic ? addrOf(peer, c.raddr, c.rkey) & ~7 : addrOf(peer, c.raddr, c.rkey),
        rkey: keyOf(peer, c.rkey), immData: 0x1234, invalidateRkey: keyOf(peer, c.inv),
        compareAdd: c.cmp, swap: c.swap,
      };
      tolerate(() => m.postSend(s.qp, wr));
      return;
    }
    case 'recv':
      tolerate(() => m.postRecv(s.qp, { wrId: nextWrId(), sgList: [{ addr: addrOf(s, c.laddr, c.lkey), length: c.len, lkey: keyOf(s, c.lkey) }] }));
      return;
    case 'reg': {
      const mr = s.mrs[c.which];
      tolerate(() => {
        m.mapSg(mr, [{ addr: addrOf(s, c.addr), length: c.len }]);
        if (c.handleKey) m.updateKey(mr, c.tag);
        const key = c.handleKey ? mr.lkey : makeKey(mr.index, c.tag);
        m.postSend(s.qp, { wrId: nextWrId(), opcode: 'REG_MR', mr, key, access: validAccess(c.access), signaled: c.signaled });
      });
      return;
    }
    case 'inv':
      tolerate(() => m.postSend(s.qp, { wrId: nextWrId(), opcode: 'LOCAL_INV', invalidateRkey: keyOf(s, c.key), signaled: c.signaled }));
      return;
    case 'bind': {
      const mw = s.mws[c.type - 1];
      const mr = s.mrs[c.mr];
      const info = { mr, addr: addrOf(s, c.addr, { obj: c.mr, variant: 0 }), length: c.len, access: c.access & (A.REMOTE_READ | A.REMOTE_WRITE | A.REMOTE_ATOMIC) };
      tolerate(() => {
        if (c.type === 1) m.bindMw(s.qp, mw, info, { wrId: nextWrId(), signaled: c.signaled });
        else m.postSend(s.qp, { wrId: nextWrId(), opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: info, signaled: c.signaled });
      });
      return;
    }
  }
}

/** Steps until idle; a step whose requester completion is an error must write nothing. */
function runChecked(w: World): void {
  for (;;) {
    const before = w.sides.map((s) => s.cq.completions.length);
    w.written = 0;
    if (!w.m.step()) return;
    const fresh = w.sides.flatMap((s, i) => s.cq.completions.slice(before[i]));
    const requesterError = fresh.some((wc) => wc.opcode !== 'RECV' && wc.opcode !== 'RECV_RDMA_WITH_IMM' && wc.status !== 'SUCCESS');
    if (requesterError && w.written > 0) w.violations.push(`a step with a requester error wrote ${w.written} bytes`);
  }
}

/**
 * The QP-level checks over the completions of a side (its CQ serves its one QP only), since the
 * start of the last epoch (set by 'recover'; called at each recover and at the end).
 */
function checkCompletions(s: SideObjs, from: number, seen: Set<number>): void {
  let failed = false;
  for (const wc of s.cq.completions.slice(from)) {
    expect(wc.qpNum).toBe(s.qp.qpNum);
    // After the first error completion of a QP, everything else it completes is flushed.
    if (failed) expect(wc.status).toBe('WR_FLUSH_ERR');
    if (wc.status !== 'SUCCESS') {
      failed = true;
      expect(wc.byteLen).toBe(0);
    }
    // Each work request completes at most once.
    expect(seen.has(wc.wrId)).toBe(false);
    seen.add(wc.wrId);
  }
  if (failed) expect(s.qp.state).toBe('ERR');
}

/** Checks the epoch of each side that ends now. */
function checkEpochs(w: World): void {
  for (const s of w.sides) {
    checkCompletions(s, w.epochStart[s.hca], w.seen);
  }
}

describe('properties of random operation sequences', () => {
  it('writes stay in VALID LOCAL_WRITE MRs, failed steps write nothing, ERR flushes, one completion per WR', () => {
    fc.assert(
      fc.property(fc.array(accessArb, { minLength: 4, maxLength: 4 }), fc.array(commandArb, { minLength: 1, maxLength: 40, size: 'max' }), (acc, cmds) => {
        const w = buildWorld(acc);
        let wrId = 0;
        for (const c of cmds) apply(w, c, () => ++wrId);
        runChecked(w);
        expect(w.violations).toEqual([]);
        checkEpochs(w);
      }),
      { numRuns: 300 },
    );
  });
});

describe('REG_MR and LOCAL_INV against a two-state oracle', () => {
  type Op = { kind: 'reg'; tag: number; handle: boolean } | { kind: 'inv'; tag: number; exact: boolean };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constant('reg' as const), tag: fc.integer({ min: 0, max: 255 }), handle: fc.boolean() }),
    fc.record({ kind: fc.constant('inv' as const), tag: fc.integer({ min: 0, max: 255 }), exact: fc.boolean() }),
  );
  it('the key after REG_MR is the key posted; a non-FREE MR refuses it; LOCAL_INV needs the full key', () => {
    fc.assert(
      fc.property(fc.constantFrom('MEM_REG' as const, 'SG_GAPS' as const), fc.array(opArb, { minLength: 1, maxLength: 20, size: 'max' }), (type, ops) => {
        const m = new VerbsModel();
        const pd = m.allocPd();
        const cq = m.createCq();
        const qp = m.createQp(pd, { sendCq: cq, recvCq: cq });
        const peer = m.createQp(pd, { sendCq: cq, recvCq: cq });
        m.connect(qp, peer);
        const buf = m.alloc(0, 8192);
        const mr = m.allocMr(pd, type, 4);
        m.mapSg(mr, [{ addr: buf, length: 8192 }]);
        // The oracle: state and key.
        let state: 'FREE' | 'VALID' = 'FREE';
        let key = mr.lkey;
        for (const op of ops) {
          let expected: 'SUCCESS' | 'LOC_QP_OP_ERR';
          if (op.kind === 'reg') {
            if (op.handle) m.updateKey(mr, op.tag);
            const posted = op.handle ? mr.lkey : makeKey(mr.index, op.tag);
            m.postSend(qp, { wrId: 1, opcode: 'REG_MR', mr, key: posted, access: A.LOCAL_WRITE, signaled: true });
            expected = state === 'FREE' ? 'SUCCESS' : 'LOC_QP_OP_ERR';
            if (expected === 'SUCCESS') {
              state = 'VALID';
              key = posted;
            }
          } else {
            const k = op.exact ? key : makeKey(mr.index, op.tag);
            m.postSend(qp, { wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: k, signaled: true });
            expected = k === key ? 'SUCCESS' : 'LOC_QP_OP_ERR';
            if (expected === 'SUCCESS') state = 'FREE';
          }
          m.runToCompletion();
          expect(m.pollCq(cq).map((wc) => wc.status)).toEqual([expected]);
          expect(m.keyState(key)).toMatchObject({ kind: 'MR', key, keyMatches: true, state });
          if (expected !== 'SUCCESS') {
            expect(qp.state).toBe('ERR');
            // Back to RTS for the next operation (the peer still points at this QP).
            m.modifyQp(qp, 'RESET');
            m.modifyQp(qp, 'INIT');
            m.modifyQp(qp, 'RTR', peer);
            m.modifyQp(qp, 'RTS');
          }
        }
      }),
      { numRuns: 200 },
    );
  });
});
