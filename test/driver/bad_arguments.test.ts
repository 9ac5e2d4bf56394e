/**
 * Issue 12: every bad argument of the hot verbs is a VerbsError EINVAL that names it, never a
 * RangeError or TypeError from inside, never a silent coercion; cq.wait's timeout keeps what it
 * polled in `partial`.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, type SendWr } from '../../src/index.ts';
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
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0, qp1 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE | Access.MW_BIND);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = (o: Partial<SendWr> & Record<string, unknown>): SendWr =>
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
        ['postRecv({})', () => qp1.postRecv({} as never), /EINVAL: postRecv: sgList must be an array/],
        ['postRecv length NaN', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: b.addr, length: NaN, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 length/],
        ['postRecv length -5', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: b.addr, length: -5, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 length/],
        ['postRecv length 2^31 (not cut to 2 GiB)', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: b.addr, length: 2 ** 31, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 length/],
        ['postRecv addr NaN', () => qp1.postRecv({ wrId: 1, sgList: [{ addr: NaN, length: 8, lkey: mr1.lkey }] }), /EINVAL: postRecv: SGE 0 addr/],
      ];
      const mw = await pd0.allocMw(1);
      cases.push(
        ['bindMw addr NaN', () => qp0.bindMw(mw, { mr: mr0, addr: NaN, length: 64, access: Access.REMOTE_READ }), /EINVAL: bindMw: addr/],
        ['bindMw addr 2^60', () => qp0.bindMw(mw, { mr: mr0, addr: 2 ** 60, length: 64, access: Access.REMOTE_READ }), /EINVAL: bindMw: addr/],
        ['bindMw length -1 (not an unbind)', () => qp0.bindMw(mw, { mr: mr0, addr: a.addr, length: -1, access: Access.REMOTE_READ }), /EINVAL: bindMw: length/],
      );
      for (const [what, f, want] of cases) expect(`${what}: ${verbsError(f)}`).toMatch(new RegExp(`^${what.replace(/[()^[\]{}.*+?$|\\]/g, '\\$&')}: ${want.source}`));
      for (const t of [NaN, 0.5, 2 ** 60, -1]) await expect(cq0.wait(1, { timeout: t })).rejects.toThrow(/EINVAL: cq.wait: timeout/);
      // nothing above was posted: the QPs work
      await tb.quiesce();
      expect(cq0.poll(16)).toEqual([]);
    });
  });

  it("cq.wait's ETIMEDOUT keeps the completions it polled in `partial`", async () => {
    const tb = new Testbed({ hcas: 2 });
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
    for (const seed of [NaN, 1.5, 2 ** 60, 'x' as unknown as number]) expect(() => new Testbed({ seed })).toThrow(/Testbed: seed must be a safe integer/);
    expect(() => new Testbed({ seed: 42 })).not.toThrow();
  });

  it('createQp, connect and mapSg refuse what is not theirs: null, a QP as its own peer, a connected QP, a QP of another Testbed', async () => {
    const other = new Testbed({ hcas: 1 });
    let foreign: import('../../src/index.ts').Qp | null = null;
    await other.run(async () => {
      const c = await other.openDevice(0);
      const pd = await c.allocPd();
      const cq = await c.createCq(8);
      foreign = await pd.createQp({ sendCq: cq, recvCq: cq });
    });
    const tb = new Testbed({ hcas: 2 });
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
