/**
 * Create/destroy churn (issue 12): 100,000 cycles (CHURN_CYCLES to change) of a PD, a CQ, a QP
 * and an MR made and destroyed again on one adapter. Prints one JSON line every 10,000 cycles
 * and a last one: host frames in use, the driver's queue-buffer pool, the firmware's live
 * objects (mkeys include the driver's mkey pool) and the JS heap after a collection when node
 * runs with --expose-gc (`node --expose-gc --import tsx bench/run.ts churn`), else as it is.
 */
import { Testbed } from '../src/index.ts';
import { churn } from '../test/support/churn.ts';

export async function benchChurn(): Promise<void> {
  const cycles = Number(process.env.CHURN_CYCLES ?? 100_000);
  const gc = (globalThis as { gc?: () => void }).gc;
  const tb = new Testbed({ hcas: 1 });
  const t0 = performance.now();
  await tb.run(() =>
    churn(tb, cycles, 10_000, (s) => {
      gc?.();
      const heapMiB = Math.round((process.memoryUsage().heapUsed / 2 ** 20) * 10) / 10;
      console.log(JSON.stringify({ bench: 'churn', ...s, heapMiB, heapAfterGc: gc !== undefined, seconds: Math.round((performance.now() - t0) / 100) / 10 }));
    }),
  );
}
