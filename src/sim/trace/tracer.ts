import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Sim, TraceSink } from '../sim.ts';
import type { Signal } from '../signal.ts';
import type { Module } from '../module.ts';
import { VcdWriter } from './vcd_writer.ts';
import { vcdId } from './vcd_ids.ts';
import { globToRegExp, scopeSelector } from './glob.ts';
import { GTKW_HEADER, MAX_MARKERS, phaseGtkwPath, phaseViews, writeGtkw, type GtkwGroup, type GtkwMarker } from './gtkw.ts';
import { PHASE_MIN_LEAD, leadIn, leadOut } from './view.ts';
import { checkPs, type Ps } from '../time.ts';

/** What to trace and where (API.md `trace`). */
export interface TraceOptions {
  /** The VCD file to write. */
  vcd: string;
  /** Also write `<run>.gtkw` beside the VCD, and the translate filter files (default true). */
  gtkw?: boolean;
  /**
   * The folder of the translate filter files (default: `filters/` beside the VCD). Runs that
   * share it share the files: `mlx5sim` writes `waves/<run>/<run>.vcd` with `waves/filters/`.
   */
  filters?: string;
  /** Globs over scope paths (default: all). A scope is selected with everything beneath it. */
  scopes?: readonly string[];
  /** Deepest scope level traced: 1 = the top scope only (default: all). */
  depth?: number;
  /** Time window in ps (default: the whole run). */
  start?: Ps;
  stop?: Ps;
  /**
   * The times the .gtkw opens on (default: the span of the run's phases, `beginPhase`; without
   * phases, from a little before the first marker or work request to the end; the whole run
   * without either). Marks can name them too (`mark`).
   */
  view?: { start?: Ps; end?: Ps };
  /** Enums as `$var string` with their names (GTKWave, Surfer); not readable by vcd-stream. */
  strings?: boolean;
  /** The `$version` text (default `mlx5sim`). */
  version?: string;
}

const enc = new TextEncoder();

/** A phase's name: it becomes part of a file name, `<run>.<phase>.gtkw`. */
export const PHASE_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * A phase of a run (see `Tracer.beginPhase`): its modules (group indexes, in the order named),
 * when it began and ended, and the first and last change of its modules' signals between.
 */
interface Phase {
  name: string;
  modules: readonly string[];
  groups: number[];
  /** 1 at the index of each of its groups: the change hook's membership test. */
  member: Uint8Array;
  start: Ps;
  end: Ps;
  first: Ps;
  last: Ps;
}
/** Marks kept for the .gtkw's names and legend; later ones are only counted (memory stays flat). */
const MAX_KEPT = 2000;

/**
 * Turns a run into a VCD: it selects signals by scope and depth when attached (signals not
 * selected keep tid -1 and cost one compare), writes the declarations, then one line per value
 * change inside the time window. The initial `$dumpvars` is written at the window start.
 */
export class Tracer implements TraceSink {
  private readonly w: VcdWriter;
  private readonly signals: Signal[] = [];
  private readonly ids: Uint8Array[] = [];
  private readonly max: number[] = [];
  private readonly vector: boolean[] = [];
  private readonly strText: (Map<number, Uint8Array> | null)[] = [];
  private readonly start: Ps;
  private readonly stop: Ps;
  private started = false;
  private lastTime = -1;
  private closed = false;
  private readonly clocks: Signal[] = [];
  /** Traced clocks that rose and have not yet been written falling: (signal, fall time). */
  private readonly falls: Signal[] = [];
  private readonly fallTimes: number[] = [];
  private readonly groups: GtkwGroup[] = [];
  private readonly markers: GtkwMarker[] = [];
  /** Marks inside the window (the first `MAX_KEPT` are kept for the .gtkw). */
  private markCount = 0;
  /**
   * The opening view (see `view.ts`): the first marker or work request inside the window
   * (`anchor`), and a start or end named by a mark or the options (-1: none).
   */
  private anchor = Infinity;
  private viewStart = -1;
  private viewEnd = -1;
  /**
   * Which groups changed during the view, known only at close, kept without a log of changes:
   * each group's last change, and a snapshot of those taken at some time T inside the view,
   * after which the first change of each group is noted. A group changed in [S, E] exactly when
   * its last change before T is at or after S, or its first after T is at or before E.
   */
  private groupOf = new Int32Array(0);
  private lastChange = new Float64Array(0);
  private lastAtSnap = new Float64Array(0);
  private firstAfterSnap = new Float64Array(0);
  private snapTime = -1;
  /** A snapshot due at this time (Infinity: none); taken by the first change at or after it. */
  private snapDue = Infinity;
  /** Files written besides the VCD (after close). */
  readonly files: string[] = [];
  /** Every phase begun, in order; `openPhases` those not yet ended (see `beginPhase`). */
  private readonly phases: Phase[] = [];
  private readonly openPhases: Phase[] = [];
  /** The first change of any phase's modules inside its phase (Infinity: none yet). */
  private phaseFirst = Infinity;

