/** semantics.md "Data path: remote access" (checks 1-6) and "Data path: local access", and the bytes moved. */
import { describe, expect, it } from 'vitest';
import { incRkey, makeKey, type ModelMw } from '../../../src/model/index.ts';
import { A, ALL, pattern, postRecvAt, readWr, run, setup, statuses, writeWr, type Env, type Side } from './helpers.ts';

/** Binds a type-2 window on `side` over `[addr, addr + length)` of `side.mr`. */
function window2(env: Env, side: Side, addr: number, length: number, access: number): ModelMw {
  const mw = env.m.allocMw(side.pd, 2);
  const wcs = run(env, side, { wrId: 800, opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: { mr: side.mr, addr, length, access }, signaled: true });
  expect(statuses(wcs)).toEqual(['SUCCESS']);
  return mw;
}

/** An atomic of `opcode` on `remoteAddr` through `rkey`; the result lands at a.buf + 3072. */
function atomic(env: Env, opcode: 'ATOMIC_FETCH_AND_ADD' | 'ATOMIC_CMP_AND_SWP', rkey: number, remoteAddr: number, compareAdd: bigint, swap = 0n) {
  return run(env, env.a, {
    wrId: 60, opcode, sgList: [{ addr: env.a.buf + 3072, length: 8, lkey: env.a.mr.lkey }],
    remoteAddr, rkey, compareAdd, swap, signaled: true,
  });
}

/** Asserts a remote access error: requester REM_ACCESS_ERR, both QPs in ERR, responder memory unchanged. */
function expectRemoteAccessError(env: Env, wcs: ReturnType<typeof run>, before: Uint8Array): void {
  expect(wcs).toMatchObject([{ status: 'REM_ACCESS_ERR', byteLen: 0 }]);
  expect(env.a.qp.state).toBe('ERR');
  expect(env.b.qp.state).toBe('ERR');
  expect(env.m.memRead(env.b.hca, env.b.buf, 4096)).toEqual(before);
}

describe('remote access 1: the rkey\'s index names an MR or a window, and the full key matches', () => {
  it('an index that names nothing', () => {
    const env = setup();
    env.m.memWrite(0, env.a.buf, pattern(16));
    const before = env.m.memRead(1, env.b.buf, 4096);
    expectRemoteAccessError(env, run(env, env.a, writeWr(env, 1, 16, makeKey(0x4242, 1), env.b.buf)), before);
  });
  it('a stale tag of a valid MR', () => {
    const env = setup();
    env.m.memWrite(0, env.a.buf, pattern(16));
    const before = env.m.memRead(1, env.b.buf, 4096);
    expectRemoteAccessError(env, run(env, env.a, writeWr(env, 1, 16, incRkey(env.b.mr.rkey), env.b.buf)), before);
  });
  it('a stale tag of a bound window', () => {
    const env = setup();
    const mw = window2(env, env.b, env.b.buf, 64, A.REMOTE_READ);
    expect(statuses(run(env, env.a, readWr(env, 1, 8, incRkey(mw.rkey), env.b.buf)))).toEqual(['REM_ACCESS_ERR']);
  });
});

describe('remote access 2: state VALID (and a window\'s length != 0)', () => {
  it('a fast-registration MR never registered', () => {
    const env = setup();
    const mr = env.m.allocMr(env.b.pd, 'MEM_REG', 1);
    expect(statuses(run(env, env.a, readWr(env, 1, 8, mr.rkey, 0)))).toEqual(['REM_ACCESS_ERR']);
  });
  it('a type-1 window not bound yet, and one unbound with length 0', () => {
    const env = setup();
    const mw = env.m.allocMw(env.b.pd, 1);
    expect(statuses(run(env, env.a, readWr(env, 1, 8, mw.rkey, env.b.buf)))).toEqual(['REM_ACCESS_ERR']);
    const env2 = setup();
    const mw2 = env2.m.allocMw(env2.b.pd, 1);
    env2.m.bindMw(env2.b.qp, mw2, { mr: env2.b.mr, addr: env2.b.buf, length: 64, access: A.REMOTE_READ });
    env2.m.runToCompletion();
    expect(statuses(run(env2, env2.a, readWr(env2, 1, 8, mw2.rkey, env2.b.buf)))).toEqual(['SUCCESS']);
    env2.m.bindMw(env2.b.qp, mw2, { addr: 0, length: 0, access: 0 });
    env2.m.runToCompletion();
    expect(statuses(run(env2, env2.a, readWr(env2, 2, 8, mw2.rkey, env2.b.buf)))).toEqual(['REM_ACCESS_ERR']);
  });
  it('a type-2 window after LOCAL_INV', () => {
    const env = setup();
    const mw = window2(env, env.b, env.b.buf, 64, A.REMOTE_READ);
    expect(statuses(run(env, env.b, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: mw.rkey, signaled: true }))).toEqual(['SUCCESS']);
    expect(statuses(run(env, env.a, readWr(env, 2, 8, mw.rkey, env.b.buf)))).toEqual(['REM_ACCESS_ERR']);
  });
});

