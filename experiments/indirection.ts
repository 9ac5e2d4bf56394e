/**
 * Shape 7 of spec/timing.md: each indirection level of a cold KLM access adds a dependent host
 * read. One translation through the ATU of an adapter whose caches are cold, for a key behind
 * 0..4 levels of KLM mkeys (each level one KLM naming the next key; level 0 is the direct MTT
 * mkey), then the same translation warm. The mkey contexts are written into ICM as firmware
 * would leave them (the `translation` scenario does the same): verbs have no call that nests
 * indirect mkeys.
 */
import { Sim } from '../src/sim/index.ts';
import { Hca } from '../src/rtl/hca.ts';
import { DEFAULT_HCA_CONFIG, resolveConfig } from '../src/rtl/config.ts';
import { writeMkey, type MkeyDesc } from '../src/rtl/firmware/icm_writer.ts';
import { MkcAccessMode } from '../src/rtl/formats/constants.ts';
import type { Experiment, PointLine, ShapeCheck } from '../src/experiment.ts';
import { counters, delta } from './support/stats.ts';
import { groupBy, groupLabel, intIn, paramsWithout } from './support/shape.ts';

const PAGE = 4096;
const NS = 1000;
const US = 1000 * NS;
const SCOPES = ['tb.hca0.pcie', 'tb.hca0.mkey_cache', 'tb.hca0.mtt', 'tb.hca0.klm_walker', 'tb.hca0.atu'];

function desc(index: number, accessMode: number, start: number, length: number, x: Partial<MkeyDesc>): MkeyDesc {
  return {
    index, tag: 1, free: false, accessMode, access: 15, umrEn: true, remoteInval: false, pd: 1, qpn: 0xffffff,
    start, length, len64: false, logPageSize: 12, pgAccess: false, ...x,
  };
}

/** The axis's limit: the adapter's default nesting limit (HcaConfig.klmMaxIndirection). */
const MAX_DEPTH = DEFAULT_HCA_CONFIG.klmMaxIndirection;

const byDepth = (points: readonly PointLine[]): Map<number, PointLine> => new Map(points.map((p) => [p.params.depth as number, p]));

