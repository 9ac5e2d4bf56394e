/** semantics.md "Work requests (async outcomes)": one or more tests per row, and the success paragraph. */
import { describe, expect, it } from 'vitest';
import { incRkey, makeKey, type ModelMr, type ModelMw } from '../../../src/model/index.ts';
import { A, ALL, pattern, postRecvAt, readWr, run, setup, statuses, writeWr, type Env, type Side } from './helpers.ts';

/** A fast-registration MR on `side` over `[side.buf + off, + len)`, registered with `access` (signaled REG_MR). */
function fastMr(env: Env, side: Side, off: number, len: number, access: number, tag = 0x42): ModelMr {
  const mr = env.m.allocMr(side.pd, 'SG_GAPS', 4);
  env.m.mapSg(mr, [{ addr: side.buf + off, length: len }]);
  env.m.updateKey(mr, tag); // the handle's key follows the registration (ib_update_fast_reg_key)
  const wcs = run(env, side, { wrId: 900, opcode: 'REG_MR', mr, key: mr.lkey, access, signaled: true });
  expect(statuses(wcs)).toEqual(['SUCCESS']);
  return mr;
}

/** Posts a signaled BIND_MW of type-2 `mw` on `side` and returns its completions. */
function bind2(env: Env, side: Side, mw: ModelMw, mr: ModelMr | null, addr: number, length: number, access: number) {
  return run(env, side, { wrId: 77, opcode: 'BIND_MW', mw, rkey: incRkey(mw.rkey), bindInfo: { mr, addr, length, access }, signaled: true });
}

/** Binds type-1 `mw` with the verb on `side` and returns its completions. */
function bind1(env: Env, side: Side, mw: ModelMw, mr: ModelMr, addr: number, length: number, access: number) {
  env.m.bindMw(side.qp, mw, { mr, addr, length, access }, { wrId: 78, signaled: true });
  env.m.runToCompletion();
  return env.m.pollCq(side.cq);
}

describe('REG_MR: MR must be FREE (LOC_QP_OP_ERR)', () => {
  it('a FREE MR registers; a VALID one fails and keeps its key; the QP goes to ERR', () => {
    const env = setup();
    const { m, a } = env;
    const mr = fastMr(env, a, 0, 64, A.LOCAL_WRITE, 0x42);
    const wcs = run(env, a, { wrId: 1, opcode: 'REG_MR', mr, key: makeKey(mr.index, 0x43), access: A.LOCAL_WRITE });
    expect(wcs).toMatchObject([{ wrId: 1, status: 'LOC_QP_OP_ERR', opcode: 'REG_MR', byteLen: 0 }]);
    expect(m.keyState(makeKey(mr.index, 0x42))).toMatchObject({ state: 'VALID', key: makeKey(mr.index, 0x42) });
    expect(a.qp.state).toBe('ERR');
  });
  it('a user MR, even after LOCAL_INV, cannot be re-registered (EINVAL at post)', () => {
    const env = setup();
    const { m, a } = env;
    expect(() => m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr: a.mr, key: a.mr.lkey, access: 0 })).toThrow(/fast-registration/);
  });
});

describe('REG_MR success: tag, iova, length, access, page list; VALID; completion REG_MR', () => {
  it('sets the posted key and the mapped range; the key then works', () => {
    const env = setup();
    const { m, a, b } = env;
    const mr = m.allocMr(b.pd, 'MEM_REG', 4);
    m.mapSg(mr, [{ addr: b.buf + 0x100, length: 0xf00 }]);
    const key = makeKey(mr.index, 0x99);
    const wcs = run(env, b, { wrId: 5, opcode: 'REG_MR', mr, key, access: A.LOCAL_WRITE | A.REMOTE_WRITE, signaled: true });
    expect(wcs).toMatchObject([{ wrId: 5, status: 'SUCCESS', opcode: 'REG_MR', byteLen: 0, qpNum: b.qp.qpNum }]);
    expect(m.keyState(key, 1)).toEqual({
      kind: 'MR', index: mr.index, type: 'MEM_REG', key, keyMatches: true, state: 'VALID', pdn: b.pd.pdn,
      iova: b.buf + 0x100, length: 0xf00, access: A.LOCAL_WRITE | A.REMOTE_WRITE, boundWindows: 0,
    });
    m.memWrite(0, a.buf, pattern(4));
    expect(statuses(run(env, a, writeWr(env, 1, 4, key, b.buf + 0x100)))).toEqual(['SUCCESS']);
    expect([...m.memRead(1, b.buf + 0x100, 4)]).toEqual([1, 2, 3, 4]);
    // The old tag is stale now.
    expect(statuses(run(env, a, writeWr(env, 2, 4, makeKey(mr.index, 0x98), b.buf + 0x100)))).toEqual(['REM_ACCESS_ERR']);
  });
  it('ZERO_BASED registration starts at 0', () => {
    const env = setup();
    const { m, a, b } = env;
    const mr = fastMr(env, b, 0x200, 0x100, A.LOCAL_WRITE | A.REMOTE_READ | A.ZERO_BASED);
    expect(m.keyState(mr.lkey, 1)).toMatchObject({ iova: 0, length: 0x100 });
    m.memWrite(1, b.buf + 0x210, pattern(4, 50));
    expect(statuses(run(env, a, readWr(env, 1, 4, makeKey(mr.index, 0x42), 0x10)))).toEqual(['SUCCESS']);
    expect([...m.memRead(0, a.buf + 2048, 4)]).toEqual([50, 51, 52, 53]);
  });
});

