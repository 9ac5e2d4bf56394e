/**
 * What a .gtkw shows, read back from the file alone (no simulator code): the time window GTKWave
 * opens on (`[timestart]` and the zoom, over the measured pane width), its groups (open or
 * collapsed) with their signals, and the translate filter each enum signal goes through.
 */
import { readFileSync } from 'node:fs';
import { PANE_PX } from '../../src/sim/trace/view.ts';

/** One traced line of the signal pane: its path (without `[msb:lsb]`), width, and filter file. */
export interface ViewSignal {
  path: string;
  width: number;
  /** The translate filter file (`^n file` before it, with the `@2022` flags), or null. */
  filter: string | null;
}

export interface ViewGroup {
  label: string;
  open: boolean;
  signals: ViewSignal[];
}

export interface GtkwView {
  /** The `[*] phase <name>: ...` header line's name, or null for a run's whole view. */
  phase: string | null;
  start: number;
  /** The last time on screen: `[timestart]` + the pane's pixels times the zoom's ps a pixel. */
  end: number;
  /** Every traced line, the clocks included, in file order. */
  signals: ViewSignal[];
  groups: ViewGroup[];
}

/** Parses a .gtkw written by mlx5sim (see src/sim/trace/gtkw.ts for the flag words). */
export function readGtkwView(file: string): GtkwView {
  const text = readFileSync(file, 'utf8');
  const start = Number(/^\[timestart\] (\d+)$/m.exec(text)![1]);
  const zoom = Number(/^\*(-?[\d.]+) /m.exec(text)![1]);
  const end = start + PANE_PX * (2 ** -zoom / 200);
  const phase = /^\[\*\] phase ([^:]+):/m.exec(text)?.[1] ?? null;
  const signals: ViewSignal[] = [];
  const groups: ViewGroup[] = [];
  let filter: string | null = null;
  let flags = '';
  let group: ViewGroup | null = null;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i];
    if (l.startsWith('^')) filter = l.slice(l.indexOf(' ') + 1);
    else if (l.startsWith('@')) {
      flags = l;
      if (l === '@800200' || l === '@c00200') {
        group = { label: lines[i + 1].slice(1), open: l === '@800200', signals: [] };
        groups.push(group);
      } else if (l === '@1000200' || l === '@1401200') group = null;
    } else if (/^[A-Za-z_]\w*\./.test(l) && !l.startsWith('[')) {
      const m = /^(.*?)(?:\[(\d+):0\])?$/.exec(l)!;
      const s: ViewSignal = { path: m[1], width: m[2] === undefined ? 1 : Number(m[2]) + 1, filter: flags === '@2022' ? filter : null };
      signals.push(s);
      group?.signals.push(s);
      filter = null;
    }
  }
  return { phase, start, end, signals, groups };
}

/** A filter file's names by value (`<hex> <name>` lines). */
export function readFilter(file: string): Map<number, string> {
  const out = new Map<number, string>();
  for (const l of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([0-9A-Fa-f]+) (\S+)$/.exec(l);
    if (m) out.set(parseInt(m[1], 16), m[2]);
  }
  return out;
}

/**
 * The share of a view's pane that its open groups' activity covers: from the first to the last
 * value change of their signals inside the pane, over the pane's span.
 */
export function activityShare(view: GtkwView, changes: readonly [number, string, number | null][]): number {
  const shown = new Set(view.groups.filter((g) => g.open).flatMap((g) => g.signals.map((s) => s.path)));
  let first = Infinity;
  let last = -Infinity;
  for (const [t, path] of changes) {
    if (t < view.start || t > view.end || !shown.has(path)) continue;
    first = Math.min(first, t);
    last = Math.max(last, t);
  }
  return last < first ? 0 : (last - first) / (view.end - view.start);
}
