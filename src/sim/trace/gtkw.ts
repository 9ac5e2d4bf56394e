import { mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Signal } from '../signal.ts';
import type { EnumType } from '../enum_type.ts';
import { fitLabels, openingView, type OpeningView } from './view.ts';

/** One group of the save file: a module and its traced signals in declaration order. */
export interface GtkwGroup {
  /** Group label: the module path without the top scope (`hca0.umr_engine`). */
  label: string;
  signals: readonly Signal[];
  /** Some signal changed during the opening view: the group is shown open, before idle ones. */
  active?: boolean;
}

// Trace flag words of GTKWave save files (analyzer.h): hex bus, binary bit, translated hex,
// comment, group begin/end, and the closed (collapsed) group's begin/end.
const F_BIT = '@28';
const F_HEX = '@22';
const F_ENUM = '@2022';
const F_COMMENT = '@200';
const F_GROUP_BEGIN = '@800200';
const F_GROUP_END = '@1000200';
const F_CLOSED_BEGIN = '@c00200';
const F_CLOSED_END = '@1401200';

/**
 * The filter file of an enum type traced at `width` bits, in a filters folder: `<enum>.txt`
 * (`<enum>_w<width>.txt` when traced narrower or wider than the type). The text depends only on
 * the type and the width, so every run of a waves folder shares one file per type.
 */
export function filterPath(filterDir: string, type: EnumType, width = type.width): string {
  return join(filterDir, `${type.name}${width === type.width ? '' : `_w${width}`}.txt`);
}

/**
 * Writes `text` to `path` unless the file already holds it. Runs that share a filters folder
 * (a demo, parallel tests) write identical bytes; the rename makes each write atomic, so a
 * reader never sees half a file.
 */
function writeShared(path: string, text: string): void {
  try {
    if (readFileSync(path, 'utf8') === text) return;
  } catch {
    // missing: write it
  }
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
}

/** How every save file mlx5sim writes begins (so a stale one of ours is told from a user's). */
export const GTKW_HEADER = '[*]\n[*] mlx5sim waveform view: gtkwave <run>.gtkw';

/** The save file of a VCD: `<vcd without .vcd>.gtkw` beside it. */
export function gtkwPath(vcdPath: string): string {
  return join(dirname(vcdPath), `${basename(vcdPath).replace(/\.vcd$/, '')}.gtkw`);
}

/** The save file of one phase of a run: `<run>.<phase>.gtkw` beside the run's .gtkw. */
export function phaseGtkwPath(vcdPath: string, phase: string): string {
  return gtkwPath(vcdPath).replace(/\.gtkw$/, `.${phase}.gtkw`);
}

/** The phase views beside a run's .gtkw (`<run>.<phase>.gtkw`), sorted by name, as absolute paths. */
export function phaseViews(vcdPath: string): string[] {
  const run = basename(gtkwPath(vcdPath), '.gtkw');
  let names: string[];
  try {
    names = readdirSync(dirname(vcdPath));
  } catch {
    return [];
  }
  return names
    .filter((n) => n.startsWith(`${run}.`) && /^[A-Za-z0-9_-]+\.gtkw$/.test(n.slice(run.length + 1)))
    .sort()
    .map((n) => resolve(dirname(vcdPath), n));
}

/** GTKWave's named markers: A..Z. */
export const MAX_MARKERS = 26;
/** Markers listed in the legend group; a run marking more lists the first ones and a count. */
export const MAX_LISTED = 200;
/**
 * The legend opens by itself up to this many markers and this many characters a line; else it
 * starts collapsed: GTKWave widens the signal pane to its longest line, which would narrow the
 * wave pane the zoom is computed for (`PANE_PX`).
 */
const LEGEND_OPEN_MAX = 8;
const LEGEND_LINE_MAX = 38;

/** A named marker: a time and the label GTKWave draws over it. */
export interface GtkwMarker {
  time: number;
  label: string;
}

/**
 * The markers GTKWave gets as A..Z: those in the opening view first, then the others, each in
 * time order; at most 26. Returns indexes into `markers` (sorted by time), in time order.
 */
