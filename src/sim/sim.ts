import { EventQueue, PRIO_CLOCK, PRIO_NORMAL, type EventTarget } from './event_queue.ts';
import { checkPs, type Ps } from './time.ts';
import { Module } from './module.ts';
import type { Clock } from './clock.ts';
import type { Reg, Signal } from './signal.ts';
import { Rng } from './rng.ts';
import { microtask } from './microtask.ts';
import type { StatsJson } from './stats.ts';

/** What the tracer does with the kernel: it is told of every change of a traced signal. */
export interface TraceSink {
  /** Called before `s.q` takes the new value `v` (so the tracer can still see the old one). */
  change(s: Signal, v: number): void;
  /** A traced clock rose now and falls at `fallTime` (written lazily: no event, no cost to time). */
  clockEdge(s: Signal, fallTime: number): void;
  close(): void;
}

/** A process's wait, as a stall names it (Sim.waitingFor). */
export interface Waiter {
  describe(): string;
}

/** Something with next-state to commit after an edge (FIFOs). */
export interface Committable {
  commit(): void;
}

/** Resumes a process from a scheduled event (a delay). */
class Resume implements EventTarget {
  constructor(
    private readonly sim: Sim,
    private readonly resolve: () => void,
  ) {}
  fire(): void {
    this.resolve();
    this.sim.noteResume();
  }
}

/** A jump in time longer than this, with no clock running, is checked for a stall (1 us). */
const STALL_PROBE_PS = 1_000_000;

/*
 * How run() lets every continuation already queued run first (a drain). From inside a microtask
 * (any step after the first), a process.nextTick callback runs only once the microtask queue is
 * empty (Node drains all microtasks, including the ones they queue, before it looks at ticks
 * again), so every resumed process has reached its next await: no trip through the event loop
 * (a setImmediate costs ~3 us, most of a small verbs operation). The first drain of a run may
 * begin outside a microtask, where ticks run before microtasks: it uses setImmediate.
 */

/**
 * The simulation kernel: simulated time, the event queue, clock domains, the two-phase commit
 * of registers and FIFOs, and software processes.
 *
 * Processes are async functions resumed only by the scheduler: when an event resolves a
 * process's promise, the scheduler lets every pending continuation run (to its next await)
 * before it looks at the next event, so what a process does happens at the time it resumed.
 */
export class Sim {
  readonly queue = new EventQueue();
  /** Current simulated time in ps. */
  now: Ps = 0;
  readonly rng: Rng;
  /** The root scope, `tb`. */
  readonly top: Module;
  readonly clocks: Clock[] = [];
  tracer: TraceSink | null = null;

  private nextClock: Clock | null = null;
  private dirtyRegs: Reg[] = [];
  private nDirtyRegs = 0;
  private dirtyOther: Committable[] = [];
  private nDirtyOther = 0;
  private resumed = false;
  /**
   * @internal No process has resumed since the last drain (none is owed one): nothing is queued
   * to run before a continuation resumed now. (Fifo.commit uses it to skip a wake that would change nothing.)
   */
  get noResumePending(): boolean {
    return !this.resumed;
  }
  /** Inside settle's drain: processes run, no event fires. */
  private draining = false;
  /** Drains of the microtasks so far (each a resumption of the processes): for benches. */
  drains = 0;
  private running = false;
  private failure: unknown = null;
  private failed = false;
  /** What processes wait for now (`waitingFor`), in the order they began: named by a stall. */
  private readonly waits: Waiter[] = [];
  /**
   * The modules that may hold work (`hasWork` overridden), in tree order; null: to be listed
   * again. A stall check and `anyWork` (quiesce looks after every event) ask only these.
   */
  private workers: Module[] | null = null;

  constructor(opts: { seed?: number; top?: string } = {}) {
    this.rng = new Rng(opts.seed ?? 1);
    this.top = new Module(this, null, opts.top ?? 'tb');
  }

  /** Whether some module has work in flight now (`Module.hasWork`). */
  anyWork(): boolean {
    const w = this.workModules();
    for (let i = 0; i < w.length; i++) if (w[i].hasWork()) return true;
    return false;
  }

