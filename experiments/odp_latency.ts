/**
 * Shape 4 of spec/timing.md: ODP fault latency against message size is strongly sublinear. An
 * RDMA WRITE of 4 KB .. 8 MB from an ODP MR whose pages are not resident (first touch): one
 * fault maps the whole SGE (mlx5 pagefault_single_data_segment), so a 1024x larger message costs
 * less than twice the fault (Lesokhin et al., ASPLOS'17: ~220 us at 4 KB, ~350 us at 4 MB;
 * faulting per page would take over 220 ms).
 */
import { formatBytes, type Experiment, type ShapeCheck } from '../src/experiment.ts';
import { odpWrite } from './support/odp_write.ts';
import { groupBy, groupLabel, intIn, paramsWithout } from './support/shape.ts';

const KiB = 1024;
const MiB = 2 ** 20;

const experiment: Experiment = {
  name: 'odp-latency',
  summary: 'ODP first-touch fault cost against message size (4 KB .. 8 MB, pages not resident): strongly sublinear, one fault per message',
  shape: 'spec/timing.md shape 4: ODP fault latency against message size is strongly sublinear (220 us at 4 KB, 350 us at 4 MB)',
  axes: { size: { what: 'bytes of the RDMA WRITE (and of the ODP MR)', check: intIn(1, 8 * MiB, 'must be a size in 1 B..8 MiB'), format: 'bytes' } },
  grid: {
    full: [{ size: [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB, 8 * MiB] }],
    quick: [{ size: [4 * KiB, 64 * KiB, 4 * MiB] }],
  },
  async run(p, { seed, config }) {
    const r = await odpWrite({ seed, config, size: p.size as number, prefetch: false });
    return {
      figures: { faultUs: +(r.firstUs - r.warmUs).toFixed(3), firstUs: +r.firstUs.toFixed(3), warmUs: +r.warmUs.toFixed(3), faults: r.faults, pageFaults: r.pageFaults },
      stats: r.stats,
    };
  },
  plot: {
    title: 'ODP fault cost against message size (first touch minus warm)',
    x: { field: 'size', title: 'RDMA WRITE size (ODP source)', log: true, bytes: true },
    y: { field: 'faultUs', title: 'first-touch latency minus warm latency (us)' },
    source: 'reference: Lesokhin et al., ASPLOS\'17 (spec/timing.md): ~220 us at 4 KB, ~350 us at 4 MB',
    references: () => [
      { kind: 'point', x: 4 * KiB, y: 220, label: 'ASPLOS\'17: ~220 us' },
      { kind: 'point', x: 4 * MiB, y: 350, label: '~350 us' },
    ],
  },
  checks(points) {
    const out: ShapeCheck[] = [];
    // per configuration (the params other than size): a --set axis gives each its own checks
    for (const [key, pts] of groupBy(points, (p) => paramsWithout(p, 'size'))) {
      const of = groupLabel(key);
      const at = (s: number) => pts.find((p) => p.params.size === s);
      const small = at(4 * KiB);
      const big = at(4 * MiB);
      for (const p of pts) {
        const pages = Math.ceil((p.params.size as number) / 4096);
        out.push({ what: `${formatBytes(p.params.size as number)}${of}: one fault maps the message's ${pages} pages`, ok: p.figures.faults === 1 && p.figures.pageFaults === pages, detail: `${p.figures.faults} faults, ${p.figures.pageFaults} pages` });
      }
      if (small) out.push({ what: `4 KB${of}: the fault costs ~220 us (within 15%)`, ok: Math.abs(small.figures.faultUs / 220 - 1) <= 0.15, detail: `${small.figures.faultUs} us` });
      if (big) out.push({ what: `4 MB${of}: the fault costs ~350 us (within 15%)`, ok: Math.abs(big.figures.faultUs / 350 - 1) <= 0.15, detail: `${big.figures.faultUs} us` });
      if (small && big) out.push({ what: `strongly sublinear${of}: 1024x the bytes, less than 2x the fault`, ok: big.figures.faultUs < 2 * small.figures.faultUs, detail: `x${(big.figures.faultUs / small.figures.faultUs).toFixed(2)}` });
    }
    return out;
  },
};

export default experiment;
