/**
 * Pinning as the kernel does it (issue 17): a registration holds its frames until dereg, so a
 * munmap or madvise of its pages loses the process's mapping, never the frames; the adapter's
 * writes through the still-valid rkey land where no other allocation can be.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { HUGE_PAGE_SIZE } from '../../src/rtl/memory/host_space.ts';

async function pair(tb: Testbed) {
  const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
  const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
  const [cq0, cq1] = [await c0.createCq(64), await c1.createCq(64)];
  const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
  const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
  await qp0.connect(qp1);
  return { pd0, pd1, cq0, qp0 };
}

describe('pinned MRs hold their frames', () => {
  it('a peer RDMA WRITE through a still-valid rkey after munmap does not land in a new allocation', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    const LEN = 57_344; // the 14 pages
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await pair(tb);
      const h1 = tb.host(1);
      const b = h1.alloc(LEN);
      const mr1 = await pd1.regMr(b.addr, LEN, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const frames = [...mr1.pins!];
      await h1.munmap(b.addr, LEN);
      // the process lost the mapping; the frames are the registration's, nobody else's
      expect(tb.hca(1).mem.framesOrphaned).toBe(frames.length);
      const fresh = h1.alloc(LEN);
      h1.fill(fresh.addr, LEN, 0x11);
      const src = tb.host(0).alloc(LEN);
      tb.host(0).fill(src.addr, LEN, 0xee);
      const mr0 = await pd0.regMr(src.addr, LEN, Access.LOCAL_WRITE);
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: LEN, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await cq0.wait(1);
      expect(wc.status).toBe('SUCCESS'); // the MR is valid until dereg, as on Linux
      expect(h1.read(fresh.addr, LEN).every((v) => v === 0x11)).toBe(true);
      for (const f of frames) expect(tb.hca(1).mem.read(f, 4)).toEqual(Uint8Array.of(0xee, 0xee, 0xee, 0xee));
      await mr1.dereg();
      await mr1.released;
      expect(tb.hca(1).mem.framesOrphaned).toBe(0);
      for (const f of frames) expect(tb.hca(1).mem.isAllocated(f)).toBe(false);
    });
    expect(tb.checkers.map((c) => c.violationCount)).toEqual([0, 0]);
  });

  it('a 2 MiB huge page dropped by madvise stays the MR\'s until dereg; the process refaults zeros', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await pair(tb);
      const h1 = tb.host(1);
      const b = h1.alloc(HUGE_PAGE_SIZE, { hugePages: true });
      h1.fill(b.addr, HUGE_PAGE_SIZE, 0x22);
      const base = h1.dmaAddress(b.addr);
      const mr1 = await pd1.regMr(b.addr, HUGE_PAGE_SIZE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      await h1.madviseDontNeed(b.addr, HUGE_PAGE_SIZE);
      expect(h1.read(b.addr + 4096, 8)).toEqual(new Uint8Array(8)); // the zero page, as Linux
      const other = h1.alloc(HUGE_PAGE_SIZE, { hugePages: true });
      h1.fill(other.addr, HUGE_PAGE_SIZE, 0x33);
      const oa = h1.dmaAddress(other.addr);
      expect(oa + HUGE_PAGE_SIZE <= base || oa >= base + HUGE_PAGE_SIZE).toBe(true);
      const src = tb.host(0).alloc(8192);
      tb.host(0).fill(src.addr, 8192, 0x44);
      const mr0 = await pd0.regMr(src.addr, 8192, Access.LOCAL_WRITE);
      qp0.postSend({ wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: 8192, lkey: mr0.lkey }], remoteAddr: b.addr + HUGE_PAGE_SIZE - 8192, rkey: mr1.rkey, signaled: true });
      expect((await cq0.wait(1))[0].status).toBe('SUCCESS');
      expect(tb.hca(1).mem.read(base + HUGE_PAGE_SIZE - 8192, 2)).toEqual(Uint8Array.of(0x44, 0x44));
      expect(h1.read(other.addr + HUGE_PAGE_SIZE - 8192, HUGE_PAGE_SIZE / 256).every((v) => v === 0x33)).toBe(true);
      expect(h1.read(b.addr + HUGE_PAGE_SIZE - 8192, 8)).toEqual(new Uint8Array(8));
      await mr1.dereg();
      await mr1.released;
      expect(tb.hca(1).mem.isAllocated(base)).toBe(false);
    });
  });
});
