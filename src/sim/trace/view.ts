/**
 * The view a .gtkw opens on: where it starts, how far it zooms, and marker labels that fit it.
 * Pure functions over times and GTKWave 3.3's geometry (measured with 3.3.118, GTK3 build, at the
 * save file's `[size] 1600 900`, `[sst_width] 260`, `[signals_width] 360`).
 */
import type { Ps } from '../time.ts';

/** Width of the wave pane in pixels (measured: 940 at the sizes above). */
export const PANE_PX = 940;
/** Pixels per character of a marker label (GTKWave's smaller wave font: 4.9 measured; with room). */
export const LABEL_CHAR_PX = 5.5;
/** Pixels kept free between two labels. */
export const LABEL_GAP_PX = 8;
/** Share of the work span shown before the first marker or work request. */
export const LEAD_IN = 0.03;
/**
 * Share of the view held back from the end of the dump. GTKWave applies `[timestart]` only when
 * the pane, from there, ends inside the dump (wavewindow.c: `timestart <= last - pageinc`);
 * otherwise it opens at time 0. So a view that starts late ends a little before the dump does,
 * and a pane up to this much wider than `PANE_PX` still opens where it should.
 */
export const TAIL_SLACK = 0.03;

/** The opening view: `start` is the `[timestart]`, `psPerPx` gives the zoom. */
export interface OpeningView {
  start: Ps;
  /** Last time on screen (at `PANE_PX`). */
  end: Ps;
  psPerPx: number;
  /** GTKWave's zoom: it shows 2^-zoom / 200 time units per pixel (measured). */
  zoom: number;
}

/**
 * The view that shows [want.start, want.end] of a dump spanning [dumpStart, dumpEnd]. From the
 * dump's start the whole wish fits with a little room; from later on the pane must end inside the
 * dump, so the last `TAIL_SLACK` of a view that runs to the dump's end is left off screen.
 */
export function openingView(dumpStart: Ps, dumpEnd: Ps, want: { start: Ps; end: Ps }): OpeningView {
  const start = Math.min(Math.max(want.start, dumpStart), dumpEnd);
  const end = Math.min(Math.max(want.end, start), dumpEnd);
  let span = Math.max(end - start, 1000) * 1.02;
  if (start > dumpStart) span = Math.min(span, Math.max((dumpEnd - start) * (1 - TAIL_SLACK), 1));
  const psPerPx = span / PANE_PX;
  const zoom = -Math.log2(psPerPx * 200);
  return { start, end: start + psPerPx * PANE_PX, psPerPx, zoom };
}

/** Share of the view shown after a named end, so the marker there keeps room for its label. */
export const LEAD_OUT = 0.06;

/** The least room a view keeps before and after its subject (a phase's: `PHASE_MIN_LEAD`). */
export const MIN_LEAD = 10_000;
/** The least room around a phase's activity: a phase of a few cycles still fills most of its pane. */
export const PHASE_MIN_LEAD = 1_000;

/** Where a view named to end at `end` (a mark's time) stops: a little after it. */
export function leadOut(start: Ps, end: Ps, min = MIN_LEAD): Ps {
  return Math.round(end + Math.max(LEAD_OUT * (end - start), min));
}

/**
 * Where the opening view starts when nothing names it: a little before the first marker or work
 * request (`anchor`), so the setup before it (firmware commands, ICM writes) is off screen.
 */
export function leadIn(anchor: Ps, end: Ps, min = MIN_LEAD): Ps {
  return Math.max(0, Math.round(anchor - Math.max(LEAD_IN * (end - anchor), min)));
}

/** A label and the time of its marker. */
export interface PlacedLabel {
  time: Ps;
  label: string;
}

/** Markers closer than this many pixels share one label (their letters, then their labels). */
export const CLUSTER_PX = 24;
/** A label its neighbour would cut below this many characters joins that neighbour's instead. */
export const MIN_LABEL_CHARS = 10;

/** A group of markers sharing one label, centred on the first's line. */
interface Cluster {
  members: number[];
  /** Their letters: `B`, `B,C`, `B-E` (letters run in time order, so they are consecutive). */
  tag: string;
  text: string;
  /** Where its label is centred, in pixels from the pane's left edge. */
  x: number;
  /** The widest the pane's edges allow, in pixels. */
  edge: number;
}

