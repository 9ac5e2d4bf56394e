/**
 * Issue 12, memory comes back: create/destroy cycles of QPs, CQs, PDs and MRs keep host memory,
 * the driver's queue buffers and the firmware's objects bounded (before, every createQp took
 * 4 MiB that destroy never freed, and Pd.users kept every destroyed object until dealloc).
 * `npm run bench -- churn` runs 100,000 cycles and reports the JS heap too.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { churn, type ChurnSample } from '../support/churn.ts';

describe('churn', () => {
  it('2,000 create/destroy cycles: host frames, queue buffers, firmware objects and the mkey pool stay where the first cycles left them', async () => {
    // a small MR cache profile: its pre-fill is over before the first sample
    const tb = new Testbed({ hcas: 1, config: { mrCacheLimit: 4 } });
    const samples: ChurnSample[] = [];
    await tb.run(() => churn(tb, 2000, 100, (s) => samples.push(s)));
    const first = samples[0];
    const last = samples[samples.length - 1];
    expect(last.cycles).toBe(2000);
    // everything a cycle made is gone again: the same frames, buffers and objects as after cycle 100
    expect(last.framesInUse).toBe(first.framesInUse);
    expect(last.dmaBytesHeld).toBe(first.dmaBytesHeld);
    expect({ pds: last.pds, cqs: last.cqs, qps: last.qps, mkeys: last.mkeys }).toEqual({ pds: first.pds, cqs: first.cqs, qps: first.qps, mkeys: first.mkeys });
    // one QP's and one CQ's buffers at most, and the context's own (EQ, the mkey pool's UMR QPs)
    expect(last.dmaBytesHeld).toBeLessThan(256 * 1024);
  });

  it('a destroyed MR, window or QP leaves its PD at once (not at dealloc)', async () => {
    const tb = new Testbed({ hcas: 1 });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const cq = await ctx.createCq(4);
      const buf = tb.host(0).alloc(4096);
      const users = (): number => pd.usersHeld;
      const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
      const mr = await pd.regMr(buf.addr, 4096, Access.LOCAL_WRITE);
      const mw = await pd.allocMw(2);
      expect(users()).toBe(3);
      await mw.dealloc();
      await mr.dereg();
      await qp.destroy();
      expect(users()).toBe(0);
      await cq.destroy();
      await pd.dealloc();
    });
  });
});