function pickNamed(markers: readonly GtkwMarker[], view: OpeningView): number[] {
  const inView = (m: GtkwMarker): boolean => m.time >= view.start && m.time <= view.end;
  const idx = markers.map((_, i) => i);
  const chosen = [...idx.filter((i) => inView(markers[i])), ...idx.filter((i) => !inView(markers[i]))].slice(0, MAX_MARKERS);
  return chosen.sort((a, b) => a - b);
}

/** A marker's time in the legend: microseconds to the ns, one unit for every line. */
const legendTime = (t: number): string => `${(t / 1e6).toFixed(3)} us`;

/** GTKWave's name for a traced signal: its dotted path, with `[msb:lsb]` for a bus. */
export function gtkwName(s: Signal): string {
  return s.width > 1 ? `${s.path}[${s.width - 1}:0]` : s.path;
}

/**
 * A translate filter file: one `<hex value> <name>` line per value, the hex form padded to the
 * signal's nibbles as GTKWave prints a hex bus (it compares the printed text, ignoring case).
 */
export function filterText(type: EnumType, width: number): string {
  const digits = Math.max(1, Math.ceil(width / 4));
  const lines = [`# ${type.name}: GTKWave translate filter written by mlx5sim`];
  for (const [v, n] of type.entries()) lines.push(`${v.toString(16).toUpperCase().padStart(digits, '0')} ${n}`);
  return lines.join('\n') + '\n';
}

/**
 * Writes the .gtkw save file and the filter files of a traced run. The view opens on `view`
 * (zoom and `[timestart]` from `openingView`), with the markers named A..Z and their labels cut to
 * fit it. The signal pane lists, top down: a legend of every marker (letter, time, full label),
 * the clocks, the groups of modules active in the view (open, in the order given: data flow),
 * then the idle ones (collapsed; their signals are still in the tree and a click opens them).
 * Buses are hex, enums go through their filter. Returns the paths written.
 */