function cluster(members: number[], labels: readonly string[], letters: readonly string[], xs: readonly number[]): Cluster {
  const tag = members.length <= 2 ? members.map((i) => letters[i]).join(',') : `${letters[members[0]]}-${letters[members[members.length - 1]]}`;
  const text = members.length === 1 ? labels[members[0]] : `${tag}: ${members.map((i) => labels[i]).join(' / ')}`;
  const x = xs[members[0]];
  return { members, tag, text, x, edge: Math.min(2 * x, 2 * (PANE_PX - x)) };
}

/**
 * Pixel widths for the clusters' labels, left to right: each pair of neighbours shares the room
 * between their lines; the shorter keeps its whole text when the other still gets a cut one
 * (its tag, a character and '..'), else they halve it.
 */
function allocate(cs: readonly Cluster[]): number[] {
  const width = cs.map((c) => Math.min(c.text.length * LABEL_CHAR_PX, c.edge));
  const least = cs.map((c) => (c.tag.length + 4) * LABEL_CHAR_PX);
  for (let k = 0; k + 1 < cs.length; k++) {
    const room = Math.max(2 * (cs[k + 1].x - cs[k].x - LABEL_GAP_PX), 0); // both widths
    if (width[k] + width[k + 1] <= room) continue;
    const [a, b] = width[k] <= width[k + 1] ? [k, k + 1] : [k + 1, k];
    if (room - width[a] >= least[b]) width[b] = room - width[a];
    else width[k] = width[k + 1] = room / 2;
  }
  return width;
}

/**
 * Labels that do not overlap in the view. GTKWave centres each marker's label on its line, all
 * on one row (a marker without a label shows its letter). So markers closer than `CLUSTER_PX`
 * share one label on the first (`B,C: RDMA WRITE / LOCAL_INV`; three or more `B-D: ...`), the
 * others get a blank one (no letter drawn over it), and a label its neighbour would cut below
 * `MIN_LABEL_CHARS` joins it. A label keeps its text when it fits between its neighbours and the
 * pane's edges, is cut to `<letters>:<start>..` when only part fits, and shrinks to its letters
 * when not even that does. Markers off screen keep their text. `letters[i]` is marker i's letter
 * (A..Z). Returns the text to write for each marker, in the given order ('' = GTKWave's letter).
 */
export function fitLabels(markers: readonly PlacedLabel[], letters: readonly string[], view: OpeningView): string[] {
  const labels = markers.map((m) => m.label);
  const out = [...labels];
  const xs = markers.map((m) => (m.time - view.start) / view.psPerPx);
  const onScreen = markers.map((_, i) => i).filter((i) => xs[i] >= 0 && xs[i] <= PANE_PX).sort((a, b) => xs[a] - xs[b] || a - b);
  const groups: number[][] = [];
  for (const i of onScreen) {
    const last = groups[groups.length - 1];
    if (last && xs[i] - xs[last[last.length - 1]] < CLUSTER_PX) last.push(i);
    else groups.push([i]);
  }
  let cs = groups.map((g) => cluster(g, labels, letters, xs));
  let width = allocate(cs);
  // a label its neighbour squeezes (not the pane's edge) joins that neighbour, the closer one
  for (;;) {
    const k = cs.findIndex((c, j) => width[j] < c.edge && width[j] < Math.min(MIN_LABEL_CHARS, c.text.length) * LABEL_CHAR_PX);
    if (k < 0 || cs.length < 2) break;
    const left = k > 0 ? cs[k].x - cs[k - 1].x : Infinity;
    const right = k + 1 < cs.length ? cs[k + 1].x - cs[k].x : Infinity;
    const j = left <= right ? k - 1 : k;
    cs = [...cs.slice(0, j), cluster([...cs[j].members, ...cs[j + 1].members], labels, letters, xs), ...cs.slice(j + 2)];
    width = allocate(cs);
  }
  cs.forEach((c, k) => {
    const chars = Math.floor(width[k] / LABEL_CHAR_PX);
    const body = c.members.length === 1 ? c.text : c.text.slice(c.tag.length + 2);
    if (chars >= c.text.length) out[c.members[0]] = c.text;
    else if (chars >= c.tag.length + 4) out[c.members[0]] = `${c.tag}:${body.slice(0, chars - c.tag.length - 3)}..`;
    else out[c.members[0]] = c.members.length > 1 && chars >= c.tag.length ? c.tag : '';
    for (const i of c.members.slice(1)) out[i] = ' ';
  });
  return out;
}
