/**
 * Issue 17, "Wrong results" and "Unclear errors": every verb outside tb.run() is a VerbsError
 * naming itself; tb.host(i) out of range; a completion channel of another testbed; destroying a
 * CQ with unacknowledged completion events (EBUSY, a documented choice); a full address space
 * is ENOMEM of the verb, never the host's own error.
 */
import { describe, expect, it } from 'vitest';
import { Access, SIZE_MAX, Testbed, VerbsError } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';

/** The message of the VerbsError `f` throws or rejects with ('not a VerbsError: ...' otherwise). */
async function verbsError(f: () => unknown): Promise<string> {
  try {
    await f();
  } catch (e) {
    return e instanceof VerbsError ? e.message : `not a VerbsError: ${String(e)}`;
  }
  return 'no error';
}

describe('outside tb.run()', () => {
  it('every verb is VerbsError EINVAL naming itself, and tb.host/hca/openDevice of no adapter are EINVAL', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    const o = await tb.run(async () => {
      const p = await rcPair(tb);
      const ch = p.c0.createCompChannel();
      const a = tb.host(0).alloc(8192);
      const mr = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE | Access.MW_BIND);
      const odp = await p.pd0.regMr(a.addr + 4096, 4096, Access.LOCAL_WRITE | Access.ON_DEMAND);
      const fr = await p.pd0.allocMr('MEM_REG', 4);
      const mw = await p.pd0.allocMw(1);
      const evCq = await p.c0.createCq(8, { channel: ch });
      const idle = await p.pd0.createQp({ sendCq: p.cq0, recvCq: p.cq0 });
      return { ...p, ch, a, mr, odp, fr, mw, evCq, idle };
    });
    const { c0, pd0, cq0, qp0, qp1, ch, a, mr, odp, fr, mw, evCq, idle } = o;
    const sge = [{ addr: a.addr, length: 8, lkey: mr.lkey }];
    const table: [string, () => unknown][] = [
      ['openDevice', () => tb.openDevice(0)],
      ['delay', () => tb.delay(1)],
      ['spawn', () => tb.spawn(async () => {})],
      ['quiesce', () => tb.quiesce()],
      ['queryDevice', () => c0.queryDevice()],
      ['allocPd', () => c0.allocPd()],
      ['createCq', () => c0.createCq(8)],
      ['createCompChannel', () => c0.createCompChannel()],
      ['getAsyncEvent', () => c0.getAsyncEvent({ timeout: 1 })],
      ['queryMkey', () => c0.queryMkey(mr.lkey)],
      ['regMr', () => pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE)],
      ['regMr', () => pd0.regMr(0, SIZE_MAX, Access.LOCAL_WRITE | Access.ON_DEMAND)],
      ['allocMr', () => pd0.allocMr('MEM_REG', 4)],
      ['allocMw', () => pd0.allocMw(1)],
      ['createQp', () => pd0.createQp({ sendCq: cq0, recvCq: cq0 })],
      ['adviseMr', () => pd0.adviseMr('PREFETCH', [{ addr: a.addr + 4096, length: 64, lkey: odp.lkey }])],
      ['localDmaLkey', () => pd0.localDmaLkey()],
      ['dealloc', () => pd0.dealloc()],
      ['reqNotify', () => evCq.reqNotify()],
      ['ackEvents', () => evCq.ackEvents(0)],
      ['poll', () => cq0.poll()],
      ['cq.wait', () => cq0.wait(1, { timeout: 1 })],
      ['destroy', () => evCq.destroy()],
      ['getCqEvent', () => ch.getCqEvent({ timeout: 1 })],
      ['query', () => qp0.query()],
      ['connect', () => idle.connect(qp1)],
      ['postSend', () => qp0.postSend({ wrId: 1, opcode: 'SEND', sgList: sge })],
      ['postRecv', () => qp1.postRecv({ wrId: 1, sgList: [] })],
      ['bindMw', () => qp0.bindMw(mw, { mr, addr: a.addr, length: 64, access: Access.REMOTE_READ })],
      ['destroy', () => idle.destroy()],
      ['mapSg', () => fr.mapSg([{ addr: a.addr, length: 4096 }])],
      ['dereg', () => mr.dereg()],
      ['dealloc', () => mw.dealloc()],
    ];
    for (const [name, call] of table) {
      expect(await verbsError(call), name).toMatch(new RegExp(`^EINVAL: ${name.replace('.', '\\.')}: called outside tb\\.run\\(\\)`));
    }
    // nothing was destroyed or taken by a refused call: the objects still work in the next run
    await tb.run(async () => {
      expect(await evCq.destroy()).toBeUndefined();
      await mw.dealloc();
      await mr.dereg();
      expect(qp0.state).toBe('RTS');
    });
    for (const i of [2, 3, -1, 0.5]) {
      expect(await verbsError(() => tb.host(i))).toMatch(new RegExp(`^EINVAL: host: no adapter ${i} \\(this testbed has 2: 0\\.\\.1\\)`));
      expect(await verbsError(() => tb.hca(i))).toMatch(/^EINVAL: hca: no adapter/);
      expect(await verbsError(() => tb.openDevice(i))).toMatch(/^EINVAL: openDevice: no adapter/);
    }
  });
});

