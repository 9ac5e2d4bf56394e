import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Clock, Fifo, Module, Sim, SimEvent } from '../../src/sim/index.ts';

/**
 * Fifo.commit leaves a pushWait asleep when a commit popped nothing (no room was made) and no
 * other process resumed since the last drain (fifo.ts `nothingToWake`). That must change nothing
 * but the count of drains: these runs are held to the same runs with every waiter woken at every
 * commit, as before.
 */

/** One random run: what was pushed and popped, by whom and when, and the drains it took. */
interface Plan {
  capacity: number;
  /** Edges on which the consumer pops (1) or not (0), cycled. */
  pops: number[];
  /** Edges on which a hardware producer pushes if it can (1), cycled: commits with pushes and no pop. */
  hwPushes: number[];
  /** Software producers: a start and items, each pushed by pushWait after a gap (in edges: every producer that waits for an edge resumes in the same drain). */
  procs: { start: number; gaps: number[] }[];
  /**
   * Relays: processes that wait for an item the software producers push into a second FIFO just
   * before their push here, then pushWait it here: a process resumed in the commit that may
   * fill this FIFO.
   */
  relays: number;
}

async function runPlan(p: Plan, wakeAll: boolean): Promise<{ log: string[]; drains: number; end: number }> {
  const proto = Fifo.prototype as unknown as { nothingToWake(popped: number): boolean };
  const own = proto.nothingToWake;
  if (wakeAll) proto.nothingToWake = () => false;
  try {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 10);
    const log: string[] = [];
    let edge = 0;
    let hw = 0;
    const go = new SimEvent(sim);
    // the consumer pops on its plan's edges and the hardware producer pushes on its own: some
    // commits push without popping, with software waiting for room
    class Ends extends Module {
      override tick(): void {
        const e = edge++;
        if (p.pops[e % p.pops.length] === 1 && q.canPop()) log.push(`pop ${q.pop()} @${sim.now}`);
        if (p.hwPushes[e % p.hwPushes.length] === 1 && q.canPush()) q.push(`hw${hw++}`);
        go.notify();
        if (e > 400) this.sleep(); // ends a run whose waiters never get room
      }
    }
    const ends = new Ends(sim, sim.top, 'ends').clockedBy(clk, true);
    const x: Fifo<string> = new Fifo<string>(ends, 'x', { capacity: 4 });
    const q: Fifo<string> = new Fifo<string>(ends, 'q', { capacity: p.capacity });
    await sim
      .run(async () => {
        const all = p.procs.map((pr, i) =>
          sim.spawn(async () => {
            for (let g = 0; g < pr.start; g++) await go.wait();
            for (let k = 0; k < pr.gaps.length; k++) {
              for (let g = 0; g < pr.gaps[k]; g++) await go.wait();
              // a relay's item first, in the same drain: the commit that fills this FIFO may
              // resume a relay ahead of its waiters
              if (p.relays > 0 && x.canPush()) x.push(`x${i}.${k}`);
              await q.pushWait(`p${i}.${k}`);
              log.push(`push p${i}.${k} @${sim.now}`);
            }
          }),
        );
        for (let i = 0; i < p.relays; i++) {
          all.push(
            sim.spawn(async () => {
              for (let k = 0; k < 3; k++) {
                // (no popWait: its own await would put this process's wait on q behind the others')
                while (!x.canPop()) await x.changed.wait();
                const v = x.pop();
                await q.pushWait(`r${i}.${v}`);
                log.push(`push r${i}.${v} @${sim.now}`);
              }
            }),
          );
        }
        // the relays may wait for ever (the hardware stops pushing): the run ends with the producers
        await Promise.all(all.slice(0, p.procs.length));
      })
      .catch((e: unknown) => log.push(`error ${String(e).slice(0, 60)}`));
    return { log, drains: sim.drains, end: sim.now };
  } finally {
    proto.nothingToWake = own;
  }
}

describe('Fifo: a pushWait is not woken by a commit that makes no room', () => {
  it('gives the same pushes, pops and times as waking every waiter at every commit, with no more drains', async () => {
    const plan = fc.record({
      capacity: fc.integer({ min: 1, max: 3 }),
      pops: fc.array(fc.integer({ min: 0, max: 1 }), { minLength: 1, maxLength: 6 }),
      hwPushes: fc.array(fc.integer({ min: 0, max: 1 }), { minLength: 1, maxLength: 6 }),
      procs: fc.array(
        fc.record({ start: fc.integer({ min: 0, max: 6 }), gaps: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 5 }) }),
        { minLength: 1, maxLength: 4 },
      ),
      relays: fc.integer({ min: 0, max: 2 }),
    });
    await fc.assert(
      fc.asyncProperty(plan, async (p) => {
        const ref = await runPlan(p, true);
        const now = await runPlan(p, false);
        expect(now.log).toEqual(ref.log);
        expect(now.end).toBe(ref.end);
        expect(now.drains).toBeLessThanOrEqual(ref.drains);
      }),
      { numRuns: 150 },
    );
  });

  it('takes fewer drains when another process fills the FIFO a process waits on', async () => {
    // two processes push at the same instants: the second finds the slot the first just took
    const p: Plan = { capacity: 1, pops: [0, 0, 0, 1], hwPushes: [0], procs: [{ start: 0, gaps: [0, 0] }, { start: 0, gaps: [0, 0] }], relays: 0 };
    const ref = await runPlan(p, true);
    const now = await runPlan(p, false);
    expect(now.log).toEqual(ref.log);
    expect(now.log.filter((l) => l.startsWith('push')).length).toBe(4);
    expect(now.drains).toBeLessThan(ref.drains);
  });
});