  constructor(
    private readonly sim: Sim,
    readonly opts: TraceOptions,
  ) {
    this.start = checkPs(opts.start ?? 0, 'trace start');
    this.stop = opts.stop === undefined ? Infinity : checkPs(opts.stop, 'trace stop');
    if (this.stop < this.start) throw new RangeError(`trace stop ${this.stop} is before start ${this.start}`);
    if (sim.tracer) throw new Error('a tracer is already attached to this simulation');
    // an untraced module does not keep its waves-only probes (pcie.ts, cq_writer.ts, ...): a
    // tracer attached later would start from stale values. (`start` delays what is written.)
    if (sim.now > 0) throw new Error(`a tracer is attached at time 0, before anything runs (now is ${sim.now} ps): use the trace option \`start\` to begin the waves later`);
    mkdirSync(dirname(opts.vcd), { recursive: true });
    this.w = new VcdWriter(opts.vcd);
    this.select();
    this.header();
    sim.tracer = this;
  }

  /** Number of traced signals. */
  get signalCount(): number {
    return this.signals.length;
  }

  /** Bytes of VCD written so far. */
  get bytes(): number {
    return this.w.bytes;
  }

  private readonly groupRank: number[] = [];

  private select(): void {
    const inScope = scopeSelector(this.opts.scopes);
    const depth = this.opts.depth ?? Infinity;
    const clockSignals = new Set(this.sim.clocks.map((c) => c.clkSignal));
    for (const m of this.sim.top.walk()) {
      const level = m.path.split('.').length;
      if (level > depth || !inScope(m.path)) continue;
      const mine: Signal[] = [];
      for (const s of m.signals) {
        this.add(s);
        if (clockSignals.has(s)) this.clocks.push(s);
        else mine.push(s);
      }
      const label = m.path.includes('.') ? m.path.slice(m.path.indexOf('.') + 1) : m.path;
      if (mine.length > 0) {
        this.groups.push({ label, signals: mine });
        this.groupRank.push(m.waveRank);
      }
    }
    // the save file keeps each top-level block together (an adapter, a link) in creation order,
    // and inside it shows the modules in data-flow order: by rank, then creation (stable)
    const blockOf = (g: GtkwGroup): string => g.signals[0].owner.path.split('.').slice(0, 2).join('.');
    const blocks: string[] = [];
    for (const g of this.groups) if (!blocks.includes(blockOf(g))) blocks.push(blockOf(g));
    const order = this.groups
      .map((g, i) => ({ g, b: blocks.indexOf(blockOf(g)), r: this.groupRank[i], i }))
      .sort((a, b) => a.b - b.b || a.r - b.r || a.i - b.i);
    this.groups.splice(0, this.groups.length, ...order.map((o) => o.g));
    this.groupOf = new Int32Array(this.signals.length).fill(-1);
    this.groups.forEach((g, i) => {
      for (const sig of g.signals) this.groupOf[sig.tid] = i;
    });
    this.lastChange = new Float64Array(this.groups.length).fill(-1);
    this.lastAtSnap = new Float64Array(this.groups.length);
    this.firstAfterSnap = new Float64Array(this.groups.length);
    const v = this.opts.view;
    if (v?.start !== undefined) this.namedStart(checkPs(v.start, 'trace view start'));
    if (v?.end !== undefined) this.namedEnd(checkPs(v.end, 'trace view end'));
  }

  private add(s: Signal): void {
    const tid = this.signals.length;
    s.tid = tid;
    s.owner.traced = true;
    this.signals.push(s);
    this.ids.push(enc.encode(vcdId(tid)));
    this.max.push(2 ** Math.min(s.width, 53) - 1);
    this.vector.push(s.width > 1);
    if (this.opts.strings && s.enumType) {
      const m = new Map<number, Uint8Array>();
      for (const [v, n] of s.enumType.entries()) m.set(v, enc.encode(n));
      this.strText.push(m);
    } else this.strText.push(null);
  }