describe('remote access 3: PD of the MR/window == PD of the responder QP; a type-2 window: its QP', () => {
  it('an MR of another PD', () => {
    const env = setup();
    const other = env.m.regMr(env.m.allocPd(1), env.b.buf, 4096, ALL);
    expect(statuses(run(env, env.a, readWr(env, 1, 8, other.rkey, env.b.buf)))).toEqual(['REM_ACCESS_ERR']);
  });
  it('a type-2 window bound on another QP of the same PD', () => {
    const env = setup();
    const { m, a, b } = env;
    // A second connection c (HCA 0) <-> d (HCA 1), d in b's PD.
    const c = m.createQp(a.pd, { sendCq: a.cq, recvCq: a.cq });
    const d = m.createQp(b.pd, { sendCq: b.cq, recvCq: b.cq });
    m.connect(c, d);
    const mw = m.allocMw(b.pd, 2);
    m.postSend(d, { wrId: 1, opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: { mr: b.mr, addr: b.buf, length: 64, access: A.REMOTE_READ } });
    m.runToCompletion();
    expect(m.keyState(mw.rkey, 1)).toMatchObject({ state: 'VALID', qpNum: d.qpNum });
    m.postSend(c, readWr(env, 2, 8, mw.rkey, b.buf));
    m.runToCompletion();
    expect(statuses(m.pollCq(a.cq))).toEqual(['SUCCESS']);
    expect(statuses(run(env, a, readWr(env, 3, 8, mw.rkey, b.buf)))).toEqual(['REM_ACCESS_ERR']);
  });
});

describe('remote access 4: READ needs REMOTE_READ, WRITE REMOTE_WRITE, atomics REMOTE_ATOMIC', () => {
  it('MRs', () => {
    const env = setup();
    const { m, b } = env;
    const noRead = m.regMr(b.pd, b.buf, 4096, A.LOCAL_WRITE | A.REMOTE_WRITE | A.REMOTE_ATOMIC);
    const noWrite = m.regMr(b.pd, b.buf, 4096, A.LOCAL_WRITE | A.REMOTE_READ | A.REMOTE_ATOMIC);
    const noAtomic = m.regMr(b.pd, b.buf, 4096, A.LOCAL_WRITE | A.REMOTE_READ | A.REMOTE_WRITE);
    expect(statuses(run(env, env.a, readWr(env, 1, 8, noWrite.rkey, b.buf)))).toEqual(['SUCCESS']);
    expect(statuses(run(env, env.a, readWr(env, 1, 8, noRead.rkey, b.buf)))).toEqual(['REM_ACCESS_ERR']);
    const env2 = setup();
    const w2 = env2.m.regMr(env2.b.pd, env2.b.buf, 4096, A.LOCAL_WRITE | A.REMOTE_READ);
    expect(statuses(run(env2, env2.a, writeWr(env2, 1, 8, w2.rkey, env2.b.buf)))).toEqual(['REM_ACCESS_ERR']);
    const env3 = setup();
    const a3 = env3.m.regMr(env3.b.pd, env3.b.buf, 4096, A.LOCAL_WRITE | A.REMOTE_READ | A.REMOTE_WRITE);
    expect(statuses(atomic(env3, 'ATOMIC_FETCH_AND_ADD', a3.rkey, env3.b.buf, 1n))).toEqual(['REM_ACCESS_ERR']);
    expect(noAtomic.rkey).not.toBe(0);
  });
  it('a window has its own rights, whatever its MR\'s remote rights', () => {
    const env = setup();
    const { m, b } = env;
    const local = m.regMr(b.pd, b.buf, 4096, A.LOCAL_WRITE | A.MW_BIND);
    const mw = m.allocMw(b.pd, 1);
    m.bindMw(b.qp, mw, { mr: local, addr: b.buf, length: 64, access: A.REMOTE_READ });
    m.runToCompletion();
    expect(statuses(run(env, env.a, readWr(env, 1, 8, local.rkey, b.buf)))).toEqual(['REM_ACCESS_ERR']);
    const env2 = setup();
    const local2 = env2.m.regMr(env2.b.pd, env2.b.buf, 4096, A.LOCAL_WRITE | A.MW_BIND);
    const mw2 = env2.m.allocMw(env2.b.pd, 1);
    env2.m.bindMw(env2.b.qp, mw2, { mr: local2, addr: env2.b.buf, length: 64, access: A.REMOTE_READ });
    env2.m.runToCompletion();
    expect(statuses(run(env2, env2.a, readWr(env2, 1, 8, mw2.rkey, env2.b.buf)))).toEqual(['SUCCESS']);
    expect(statuses(run(env2, env2.a, writeWr(env2, 2, 8, mw2.rkey, env2.b.buf)))).toEqual(['REM_ACCESS_ERR']);
    expect(mw.rkey).not.toBe(0);
  });
});

