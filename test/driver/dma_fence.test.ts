/**
 * The invalidation as a DMA fence (issue 17; issue 18 item 5): the UMR engine completes an ODP
 * zap or a revoke only after the DMA translated through the old entries has finished, so munmap,
 * madvise and dereg return only then, and a READ response already on its way lands in the MR's
 * old page, never in a buffer allocated after.
 */
import { describe, expect, it } from 'vitest';
import { Access, DmaViolationError, Testbed, incRkey, type Qp } from '../../src/index.ts';
import { rcPair, type RcPair } from '../support/rc_pair.ts';

const MB = 1024 * 1024;

describe('DMA fence', () => {
  it('without the UMR engine holding the zap, the same READ response lands in a frame madvise freed: the DMA checker stops the run', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    tb.hca(0).umrEngine.fence = null; // the zap completes when its writes land, as before issue 18
    const run = tb.run(async () => {
      const p = await rcPair(tb);
      const h0 = tb.host(0);
      const a = h0.alloc(4096);
      const b = tb.host(1).alloc(4096);
      const omr = await p.pd0.regMr(a.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ);
      await p.pd0.adviseMr('PREFETCH_WRITE', [{ addr: a.addr, length: 4096, lkey: omr.lkey }], { flush: true });
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: a.addr, length: 4096, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      for (let i = 0; i < 100 && tb.hca(0).dmaFence.holds === 0; i++) await tb.delay(10_000);
      await h0.madviseDontNeed(a.addr, 4096);
      h0.alloc(64 * 4096);
      await p.cq0.wait(1);
    });
    await expect(run).rejects.toBeInstanceOf(DmaViolationError);
  });

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
      // the zap UMR was the one held (the prefetch's map UMR, entries not present before, was not)
      expect(tb.stats()['tb.hca0.umr_engine'].fenced).toBe(1);
      expect(returnedAt).toBeGreaterThanOrEqual(landedAt === -1 ? returnedAt : 0);
      expect(returnedAt - zapAt).toBeGreaterThan(1_000_000); // the zap UMR, then the READ's round trip
      // the process refaults zeros: its page is gone, the READ's data went to the old frame
      expect(h0.read(a.addr, 8)).toEqual(new Uint8Array(8));
    });
    expect(tb.checkers[0].violationCount).toBe(0);
  });

  it('no deadlock: a zap waits for no message parked behind a page fault whose map UMR comes after the zap', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const h0 = tb.host(0);
      const a = h0.alloc(2 * 4096);
      const pinned = h0.alloc(4096);
      const b = tb.host(1).alloc(2 * 4096);
      const omr = await p.pd0.regMr(a.addr, 2 * 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const pmr = await p.pd0.regMr(pinned.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 2 * 4096, Access.LOCAL_WRITE | Access.REMOTE_READ | Access.REMOTE_WRITE);
      await p.pd0.adviseMr('PREFETCH_WRITE', [{ addr: a.addr + 4096, length: 4096, lkey: omr.lkey }], { flush: true });
      await h0.madviseDontNeed(a.addr, 4096); // page 0 cold (page 1 mapped)
      // a WRITE from the cold page faults; the READ behind it into a pinned MR is translated
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 4096, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      p.qp0.postSend({ wrId: 2, opcode: 'RDMA_READ', sgList: [{ addr: pinned.addr, length: 4096, lkey: pmr.lkey }], remoteAddr: b.addr + 4096, rkey: mr1.rkey, signaled: true });
      for (let i = 0; i < 100 && tb.hca(0).dmaFence.holds === 0; i++) await tb.delay(1_000);
      // the zap of page 1 goes on the UMR QP before the fault's map: it must not wait for the READ
      await h0.madviseDontNeed(a.addr + 4096, 4096);
      const wcs = await p.cq0.wait(2);
      expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[1, 'SUCCESS'], [2, 'SUCCESS']]);
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
      const mr0 = await p.pd0.regMr(a.addr, MB, Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, MB, Access.LOCAL_WRITE | Access.REMOTE_READ);
      const frames = [...mr0.pins!];
      await h0.munmap(a.addr, MB); // the frame is the MR's alone now: its unpin frees it
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: a.addr, length: MB, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      for (let i = 0; i < 100 && tb.hca(0).dmaFence.holds === 0; i++) await tb.delay(10_000);
      const t0 = tb.now;
      await mr0.dereg(); // the revoke lands while the READ's megabyte is on its way (~85 us)
      // the revoke UMR completed only after the READ's data had landed: dereg returned then,
      // with the frames freed (the DMA checker would have stopped a write into a freed one)
      expect(tb.now - t0).toBeGreaterThan(20_000_000);
      for (const f of frames) expect(tb.hca(0).mem.isAllocated(f)).toBe(false);
      const [wc] = await p.cq0.wait(1);
      expect(wc.status).toBe('SUCCESS'); // translated before the revoke: its data was placed
      // (a revoke UMR when the MR came from the cache, else DESTROY_MKEY: both wait in the fence)
      expect(tb.stats()['tb.hca0.dma_fence'].drains_waited).toBeGreaterThanOrEqual(1);
    });
    expect(tb.checkers[0].violationCount).toBe(0); // (the checker would have stopped the run)
  });

  /**
   * A 256 KiB READ into a fast-registration MR, and right after, on another QP of the adapter, a
   * LOCAL_INV (of that MR, or of another one): the times each completes, and whether the READ
   * was still placing data when the LOCAL_INV completed. On the LOCAL_INV's completion the
   * consumer unmaps the MR's pages (unmapSg, munmap), as a kernel ULP does.
   */
  async function readThenLocalInv(tb: Testbed, sameMr: boolean): Promise<{ readDone: number; invDone: number; holdsAtInv: number }> {
    const LEN = 256 * 1024;
    let out = { readDone: 0, invDone: 0, holdsAtInv: 0 };
    await tb.run(async () => {
      const p: RcPair = await rcPair(tb);
      const qpB: Qp = await p.pd0.createQp({ sendCq: p.cq0, recvCq: p.cq0 });
      await qpB.connect(await p.pd1.createQp({ sendCq: p.cq1, recvCq: p.cq1 }));
      const h0 = tb.host(0);
      const b = tb.host(1).alloc(LEN);
      tb.host(1).fill(b.addr, LEN, 0x5a);
      const mr1 = await p.pd1.regMr(b.addr, LEN, Access.LOCAL_WRITE | Access.REMOTE_READ);
      const regs = [];
      for (let i = 0; i < 2; i++) {
        const a = h0.alloc(LEN, { align: 4096 });
        const fmr = await p.pd0.allocMr('MEM_REG', LEN / 4096);
        fmr.mapSg([{ addr: a.addr, length: LEN }]);
        const key = incRkey(fmr.rkey);
        p.qp0.postSend({ wrId: 10 + i, opcode: 'REG_MR', mr: fmr, key, access: Access.LOCAL_WRITE, signaled: true });
        await p.cq0.wait(1);
        regs.push({ a, fmr, key });
      }
      const [r, other] = regs;
      const target = sameMr ? r : other;
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: r.a.addr, length: LEN, lkey: r.key }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      for (let i = 0; i < 100 && tb.hca(0).dmaFence.holds === 0; i++) await tb.delay(1_000);
      qpB.postSend({ wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: target.key, signaled: true });
      for (let n = 0; n < 2; n++) {
        const [wc] = await p.cq0.wait(1);
        expect(wc.status).toBe('SUCCESS');
        if (wc.wrId === 2) {
          out = { ...out, invDone: tb.now, holdsAtInv: tb.hca(0).dmaFence.holdsOn(r.fmr.index) };
          target.fmr.unmapSg();
          await h0.munmap(target.a.addr, LEN);
          h0.fill(h0.alloc(LEN).addr, LEN, 0x11); // whatever the frames hold now is the process's
        } else out = { ...out, readDone: tb.now };
      }
    });
    return out;
  }

  it("a consumer's LOCAL_INV of a fast-registration MR completes only once a READ into it has placed its data: its pages can go at once", async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true }, config: { mrCacheLimit: 0 } });
    const t = await readThenLocalInv(tb, true);
    expect(t.holdsAtInv).toBe(0); // nothing translated through the MR was still moving
    expect(t.invDone).toBeGreaterThanOrEqual(t.readDone - 2_000_000); // held to the READ's last landing (its CQE follows)
    expect(tb.stats()['tb.hca0.umr_engine'].fenced).toBe(1);
    expect(tb.checkers[0].violationCount).toBe(0);
  });

  it('without the LOCAL_INV held, the READ lands in the frames the consumer freed: the DMA checker stops the run', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true }, config: { mrCacheLimit: 0 } });
    tb.hca(0).umrEngine.fence = null;
    await expect(readThenLocalInv(tb, true)).rejects.toBeInstanceOf(DmaViolationError);
  });

  it('DMA through another mkey does not delay a LOCAL_INV: it completes while the READ still moves', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true }, config: { mrCacheLimit: 0 } });
    const t = await readThenLocalInv(tb, false);
    expect(t.holdsAtInv).toBeGreaterThan(0); // the READ through the other MR was not over
    expect(t.readDone - t.invDone).toBeGreaterThan(5_000_000);
    expect(tb.stats()['tb.hca0.umr_engine'].fenced).toBe(0);
    expect(tb.checkers[0].violationCount).toBe(0);
  });
});
