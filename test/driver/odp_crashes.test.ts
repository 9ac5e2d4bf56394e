/**
 * Issue 17, "Crashes and hangs" of on-demand paging: each case killed `tb.run` (or hung) before
 * its fix. mlx5 ends them cleanly: a fault whose QP is gone is dropped or its resume's failure
 * only logged (odp.c mlx5_ib_mr_wqe_pfault_handler, mlx5_ib_page_fault_resume); a fault or
 * prefetch on an MR being deregistered finishes before the mkey goes (mr.c __mlx5_ib_dereg_mr
 * waits for the mkey's users).
 */
import { describe, expect, it } from 'vitest';
import { Access, SIZE_MAX, Testbed, type Context } from '../../src/index.ts';
import { rcPair, rcPairOn } from '../support/rc_pair.ts';
import { readMkey } from '../../src/rtl/firmware/icm_writer.ts';

const US = 1_000_000;
const PAGE = 4096;

/** Lets time pass until adapter `i`'s page-fault unit has raised a fault (the handler runs from then). */
async function untilFault(tb: Testbed, i: number): Promise<void> {
  while ((tb.stats()[`tb.hca${i}.pagefault`]?.faults ?? 0) === 0) await tb.delay(1 * US);
}

/** After the defect: the context still handles faults (its UMR QP and fault handler are sound). */
async function stillFaults(tb: Testbed, c0: Context, c1: Context): Promise<void> {
  const { pd0, pd1, cq0, qp0 } = await rcPairOn(c0, c1, { cqe: 16 });
  const a = tb.host(0).alloc(PAGE);
  const b = tb.host(1).alloc(PAGE);
  const omr = await pd0.regMr(a.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
  const omr1 = await pd1.regMr(b.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  tb.host(0).write(a.addr, new Uint8Array([5, 6, 7]));
  qp0.postSend({ wrId: 9, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 3, lkey: omr.lkey }], remoteAddr: b.addr, rkey: omr1.rkey, signaled: true });
  expect((await cq0.wait(1, { timeout: 10_000 * US }))[0].status).toBe('SUCCESS');
  expect([...tb.host(1).read(b.addr, 3)]).toEqual([5, 6, 7]);
}

/**
 * The fault ended without a trace of the QP: the page-fault unit holds nothing, and a fault the
 * handler had taken (`handling`) was dropped or its refused resume counted, not thrown.
 */
function faultEnded(tb: Testbed, i: number, ctx: Context, handling: boolean): void {
  expect(tb.busyModules()).not.toContain(`tb.hca${i}.pagefault`);
  expect(ctx.odp.droppedFaults + ctx.odp.failedResumes).toBe(handling ? 1 : 0);
}

// the QP goes before the interrupt handler takes the fault's EQE (0 us), or while the handler maps (20 us)
describe.each([0, 20])('issue 17: a QP destroyed %i us after its page fault', (after) => {
  it('destroy_qp_during_requester_fault: the run goes on, the resume of the gone QP is no error', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const omr = await p.pd0.regMr(a.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: PAGE, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await untilFault(tb, 0);
      await tb.delay(after * US);
      await p.qp0.destroy();
      await tb.delay(1_000 * US); // the handler maps and resumes meanwhile
      faultEnded(tb, 0, p.c0, after > 0);
      await stillFaults(tb, p.c0, p.c1);
    });
  });

  it('destroy_qp_during_responder_fault: the RDMA fault of a gone QP ends without an error', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const mr0 = await p.pd0.regMr(a.addr, PAGE, Access.LOCAL_WRITE);
      const omr = await p.pd1.regMr(b.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: PAGE, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: omr.rkey, signaled: true });
      await untilFault(tb, 1);
      await tb.delay(after * US);
      await p.qp1.destroy();
      await tb.delay(1_000 * US);
      faultEnded(tb, 1, p.c1, after > 0);
      await stillFaults(tb, p.c0, p.c1);
    });
  });

  it('destroy_qp_during_receive_fault: the receive fault of a gone QP ends without an error', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const mr0 = await p.pd0.regMr(a.addr, PAGE, Access.LOCAL_WRITE);
      const omr = await p.pd1.regMr(b.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      p.qp1.postRecv({ wrId: 7, sgList: [{ addr: b.addr, length: 64, lkey: omr.lkey }] });
      p.qp0.postSend({ wrId: 1, opcode: 'SEND', sgList: [{ addr: a.addr, length: 64, lkey: mr0.lkey }], signaled: true });
      await untilFault(tb, 1);
      await tb.delay(after * US);
      await p.qp1.destroy();
      await tb.delay(1_000 * US);
      faultEnded(tb, 1, p.c1, after > 0);
      await stillFaults(tb, p.c0, p.c1);
    });
  });
});

/** The MTT entry the device holds (ICM) for page `i` of ODP MR `lkey` on adapter 0. */
function deviceMtt(tb: Testbed, lkey: number, i: number): number {
  const hca = tb.hca(0);
  const e = readMkey(hca, lkey >>> 8);
  const v = new DataView(hca.icm.read(e.xltAddr + i * 8, 8).buffer);
  return v.getUint32(0) * 2 ** 32 + v.getUint32(4);
}

