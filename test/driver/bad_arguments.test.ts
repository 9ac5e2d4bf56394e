/**
 * Issue 12: every bad argument of the hot verbs is a VerbsError EINVAL that names it, never a
 * RangeError or TypeError from inside, never a silent coercion; cq.wait's timeout keeps what it
 * polled in `partial`.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, incRkey, type SendWr } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';

function verbsError(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    if (e instanceof VerbsError) return e.message;
    return `not a VerbsError: ${String(e)}`;
  }
  return 'no error';
}

describe('bad arguments are VerbsError EINVAL naming the argument', () => {
  it('postSend, postRecv, bindMw and cq.wait', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0, qp1 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE | Access.MW_BIND);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = (o: Record<string, unknown>): SendWr =>
        ({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, ...o }) as SendWr;
      const cases: [string, () => unknown, RegExp][] = [
        ['postSend(null)', () => qp0.postSend(null as unknown as SendWr), /EINVAL: postSend: the work request must be an object/],
        ['SGE addr NaN', () => qp0.postSend(write({ sgList: [{ addr: NaN, length: 8, lkey: mr0.lkey }] })), /EINVAL: postSend: SGE 0 addr/],
        ['SGE addr -1', () => qp0.postSend(write({ sgList: [{ addr: -1, length: 8, lkey: mr0.lkey }] })), /EINVAL: postSend: SGE 0 addr/],
        ['SGE addr 1.5', () => qp0.postSend(write({ sgList: [{ addr: 1.5, length: 8, lkey: mr0.lkey }] })), /EINVAL: postSend: SGE 0 addr/],
        ['SGE addr 2^53', () => qp0.postSend(write({ sgList: [{ addr: 2 ** 53, length: 8, lkey: mr0.lkey }] })), /EINVAL: postSend: SGE 0 addr/],
        ['SGE length 1.5', () => qp0.postSend(write({ sgList: [{ addr: a.addr, length: 1.5, lkey: mr0.lkey }] })), /EINVAL: postSend: SGE 0 length/],
        ['a null SGE', () => qp0.postSend(write({ sgList: [null as unknown as { addr: number; length: number; lkey: number }] })), /EINVAL: postSend: SGE 0 must be an object/],
        ['lkey NaN', () => qp0.postSend(write({ sgList: [{ addr: a.addr, length: 8, lkey: NaN }] })), /EINVAL: postSend: lkey NaN/],
        ['remoteAddr NaN', () => qp0.postSend(write({ remoteAddr: NaN })), /EINVAL: postSend: remoteAddr/],
        ['remoteAddr -1', () => qp0.postSend(write({ remoteAddr: -1 })), /EINVAL: postSend: remoteAddr/],
        ['remoteAddr 2^60', () => qp0.postSend(write({ remoteAddr: 2 ** 60 })), /EINVAL: postSend: remoteAddr/],
        ['compareAdd NaN', () => qp0.postSend(write({ opcode: 'ATOMIC_FETCH_AND_ADD', compareAdd: NaN })), /EINVAL: postSend: compareAdd/],
        ['swap 2^53', () => qp0.postSend(write({ opcode: 'ATOMIC_CMP_AND_SWP', compareAdd: 0, swap: 2 ** 53 })), /EINVAL: postSend: swap/],
        ['postRecv({})', () => qp1.postRecv({} as never), /EINVAL: postRecv: wrId must be/],
        ['postRecv without sgList', () => qp1.postRecv({ wrId: 1 } as never), /EINVAL: postRecv: sgList must be an array/],
        ['postRecv length NaN', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: b.addr, length: NaN, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 length/],
        ['postRecv length -5', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: b.addr, length: -5, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 length/],
        ['postRecv length 2^31 (not cut to 2 GiB)', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: b.addr, length: 2 ** 31, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 length/],
        ['postRecv addr NaN', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: NaN, length: 8, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 addr/],
      ];
      const fmr = await pd0.allocMr('MEM_REG', 4);
      const mw2 = await pd0.allocMw(2);
      const bind2 = (o: Record<string, unknown>): SendWr => ({ wrId: 1, opcode: 'BIND_MW', mw: mw2, rkey: incRkey(mw2.rkey), bindInfo: { mr: mr0, addr: a.addr, length: 64, access: Access.REMOTE_READ, ...o } }) as SendWr;
      cases.push(
        ['wrId NaN', () => qp0.postSend(write({ wrId: NaN })), /EINVAL: postSend: wrId/],
        ['wrId -1', () => qp0.postSend(write({ wrId: -1 })), /EINVAL: postSend: wrId/],
        ['wrId "3"', () => qp0.postSend(write({ wrId: '3' })), /EINVAL: postSend: wrId/],
        ['sgList null (not "none")', () => qp0.postSend(write({ sgList: null })), /EINVAL: postSend: sgList must be an array, got null/],
        ['signaled "yes"', () => qp0.postSend(write({ signaled: 'yes' })), /EINVAL: postSend: signaled must be a boolean/],
        ['inline 2,000 B', () => qp0.postSend(write({ inline: true, sgList: [{ addr: a.addr, length: 2000, lkey: mr0.lkey }] })), /ENOMEM: postSend: 2000 bytes of inline data exceed the QP's maxInlineData 220/],
        ['invalidateRkey "3"', () => qp0.postSend(write({ opcode: 'SEND_WITH_INV', invalidateRkey: '3' })), /EINVAL: postSend: invalidateRkey/],
        ['LOCAL_INV without a key', () => qp0.postSend({ wrId: 1, opcode: 'LOCAL_INV' }), /EINVAL: postSend: LOCAL_INV needs invalidateRkey/],
        ['REG_MR mr 3', () => qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: 3 as never, key: fmr.lkey, access: 1 }), /EINVAL: postSend: REG_MR needs `mr`, an MR/],
        ['REG_MR access null', () => qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: null as never }), /EINVAL: postSend REG_MR: access flags null/],
        ['BIND_MW mw {}', () => qp0.postSend({ wrId: 1, opcode: 'BIND_MW', mw: {} as never, rkey: 1 }), /EINVAL: postSend: BIND_MW needs `mw`, a memory window/],
        ['BIND_MW bindInfo 3 (not an unbind)', () => qp0.postSend({ wrId: 1, opcode: 'BIND_MW', mw: mw2, rkey: incRkey(mw2.rkey), bindInfo: 3 as never }), /EINVAL: postSend: BIND_MW bindInfo must be an object/],
        ['BIND_MW length NaN', () => qp0.postSend(bind2({ length: NaN })), /EINVAL: postSend: BIND_MW bindInfo.length/],
        ['BIND_MW addr -1', () => qp0.postSend(bind2({ addr: -1 })), /EINVAL: postSend: BIND_MW bindInfo.addr/],
        ['BIND_MW access 1.5', () => qp0.postSend(bind2({ access: 1.5 })), /EINVAL: postSend BIND_MW: access flags 1.5/],
        ['poll NaN', () => cq0.poll(NaN), /EINVAL: poll: n must be a non-negative integer/],
        ['incRkey NaN', () => incRkey(NaN), /EINVAL: incRkey: rkey/],
      );
      const mw = await pd0.allocMw(1);
      cases.push(
        ['bindMw mw null', () => qp0.bindMw(null as never, { mr: mr0, addr: a.addr, length: 64, access: Access.REMOTE_READ }), /EINVAL: bindMw: the window must be a memory window/],
        ['bindMw access NaN', () => qp0.bindMw(mw, { mr: mr0, addr: a.addr, length: 64, access: NaN }), /EINVAL: bindMw: access flags NaN/],
        ['bindMw mr 3', () => qp0.bindMw(mw, { mr: 3 as never, addr: a.addr, length: 64, access: Access.REMOTE_READ }), /EINVAL: bindMw: mr must be an MR or null/],
        ['bindMw options null', () => qp0.bindMw(mw, { mr: mr0, addr: a.addr, length: 64, access: Access.REMOTE_READ }, null as never), /EINVAL: bindMw: options must be an object/],
        ['postRecv wrId NaN', () => qp1.postRecv({ wrId: NaN, sgList: [] }), /EINVAL: postRecv: wrId/],
        ['bindMw addr NaN', () => qp0.bindMw(mw, { mr: mr0, addr: NaN, length: 64, access: Access.REMOTE_READ }), /EINVAL: bindMw: addr/],
        ['bindMw addr 2^60', () => qp0.bindMw(mw, { mr: mr0, addr: 2 ** 60, length: 64, access: Access.REMOTE_READ }), /EINVAL: bindMw: addr/],
        ['bindMw length -1 (not an unbind)', () => qp0.bindMw(mw, { mr: mr0, addr: a.addr, length: -1, access: Access.REMOTE_READ }), /EINVAL: bindMw: length/],
      );
      for (const [what, f, want] of cases) expect(`${what}: ${verbsError(f)}`).toMatch(new RegExp(`^${what.replace(/[()^[\]{}.*+?$|\\]/g, '\\$&')}: ${want.source}`));
      for (const t of [NaN, 0.5, 2 ** 60, -1]) await expect(cq0.wait(1, { timeout: t })).rejects.toThrow(/EINVAL: cq.wait: timeout/);
      await expect(pd0.ctx.getAsyncEvent(NaN as never)).rejects.toThrow(/EINVAL: getAsyncEvent: options must be an object/);
      await expect(pd0.ctx.getAsyncEvent({ timeout: 0.5 })).rejects.toThrow(/EINVAL: getAsyncEvent: timeout/);
      await expect(pd0.ctx.createCompChannel().getCqEvent(null as never)).rejects.toThrow(/EINVAL: getCqEvent: options must be an object/);
      await expect(pd0.ctx.queryMkey(NaN)).rejects.toThrow(/EINVAL: queryMkey: key/);
      await expect(tb.openDevice(2)).rejects.toThrow(/EINVAL: openDevice: no adapter 2/);
      await expect(pd0.regMr(a.addr, 4096, undefined as never)).rejects.toThrow(/EINVAL: regMr: access flags undefined/);
      await expect(pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendWr: null as never })).rejects.toThrow(/EINVAL: createQp: maxSendWr must be in 1..32768, got null/);
      const fresh = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const peer = await pd1.createQp({ sendCq: cq0.ctx === pd1.ctx ? cq0 : (await pd1.ctx.createCq(4)), recvCq: (await pd1.ctx.createCq(4)) });
      await expect(fresh.connect(peer, { mtu: null as never })).rejects.toThrow(/EINVAL: connect: mtu null is not an IB MTU/);
      expect(fresh.state).toBe('RESET'); // refused before any command
      // nothing above was posted: the QPs work
      await tb.quiesce();
      expect(cq0.poll(16)).toEqual([]);
    });
  });

  it('atomic operands are any 64-bit value: -1 (two\'s complement) and 2n ** 64n - 1n add 2^64 - 1, i.e. subtract one', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_ATOMIC);
      tb.host(1).write(b.addr, new Uint8Array([5, 0, 0, 0, 0, 0, 0, 0])); // 5, little-endian host word
      for (const add of [-1, 2n ** 64n - 1n]) {
        qp0.postSend({ wrId: 1, opcode: 'ATOMIC_FETCH_AND_ADD', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, compareAdd: add, signaled: true });
        const [wc] = await cq0.wait(1);
        expect(wc.status).toBe('SUCCESS');
      }
      expect([...tb.host(1).read(b.addr, 8)]).toEqual([3, 0, 0, 0, 0, 0, 0, 0]);
      expect(verbsError(() => qp0.postSend({ wrId: 1, opcode: 'ATOMIC_FETCH_AND_ADD', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, compareAdd: 2n ** 64n }))).toMatch(/^EINVAL: postSend: compareAdd must fit 64 bits/);
    });
  });

  it('postSend, postRecv and bindMw outside tb.run() throw (before, a postSend there was taken and ran in the next run)', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    const got = await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE | Access.MW_BIND);
      return { ...p, a, mr0, mw: await p.pd0.allocMw(1) };
    });
    const { qp0, qp1, cq0, a, mr0, mw } = got;
    const firstWork = tb.firstWorkAt;
    expect(verbsError(() => qp0.postSend({ wrId: 1, opcode: 'SEND', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], signaled: true }))).toMatch(/^EINVAL: postSend: called outside tb.run\(\)/);
    expect(verbsError(() => qp0.bindMw(mw, { mr: mr0, addr: a.addr, length: 64, access: Access.REMOTE_READ }))).toMatch(/^EINVAL: bindMw: called outside tb.run\(\)/);
    expect(verbsError(() => qp1.postRecv({ wrId: 1, sgList: [] }))).toMatch(/^EINVAL: postRecv: called outside tb.run\(\)/);
    expect(verbsError(() => void tb.delay(10))).toMatch(/^EINVAL: delay: called outside tb.run\(\)/);
    expect(verbsError(() => void tb.spawn(async () => {}))).toMatch(/^EINVAL: spawn: called outside tb.run\(\)/);
    await expect(tb.quiesce()).rejects.toThrow(/^EINVAL: quiesce: called outside tb.run\(\)/);
    expect(verbsError(() => qp0.postSend([]))).toMatch(/^EINVAL: postSend: called outside tb.run\(\)/);
    expect(tb.firstWorkAt).toBe(firstWork); // a refused post is no work: the waves' view does not move
    // a later run finds nothing posted: no completion appears
    await tb.run(async () => {
      await tb.quiesce();
      expect(cq0.poll(16)).toEqual([]);
    });
  });

  it("cq.wait's ETIMEDOUT keeps the completions it polled in `partial`", async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      qp0.postSend({ wrId: 7, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const e = await cq0.wait(2, { timeout: 100_000_000 }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(VerbsError);
      expect((e as VerbsError).errno).toBe('ETIMEDOUT');
      expect((e as VerbsError).partial?.map((w) => w.wrId)).toEqual([7]);
    });
  });

  it('Testbed: a seed that is not a safe integer is refused, not coerced', () => {
    for (const seed of [NaN, 1.5, 2 ** 60, 'x' as unknown as number]) expect(() => new Testbed({ seed })).toThrow(/^EINVAL: Testbed: seed must be a safe integer/);
    for (const hcas of [0, 1.5, NaN, 17]) expect(() => new Testbed({ hcas })).toThrow(VerbsError);
    expect(() => new Testbed({ seed: 42 })).not.toThrow();
    // absent is the default; null is refused, never taken for it
    expect(verbsError(() => new Testbed(null as never))).toMatch(/^EINVAL: Testbed: options must be an object, got null/);
    for (const k of ['seed', 'hcas', 'config', 'trace', 'caps']) {
      expect(verbsError(() => new Testbed({ [k]: null } as never))).toMatch(new RegExp(`^EINVAL: Testbed: ${k} is null: leave it out for the default`));
    }
    expect(verbsError(() => new Testbed({ config: 5 } as never))).toMatch(/^EINVAL: Testbed: config must be an object/);
  });

  it("a bad value is shown as given: a string quoted ('8' is not 8), a negative number not as hex", async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      await expect(ctx.createCq('8' as never)).rejects.toThrow(/^EINVAL: createCq: cqe must be an integer in 1\.\.\d+, got "8"$/);
      const a = tb.host(0).alloc(4096);
      await expect(pd.regMr(a.addr, 4096, -1)).rejects.toThrow(/^EINVAL: regMr: access flags -1 are not ib_access_flags bits/);
      await expect(pd.regMr(a.addr, 4096, 2n as never)).rejects.toThrow(/access flags 2n are not/);
    });
  });

  it('spawn, delay and quiesce take a function and whole picoseconds (VerbsError EINVAL, not a TypeError or a silent default)', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      expect(verbsError(() => void tb.spawn(null as never))).toMatch(/^EINVAL: spawn: the process must be a function, got null/);
      expect(verbsError(() => void tb.spawn((() => 5) as never))).toMatch(/^EINVAL: spawn: the process must return a promise \(an async function\), got 5/);
      for (const ps of [NaN, -1, 0.5, 2 ** 53, '5' as never]) expect(verbsError(() => void tb.delay(ps))).toMatch(/^EINVAL: delay must be a whole, non-negative number of picoseconds/);
      await expect(tb.quiesce(null as never)).rejects.toThrow(/^EINVAL: quiesce: options must be an object, got null/);
      for (const timeout of [NaN, 'x' as never, -5]) await expect(tb.quiesce({ timeout })).rejects.toThrow(/^EINVAL: quiesce: timeout must be a whole/);
      await tb.delay(0);
      await tb.quiesce({ timeout: 1000 });
    });
  });

  it('two connects of one QP at once: the second is EBUSY before it sends a command, so no QP is left half-connected; destroy waits for a connect', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1 } = await rcPair(tb);
      const x = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const y = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const z = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      const first = x.connect(z);
      await expect(y.connect(z)).rejects.toThrow(/^EBUSY: connect: a connect of the peer QP is already in progress/);
      await expect(x.connect(z)).rejects.toThrow(/^EBUSY: connect: a connect of this QP is already in progress/);
      await expect(z.destroy()).rejects.toThrow(/^EBUSY: destroy: a connect of this QP is in progress/);
      await first;
      expect([x.state, y.state, z.state]).toEqual(['RTS', 'RESET', 'RTS']);
      expect((await y.query()).state).toBe('RESET'); // the hardware agrees: no command was sent for y
      // y can still be connected to another QP
      const z2 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await y.connect(z2);
      expect(y.state).toBe('RTS');
    });
  });

  it('createQp, connect and mapSg refuse what is not theirs: null, a QP as its own peer, a connected QP, a QP of another Testbed', async () => {
    const other = new Testbed({ hcas: 1, config: { mrCacheLimit: 0 } });
    let foreign: import('../../src/index.ts').Qp | null = null;
    await other.run(async () => {
      const c = await other.openDevice(0);
      const pd = await c.allocPd();
      const cq = await c.createCq(8);
      foreign = await pd.createQp({ sendCq: cq, recvCq: cq });
    });
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, cq0, qp0, qp1 } = await rcPair(tb);
      await expect(pd0.createQp(null as never)).rejects.toThrow(/EINVAL: createQp: the attributes must be an object/);
      await expect(pd0.createQp({ sendCq: null, recvCq: cq0 } as never)).rejects.toThrow(/EINVAL: createQp: sendCq and recvCq must be CQs/);
      // the ring takes 4 WQEBBs a request: past the device's 32,768 WQEBBs it is EINVAL before any command
      await expect(pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendWr: 8193 })).rejects.toThrow(/EINVAL: createQp: maxSendWr 8193 needs a ring of 65536 WQEBBs/);
      const fresh = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      await expect(fresh.connect(null as never)).rejects.toThrow(/EINVAL: connect: the peer must be a QP/);
      await expect(fresh.connect(fresh)).rejects.toThrow(/EINVAL: connect: a QP cannot be its own peer/);
      await expect(fresh.connect(qp1)).rejects.toThrow(/EINVAL: connect: both QPs must be in RESET/);
      await expect(fresh.connect(foreign!)).rejects.toThrow(/EINVAL: connect: the peer QP belongs to another Testbed/);
      expect(fresh.state).toBe('RESET'); // refused before any command: nothing half-done
      expect(qp0.state).toBe('RTS');
      const fmr = await pd0.allocMr('MEM_REG', 4);
      expect(verbsError(() => fmr.mapSg(null as never))).toMatch(/^EINVAL: mapSg: the scatter list must be an array/);
      expect(verbsError(() => fmr.mapSg([null as never]))).toMatch(/^EINVAL: mapSg: element 0 must be an object/);
      expect(verbsError(() => fmr.mapSg([{ addr: NaN, length: 4096 }]))).toMatch(/^EINVAL: mapSg: element 0 addr/);
    });
  });
});
