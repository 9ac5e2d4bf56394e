/**
 * The testbed (API.md "Testbed and time"): one or more HCAs, each with its own host, on one
 * simulated timeline, optionally traced to a VCD. All verbs calls happen inside `run()`.
 */
import { CmdQueue } from './core/cmd.ts';
import { PHASE_NAME } from '../sim/trace/tracer.ts';
import { globToRegExp } from '../sim/trace/glob.ts';
import { Sim, Tracer, type EventTarget, type Ps, type StatsJson, type TraceOptions } from '../sim/index.ts';
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
import { WirePcap } from './trace/wire_pcap.ts';
import { TxLog } from './trace/txlog.ts';
import type { LinkTap } from '../rtl/transport/link.ts';
import type { DmaChecker } from '../rtl/memory/dma_check.ts';

/** One tap on a link for the pcap and the transaction log together (or the one given). */
function bothTaps<T>(a: LinkTap<T> | undefined, b: LinkTap<T> | undefined): LinkTap<T> | null {
  if (a === undefined || b === undefined) return a ?? b ?? null;
  return { sent: (...x) => (a.sent(...x), b.sent(...x)) };
}

/**
 * What a testbed traces and checks, each part independent: the waves (a VCD with its .gtkw, when
 * `vcd` is given: TraceOptions), the packets on the wire (`pcap`: a pcap file of RoCEv2 frames),
 * the life of every work request (`txlog`: JSON lines, and a Perfetto trace beside them), and
 * the DMA-ownership checker (`checkDma`). `{ checkDma: true }` alone checks without writing
 * anything.
 */
export type TestbedTrace = Omit<TraceOptions, 'vcd'> & {
  vcd?: string;
  /** A pcap file of every packet on the link, as RoCEv2 (Wireshark dissects it). */
  pcap?: string;
  /**
   * The transaction log, one JSON line per work request, firmware command and page fault
   * (`x.txlog.jsonl`); the same as a Chrome/Perfetto trace-event file beside it (`x.trace.json`).
   */
  txlog?: string;
  /**
   * The DMA-ownership checker: every DMA the adapters make is checked against who owns its
   * frames; a violation stops the run. Default `Testbed.checkDmaByDefault`.
   */
  checkDma?: boolean;
};

/** The testbed's `trace` option (the same type as TestbedTrace). */
export type TestbedTraceOptions = TestbedTrace;

/** Options of a testbed. */
export interface TestbedOptions {
  /** Every random choice derives from it (default 1). */
  seed?: number;
  /** Adapters, each with its own host; their ports are linked (default 1). */
  hcas?: number;
  /** A partial HcaConfig (clocks, caches, latencies); defaults in spec/timing.md. */
  config?: Partial<HcaConfig>;
  /**
   * Omit for no tracing (no cost). `checkDma` turns the DMA checker on or off (default:
   * `Testbed.checkDmaByDefault`: on under vitest and with `mlx5sim run --check-dma` or
   * `npm run demo`, off otherwise).
   */
  trace?: TestbedTrace;
  /** Device capabilities to turn off, e.g. `{ odp: false }`: a device without ON_DEMAND_PAGING. */
  caps?: HcaCapsOverride;
}

/**
 * quiesce's look, after the next event each time: the same event a delay to the next event's
 * time would be (the same time, the same place in the order), but the look runs in it, and the
 * waiting process resumes only once, when nothing is in flight any more (or on the error).
 */
class QuiesceProbe implements EventTarget {
  private resolve: () => void = () => {};
  private reject: (e: unknown) => void = () => {};

  constructor(
    private readonly sim: Sim,
    private readonly busy: () => boolean,
    /** The error for a next event at `next` (none scheduled, or past the timeout), or null. */
    private readonly failure: (next: Ps) => Error | null,
  ) {}

  /** Resolves when nothing is in flight (the caller found something in flight just now). */
  wait(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
      this.again(false);
    });
  }

  fire(): void {
    if (!this.busy()) {
      this.resolve();
      this.sim.noteResume();
      return;
    }
    this.again(true);
  }

  /** Looks again after the next event (or fails the wait). */
  private again(fromEvent: boolean): void {
    const now = this.sim.now;
    const next = this.sim.nextEventTime();
    const err = this.failure(next);
    if (err !== null) {
      this.reject(err);
      if (fromEvent) this.sim.noteResume();
      return;
    }
    this.sim.at(now + Math.max(1, next - now), this);
  }
}

