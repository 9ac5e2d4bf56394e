import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { EventQueue, Sim, PRIO_CLOCK, PRIO_NORMAL } from '../../src/sim/index.ts';

describe('event queue', () => {
  it('pops events in (time, priority, insertion sequence) order', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ t: fc.integer({ min: 0, max: 40 }), prio: fc.constantFrom(PRIO_CLOCK, PRIO_NORMAL) }), { maxLength: 300 }),
        (evs) => {
          const q = new EventQueue();
          const noop = { fire: (): void => {} };
          evs.forEach((e, i) => q.push(e.t, e.prio, noop, i));
          const got: number[] = [];
          while (q.size > 0) {
            const s = q.pop();
            got.push(q.slotArg(s));
          }
          const want = evs
            .map((e, i) => ({ ...e, i }))
            .sort((a, b) => a.t - b.t || a.prio - b.prio || a.i - b.i)
            .map((e) => e.i);
          expect(got).toEqual(want);
        },
      ),
    );
  });

  it('keeps the order when events schedule further events while firing', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 5 })), { minLength: 1, maxLength: 60 }), (plan) => {
        const sim = new Sim();
        const log: [number, number][] = [];
        let next = plan.length;
        const target = {
          fire(arg: number): void {
            log.push([sim.now, arg]);
            const [, fanout] = plan[arg % plan.length];
            // each original event schedules `fanout` children at now + 0..fanout
            if (arg < plan.length) for (let k = 0; k < fanout; k++) sim.at(sim.now + k, target, next++);
          },
        };
        plan.forEach(([t], i) => sim.at(t, target, i));
        sim.runUntil(Infinity);
        for (let i = 1; i < log.length; i++) expect(log[i][0]).toBeGreaterThanOrEqual(log[i - 1][0]);
        // at equal times, insertion order: the sequence numbers of same-time events increase
        for (let i = 1; i < log.length; i++) {
          if (log[i][0] === log[i - 1][0] && log[i][1] >= plan.length && log[i - 1][1] >= plan.length) {
            expect(log[i][1]).toBeGreaterThan(log[i - 1][1]);
          }
        }
        expect(log.length).toBe(next);
      }),
    );
  });

  it('rejects scheduling into the past or at fractional picoseconds', () => {
    const sim = new Sim();
    const t = { fire: (): void => {} };
    sim.at(10, t);
    sim.runUntil(10);
    expect(() => sim.at(5, t)).toThrow(/cannot schedule at 5 ps/);
    expect(() => sim.at(12.5, t)).toThrow(/whole picoseconds/);
  });

  it('grows past its initial capacity without losing events', () => {
    const q = new EventQueue();
    const noop = { fire: (): void => {} };
    for (let i = 0; i < 5000; i++) q.push((i * 7919) % 1000, PRIO_NORMAL, noop, i);
    let last = -1;
    let n = 0;
    while (q.size > 0) {
      const s = q.pop();
      expect(q.slotTime(s)).toBeGreaterThanOrEqual(last);
      last = q.slotTime(s);
      n++;
    }
    expect(n).toBe(5000);
  });
});
