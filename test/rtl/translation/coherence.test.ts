import { describe, expect, it } from 'vitest';
import { makeKey, NOT_BOUND_QPN, type ModelMkey } from '../../../src/model/index.ts';
import { xlateBench } from '../../support/xlate_bench.ts';
import { destroyMkey, writeMkey, type MkeyDesc } from '../../../src/rtl/firmware/icm_writer.ts';
import { MkcAccessMode } from '../../../src/rtl/formats/constants.ts';
import { readMkey } from '../../../src/rtl/firmware/icm_writer.ts';
import { LOCAL_INV_WQE_BYTES, encodeLocalInvWqe } from '../../../src/rtl/umr/umr_ops.ts';
import { DEFAULT_HCA_CONFIG } from '../../../src/rtl/config.ts';
import { NS } from '../../../src/sim/index.ts';

const page = (i: number): number => 0x4000_0000 + i * 0x3000;

function mttMkey(index: number, tag: number): ModelMkey {
  return {
    index, tag, free: false, accessMode: 'MTT', access: 15, pd: 1, qpn: NOT_BOUND_QPN, start: 0x1000, length: 4096,
    len64: false, logPageSize: 12, pgAccess: false, mtt: [{ addr: page(index), read: true, write: true }], klm: [],
  };
}

function desc(m: ModelMkey, tag: number): MkeyDesc {
  return {
    index: m.index, tag, free: false, accessMode: MkcAccessMode.MTT, access: 15, umrEn: true, remoteInval: false, pd: 1,
    qpn: NOT_BOUND_QPN, start: 0x1000, length: 4096, len64: false, logPageSize: 12, pgAccess: false, mtt: [page(m.index + 7) + 3],
  };
}

const req = (key: number) => ({ key, va: 0x1000, length: 8, access: 0, pd: 1, qpn: 1 });