describe('issue 17: translation updates of 512 MiB and more go in chunks (umr.c MLX5_MAX_UMR_CHUNK)', () => {
  const SIZE = 512 * 1024 * 1024;
  const LAST = SIZE / PAGE - 1;
  /** An ODP MR of SIZE bytes with its first and last pages present in the process; `mapped`: and on the device. */
  async function bigMr(tb: Testbed, mapped: boolean) {
    const c0 = await tb.openDevice(0);
    const pd = await c0.allocPd();
    const a = tb.host(0).alloc(SIZE);
    const omr = await pd.regMr(a.addr, SIZE, Access.ON_DEMAND | Access.LOCAL_WRITE);
    // touched after registration: resident in the process, not mapped by its snapshot
    tb.host(0).write(a.addr, new Uint8Array([1]));
    tb.host(0).write(a.addr + SIZE - PAGE, new Uint8Array([2]));
    if (mapped) {
      for (const at of [0, SIZE - PAGE]) await pd.adviseMr('PREFETCH_NO_FAULT', [{ addr: a.addr + at, length: PAGE, lkey: omr.lkey }], { flush: true });
      expect(deviceMtt(tb, omr.lkey, LAST) & 3).not.toBe(0);
    }
    return { pd, a, omr };
  }

  it('prefetch_512mib_chunked: a PREFETCH_NO_FAULT over 512 MiB maps its pages, the last one through the second chunk', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const { pd, a, omr } = await bigMr(tb, false);
      await pd.adviseMr('PREFETCH_NO_FAULT', [{ addr: a.addr, length: SIZE, lkey: omr.lkey }], { flush: true });
      expect(deviceMtt(tb, omr.lkey, 0) - (deviceMtt(tb, omr.lkey, 0) % PAGE)).toBe(tb.host(0).dmaAddress(a.addr));
      expect(deviceMtt(tb, omr.lkey, LAST) - (deviceMtt(tb, omr.lkey, LAST) % PAGE)).toBe(tb.host(0).dmaAddress(a.addr + SIZE - PAGE));
    });
  });

  it.each(['munmap', 'madviseDontNeed'] as const)('%s_512mib_chunked: zaps every mapped page of 512 MiB, the last one through the second chunk', async (how) => {
    const tb = new Testbed();
    await tb.run(async () => {
      const { a, omr } = await bigMr(tb, true);
      await tb.host(0)[how](a.addr, SIZE);
      expect(omr.odpStats()).toMatchObject({ pageInvalidations: 2 }); // the two mapped pages
      expect(deviceMtt(tb, omr.lkey, 0)).toBe(0);
      expect(deviceMtt(tb, omr.lkey, LAST)).toBe(0);
    });
  });
});

describe('issue 17: an ODP MR deregistered while a fault or a prefetch maps it', () => {
  it('dereg_odp_mr_during_fault: dereg waits for the fault; the WQE ends in error, the run and the UMR QP go on', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const omr = await p.pd0.regMr(a.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: PAGE, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await untilFault(tb, 0);
      await tb.delay(20 * US); // the handler has the fault
      await omr.dereg();
      const [wc] = await p.cq0.wait(1, { timeout: 10_000 * US });
      expect(wc.status).not.toBe('SUCCESS'); // its key is gone
      await stillFaults(tb, p.c0, p.c1);
    });
  });

  it('dereg_odp_mr_then_munmap: a munmap while dereg waits for the fault frees the frames only once the mkey is gone', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const omr = await p.pd0.regMr(a.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: PAGE, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await untilFault(tb, 0);
      await tb.delay(20 * US);
      let deregAt = -1;
      const dereg = tb.spawn(async () => {
        await omr.dereg();
        deregAt = tb.now;
      });
      await tb.delay(1 * US);
      await tb.host(0).munmap(a.addr, PAGE);
      const munmapAt = tb.now;
      await dereg;
      expect(munmapAt).toBeGreaterThanOrEqual(deregAt);
      expect(deregAt).toBeGreaterThan(0);
      await stillFaults(tb, p.c0, p.c1);
    });
  });

  it.each(['PREFETCH', 'PREFETCH_NO_FAULT'] as const)('dereg_odp_mr_during_%s: dereg of an MR with an unflushed prefetch waits for it', async (advice) => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const c0 = await tb.openDevice(0);
      const c1 = await tb.openDevice(1);
      const pd = await c0.allocPd();
      const a = tb.host(0).alloc(16 * PAGE);
      tb.host(0).write(a.addr, new Uint8Array(16 * PAGE).fill(1));
      const omr = await pd.regMr(a.addr, 16 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      await pd.adviseMr(advice, [{ addr: a.addr, length: 16 * PAGE, lkey: omr.lkey }]);
      await omr.dereg();
      await stillFaults(tb, c0, c1);
    });
  });

  it('dereg_implicit_odp_mr_during_fault: an implicit MR deregistered while a fault makes its child', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const imr = await p.pd0.regMr(0, SIZE_MAX, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: PAGE, lkey: imr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await untilFault(tb, 0);
      await tb.delay(6 * US); // the handler is making the child
      await imr.dereg();
      const [wc] = await p.cq0.wait(1, { timeout: 10_000 * US });
      expect(wc.status).not.toBe('SUCCESS');
      await stillFaults(tb, p.c0, p.c1);
    });
  });
});
