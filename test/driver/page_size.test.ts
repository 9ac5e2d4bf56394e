/**
 * regMr's MTT page size, as mlx5_umem_find_best_pgsz picks it: the largest the mapping allows.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Access, Testbed } from '../../src/index.ts';
import { bestPageShift } from '../../src/driver/pd.ts';
import { readMkey } from '../../src/rtl/firmware/icm_writer.ts';

const PAGE = 4096;
const HUGE = 2 * 2 ** 20;

/** On adapter 0: a PD, a CQ and a QP connected to a second QP of the same PD. */
async function loopback(tb: Testbed) {
  const ctx = await tb.openDevice(0);
  const pd = await ctx.allocPd();
  const cq = await ctx.createCq(16);
  const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
  const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
  await qp.connect(peer);
  return { pd, cq, qp };
}

/**
 * The definition: every P-page of the range, on the grid of its iova (`iova`, default `addr`;
 * 0 for a zero-based MR, umem.c:94 `virt`), is one physically contiguous, P-aligned run
 * (P <= one page spanning the iova range). `iova - addr` is a multiple of 4 KiB (uverbs_cmd.c:710).
 */
function bruteForce(dma: (a: number) => number, addr: number, length: number, iova = addr): number {
  const sh = iova - addr;
  for (let k = 31; k > 12; k--) {
    const P = 2 ** k;
    if (Math.floor(iova / (P / 2)) === Math.floor((iova + length - 1) / (P / 2))) continue; // larger than one page spanning the range
    let ok = true;
    for (let va = addr; va < addr + length && ok; va = (Math.floor(va / PAGE) + 1) * PAGE) {
      const iv = va + sh;
      const base = dma(va) - (iv % P);
      if (base % P !== 0) ok = false;
      const firstIv = Math.max(iova, Math.floor(iv / P) * P);
      if (dma(firstIv - sh) - (firstIv % P) !== base) ok = false;
    }
    if (ok) return k;
  }
  return 12;
}

