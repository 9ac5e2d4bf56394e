/**
 * Scale (issue 10 item 9): how far the model goes in live MRs and in one MR's size, measured in
 * wall-clock time and memory on this machine.
 * - `live-mrs`: SCALE_MRS (default 1,000,000) live one-page MRs on adapter 1, then 10^5 random
 *   64 B RDMA READs over them (8 QPs x 16 outstanding, as bench/cliffs.ts);
 * - `big-mr`: one MR of 1,048,576 pages (4 GiB), then 10^5 random READs over it.
 * Each prints one JSON line: the simulated READ rate and cache miss rates (cliffs' fields),
 * `seconds` of wall clock for the case and the process's `peakRssMB` so far (big-mr runs first,
 * so live-mrs's peak is its own unless big-mr's was higher). `npm run bench -- scale`;
 * `SCALE_CASES=big-mr` runs one.
 */
import { randomReads } from './cliffs.ts';

const READS = Number(process.env.SCALE_READS ?? 100_000);

export async function benchScale(): Promise<void> {
  const cases = (process.env.SCALE_CASES ?? 'big-mr,live-mrs').split(',');
  const mrs = Number(process.env.SCALE_MRS ?? 1_000_000);
  for (const c of cases) {
    const t0 = performance.now();
    const p = c === 'big-mr' ? { mrs: 1, bytesPerMr: 2 ** 20 * 4096 } : { mrs, bytesPerMr: 4096 };
    const r = await randomReads(p, 0, READS);
    const seconds = +((performance.now() - t0) / 1000).toFixed(1);
    const peakRssMB = Math.round(process.resourceUsage().maxRSS / 1024);
    const head = c === 'big-mr' ? { bench: 'scale', case: c, pages: 2 ** 20 } : { bench: 'scale', case: c, mrs };
    const { bench: _b, mrs: _m, ...rest } = r;
    console.log(JSON.stringify({ ...head, ...rest, peakRssMB, seconds }));
  }
}