describe('remote access 5: bounds; zero-based starts at 0; a window maps to its MR at mw.addr + offset', () => {
  it('an MR over [buf + 0x100, buf + 0x200)', () => {
    const at = (va: number, len: number) => {
      const env = setup();
      const mr = env.m.regMr(env.b.pd, env.b.buf + 0x100, 0x100, ALL);
      return statuses(run(env, env.a, readWr(env, 1, len, mr.rkey, env.b.buf + va)));
    };
    expect(at(0xff, 8)).toEqual(['REM_ACCESS_ERR']);
    expect(at(0x1f9, 8)).toEqual(['REM_ACCESS_ERR']);
    expect(at(0x100, 0x100)).toEqual(['SUCCESS']);
    expect(at(0x1f8, 8)).toEqual(['SUCCESS']);
  });
  // Changed with issue 18 item 7: the MR was registered at b.buf + 0x300. A zero-based MR must
  // start on a page, as on mlx5 (Linux 6.12 drivers/infiniband/core/uverbs_cmd.c:710 refuses an
  // iova whose page offset differs from the address's with EINVAL).
  it('a zero-based MR', () => {
    const env = setup();
    const { m, b } = env;
    expect(() => m.regMr(b.pd, b.buf + 0x300, 0x100, ALL | A.ZERO_BASED)).toThrow(/ZERO_BASED needs a page-aligned address/);
    const zb = m.regMr(b.pd, b.buf, 0x100, ALL | A.ZERO_BASED);
    expect(zb.iova).toBe(0);
    m.memWrite(1, b.buf + 0x10, pattern(4, 70));
    expect(statuses(run(env, env.a, readWr(env, 1, 4, zb.rkey, 0x10)))).toEqual(['SUCCESS']);
    expect([...m.memRead(0, env.a.buf + 2048, 4)]).toEqual([70, 71, 72, 73]);
    expect(statuses(run(env, env.a, readWr(env, 2, 4, zb.rkey, 0xfd)))).toEqual(['REM_ACCESS_ERR']);
  });
  it('a window (zero-based type 2, and type 1 by address)', () => {
    const env = setup();
    const { m, b } = env;
    m.memWrite(1, b.buf + 0x500, pattern(32, 100));
    const zb = window2(env, b, b.buf + 0x500, 32, A.REMOTE_READ | A.ZERO_BASED);
    expect(statuses(run(env, env.a, readWr(env, 1, 4, zb.rkey, 4)))).toEqual(['SUCCESS']);
    expect([...m.memRead(0, env.a.buf + 2048, 4)]).toEqual([104, 105, 106, 107]);
    expect(statuses(run(env, env.a, readWr(env, 2, 4, zb.rkey, 29)))).toEqual(['REM_ACCESS_ERR']);
    const env2 = setup();
    const mw = env2.m.allocMw(env2.b.pd, 1);
    env2.m.memWrite(1, env2.b.buf + 0x500, pattern(32, 100));
    env2.m.bindMw(env2.b.qp, mw, { mr: env2.b.mr, addr: env2.b.buf + 0x500, length: 32, access: A.REMOTE_READ });
    env2.m.runToCompletion();
    expect(statuses(run(env2, env2.a, readWr(env2, 1, 4, mw.rkey, env2.b.buf + 0x51c)))).toEqual(['SUCCESS']);
    expect([...env2.m.memRead(0, env2.a.buf + 2048, 4)]).toEqual([128, 129, 130, 131]);
    expect(statuses(run(env2, env2.a, readWr(env2, 2, 4, mw.rkey, env2.b.buf + 0x4fc)))).toEqual(['REM_ACCESS_ERR']);
  });
});

