/**
 * Shape 3 of spec/timing.md: a co-tenant looping registration and deregistration lowers a
 * victim's throughput when deregistration flushes the on-chip caches (Husky NSDI'23: mkey miss
 * rate 49%, 96.6 -> 48 Gb/s), and not when it drops only the entry. The victim: random 64 B
 * READs over one 120 MiB MR of the responder (its 3,840 MTT lines fit the 4,096-line MTT cache,
 * so a flush costs the victim 3,840 dependent reads to refill);
 * the co-tenant: a process on the responder's host registering and deregistering MRs back to
 * back during the measured window, of 1 page (the MR cache's 4-entry bucket) or 600 pages (its
 * 1,024-entry bucket). As in mlx5 (mr.c alloc_cacheable_mr, mlx5r_handle_mkey_cleanup) both
 * loop on UMRs: a cached mkey enabled by UMR, revoked by UMR and stored again. mlx5 has a
 * firmware co-tenant only past the cache's largest bucket (4 x 2^20 entries, 16 GiB of 4 KiB
 * pages), and even there only its first registration: reg_create's mkey goes to a temporary
 * entry on dereg and the next registration takes it back. The policy is the configuration
 * field destroyInvalidates ('entry' | 'all'), applied by DESTROY_MKEY and by the cache's
 * revoking UMR.
 */
import { Access, DEFAULT_HCA_CONFIG, POOL_BUCKETS } from '../src/index.ts';
import type { Experiment, PointLine, ShapeCheck } from '../src/experiment.ts';
import { randomReads } from './support/random_reads.ts';
import { intIn, isBoolean, isSizeFrom4k, positiveInt } from './support/shape.ts';

const PAGE = 4096;
const MiB = 2 ** 20;

/** The MR cache's largest bucket (MTT entries): past it, reg_create's mkey and a temporary entry. */
const POOL_MAX_PAGES = POOL_BUCKETS[POOL_BUCKETS.length - 1];

/** The quick grid's adapter: 8x smaller MTT cache, 8x faster firmware and pinning. */
const QUICK_SCALE = {
  mttCacheLines: [DEFAULT_HCA_CONFIG.mttCacheLines / 8],
  fwCreateMkeyPs: [DEFAULT_HCA_CONFIG.fwCreateMkeyPs / 8],
  fwCommandPs: [DEFAULT_HCA_CONFIG.fwCommandPs / 8],
  pinPagePs: [DEFAULT_HCA_CONFIG.pinPagePs / 8],
};

/** A point's bar group: no co-tenant, or its MRs and the path they take. */
function kind(p: PointLine): string {
  if (p.params.cotenant !== true) return 'no co-tenant';
  const pages = (p.params.cotenantPages as number | undefined) ?? 1;
  return `${pages}-page MRs (${pages <= POOL_MAX_PAGES ? `cache, ${POOL_BUCKETS.find((b) => b >= pages && b <= Math.max(2 * pages, 4))}-entry bucket, UMR` : 'past the cache: temporary entry, UMR'})`;
}