  private header(): void {
    const w = this.w;
    w.text(`$date\n\tmlx5sim run (no wall-clock date: runs are reproducible)\n$end\n`);
    w.text(`$version\n\t${this.opts.version ?? 'mlx5sim'}\n$end\n`);
    w.text(`$timescale 1ps $end\n`);
    // scopes: nested, in tree order, only those holding traced signals below them
    const holds = new Map<Module, boolean>();
    const has = (m: Module): boolean => {
      let h = holds.get(m);
      if (h === undefined) {
        h = m.signals.some((s) => s.tid >= 0) || m.children.some(has);
        holds.set(m, h);
      }
      return h;
    };
    const emit = (m: Module): void => {
      if (!has(m)) return;
      w.text(`$scope module ${m.name} $end\n`);
      for (const s of m.signals) {
        if (s.tid < 0) continue;
        const id = vcdId(s.tid);
        if (this.strText[s.tid]) w.text(`$var string 1 ${id} ${s.name} $end\n`);
        else if (s.width > 1) w.text(`$var wire ${s.width} ${id} ${s.name} [${s.width - 1}:0] $end\n`);
        else w.text(`$var wire 1 ${id} ${s.name} $end\n`);
      }
      for (const c of m.children) emit(c);
      w.text(`$upscope $end\n`);
    };
    emit(this.sim.top);
    w.text(`$enddefinitions $end\n`);
  }

  private begin(): void {
    // clocks that fell before the window opened: only their value matters
    if (this.falls.length !== 0) this.writeFalls(this.start - 1);
    this.started = true;
    this.w.time(this.start);
    this.lastTime = this.start;
    this.w.text('$dumpvars\n');
    for (let tid = 0; tid < this.signals.length; tid++) this.value(tid, this.signals[tid].q);
    this.w.text('$end\n');
  }

  /** @internal Called by the kernel before a traced signal takes value `v`. */
  change(s: Signal, v: number): void {
    const t = this.sim.now;
    if (t < this.start || t > this.stop) return;
    if (!this.started) this.begin();
    if (this.falls.length !== 0) this.writeFalls(t);
    if (t !== this.lastTime) {
      this.w.time(t);
      this.lastTime = t;
    }
    const tid = s.tid;
    if (!(v >= 0 && v <= this.max[tid])) {
      throw new RangeError(`signal ${s.path}: value ${v} does not fit its ${s.width} bits`);
    }
    this.value(tid, v);
    if (t >= this.snapDue) this.snapshot();
    const g = this.groupOf[tid];
    if (g >= 0) {
      this.lastChange[g] = t;
      if (this.firstAfterSnap[g] === Infinity) this.firstAfterSnap[g] = t;
      if (this.openPhases.length !== 0) this.phaseChange(g, t);
    }
  }

  /** A change of group `g` at `t` while phases are open: the phases of `g` saw activity. */
  private phaseChange(g: number, t: Ps): void {
    for (let i = 0; i < this.openPhases.length; i++) {
      const p = this.openPhases[i];
      if (p.member[g] === 0) continue;
      if (p.first === Infinity) p.first = t;
      p.last = t;
      if (this.phaseFirst === Infinity) {
        this.phaseFirst = t;
        // the whole-run view then spans the phases: the activity snapshot must lie inside it
        if (this.viewStart < 0) this.snapshot();
      }
    }
  }

  /**
   * A phase of the run begins now: a part of the work (a registration, a write, a fault) and the
   * modules it is about, as paths below the top scope or globs over them (`hca0.umr_engine`,
   * `hca*.sq`). At close the tracer writes `<run>.<name>.gtkw` beside the .gtkw, opening on the
   * span in which the phase's modules' signals changed between `beginPhase` and `endPhase`, with
   * those modules first and open and the others collapsed below; and the run's own .gtkw, unless
   * a mark or `view` names its times, spans the phases (so the checks and setup around them are
   * off screen). Names are letters, digits, `_` and `-`, unique in a run. Returns the phase's
   * handle for `endPhase`.
   */
  beginPhase(name: string, modules: readonly string[]): number {
    if (!PHASE_NAME.test(name)) throw new RangeError(`phase name '${name}': 1 to 64 letters, digits, '_' or '-' (it names a file)`);
    if (this.phases.some((p) => p.name === name)) throw new RangeError(`phase '${name}' begun twice in one run: phases name files, give each its own name`);
    const groups: number[] = [];
    for (const m of modules) {
      const re = globToRegExp(m);
      this.groups.forEach((g, i) => {
        if (re.test(g.label) && !groups.includes(i)) groups.push(i);
      });
    }
    const member = new Uint8Array(this.groups.length);
    for (const g of groups) member[g] = 1;
    const p: Phase = { name, modules: [...modules], groups, member, start: this.sim.now, end: -1, first: Infinity, last: -1 };
    this.phases.push(p);
    if (!this.closed) this.openPhases.push(p);
    return this.phases.length - 1;
  }

