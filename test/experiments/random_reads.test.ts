/**
 * The READ-throughput workload of mtt-cliff, mr-count and dereg-storm
 * (experiments/support/random_reads.ts): any READ size the mtt-cliff axis accepts runs, and the
 * rate counts the completions its window actually holds.
 */
import { describe, expect, it } from 'vitest';
import { randomReads } from '../../experiments/support/random_reads.ts';

describe('random READs', () => {
  it('runs READ sizes that do not divide the 64 KiB destination or the MR (3000 B, 4096 B over 12 KiB)', async () => {
    for (const readBytes of [3000, 4096, 1]) {
      const r = await randomReads({ seed: 1, config: { mrCacheLimit: 0 }, readBytes, workingSet: 3 * 4096, pageSize: 4096, warm: 50, reads: 200 });
      expect(r.readsPerSec, `${readBytes} B`).toBeGreaterThan(0);
    }
  });

  it('the rate is the completions the window holds over its length, not `reads` (batches of 16 overshoot a warm-up of 49)', async () => {
    const reads = 100;
    const r = await randomReads({ seed: 3, config: { mrCacheLimit: 0 }, readBytes: 64, workingSet: 2 ** 20, pageSize: 4096, warm: 49, reads });
    // the window opens after the batch that passes 49 completions: up to 15 of its READs are not in it
    expect(r.measured).toBeGreaterThanOrEqual(reads - 15);
    expect(r.measured).toBeLessThan(reads);
    expect(r.readsPerSec).toBe(Math.round(r.measured / (r.windowPs / 1e12)));
    expect(r.gbps).toBe(+((r.measured * 64 * 8) / (r.windowPs / 1e12) / 1e9).toFixed(3));
  });
});