const experiment: Experiment = {
  name: 'dereg-storm',
  summary: "a victim's random READs with and without a co-tenant looping regMr/dereg, per invalidation policy ('entry' | 'all')",
  shape: "spec/timing.md shape 3: a co-tenant looping reg/dereg halves a victim's throughput if deregistration flushes the caches (Husky: miss rate 49%, 96.6 -> 48 Gb/s)",
  axes: {
    cotenant: { what: 'a co-tenant loops regMr + dereg on the responder during the measurement', check: isBoolean },
    cotenantPages: { what: "4 KiB pages of each co-tenant MR (from the driver's MR cache: the bucket of 4 x 2^i entries at most twice its size)", check: intIn(1, 4096) },
    victimBytes: { what: "the victim's working set (one MR, 4 KiB pages)", check: (v) => (isSizeFrom4k(v) ? null : 'must be a size of at least 4 KiB'), format: 'bytes' },
    reads: { what: "the victim's READs measured (after as many of warm-up)", check: positiveInt },
  },
  grid: {
    full: [
      { destroyInvalidates: ['entry', 'all'], victimBytes: [120 * MiB], reads: [100_000], cotenant: [false] },
      { destroyInvalidates: ['entry', 'all'], victimBytes: [120 * MiB], reads: [100_000], cotenant: [true], cotenantPages: [1, 600] },
    ],
    // the full grid scaled down 8x (40,000 READs over 120 MiB took 65 s): an MTT cache of 512
    // lines and a victim of 15 MiB (480 lines) that 6,000 warm-up READs fill, and firmware and
    // pinning 8x faster, so a 600-page cycle (~48 us) flushes as often against the refill as
    // the full grid's (~388 us against 3,840 lines) and falls in the shorter window
    quick: [
      { ...QUICK_SCALE, destroyInvalidates: ['entry', 'all'], victimBytes: [15 * MiB], reads: [6_000], cotenant: [false] },
      { ...QUICK_SCALE, destroyInvalidates: ['entry', 'all'], victimBytes: [15 * MiB], reads: [6_000], cotenant: [true], cotenantPages: [1, 600] },
    ],
  },
  async run(p, { seed, config }) {
    const pages = (p.cotenantPages as number | undefined) ?? 1;
    const r = await randomReads({
      seed, config, readBytes: 64, workingSet: p.victimBytes as number, pageSize: PAGE, warm: p.reads as number, reads: p.reads as number,
      ...(p.cotenant === true
        ? {
            async cotenant(tb, ctx, running, ready) {
              const pd = await ctx.allocPd();
              const buf = tb.host(1).alloc(pages * PAGE);
              // one cycle first (it makes the UMR QP), and the cache's pre-fill done
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
    title: "Victim's random 64 B READs alone and beside a co-tenant looping regMr/dereg, per policy",
    mark: 'bar',
    x: { field: 'cotenantPages', title: "the co-tenant's MRs (one process looping regMr + dereg on the victim's host)", label: kind },
    y: { field: 'mReadsPerSec', title: "victim's READs per simulated second (millions)" },
    series: ['destroyInvalidates'],
    source: "reference: Husky NSDI'23, a victim halved (96.6 -> 48 Gb/s, x0.497) when deregistration flushes the caches; drawn at x0.497 of the victim's rate alone",
    references: (points: readonly PointLine[]) => {
      const alone = points.filter((p) => p.params.cotenant === false).map((p) => p.figures.mReadsPerSec);
      return alone.length ? [{ kind: 'y' as const, y: +((Math.max(...alone) * 48) / 96.6).toFixed(3), label: 'Husky: x0.497 (96.6 -> 48 Gb/s)' }] : [];
    },
  },
  checks(points) {
    const out: ShapeCheck[] = [];
    const base = (p: PointLine): string => JSON.stringify({ ...p.params, cotenant: null, cotenantPages: null });
    for (const alone of points.filter((p) => p.params.cotenant === false)) {
      const policy = String(alone.params.destroyInvalidates ?? 'entry');
      const storms = points.filter((p) => p.params.cotenant === true && base(p) === base(alone));
      if (!storms.length) continue;
      const ratios = storms.map((p) => p.figures.mReadsPerSec / alone.figures.mReadsPerSec);
      const detail = storms
        .map((p, i) => `${p.params.cotenantPages}-page MRs: ${alone.figures.mReadsPerSec} -> ${p.figures.mReadsPerSec} M/s (x${ratios[i].toFixed(3)}, MTT miss rate ${p.figures.mttMissRate}, ${p.figures.cotenantCyclesPerMs} cycles/ms)`)
        .join('; ');
      if (policy === 'all') out.push({ what: "'all': the storm lowers the victim below x0.8 (Husky: x0.497)", ok: Math.min(...ratios) < 0.8, detail });
      else out.push({ what: `'${policy}': the storm leaves the victim within 5%`, ok: ratios.every((r) => r > 0.95), detail });
    }
    return out;
  },
};

export default experiment;