export class Testbed {
  /**
   * Whether a testbed checks DMA ownership when its options do not say (`trace.checkDma`): on
   * when running under vitest (every test) or with MLX5SIM_CHECK_DMA=1 in the environment, and
   * where the command line turns it on (`--check-dma`, `demo`).
   */
  static checkDmaByDefault = typeof process !== 'undefined' && (process.env.VITEST !== undefined || process.env.MLX5SIM_CHECK_DMA === '1');
  /** @internal The simulation kernel under the testbed (the driver's processes run on it). */
  readonly sim: Sim;
  /** @internal The adapters, in order. */
  readonly hcas: readonly Hca[];
  readonly config: HcaConfig;
  private readonly tracer: Tracer | null;
  private readonly pcap: WirePcap | null;
  /** @internal The transaction log the driver tells of posts and polls; null when untraced. */
  readonly txlog: TxLog | null;
  private firstWork: Ps | null = null;
  private readonly phaseNames = new Set<string>();
  /** Every context opened, in order (a device-wide event finds its QP's context here). */
  private readonly contexts: Context[] = [];

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
    for (const k of ['vcd', 'pcap', 'txlog'] as const) {
      const v = t?.[k];
      if (v !== undefined && (typeof v !== 'string' || v === '')) throw new VerbsError('EINVAL', `Testbed: trace.${k} must be a file path, got ${shown(v)}`);
    }
    if (t !== undefined && t.vcd === undefined) {
      // an option of the waves with no VCD to write would be dropped without a word
      const waveOpt = Object.keys(t).find((k) => k !== 'vcd' && k !== 'pcap' && k !== 'txlog' && k !== 'checkDma');
      if (waveOpt !== undefined) throw new VerbsError('EINVAL', `Testbed: trace without vcd: trace.${waveOpt} is an option of the waves; name the VCD file to write, or give only pcap, txlog or checkDma`);
    }
    if (t?.vcd !== undefined) {
      const { checkDma: _, pcap: _p, txlog: _t, ...waves } = t;
      this.tracer = new Tracer(this.sim, { ...waves, vcd: t.vcd });
    } else this.tracer = null;
    this.pcap = t?.pcap !== undefined ? new WirePcap(t.pcap, () => this.sim.now, c.rnrTimerCode) : null;
    this.txlog = t?.txlog !== undefined ? new TxLog(t.txlog, () => this.sim.now) : null;
    if (this.txlog !== null) hcas.forEach((h, i) => this.txlog!.attach(h, i));
    toResponders.tap = bothTaps(this.pcap?.requests, this.txlog?.requests);
    toRequesters.tap = bothTaps(this.pcap?.responses, this.txlog?.responses);
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
    // a yes or no, from the modules that can hold work (Sim.anyWork): this look runs after every
    // event while quiescing (~10^5 times over the MR cache's pre-fill), so it runs inside an
    // event of its own (QuiesceProbe) rather than in this process resumed for each look; the
    // names only for errors
    if (!this.busy()) return;
    await new QuiesceProbe(this.sim, () => this.busy(), (next) => {
      if (next === Infinity) return new Error(`quiesce: at ${this.now} ps ${this.busyModules().join(', ')} still have work but no event is scheduled`);
      if (next > limit) return new Error(`quiesce: still in flight after ${opts.timeout ?? 1e12} ps: ${this.busyModules().join(', ')}`);
      return null;
    }).wait();
  }

  /** Some module has work in flight, some clock runs, or some command is not back (busyModules, as a yes or no). */
  private busy(): boolean {
    for (const c of this.sim.clocks) if (c.awakeCount > 0) return true;
    if (this.sim.anyWork()) return true;
    for (const h of this.hcas) if (CmdQueue.pendingOn(h) > 0) return true;
    return false;
  }

  /** Modules with work in flight now (and clocks with awake modules), by path. */
  busyModules(): string[] {
    const out: string[] = [];
    for (const c of this.sim.clocks) if (c.awakeCount > 0) out.push(c.clkSignal.path);
    for (const m of this.sim.workModules()) if (m.hasWork()) out.push(m.path);
    // commands the driver posted and has not had back (waiting for an entry, or for the EQE)
    for (const h of this.hcas) if (CmdQueue.pendingOn(h) > 0) out.push(`${h.path} command queue (driver)`);
    return out;
  }

  /** Simulated time in ps. */
  get now(): Ps {
    return this.sim.now;
  }

  /** The host (process address space) of adapter `i`. */
  host(i = 0): HostSpace {
    return this.adapter('host', i).host;
  }

  /** Adapter `i` (hardware view, for inspection and tests). */
  hca(i = 0): Hca {
    return this.adapter('hca', i);
  }

  /** Adapter `i`, or VerbsError EINVAL naming the call and the adapters there are. */
  private adapter(what: string, i: unknown): Hca {
    const h = typeof i === 'number' && Number.isSafeInteger(i) && i >= 0 ? this.hcas[i] : undefined;
    if (!h) throw new VerbsError('EINVAL', `${what}: no adapter ${shown(i)} (this testbed has ${this.hcas.length}: 0..${this.hcas.length - 1})`);
    return h;
  }

  /** ibv_open_device on adapter `i` (inside run: it queries the device's capabilities). */
  async openDevice(i = 0): Promise<Context> {
    const hca = this.adapter('openDevice', i);
    this.checkInRun('openDevice');
    if (CmdQueue.of(hca, this.sim).closed) throw new VerbsError('EIO', `openDevice: adapter ${i} was closed (tb.closeDevice)`);
    const ctx = new Context(this, hca, i);
    this.contexts.push(ctx);
    await ctx.queryDevice();
    // device load: the MR cache's PD, then its buckets filling in the background (mkey_pool.ts)
    await ctx.pool.load();
    return ctx;
  }

  /**
   * Lets adapter `i` go, as Linux removes an mlx5 device (main.c:1538-1567 mlx5_uninit_one):
   * every context on it is in error (DEVICE_FATAL; later verbs calls are VerbsError EIO) and the
   * MR cache stops; every PD, CQ, QP, MR and window the contexts made is destroyed by its own
   * command, newest first (uverbs_destroy_ufile_hw); then the MR cache's mkeys, the UMR QP, its CQ
   * and PD, the completion EQs, the event EQs and the command EQ; then TEARDOWN_HCA (the firmware
   * holds no object by then), MANAGE_PAGES HCA_RETURN_PAGES until every page the driver gave is
   * back and freed to the host, and DISABLE_HCA. `tb.stats()['tb.hcaN.pages']` then shows
   * returned equal to given and nothing held. Objects later calls name are destroyed (EINVAL).
   * A full MR cache (about 6,120 mkeys) takes about 78 ms of simulated time to destroy.
   * Resolves with the pages the firmware kept (0). Inside run.
   */
  async closeDevice(i = 0): Promise<number> {
    const hca = this.adapter('closeDevice', i);
    this.checkInRun('closeDevice');
    const ctxs = this.contexts.filter((c) => c.hca === hca);
    const cmdq = CmdQueue.of(hca, this.sim);
    if (ctxs.length > 0 && !cmdq.closed) {
      // mlx5_unregister_device (main.c:1548) removes mlx5_ib, its stages in reverse
      // (main.c:4540-4550): ib_unregister_device first, every context told DEVICE_FATAL and
      // its objects destroyed; then the MR cache, then the UMR QP, CQ and PD
      for (const c of ctxs) c.removed();
      for (const c of ctxs) await c.disassociate();
      await ctxs[0].pool.cleanup();
      await ctxs[0].umr.destroyResources();
      // mlx5_unload's mlx5_eq_table_destroy (main.c:1453; eq.c:1227-1237): completion EQs, then the async EQ
      for (const c of ctxs) await c.destroyEqs(true);
      for (const c of ctxs) await c.destroyEqs(false);
    }
    return cmdq.close();
  }

  /**
   * @internal The context of adapter `hca` that owns QP `qpn` (mlx5 looks a QP up device-wide:
   * odp.c odp_get_rsc), or undefined when no live QP has that number.
   */
  contextOfQp(hca: Hca, qpn: number): Context | undefined {
    for (const c of this.contexts) if (c.hca === hca && c.qps.has(qpn)) return c;
    return undefined;
  }

  /** @internal The context of adapter `hca` that owns CQ `cqn`, or undefined. */
  contextOfCq(hca: Hca, cqn: number): Context | undefined {
    for (const c of this.contexts) if (c.hca === hca && c.cqs.has(cqn)) return c;
    return undefined;
  }

  /** Statistics of every module, keyed by scope path. */
  stats(): Record<string, StatsJson> {
    return this.sim.stats();
  }

  /**
   * Marks this moment in the waves: the .gtkw gets a named marker with `label` (GTKWave draws
   * it over the traces and lists it under Markers; the .gtkw's legend lists every mark, and the
   * first 26 in the opening view are named A..Z). `{ view: 'start' }` / `{ view: 'end' }` make
   * the mark open or close the view the .gtkw opens on (by default it spans the run's phases,
   * `phase`; without phases, the run's work: from a little before the first mark or work request
   * to the end). Without tracing it does nothing.
   */
  mark(label: string, opts: { view?: 'start' | 'end' } = {}): void {
    this.tracer?.mark(label, this.sim.now, opts);
  }

  /**
   * Runs `body` as a named phase of the run (inside run), for the waves: the part of the work a
   * reader wants to look at (a REG_MR, a WRITE and its completion, a page fault) and the modules
   * it is about, as paths below `tb` or globs over them (`'hca0.umr_engine'`, `'hca*.sq'`, in the
   * order the reader should see them). A traced run then writes, beside `<run>.gtkw`, one
   * `<run>.<name>.gtkw` per phase: it opens on the span in which those modules' signals changed
   * during the phase (a little room each side; the activity fills about nine tenths of the wave
   * pane), with those modules first and open and the others collapsed below; and `<run>.gtkw`
   * itself spans the phases (from the first to the last), unless a mark or `trace.view` names its
   * times. So a scenario keeps its own checks (QUERY_MKEY, QUERY_QP) outside every phase, and
   * they stay out of the views. Returns what `body` returns; the phase ends when `body` settles
   * (also on a throw). Names: 1 to 64 letters, digits, `_`, `-`, each used once in a run; every
   * module pattern must name a module of the testbed (VerbsError EINVAL otherwise, traced or not).
   * Phases only mark time: they change nothing the simulation does.
   *
   * ```ts
   * const [wc] = await tb.phase('reg_mr', ['hca0.sq', 'hca0.umr_engine', 'hca0.cq_writer'], async () => {
   *   qp.postSend({ wrId: 1, opcode: 'REG_MR', mr, key: mr.rkey, access, signaled: true });
   *   return cq.wait(1);
   * });
   * ```
   */
  phase<T>(name: string, modules: readonly string[], body: () => Promise<T>): Promise<T> {
    if (typeof name !== 'string' || !PHASE_NAME.test(name)) throw new VerbsError('EINVAL', `phase: the name must be 1 to 64 letters, digits, '_' or '-' (it names a file), got ${shown(name)}`);
    if (this.phaseNames.has(name)) throw new VerbsError('EINVAL', `phase: '${name}' is already a phase of this run: give each phase its own name`);
    if (!Array.isArray(modules) || modules.length === 0) throw new VerbsError('EINVAL', `phase '${name}': modules must be a non-empty array of module paths below tb (e.g. 'hca0.sq'), got ${shown(modules)}`);
    const top = this.sim.top.name;
    const paths = [...this.sim.top.walk()].map((m) => m.path.slice(top.length + 1));
    for (const m of modules as unknown[]) {
      if (typeof m !== 'string' || m === '') throw new VerbsError('EINVAL', `phase '${name}': a module must be a path below tb such as 'hca0.sq', got ${shown(m)}`);
      const re = globToRegExp(m);
      if (!paths.some((p) => re.test(p))) throw new VerbsError('EINVAL', `phase '${name}': no module '${m}' in this testbed (its modules are paths such as 'hca0.sq', 'hca1.umr_engine', 'link_req')`);
    }
    if (typeof body !== 'function') throw new VerbsError('EINVAL', `phase '${name}': the body must be an async function, got ${shown(body)}`);
    this.checkInRun(`phase '${name}'`);
    this.phaseNames.add(name);
    return this.runPhase(name, modules, body);
  }

  /** The phase itself, traced or not alike (a body that throws rejects the promise either way). */
  private async runPhase<T>(name: string, modules: readonly string[], body: () => Promise<T>): Promise<T> {
    const h = this.tracer?.beginPhase(name, modules);
    try {
      return await body();
    } finally {
      if (h !== undefined) this.tracer?.endPhase(h);
    }
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

  /** Flushes and closes the trace files (VCD, .gtkw, filters, pcap). */
  async close(): Promise<void> {
    this.tracer?.close();
    this.pcap?.close();
    this.txlog?.close();
  }

  /** The files tracing wrote: the VCD and those beside it, the pcap (after close). */
  get traceFiles(): readonly string[] {
    return [...(this.tracer ? [this.tracer.opts.vcd, ...this.tracer.files] : []), ...(this.pcap ? [this.pcap.path] : []), ...(this.txlog ? [this.txlog.path, this.txlog.jsonPath] : [])];
  }
}