  /** The phase `handle` (from `beginPhase`) ends now. Ending it twice is a no-op. */
  endPhase(handle: number): void {
    const p = this.phases[handle];
    if (p === undefined || p.end >= 0) return;
    p.end = this.sim.now;
    const k = this.openPhases.indexOf(p);
    if (k >= 0) this.openPhases.splice(k, 1);
  }

  /** Runs `body` as the phase `name` of `modules` (`beginPhase` ... `endPhase`, also on a throw). */
  async phase<T>(name: string, modules: readonly string[], body: () => Promise<T>): Promise<T> {
    const h = this.beginPhase(name, modules);
    try {
      return await body();
    } finally {
      this.endPhase(h);
    }
  }

  /**
   * From the first phase's begin to the last one's end (or its modules' last change, when later),
   * with the room a whole-run view gets each side; null: no phase inside the trace window.
   */
  private phaseHull(end: Ps): { start: Ps; end: Ps } | null {
    let first = Infinity;
    let last = -1;
    for (const p of this.phases) {
      if (this.phaseWindow(p, end) === null) continue;
      first = Math.min(first, Math.max(p.start, this.start));
      last = Math.max(last, p.end >= 0 ? Math.min(p.end, end) : end, p.last);
    }
    if (last < 0) return null;
    return { start: Math.max(this.start, leadIn(first, last)), end: Math.min(leadOut(first, last), end) };
  }

  /** The times a phase's view opens on: its activity with a little room, or its whole span. */
  private phaseWindow(p: Phase, end: Ps): { start: Ps; end: Ps } | null {
    const pEnd = p.end >= 0 ? Math.min(p.end, end) : end;
    if (p.start > this.stop || pEnd < this.start) return null;
    if (p.first === Infinity) return { start: Math.max(p.start, this.start), end: pEnd };
    return { start: Math.max(this.start, leadIn(p.first, p.last, PHASE_MIN_LEAD)), end: Math.min(leadOut(p.first, p.last, PHASE_MIN_LEAD), end) };
  }

  /** Takes the activity snapshot now (see `lastAtSnap`). */
  private snapshot(): void {
    this.lastAtSnap.set(this.lastChange);
    this.firstAfterSnap.fill(Infinity);
    this.snapTime = this.sim.now;
    this.snapDue = Infinity;
  }

  /** Asks for a snapshot at a time at or after `t`: now if `t` has passed, else when it comes. */
  private snapshotBy(t: Ps): void {
    if (this.snapTime >= t) return;
    if (t <= this.sim.now) this.snapshot();
    else this.snapDue = Math.min(this.snapDue, t);
  }

  private inWindow(t: Ps): boolean {
    return !this.closed && t >= this.start && t <= this.stop;
  }

  /** The first marker or work request: the view opens a little before it (unless named). */
  private anchorAt(t: Ps): void {
    if (t >= this.anchor) return;
    this.anchor = t;
    if (this.snapTime < 0) this.snapshotBy(t);
  }

  private namedStart(t: Ps): void {
    this.viewStart = t;
    this.snapshotBy(t);
  }

  private namedEnd(t: Ps): void {
    this.viewEnd = t;
    if (this.snapTime < 0 && this.snapDue === Infinity) this.snapshotBy(t);
  }

  /**
   * Software posted work (the testbed calls it for the first work request): the opening view
   * starts a little before the first such moment, so the setup before it is off screen.
   */
  workPosted(): void {
    if (this.inWindow(this.sim.now)) this.anchorAt(this.sim.now);
  }

  /** @internal A traced clock rose now; its fall is written when time passes it. */
  clockEdge(s: Signal, fallTime: number): void {
    this.change(s, 1);
    s.q = 1;
    this.falls.push(s);
    this.fallTimes.push(fallTime);
  }

  /** Writes the falling edges due at or before `t`, in time order. */
  private writeFalls(t: number): void {
    for (;;) {
      let k = -1;
      for (let i = 0; i < this.falls.length; i++) {
        if (this.fallTimes[i] <= t && (k < 0 || this.fallTimes[i] < this.fallTimes[k])) k = i;
      }
      if (k < 0) return;
      const ft = this.fallTimes[k];
      const s = this.falls[k];
      this.falls.splice(k, 1);
      this.fallTimes.splice(k, 1);
      if (ft > this.stop) continue;
      if (ft >= this.start) {
        if (ft !== this.lastTime) {
          this.w.time(ft);
          this.lastTime = ft;
        }
        this.value(s.tid, 0);
      }
      s.q = 0;
    }
  }

