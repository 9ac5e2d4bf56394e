/**
 * The DMA movers of one port share one ring of request objects (dma_mover.ts ringOf): a request
 * is reused only after the port's FIFO has taken as many others as it holds, whichever mover
 * pushed them. Several movers gathering and scattering at once on one port must each get their
 * own bytes, their own completions and their own landed writes, with no more request objects
 * than the FIFO's depth plus one.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Clock, Module, Sim } from '../../../src/sim/index.ts';
import { resolveConfig } from '../../../src/rtl/config.ts';
import { HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { Pcie, type DmaPort, type DmaReq } from '../../../src/rtl/memory/pcie.ts';
import { DmaMover, MOVER_TAG_SPAN, type PhysSegment } from '../../../src/rtl/memory/dma_mover.ts';

const MiB = 2 ** 20;
/** Each mover works in a region of its own. */
const REGION = MiB;

interface Job {
  gather: boolean;
  /** Segment lengths; each segment starts `gap` bytes after the last one's end. */
  lens: number[];
  gap: number;
}

function bytesAt(addr: number, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = Math.imul(addr + i, 0x9e3779b1) >>> 24;
  return b;
}

/** The first index where the two differ (or the shorter one's length), -1 when equal (toEqual walks 36 KB slowly). */
function firstDiff(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
}

/** K movers on one port stepped together every edge; read completions routed by tag. */
class Movers extends Module {
  movers: DmaMover[] = [];
  constructor(sim: Sim, clk: Clock, readonly port: DmaPort) {
    super(sim, sim.top.children[0], 'movers');
    this.clockedBy(clk, true);
    port.resp.consumer = this;
  }
  override tick(): void {
    while (this.port.resp.canPop()) {
      const r = this.port.resp.pop();
      this.movers[r.tag % MOVER_TAG_SPAN].complete(r.tag, r.data!);
    }
    let busy = false;
    for (const m of this.movers) {
      m.step();
      if (!m.done && !m.waiting) busy = true;
    }
    if (!busy) this.sleep(); // a read completion wakes it (the response FIFO's consumer)
  }
}

function run(jobs: Job[]): void {
  const sim = new Sim({ seed: 1 });
  const hca = new Module(sim, sim.top, 'hca0');
  const clk = new Clock(hca, 'core_clk', 2000);
  const mem = new HostMem((jobs.length + 1) * REGION, sim.rng.fork());
  const view = {
    read: (a: number, n: number) => mem.read(a, n),
    readInto: (a: number, d: Uint8Array, o: number, n: number) => mem.readInto(a, d, o, n),
    write: (a: number, b: Uint8Array) => (mem.write(a, b), true),
    covers: (a: number, n: number) => mem.covers(a, n),
  };
  const pcie = new Pcie(hca, 'pcie', { clock: clk, ports: {}, deps: { mem: view }, cfg: resolveConfig({}) });
  const port = pcie.port('client');
  const seen = new Set<DmaReq>();
  const push = port.req.push.bind(port.req);
  port.req.push = (r: DmaReq): void => {
    seen.add(r);
    push(r);
  };
  const h = new Movers(sim, clk, port);
  const segsOf: PhysSegment[][] = [];
  const released: number[] = [];
  jobs.forEach((j, k) => {
    const m = new DmaMover(port, undefined, k);
    h.movers.push(m);
    let at = REGION * (k + 1);
    const segs = j.lens.map((length) => {
      const s = { pa: at, length };
      at += length + j.gap;
      return s;
    });
    segsOf.push(segs);
    if (j.gather) {
      for (const s of segs) mem.write(s.pa, bytesAt(s.pa, s.length));
      m.gather(segs);
    } else {
      const total = j.lens.reduce((a, b) => a + b, 0);
      m.scatter(segs, bytesAt(k * 7919, total));
    }
  });
  // every write issued, then each scatter's fence hold goes once its writes have landed
  sim.runUntil(30_000_000); // 30 us: 6 movers x 36 KB at PCIe speed take under 25
  jobs.forEach((j, k) => {
    if (!j.gather) h.movers[k].releaseWhenLanded({ release: (t) => released.push(t) }, k);
  });
  sim.runUntil(40_000_000);
  jobs.forEach((j, k) => {
    const m = h.movers[k];
    expect(m.done).toBe(true);
    const segs = segsOf[k];
    if (j.gather) {
      const want = new Uint8Array(m.data.length);
      let o = 0;
      for (const s of segs) {
        want.set(bytesAt(s.pa, s.length), o);
        o += s.length;
      }
      expect(firstDiff(m.data, want)).toBe(-1);
    } else {
      const data = bytesAt(k * 7919, j.lens.reduce((a, b) => a + b, 0));
      let o = 0;
      for (const s of segs) {
        expect(firstDiff(mem.read(s.pa, s.length), data.subarray(o, o + s.length))).toBe(-1);
        o += s.length;
      }
    }
  });
  // each scatter's hold released once, by its own mover
  expect(released.sort((a, b) => a - b)).toEqual(jobs.flatMap((j, k) => (j.gather ? [] : [k])));
  expect(seen.size).toBeLessThanOrEqual(port.req.capacity + 1);
}

const job = fc.record({
  gather: fc.boolean(),
  lens: fc.array(fc.integer({ min: 1, max: 9000 }), { minLength: 1, maxLength: 4 }),
  gap: fc.integer({ min: 0, max: 5000 }),
});

describe('DMA movers sharing a port', () => {
  it('each mover gets its own bytes, completions and landed writes; the port reuses at most its depth plus one requests', () => {
    fc.assert(fc.property(fc.array(job, { minLength: 1, maxLength: 6 }), (jobs) => run(jobs)), { numRuns: 40 });
  });

  it('two scatters and two gathers interleaved on one port', () => {
    run([
      { gather: false, lens: [5000, 3], gap: 100 },
      { gather: true, lens: [4096, 4096, 1], gap: 0 },
      { gather: false, lens: [8192], gap: 0 },
      { gather: true, lens: [7, 9000], gap: 4000 },
    ]);
  });
});
