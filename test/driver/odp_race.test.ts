/**
 * A fault racing an invalidation of the same range (spec/semantics.md "On-demand paging"): the
 * fault retries and never maps a dropped page. For any timing of a madviseDontNeed against a
 * faulting write, the write completes, and afterwards every MTT entry of the MR the hardware
 * holds (in ICM) is either not present or the page's current frame, and agrees with the
 * driver's view.
 */
import { describe, expect } from 'vitest';
import { fc, it } from '@fast-check/vitest';
import { Access, Testbed } from '../../src/index.ts';
import { readMkey } from '../../src/rtl/firmware/icm_writer.ts';
import { rcPair } from '../support/rc_pair.ts';

const US = 1_000_000;
const PAGE = 4096;

/** A small MR cache profile: the default pre-fill (6,120 mkeys per adapter, ~1-2 s of wall clock) is not what these runs test. */
const SMALL_MR_CACHE = { mrCacheLimit: 4, mrCacheLastOrder: 4 } as const;

describe('ODP: a fault racing an invalidation', () => {
  it.prop(
    [
      fc.array(
        fc.record({
          // anywhere, or while the fault's MTT UMR is in flight (~165-175 us after posting)
          at: fc.oneof(fc.integer({ min: 0, max: 400 * US }), fc.integer({ min: 160 * US, max: 180 * US })),
          page: fc.nat({ max: 1 }),
        }),
        { minLength: 1, maxLength: 3 },
      ),
      fc.integer({ min: 1, max: 2 }),
    ],
    { numRuns: Number(process.env.RACE_RUNS ?? 40) },
  )('never maps a dropped page, and the write completes', async (drops, pages) => {
    const tb = new Testbed({ hcas: 2, config: SMALL_MR_CACHE });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(2 * PAGE);
      const b = tb.host(1).alloc(2 * PAGE);
      const omr = await p.pd0.regMr(a.addr, 2 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 2 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const dropping = drops.map((d) =>
        tb.spawn(async () => {
          await tb.delay(d.at);
          await tb.host(0).madviseDontNeed(a.addr + d.page * PAGE, PAGE);
        }),
      );
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: pages * PAGE, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await p.cq0.wait(1, { timeout: 50_000 * US });
      expect(wc.status).toBe('SUCCESS');
      await Promise.all(dropping);
      await tb.quiesce();
      // the hardware's MTT entries: not present, or the page's current frame
      const hca = tb.hca(0);
      const e = readMkey(hca, omr.lkey >>> 8);
      for (let i = 0; i < 2; i++) {
        const v = new DataView(hca.icm.read(e.xltAddr + i * 8, 8).buffer); // the table is in ICM space
        const raw = v.getUint32(0) * 2 ** 32 + v.getUint32(4);
        const va = a.addr + i * PAGE;
        if ((raw & 3) === 0) continue;
        expect(tb.host(0).isMapped(va, PAGE), `page ${i} is mapped by the device but dropped in the process`).toBe(true);
        expect(raw - (raw % 4096)).toBe(tb.host(0).dmaAddress(va));
      }
    });
  });

  it('an invalidation while the fault UMR is in flight makes the handler map again', async () => {
    const tb = new Testbed({ hcas: 2, config: SMALL_MR_CACHE });
    let retries = 0;
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const omr = await p.pd0.regMr(a.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      // find when the fault's UMR goes out: the MTT update lands in ICM then
      const pool = p.c0.umr as unknown as { updateTranslations: (...a: unknown[]) => Promise<void> };
      const orig = pool.updateTranslations.bind(pool);
      let hit = false;
      pool.updateTranslations = async (...args: unknown[]) => {
        const r = orig(...args);
        if (!hit) {
          hit = true;
          await tb.host(0).madviseDontNeed(a.addr, PAGE); // while the map UMR is in flight
        }
        return r;
      };
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: PAGE, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      retries = p.c0.odp.raceRetries;
    });
    expect(retries).toBeGreaterThanOrEqual(1);
  });
});