describe('LOCAL_INV: key must name an MR or type-2 window, full 32-bit key match (LOC_QP_OP_ERR)', () => {
  it('an index that names nothing', () => {
    const env = setup();
    expect(run(env, env.a, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: makeKey(0x7777, 1) })).toMatchObject([
      { wrId: 1, status: 'LOC_QP_OP_ERR', opcode: 'LOCAL_INV' },
    ]);
    expect(env.a.qp.state).toBe('ERR');
  });
  it('a stale tag leaves the MR VALID', () => {
    const env = setup();
    const mr = fastMr(env, env.a, 0, 64, 0, 0x10);
    expect(statuses(run(env, env.a, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: makeKey(mr.index, 0x11) }))).toEqual(['LOC_QP_OP_ERR']);
    expect(env.m.keyState(mr.lkey)).toMatchObject({ state: 'VALID' });
  });
  it('success: fast-reg MR FREE (completion LOCAL_INV), then re-registration works', () => {
    const env = setup();
    const { m, a } = env;
    const mr = fastMr(env, a, 0, 64, 0, 0x10);
    const key = makeKey(mr.index, 0x10);
    expect(run(env, a, { wrId: 3, opcode: 'LOCAL_INV', invalidateRkey: key, signaled: true })).toMatchObject([
      { wrId: 3, status: 'SUCCESS', opcode: 'LOCAL_INV', byteLen: 0 },
    ]);
    expect(m.keyState(key)).toMatchObject({ state: 'FREE', key });
    expect(statuses(run(env, a, { wrId: 4, opcode: 'REG_MR', mr, key: makeKey(mr.index, 0x11), access: 0, signaled: true }))).toEqual(['SUCCESS']);
  });
  it('success on a user MR (UMR-enabled): remote access then fails', () => {
    const env = setup();
    const { m, a, b } = env;
    expect(statuses(run(env, b, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: b.mr.lkey, signaled: true }))).toEqual(['SUCCESS']);
    expect(m.keyState(b.mr.lkey, 1)).toMatchObject({ type: 'USER', state: 'FREE' });
    expect(statuses(run(env, a, readWr(env, 2, 8, b.mr.rkey, b.buf)))).toEqual(['REM_ACCESS_ERR']);
  });
  it('success on a type-2 window: FREE, and its MR counts one window less', () => {
    const env = setup();
    const { m, b } = env;
    const mw = m.allocMw(b.pd, 2);
    expect(statuses(bind2(env, b, mw, b.mr, b.buf, 64, A.REMOTE_READ))).toEqual(['SUCCESS']);
    expect(m.keyState(b.mr.lkey, 1)).toMatchObject({ boundWindows: 1 });
    expect(statuses(run(env, b, { wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: mw.rkey, signaled: true }))).toEqual(['SUCCESS']);
    expect(m.keyState(mw.rkey, 1)).toMatchObject({ kind: 'MW', state: 'FREE', length: 0, qpNum: undefined });
    expect(m.keyState(b.mr.lkey, 1)).toMatchObject({ boundWindows: 0 });
  });
});

describe('LOCAL_INV: target is a type-1 window (o10-37.2.26) (LOC_QP_OP_ERR)', () => {
  it('bound type-1 window stays bound', () => {
    const env = setup();
    const { m, b } = env;
    const mw = m.allocMw(b.pd, 1);
    expect(statuses(bind1(env, b, mw, b.mr, b.buf, 64, A.REMOTE_READ))).toEqual(['SUCCESS']);
    expect(statuses(run(env, b, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: mw.rkey }))).toEqual(['LOC_QP_OP_ERR']);
    expect(m.keyState(mw.rkey, 1)).toMatchObject({ state: 'VALID', length: 64 });
  });
});

