/**
 * What a user sees in GTKWave, for every built-in scenario, checked from the files it writes:
 * - every enumerated signal goes through a translate filter that names every value it takes
 *   (no hex): "enumerated" means declared with an EnumType; every other bus must be on the list
 *   of signals that are numeric on purpose (addresses, lengths, keys, counts), so a new enum
 *   declared as plain bits fails here;
 * - every scenario names its phases, and each `<run>.<phase>.gtkw` opens on its phase: the
 *   phase's modules first and open, the others collapsed, and their activity (value changes of
 *   their signals) spans at least half of the wave pane.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { scenarios } from '../../scenarios/index.ts';
import { KernelDemo } from '../../scenarios/kernel_demo.ts';
import { Testbed } from '../../src/index.ts';
import { Sim } from '../../src/sim/index.ts';
import { readVcdFile } from '../support/vcd_read.ts';
import { tempDir } from '../support/tmp.ts';
import { activityShare, readFilter, readGtkwView } from '../support/gtkw_view.ts';

/** Buses that are numbers on purpose, as `<module>.<signal>` (FIFO occupancies `*_count` too). */
const NUMERIC = new Set([
  // addresses, lengths, keys, indexes
  'pcie.rd_addr', 'pcie.rd_len', 'pcie.rd_tag', 'pcie.wr_addr', 'pcie.wr_len', 'mtt.lookup_addr', 'pagefault.fault_va',
  'atu.in_key', 'atu.in_va', 'klm_walker.key', 'klm_walker.entry', 'klm_walker.offset', 'umr_engine.key', 'responder.rkey',
  'requester.length', 'mkey_cache.lookup_index', 'mkey_cache.fill_index', 'sq.wqe_index',
  // the command queue entry the firmware took last (its doorbell bit); the pages a MANAGE_PAGES moved
  'cmdif.entry', 'cmdif.pg_pages',
  // queue and event numbers
  'sq.qpn', 'requester.qpn', 'responder.qpn', 'umr_engine.qpn', 'pagefault.qpn', 'cq_writer.cqn', 'cq_writer.armed_cqn',
  'eq_writer.eqn', 'eq_writer.msix_vector',
  // the PCIe port a read came from: an index into the ports wired in hca.ts
  'pcie.rd_port',
  // counts of things in flight
  'pcie.outstanding', 'mkey_cache.mshr_busy', 'mtt.mshr_busy', 'atu.busy_ctxs', 'cmdif.queued', 'cmdif.bg_queued',
  'pagefault.outstanding', 'requester.inflight', 'responder.inflight', 'sq.inflight', 'link_req.packets_in_flight',
  'link_resp.packets_in_flight', 'dma_fence.holds', 'dma_fence.draining', 'sq.fence_waits', 'umr_engine.fenced',
  // the kernel example's data
  'source.data', 'consumer.item', 'consumer.sum',
]);
const numericOnPurpose = (path: string): boolean => {
  const key = path.split('.').slice(-2).join('.');
  return NUMERIC.has(key) || /_count$/.test(key) || /^atu\.ctx\d+_key$/.test(key);
};

describe('enumerated signals', () => {
  it('every bus of the model is declared with an enum type or is on the numeric list, and the list names only real signals', () => {
    const tb = new Testbed({ hcas: 2 });
    const demo = new Sim({ seed: 1 });
    new KernelDemo(demo, 1);
    const buses = [...tb.sim.top.walk(), ...demo.top.walk()].flatMap((m) => m.signals).filter((s) => s.width > 1);
    const plain = buses.filter((s) => s.enumType === null && !numericOnPurpose(s.path)).map((s) => s.path);
    expect(plain, 'declare these with { enum } (or add them to NUMERIC if they are numbers)').toEqual([]);
    const enumsOnList = buses.filter((s) => s.enumType !== null && numericOnPurpose(s.path)).map((s) => s.path);
    expect(enumsOnList).toEqual([]);
    const keys = new Set(buses.map((s) => s.path.split('.').slice(-2).join('.')));
    expect([...NUMERIC].filter((k) => !keys.has(k))).toEqual([]);
  });
});

describe('the views every scenario writes', () => {
  for (const s of scenarios) {
    it(`${s.name}: enums by name in every .gtkw; each phase's view opens on its phase`, async () => {
      const dir = tempDir(`mlx5sim-views-${s.name}-`);
      const vcd = join(dir, `${s.name}.vcd`);
      const r = await s.run({ seed: 1, trace: { vcd } });
      expect(r.checks.filter((c) => !c.ok)).toEqual([]);
      const v = await readVcdFile(vcd);
      const files = readdirSync(dir).filter((f) => f.endsWith('.gtkw')).sort();
      const phases = files.filter((f) => f !== `${s.name}.gtkw`);
      expect(files).toContain(`${s.name}.gtkw`);
      expect(phases.length, 'the scenario names its phases (tb.phase)').toBeGreaterThan(0);
      const valuesOf = new Map<string, Set<number>>();
      for (const [, path, x] of v.changes) if (x !== null) (valuesOf.get(path) ?? valuesOf.set(path, new Set()).get(path)!).add(x);
      for (const f of files) {
        const view = readGtkwView(join(dir, f));
        expect(view.signals.length).toBe(v.decls.length);
        for (const sig of view.signals) {
          if (sig.width === 1) continue;
          if (sig.filter === null) {
            expect(numericOnPurpose(sig.path), `${f}: ${sig.path} shows hex: give it an enum type`).toBe(true);
            continue;
          }
          const names = readFilter(sig.filter);
          const unnamed = [...(valuesOf.get(sig.path) ?? [])].filter((x) => !names.has(x));
          expect(unnamed, `${f}: ${sig.path} takes values its filter does not name`).toEqual([]);
        }
        if (view.phase === null) continue;
        expect(f).toBe(`${s.name}.${view.phase}.gtkw`);
        // the phase's modules first and open, every other module collapsed below them
        const opened = view.groups.filter((g) => !g.label.startsWith('markers'));
        const k = opened.findIndex((g) => !g.open);
        expect(k).not.toBe(0);
        if (k > 0) expect(opened.slice(k).every((g) => !g.open)).toBe(true);
        const share = activityShare(view, v.changes);
        expect(share, `${f}: the phase's activity covers ${(share * 100).toFixed(0)}% of the pane`).toBeGreaterThanOrEqual(0.5);
      }
    });
  }
});
