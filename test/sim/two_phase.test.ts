import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Clock, Module, Sim, type Reg } from '../../src/sim/index.ts';

/** Node i of a random pipeline: next(r_i) = (a * r[x] + r[y] + c) mod 2^16, from other registers. */
interface NodeSpec { x: number; y: number; a: number; c: number }

class Node extends Module {
  readonly r: Reg;
  inputs: [Reg, Reg] | null = null;
  constructor(sim: Sim, name: string, readonly spec: NodeSpec) {
    super(sim, sim.top, name);
    this.r = this.reg('r', 16);
  }
  override tick(): void {
    const [x, y] = this.inputs!;
    this.r.set((this.spec.a * x.q + y.q + this.spec.c) & 0xffff);
  }
}

/** Runs the graph with modules created in `order`; returns every register after every edge. */
function runGraph(specs: NodeSpec[], order: number[], cycles: number): number[][] {
  const sim = new Sim();
  const clk = new Clock(sim.top, 'clk', 10);
  const nodes: Node[] = new Array(specs.length);
  for (const i of order) nodes[i] = new Node(sim, `n${i}`, specs[i]).clockedBy(clk, true);
  for (const n of nodes) n.inputs = [nodes[n.spec.x].r, nodes[n.spec.y].r];
  const hist: number[][] = [];
  for (let c = 1; c <= cycles; c++) {
    sim.runUntil(c * 10);
    hist.push(nodes.map((n) => n.r.q));
  }
  return hist;
}

/** The same graph as plain synchronous arrays: the untimed reference. */
function reference(specs: NodeSpec[], cycles: number): number[][] {
  let r = specs.map(() => 0);
  const hist: number[][] = [];
  for (let c = 0; c < cycles; c++) {
    r = specs.map((s) => (s.a * r[s.x] + r[s.y] + s.c) & 0xffff);
    hist.push(r);
  }
  return hist;
}

describe('two-phase registers', () => {
  it('give results independent of module creation order, equal to a synchronous reference', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }).chain((n) =>
          fc.record({
            specs: fc.array(
              fc.record({ x: fc.nat(n - 1), y: fc.nat(n - 1), a: fc.integer({ min: 0, max: 3 }), c: fc.integer({ min: 0, max: 5 }) }),
              { minLength: n, maxLength: n },
            ),
            perm: fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }),
          }),
        ),
        ({ specs, perm }) => {
          const id = specs.map((_, i) => i);
          const a = runGraph(specs, id, 20);
          const b = runGraph(specs, perm, 20);
          expect(b).toEqual(a);
          expect(a).toEqual(reference(specs, 20));
        },
      ),
    );
  });

  it('a register written twice in one edge takes the last value; writing the old value back is no change', () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 10);
    class M extends Module {
      readonly r = this.reg('r', 8, { init: 7 });
      step = 0;
      override tick(): void {
        this.step++;
        if (this.step === 1) { this.r.set(9); this.r.set(3); }
        if (this.step === 2) { this.r.set(5); this.r.set(3); }
      }
    }
    const m = new M(sim, sim.top, 'm').clockedBy(clk, true);
    sim.runUntil(10);
    expect(m.r.q).toBe(3);
    sim.runUntil(20);
    expect(m.r.q).toBe(3);
  });

  it('rejects bad names, widths and initial values with the signal named', () => {
    const sim = new Sim();
    const m = new Module(sim, sim.top, 'm');
    expect(() => m.reg('a[0]', 1)).toThrow(/letters, digits/);
    expect(() => m.reg('w', 65)).toThrow(/tb\.m\.w: width 65/);
    expect(() => m.reg('v', 4, { init: 16 })).toThrow(/tb\.m\.v: value 16 does not fit 4 bits/);
    m.reg('ok', 4);
    expect(() => m.reg('ok', 4)).toThrow(/declared twice/);
  });
});
