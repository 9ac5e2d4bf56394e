/**
 * Issue 17: faulting QPs must not hold the send-queue engine's WQE slots (`sqWqeSlots`) that
 * the driver's fault handler needs for its own UMR. 32 QPs x 16 requester-side ODP work requests
 * held all 512 slots with WQEs waiting behind their faults; the handler's UMR never got one, and
 * the engine spun (its clock never stopped), so the run neither finished nor reported a stall.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';

const US = 1_000_000;
const PAGE = 4096;

/** `qps` QPs on hca0, each posting `wrs` RDMA WRITEs from its own page of one cold ODP MR. */
async function faultingQps(tb: Testbed, qps: number, wrs: number) {
  const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
  const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
  const cq0 = await c0.createCq(qps * wrs);
  const cq1 = await c1.createCq(16);
  const a = tb.host(0).alloc(qps * PAGE);
  const b = tb.host(1).alloc(qps * PAGE);
  const omr = await pd0.regMr(a.addr, qps * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
  const mr1 = await pd1.regMr(b.addr, qps * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const senders = [];
  for (let i = 0; i < qps; i++) {
    const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendWr: wrs });
    const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
    await qp0.connect(qp1);
    senders.push(qp0);
  }
  senders.forEach((qp, i) => {
    for (let k = 0; k < wrs; k++) {
      qp.postSend({ wrId: i * wrs + k, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + i * PAGE + k * 64, length: 64, lkey: omr.lkey }], remoteAddr: b.addr + i * PAGE + k * 64, rkey: mr1.rkey, signaled: true });
    }
  });
  return { cq0 };
}

describe('issue 17: send-queue engine slots and faulting QPs', () => {
  it('odp_512_requester_wrs_complete: 32 QPs x 16 faulting WRs complete with the default 512 slots', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { cq0 } = await faultingQps(tb, 32, 16);
      const wcs = await cq0.wait(512, { timeout: 20_000 * US });
      expect(wcs.filter((w) => w.status === 'SUCCESS').length).toBe(512);
    });
  });

  it('sq_slots_no_progress_is_a_stall: with one slot, held by the faulting WQE, the run ends in a stall report naming what waits, not a spin', async () => {
    // no MR cache pre-fill: its background commands are work in flight for ~230 ms
    const tb = new Testbed({ hcas: 2, config: { sqWqeSlots: 1, mrCacheLimit: 0 } });
    let err: Error | null = null;
    let ps = 0;
    try {
      await tb.run(async () => {
        const { cq0 } = await faultingQps(tb, 1, 2);
        ps = tb.now;
        await cq0.wait(2);
      });
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).toMatch(/^simulation stalled at \d+ ps: the main process waits \(cq\.wait: 2 completion\(s\) on CQ/);
    expect(err?.message).toContain('tb.hca0.sq');
    expect(tb.now - ps).toBeLessThan(10_000 * US); // found soon, not after a long spin
  });
});
