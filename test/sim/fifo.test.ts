import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Clock, Fifo, Module, Sim } from '../../src/sim/index.ts';

/** The driver acts on the FIFO during an edge, as a hardware module would. */
class Driver extends Module {
  plan: { pops: number; pushes: number[] } = { pops: 0, pushes: [] };
  popped: number[] = [];
  accepted = 0;
  fifo!: Fifo<number>;
  override tick(): void {
    this.popped = [];
    this.accepted = 0;
    for (let i = 0; i < this.plan.pops && this.fifo.canPop(); i++) this.popped.push(this.fifo.pop());
    for (const v of this.plan.pushes) {
      if (!this.fifo.canPush()) break;
      this.fifo.push(v);
      this.accepted++;
    }
  }
}

interface Model { items: number[]; capacity: number }
interface Real { sim: Sim; drv: Driver; clk: Clock }

/** One cycle: pop up to `pops` visible items and push as many of `pushes` as fit. */
class CycleCmd implements fc.Command<Model, Real> {
  constructor(readonly pops: number, readonly pushes: number[]) {}
  check(): boolean { return true; }
  run(m: Model, r: Real): void {
    // model: only committed items are visible; space freed by a pop is usable next cycle
    const popped = m.items.slice(0, Math.min(this.pops, m.items.length));
    const accepted = Math.min(this.pushes.length, m.capacity - m.items.length);
    m.items = [...m.items.slice(popped.length), ...this.pushes.slice(0, accepted)];
    r.drv.plan = { pops: this.pops, pushes: this.pushes };
    r.sim.runUntil((r.clk.cycle + 1) * r.clk.period);
    expect(r.drv.popped).toEqual(popped);
    expect(r.drv.accepted).toBe(accepted);
    expect(r.drv.fifo.size).toBe(m.items.length);
  }
  toString(): string { return `cycle(pop ${this.pops}, push [${this.pushes}])`; }
}

describe('fifo', () => {
  it('never loses, duplicates or reorders items under random push/pop/back-pressure', () => {
    let next = 0;
    const cmd = fc
      .record({ pops: fc.integer({ min: 0, max: 3 }), n: fc.integer({ min: 0, max: 3 }) })
      .map(({ pops, n }) => new CycleCmd(pops, Array.from({ length: n }, () => next++)));
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.commands([cmd], { maxCommands: 60 }), (capacity, cmds) => {
        const sim = new Sim();
        const clk = new Clock(sim.top, 'clk', 10);
        const drv = new Driver(sim, sim.top, 'drv').clockedBy(clk, true);
        drv.fifo = new Fifo<number>(drv, 'q', { capacity });
        fc.modelRun(() => ({ model: { items: [], capacity }, real: { sim, drv, clk } }), cmds);
      }),
    );
  });

  it('with latency, an item is visible only from the first edge at least `latency` after its push, and wakes the consumer then', () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 10);
    class Consumer extends Module {
      got: [number, number][] = [];
      override tick(): void {
        if (q.canPop()) this.got.push([sim.now, q.pop()]);
        else this.sleep();
      }
    }
    const cons = new Consumer(sim, sim.top, 'cons').clockedBy(clk);
    const q: Fifo<number> = new Fifo<number>(cons, 'q', { capacity: 4, latency: 35 });
    q.consumer = cons;
    sim.at(10, { fire: () => q.push(1) });
    sim.at(20, { fire: () => q.push(2) });
    sim.runUntil(200);
    expect(cons.got).toEqual([[50, 1], [60, 2]]);
  });

  it('with latency, a consumer that pops the head and sleeps in the same edge is woken when the next item is due, not the edge after', () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 10);
    class Consumer extends Module {
      got: [number, number][] = [];
      ticks: number[] = [];
      override tick(): void {
        this.ticks.push(sim.now);
        if (q.canPop()) this.got.push([sim.now, q.pop()]);
        // sleeps before the pop commits: the head is gone, the second item still in flight
        this.sleep();
      }
    }
    const cons = new Consumer(sim, sim.top, 'cons').clockedBy(clk);
    const q: Fifo<number> = new Fifo<number>(cons, 'q', { capacity: 4, latency: 35 });
    q.consumer = cons;
    sim.at(10, { fire: () => q.push(1) });
    sim.at(60, { fire: () => q.push(2) });
    sim.runUntil(300);
    expect(cons.got).toEqual([[50, 1], [100, 2]]);
    // no edge between them with nothing visible
    expect(cons.ticks).toEqual([50, 100]);
  });

  it('wakes a sleeping consumer on push and a stalled producer on pop', () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 10);
    const out: number[] = [];
    let n = 0;
    class Producer extends Module {
      override tick(): void {
        if (n >= 20) return this.sleep();
        if (q.canPush()) q.push(n++);
        else this.sleep(); // woken when the consumer pops
      }
    }
    class Consumer extends Module {
      override tick(): void {
        // a slow consumer: takes an item every third cycle
        if (clk.cycle % 3 === 0 && q.canPop()) out.push(q.pop());
        else if (!q.canPop()) this.sleep();
      }
    }
    const prod = new Producer(sim, sim.top, 'prod').clockedBy(clk, true);
    const cons = new Consumer(sim, sim.top, 'cons').clockedBy(clk);
    const q: Fifo<number> = new Fifo<number>(prod, 'q', { capacity: 2 });
    q.consumer = cons;
    q.producer = prod;
    sim.runUntil(10_000);
    expect(out).toEqual([...Array(20).keys()]);
  });

  it('rejects a push when full and a pop when empty, naming the FIFO', () => {
    const sim = new Sim();
    const m = new Module(sim, sim.top, 'm');
    const q = new Fifo<number>(m, 'q', { capacity: 1 });
    q.push(1);
    expect(() => q.push(2)).toThrow(/tb\.m\.q: push while full/);
    expect(() => q.pop()).toThrow(/tb\.m\.q: pop with nothing visible/);
  });
});
