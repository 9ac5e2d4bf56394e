import type { Sim } from './sim.ts';
import type { Module } from './module.ts';
import type { EventTarget } from './event_queue.ts';
import type { Ps } from './time.ts';
import { checkPs } from './time.ts';
import type { Signal } from './signal.ts';

/**
 * A clock domain: it owns the list of its awake modules and ticks them on every rising edge.
 * A clock with no awake module schedules nothing, so an idle design costs no wall time and
 * simulated time jumps to the next event. Edges fall at `phase + k * period`.
 */
export class Clock implements EventTarget {
  /** Rising edges so far. */
  cycle = 0;
  /** Time of the last rising edge, or -1 before the first. */
  lastEdge = -1;
  private list: Module[] = [];
  private n = 0;
  private sleepers = 0;
  /** @internal Time of the next scheduled edge, or -1 when stopped (no awake module; kept by Sim, outside the heap). */
  nextAt = -1;
  /** @internal The edge's ordering key, as the event queue would have given it. */
  nextKey = 0;
  /** The clock as a traced signal: 1 from a rising edge to the half period, while running. */
  readonly clkSignal: Signal;
  readonly sim: Sim;

  constructor(
    /** The scope that shows the clock signal in the waves. */
    owner: Module,
    /** Signal name of the clock, e.g. `core_clk`. */
    readonly name: string,
    readonly period: Ps,
    readonly phase: Ps = 0,
  ) {
    const sim = owner.sim;
    this.sim = sim;
    checkPs(period, `clock ${name} period`);
    checkPs(phase, `clock ${name} phase`);
    if (period < 2) throw new RangeError(`clock ${name}: period must be at least 2 ps`);
    if (phase >= period) throw new RangeError(`clock ${name}: phase must be below the period`);
    this.clkSignal = owner.signal(name, 1);
    sim.addClock(this);
  }

  /** The first edge time strictly after `t`. */
  nextEdgeAfter(t: Ps): Ps {
    if (t < this.phase) return this.phase;
    return this.phase + (Math.floor((t - this.phase) / this.period) + 1) * this.period;
  }

  /** Number of awake modules. */
  get awakeCount(): number {
    return this.n - this.sleepers;
  }

  fire(): void {
    const sim = this.sim;
    this.cycle++;
    this.lastEdge = sim.now;
    const list = this.list;
    const n = this.n; // modules woken during this edge tick from the next one
    for (let i = 0; i < n; i++) list[i].tick();
    if (this.sleepers > 0) this.compact();
    if (this.clkSignal.tid >= 0) sim.tracer!.clockEdge(this.clkSignal, sim.now + (this.period >> 1));
    sim.scheduleClock(this, this.n > 0 ? sim.now + this.period : -1);
  }

  /** @internal Called by Module.wake. */
  wakeModule(m: Module): void {
    m.awake = true;
    if (m.inList) this.sleepers--;
    else {
      m.inList = true;
      this.list[this.n++] = m;
    }
    if (this.nextAt < 0) this.sim.scheduleClock(this, this.nextEdgeAfter(this.sim.now)); // stopped: start
  }

  /** @internal Called by Module.sleep. */
  noteSleeper(): void {
    this.sleepers++;
  }

  private compact(): void {
    const list = this.list;
    let w = 0;
    for (let r = 0; r < this.n; r++) {
      const m = list[r];
      if (m.awake) list[w++] = m;
      else m.inList = false;
    }
    for (let r = w; r < this.n; r++) list[r] = undefined as unknown as Module;
    this.n = w;
    this.sleepers = 0;
  }
}
