/**
 * Shape 5 of spec/timing.md: prefetch (ibv_advise_mr) takes the first-touch fault off the
 * critical path. The first RDMA WRITE from a fresh ODP MR over pages not resident, with and without an
 * adviseMr(PREFETCH, flush) of its range beforehand: with it the first WRITE costs what a warm
 * one does and no fault is taken; the prefetch itself costs what the fault would have.
 */
import { formatBytes, type Experiment, type PointLine, type ShapeCheck } from '../src/experiment.ts';
import { odpWrite } from './support/odp_write.ts';
import { intIn, isBoolean } from './support/shape.ts';

const KiB = 1024;
const MiB = 2 ** 20;

const experiment: Experiment = {
  name: 'odp-prefetch',
  summary: 'first RDMA WRITE from a fresh ODP MR with and without adviseMr(PREFETCH): prefetch removes the first-touch fault',
  shape: 'spec/timing.md shape 5: prefetch (advise_mr) takes the first-touch fault off the critical path',
  axes: {
    size: { what: 'bytes of the RDMA WRITE (and of the ODP MR)', check: intIn(1, 4 * MiB, 'must be a size in 1 B..4 MiB'), format: 'bytes' },
    prefetch: { what: 'adviseMr(PREFETCH, flush) over the range before the first WRITE', check: isBoolean },
  },
  grid: {
    full: [{ prefetch: [false, true], size: [4 * KiB, 16 * KiB, 64 * KiB, 256 * KiB, 1 * MiB, 4 * MiB] }],
    quick: [{ prefetch: [false, true], size: [4 * KiB, 1 * MiB] }],
  },
  async run(p, { seed, config }) {
    const r = await odpWrite({ seed, config, size: p.size as number, prefetch: p.prefetch as boolean });
    return {
      figures: {
        firstUs: +r.firstUs.toFixed(3), warmUs: +r.warmUs.toFixed(3), firstExtraUs: +(r.firstUs - r.warmUs).toFixed(3),
        prefetchUs: +r.prefetchUs.toFixed(3), faults: r.faults, pageFaults: r.pageFaults, pagePrefetch: r.pagePrefetch,
      },
      stats: r.stats,
    };
  },
  plot: {
    title: 'First RDMA WRITE from a fresh ODP MR, with and without prefetch',
    x: { field: 'size', title: 'RDMA WRITE size (ODP source)', log: true, bytes: true },
    y: { field: 'firstExtraUs', title: 'first WRITE\'s latency minus a warm WRITE\'s (us)' },
    series: ['prefetch'],
    source: 'reference: spec/timing.md shape 5 (prefetch takes the fault off the critical path); the 4 KB fault ~220 us (ASPLOS\'17)',
    references: () => [{ kind: 'point', x: 4 * KiB, y: 220, label: 'fault, ASPLOS\'17: ~220 us' }, { kind: 'y', y: 0, label: 'warm' }],
  },
  checks(points) {
    const out: ShapeCheck[] = [];
    const key = (p: PointLine): string => JSON.stringify({ ...p.params, prefetch: null });
    for (const p of points) {
      const s = formatBytes(p.params.size as number);
      if (p.params.prefetch === true) {
        // what is left is the MTT cache's cold lines (the UMR wrote the entries past the cache):
        // about 1.1 us per line of 8 pages, walked one at a time
        const without = points.find((q) => q.params.prefetch === false && key(q) === key(p));
        out.push({ what: `${s} with prefetch: no fault on the first WRITE`, ok: p.figures.faults === 0 && p.figures.pageFaults === 0, detail: `${p.figures.faults} faults` });
        if (without) out.push({ what: `${s} with prefetch: the first WRITE's extra is under half the fault's`, ok: p.figures.firstExtraUs < 0.5 * without.figures.firstExtraUs, detail: `+${p.figures.firstExtraUs} us against +${without.figures.firstExtraUs} us` });
      } else {
        out.push({ what: `${s} without prefetch: the first WRITE takes one fault (over 150 us more)`, ok: p.figures.faults === 1 && p.figures.firstExtraUs > 150, detail: `${p.figures.faults} faults, +${p.figures.firstExtraUs} us` });
      }
    }
    return out;
  },
};

export default experiment;
