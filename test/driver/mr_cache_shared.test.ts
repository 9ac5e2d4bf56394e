/**
 * The MR cache is the device's (mlx5_ib's dev->cache, made at load), shared by every context
 * opened on the adapter: an mkey one context deregisters serves another's registration.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { rcPairOn } from '../support/rc_pair.ts';

const PAGE = 4096;

describe('MR cache per adapter', () => {
  it('two contexts on one adapter share one cache: a key deregistered in one is reused by the other, and works there', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 1, mrCacheLastOrder: 2 } });
    await tb.run(async () => {
      const a = await tb.openDevice(0);
      const pdsBefore = tb.stats()['tb.hca0.cmdif'].cmd_ALLOC_PD as number;
      const b = await tb.openDevice(0);
      expect(b.pool).toBe(a.pool);
      expect(tb.stats()['tb.hca0.cmdif'].cmd_ALLOC_PD).toBe(pdsBefore); // the cache's PD made once
      await tb.quiesce();
      expect(a.pool.stats().free).toEqual({ 4: 2, 8: 2, 16: 2 }); // filled once, not per context
      const p = await rcPairOn(b, await tb.openDevice(1));
      const pdA = await a.allocPd();
      const buf = tb.host(0).alloc(2 * PAGE);
      const ma = await pdA.regMr(buf.addr, PAGE, Access.LOCAL_WRITE);
      const held = await pdA.regMr(buf.addr, PAGE, Access.LOCAL_WRITE); // stays A's
      await ma.dereg();
      const mb = await p.pd0.regMr(buf.addr, 2 * PAGE, Access.LOCAL_WRITE);
      expect(mb.lkey).toBe(ma.lkey); // the mkey A returned, its key kept
      expect(mb.lkey).not.toBe(held.lkey);
      const s = tb.stats()['tb.hca0.mr_cache'];
      expect(s.b4_hits).toBe(3);
      expect(tb.stats()['tb.hca0.mr_cache_ctx1']).toBeUndefined();
      tb.host(0).write(buf.addr + PAGE, Uint8Array.of(1, 2, 3));
      const dst = tb.host(1).alloc(PAGE);
      const mr1 = await p.pd1.regMr(dst.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: buf.addr + PAGE, length: 3, lkey: mb.lkey }], remoteAddr: dst.addr, rkey: mr1.rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      expect(tb.host(1).read(dst.addr, 3)).toEqual(Uint8Array.of(1, 2, 3));
      // A's MR is untouched by B's use of the cache: its mkey still enabled
      expect((await a.queryMkey(held.lkey)).length).toBe(64);
      await held.dereg();
      await mb.dereg();
    });
  });
});