describe('coherence of the on-chip caches', () => {
  it('an access after a rewrite of a cached mkey and its MTTs sees the new context, never the cached one', async () => {
    const m = mttMkey(5, 1);
    const b = xlateBench([m]);
    await b.sim.run(async () => {
      const first = await b.translate([req(makeKey(5, 1))]);
      expect(first.results[0]).toEqual({ kind: 'ok', segments: [{ pa: page(5), length: 8 }] });
      expect(b.hca.mkeyCache.holds(5)).toBe(true);
      writeMkey(b.hca, desc(m, 2));
      const after = await b.translate([req(makeKey(5, 1)), req(makeKey(5, 2))]);
      expect(after.results[0]).toEqual({ kind: 'error', error: 'INVALID_KEY', key: makeKey(5, 1) });
      expect(after.results[1]).toEqual({ kind: 'ok', segments: [{ pa: page(12), length: 8 }] });
    });
  });

  it('a rewrite while the context is on its way from host memory cancels the fill and reads again', async () => {
    const m = mttMkey(9, 1);
    const b = xlateBench([m]);
    const mkc = b.hca.mkeyCache;
    await b.sim.run(async () => {
      const pending = b.sim.spawn(() => b.translate([req(makeKey(9, 0x42))]));
      // resumes when the PCIe read's completion has entered the cache's port, before the fill
      await mkc.port.resp.changed.wait();
      expect(mkc.port.resp.size).toBe(1);
      writeMkey(b.hca, desc(m, 0x42));
      const r = await pending;
      // a stale fill would have installed tag 1 and failed the key
      expect(r.results[0]).toEqual({ kind: 'ok', segments: [{ pa: page(16), length: 8 }] });
    });
    expect(b.sim.stats()['tb.hca0.mkey_cache'].stale_fills).toBe(1);
  });

  it('a UMR takes effect when its posted write lands, not when it is issued: ICM and the cached copy change together, then it completes', async () => {
    const m = mttMkey(5, 1);
    const b = xlateBench([m]);
    const key = makeKey(5, 1);
    const st = (): Record<string, unknown> => b.sim.stats()['tb.hca0.pcie'];
    await b.sim.run(async () => {
      expect((await b.translate([req(key)])).results[0].kind).toBe('ok');
      expect(b.hca.mkeyCache.holds(5)).toBe(true);
      const writesBefore = st().writes as number;
      const wqe = new Uint8Array(LOCAL_INV_WQE_BYTES);
      encodeLocalInvWqe(wqe, key, 1, 0);
      let doneAt = -1;
      const umr = b.hca.umrEngine;
      const job = b.sim.spawn(async () => {
        await umr.req.pushWait({ tag: 7, qpn: 1, pd: 1, fre: true, wqe });
        expect((await umr.resp.popWait()).syndrome).toBe(0);
        doneAt = b.sim.now;
      });
      while ((st().writes as number) === writesBefore) await b.sim.delay(1 * NS);
      const issuedAt = b.sim.now;
      // issued, not landed: ICM and the cache still hold the valid context, and the key works
      expect(readMkey(b.hca, 5).free).toBe(false);
      expect((await b.translate([req(key)])).results[0].kind).toBe('ok');
      while (!readMkey(b.hca, 5).free) await b.sim.delay(1 * NS);
      const landedAt = b.sim.now;
      expect(landedAt - issuedAt).toBeGreaterThanOrEqual(DEFAULT_HCA_CONFIG.pcieWritePs - 1 * NS);
      expect(landedAt - issuedAt).toBeLessThanOrEqual(DEFAULT_HCA_CONFIG.pcieWritePs + 1 * NS);
      // landed: the cached copy is the new one (a hit, no refill), and the UMR has not completed before it
      expect(b.hca.mkeyCache.holds(5)).toBe(true);
      expect((await b.translate([req(key)])).results[0]).toEqual({ kind: 'error', error: 'FREE', key });
      await job;
      expect(doneAt).toBeGreaterThanOrEqual(landedAt);
    });
    expect(b.sim.stats()['tb.hca0.icm_writer'].umr_context_writes).toBe(1);
    expect(b.sim.stats()['tb.hca0.mkey_cache'].misses).toBe(1);
  });

  it("a fill on its way from host memory when a UMR's write lands is stale: it is read again", async () => {
    const m = mttMkey(9, 1);
    const b = xlateBench([m]);
    const mkc = b.hca.mkeyCache;
    const writer = b.hca.icmWriter;
    await b.sim.run(async () => {
      const pending = b.sim.spawn(() => b.translate([req(makeKey(9, 1))]));
      await mkc.port.resp.changed.wait(); // the old context is in the cache's port, not yet installed
      expect(mkc.port.resp.size).toBe(1);
      // what the PCIe block does when a UMR's posted write lands: the bytes, then the writer's notice
      const addr = b.hca.icm.mkeyContextAddr(9);
      const tag = writer.posting(9, addr, 64, null, 0);
      // firmware may not rewrite a context a UMR write is carrying: the landing would undo it
      expect(() => writeMkey(b.hca, desc(m, 3))).toThrow(/CREATE_MKEY of mkey index 0x9 while a UMR's write of its context is in flight/);
      b.hca.mem.write(addr, Uint8Array.of(b.hca.mem.read(addr, 1)[0] | 0x40)); // the free bit (spec/mlx5.md "mkey context" byte 0)
      writer.fire(tag);
      expect(writer.inFlight).toBe(0);
      const r = await pending;
      expect(r.results[0]).toEqual({ kind: 'error', error: 'FREE', key: makeKey(9, 1) });
    });
    expect(b.sim.stats()['tb.hca0.mkey_cache'].stale_fills).toBe(1);
  });

  it("destroy invalidates the entry, or the whole cache under destroyInvalidates: 'all' (Husky)", async () => {
    for (const policy of ['entry', 'all'] as const) {
      const a = mttMkey(3, 1);
      const c = mttMkey(4, 1);
      const b = xlateBench([a, c], { destroyInvalidates: policy });
      await b.sim.run(async () => {
        await b.translate([req(makeKey(3, 1)), req(makeKey(4, 1))]);
        expect(b.hca.mkeyCache.holds(3) && b.hca.mkeyCache.holds(4)).toBe(true);
        destroyMkey(b.hca, 3);
        expect(b.hca.mkeyCache.holds(3)).toBe(false);
        expect(b.hca.mkeyCache.holds(4)).toBe(policy === 'entry');
        const r = await b.translate([req(makeKey(3, 1))]);
        expect(r.results[0]).toEqual({ kind: 'error', error: 'INVALID_KEY', key: makeKey(3, 1) });
      });
    }
  });
});