const experiment: Experiment = {
  name: 'indirection',
  summary: 'cold translation latency against KLM depth 0..4: each level adds a KLM read and an mkey read',
  shape: 'spec/timing.md shape 7: each indirection level of a cold KLM access adds a dependent host read',
  axes: {
    // AxisDef.check sees the value alone, not the point's configuration: the limit is the
    // default klmMaxIndirection (a deeper key fails its translation, the point with an exception)
    depth: {
      what: 'KLM levels above the direct MTT mkey',
      check: intIn(0, MAX_DEPTH, `must be an integer in 0..${MAX_DEPTH} (klmMaxIndirection: the deepest KLM nesting the adapter walks)`),
      format: 'number',
    },
  },
  grid: {
    full: [{ depth: [0, 1, 2, 3, 4] }],
    quick: [{ depth: [0, 1, 2, 3, 4] }],
  },
  async run(params, { seed, config }) {
    const depth = params.depth as number;
    const cfg = resolveConfig(config);
    // a --set klmMaxIndirection below the depth: say so rather than fail inside the translation
    if (depth > cfg.klmMaxIndirection) throw new Error(`indirection: depth ${depth} is past klmMaxIndirection ${cfg.klmMaxIndirection}`);
    const sim = new Sim({ seed });
    const hca = new Hca(sim, sim.top, 'hca0', cfg);
    const port = hca.atu.port('experiment');
    const buf = hca.host.alloc(4 * PAGE);
    const pas = Array.from({ length: 4 }, (_, i) => hca.host.dmaAddress(buf.addr + i * PAGE));
    let index = 0x10;
    writeMkey(hca, desc(index, MkcAccessMode.MTT, buf.addr, 4 * PAGE, { mtt: pas.map((pa) => pa + 3) }));
    let key = (index << 8) | 1;
    let va = buf.addr;
    for (let d = 0; d < depth; d++) {
      index++;
      writeMkey(hca, desc(index, MkcAccessMode.KLMS, 0, 4 * PAGE, { klm: [{ bcount: 4 * PAGE, key, va }] }));
      key = ((index << 8) | 1) >>> 0;
      va = 0;
    }
    const figures: Record<string, number> = {};
    let stats = {};
    await sim.run(async () => {
      await sim.delay(1000 * NS); // the ICM writes land; nothing is cached
      const xlate = async (): Promise<number> => {
        const t0 = sim.now;
        await port.req.pushWait({ key, va: va + PAGE + 64, length: 64, access: 4, pd: 1, qpn: 1, tag: 0 });
        const r = await port.resp.popWait();
        if (r.result.kind !== 'ok') throw new Error(`indirection: depth ${depth}: ${JSON.stringify(r.result)}`);
        return sim.now - t0;
      };
      const s0 = counters(sim.stats(), SCOPES);
      const cold = await xlate();
      const s1 = counters(sim.stats(), SCOPES);
      const warm = await xlate();
      const d = delta(s1, s0);
      figures.coldNs = cold / NS;
      figures.warmNs = warm / NS;
      figures.coldExtraNs = (cold - warm) / NS;
      // the plot's unit: the published anchors are in us
      figures.coldExtraUs = (cold - warm) / US;
      figures.hostReads = d['tb.hca0.pcie'].reads;
      stats = d;
    });
    return { figures, stats };
  },
  plot: {
    title: 'Cold translation latency against KLM indirection depth',
    x: { field: 'depth', title: 'KLM levels above the direct (MTT) mkey' },
    y: { field: 'coldExtraUs', title: 'cold minus warm latency (us)' },
    source: 'reference: spec/timing.md, direct ~1.1 us extra (two dependent PCIe reads), indirect ~2-3 us extra',
    references: () => [
      { kind: 'point', x: 0, y: 1.1, label: 'direct: ~1.1 us' },
      { kind: 'point', x: 1, y: 2.5, label: 'indirect: ~2-3 us' },
    ],
  },
  checks(points) {
    const out: ShapeCheck[] = [];
    // per configuration (the params other than depth): a --set axis gives each its own checks
    for (const [key, pts] of groupBy(points, (p) => paramsWithout(p, 'depth'))) {
      const of = groupLabel(key);
      const m = byDepth(pts);
      const d0 = m.get(0);
      if (d0) {
        const x = d0.figures.coldExtraNs;
        out.push({ what: `a cold direct access pays two dependent host reads, ~1.1 us (timing.md, within 15%)${of}`, ok: d0.figures.hostReads === 2 && x > 1100 * 0.85 && x < 1100 * 1.15, detail: `${d0.figures.hostReads} reads, ${x} ns` });
      }
      const d1 = m.get(1);
      if (d1) {
        const x = d1.figures.coldExtraNs;
        out.push({ what: `one KLM level costs ~2-3 us extra cold (timing.md)${of}`, ok: x >= 2000 * 0.85 && x <= 3000 * 1.15, detail: `${x} ns` });
      }
      // each depth against the next shallower one of the grid: two reads per level between them
      const depths = [...m.keys()].sort((a, b) => a - b);
      for (let i = 1; i < depths.length; i++) {
        const [q, d] = [depths[i - 1], depths[i]];
        const [p, r] = [m.get(d)!, m.get(q)!];
        const levels = d - q;
        const reads = p.figures.hostReads - r.figures.hostReads;
        const ns = p.figures.coldExtraNs - r.figures.coldExtraNs;
        const which = levels === 1 ? `level ${d} adds` : `levels ${q + 1}..${d} add`;
        out.push({
          what: `${which} two dependent host reads each (a KLM line and the inner mkey), ~0.55 us each${of}`,
          ok: reads === 2 * levels && ns > 2 * 500 * levels && ns < 2 * 700 * levels,
          detail: `${reads} reads, +${ns} ns`,
        });
      }
    }
    return out;
  },
};

export default experiment;