  /** @internal */
  addClock(c: Clock): void {
    this.clocks.push(c);
  }

  /**
   * @internal A clock's next edge, at `t` (or -1: stopped). Clock edges, about half of all
   * events, are kept beside the heap rather than in it: each takes its ordering key from the
   * queue as a push would, so the order of events is exactly what the heap alone gave.
   */
  scheduleClock(c: Clock, t: Ps): void {
    c.nextAt = t;
    if (t >= 0) c.nextKey = this.queue.takeKey(PRIO_CLOCK);
    let best: Clock | null = null;
    const cs = this.clocks;
    for (let i = 0; i < cs.length; i++) {
      const k = cs[i];
      if (k.nextAt >= 0 && (best === null || k.nextAt < best.nextAt || (k.nextAt === best.nextAt && k.nextKey < best.nextKey))) best = k;
    }
    this.nextClock = best;
  }

  /** Events pending: in the queue, and clocks' next edges. */
  get pending(): number {
    let n = this.queue.size;
    for (const c of this.clocks) if (c.nextAt >= 0) n++;
    return n;
  }

  /** Time of the next event (a clock edge or a queued event); Infinity when none. */
  nextEventTime(): Ps {
    const t = this.queue.peekTime();
    const c = this.nextClock;
    return c !== null && c.nextAt < t ? c.nextAt : t;
  }

  /** @internal A module was created: the list of those that may hold work is made again. */
  noteModule(): void {
    this.workers = null;
  }

  /**
   * The modules whose `hasWork` is their own (the others never have work), in tree order: a
   * stall check before every long jump in time (thousands per second of a run of firmware
   * commands) asks only these, without walking the tree.
   */
  workModules(): readonly Module[] {
    if (this.workers === null) {
      const base = Module.prototype.hasWork;
      this.workers = [];
      for (const m of this.top.walk()) if (m.hasWork !== base) this.workers.push(m);
    }
    return this.workers;
  }

  /** @internal A register written this cycle. */
  markDirty(r: Reg): void {
    this.dirtyRegs[this.nDirtyRegs++] = r;
  }

  /** @internal A FIFO (or other two-phase state) touched this cycle. */
  markDirtyOther(c: Committable): void {
    this.dirtyOther[this.nDirtyOther++] = c;
  }

  /**
   * @internal A process was resumed: let it run before the next event. Inside a drain
   * (`settle`) nothing is owed: a process resumed there runs to its next await before the drain
   * ends, as every microtask does, so another drain would find nothing to run.
   */
  noteResume(): void {
    if (!this.draining) this.resumed = true;
  }

  /** Schedules `target.fire(arg)` at absolute time `t` (>= now). */
  at(t: Ps, target: EventTarget, arg = 0, prio = PRIO_NORMAL): void {
    if (!(t >= this.now) || !Number.isSafeInteger(t)) {
      throw new RangeError(`cannot schedule at ${t} ps: now is ${this.now} ps and times are whole picoseconds`);
    }
    this.queue.push(t, prio, target, arg);
  }

  /** Schedules `target.fire(arg)` after `dt` ps. */
  after(dt: Ps, target: EventTarget, arg = 0): void {
    this.at(this.now + checkPs(dt, 'delay'), target, arg, PRIO_NORMAL);
  }

  /** Suspends the calling process for `dt` ps of simulated time. */
  delay(dt: Ps): Promise<void> {
    checkPs(dt, 'delay');
    this.checkInProcess('delay');
    return new Promise<void>((resolve) => this.queue.push(this.now + dt, PRIO_NORMAL, new Resume(this, resolve), 0));
  }

  /**
   * A process begins to wait for something `w` describes (e.g. "cq.wait: 1 completion on CQ 0x1
   * of adapter 0"); call `doneWaiting(w)` when the wait ends. A stalled run names every wait.
   * (`describe` is called only then: a wait costs no string.)
   */
  waitingFor(w: Waiter): void {
    this.waits.push(w);
  }

  /** The wait `w` ended. */
  doneWaiting(w: Waiter): void {
    const i = this.waits.lastIndexOf(w);
    if (i >= 0) this.waits.splice(i, 1);
  }