describe('regMr page size', () => {
  it('matches the definition on random layouts of physical runs (property)', () => {
    // a VA range over pages whose frames come in runs of random lengths, each run aligned to a random power of two
    const layout = fc.record({
      // matchVa: the run starts at the same offset modulo 2^alignLog as its virtual address (so only its end can rule P out)
      runs: fc.array(fc.record({ pages: fc.integer({ min: 1, max: 1024 }), alignLog: fc.integer({ min: 12, max: 23 }), matchVa: fc.boolean() }), { minLength: 1, maxLength: 6 }),
      vaAlignLog: fc.integer({ min: 12, max: 23 }),
      startOff: fc.integer({ min: 0, max: 3 * PAGE }),
      lenCut: fc.integer({ min: 0, max: 2 * PAGE }),
    });
    fc.assert(
      fc.property(layout, ({ runs, vaAlignLog, startOff, lenCut }) => {
        const vaBase = 0x7000_0000_0000 + 2 ** vaAlignLog;
        const frames: number[] = [];
        let pa = 2 ** 33;
        for (const r of runs) {
          const A = 2 ** r.alignLog;
          pa = Math.ceil((pa + PAGE) / A) * A + A * 4; // gaps: runs never touch
          if (r.matchVa) pa += (vaBase + frames.length * PAGE) % A;
          for (let i = 0; i < r.pages; i++) frames.push(pa + i * PAGE);
          pa += r.pages * PAGE;
        }
        const dma = (a: number): number => frames[Math.floor((a - vaBase) / PAGE)] + (a % PAGE);
        const total = frames.length * PAGE;
        const addr = vaBase + Math.min(startOff, total - 1);
        const length = Math.max(1, total - (addr - vaBase) - lenCut);
        expect(bestPageShift({ dmaAddress: dma }, addr, length)).toBe(bruteForce(dma, addr, length));
        // a host that says where its 2 MiB pages are (2 MiB-aligned, physically contiguous
        // blocks): the walk steps a huge page at once and must find the same size
        const HUGE = 2 * 1024 * 1024;
        const pageSizeAt = (a: number): number => {
          const b = a - (a % HUGE);
          if (b < vaBase || b + HUGE > vaBase + total || dma(b) % HUGE !== 0) return PAGE;
          for (let o = PAGE; o < HUGE; o += PAGE) if (dma(b + o) !== dma(b) + o) return PAGE;
          return HUGE;
        };
        expect(bestPageShift({ dmaAddress: dma, pageSizeAt }, addr, length)).toBe(bruteForce(dma, addr, length));
        // zero-based (issue 18 item 7): the iova is 0, the address on a page (uverbs_cmd.c:710)
        const zAddr = addr - (addr % PAGE);
        const zLen = length + (addr % PAGE);
        expect(bestPageShift({ dmaAddress: dma }, zAddr, zLen, 0)).toBe(bruteForce(dma, zAddr, zLen, 0));
        expect(bestPageShift({ dmaAddress: dma, pageSizeAt }, zAddr, zLen, 0)).toBe(bruteForce(dma, zAddr, zLen, 0));
      }),
      { numRuns: 300 },
    );
  });

  it('an MR over huge pages registers 2 MiB MTT entries (firmware and pooled), and translates through them', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const { pd, cq, qp } = await loopback(tb);
      const host = tb.host(0);
      const buf = host.alloc(8 * HUGE, { hugePages: true });
      const at = buf.addr + 3 * PAGE + 100; // not page-aligned: the first entry still maps a whole 2 MiB page
      const big = await pd.regMr(at, 5 * HUGE, Access.LOCAL_WRITE | Access.REMOTE_READ); // 6 huge pages: firmware or pool 8
      const e = readMkey(tb.hca(0), big.lkey >>> 8);
      // 6 entries, padded to 8 by the REG_MR's list: the cache's mkeys have pg_access (ODP and
      // pinned MRs share them), so the padding is written as not-present entries
      expect([e.logPageSize, e.xltCount]).toEqual([21, 8]);
      const one = await pd.regMr(buf.addr + 7 * HUGE, HUGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
      expect(readMkey(tb.hca(0), one.deviceKey >>> 8).logPageSize).toBe(21);
      // a 4 KiB-page buffer: 4 KiB entries
      const small = host.alloc(8 * PAGE);
      const smr = await pd.regMr(small.addr, 8 * PAGE, Access.LOCAL_WRITE);
      expect(readMkey(tb.hca(0), smr.deviceKey >>> 8).logPageSize).toBe(12);
      // READs through the 2 MiB entries land on the right bytes
      const src = at + 4 * HUGE + 12345;
      host.write(src, Uint8Array.of(9, 8, 7, 6));
      host.write(buf.addr + 7 * HUGE + HUGE - 4, Uint8Array.of(1, 2, 3, 4));
      qp.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: small.addr, length: 4, lkey: smr.lkey }], remoteAddr: src, rkey: big.rkey, signaled: true });
      qp.postSend({ wrId: 2, opcode: 'RDMA_READ', sgList: [{ addr: small.addr + 8, length: 4, lkey: smr.lkey }], remoteAddr: buf.addr + 8 * HUGE - 4, rkey: one.rkey, signaled: true });
      const wcs = await cq.wait(2);
      expect(wcs.map((w) => w.status)).toEqual(['SUCCESS', 'SUCCESS']);
      expect(host.read(small.addr, 12)).toEqual(Uint8Array.of(9, 8, 7, 6, 0, 0, 0, 0, 1, 2, 3, 4));
      // the bounds are the MR's, not its pages': a byte before `at` in the first 2 MiB page is refused
      qp.postSend({ wrId: 3, opcode: 'RDMA_READ', sgList: [{ addr: small.addr, length: 4, lkey: smr.lkey }], remoteAddr: at - 4, rkey: big.rkey, signaled: true });
      expect((await cq.wait(1))[0].status).toBe('REM_ACCESS_ERR');
    });
  });

  // Issue 18 item 7: the page size of a zero-based MR is picked over its iova, 0, as
  // ib_umem_find_best_pgsz does with virt = 0 (drivers/infiniband/core/umem.c:94-129): the first
  // byte is byte 0 of the first MTT page (start_addr is also the page offset, mlx5_ib.h:1720-1723)
  it('a zero-based MR over huge pages: 2 MiB entries where its first byte is 2 MiB aligned, 4 KiB where not', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd, cq, qp } = await loopback(tb);
      const host = tb.host(0);
      const buf = host.alloc(4 * HUGE, { hugePages: true });
      expect(buf.addr % HUGE).toBe(0);
      const ZB = Access.LOCAL_WRITE | Access.REMOTE_READ | Access.ZERO_BASED;
      const aligned = await pd.regMr(buf.addr + HUGE, 2 * HUGE, ZB);
      const inside = await pd.regMr(buf.addr + 3 * PAGE, 2 * HUGE, ZB);
      expect(readMkey(tb.hca(0), aligned.lkey >>> 8)).toMatchObject({ start: 0, zeroBased: true, logPageSize: 21, xltCount: 4 }); // 2, padded (not present)
      expect(readMkey(tb.hca(0), inside.lkey >>> 8)).toMatchObject({ start: 0, zeroBased: true, logPageSize: 12, xltCount: 1024 });
      const dst = host.alloc(PAGE);
      const dmr = await pd.regMr(dst.addr, PAGE, Access.LOCAL_WRITE);
      host.write(buf.addr + HUGE + HUGE + 7, Uint8Array.of(1, 2, 3, 4));
      host.write(buf.addr + 3 * PAGE + HUGE + 7, Uint8Array.of(5, 6, 7, 8));
      qp.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 4, lkey: dmr.lkey }], remoteAddr: HUGE + 7, rkey: aligned.rkey, signaled: true });
      qp.postSend({ wrId: 2, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr + 8, length: 4, lkey: dmr.lkey }], remoteAddr: HUGE + 7, rkey: inside.rkey, signaled: true });
      expect((await cq.wait(2)).map((w) => w.status)).toEqual(['SUCCESS', 'SUCCESS']);
      expect(host.read(dst.addr, 12)).toEqual(Uint8Array.of(1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8));
    });
  });
});
