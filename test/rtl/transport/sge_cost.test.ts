/**
 * The requester's per-SGE cost (config requesterSgeCycles): one gather/scatter engine takes a
 * message's local SGEs one every that many core cycles, so a many-SGE message pays it per SGE and
 * a one-SGE message once.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../../src/index.ts';
import { rcPair } from '../../support/rc_pair.ts';

const PAGE = 4096;

/** Simulated ps of one signaled RDMA_WRITE of `n` 64 B SGEs, posted to its completion. */
async function writeTime(n: number, requesterSgeCycles: number): Promise<number> {
  const tb = new Testbed({ hcas: 2, config: { requesterSgeCycles } });
  let ps = 0;
  await tb.run(async () => {
    const { pd0, pd1, cq0, cq1 } = await rcPair(tb);
    const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendSge: n });
    await qp0.connect(await pd1.createQp({ sendCq: cq1, recvCq: cq1 }));
    const src = tb.host(0).alloc(n * PAGE, { align: PAGE });
    const dst = tb.host(1).alloc(n * 64, { align: PAGE });
    const mr0 = await pd0.regMr(src.addr, n * PAGE, Access.LOCAL_WRITE);
    const mr1 = await pd1.regMr(dst.addr, n * 64, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const sgList = Array.from({ length: n }, (_, i) => ({ addr: src.addr + i * PAGE, length: 64, lkey: mr0.lkey }));
    const t0 = tb.now;
    qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList, remoteAddr: dst.addr, rkey: mr1.rkey, signaled: true });
    expect((await cq0.wait(1))[0].status).toBe('SUCCESS');
    ps = tb.now - t0;
  });
  await tb.close();
  return ps;
}

describe('requester: per-SGE cost', () => {
  it("past the ATU's own pace the engine sets a 30-SGE WRITE's time: +29 x 200 ns from 100 to 200 cycles a SGE; a 1-SGE WRITE pays nothing", async () => {
    const [many0, many1, many2, one0, one1] = [await writeTime(30, 0), await writeTime(30, 100), await writeTime(30, 200), await writeTime(1, 0), await writeTime(1, 100)];
    expect(many1).toBeGreaterThan(many0);
    // 100 more cycles (200 ns at 500 MHz) for each of the 29 SGEs after the first
    expect(many2 - many1).toBeGreaterThanOrEqual(28 * 200_000);
    expect(many2 - many1).toBeLessThanOrEqual(30 * 200_000);
    expect(one1 - one0).toBeLessThan(2_000); // the first SGE goes at once (within an edge)
  });
});