  /**
   * Nothing can wake the waiting processes: no clock runs, no module has work in flight
   * (`Module.hasWork`), and every pending event is a timer of a module without work (an ACK
   * timer armed for a message long acknowledged: it fires and does nothing). Software timers
   * (delays, timeouts, interrupt handlers) and every other event count as something that may
   * wake a process. Checked only before a long jump in time, so it costs nothing while busy.
   */
  private stalled(): boolean {
    if (this.nextClock !== null) return false;
    const ms = this.workModules();
    for (let i = 0; i < ms.length; i++) if (ms[i].hasWork()) return false;
    let live = false;
    this.queue.forEachPending((_t, target) => {
      if (!(target instanceof Module) || target.hasWork()) live = true;
    });
    return !live;
  }

  /** The stall error: what the processes wait for, and what is still scheduled. */
  private stallError(): Error {
    const waits = this.waits.length > 0 ? this.waits.map((w) => w.describe()).join('; ') : 'something no event will bring (no wait is named)';
    const timers: string[] = [];
    this.queue.forEachPending((t, target) => {
      timers.push(`${target instanceof Module ? target.path : 'a software timer'} at ${t} ps`);
    });
    timers.sort();
    const pending = timers.length === 0 ? 'no event is scheduled' : `only timers of idle modules are pending (${timers.slice(0, 4).join(', ')}${timers.length > 4 ? `, ${timers.length - 4} more` : ''})`;
    // modules holding work that no event will move (a deadlock inside the hardware, e.g. every
    // send-queue slot held by WQEs waiting for the UMR that needs one): named, so their waves
    // and statistics can be looked at
    const held: string[] = [];
    for (const m of this.top.walk()) if (m.hasWork()) held.push(m.path);
    if (held.length > 0) {
      return new Error(`simulation stalled at ${this.now} ps: the main process waits (${waits}), but nothing can move: no clock runs, ${pending}, and these modules hold work no event will advance: ${held.join(', ')}`);
    }
    return new Error(`simulation stalled at ${this.now} ps: the main process waits (${waits}), but nothing is in flight: no clock runs, no module has work, ${pending}`);
  }

  /** Whether a run is in progress (simulated time can pass). */
  get inRun(): boolean {
    return this.running;
  }

  /** Throws a clear error when simulated time cannot pass (no run in progress). */
  checkInProcess(what: string): void {
    if (!this.running) throw new Error(`${what}: simulated time only passes inside run(): call it from the process given to run()`);
  }

  /**
   * Runs `main` as the main process and the simulation until it finishes; returns its result.
   * Throws if a process fails, or if main waits for something that nothing scheduled will bring.
   */
  async run<T>(main: () => Promise<T>): Promise<T> {
    if (this.running) throw new Error('run() is already in progress: use spawn() for a concurrent process');
    this.running = true;
    let done = false;
    let result: T | undefined;
    let error: unknown = null;
    let threw = false;
    try {
      main().then(
        (v) => { done = true; result = v; },
        (e: unknown) => { done = true; threw = true; error = e; },
      );
      // the loop is a callback fired by the drain's tick, not an async function awaiting a
      // promise per drain: the same steps in the same order, without a promise, an async frame
      // and a microtask hop per drain (~6 drains per regMr)
      await new Promise<void>((resolve, reject) => {
        // the step runs as a microtask (as an await's continuation did), never inside the tick:
        // a tick queued from a tick runs before the microtasks (the resumed processes)
        const queueStep = (): void => microtask(step);
        const step = (): void => {
          try {
            this.draining = false;
            this.commit();
            if (!this.resumed) {
              if (done || this.failed) { resolve(); return; }
              if (this.queue.size === 0 && this.nextClock === null) throw this.stallError();
              if (this.runEvents(Infinity) < 0) throw this.stallError();
            }
            this.beginDrain();
            process.nextTick(queueStep);
          } catch (e) {
            reject(e);
          }
        };
        this.beginDrain();
        setImmediate(queueStep);
      });
    } finally {
      this.running = false;
    }
    if (this.failed) throw this.failure;
    if (threw) throw error;
    return result as T;
  }

