/**
 * The two cache cliffs of the data path, measured in simulated time: random 64 B RDMA READs
 * from adapter 0 to adapter 1 over 8 QPs x 16 outstanding, against
 * - the working set (one MR of 64 KiB .. 1 GiB, 4 KiB pages): the MTT cache's reach is
 *   4096 lines x 8 MTTs x 4 KiB = 128 MiB;
 * - the number of MRs (16 .. 16,384 one-page MRs, each READ to a random one): the mkey cache
 *   holds 512 contexts.
 * The workload is the experiments' (experiments/support/random_reads.ts, seed 1, default
 * configuration), so these figures and mtt-cliff's / mr-count's points are the same runs.
 * Prints one JSON line per point: READs per simulated second and the responder's cache stats.
 * `npm run bench -- cliffs` (a few minutes); the README's tables come from it.
 */
import { randomReads as reads, PAGE_4K } from '../experiments/support/random_reads.ts';

interface Point {
  mrs: number;
  bytesPerMr: number;
}

/** One point: `mrs` one-page MRs, or (mrs 1) one MR of `bytesPerMr` in 4 KiB pages. */
export async function randomReads(p: Point, warm: number, count: number): Promise<Record<string, unknown>> {
  const r = await reads({
    seed: 1, config: {}, readBytes: 64, warm, reads: count,
    ...(p.mrs === 1 ? { workingSet: p.bytesPerMr, pageSize: PAGE_4K } : { mrs: p.mrs }),
  });
  // counters over the measured window; peaks and max_* are the run's (stats.ts's delta)
  const s = (scope: string, k: string): number => r.stats[scope]?.[k] ?? 0;
  return {
    bench: 'cliffs',
    mrs: p.mrs,
    bytesPerMr: p.bytesPerMr,
    workingSetBytes: p.mrs * p.bytesPerMr,
    reads: count,
    simReadsPerSec: r.readsPerSec,
    mkeyMissRate: r.mkeyMissRate,
    mttMissRate: r.mttMissRate,
    atuContextsPeak: s('tb.hca1.atu', 'contexts_peak'),
    atuContextStalls: r.atuContextStalls,
    mttMshrStalls: s('tb.hca1.mtt', 'mshrs_full_stalls'),
    mkeyMshrStalls: s('tb.hca1.mkey_cache', 'mshrs_full_stalls'),
    pcieMaxOutstanding: s('tb.hca1.pcie', 'max_outstanding'),
    pcieTagStalls: s('tb.hca1.pcie', 'tag_stalls'),
    responderContextsPeak: s('tb.hca1.responder', 'contexts_peak'),
  };
}

export async function benchCliffs(): Promise<void> {
  for (let w = 64 * 1024; w <= 2 ** 30; w *= 4) console.log(JSON.stringify(await randomReads({ mrs: 1, bytesPerMr: w }, 20_000, 20_000)));
  for (let n = 16; n <= 16384; n *= 4) console.log(JSON.stringify(await randomReads({ mrs: n, bytesPerMr: 4096 }, 20_000, 20_000)));
}
