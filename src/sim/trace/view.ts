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

/**
 * Where the opening view starts when nothing names it: a little before the first marker or work
 * request (`anchor`), so the setup before it (firmware commands, ICM writes) is off screen.
 */
export function leadIn(anchor: Ps, end: Ps): Ps {
  return Math.max(0, Math.round(anchor - Math.max(LEAD_IN * (end - anchor), 10_000)));
}

/** A label and the time of its marker. */
export interface PlacedLabel {
  time: Ps;
  label: string;
}

/** Markers closer than this many pixels share one label (their letters, then their labels). */
export const CLUSTER_PX = 24;

/**
 * Labels that do not overlap in the view. GTKWave centres each marker's label on its line, all
 * on one row (a marker without a label shows its letter). So markers closer than `CLUSTER_PX`
 * share one label on the first (`B,C: RDMA WRITE / LOCAL_INV`), the others get a blank one (no
 * letter drawn over it; three or more: `B-D: ...`). A label keeps its text when it fits between its neighbours and the
 * pane's edges, is cut to `<letters>:<start>..` when only part fits, and shrinks to its letters
 * when not even that does. Markers off screen keep their text. `letters[i]` is marker i's letter
 * (A..Z). Returns the text to write for each marker, in the given order ('' = GTKWave's letter).
 */
export function fitLabels(markers: readonly PlacedLabel[], letters: readonly string[], view: OpeningView): string[] {
  const out = markers.map((m) => m.label);
  const xs = markers.map((m) => (m.time - view.start) / view.psPerPx);
  const onScreen = markers.map((_, i) => i).filter((i) => xs[i] >= 0 && xs[i] <= PANE_PX).sort((a, b) => xs[a] - xs[b] || a - b);
  const clusters: number[][] = [];
  for (const i of onScreen) {
    const last = clusters[clusters.length - 1];
    if (last && xs[i] - xs[last[last.length - 1]] < CLUSTER_PX) last.push(i);
    else clusters.push([i]);
  }
  const head = clusters.map((c) => c[0]);
  // letters run in time order, so a cluster's are consecutive: B / B,C / B-E
  const tags = clusters.map((c) => (c.length <= 2 ? c.map((i) => letters[i]).join(',') : `${letters[c[0]]}-${letters[c[c.length - 1]]}`));
  const texts = clusters.map((c) => (c.length === 1 ? out[c[0]] : `${tags[clusters.indexOf(c)]}: ${c.map((i) => out[i]).join(' / ')}`));
  // room in pixels: centred, so half a label each side; an edge leaves twice the distance to it
  const width = clusters.map((_, k) => Math.min(texts[k].length * LABEL_CHAR_PX, 2 * xs[head[k]], 2 * (PANE_PX - xs[head[k]])));
  // the narrowest a label gets before it is only letters: its tag, a character and '..'
  const least = tags.map((t) => (t.length + 4) * LABEL_CHAR_PX);
  for (let k = 0; k + 1 < clusters.length; k++) {
    const room = Math.max(2 * (xs[head[k + 1]] - xs[head[k]] - LABEL_GAP_PX), 0); // both widths
    if (width[k] + width[k + 1] <= room) continue;
    // the shorter keeps its whole text when the other still gets a cut one; else they halve it
    const [a, b] = width[k] <= width[k + 1] ? [k, k + 1] : [k + 1, k];
    if (room - width[a] >= least[b]) width[b] = room - width[a];
    else {
      // halve the room, but never widen a label past what it had (an edge's cap stays)
      width[k] = Math.min(width[k], room / 2);
      width[k + 1] = Math.min(width[k + 1], room / 2);
    }
  }
  clusters.forEach((c, k) => {
    const chars = Math.floor(width[k] / LABEL_CHAR_PX);
    const text = texts[k];
    const body = c.length === 1 ? text : text.slice(tags[k].length + 2);
    if (chars >= text.length) out[c[0]] = text;
    else if (chars >= tags[k].length + 4) out[c[0]] = `${tags[k]}:${body.slice(0, chars - tags[k].length - 3)}..`;
    else out[c[0]] = c.length > 1 && chars >= tags[k].length ? tags[k] : '';
    for (const i of c.slice(1)) out[i] = ' ';
  });
  return out;
}
