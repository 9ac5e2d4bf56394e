/**
 * The translation pipeline, step by step: a cold access to a direct (MTT) mkey pays two
 * dependent PCIe reads, the same access warm takes a few cycles; 24 mkeys cycled through a
 * 16-entry mkey cache thrash it (LRU: every access misses); a key behind two levels of KLM
 * indirection pays two more reads per level; a stale key is refused.
 */
import { Sim, Tracer } from '../src/sim/index.ts';
import { Hca } from '../src/rtl/hca.ts';
import { resolveConfig } from '../src/rtl/config.ts';
import { writeMkey, type MkeyDesc } from '../src/rtl/firmware/icm_writer.ts';
import { MkcAccessMode } from '../src/rtl/formats/constants.ts';
import type { AtuRequest, AtuResult } from '../src/rtl/translation/atu_types.ts';
import { Checks, type Scenario } from '../src/scenario.ts';

const PAGE = 4096;

const scenario: Scenario = {
  name: 'translation',
  summary: 'ATU: cold vs warm direct mkey, a thrashed 16-entry mkey cache, a two-level nested KLM walk, a stale key',
  async run({ seed, trace, config }) {
    const sim = new Sim({ seed });
    const hca = new Hca(sim, sim.top, 'hca0', resolveConfig({ mkeyCacheEntries: 16, mkeyCacheWays: 4, ...config }));
    const port = hca.atu.port('scenario');
    const tracer = trace?.vcd !== undefined ? new Tracer(sim, { ...trace, vcd: trace.vcd }) : null;
    const c = new Checks();
    const pd = 1;
    let tag = 0;
    let nextIndex = 0x10;

    /** A pinned buffer of `pages` pages and an MTT mkey over it (what regMr leaves in ICM). */
    const mr = (pages: number): { key: number; va: number; pas: number[] } => {
      const buf = hca.host.alloc(pages * PAGE);
      const pas = Array.from({ length: pages }, (_, i) => hca.host.dmaAddress(buf.addr + i * PAGE));
      const index = nextIndex++;
      tag = (tag + 1) & 0xff;
      writeMkey(hca, desc(index, tag, MkcAccessMode.MTT, buf.addr, pages * PAGE, { mtt: pas.map((pa) => pa + 3) }));
      return { key: ((index << 8) | tag) >>> 0, va: buf.addr, pas };
    };
    const klm = (inner: number, innerVa: number, length: number): number => {
      const index = nextIndex++;
      tag = (tag + 1) & 0xff;
      writeMkey(hca, desc(index, tag, MkcAccessMode.KLMS, 0, length, { klm: [{ bcount: length, key: inner, va: innerVa }] }));
      return ((index << 8) | tag) >>> 0;
    };
    const xlate = async (key: number, va: number, length = 64): Promise<[AtuResult, number]> => {
      const t0 = sim.now;
      const r: AtuRequest = { key, va, length, access: 4, pd, qpn: 1, tag: 0 };
      await port.req.pushWait(r);
      const resp = await port.resp.popWait();
      return [resp.result, sim.now - t0];
    };

    /** A phase of the waves (`Tracer.phase`): each step below, with the modules it goes through. */
    const phase = <T>(name: string, modules: string[], body: () => Promise<T>): Promise<T> => (tracer ? tracer.phase(name, modules, body) : body());
    const MISS = ['hca0.atu', 'hca0.mkey_cache', 'hca0.mtt', 'hca0.pcie'];

    await sim.run(async () => {
      // 1. cold then warm, direct mkey
      const a = mr(4);
      const [cold, tCold] = await phase('cold', MISS, () => xlate(a.key, a.va + PAGE + 16));
      c.equal(cold, { kind: 'ok', segments: [{ pa: a.pas[1] + 16, length: 64 }] }, 'cold access translates to the second page');
      c.check(tCold > 1_000_000 && tCold < 1_250_000, 'a cold direct access costs about two PCIe reads (~1.1 us)', `${tCold} ps`);
      const [, tWarm] = await phase('warm', ['hca0.atu', 'hca0.mkey_cache', 'hca0.mtt'], () => xlate(a.key, a.va + PAGE + 16));
      c.check(tWarm <= 10 * hca.coreClock.period, 'the same access warm takes a few cycles', `${tWarm} ps`);

      // 2. thrash: 24 mkeys through a 16-entry, 4-way LRU cache, twice round
      const many = Array.from({ length: 24 }, () => mr(1));
      await sim.delay(100_000);
      const before = sim.stats()['tb.hca0.mkey_cache'].misses as number;
      tracer?.mark('thrash');
      await phase('thrash', MISS, async () => {
        for (let round = 0; round < 2; round++) for (const m of many) await xlate(m.key, m.va);
      });
      const misses = (sim.stats()['tb.hca0.mkey_cache'].misses as number) - before;
      c.equal(misses, 48, 'cycling 24 mkeys through 16 entries misses on every access (LRU thrash)');

      // 3. two levels of KLM indirection over the direct mkey
      await sim.delay(100_000);
      const w1 = klm(a.key, a.va, 4 * PAGE);
      const w2 = klm(w1, 0, 4 * PAGE);
      tracer?.mark('KLM walk');
      const [nested, tNested] = await phase('klm_walk', ['hca0.atu', 'hca0.klm_walker', 'hca0.mkey_cache', 'hca0.mtt', 'hca0.pcie'], () => xlate(w2, 2 * PAGE + 8, 16));
      c.equal(nested, { kind: 'ok', segments: [{ pa: a.pas[2] + 8, length: 16 }] }, 'a nested KLM key walks down to the MTT page');
      c.check(tNested > 2 * 1_050_000 && tNested < 3_000_000, 'two cold KLM levels add two dependent reads each (the inner mkey is warm)', `${tNested} ps`);

      // 4. a stale tag is an invalid key
      await sim.delay(100_000);
      const stale = ((a.key & ~0xff) | ((a.key + 1) & 0xff)) >>> 0;
      tracer?.mark('stale key');
      const [bad] = await phase('stale_key', ['hca0.atu', 'hca0.mkey_cache', 'hca0.pcie'], () => xlate(stale, a.va));
      c.equal(bad, { kind: 'error', error: 'INVALID_KEY', key: stale }, 'a stale tag is refused');
      // idle at the end, so the waves show the last mark's label clear of the edge
      await sim.delay(2_000_000);
    });
    tracer?.close();
    return { checks: c.list, simTime: sim.now, stats: sim.stats() };
  },
};

function desc(index: number, tag: number, accessMode: number, start: number, length: number, x: Partial<MkeyDesc>): MkeyDesc {
  return {
    index, tag, free: false, accessMode, access: 15, umrEn: true, remoteInval: false, pd: 1, qpn: 0xffffff,
    start, length, len64: false, logPageSize: 12, pgAccess: false, ...x,
  };
}

export default scenario;