describe('remote access 6: atomics must be 8-byte aligned (REM_INV_REQ_ERR)', () => {
  it('misaligned: requester REM_INV_REQ_ERR, both QPs ERR, nothing written', () => {
    const env = setup();
    const before = env.m.memRead(1, env.b.buf, 4096);
    expect(atomic(env, 'ATOMIC_FETCH_AND_ADD', env.b.mr.rkey, env.b.buf + 4, 1n)).toMatchObject([{ status: 'REM_INV_REQ_ERR', opcode: 'FETCH_ADD' }]);
    expect(env.a.qp.state).toBe('ERR');
    expect(env.b.qp.state).toBe('ERR');
    expect(env.m.memRead(1, env.b.buf, 4096)).toEqual(before);
  });
  it('checks 1-5 come first: misaligned and out of bounds is REM_ACCESS_ERR', () => {
    const env = setup();
    expect(statuses(atomic(env, 'ATOMIC_FETCH_AND_ADD', env.b.mr.rkey, env.b.buf + 4092, 1n))).toEqual(['REM_ACCESS_ERR']);
  });
});

describe('reserved keys name no MR or window', () => {
  it('0x0 and 0x100 (the invalid lkey) as rkey and as lkey', () => {
    for (const key of [0, 0x100]) {
      const env = setup();
      expect(statuses(run(env, env.a, readWr(env, 1, 8, key, env.b.buf)))).toEqual(['REM_ACCESS_ERR']);
      const env2 = setup();
      expect(statuses(run(env2, env2.a, { wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: env2.a.buf, length: 8, lkey: key }], remoteAddr: env2.b.buf, rkey: env2.b.mr.rkey }))).toEqual(['LOC_PROT_ERR']);
      expect(env2.m.keyState(key).kind).toBe('NONE');
    }
  });
});

describe('a zero-length READ/WRITE checks nothing', () => {
  it('garbage rkey and address', () => {
    const env = setup();
    expect(run(env, env.a, writeWr(env, 1, 0, 0xdeadbeef, 0x1))).toMatchObject([{ status: 'SUCCESS', opcode: 'RDMA_WRITE', byteLen: 0 }]);
    expect(run(env, env.a, readWr(env, 2, 0, 0xdeadbeef, 0x1))).toMatchObject([{ status: 'SUCCESS', opcode: 'RDMA_READ', byteLen: 0 }]);
    expect(env.b.qp.state).toBe('RTS');
  });
});

describe('remote access error: both QPs go to ERR, the responder\'s receives flush', () => {
  it('flushes the responder\'s posted receives', () => {
    const env = setup();
    postRecvAt(env, env.b, 21, 0, 64);
    postRecvAt(env, env.b, 22, 64, 64);
    run(env, env.a, readWr(env, 1, 8, 0x999900, 0));
    expect(env.m.pollCq(env.b.cq)).toMatchObject([
      { wrId: 21, status: 'WR_FLUSH_ERR', opcode: 'RECV', qpNum: env.b.qp.qpNum },
      { wrId: 22, status: 'WR_FLUSH_ERR', opcode: 'RECV' },
    ]);
  });
  it('a refused RDMA_WRITE_WITH_IMM consumes no receive (it is flushed)', () => {
    const env = setup();
    postRecvAt(env, env.b, 21, 0, 64);
    const wcs = run(env, env.a, { ...writeWr(env, 1, 8, 0x999900, 0), opcode: 'RDMA_WRITE_WITH_IMM', immData: 5 });
    expect(statuses(wcs)).toEqual(['REM_ACCESS_ERR']);
    expect(env.m.pollCq(env.b.cq)).toMatchObject([{ wrId: 21, status: 'WR_FLUSH_ERR' }]);
  });
});

