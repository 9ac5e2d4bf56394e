/**
 * Create/destroy churn (issue 12): each cycle allocates a PD, a CQ, a QP, a user MR (through the
 * driver's mkey pool) and a fast-registration MR (CREATE_MKEY), then deregisters, destroys and
 * deallocates them in reverse order. What must stay bounded: host
 * memory (frames in use), the driver's queue-buffer pool, the firmware's objects, the mkey
 * pool's mkeys and the JS heap. Shared by test/driver/churn.test.ts and bench/churn.ts.
 */
import { Access, type Testbed } from '../../src/index.ts';

/** What a churn run leaves behind, sampled after a cycle. */
export interface ChurnSample {
  cycles: number;
  /** Host physical frames allocated (4 KiB each). */
  framesInUse: number;
  /** Bytes the driver's queue-buffer pool took from the host. */
  dmaBytesHeld: number;
  /** Firmware objects live: PDs, mkeys (pool mkeys included), CQs, QPs. */
  pds: number;
  mkeys: number;
  cqs: number;
  qps: number;
}

/** Runs `cycles` create/destroy cycles on adapter 0 of `tb` (inside tb.run), sampling every `every`. */
export async function churn(tb: Testbed, cycles: number, every: number, sample: (s: ChurnSample) => void): Promise<void> {
  const ctx = await tb.openDevice(0);
  const host = tb.host(0);
  const buf = host.alloc(4096);
  for (let i = 1; i <= cycles; i++) {
    const pd = await ctx.allocPd();
    const cq = await ctx.createCq(16);
    const qp = await pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16 });
    const mr = await pd.regMr(buf.addr, 4096, Access.LOCAL_WRITE);
    const fmr = await pd.allocMr('MEM_REG', 4);
    await fmr.dereg();
    await mr.dereg();
    await qp.destroy();
    await cq.destroy();
    await pd.dealloc();
    if (i % every === 0 || i === cycles) {
      const fw = tb.hca(0).cmdif.resourcesInUse();
      sample({ cycles: i, framesInUse: host.mem.framesInUse, dmaBytesHeld: ctx.dma.bytesHeld, pds: fw.pds, mkeys: fw.mkeys, cqs: fw.cqs, qps: fw.qps });
    }
  }
}
