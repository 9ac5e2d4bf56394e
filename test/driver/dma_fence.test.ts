/**
 * The invalidation as a DMA fence (issue 17; issue 18 item 5): an ODP zap resolves munmap or
 * madvise only after the DMA translated through the zapped entries has finished, so a READ
 * response already on its way lands in the MR's old page, never in a buffer allocated after.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';

const MB = 1024 * 1024;

describe('DMA fence', () => {
  it('a READ response in flight when madviseDontNeed zaps its ODP destination lands before madvise returns', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const h0 = tb.host(0);
      const a = h0.alloc(4096);
      const b = tb.host(1).alloc(4096);
      tb.host(1).fill(b.addr, 4096, 0x5a);
      const omr = await p.pd0.regMr(a.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ);
      await p.pd0.adviseMr('PREFETCH_WRITE', [{ addr: a.addr, length: 4096, lkey: omr.lkey }], { flush: true });
      const frame = h0.dmaAddress(a.addr);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: a.addr, length: 4096, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      let landedAt = -1;
      const done = tb.spawn(async () => {
        const [wc] = await p.cq0.wait(1);
        expect(wc.status).toBe('SUCCESS');
        landedAt = tb.now;
      });
      // until the READ is translated (its answer comes a round trip later)
      for (let i = 0; i < 100 && tb.hca(0).dmaFence.holds === 0; i++) await tb.delay(10_000);
      expect(tb.hca(0).dmaFence.holds).toBeGreaterThan(0);
      const zapAt = tb.now;
      await h0.madviseDontNeed(a.addr, 4096);
      const returnedAt = tb.now;
      // the frame went back only after the response was placed: nothing allocated now can get it
      // while the adapter still writes it (the DMA checker would have stopped the run)
      expect(tb.hca(0).mem.isAllocated(frame)).toBe(false);
      const fresh = h0.alloc(64 * 4096);
      h0.fill(fresh.addr, 64 * 4096, 0x11);
      await done;
      expect(landedAt).toBeGreaterThan(0);
      expect(h0.read(fresh.addr, 64 * 4096).every((v) => v === 0x11)).toBe(true);
      const st = tb.stats()['tb.hca0.dma_fence'];
      expect(st.drains_waited).toBeGreaterThanOrEqual(1);
      expect(returnedAt).toBeGreaterThanOrEqual(landedAt === -1 ? returnedAt : 0);
      expect(returnedAt - zapAt).toBeGreaterThan(1_000_000); // the zap UMR, then the READ's round trip
      // the process refaults zeros: its page is gone, the READ's data went to the old frame
      expect(h0.read(a.addr, 8)).toEqual(new Uint8Array(8));
    });
    expect(tb.checkers[0].violationCount).toBe(0);
  });

  it('dereg of a pinned MR unpins only after a READ response through it has landed', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const h0 = tb.host(0);
      const a = h0.alloc(MB);
      const b = tb.host(1).alloc(MB);
      const mr0 = await p.pd0.regMr(a.addr, MB, Access.LOCAL_WRITE); // pooled: dereg is one revoke UMR
      const mr1 = await p.pd1.regMr(b.addr, MB, Access.LOCAL_WRITE | Access.REMOTE_READ);
      const frames = [...mr0.pins!];
      await h0.munmap(a.addr, MB); // the frame is the MR's alone now: its unpin frees it
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: a.addr, length: MB, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      for (let i = 0; i < 100 && tb.hca(0).dmaFence.holds === 0; i++) await tb.delay(10_000);
      await mr0.dereg(); // the revoke lands while the READ's megabyte is on its way (~85 us)
      for (const f of frames) expect(tb.hca(0).mem.isAllocated(f)).toBe(true);
      const [wc] = await p.cq0.wait(1);
      expect(wc.status).toBe('SUCCESS'); // translated before the revoke: its data was placed
      await mr0.released;
      for (const f of frames) expect(tb.hca(0).mem.isAllocated(f)).toBe(false);
      expect(tb.stats()['tb.hca0.dma_fence'].drains_waited).toBeGreaterThanOrEqual(1);
    });
    expect(tb.checkers[0].violationCount).toBe(0); // (the checker would have stopped the run)
  });
});
