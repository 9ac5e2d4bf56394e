/**
 * A digest of what several workloads simulate (every statistic of the run and its end time),
 * for changes that must not alter a simulated result: run it before and after, and compare.
 * `node --import tsx bench/stats_hash.ts` prints one JSON line per workload. Not a benchmark.
 */
import { createHash } from 'node:crypto';
import { readDeep } from './verbs.ts';
import { randomReads } from '../experiments/support/random_reads.ts';

const digest = (o: unknown): string => createHash('sha1').update(JSON.stringify(o)).digest('hex').slice(0, 16);
const NO_PREFILL = { mrCacheLimit: 0 };

const cases: [string, () => Promise<unknown>][] = [
  ['read-8x16', async () => (await readDeep(8, 16, 4000, 1000, undefined, 1, NO_PREFILL)).stats],
  ['read-64x16-mrs64', async () => (await readDeep(64, 16, 4000, 1000, undefined, 64, NO_PREFILL)).stats],
  ['read-512x1', async () => (await readDeep(512, 1, 2000, 512, undefined, 1, NO_PREFILL)).stats],
  // thousands of QPs waiting for WQE slots: the send queue engine's runs and renumberings
  ['read-4096x16', async () => (await readDeep(4096, 16, 30000, 30000, undefined, 1, NO_PREFILL)).stats],
  ['read-2048x1', async () => (await readDeep(2048, 1, 10000, 4096, undefined, 1, NO_PREFILL)).stats],
  ['random-reads-1000-mrs', async () => randomReads({ seed: 1, config: NO_PREFILL, readBytes: 64, warm: 500, reads: 5000, mrs: 1000 })],
  ['random-reads-prefill', async () => randomReads({ seed: 2, config: {}, readBytes: 64, warm: 0, reads: 2000, mrs: 8000 })],
];
const only = process.argv[2];
for (const [name, run] of cases) {
  if (only && !name.includes(only)) continue;
  console.log(JSON.stringify({ case: name, digest: digest(await run()) }));
}