describe('LOCAL_INV: MR still has windows bound (LOC_QP_OP_ERR)', () => {
  it('the MR stays VALID', () => {
    const env = setup();
    const { m, b } = env;
    const mr = fastMr(env, b, 0, 256, A.LOCAL_WRITE | A.MW_BIND);
    const mw = m.allocMw(b.pd, 2);
    expect(statuses(bind2(env, b, mw, mr, mr.iova, 16, A.REMOTE_READ))).toEqual(['SUCCESS']);
    expect(statuses(run(env, b, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: makeKey(mr.index, 0x42) }))).toEqual(['LOC_QP_OP_ERR']);
    expect(m.keyState(makeKey(mr.index, 0x42), 1)).toMatchObject({ state: 'VALID', boundWindows: 1 });
  });
});

describe('LOCAL_INV: target already FREE succeeds (no check flag)', () => {
  it('a never-registered fast-reg MR and a FREE type-2 window', () => {
    const env = setup();
    const { m, a } = env;
    const mr = m.allocMr(a.pd, 'MEM_REG', 1);
    const mw = m.allocMw(a.pd, 2);
    expect(statuses(run(env, a, { wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: mr.lkey, signaled: true }))).toEqual(['SUCCESS']);
    expect(statuses(run(env, a, { wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: mw.rkey, signaled: true }))).toEqual(['SUCCESS']);
    expect(m.keyState(mr.lkey)).toMatchObject({ state: 'FREE' });
    expect(a.qp.state).toBe('RTS');
  });
});

describe('BIND_MW (2): window must be FREE (o10-37.2.30) (MW_BIND_ERR)', () => {
  it('a second bind of a bound window fails and leaves the first binding', () => {
    const env = setup();
    const { m, b } = env;
    const mw = m.allocMw(b.pd, 2);
    expect(statuses(bind2(env, b, mw, b.mr, b.buf, 64, A.REMOTE_READ))).toEqual(['SUCCESS']);
    const firstKey = mw.rkey;
    expect(bind2(env, b, mw, b.mr, b.buf, 32, A.REMOTE_READ)).toMatchObject([{ wrId: 77, status: 'MW_BIND_ERR', opcode: 'BIND_MW' }]);
    // The handle took the posted key at once; the device keeps the first binding.
    expect(mw.rkey).toBe(incRkey(firstKey));
    expect(m.keyState(firstKey, 1)).toMatchObject({ key: firstKey, keyMatches: true, length: 64 });
    expect(b.qp.state).toBe('ERR');
  });
});

describe('BIND_MW (2): QP\'s PD == window\'s PD (C10-72) (MW_BIND_ERR)', () => {
  it('a window of another PD', () => {
    const env = setup();
    const { m, b } = env;
    const pd2 = m.allocPd(1);
    const mw = m.allocMw(pd2, 2);
    const mr2 = m.regMr(pd2, b.buf, 4096, ALL);
    expect(statuses(bind2(env, b, mw, mr2, b.buf, 64, A.REMOTE_READ))).toEqual(['MW_BIND_ERR']);
    expect(m.keyState(mw.rkey, 1)).toMatchObject({ state: 'FREE' });
  });
});

// Changed with issue 18 item 7: C10-73 (MW_BIND_ERR for an MR without MW_BIND access) is not
// mlx5's. Its mkey has no MW_BIND bit (Linux 6.12 drivers/infiniband/hw/mlx5/wr.c:180
// get_umr_flags and umr.c:443 mlx5r_umr_set_access_flags drop it), and rdma-core checks it only
// in a build with MLX5_MW_DEBUG (providers/mlx5/qp.c set_bind_wr; CMakeLists.txt: off by default).
describe('BIND_MW (1, 2): an MR without MW_BIND access takes the bind, as on mlx5 (no C10-73)', () => {
  it('type 2', () => {
    const env = setup();
    const noBind = env.m.regMr(env.b.pd, env.b.buf, 4096, A.LOCAL_WRITE | A.REMOTE_READ);
    const mw = env.m.allocMw(env.b.pd, 2);
    expect(statuses(bind2(env, env.b, mw, noBind, env.b.buf, 8, A.REMOTE_READ))).toEqual(['SUCCESS']);
    expect(env.m.keyState(mw.rkey, 1)).toMatchObject({ state: 'VALID', keyMatches: true });
  });
  it('type 1', () => {
    const env = setup();
    const noBind = env.m.regMr(env.b.pd, env.b.buf, 4096, A.LOCAL_WRITE | A.REMOTE_READ);
    const mw = env.m.allocMw(env.b.pd, 1);
    expect(statuses(bind1(env, env.b, mw, noBind, env.b.buf, 8, A.REMOTE_READ))).toEqual(['SUCCESS']);
    expect(env.m.keyState(mw.rkey, 1)).toMatchObject({ state: 'VALID', keyMatches: true });
  });
});

