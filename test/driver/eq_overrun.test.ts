/**
 * Issue 17: the driver's EQs hold what can be pending on them, and an overrun (forced by a tiny
 * configured EQ) is an error the application sees. Before: 300 armed CQs on one context gave 256
 * completion events and 44 EQ overruns with no event to anyone; afterwards completion events and
 * page faults were lost and a faulting QP hung.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, type Context, type CompChannel, type Cq } from '../../src/index.ts';
import { rcPair, rcPairOn } from '../support/rc_pair.ts';

const US = 1_000_000;

/**
 * `pairs` loopback QP pairs on adapter 0, every QP with a CQ of its own (2 x pairs CQs) on
 * `channel`, armed; each pair's SEND completes once on each side: one CQE on every CQ at once.
 */
async function armedCqs(tb: Testbed, ctx: Context, channel: CompChannel, pairs: number, compVector = (i: number) => 0 * i): Promise<Cq[]> {
  const pd = await ctx.allocPd();
  const buf = tb.host(0).alloc(4096);
  const mr = await pd.regMr(buf.addr, 4096, Access.LOCAL_WRITE);
  const cqs: Cq[] = [];
  const senders = [];
  for (let k = 0; k < pairs; k++) {
    const cqa = await ctx.createCq(1, { channel, compVector: compVector(2 * k) });
    const cqb = await ctx.createCq(1, { channel, compVector: compVector(2 * k + 1) });
    const qa = await pd.createQp({ sendCq: cqa, recvCq: cqa });
    const qb = await pd.createQp({ sendCq: cqb, recvCq: cqb });
    await qa.connect(qb);
    qb.postRecv({ wrId: k, sgList: [{ addr: buf.addr, length: 64, lkey: mr.lkey }] });
    cqs.push(cqa, cqb);
    senders.push(qa);
  }
  for (const cq of cqs) cq.reqNotify();
  senders.forEach((qa, k) => qa.postSend({ wrId: k, opcode: 'SEND', sgList: [{ addr: buf.addr, length: 8, lkey: mr.lkey }], signaled: true }));
  return cqs;
}

describe('issue 17: EQ sizes and overruns', () => {
  it('eq_300_armed_cqs_no_overrun: 300 armed CQs on one context give 300 completion events, no overrun', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const ch = ctx.createCompChannel();
      const cqs = await armedCqs(tb, ctx, ch, 150);
      const seen = new Set<Cq>();
      for (let i = 0; i < 300; i++) seen.add(await ch.getCqEvent({ timeout: 10_000 * US }));
      expect(seen.size).toBe(300);
      for (const cq of cqs) cq.ackEvents(1);
    });
    expect(tb.stats()['tb.hca0.eq_writer']).toMatchObject({ overruns: 0 });
  });

  it('eq_comp_vectors: CQs spread over completion vectors get their events from the vectors\' own EQs', async () => {
    const tb = new Testbed({ config: { eventEqSize: 16, ioEqSize: 16 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      expect(ctx.numCompVectors).toBeGreaterThanOrEqual(4);
      const ch = ctx.createCompChannel();
      // 32 CQs over vectors 1..4 (8 each): no EQ holds more than 8 events
      const cqs = await armedCqs(tb, ctx, ch, 16, (i) => 1 + (i % 4));
      for (let i = 0; i < 32; i++) await ch.getCqEvent({ timeout: 10_000 * US });
      for (const cq of cqs) cq.ackEvents(1);
      await expect(ctx.createCq(1, { compVector: ctx.numCompVectors })).rejects.toThrow(/compVector must be an integer in 0\.\./);
    });
    expect(tb.stats()['tb.hca0.eq_writer']).toMatchObject({ overruns: 0 });
  });

  it('eq_overrun_is_reported: a tiny EQ overruns; the application gets DEVICE_FATAL and EIO from waits instead of losing events silently', async () => {
    const tb = new Testbed({ hcas: 2, config: { eventEqSize: 16 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      // an ODP MR registered before the overrun (its enabling UMR needs a working device)
      const { pd0, pd1, cq0, qp0 } = await rcPairOn(ctx, await tb.openDevice(1), { cqe: 4 });
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const omr = await pd0.regMr(a.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const ch = ctx.createCompChannel();
      await armedCqs(tb, ctx, ch, 20); // 40 events for 16 entries
      expect(await ctx.getAsyncEvent({ timeout: 10_000 * US })).toEqual({ type: 'DEVICE_FATAL' });
      // the events delivered before the overrun are there; then the wait fails, it does not hang
      let delivered = 0;
      const err = await (async () => {
        for (;;) {
          try {
            await ch.getCqEvent();
            delivered++;
          } catch (e) {
            return e;
          }
        }
      })();
      expect(delivered).toBeLessThanOrEqual(16);
      expect(err).toBeInstanceOf(VerbsError);
      expect((err as VerbsError).errno).toBe('EIO');
      expect((err as VerbsError).message).toMatch(/getCqEvent: EQ \d+ \(16 entries\) overran/);
      await expect(ctx.getAsyncEvent()).rejects.toThrow(/EIO: getAsyncEvent: EQ/);
      // a page fault now would be lost: the faulting QP's wait fails instead of hanging
      // a new ODP MR's enabling UMR fails as mlx5r_umr_post_send does in INTERNAL_ERROR (umr.c:258-259)
      await expect(pd0.regMr(a.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE)).rejects.toThrow(/EIO/);
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await expect(cq0.wait(1)).rejects.toThrow(/EIO: cq\.wait: 0 of 1 completions, and the device is in error: EQ/);
    });
    expect(tb.stats()['tb.hca0.eq_writer'].overruns).toBeGreaterThan(0);
  });

  it('events_go_to_the_owning_context: a QP event of a second context on an adapter reaches that context, not the one whose EQ took it', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const first = await tb.openDevice(1);
      await first.createCq(1); // its EQ is the adapter's first: the device writes async events there
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE); // no REMOTE_WRITE
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('REM_ACCESS_ERR');
      expect(await p.c1.getAsyncEvent({ timeout: 100 * US })).toEqual({ type: 'QP_ACCESS_ERR', qpNum: p.qp1.qpNum });
      await expect(first.getAsyncEvent({ timeout: 20 * US })).rejects.toMatchObject({ errno: 'ETIMEDOUT' });
    });
  });
});
