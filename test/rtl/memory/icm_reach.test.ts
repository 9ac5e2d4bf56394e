/**
 * The device's translation tables in ICM are reached only by its translation clients (mkey
 * cache, MTT cache, UMR): a data DMA through an MTT entry that names ICM table space is an
 * Unsupported Request, dropped and counted, whether a table holds that page or not (found by a
 * review: the write threw out of the simulator on an unbacked page, and would have overwritten
 * another mkey's translations on a backed one).
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../../src/index.ts';
import { ICM_XLT_BASE } from '../../../src/rtl/memory/icm.ts';
import { MkcAccessMode } from '../../../src/rtl/formats/constants.ts';
import { decodeIcmMkey } from '../../../src/rtl/memory/icm_mkey.ts';

describe('ICM table space and data DMAs', () => {
  it('an RDMA WRITE through an MTT entry into ICM table space lands nowhere and is counted', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
      const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
      const [cq0, cq1] = [await c0.createCq(256), await c1.createCq(16)];
      const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp0.connect(qp1);
      const a = tb.host(0).alloc(4096);
      tb.host(0).fill(a.addr, 4096, 0xab);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const b = tb.host(1).alloc(4096);
      const victim = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const icm = tb.hca(1).icm;
      // the victim's own translation table (backed), and a page of table space no table holds
      const ctxBytes = icm.read(icm.mkeyContextAddr(victim.lkey >>> 8), 64);
      const table = decodeIcmMkey(new DataView(ctxBytes.buffer, ctxBytes.byteOffset, 64), 0, victim.lkey >>> 8).xltAddr;
      expect(table).toBeGreaterThanOrEqual(ICM_XLT_BASE);
      const targets = [ICM_XLT_BASE + 0x100000, table];
      for (const [i, t] of targets.entries()) {
        const before = icm.read(t, 64);
        const { mkey } = await tb.hca(1).cmdif.exec({
          op: 'CREATE_MKEY', tag: 0x55 + i, free: false, accessMode: MkcAccessMode.MTT, access: 3, umrEn: false, remoteInval: false,
          pd: pd1.pdn, start: 0x10000, length: 4096, logPageSize: 12, mtt: [t],
        });
        qp0.postSend({ wrId: i, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr0.lkey }], remoteAddr: 0x10000, rkey: mkey, signaled: true });
        const [wc] = await cq0.wait(1, { timeout: 1e10 });
        expect(wc.status).toBe('SUCCESS');
        expect([...icm.read(t, 64)]).toEqual([...before]);
      }
      await tb.quiesce();
      expect(tb.stats()['tb.hca1.pcie'].unsupported_requests).toBe(targets.length);
      // the victim still translates: a READ of it works
      qp0.postSend({ wrId: 9, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: victim.rkey, signaled: true });
      expect((await cq0.wait(1, { timeout: 1e10 }))[0].status).toBe('SUCCESS');
      await tb.quiesce();
      expect([...tb.host(1).read(b.addr, 64)]).toEqual(new Array(64).fill(0xab));
    });
  });

  it('covers: data clients never reach table space; table clients reach only pages a table holds', () => {
    const tb = new Testbed({ hcas: 1, config: { mrCacheLimit: 0 } });
    const icm = tb.hca(0).icm;
    const t = icm.allocXlt(4096);
    expect(icm.covers(t, 64, true)).toBe(true);
    expect(icm.covers(t, 64, false)).toBe(false);
    expect(icm.covers(t + 0x100000, 64, true)).toBe(false);
    expect(icm.write(t + 0x100000, new Uint8Array(8))).toBe(false);
    expect(icm.write(t, new Uint8Array(8).fill(7))).toBe(true);
    expect([...icm.read(t, 8)]).toEqual(new Array(8).fill(7));
  });
});
