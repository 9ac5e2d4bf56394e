/**
 * Shape 3 of spec/timing.md: a co-tenant looping registration and deregistration lowers a
 * victim's throughput when deregistration flushes the on-chip caches (Husky NSDI'23: mkey miss
 * rate 49%, 96.6 -> 48 Gb/s), and not when it drops only the entry. The victim: random 64 B
 * READs over 256 one-page MRs of the responder (they fit its 512-entry mkey cache); the
 * co-tenant: a process on the responder's host registering and deregistering small MRs back to
 * back (taken from and returned to the driver's mkey pool) during the measured window. The
 * policy is the configuration field destroyInvalidates ('entry' | 'all').
 */
import { Access } from '../src/index.ts';
import type { Experiment, PointLine, ShapeCheck } from '../src/experiment.ts';
import { randomReads } from './support/random_reads.ts';
import { groupBy } from './support/shape.ts';

const PAGE = 4096;

const experiment: Experiment = {
  name: 'dereg-storm',
  summary: "a victim's random READs with and without a co-tenant looping regMr/dereg, per invalidation policy ('entry' | 'all')",
  shape: "spec/timing.md shape 3: a co-tenant looping reg/dereg halves a victim's throughput if deregistration flushes the caches (Husky: miss rate 49%, 96.6 -> 48 Gb/s)",
  axes: {
    cotenant: { what: 'a co-tenant loops regMr + dereg on the responder during the measurement', check: (v) => (typeof v === 'boolean' ? null : 'must be true or false') },
    cotenantPages: { what: "4 KiB pages of each co-tenant MR (up to 512: from the driver's mkey pool)", check: (v) => (Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 4096 ? null : 'must be an integer in 1..4096') },
    victimMrs: { what: "the victim's one-page MRs", check: (v) => (Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 60_000 ? null : 'must be an integer in 1..60000') },
    reads: { what: "the victim's READs measured (after as many of warm-up)", check: (v) => (Number.isInteger(v) && (v as number) > 0 ? null : 'must be a positive integer') },
  },
  grid: {
    full: [{ destroyInvalidates: ['entry', 'all'], cotenant: [false, true], cotenantPages: [1], victimMrs: [256], reads: [20_000] }],
    quick: [{ destroyInvalidates: ['entry', 'all'], cotenant: [false, true], cotenantPages: [1], victimMrs: [256], reads: [3_000] }],
  },
  async run(p, { seed, config }) {
    const pages = p.cotenantPages as number;
    const r = await randomReads({
      seed, config, readBytes: 64, mrs: p.victimMrs as number, warm: p.reads as number, reads: p.reads as number,
      ...(p.cotenant === true
        ? {
            async cotenant(tb, ctx, running, ready) {
              const pd = await ctx.allocPd();
              const buf = tb.host(1).alloc(pages * PAGE);
              // one cycle first: the pool's bucket is made (CREATE_MKEY) and refilled
              await (await pd.regMr(buf.addr, pages * PAGE, Access.LOCAL_WRITE)).dereg();
              await tb.quiesce();
              ready();
              let cycles = 0;
              const t0 = tb.now;
              while (running()) {
                const mr = await pd.regMr(buf.addr, pages * PAGE, Access.LOCAL_WRITE);
                await mr.dereg();
                cycles++;
              }
              return { cycles, cyclesPerMs: +(cycles / ((tb.now - t0) / 1e9)).toFixed(2) };
            },
          }
        : {}),
    });
    return {
      figures: {
        mReadsPerSec: +(r.readsPerSec / 1e6).toFixed(3), mkeyMissRate: r.mkeyMissRate, mttMissRate: r.mttMissRate,
        cotenantCyclesPerMs: r.cotenant.cyclesPerMs ?? 0, cotenantCycles: r.cotenant.cycles ?? 0,
      },
      stats: r.stats,
    };
  },
  plot: {
    title: "Victim's random 64 B READs without and with a co-tenant looping regMr/dereg",
    x: { field: 'cotenantCyclesPerMs', title: 'co-tenant reg/dereg cycles per simulated ms (0: no co-tenant)' },
    y: { field: 'mReadsPerSec', title: "victim's READs per simulated second (millions)" },
    series: ['destroyInvalidates'],
    source: "reference: Husky NSDI'23, a victim halved (96.6 -> 48 Gb/s, x0.497) when deregistration flushes the caches; drawn at half the victim's rate alone",
    references: (points: readonly PointLine[]) => {
      const alone = points.filter((p) => p.params.cotenant === false).map((p) => p.figures.mReadsPerSec);
      return alone.length ? [{ kind: 'y' as const, y: +((Math.max(...alone) * 48) / 96.6).toFixed(3), label: 'Husky: x0.497 (96.6 -> 48 Gb/s)' }] : [];
    },
  },
  checks(points) {
    const out: ShapeCheck[] = [];
    for (const [, pts] of groupBy(points, (p) => JSON.stringify({ ...p.params, cotenant: null }))) {
      const alone = pts.find((p) => p.params.cotenant === false);
      const storm = pts.find((p) => p.params.cotenant === true);
      if (!alone || !storm) continue;
      const policy = String(alone.params.destroyInvalidates ?? 'entry');
      const ratio = storm.figures.mReadsPerSec / alone.figures.mReadsPerSec;
      const detail = `${alone.figures.mReadsPerSec} -> ${storm.figures.mReadsPerSec} M/s (x${ratio.toFixed(3)}), mkey miss rate ${storm.figures.mkeyMissRate}, ${storm.figures.cotenantCyclesPerMs} cycles/ms`;
      if (policy === 'all') out.push({ what: "'all': the storm lowers the victim below 80%", ok: ratio < 0.8, detail });
      else out.push({ what: `'${policy}': the storm leaves the victim within 5%`, ok: ratio > 0.95, detail });
    }
    return out;
  },
};

export default experiment;
