/**
 * A FIFO's item becomes visible from the first edge after its push that is at least `latency`
 * after it (fifo.ts). canPop reads the item's due time only when the FIFO has a latency (one typed
 * array less on the hot path): FIFOs with and without latency are held here to that rule.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Clock, Fifo, Module, Sim } from '../../src/sim/index.ts';

const PERIOD = 10;

/** Pushes on the edges of `pushAt` (edge numbers), pops whenever an item is visible; the edges each item was popped. */
function run(latency: number, capacity: number, pushAt: readonly number[]): number[] {
  const sim = new Sim();
  const clk = new Clock(sim.top, 'clk', PERIOD);
  const popped: number[] = [];
  let edge = 0;
  let next = 0;
  class Ends extends Module {
    override tick(): void {
      const e = edge++;
      if (q.canPop()) {
        q.pop();
        popped.push(e);
      }
      while (next < pushAt.length && pushAt[next] <= e && q.canPush()) {
        q.push(next);
        next++;
      }
      if (e > 200) this.sleep();
    }
  }
  const ends = new Ends(sim, sim.top, 'ends').clockedBy(clk, true);
  const q: Fifo<number> = new Fifo<number>(ends, 'q', { capacity, latency });
  sim.runUntil(300 * PERIOD);
  return popped;
}

/** The same run by the rule: an item pushed at edge p is visible from edge max(p + 1, p + ceil(latency / PERIOD)); one pop an edge, in order. */
function model(latency: number, capacity: number, pushAt: readonly number[]): number[] {
  const popped: number[] = [];
  const queue: { due: number }[] = [];
  let next = 0;
  for (let e = 0; e <= 200; e++) {
    if (queue.length > 0 && queue[0].due <= e) {
      queue.shift();
      popped.push(e);
    }
    // room as of the last commit: a pop this edge frees its slot from the next one
    const room = capacity - queue.length - (popped.length > 0 && popped[popped.length - 1] === e ? 1 : 0);
    let pushed = 0;
    while (next < pushAt.length && pushAt[next] <= e && pushed < room) {
      queue.push({ due: Math.max(e + 1, e + Math.ceil(latency / PERIOD)) });
      next++;
      pushed++;
    }
  }
  return popped;
}

describe('Fifo latency', () => {
  it('an item is visible from the first edge after its push at least `latency` later, with and without latency', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(0, 5, 10, 25, 40),
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 12 }).map((a) => a.sort((x, y) => x - y)),
        (latency, capacity, pushAt) => {
          expect(run(latency, capacity, pushAt)).toEqual(model(latency, capacity, pushAt));
        },
      ),
    );
  });

  it('with a latency of three edges an item pushed on edge 0 is popped on edge 3', () => {
    expect(run(30, 2, [0])).toEqual([3]);
    expect(run(0, 2, [0])).toEqual([1]);
  });
});