export function writeGtkw(opts: {
  vcdPath: string;
  /** The folder of the translate filter files (created if missing). */
  filterDir: string;
  top: string;
  clocks: readonly Signal[];
  groups: readonly GtkwGroup[];
  strings: boolean;
  /** What the dump spans: [dumpStart, dumpEnd]. */
  dumpStart?: number;
  dumpEnd: number;
  /** The times to open on (default: the whole dump). */
  view?: { start: number; end: number };
  /** Markers in any order; every one is listed, 26 are named (A..Z). */
  markers?: readonly GtkwMarker[];
  /** Markers made but not passed (a long run's): counted in the legend. */
  unkept?: number;
  /** Where to write the save file (default `gtkwPath(vcdPath)`): a phase's view is another file. */
  savePath?: string;
  /**
   * A phase's view: `<name>: <modules>`, written in the header as `[*] phase <name>: ...`; its
   * legend of markers starts collapsed (its rows would push the phase's modules down).
   */
  phase?: string;
}): string[] {
  const vcdAbs = resolve(opts.vcdPath);
  const savePath = resolve(opts.savePath ?? gtkwPath(vcdAbs));
  const filterDir = resolve(opts.filterDir);
  const dumpStart = opts.dumpStart ?? 0;
  const view = openingView(dumpStart, opts.dumpEnd, opts.view ?? { start: dumpStart, end: opts.dumpEnd });
  const markers = [...(opts.markers ?? [])].sort((a, b) => a.time - b.time);
  const named = pickNamed(markers, view);
  const letterOf = new Map(named.map((m, k) => [m, String.fromCharCode(65 + k)]));
  const labels = fitLabels(
    named.map((i) => markers[i]),
    named.map((i) => letterOf.get(i)!),
    view,
  );
  const written: string[] = [];
  const filterIndex = new Map<string, number>();
  const filterFiles: string[] = [];
  const enumLine = (s: Signal): string[] => {
    const t = s.enumType!;
    const key = `${t.name}/${s.width}`;
    let idx = filterIndex.get(key);
    if (idx === undefined) {
      // one file per type; a type traced at two widths gets a file per width
      const p = filterPath(filterDir, t, s.width);
      if (filterFiles.length === 0) mkdirSync(filterDir, { recursive: true });
      writeShared(p, filterText(t, s.width));
      written.push(p);
      filterFiles.push(p);
      idx = filterFiles.length;
      filterIndex.set(key, idx);
    }
    return [`^${idx} ${filterFiles[idx - 1]}`, F_ENUM, gtkwName(s)];
  };
  const sigLines = (s: Signal): string[] => {
    if (s.enumType && !opts.strings) return enumLine(s);
    if (s.enumType && opts.strings) return [F_BIT, s.path]; // a string var: GTKWave shows its text
    return s.width === 1 ? [F_BIT, s.path] : [F_HEX, gtkwName(s)];
  };
  const trees = new Set<string>([`${opts.top}.`]);
  const body: string[] = [];
  if (markers.length > 0) {
    // the legend: every marker with its full label, even those cut on screen or past Z
    const total = markers.length + (opts.unkept ?? 0);
    const lines = markers.slice(0, MAX_LISTED).map((m, i) => `${letterOf.get(i) ?? ' '}  ${legendTime(m.time)}  ${m.label}`);
    if (total > MAX_LISTED) lines.push(`... and ${total - MAX_LISTED} more`);
    const open = opts.phase === undefined && total <= LEGEND_OPEN_MAX && lines.every((l) => l.length <= LEGEND_LINE_MAX);
    const title = `markers (${total})`;
    body.push(open ? F_GROUP_BEGIN : F_CLOSED_BEGIN, `-${title}`, F_COMMENT, ...lines.map((l) => `-${l}`));
    body.push(open ? F_GROUP_END : F_CLOSED_END, `-${title}`);
  }
  // each clock under a comment naming its scope (adapters' clocks share a name)
  for (const c of opts.clocks) body.push(F_COMMENT, `-${c.owner.path.slice(c.owner.path.indexOf('.') + 1)}`, ...sigLines(c));
  const shown = opts.groups.filter((g) => g.signals.length > 0);
  for (const g of [...shown.filter((x) => x.active !== false), ...shown.filter((x) => x.active === false)]) {
    const parts = g.signals[0].owner.path.split('.');
    for (let i = 1; i <= parts.length; i++) trees.add(parts.slice(0, i).join('.') + '.');
    const idle = g.active === false;
    body.push(idle ? F_CLOSED_BEGIN : F_GROUP_BEGIN, `-${g.label}`);
    for (const s of g.signals) body.push(...sigLines(s));
    body.push(idle ? F_CLOSED_END : F_GROUP_END, `-${g.label}`);
  }
  const zoom = [`*${view.zoom.toFixed(6)}`, '-1'];
  for (let k = 0; k < MAX_MARKERS; k++) zoom.push(k < named.length ? String(markers[named[k]].time) : '-1');
  const head = [
    GTKW_HEADER,
    ...(opts.phase === undefined ? [] : [`[*] phase ${opts.phase.replace(/\s+/g, ' ')}`]),
    '[*]',
    `[dumpfile] "${vcdAbs}"`,
    `[savefile] "${savePath}"`,
    `[timestart] ${view.start}`,
    '[size] 1600 900',
    '[pos] -1 -1',
    zoom.join(' '),
    // [markername] <letter><label>; no line leaves GTKWave drawing the letter, a blank hides it
    ...named.flatMap((_, k) => (labels[k] ? [`[markername] ${String.fromCharCode(65 + k)}${labels[k]}`] : [])),
    ...[...trees].map((t) => `[treeopen] ${t}`),
    '[sst_width] 260',
    '[signals_width] 360',
    '[sst_expanded] 1',
    '[sst_vpaned_height] 260',
  ];
  writeFileSync(savePath, [...head, ...body, ''].join('\n'));
  written.unshift(savePath);
  return written;
}
