/**
 * Explicit ODP MRs from the MR cache, as Linux 6.12 mlx5_ib (mr.c create_user_odp_mr ->
 * alloc_cacheable_mr; odp.c mlx5_ib_init_odp_mr): a registration takes a cache mkey and one UMR
 * enables it with the resident pages mapped; deregistration revokes it and returns it, key kept.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';

const PAGE = 4096;

describe('ODP MRs and the MR cache', () => {
  it('an ODP registration is a cache hit enabled by one UMR (resident pages mapped); dereg returns the mkey; a non-ODP MR reuses its key', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 2, mrCacheLastOrder: 3 } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      await tb.quiesce();
      const a = tb.host(0).alloc(3 * PAGE);
      const b = tb.host(1).alloc(3 * PAGE);
      tb.host(0).write(a.addr, Uint8Array.of(7)); // page 0 resident, pages 1-2 not
      const creates = tb.stats()['tb.hca0.cmdif'].cmd_CREATE_MKEY as number;
      const umrs = tb.stats()['tb.hca0.icm_writer'].umr_context_writes as number;
      const omr = await p.pd0.regMr(a.addr, 3 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      expect(omr.poolBucket).toBe(4);
      let s = tb.stats()['tb.hca0.mr_cache'];
      expect([s.b4_hits, s.b4_misses]).toEqual([1, 0]);
      expect(tb.stats()['tb.hca0.cmdif'].cmd_CREATE_MKEY).toBe(creates); // no mkey of its own
      expect(tb.stats()['tb.hca0.icm_writer'].umr_context_writes).toBe(umrs + 1); // the enabling UMR
      const mr1 = await p.pd1.regMr(b.addr, 3 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = async (off: number, len: number, key: number): Promise<void> => {
        p.qp0.postSend({ wrId: off, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + off, length: len, lkey: key }], remoteAddr: b.addr + off, rkey: mr1.rkey, signaled: true });
        expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      };
      await write(0, PAGE, omr.lkey);
      expect(omr.odpStats().pageFaults).toBe(0); // mapped at registration
      await write(PAGE, 2 * PAGE, omr.lkey);
      expect(omr.odpStats().pageFaults).toBe(2);
      expect(tb.host(1).read(b.addr, 1)).toEqual(Uint8Array.of(7));

      const destroys = tb.stats()['tb.hca0.cmdif'].cmd_DESTROY_MKEY as number;
      const free = ctxFree(p.c0);
      await omr.dereg();
      expect(tb.stats()['tb.hca0.cmdif'].cmd_DESTROY_MKEY).toBe(destroys);
      expect(ctxFree(p.c0)).toBe(free + 1);
      // the mkey holds no ODP state any more: a pinned MR of the same bucket gets its whole key
      tb.host(0).write(a.addr + PAGE, Uint8Array.of(9));
      const pinned = await p.pd0.regMr(a.addr, 3 * PAGE, Access.LOCAL_WRITE);
      expect(pinned.lkey).toBe(omr.lkey);
      s = tb.stats()['tb.hca0.mr_cache'];
      expect(s.b4_hits).toBe(2);
      await write(PAGE, PAGE, pinned.lkey);
      expect(tb.host(1).read(b.addr + PAGE, 1)).toEqual(Uint8Array.of(9));
    });
    expect(tb.stats()['tb.hca0.pagefault'].faults).toBe(1);
  });

  it('an ODP MR on a cache mkey a pinned MR used: pages not resident fault, none reached through the old entries', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0, mrCacheLastOrder: 3 } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const x = tb.host(0).alloc(4 * PAGE);
      const pinned = await p.pd0.regMr(x.addr, 4 * PAGE, Access.LOCAL_WRITE);
      await pinned.dereg();
      const a = tb.host(0).alloc(4 * PAGE);
      const b = tb.host(1).alloc(4 * PAGE);
      const omr = await p.pd0.regMr(a.addr, 4 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      expect(omr.lkey).toBe(pinned.lkey); // the same cache mkey, its key kept
      tb.host(0).write(a.addr + 3 * PAGE, Uint8Array.of(5, 6)); // after registration: not mapped
      const mr1 = await p.pd1.regMr(b.addr, 4 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + 3 * PAGE, length: 2, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      expect(omr.odpStats().pageFaults).toBe(1);
      expect(tb.host(1).read(b.addr, 2)).toEqual(Uint8Array.of(5, 6));
      await omr.dereg();
      const st = p.c0.pool.stats().buckets.find((e) => e.ndescs === 4)!;
      expect([st.misses, st.hits, st.free]).toEqual([1, 1, 1]);
    });
  });
});

function ctxFree(ctx: { pool: { stats(): { free: Readonly<Record<number, number>> } } }): number {
  return ctx.pool.stats().free[4];
}