describe('BIND_MW (1, 2): window REMOTE_WRITE / REMOTE_ATOMIC requires MR LOCAL_WRITE (C10-74) (MW_BIND_ERR)', () => {
  for (const type of [1, 2] as const) {
    it(`type ${type}`, () => {
      const bindTo = (access: number) => {
        const env = setup();
        const mr = env.m.regMr(env.b.pd, env.b.buf, 4096, A.REMOTE_READ | A.MW_BIND);
        const mw = env.m.allocMw(env.b.pd, type);
        const wcs = type === 1 ? bind1(env, env.b, mw, mr, env.b.buf, 8, access) : bind2(env, env.b, mw, mr, env.b.buf, 8, access);
        return statuses(wcs);
      };
      expect(bindTo(A.REMOTE_WRITE)).toEqual(['MW_BIND_ERR']);
      expect(bindTo(A.REMOTE_ATOMIC)).toEqual(['MW_BIND_ERR']);
      expect(bindTo(A.REMOTE_READ)).toEqual(['SUCCESS']);
    });
  }
});

describe('BIND_MW (1, 2): range within the MR (C10-75) (MW_BIND_ERR)', () => {
  for (const type of [1, 2] as const) {
    it(`type ${type}`, () => {
      const bindAt = (addr: number, length: number) => {
        const env = setup();
        const mr = env.m.regMr(env.b.pd, env.b.buf + 0x100, 0x100, ALL);
        const mw = env.m.allocMw(env.b.pd, type);
        const wcs = type === 1 ? bind1(env, env.b, mw, mr, addr, length, A.REMOTE_READ) : bind2(env, env.b, mw, mr, addr, length, A.REMOTE_READ);
        return statuses(wcs);
      };
      const base = setup().b.buf; // same layout in every fresh setup
      expect(bindAt(base + 0xff, 8)).toEqual(['MW_BIND_ERR']);
      expect(bindAt(base + 0x1f9, 8)).toEqual(['MW_BIND_ERR']);
      expect(bindAt(base + 0x100, 0x100)).toEqual(['SUCCESS']);
      expect(bindAt(base + 0x1f8, 8)).toEqual(['SUCCESS']);
    });
  }
});

describe('BIND_MW (2): MR given and length != 0 (o10-37.2.40) (MW_BIND_ERR)', () => {
  it('length 0', () => {
    const env = setup();
    expect(statuses(bind2(env, env.b, env.m.allocMw(env.b.pd, 2), env.b.mr, env.b.buf, 0, A.REMOTE_READ))).toEqual(['MW_BIND_ERR']);
  });
  it('no MR', () => {
    const env = setup();
    expect(statuses(bind2(env, env.b, env.m.allocMw(env.b.pd, 2), null, env.b.buf, 8, A.REMOTE_READ))).toEqual(['MW_BIND_ERR']);
  });
});

describe('BIND_MW: MR must be VALID, its key current (MW_BIND_ERR)', () => {
  it('a FREE fast-reg MR', () => {
    const env = setup();
    const mr = env.m.allocMr(env.b.pd, 'SG_GAPS', 1);
    expect(statuses(bind2(env, env.b, env.m.allocMw(env.b.pd, 2), mr, 0, 8, A.REMOTE_READ))).toEqual(['MW_BIND_ERR']);
  });
  it('a handle key that is not the device key (updateKey without REG_MR)', () => {
    const env = setup();
    const mr = fastMr(env, env.b, 0, 256, ALL, 0x20);
    env.m.updateKey(mr, 0x42); // the handle now says 0x42, the device holds 0x20
    expect(statuses(bind2(env, env.b, env.m.allocMw(env.b.pd, 2), mr, env.b.buf, 8, A.REMOTE_READ))).toEqual(['MW_BIND_ERR']);
  });
  it('the current key binds', () => {
    const env = setup();
    const mr = fastMr(env, env.b, 0, 256, ALL, 0x20);
    expect(statuses(bind2(env, env.b, env.m.allocMw(env.b.pd, 2), mr, env.b.buf, 8, A.REMOTE_READ))).toEqual(['SUCCESS']);
  });
});