  private value(tid: number, v: number): void {
    const st = this.strText[tid];
    if (st !== null) this.w.string(st.get(v) ?? enc.encode(`0x${v.toString(16)}`), this.ids[tid]);
    else if (this.vector[tid]) this.w.vector(v, this.ids[tid]);
    else this.w.scalar(v, this.ids[tid]);
  }

  /**
   * A named marker at `t` (default now) for the .gtkw: GTKWave shows it as a labelled line and
   * lists it under Markers, so a reader can jump to the moments a scenario calls out; the .gtkw
   * also lists every marker in a legend. The first 26 inside the opening view get the names A..Z.
   * `view: 'start'` / `'end'` makes the mark open or close the view the .gtkw opens on.
   */
  mark(label: string, t: Ps = this.sim.now, opts: { view?: 'start' | 'end' } = {}): void {
    if (!this.inWindow(t)) return;
    if (this.markCount++ < MAX_KEPT) this.markers.push({ time: t, label: label.replace(/\s+/g, ' ').trim() });
    if (opts.view === 'end') return this.namedEnd(t); // an end says nothing of where work starts
    if (opts.view === 'start') this.namedStart(t);
    this.anchorAt(t);
  }

  /** Marks inside the window past the 26 GTKWave names (A..Z): listed in the legend, not drawn. */
  get droppedMarkers(): number {
    return Math.max(0, this.markCount - MAX_MARKERS);
  }

  /** The view to open on, and whether each group changed during it. */
  private openingWindow(end: Ps): { start: Ps; end: Ps; active: boolean[] } {
    const workEnd = this.viewEnd >= 0 ? Math.min(this.viewEnd, end) : end;
    // phases, when the run has any, make the view: from the first one's begin to the last one's end
    const hull = this.phaseHull(end);
    const auto = hull ? hull.start : this.anchor === Infinity ? this.start : Math.max(this.start, leadIn(this.anchor, workEnd));
    const viewStart = this.viewStart >= 0 ? this.viewStart : auto;
    const viewEnd = this.viewEnd >= 0 ? Math.min(leadOut(viewStart, workEnd), end) : hull ? hull.end : end;
    if (this.snapTime < 0 || this.snapDue !== Infinity) this.snapshot(); // nothing changed since it was due
    const active = this.groups.map((_, g) => this.lastAtSnap[g] >= viewStart || this.firstAfterSnap[g] <= viewEnd);
    return { start: viewStart, end: viewEnd, active };
  }

  /** Ends the VCD at the last simulated time inside the window; writes the .gtkw and filters. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (!this.started) this.begin();
    const end = Math.min(this.sim.now, this.stop);
    this.writeFalls(end);
    if (end > this.lastTime) this.w.time(end);
    this.w.close();
    for (const s of this.signals) {
      s.tid = -1;
      s.owner.traced = false;
    }
    if (this.sim.tracer === this) this.sim.tracer = null;
    if (this.opts.gtkw !== false) {
      const view = this.openingWindow(end);
      const common = {
        vcdPath: this.opts.vcd,
        filterDir: this.opts.filters ?? join(dirname(this.opts.vcd), 'filters'),
        top: this.sim.top.name,
        clocks: this.clocks,
        strings: this.opts.strings === true,
        dumpStart: this.start,
        dumpEnd: end,
        markers: this.markers,
        unkept: this.markCount - this.markers.length,
      };
      this.files.push(...writeGtkw({ ...common, groups: this.groups.map((g, i) => ({ ...g, active: view.active[i] })), view }));
      for (const p of this.phases) {
        const w = this.phaseWindow(p, end);
        if (w === null) continue;
        // the phase's modules first, open, in the order it named them; the others collapsed
        const groups = [...p.groups.map((i) => ({ ...this.groups[i], active: true })), ...this.groups.filter((_, i) => p.member[i] === 0).map((g) => ({ ...g, active: false }))];
        const savePath = phaseGtkwPath(this.opts.vcd, p.name);
        const written = writeGtkw({ ...common, groups, view: w, savePath, phase: `${p.name}: ${p.modules.join(', ')}` });
        this.files.push(...written.filter((f) => !this.files.includes(f)));
      }
      // an earlier run's phase views that this run did not write would open on the wrong times
      // (only phase views of ours: `<run>.<x>.gtkw` may also be another run's own view)
      for (const f of phaseViews(this.opts.vcd)) {
        if (this.files.includes(f)) continue;
        const text = readFileSync(f, 'utf8');
        if (text.startsWith(`${GTKW_HEADER}\n[*] phase `)) rmSync(f);
      }
    }
  }
}
