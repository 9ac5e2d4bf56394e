/**
 * The testbed (API.md "Testbed and time"): one or more HCAs, each with its own host, on one
 * simulated timeline, optionally traced to a VCD. All verbs calls happen inside `run()`.
 */
import { Sim, Tracer, type Ps, type StatsJson, type TraceOptions } from '../sim/index.ts';
import { Hca } from '../rtl/hca.ts';
import { resolveConfig, type HcaConfig } from '../rtl/config.ts';
import type { HostSpace } from '../rtl/memory/host_space.ts';
import type { HcaCapsOverride } from '../rtl/firmware/hca_caps.ts';
import { Link } from '../rtl/transport/link.ts';
import { Context } from './context.ts';
import { VerbsError, checkObject, shown } from './verbs_error.ts';

/** A span of simulated time: a whole number of picoseconds, 0 .. 2^53 - 1. */
function checkPs(what: string, v: unknown): void {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new VerbsError('EINVAL', `${what} must be a whole, non-negative number of picoseconds, got ${shown(v)}`);
}
import type { RcRequest, RcResponse } from '../rtl/transport/rc_types.ts';
import type { DmaChecker } from '../rtl/memory/dma_check.ts';

/**
 * A testbed's `trace`: the waves (TraceOptions, with `vcd`), and `checkDma`: the DMA-ownership
 * checker (every DMA the adapters make checked against who owns its frames; a violation stops
 * the run). `{ checkDma: true }` alone checks without writing waves.
 */
export type TestbedTraceOptions = (TraceOptions & { checkDma?: boolean }) | { checkDma: boolean };

/** Options of a testbed. */
export interface TestbedOptions {
  /** Every random choice derives from it (default 1). */
  seed?: number;
  /** Adapters, each with its own host; their ports are linked (default 1). */
  hcas?: number;
  /** A partial HcaConfig (clocks, caches, latencies); defaults in spec/timing.md. */
  config?: Partial<HcaConfig>;
  /**
   * Omit for no waves (no cost). `checkDma` turns the DMA checker on or off (default:
   * `Testbed.checkDmaByDefault`: on under vitest and with `mlx5sim run --check-dma` or
   * `npm run demo`, off otherwise).
   */
  trace?: TestbedTraceOptions;
  /** Device capabilities to turn off, e.g. `{ odp: false }`: a device without ON_DEMAND_PAGING. */
  caps?: HcaCapsOverride;
}

export class Testbed {
  /**
   * Whether a testbed checks DMA ownership when its options do not say (`trace.checkDma`): on
   * when running under vitest (every test) or with MLX5SIM_CHECK_DMA=1 in the environment, and
   * where the command line turns it on (`--check-dma`, `demo`).
   */
  static checkDmaByDefault = typeof process !== 'undefined' && (process.env.VITEST !== undefined || process.env.MLX5SIM_CHECK_DMA === '1');
  readonly sim: Sim;
  readonly hcas: readonly Hca[];
  readonly config: HcaConfig;
  private readonly tracer: Tracer | null;
  private firstWork: Ps | null = null;

  constructor(opts: TestbedOptions = {}) {
    checkObject('Testbed: options', opts);
    // absent means the default; null is refused, never taken for it
    for (const k of ['seed', 'hcas', 'config', 'trace', 'caps'] as const) {
      if (opts[k] === null) throw new VerbsError('EINVAL', `Testbed: ${k} is null: leave it out for the default, or give one`);
    }
    for (const k of ['config', 'trace', 'caps'] as const) if (opts[k] !== undefined) checkObject(`Testbed: ${k}`, opts[k]);
    const seed = opts.seed ?? 1;
    // no coercion: NaN or "x" would silently become another seed, and another run
    if (typeof seed !== 'number' || !Number.isSafeInteger(seed)) throw new VerbsError('EINVAL', `Testbed: seed must be a safe integer, got ${shown(seed)}`);
    const n = opts.hcas ?? 1;
    if (!(Number.isInteger(n) && n >= 1 && n <= 16)) throw new VerbsError('EINVAL', `Testbed: hcas must be an integer in 1..16, got ${shown(n)}`);
    this.config = resolveConfig(opts.config ?? {});
    this.sim = new Sim({ seed });
    const hcas: Hca[] = [];
    for (let i = 0; i < n; i++) hcas.push(new Hca(this.sim, this.sim.top, `hca${i}`, this.config, opts.caps ? { caps: opts.caps } : {}));
    this.hcas = hcas;
    // the wire: requests to responders, answers back to requesters (loopback with one adapter)
    const c = this.config;
    const toResponders = new Link<RcRequest>(this.sim, this.sim.top, 'link_req', hcas.map((h) => h.responder.inbox), c.linkLatencyPs, c.linkGbps);
    const toRequesters = new Link<RcResponse>(this.sim, this.sim.top, 'link_resp', hcas.map((h) => h.requester.inbox), c.linkLatencyPs, c.linkGbps);
    for (const h of hcas) {
      h.requester.link = toResponders;
      h.responder.link = toRequesters;
    }
    const t = opts.trace;
    const checkDma = t?.checkDma ?? Testbed.checkDmaByDefault;
    if (typeof checkDma !== 'boolean') throw new VerbsError('EINVAL', `Testbed: trace.checkDma must be a boolean, got ${shown(checkDma)}`);
    this.checkers = checkDma ? hcas.map((h) => h.checkDma()) : [];
    // tracing starts once every module and signal exists
    let waves: TraceOptions | null = null;
    if (t !== undefined && 'vcd' in t) {
      const { checkDma: _, ...rest } = t;
      waves = rest;
    } else if (t !== undefined && Object.keys(t).some((k) => k !== 'checkDma')) {
      throw new VerbsError('EINVAL', `Testbed: trace without vcd: name the VCD file to write, or give only checkDma`);
    }
    this.tracer = waves ? new Tracer(this.sim, waves) : null;
  }