describe('completion channels and events', () => {
  it("createCq with another testbed's channel is EINVAL at createCq", async () => {
    const other = new Testbed();
    const foreign = await other.run(async () => (await other.openDevice(0)).createCompChannel());
    const tb = new Testbed();
    await tb.run(async () => {
      const c = await tb.openDevice(0);
      expect(await verbsError(() => c.createCq(8, { channel: foreign }))).toMatch(/^EINVAL: createCq: the channel belongs to another Testbed/);
    });
  });

  it('destroy with an unacknowledged event is EBUSY; after ackEvents it succeeds; unread events go with the CQ', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { c0, pd0, pd1, cq1 } = await rcPair(tb);
      const ch = c0.createCompChannel();
      const cq = await c0.createCq(16, { channel: ch });
      const cqB = await c0.createCq(16, { channel: ch });
      const qp = await pd0.createQp({ sendCq: cq, recvCq: cqB });
      const peer = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp.connect(peer);
      const a = tb.host(0).alloc(4096);
      const mr = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const b = tb.host(1).alloc(4096);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = (wrId: number): void => qp.postSend({ wrId, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      cq.reqNotify();
      write(1);
      expect(await ch.getCqEvent()).toBe(cq);
      expect((await cq.wait(1))[0].status).toBe('SUCCESS');
      await qp.destroy();
      // libibverbs' ibv_destroy_cq would block until ibv_ack_cq_events: here EBUSY, the CQ alive
      expect(await verbsError(() => cq.destroy())).toMatch(/^EBUSY: destroy: 1 completion event\(s\) returned by getCqEvent are not acknowledged/);
      expect(cq.poll()).toEqual([]);
      expect(await verbsError(() => cq.ackEvents(2))).toMatch(/^EINVAL: ackEvents: n must be an integer in 0\.\.1/);
      cq.ackEvents(1);
      await cq.destroy();
      expect(await verbsError(() => cq.ackEvents(0))).toMatch(/^EINVAL: ackEvents: the CQ was destroyed/);

      // an event delivered but never read goes with its CQ: getCqEvent does not return it
      const qp2 = await pd0.createQp({ sendCq: cqB, recvCq: cqB });
      const peer2 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp2.connect(peer2);
      cqB.reqNotify();
      qp2.postSend({ wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await cqB.wait(1);
      await tb.quiesce();
      await qp2.destroy();
      await cqB.destroy();
      expect(await verbsError(() => ch.getCqEvent({ timeout: 1_000_000 }))).toMatch(/^ETIMEDOUT: getCqEvent/);
    });
  });
});

describe('a full address space', () => {
  it('createCq, createQp and the first implicit regMr are VerbsError ENOMEM', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const c = await tb.openDevice(0);
      const pd = await c.allocPd();
      const cq = await c.createCq(8);
      const h = tb.host(0);
      // take every address: the largest allocation that fits, halved until nothing does
      for (let size = tb.config.hostMemBytes; size >= 4096; ) {
        try {
          h.alloc(size);
        } catch {
          size /= 2;
        }
      }
      expect(await verbsError(() => c.createCq(8))).toMatch(/^ENOMEM: createCq: /);
      expect(await verbsError(() => pd.createQp({ sendCq: cq, recvCq: cq }))).toMatch(/^ENOMEM: createQp: /);
      expect(await verbsError(() => pd.regMr(0, SIZE_MAX, Access.LOCAL_WRITE | Access.ON_DEMAND))).toMatch(/^ENOMEM: /);
    });
  });
});
