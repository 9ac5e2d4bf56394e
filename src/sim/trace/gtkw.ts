import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Signal } from '../signal.ts';
import type { EnumType } from '../enum_type.ts';

/** One group of the save file: a module and its traced signals in declaration order. */
export interface GtkwGroup {
  /** Group label: the module path without the top scope (`hca0.umr_engine`). */
  label: string;
  signals: readonly Signal[];
}

// Trace flag words of GTKWave save files: hex bus, binary bit, translated hex, group begin/end.
const F_BIT = '@28';
const F_HEX = '@22';
const F_ENUM = '@2022';
const F_GROUP_BEGIN = '@800200';
const F_GROUP_END = '@1000200';

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

/** The save file of a VCD: `<vcd without .vcd>.gtkw` beside it. */
export function gtkwPath(vcdPath: string): string {
  return join(dirname(vcdPath), `${basename(vcdPath).replace(/\.vcd$/, '')}.gtkw`);
}

/**
 * The zoom line (`*<zoom> <marker> <named markers>`), chosen so `span` ps (the whole run) fit
 * the wave pane of a 1600x900 window: HCA runs are bursts separated by long waits (firmware,
 * PCIe), so the first view shows where everything happens; zoom into a burst to read states. Measured with GTKWave 3.3.118 on a 1 ps timescale: it shows about
 * 2^-zoom / 200 ps per pixel, and the pane is about 950 pixels wide.
 */
function zoomLine(span: number, markers: readonly GtkwMarker[]): string {
  const zoom = -Math.ceil(Math.log2(Math.max(span, 1000) / 4.75));
  const named: string[] = [];
  for (let i = 0; i < MAX_MARKERS; i++) named.push(i < markers.length ? String(markers[i].time) : '-1');
  return `*${zoom.toFixed(6)} -1 ${named.join(' ')}`;
}

/** GTKWave's named markers: A..Z. */
export const MAX_MARKERS = 26;

/** A named marker: a time and the label GTKWave draws over it. */
export interface GtkwMarker {
  time: number;
  label: string;
}

/**
 * `[markername] <letter><label>` lines for markers already in time order (GTKWave 3.3 save files; checked with 3.3.118: the
 * label is drawn at the top of the marker line and listed under Markers).
 */
function markerNames(markers: readonly GtkwMarker[]): string[] {
  return markers.map((m, i) => `[markername] ${String.fromCharCode(65 + i)}${m.label}`);
}

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
 * Writes the .gtkw save file and the filter files of a traced run: clocks first, then one
 * group per module in creation (data-flow) order, buses in hex, enums through their filter.
 * Returns the paths written.
 */
export function writeGtkw(opts: {
  vcdPath: string;
  /** The folder of the translate filter files (created if missing). */
  filterDir: string;
  top: string;
  clocks: readonly Signal[];
  groups: readonly GtkwGroup[];
  strings: boolean;
  /** The traced window: the view opens on [startTime, endTime] (a windowed trace has nothing before). */
  startTime?: number;
  endTime: number;
  /** Named markers (at most 26 are written, A..Z in time order). */
  markers?: readonly GtkwMarker[];
}): string[] {
  const vcdAbs = resolve(opts.vcdPath);
  const filterDir = resolve(opts.filterDir);
  const markers = [...(opts.markers ?? [])].sort((a, b) => a.time - b.time).slice(0, MAX_MARKERS);
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
  // each clock under a comment naming its scope (adapters' clocks share a name)
  for (const c of opts.clocks) body.push('@200', `-${c.owner.path.slice(c.owner.path.indexOf('.') + 1)}`, ...sigLines(c));
  for (const g of opts.groups) {
    if (g.signals.length === 0) continue;
    const parts = g.signals[0].owner.path.split('.');
    for (let i = 1; i <= parts.length; i++) trees.add(parts.slice(0, i).join('.') + '.');
    body.push(F_GROUP_BEGIN, `-${g.label}`);
    for (const s of g.signals) body.push(...sigLines(s));
    body.push(F_GROUP_END, `-${g.label}`);
  }
  const head = [
    '[*]',
    '[*] mlx5sim waveform view: gtkwave <run>.vcd <run>.gtkw',
    '[*]',
    `[dumpfile] "${vcdAbs}"`,
    `[savefile] "${resolve(gtkwPath(vcdAbs))}"`,
    `[timestart] ${opts.startTime ?? 0}`,
    '[size] 1600 900',
    '[pos] -1 -1',
    zoomLine(opts.endTime - (opts.startTime ?? 0), markers),
    ...markerNames(markers),
    ...[...trees].map((t) => `[treeopen] ${t}`),
    '[sst_width] 260',
    '[signals_width] 360',
    '[sst_expanded] 1',
    '[sst_vpaned_height] 260',
  ];
  const p = gtkwPath(vcdAbs);
  writeFileSync(p, [...head, ...body, ''].join('\n'));
  written.unshift(p);
  return written;
}
