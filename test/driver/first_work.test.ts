/**
 * Where a run's work begins, for the waves' opening view: the application's first work request
 * (postSend, postRecv, bindMw), not the setup before it, and not the UMRs the driver posts on
 * its own QP to register memory from its mkey pool.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Access, Testbed } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';
import { tempDir } from '../support/tmp.ts';

describe('first work request', () => {
  it("is the application's first post, and the .gtkw opens a little before it", async () => {
    const vcd = join(tempDir('mlx5sim-first-'), 'run.vcd');
    const tb = new Testbed({ hcas: 2, trace: { vcd } });
    let posted = -1;
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0, qp1 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE); // firmware; the pool refills meanwhile
      await tb.delay(5_000_000_000);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE); // by UMR on the driver's QP
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      expect(tb.stats()['tb.hca0.sq'].doorbell_pushes).toBeGreaterThan(0);
      expect(tb.firstWorkAt).toBeNull();
      await tb.delay(1_000_000);
      posted = tb.now;
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await cq0.wait(1);
      qp1.postRecv({ wrId: 2, sgList: [] }); // later posts do not move it
    });
    await tb.close();
    expect(tb.firstWorkAt).toBe(posted);
    const timestart = Number(/^\[timestart\] (\d+)$/m.exec(readFileSync(join(vcd, '../run.gtkw'), 'utf8'))![1]);
    expect(timestart).toBeLessThan(posted);
    expect(timestart).toBeGreaterThan(posted - 0.05 * (tb.now - posted) - 10_000);
  });
});