describe('BIND_MW success: tag, range, access, QP (type 2), VALID, one more window on the MR', () => {
  it('type 2', () => {
    const env = setup();
    const { m, a, b } = env;
    const mw = m.allocMw(b.pd, 2);
    const newKey = makeKey(mw.index, 0xee);
    const wcs = run(env, b, { wrId: 9, opcode: 'BIND_MW', mw, rkey: newKey, bindInfo: { mr: b.mr, addr: b.buf + 16, length: 32, access: A.REMOTE_WRITE }, signaled: true });
    expect(wcs).toMatchObject([{ wrId: 9, status: 'SUCCESS', opcode: 'BIND_MW', byteLen: 0 }]);
    expect(mw.rkey).toBe(newKey);
    expect(m.keyState(newKey, 1)).toEqual({
      kind: 'MW', index: mw.index, type: 2, key: newKey, keyMatches: true, state: 'VALID', pdn: b.pd.pdn,
      addr: b.buf + 16, length: 32, access: A.REMOTE_WRITE, qpNum: b.qp.qpNum, mrKey: b.mr.lkey,
    });
    expect(m.keyState(b.mr.lkey, 1)).toMatchObject({ boundWindows: 1 });
    m.memWrite(0, a.buf, pattern(8));
    expect(statuses(run(env, a, writeWr(env, 1, 8, newKey, b.buf + 16)))).toEqual(['SUCCESS']);
    expect([...m.memRead(1, b.buf + 16, 8)]).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
  it('type 1: rebinding moves the count; binding with length 0 unbinds', () => {
    const env = setup();
    const { m, b } = env;
    const mr2 = m.regMr(b.pd, b.buf, 4096, ALL);
    const mw = m.allocMw(b.pd, 1);
    expect(statuses(bind1(env, b, mw, b.mr, b.buf, 8, A.REMOTE_READ))).toEqual(['SUCCESS']);
    expect(statuses(bind1(env, b, mw, mr2, b.buf, 8, A.REMOTE_READ))).toEqual(['SUCCESS']);
    expect(m.keyState(b.mr.lkey, 1)).toMatchObject({ boundWindows: 0 });
    expect(m.keyState(mr2.lkey, 1)).toMatchObject({ boundWindows: 1 });
    m.bindMw(b.qp, mw, { addr: 0, length: 0, access: 0 }, { wrId: 3, signaled: true });
    m.runToCompletion();
    expect(statuses(m.pollCq(b.cq))).toEqual(['SUCCESS']);
    expect(m.keyState(mw.rkey, 1)).toMatchObject({ state: 'FREE', length: 0, keyMatches: true });
    expect(m.keyState(mr2.lkey, 1)).toMatchObject({ boundWindows: 0 });
  });
});

describe('Completions: unsignaled successes produce none; errors always do', () => {
  it('unsignaled REG_MR / LOCAL_INV / BIND_MW', () => {
    const env = setup();
    const { m, a } = env;
    const mr = m.allocMr(a.pd, 'SG_GAPS', 1);
    m.mapSg(mr, [{ addr: a.buf, length: 8 }]);
    m.postSend(a.qp, { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: 0 });
    m.postSend(a.qp, { wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: mr.lkey });
    m.postSend(a.qp, { wrId: 3, opcode: 'LOCAL_INV', invalidateRkey: 0xdead00 });
    m.runToCompletion();
    expect(m.pollCq(a.cq)).toMatchObject([{ wrId: 3, status: 'LOC_QP_OP_ERR' }]);
  });
  it('unsignaled RDMA WRITE error', () => {
    const env = setup();
    expect(run(env, env.a, { ...writeWr(env, 4, 8, 0x12345678, 0), signaled: false })).toMatchObject([{ wrId: 4, status: 'REM_ACCESS_ERR' }]);
  });
  it('receives always complete', () => {
    const env = setup();
    postRecvAt(env, env.b, 11, 0, 16);
    run(env, env.a, { wrId: 1, opcode: 'SEND', sgList: [{ addr: env.a.buf, length: 4, lkey: env.a.mr.lkey }] });
    expect(env.m.pollCq(env.b.cq)).toMatchObject([{ wrId: 11, status: 'SUCCESS', opcode: 'RECV', byteLen: 4 }]);
  });
});
