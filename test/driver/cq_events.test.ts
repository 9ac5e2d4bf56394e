/**
 * Completion channels and asynchronous events, end to end: CQ arm (doorbell record and UAR
 * doorbell), the CQ writer's COMP event, the EQ writer's EQE and interrupt, the driver's
 * interrupt handler (spec/semantics.md "Events"; API.md "Completion channels and asynchronous
 * events").
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, type Cq, type Qp } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';
import { cqArmWord, decodeCqArmDoorbell } from '../../src/rtl/completion/cq_writer.ts';

const US = 1_000_000;

async function setup(tb: Testbed) {
  const p = await rcPair(tb);
  const ch = p.c1.createCompChannel();
  const cq = await p.c1.createCq(16, { channel: ch });
  const qp1 = await p.pd1.createQp({ sendCq: p.cq1, recvCq: cq });
  const qp0 = await p.pd0.createQp({ sendCq: p.cq0, recvCq: p.cq0 });
  await qp0.connect(qp1);
  const a = tb.host(0).alloc(4096);
  const b = tb.host(1).alloc(4096);
  const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
  const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE);
  const recv = (id: number): void => qp1.postRecv({ wrId: id, sgList: [{ addr: b.addr, length: 64, lkey: mr1.lkey }] });
  const send = (id: number, solicited = false): void =>
    qp0.postSend({ wrId: id, opcode: 'SEND', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], signaled: true, solicited });
  return { ...p, ch, cq, qp0: qp0 as Qp, qp1, recv, send };
}

describe('completion events', () => {
  it('an armed CQ raises one event for its next CQE, after the interrupt and the handler latency; then it must be armed again', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      for (let i = 1; i <= 3; i++) s.recv(i);
      s.cq.reqNotify();
      const t0 = tb.now;
      s.send(1);
      const got: Cq = await s.ch.getCqEvent({ timeout: 100 * US });
      expect(got).toBe(s.cq);
      const t = tb.now - t0;
      // send, wire, CQE write, EQE write, MSI-X, 5 us to the handler
      expect(t).toBeGreaterThan(5 * US);
      expect(t).toBeLessThan(12 * US);
      expect(s.cq.poll(4).map((w) => w.wrId)).toEqual([1]);
      s.cq.ackEvents(1);
      // not armed: a second CQE raises nothing
      s.send(2);
      await s.cq.wait(1);
      await expect(s.ch.getCqEvent({ timeout: 50 * US })).rejects.toMatchObject({ errno: 'ETIMEDOUT' });
      // armed again: the next CQE raises the next event
      s.cq.reqNotify();
      s.send(3);
      expect(await s.ch.getCqEvent({ timeout: 100 * US })).toBe(s.cq);
      expect(s.cq.poll(4).map((w) => w.wrId)).toEqual([3]);
      s.cq.ackEvents(1);
      expect(() => s.cq.ackEvents(1)).toThrow(VerbsError);
    });
    const st = tb.stats();
    expect(st['tb.hca1.cq_writer'].comp_events).toBe(2);
    // beside the command-completion EQEs of the command EQ (one per command, each its interrupt)
    const cmdEqes = st['tb.hca1.cmdif'].cmd_eqes as number;
    expect(cmdEqes).toBeGreaterThan(0);
    // and the page requests the command EQ also takes (the MR cache's fills need ICM pages)
    const pageReqs = st['tb.hca1.pages'].page_requests as number;
    expect((st['tb.hca1.eq_writer'].eqes as number) - cmdEqes - pageReqs).toBe(2);
    // (EQEs written while the command EQ is not re-armed share its interrupts: count them apart)
    const cmdIrqs = st['tb.hca1.eq_writer'].cmd_interrupts as number;
    expect(cmdIrqs).toBeGreaterThan(0);
    expect(cmdIrqs).toBeLessThanOrEqual(cmdEqes + pageReqs);
    expect((st['tb.hca1.eq_writer'].interrupts as number) - cmdIrqs).toBe(2);
  });

  it('arming a CQ that already holds unpolled CQEs raises the event at once (no lost wake-up)', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      s.recv(1);
      s.send(1);
      await s.cq.wait(1); // consumed: ci = 1
      s.recv(2);
      s.send(2);
      await tb.quiesce(); // the CQE of 2 is there, unpolled
      s.cq.reqNotify();
      expect(await s.ch.getCqEvent({ timeout: 20 * US })).toBe(s.cq);
      expect(s.cq.poll(4).map((w) => w.wrId)).toEqual([2]);
    });
  });

  it('solicited-only: an unsolicited CQE raises nothing, a solicited one raises the event', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      for (let i = 1; i <= 2; i++) s.recv(i);
      s.cq.reqNotify({ solicitedOnly: true });
      s.send(1, false);
      await s.cq.wait(1);
      await expect(s.ch.getCqEvent({ timeout: 30 * US })).rejects.toMatchObject({ errno: 'ETIMEDOUT' });
      s.send(2, true);
      expect(await s.ch.getCqEvent({ timeout: 100 * US })).toBe(s.cq);
      expect(s.cq.poll(4).map((w) => w.wrId)).toEqual([2]);
    });
  });

  it('reqNotify needs a channel; a channel of another context is refused', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      expect(() => p.cq0.reqNotify()).toThrow(/no completion channel/);
      const ch1 = p.c1.createCompChannel();
      await expect(p.c0.createCq(4, { channel: ch1 })).rejects.toMatchObject({ errno: 'EINVAL' });
    });
  });

  it('the arm word and the UAR doorbell carry sn, the solicited command and ci (spec/mlx5.md "CQ arm")', () => {
    expect(cqArmWord(1, false, 5)).toBe(0x1000_0005);
    expect(cqArmWord(3, true, 0xabcdef)).toBe(0x31ab_cdef);
    expect(cqArmWord(4, false, 0x1_000_001)).toBe(0x0000_0001); // sn & 3, ci & 0xffffff
    expect(decodeCqArmDoorbell(0x31ab_cdef, 0x0012_3456)).toEqual({ cqn: 0x12_3456, sn: 3, solicitedOnly: true, ci: 0xab_cdef });
  });

  it('the doorbell record holds the arm word after reqNotify', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      s.cq.reqNotify({ solicitedOnly: true });
      const cqc = s.c1.hca.cmdif.getCq(s.cq.cqn)!;
      expect(s.c1.hca.mem.readU32BE(cqc.dbrAddr + 4)).toBe(cqArmWord(0, true, 0));
    });
  });
});

describe('asynchronous events', () => {
  it('a remote access violation moves the responder QP to ERR and raises QP_ACCESS_ERR with its number', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE); // no REMOTE_WRITE
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await p.cq0.wait(1);
      expect(wc.status).toBe('REM_ACCESS_ERR');
      const ev = await p.c1.getAsyncEvent({ timeout: 100 * US });
      expect(ev).toEqual({ type: 'QP_ACCESS_ERR', qpNum: p.qp1.qpNum });
      // the requester's own error completion raises no event of its own
      await expect(p.c0.getAsyncEvent({ timeout: 20 * US })).rejects.toMatchObject({ errno: 'ETIMEDOUT' });
    });
  });
});

/** A QP whose send CQ holds 4 CQEs, and `write(id)`: a signaled 8-byte RDMA WRITE to the peer. */
async function smallCq(tb: Testbed) {
  const p = await rcPair(tb);
  const cq = await p.c0.createCq(4);
  const qp = await p.pd0.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 16 });
  const peer = await p.pd1.createQp({ sendCq: p.cq1, recvCq: p.cq1 });
  await qp.connect(peer);
  const a = tb.host(0).alloc(4096);
  const b = tb.host(1).alloc(4096);
  const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
  const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const write = (id: number): void =>
    qp.postSend({ wrId: id, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
  return { p, cq, qp, write };
}

describe('CQ overrun', () => {
  it('10 completions into a 4-entry CQ nobody polls: CQ_ERROR (overrun), the QPs on it to ERR, no CQE written past the ring', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { p, cq, qp, write } = await smallCq(tb);
      for (let i = 0; i < 10; i++) {
        write(i);
        if (i === 3) await tb.quiesce(); // the ring is full now
      }
      const ev = await p.c0.getAsyncEvent({ timeout: 1e9 });
      expect(ev).toEqual({ type: 'CQ_ERR', cqNum: cq.cqn });
      expect((await qp.query()).state).toBe('ERR');
      expect(cq.poll(16).map((w) => w.wrId)).toEqual([0, 1, 2, 3]); // what fit; nothing overwritten
    });
    expect(tb.stats()['tb.hca0.cq_writer'].overruns).toBe(1);
  });

  it('a CQ polled as it fills never overruns', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { cq, write } = await smallCq(tb);
      for (let i = 0; i < 20; i++) {
        write(i);
        expect((await cq.wait(1))[0]).toMatchObject({ wrId: i, status: 'SUCCESS' });
      }
    });
    expect(tb.stats()['tb.hca0.cq_writer'].overruns).toBe(0);
  });
});
