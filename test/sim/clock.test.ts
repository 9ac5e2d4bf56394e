import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Clock, Module, Sim, type Reg } from '../../src/sim/index.ts';

/** A module that records the time of every tick, and sleeps after `budget` ticks. */
class Ticker extends Module {
  ticks: number[] = [];
  budget = Infinity;
  override tick(): void {
    this.ticks.push(this.sim.now);
    if (--this.budget <= 0) this.sleep();
  }
}

describe('clock domains', () => {
  it('tick awake modules on every edge, and only while awake', () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 2000);
    const m = new Ticker(sim, sim.top, 'm').clockedBy(clk, true);
    m.budget = 3;
    sim.runUntil(20_000);
    expect(m.ticks).toEqual([2000, 4000, 6000]);
    expect(clk.awakeCount).toBe(0);
  });

  it('cost nothing while every module sleeps: time jumps to the next event', () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 2000);
    const m = new Ticker(sim, sim.top, 'm').clockedBy(clk, true);
    m.budget = 1;
    const waker = { fire: (): void => { m.budget = 2; m.wake(); } };
    sim.at(1_000_000_001, waker);
    const fired = sim.runUntil(2_000_000_000);
    expect(m.ticks).toEqual([2000, 1_000_002_000, 1_000_004_000]);
    expect(fired).toBeLessThan(10); // a busy clock would have fired a million edges
  });

  it('wake from an event at an edge time ticks from the next edge, never the same one', () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 1000);
    const m = new Ticker(sim, sim.top, 'm').clockedBy(clk);
    m.budget = 1;
    sim.at(5000, { fire: () => m.wake() });
    sim.runUntil(10_000);
    expect(m.ticks).toEqual([6000]);
  });

  it('several clocks with different periods and phases tick at their own edges', () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 50 }), fc.integer({ min: 2, max: 50 }), fc.integer({ min: 0, max: 49 }), (pa, pb, phRaw) => {
        const sim = new Sim();
        const ph = phRaw % pb;
        const a = new Ticker(sim, sim.top, 'a').clockedBy(new Clock(sim.top, 'clk_a', pa), true);
        const b = new Ticker(sim, sim.top, 'b').clockedBy(new Clock(sim.top, 'clk_b', pb, ph), true);
        sim.runUntil(500);
        expect(a.ticks).toEqual(Array.from({ length: Math.floor(500 / pa) }, (_, i) => (i + 1) * pa));
        const wantB: number[] = [];
        for (let t = ph === 0 ? pb : ph; t <= 500; t += pb) wantB.push(t);
        expect(b.ticks).toEqual(wantB);
      }),
    );
  });

  it('coincident edges of two clocks all sample before any commit (no zero-delay crossing)', () => {
    class Counter extends Module {
      readonly r: Reg = this.reg('r', 16);
      override tick(): void { this.r.set(this.r.q + 1); }
    }
    class Sampler extends Module {
      seen: number[] = [];
      src: Reg | null = null;
      override tick(): void { this.seen.push(this.src!.q); }
    }
    // every creation order of the clocks and of the modules gives the same samples
    for (const clocksFirstFast of [true, false]) {
      for (const samplerFirst of [true, false]) {
        const sim = new Sim();
        const mk = (n: string, p: number): Clock => new Clock(sim.top, n, p);
        const [fast, slow] = clocksFirstFast ? [mk('fast', 2), mk('slow', 6)] : ((): [Clock, Clock] => { const s = mk('slow', 6); return [mk('fast', 2), s]; })();
        let smp: Sampler;
        let c: Counter;
        if (samplerFirst) {
          smp = new Sampler(sim, sim.top, 'smp').clockedBy(slow, true);
          c = new Counter(sim, sim.top, 'c').clockedBy(fast, true);
        } else {
          c = new Counter(sim, sim.top, 'c').clockedBy(fast, true);
          smp = new Sampler(sim, sim.top, 'smp').clockedBy(slow, true);
        }
        smp.src = c.r;
        sim.runUntil(18);
        // at t=6 the counter's edges at 2 and 4 have committed (2); its edge at 6 has not
        expect(smp.seen).toEqual([2, 5, 8]);
      }
    }
    // the other way round: the slow clock's edge at 6 fires first (scheduled earlier), and
    // the fast sampler at 6 must still see the value from before that edge
    const sim = new Sim();
    const fast = new Clock(sim.top, 'fast', 2);
    const slow = new Clock(sim.top, 'slow', 6);
    const c = new Counter(sim, sim.top, 'c').clockedBy(slow, true);
    const smp = new Sampler(sim, sim.top, 'smp').clockedBy(fast, true);
    smp.src = c.r;
    sim.runUntil(12);
    expect(smp.seen).toEqual([0, 0, 0, 1, 1, 1]);
  });

  it('order at one time: clock edges (in the order they were scheduled) before ordinary events', () => {
    // clock edges live beside the event heap (Sim.scheduleClock): the order must be the heap's
    const sim = new Sim();
    const log: string[] = [];
    class Rec extends Module {
      override tick(): void { log.push(`${this.name}@${this.sim.now}`); }
    }
    const a = new Clock(sim.top, 'a', 10);
    const b = new Clock(sim.top, 'b', 10);
    sim.at(10, { fire: () => log.push('ev@10') });
    new Rec(sim, sim.top, 'rb').clockedBy(b, true); // b's first edge is scheduled before a's
    new Rec(sim, sim.top, 'ra').clockedBy(a, true);
    sim.at(20, { fire: () => log.push('ev@20') });
    sim.runUntil(20);
    expect(log).toEqual(['rb@10', 'ra@10', 'ev@10', 'rb@20', 'ra@20', 'ev@20']);
    expect(sim.pending).toBe(2); // both clocks' next edges
    expect(sim.nextEventTime()).toBe(30);
  });
});
