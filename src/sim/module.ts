import type { Sim } from './sim.ts';
import type { Clock } from './clock.ts';
import { Probe, Reg, Signal } from './signal.ts';
import type { EnumType } from './enum_type.ts';
import { StatSet } from './stats.ts';
import type { Fifo } from './fifo.ts';

/**
 * How a module is wired (hca.ts does all the wiring): `new X(parent, name, { clock, ports, deps,
 * ...params })`.
 * - `clock`: the clock that ticks it; the constructor puts the module on it.
 * - `ports`: the FIFOs and DMA ports that other modules own and this one feeds or drains (it
 *   makes itself their producer or consumer, so a push or a pop wakes the right module).
 * - `deps`: narrow dependencies, each typed as only what the module calls (a QP table with
 *   getQp/hwError, the ICM writer): never the whole adapter.
 * Parameters (geometry, latencies, policies) sit beside them in the module's own options type.
 */
export interface WireOptions<P extends object, D extends object> {
  readonly clock: Clock;
  readonly ports: P;
  readonly deps: D;
}

/** The same shape for a module no clock ticks (firmware runs as a process): no `clock`. */
export interface UnclockedWireOptions<P extends object, D extends object> {
  readonly clock?: undefined;
  readonly ports: P;
  readonly deps: D;
}

/** `ports` or `deps` of a module that has none. */
export type Nothing = Readonly<Record<string, never>>;

/** A request / response pair of FIFOs: a port onto another module. */
export interface ReqResp<Q, R> {
  readonly req: Fifo<Q>;
  readonly resp: Fifo<R>;
}

/** Options of a traced register or signal. */
export interface SignalOptions {
  /** Initial value (default 0). */
  init?: number;
  /** Names for the values, shown in GTKWave through a translate filter. */
  enum?: EnumType;
}

/**
 * A hardware block with a hierarchical name (`tb.hca0.umr_engine`), children, traced
 * registers and statistics. A clocked module overrides `tick()`; it is ticked on every edge
 * of its clock while awake, and calls `sleep()` when it has nothing to do: a FIFO push, a DMA
 * response or software wakes it again. A module with no clock is a scope (a container).
 */
export class Module {
  readonly path: string;
  readonly children: Module[] = [];
  readonly signals: Signal[] = [];
  readonly stats = new StatSet();
  /**
   * Where this module's group goes in the .gtkw (lower first; equal ranks keep creation order).
   * Set it to show the pipeline in data-flow order when construction order differs.
   */
  waveRank = 0;
  /** FIFOs with latency that this module consumes: armed when it goes to sleep. */
  readonly latencyInputs: Fifo<unknown>[] = [];
  /** Some signal of this module is in the active trace (set by the tracer). */
  traced = false;
  /** Scheduling state, owned by the clock. */
  awake = false;
  inList = false;
  private clk: Clock | null = null;

  constructor(
    readonly sim: Sim,
    readonly parent: Module | null,
    readonly name: string,
  ) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new Error(`module name '${name}': use letters, digits and '_' only`);
    }
    this.path = parent ? `${parent.path}.${name}` : name;
    if (parent) {
      if (parent.children.some((c) => c.name === name)) throw new Error(`module ${this.path} declared twice`);
      parent.children.push(this);
    }
    sim.addModule(this);
  }

  /** The clock that ticks this module, or null for a plain scope. */
  get clock(): Clock | null {
    return this.clk;
  }

  /** Puts this module on `clock`. It starts asleep unless `awake` is true. */
  clockedBy(clock: Clock, awake = false): this {
    if (this.clk) throw new Error(`${this.path} already has a clock`);
    this.clk = clock;
    if (awake) this.wake();
    return this;
  }

  /** Called on every edge of the clock while awake: read `q`, write with `set`, never both ways. */
  tick(): void {}

  /**
   * For an FSM whose state changes at once (a Signal, not a Reg): runs `fsmStep()` until the state
   * stops changing or the module sleeps, at most 8 steps an edge, so a chain of transitions that
   * need no input costs one edge. A module using it overrides `fsmStep()`.
   */
  protected stepFsm(state: Signal): void {
    for (let i = 0; i < 8; i++) {
      const before = state.q;
      this.fsmStep();
      if (state.q === before || !this.awake) break;
    }
  }

  /** One FSM step (see stepFsm). */
  protected fsmStep(): void {}

  /**
   * Whether a module that pulsed a handshake this edge (`pulsed` != 0) must stay awake one more
   * edge to lower it: only when its signals are traced. Untraced, probes hold nothing, so it may
   * sleep at once; simulated behaviour is the same either way (test/driver/tracing_invariance).
   */
  protected keepsPulse(pulsed: number): boolean {
    return pulsed !== 0 && this.traced;
  }

  /**
   * Work in flight that no clock edge shows: a request waiting for an answer, a DMA or a message
   * on its way, a command running. `tb.quiesce()` runs until no module has any (and every clock
   * is idle). A module whose only work is its clock's ticks keeps the default.
   */
  hasWork(): boolean {
    return false;
  }

  /** Ticks start again from the next edge of the clock (strictly after now). */
  wake(): void {
    if (!this.awake && this.clk) this.clk.wakeModule(this);
  }

  /** No more ticks until woken. Takes effect after the current edge. */
  sleep(): void {
    if (this.awake) {
      this.awake = false;
      this.clk!.noteSleeper();
      // items still on their way through a latency FIFO must wake it when they arrive
      for (let i = 0; i < this.latencyInputs.length; i++) this.latencyInputs[i].armWake();
    }
  }

  /** Declares a clocked register of this module. */
  reg(name: string, width: number, opts: SignalOptions = {}): Reg {
    const r = new Reg(this, name, width, opts.init ?? 0, opts.enum ?? null);
    this.addSignal(r);
    return r;
  }

  /** Declares a trace-only register (see Probe): free when not traced; never read it in logic. */
  probe(name: string, width: number, opts: SignalOptions = {}): Reg {
    const r = new Probe(this, name, width, opts.init ?? 0, opts.enum ?? null);
    this.addSignal(r);
    return r;
  }

  /** Declares a signal that changes at once (commit-phase or software values). */
  signal(name: string, width: number, opts: SignalOptions = {}): Signal {
    const s = new Signal(this, name, width, opts.init ?? 0, opts.enum ?? null);
    this.addSignal(s);
    return s;
  }

  /** Declares an enumerated register whose width comes from its type. */
  stateReg(name: string, type: EnumType, init = 0): Reg {
    return this.reg(name, type.width, { init, enum: type });
  }

  /** This module and every module below it, depth first, in creation order. */
  *walk(): Generator<Module> {
    yield this;
    for (const c of this.children) yield* c.walk();
  }

  private addSignal(s: Signal): void {
    if (this.signals.some((x) => x.name === s.name) || this.children.some((c) => c.name === s.name)) {
      throw new Error(`signal ${s.path} declared twice`);
    }
    if (this.sim.tracer) throw new Error(`signal ${s.path} declared after tracing started: declare signals in constructors`);
    this.signals.push(s);
  }
}
