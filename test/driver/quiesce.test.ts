import { describe, expect, it } from 'vitest';
import { Testbed, type Ps } from '../../src/index.ts';

/** The look quiesce made before it ran inside an event: a process resumed after every event. */
async function quiesceByDelays(tb: Testbed): Promise<void> {
  while (tb.busyModules().length > 0) {
    const next = tb.sim.nextEventTime();
    await tb.delay(Math.max(1, next - tb.now));
  }
}

/** Opens both adapters (their MR caches filling in the background), then waits with `wait`. */
async function prefill(wait: (tb: Testbed) => Promise<void>): Promise<{ now: Ps; stats: string }> {
  const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 4 } });
  await tb.run(async () => {
    await tb.openDevice(0);
    await tb.openDevice(1);
    await wait(tb);
  });
  return { now: tb.now, stats: JSON.stringify(tb.stats()) };
}

describe('tb.quiesce', () => {
  it('ends at the same time with the same statistics as a process looking after every event', async () => {
    const probe = await prefill((tb) => tb.quiesce());
    const delays = await prefill(quiesceByDelays);
    expect(probe.now).toBe(delays.now);
    expect(probe.stats).toBe(delays.stats);
  });

  it('names the modules still busy when its timeout passes, and a later quiesce finishes', async () => {
    const tb = new Testbed({ hcas: 1, config: { mrCacheLimit: 4 } });
    await tb.run(async () => {
      await tb.openDevice(0);
      await expect(tb.quiesce({ timeout: 1000 })).rejects.toThrow(/^quiesce: still in flight after 1000 ps: .*tb\.hca0/);
      await tb.quiesce();
      expect(tb.busyModules()).toEqual([]);
    });
  });
});