describe('local access: the requester\'s own SGE (LOC_PROT_ERR)', () => {
  const cases: Array<[string, (env: Env) => { addr: number; length: number; lkey: number }]> = [
    ['an lkey that names nothing', (env) => ({ addr: env.a.buf, length: 8, lkey: 0x123400 })],
    ['a stale tag', (env) => ({ addr: env.a.buf, length: 8, lkey: incRkey(env.a.mr.lkey) })],
    ['a FREE fast-reg MR', (env) => ({ addr: 0, length: 8, lkey: env.m.allocMr(env.a.pd, 'MEM_REG', 1).lkey })],
    ['an MR of another PD', (env) => ({ addr: env.a.buf, length: 8, lkey: env.m.regMr(env.m.allocPd(0), env.a.buf, 4096, ALL).lkey })],
    ['out of bounds', (env) => ({ addr: env.a.buf + 4090, length: 8, lkey: env.a.mr.lkey })],
    ['a window\'s key', (env) => {
      const mw = env.m.allocMw(env.a.pd, 1);
      env.m.bindMw(env.a.qp, mw, { mr: env.a.mr, addr: env.a.buf, length: 64, access: A.REMOTE_READ });
      env.m.runToCompletion();
      return { addr: env.a.buf, length: 8, lkey: mw.rkey };
    }],
  ];
  for (const [name, sge] of cases) {
    it(`SEND from ${name}: nothing reaches the responder`, () => {
      const env = setup();
      postRecvAt(env, env.b, 5, 0, 64);
      const wcs = run(env, env.a, { wrId: 1, opcode: 'SEND', sgList: [sge(env)], signaled: true });
      expect(wcs).toMatchObject([{ wrId: 1, status: 'LOC_PROT_ERR', opcode: 'SEND' }]);
      expect(env.a.qp.state).toBe('ERR');
      expect(env.b.qp.state).toBe('RTS');
      expect(env.b.qp.rq.length).toBe(1);
      expect(env.m.pollCq(env.b.cq)).toEqual([]);
    });
  }
  it('LOCAL_WRITE where the HCA writes: an RDMA READ destination', () => {
    const env = setup();
    const ro = env.m.regMr(env.a.pd, env.a.buf, 4096, A.REMOTE_READ);
    env.m.memWrite(1, env.b.buf, pattern(8));
    const wcs = run(env, env.a, { wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: env.a.buf, length: 8, lkey: ro.lkey }], remoteAddr: env.b.buf, rkey: env.b.mr.rkey });
    expect(statuses(wcs)).toEqual(['LOC_PROT_ERR']);
    expect([...env.m.memRead(0, env.a.buf, 8)]).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(env.b.qp.state).toBe('RTS');
  });
  it('LOCAL_WRITE where the HCA writes: an atomic result (the remote value is untouched)', () => {
    const env = setup();
    const ro = env.m.regMr(env.a.pd, env.a.buf, 4096, 0);
    const wcs = run(env, env.a, { wrId: 1, opcode: 'ATOMIC_FETCH_AND_ADD', sgList: [{ addr: env.a.buf, length: 8, lkey: ro.lkey }], remoteAddr: env.b.buf, rkey: env.b.mr.rkey, compareAdd: 5n });
    expect(statuses(wcs)).toEqual(['LOC_PROT_ERR']);
    expect([...env.m.memRead(1, env.b.buf, 8)]).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
  });
  it('no LOCAL_WRITE needed where the HCA only reads (SEND, RDMA WRITE source)', () => {
    const env = setup();
    const ro = env.m.regMr(env.a.pd, env.a.buf, 4096, 0);
    env.m.memWrite(0, env.a.buf, pattern(8));
    const wcs = run(env, env.a, { wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: env.a.buf, length: 8, lkey: ro.lkey }], remoteAddr: env.b.buf, rkey: env.b.mr.rkey, signaled: true });
    expect(statuses(wcs)).toEqual(['SUCCESS']);
    expect([...env.m.memRead(1, env.b.buf, 8)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
  it('an inline SEND has no lkey to check', () => {
    const env = setup();
    postRecvAt(env, env.b, 5, 0, 64);
    env.m.memWrite(0, env.a.buf, pattern(4));
    const wcs = run(env, env.a, { wrId: 1, opcode: 'SEND', inline: true, sgList: [{ addr: env.a.buf, length: 4, lkey: 0 }], signaled: true });
    expect(statuses(wcs)).toEqual(['SUCCESS']);
    expect([...env.m.memRead(1, env.b.buf, 4)]).toEqual([1, 2, 3, 4]);
  });
});