  /** The DMA checkers of the adapters (empty when the checker is off): their counts and violations. */
  readonly checkers: readonly DmaChecker[];

  /** Runs `main` as the main process and the simulation until it finishes; returns its result. */
  run<T>(main: () => Promise<T>): Promise<T> {
    return this.sim.run(main);
  }

  /** A concurrent process (call inside run); returns its promise. */
  spawn<T>(fn: () => Promise<T>): Promise<T> {
    if (typeof fn !== 'function') throw new VerbsError('EINVAL', `spawn: the process must be a function, got ${fn === null ? 'null' : typeof fn}`);
    this.checkInRun('spawn');
    return this.sim.spawn(() => {
      const p = fn();
      // a process is an async function: its promise is what the kernel waits on
      if (!(p instanceof Promise)) throw new VerbsError('EINVAL', `spawn: the process must return a promise (an async function), got ${shown(p)}`);
      return p;
    });
  }

  /** Lets `ps` of simulated time pass (inside run). */
  delay(ps: Ps): Promise<void> {
    checkPs('delay', ps);
    this.checkInRun('delay');
    return this.sim.delay(ps);
  }

  /**
   * Verbs and testbed calls that post work or let time pass need a run in progress (API.md):
   * outside one they throw VerbsError EINVAL naming the call, and nothing is posted.
   */
  checkInRun(what: string): void {
    if (!this.sim.inRun) throw new VerbsError('EINVAL', `${what}: called outside tb.run(): simulated time only passes inside run(), call it from the process given to run()`);
  }

  /**
   * Runs until no work is in flight anywhere: every clock idle, and no module with work waiting
   * for an answer, a DMA, a message or a command (`Module.hasWork`). Retry timers armed for work
   * already done do not count. Steps from event to event (no fixed sleeps); throws when work is
   * still in flight after `timeout` ps (default 1 s of simulated time), naming the modules.
   */
  async quiesce(opts: { timeout?: Ps } = {}): Promise<void> {
    checkObject('quiesce: options', opts);
    if (opts.timeout !== undefined) checkPs('quiesce: timeout', opts.timeout);
    this.checkInRun('quiesce');
    const limit = this.now + (opts.timeout ?? 1e12);
    for (;;) {
      const busy = this.busyModules();
      if (busy.length === 0) return;
      const next = this.sim.nextEventTime();
      if (next === Infinity) throw new Error(`quiesce: at ${this.now} ps ${busy.join(', ')} still have work but no event is scheduled`);
      if (next > limit) throw new Error(`quiesce: still in flight after ${opts.timeout ?? 1e12} ps: ${busy.join(', ')}`);
      await this.sim.delay(Math.max(1, next - this.now));
    }
  }

  /** Modules with work in flight now (and clocks with awake modules), by path. */
  busyModules(): string[] {
    const out: string[] = [];
    for (const c of this.sim.clocks) if (c.awakeCount > 0) out.push(c.clkSignal.path);
    for (const m of this.sim.top.walk()) if (m.hasWork()) out.push(m.path);
    return out;
  }

  /** Simulated time in ps. */
  get now(): Ps {
    return this.sim.now;
  }

  /** The host (process address space) of adapter `i`. */
  host(i = 0): HostSpace {
    return this.hca(i).host;
  }

  /** Adapter `i` (hardware view, for inspection and tests). */
  hca(i = 0): Hca {
    const h = this.hcas[i];
    if (!h) throw new RangeError(`Testbed: no adapter ${i} (this testbed has ${this.hcas.length})`);
    return h;
  }

  /** ibv_open_device on adapter `i` (inside run: it queries the device's capabilities). */
  async openDevice(i = 0): Promise<Context> {
    if (!(Number.isSafeInteger(i) && i >= 0 && i < this.hcas.length)) {
      throw new VerbsError('EINVAL', `openDevice: no adapter ${String(i)} (this testbed has ${this.hcas.length}: 0..${this.hcas.length - 1})`);
    }
    this.checkInRun('openDevice');
    const ctx = new Context(this, this.hca(i), i);
    await ctx.queryDevice();
    return ctx;
  }

  /** Statistics of every module, keyed by scope path. */
  stats(): Record<string, StatsJson> {
    return this.sim.stats();
  }

  /**
   * Marks this moment in the waves: the .gtkw gets a named marker with `label` (GTKWave draws
   * it over the traces and lists it under Markers; the .gtkw's legend lists every mark, and the
   * first 26 in the opening view are named A..Z). `{ view: 'start' }` / `{ view: 'end' }` make
   * the mark open or close the view the .gtkw opens on (by default it spans the run's work: from
   * a little before the first mark or work request to the end). Without tracing it does nothing.
   */
  mark(label: string, opts: { view?: 'start' | 'end' } = {}): void {
    this.tracer?.mark(label, this.sim.now, opts);
  }

  /**
   * When the application posted its first work request (postSend, postRecv, bindMw; the
   * driver's own UMRs for regMr do not count), or null: where the run's work begins.
   */
  get firstWorkAt(): Ps | null {
    return this.firstWork;
  }

  /** @internal The verbs took a work request: the waves open a little before the first. */
  workPosted(): void {
    if (this.firstWork !== null) return;
    this.firstWork = this.sim.now;
    this.tracer?.workPosted();
  }

  /** Flushes and closes the trace files (VCD, .gtkw, filters). */
  async close(): Promise<void> {
    this.tracer?.close();
  }

  /** Files the tracer wrote besides the VCD (after close). */
  get traceFiles(): readonly string[] {
    return this.tracer ? [this.tracer.opts.vcd, ...this.tracer.files] : [];
  }
}
