/**
 * Polling mode (before the command EQ exists, and after it is gone at close: mlx5 cmd.c
 * poll_timeout): the driver reads the entry's ownership bit every 100 ns, or every 1/1024 of the
 * time waited so far. The reads are events of their own and the waiting process resumes only at
 * the read that finds the entry given back (cmd.ts `poll`). Against the loop of delays it
 * replaces, run here as the reference: the same simulated run to the picosecond and the same
 * statistics, for start-up, commands and close, with fast and slow firmware, and far fewer
 * resumptions of the process.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Testbed } from '../../src/index.ts';
import { CmdQueue, CMD_POLL_PS } from '../../src/driver/core/cmd.ts';
import { CMD_OWNER_HW, CmdEntryOff } from '../../src/rtl/formats/cmd_layout.ts';
import type { Sim } from '../../src/sim/index.ts';

interface QueueInternals {
  poll(entryVa: number): Promise<void>;
  hca: { host: { read(a: number, n: number): Uint8Array } };
  sim: Sim;
}

const proto = CmdQueue.prototype as unknown as QueueInternals;
const eventPoll = proto.poll;

/** The loop the driver polled with before: a delay, then a read, in the process. */
async function delayPoll(this: QueueInternals, entryVa: number): Promise<void> {
  const t0 = this.sim.now;
  do await this.sim.delay(Math.max(CMD_POLL_PS, Math.floor((this.sim.now - t0) / 1024)));
  while ((this.hca.host.read(entryVa + CmdEntryOff.STATUS_OWN, 1)[0] & CMD_OWNER_HW) !== 0);
}

interface Run {
  times: number[];
  stats: string;
  drains: number;
}

async function run(seed: number, fwCommandPs: number, parallel: boolean): Promise<Run> {
  const tb = new Testbed({ hcas: 2, seed, config: { mrCacheLimit: 4, mrCacheLastOrder: 4, fwCommandPs } });
  const times: number[] = [];
  await tb.run(async () => {
    if (parallel) await Promise.all([tb.openDevice(0), tb.openDevice(1)]);
    else {
      await tb.openDevice(0);
      times.push(tb.now);
      await tb.openDevice(1);
    }
    times.push(tb.now);
    await tb.quiesce();
    times.push(tb.now);
  });
  const drains = tb.sim.drains;
  await tb.close(); // its TEARDOWN_HCA, reclaims and DISABLE_HCA are polled
  return { times: [...times, tb.now], stats: JSON.stringify(tb.stats()), drains };
}

async function withPoll<T>(poll: QueueInternals['poll'], f: () => Promise<T>): Promise<T> {
  proto.poll = poll;
  try {
    return await f();
  } finally {
    proto.poll = eventPoll;
  }
}

describe('command polling mode', () => {
  it('runs as the loop of delays did, to the picosecond and the statistic, with a fraction of the resumptions', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(1_000, 50_000, 2_000_000, 300_000_000), fc.boolean(), async (seed, fw, parallel) => {
        const want = await withPoll(delayPoll, () => run(seed, fw, parallel));
        const got = await run(seed, fw, parallel);
        expect(got.times).toEqual(want.times);
        expect(got.stats).toBe(want.stats);
        expect(got.drains).toBeLessThanOrEqual(want.drains);
      }),
      { numRuns: 6 },
    );
  });

  it('a start-up of two adapters with the default firmware resumes the process some 400 times, not 7,600', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 4, mrCacheLastOrder: 4 } });
    await tb.run(async () => {
      await tb.openDevice(0);
      await tb.openDevice(1);
      await tb.quiesce();
    });
    expect(tb.sim.drains).toBeLessThan(1_000);
  });
});