describe('local access: the responder\'s receive SGE (receive LOC_PROT_ERR, requester REM_OP_ERR)', () => {
  const bad: Array<[string, (env: Env) => { addr: number; length: number; lkey: number }]> = [
    ['a bad lkey', (env) => ({ addr: env.b.buf, length: 64, lkey: 0x55500 })],
    ['an MR without LOCAL_WRITE', (env) => ({ addr: env.b.buf, length: 64, lkey: env.m.regMr(env.b.pd, env.b.buf, 4096, A.REMOTE_READ).lkey })],
    ['out of bounds', (env) => ({ addr: env.b.buf + 4090, length: 64, lkey: env.b.mr.lkey })],
  ];
  for (const [name, sge] of bad) {
    it(name, () => {
      const env = setup();
      env.m.postRecv(env.b.qp, { wrId: 31, sgList: [sge(env)] });
      const before = env.m.memRead(1, env.b.buf, 4096);
      env.m.memWrite(0, env.a.buf, pattern(16));
      const wcs = run(env, env.a, { wrId: 1, opcode: 'SEND', sgList: [{ addr: env.a.buf, length: 16, lkey: env.a.mr.lkey }] });
      expect(wcs).toMatchObject([{ wrId: 1, status: 'REM_OP_ERR', opcode: 'SEND' }]);
      expect(env.m.pollCq(env.b.cq)).toMatchObject([{ wrId: 31, status: 'LOC_PROT_ERR', opcode: 'RECV', byteLen: 0 }]);
      expect(env.a.qp.state).toBe('ERR');
      expect(env.b.qp.state).toBe('ERR');
      expect(env.m.memRead(1, env.b.buf, 4096)).toEqual(before);
    });
  }
  it('only the bytes an SGE takes are checked', () => {
    const env = setup();
    env.m.postRecv(env.b.qp, { wrId: 31, sgList: [{ addr: env.b.buf, length: 16, lkey: env.b.mr.lkey }, { addr: 0, length: 16, lkey: 0x55500 }] });
    const wcs = run(env, env.a, { wrId: 1, opcode: 'SEND', sgList: [{ addr: env.a.buf, length: 10, lkey: env.a.mr.lkey }], signaled: true });
    expect(statuses(wcs)).toEqual(['SUCCESS']);
    expect(env.m.pollCq(env.b.cq)).toMatchObject([{ wrId: 31, status: 'SUCCESS', byteLen: 10 }]);
  });
  it('an SGE reaching past its MR is fine when the message ends inside the MR', () => {
    const env = setup();
    env.m.postRecv(env.b.qp, { wrId: 32, sgList: [{ addr: env.b.buf + 4090, length: 64, lkey: env.b.mr.lkey }] });
    env.m.memWrite(0, env.a.buf, pattern(6));
    const wcs = run(env, env.a, { wrId: 1, opcode: 'SEND', sgList: [{ addr: env.a.buf, length: 6, lkey: env.a.mr.lkey }], signaled: true });
    expect(statuses(wcs)).toEqual(['SUCCESS']);
    expect([...env.m.memRead(1, env.b.buf + 4090, 6)]).toEqual([1, 2, 3, 4, 5, 6]);
  });
});

describe('receive buffer too small: responder LOC_LEN_ERR, requester REM_INV_REQ_ERR', () => {
  it('16 bytes into 15', () => {
    const env = setup();
    env.m.postRecv(env.b.qp, { wrId: 31, sgList: [{ addr: env.b.buf, length: 10, lkey: env.b.mr.lkey }, { addr: env.b.buf + 100, length: 5, lkey: env.b.mr.lkey }] });
    env.m.memWrite(0, env.a.buf, pattern(16));
    const wcs = run(env, env.a, { wrId: 1, opcode: 'SEND', sgList: [{ addr: env.a.buf, length: 16, lkey: env.a.mr.lkey }] });
    expect(wcs).toMatchObject([{ wrId: 1, status: 'REM_INV_REQ_ERR' }]);
    expect(env.m.pollCq(env.b.cq)).toMatchObject([{ wrId: 31, status: 'LOC_LEN_ERR', opcode: 'RECV' }]);
    expect([...env.m.memRead(1, env.b.buf, 10)]).toEqual(new Array(10).fill(0));
    expect(env.b.qp.state).toBe('ERR');
  });
});