  /** Starts a concurrent process (inside run). Its failure fails the run. */
  spawn<T>(fn: () => Promise<T>): Promise<T> {
    this.checkInProcess('spawn');
    const p = fn();
    p.catch((e: unknown) => {
      if (!this.failed) { this.failed = true; this.failure = e; }
    });
    // spawned from an event (an interrupt handler, not a process): its next steps are microtasks,
    // so the scheduler must yield to them before the next event (from a process, the drain
    // under way runs them: see noteResume)
    this.noteResume();
    return p;
  }

  /**
   * Runs events synchronously up to and including time `t` (no software processes): for
   * benches and hardware-only tests. Returns the number of events fired.
   */
  runUntil(t: Ps): number {
    const n = this.runEvents(t);
    if (this.now < t && Number.isFinite(t)) this.now = t;
    return n;
  }

  /**
   * A drain begins: resumed processes run to their next await (run()'s step is queued behind
   * them), then the step commits what they wrote, and drains again if one of them resumed another.
   */
  private beginDrain(): void {
    this.resumed = false;
    this.draining = true;
    this.drains++;
  }

  /**
   * Fires events in order until the queue is empty, the next is after `limit`, or a process
   * resumed. Returns the events fired, or -1 (run() only) when it stopped before a jump of more
   * than STALL_PROBE_PS because nothing could wake a process any more (see `stalled`).
   */
  private runEvents(limit: Ps): number {
    const q = this.queue;
    let fired = 0;
    const bounded = limit !== Infinity;
    let probedAt = -1;
    while (!this.resumed) {
      const ck = this.nextClock;
      // the queue's next time read once (Infinity when empty): a call left out of line by the
      // inliner returns a boxed number, and it was asked up to three times an event
      const qt = q.size === 0 ? Infinity : q.peekTime();
      if (ck !== null && (ck.nextAt < qt || (ck.nextAt === qt && ck.nextKey < q.peekKey()))) {
        const t = ck.nextAt;
        if (bounded && t > limit) break;
        this.now = t;
        fired++;
        ck.fire(); // reschedules itself (scheduleClock), which picks the next clock
        // Clock edges at one time all evaluate before any commits (the update phase); clock
        // keys sort before every other event's at equal time.
        const nk = this.nextClock;
        if (nk !== null && nk.nextAt === t) continue;
      } else {
        if (q.size === 0) break;
        if (bounded && qt > limit) break;
        // a long jump with no clock running: the only moment a run can be stuck behind stale timers
        if (!bounded && ck === null && qt - this.now > STALL_PROBE_PS && probedAt !== this.now) {
          probedAt = this.now;
          if (this.stalled()) return -1;
        }
        const s = q.pop();
        const t = qt; // the head's time (pop took the head)
        const arg = q.slotArg(s);
        const target = q.takeTarget(s);
        this.now = t;
        fired++;
        target.fire(arg);
      }
      if (this.nDirtyRegs !== 0 || this.nDirtyOther !== 0) this.commit();
    }
    return fired;
  }

  /** The update phase: FIFOs then registers take their next values. */
  private commit(): void {
    if (this.nDirtyOther !== 0) {
      const o = this.dirtyOther;
      // commits may dirty more (a FIFO waking a producer does not), so loop on the count
      for (let i = 0; i < this.nDirtyOther; i++) {
        o[i].commit();
        o[i] = undefined as unknown as Committable;
      }
      this.nDirtyOther = 0;
    }
    const regs = this.dirtyRegs;
    const n = this.nDirtyRegs;
    const tracer = this.tracer;
    for (let i = 0; i < n; i++) {
      const r = regs[i];
      r.dirty = false;
      if (r.d !== r.q) {
        if (r.tid >= 0) tracer!.change(r, r.d);
        r.q = r.d;
      }
    }
    this.nDirtyRegs = 0;
  }

  /** Statistics of every module that has some, keyed by path, in tree order. */
  stats(): Record<string, StatsJson> {
    const out: Record<string, StatsJson> = {};
    for (const m of this.top.walk()) if (!m.stats.empty) out[m.path] = m.stats.toJSON();
    return out;
  }
}
