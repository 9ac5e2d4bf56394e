/**
 * Issue 12, the UMR privilege decision (README "UMR privilege"): MTT entries are physical
 * addresses, so only a QP with qpc.fre (fast registration enabled: kernel QPs, the driver's own
 * UMR QP) may post a UMR that writes an MR's translations. A user-space QP's REG_MR WQE
 * completes LOC_QP_OP_ERR and changes nothing: a peer's write through the key it tried to make
 * lands nowhere. Before, any QP could point an mkey at any physical page.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, type Qp } from '../../src/index.ts';
import { buildRegMrWqe, wqeBasicBlocks } from '../../src/driver/wqe_builder.ts';

/** Opens both adapters and connects a QP on hca0 (user-space or kernel) to one on hca1. */
async function pair(tb: Testbed, userSpace: boolean) {
  const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
  const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
  const [cq0, cq1] = [await c0.createCq(16), await c1.createCq(16)];
  const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0, userSpace });
  const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
  await qp0.connect(qp1);
  return { pd0, pd1, cq0, cq1, qp0, qp1 };
}

/** Writes a REG_MR WQE into `qp`'s ring by hand (as a user process can) and rings the doorbell. */
function rawRegMr(tb: Testbed, qp: Qp, key: number, iova: number, pages: number[]): void {
  const buf = new Uint8Array(256);
  const ds = buildRegMrWqe(new DataView(buf.buffer), 0, {
    wqeIndex: 0, qpn: qp.qpNum, signaled: true, key, iova, length: 4096,
    access: { localWrite: true, remoteWrite: true, remoteRead: true, remoteAtomic: false },
    translations: { mode: 'MTT', pages, logPageSize: 12 },
  });
  const n = wqeBasicBlocks(ds);
  for (let b = 0; b < n; b++) tb.host(0).write(qp.sq.addr + b * 64, buf.subarray(b * 64, b * 64 + 64));
  tb.hca(0).uar.ringSq(qp.qpNum, n);
}

describe('UMR privilege: only QPs with fast registration enabled write translations', () => {
  for (const userSpace of [true, false]) {
    it(`a REG_MR over a page the process never registered, from a ${userSpace ? 'user-space QP: LOC_QP_OP_ERR, the page untouched' : 'kernel QP: done (the kernel is trusted)'}`, async () => {
      // the kernel case names a page nobody gave the device: the DMA checker would stop the run
      // there (test/rtl/memory/dma_check.test.ts holds that); here the write itself is the point
      const tb = new Testbed({ hcas: 2, trace: { checkDma: userSpace } });
      await tb.run(async () => {
        const { pd0, pd1, cq0, qp1, cq1 } = await pair(tb, userSpace);
        // the victim: a page of host 0 nobody registered
        const victim = tb.host(0).alloc(4096);
        tb.host(0).fill(victim.addr, 4096, 0x11);
        const fmr = await pd0.allocMr('MEM_REG', 1);
        const qp0 = [...pd0.ctx.qps.values()].find((q) => q.attr.userSpace === userSpace && q.pd === pd0)!;
        rawRegMr(tb, qp0, fmr.lkey, 0x1000_0000, [tb.host(0).dmaAddress(victim.addr)]);
        const [wc] = await cq0.wait(1, { timeout: 1e9 });
        expect(wc.status).toBe(userSpace ? 'LOC_QP_OP_ERR' : 'SUCCESS');
        // the peer writes through the key the WQE tried to make
        const src = tb.host(1).alloc(4096);
        tb.host(1).fill(src.addr, 4096, 0xee);
        const smr = await pd1.regMr(src.addr, 4096, Access.LOCAL_WRITE);
        const back = await pd0.ctx.createCq(4);
        const rq = await pd0.createQp({ sendCq: back, recvCq: back });
        const sq = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
        await sq.connect(rq);
        sq.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: 64, lkey: smr.lkey }], remoteAddr: 0x1000_0000, rkey: fmr.rkey, signaled: true });
        const [w] = await cq1.wait(1, { timeout: 1e10 });
        expect(w.status).toBe(userSpace ? 'REM_ACCESS_ERR' : 'SUCCESS');
        expect(tb.host(0).read(victim.addr, 1)[0]).toBe(userSpace ? 0x11 : 0xee);
        void qp1;
      });
    });
  }

  it('postSend REG_MR on a user-space QP is EINVAL naming the rule; LOCAL_INV and windows still work there', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, cq0, qp0 } = await pair(tb, true);
      const fmr = await pd0.allocMr('MEM_REG', 1);
      const buf = tb.host(0).alloc(4096);
      fmr.mapSg([{ addr: buf.addr, length: 4096 }]);
      const e = (() => {
        try {
          qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: Access.LOCAL_WRITE, signaled: true });
        } catch (x) {
          return x;
        }
        return null;
      })();
      expect(e).toBeInstanceOf(VerbsError);
      expect((e as VerbsError).message).toMatch(/EINVAL: postSend: REG_MR needs a kernel QP \(qpc.fre\)/);
      const mr = await pd0.regMr(buf.addr, 4096, Access.LOCAL_WRITE | Access.MW_BIND);
      const mw = await pd0.allocMw(2);
      qp0.postSend({ wrId: 2, opcode: 'BIND_MW', mw, rkey: ((mw.rkey & ~0xff) | ((mw.rkey + 1) & 0xff)) >>> 0, bindInfo: { mr, addr: buf.addr, length: 64, access: Access.REMOTE_READ }, signaled: true });
      qp0.postSend({ wrId: 3, opcode: 'LOCAL_INV', invalidateRkey: mw.rkey, signaled: true });
      const wcs = await cq0.wait(2, { timeout: 1e10 });
      expect(wcs.map((w) => [w.wrId, w.status])).toEqual([[2, 'SUCCESS'], [3, 'SUCCESS']]);
      await expect(pd0.createQp({ sendCq: cq0, recvCq: cq0, userSpace: 1 as never })).rejects.toThrow(/EINVAL: createQp: userSpace must be a boolean/);
    });
  });
});