describe('bytes moved', () => {
  it('SEND scatters over several receive SGEs, gathers from several send SGEs', () => {
    const env = setup();
    const { m, a, b } = env;
    m.memWrite(0, a.buf, pattern(6, 1));
    m.memWrite(0, a.buf + 100, pattern(6, 7));
    m.postRecv(b.qp, { wrId: 3, sgList: [{ addr: b.buf + 10, length: 4, lkey: b.mr.lkey }, { addr: b.buf + 50, length: 20, lkey: b.mr.lkey }] });
    const wcs = run(env, a, { wrId: 1, opcode: 'SEND_WITH_IMM', immData: 0xcafe, signaled: true, sgList: [{ addr: a.buf, length: 6, lkey: a.mr.lkey }, { addr: a.buf + 100, length: 6, lkey: a.mr.lkey }] });
    expect(wcs).toMatchObject([{ wrId: 1, status: 'SUCCESS', opcode: 'SEND', byteLen: 12, qpNum: a.qp.qpNum }]);
    const [rwc] = m.pollCq(b.cq);
    expect(rwc).toMatchObject({ wrId: 3, status: 'SUCCESS', opcode: 'RECV', byteLen: 12, immData: 0xcafe, qpNum: b.qp.qpNum });
    expect([...rwc.wcFlags]).toEqual(['WITH_IMM']);
    expect([...m.memRead(1, b.buf + 10, 4)]).toEqual([1, 2, 3, 4]);
    expect([...m.memRead(1, b.buf + 50, 9)]).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 0]);
  });
  it('RDMA_WRITE_WITH_IMM consumes a receive (its SGEs unused) with RECV_RDMA_WITH_IMM', () => {
    const env = setup();
    const { m, a, b } = env;
    m.postRecv(b.qp, { wrId: 4, sgList: [{ addr: 0, length: 1, lkey: 0x55500 }] });
    m.memWrite(0, a.buf, pattern(8));
    const wcs = run(env, a, { ...writeWr(env, 1, 8, b.mr.rkey, b.buf + 8), opcode: 'RDMA_WRITE_WITH_IMM', immData: 7 });
    expect(wcs).toMatchObject([{ status: 'SUCCESS', opcode: 'RDMA_WRITE', byteLen: 8 }]);
    const [rwc] = m.pollCq(b.cq);
    expect(rwc).toMatchObject({ wrId: 4, status: 'SUCCESS', opcode: 'RECV_RDMA_WITH_IMM', byteLen: 8, immData: 7 });
    expect([...rwc.wcFlags]).toEqual(['WITH_IMM']);
    expect([...m.memRead(1, b.buf + 8, 8)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
  it('RDMA READ', () => {
    const env = setup();
    env.m.memWrite(1, env.b.buf + 40, pattern(5, 9));
    expect(run(env, env.a, readWr(env, 1, 5, env.b.mr.rkey, env.b.buf + 40))).toMatchObject([{ status: 'SUCCESS', byteLen: 5 }]);
    expect([...env.m.memRead(0, env.a.buf + 2048, 5)]).toEqual([9, 10, 11, 12, 13]);
  });
  it('an SG_GAPS MR: its range walks its elements in order', () => {
    const env = setup();
    const { m, a, b } = env;
    const mr = m.allocMr(b.pd, 'SG_GAPS', 4);
    m.mapSg(mr, [{ addr: b.buf + 0x100, length: 3 }, { addr: b.buf + 0x800, length: 5 }]);
    expect(statuses(run(env, b, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: A.LOCAL_WRITE | A.REMOTE_WRITE, signaled: true }))).toEqual(['SUCCESS']);
    m.memWrite(0, a.buf, pattern(6));
    expect(statuses(run(env, a, writeWr(env, 2, 6, mr.rkey, b.buf + 0x101)))).toEqual(['SUCCESS']);
    expect([...m.memRead(1, b.buf + 0x100, 4)]).toEqual([0, 1, 2, 0]);
    expect([...m.memRead(1, b.buf + 0x800, 5)]).toEqual([3, 4, 5, 6, 0]);
  });
  it('a MEM_REG MR over an unaligned first element and a second page', () => {
    const env = setup();
    const { m, a, b } = env;
    const pages = m.alloc(1, 3 * 4096);
    const mr = m.allocMr(b.pd, 'MEM_REG', 4);
    expect(m.mapSg(mr, [{ addr: pages + 4096 - 4, length: 4 }, { addr: pages + 2 * 4096, length: 4096 }])).toBe(2);
    expect(statuses(run(env, b, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: A.LOCAL_WRITE | A.REMOTE_WRITE, signaled: true }))).toEqual(['SUCCESS']);
    m.memWrite(0, a.buf, pattern(8));
    expect(statuses(run(env, a, writeWr(env, 2, 8, mr.rkey, pages + 4096 - 4)))).toEqual(['SUCCESS']);
    expect([...m.memRead(1, pages + 4096 - 4, 4)]).toEqual([1, 2, 3, 4]);
    expect([...m.memRead(1, pages + 2 * 4096, 5)]).toEqual([5, 6, 7, 8, 0]);
  });
  it('mapSg: the page size is a power of two from 4 KiB (mlx5) to 2 GiB, else EINVAL', () => {
    const { m, b } = setup();
    const mr = m.allocMr(b.pd, 'MEM_REG', 4);
    for (const bad of [0, 512, 2048, 4095, 6144, 2 ** 32, 1.5]) {
      expect(() => m.mapSg(mr, [{ addr: b.buf, length: 8 }], bad)).toThrow(expect.objectContaining({ errno: 'EINVAL' }));
    }
    for (const ok of [4096, 8192, 2 ** 21, 2 ** 31]) expect(m.mapSg(mr, [{ addr: b.buf, length: 8 }], ok)).toBe(1);
  });
  it('atomics: little-endian 64-bit operands; the original value returns', () => {
    const env = setup();
    const { m, b } = env;
    m.memWrite(1, b.buf + 8, Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff));
    expect(atomic(env, 'ATOMIC_FETCH_AND_ADD', b.mr.rkey, b.buf + 8, 2n)).toMatchObject([{ status: 'SUCCESS', opcode: 'FETCH_ADD', byteLen: 8 }]);
    expect([...m.memRead(1, b.buf + 8, 8)]).toEqual([1, 0, 0, 0, 0, 0, 0, 0]); // wrapped mod 2^64
    expect([...m.memRead(0, env.a.buf + 3072, 8)]).toEqual([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    // Compare 1 matches: swap in 0x0102030405060708.
    expect(atomic(env, 'ATOMIC_CMP_AND_SWP', b.mr.rkey, b.buf + 8, 1n, 0x0102030405060708n)).toMatchObject([{ status: 'SUCCESS', opcode: 'COMP_SWAP' }]);
    expect([...m.memRead(1, b.buf + 8, 8)]).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
    expect([...m.memRead(0, env.a.buf + 3072, 8)]).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    // Compare 1 no longer matches: memory unchanged, the original returns.
    expect(statuses(atomic(env, 'ATOMIC_CMP_AND_SWP', b.mr.rkey, b.buf + 8, 1n, 0n))).toEqual(['SUCCESS']);
    expect([...m.memRead(1, b.buf + 8, 8)]).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
    expect([...m.memRead(0, env.a.buf + 3072, 8)]).toEqual([8, 7, 6, 5, 4, 3, 2, 1]);
  });
  it('an atomic\'s local buffer is exactly 8 bytes (EINVAL at post)', () => {
    const env = setup();
    expect(() => env.m.postSend(env.a.qp, { wrId: 1, opcode: 'ATOMIC_FETCH_AND_ADD', sgList: [{ addr: env.a.buf, length: 16, lkey: env.a.mr.lkey }], remoteAddr: env.b.buf, rkey: env.b.mr.rkey, compareAdd: 1n })).toThrow(/8 bytes/);
  });
  it('loopback on one HCA', () => {
    const env = setup({ loopback: true });
    env.m.memWrite(0, env.a.buf, pattern(4));
    expect(statuses(run(env, env.a, writeWr(env, 1, 4, env.b.mr.rkey, env.b.buf + 64)))).toEqual(['SUCCESS']);
    expect([...env.m.memRead(0, env.b.buf + 64, 4)]).toEqual([1, 2, 3, 4]);
  });
});

describe('RNR: a SEND waits for a receive', () => {
  it('stays queued, later work runs, and it completes once a receive is posted', () => {
    const env = setup();
    const { m, a, b } = env;
    m.postSend(a.qp, { wrId: 1, opcode: 'SEND', sgList: [{ addr: a.buf, length: 4, lkey: a.mr.lkey }], signaled: true });
    m.postSend(b.qp, { wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: m.allocMr(b.pd, 'MEM_REG', 1).lkey, signaled: true });
    expect(m.runToCompletion()).toBe(1);
    expect(a.qp.sq.length).toBe(1);
    expect(m.pollCq(a.cq)).toEqual([]);
    expect(statuses(m.pollCq(b.cq))).toEqual(['SUCCESS']);
    postRecvAt(env, b, 3, 0, 64);
    expect(m.runToCompletion()).toBe(1);
    expect(statuses(m.pollCq(a.cq))).toEqual(['SUCCESS']);
    expect(m.pollCq(b.cq)).toMatchObject([{ wrId: 3, status: 'SUCCESS', byteLen: 4 }]);
  });
});
