/**
 * A sweep's plot: a Vega-Lite spec built from the experiment's PlotDef and its points (one line
 * per series, or grouped bars), with the published reference figures drawn on it, rendered to SVG in Node by
 * Vega's headless View (renderer 'none', no browser, no canvas). The same points give the same
 * bytes: nothing in the spec or the SVG depends on time or place.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { compile, type TopLevelSpec } from 'vega-lite';
import { parse, View } from 'vega';
import { formatBytes, type Experiment, type ParamValue, type PointLine, type Reference } from '../../experiment.ts';

/** The same as a Vega expression, for axis labels. */
const BYTES_LABEL = ['TiB', 'GiB', 'MiB', 'KiB'].reduceRight(
  (rest, unit, i) => {
    const scale = 2 ** (10 * (4 - i));
    return `datum.value >= ${scale} ? format(datum.value / ${scale}, '~g') + ' ${unit}' : ${rest}`;
  },
  "format(datum.value, '~g') + ' B'",
);

function formatParam(exp: Experiment, k: string, v: ParamValue): string {
  if (typeof v === 'number' && exp.axes[k]?.format === 'bytes') return `${k} ${formatBytes(v)}`;
  return `${k} ${String(v)}`;
}

/** The rows the plot draws: each point's params and figures, and its series' label. */
function rows(exp: Experiment, lines: readonly PointLine[]): Record<string, ParamValue>[] {
  // the series parameters some point has (a configuration axis may be absent from the grid)
  const series = (exp.plot.series ?? []).filter((k) => lines.some((l) => k in l.params));
  const x = exp.plot.x;
  return lines.map((l) => ({
    ...l.params,
    ...l.figures,
    series: series.length ? series.filter((k) => k in l.params).map((k) => formatParam(exp, k, l.params[k])).join(', ') : exp.name,
    // a bar's group on the nominal x axis
    ...(exp.plot.mark === 'bar' ? { group: x.label ? x.label(l) : String(l.params[x.field] ?? l.figures[x.field]) } : {}),
  }));
}

/** The distinct values of a column, in first-seen (grid) order: the order of bars and colours. */
function distinct(data: readonly Record<string, ParamValue>[], k: string): string[] {
  return [...new Set(data.map((r) => String(r[k])))];
}

/** The colour legend: under the plot, one entry a line; none for a single series (it would name nothing). */
function legendOf(data: readonly Record<string, ParamValue>[]): Record<string, unknown> | null {
  return distinct(data, 'series').length > 1 ? { orient: 'bottom', direction: 'vertical', labelLimit: 400 } : null;
}

/**
 * Grouped bars: a group per x value, a bar per series, each labelled with its y; the 'y'
 * references as dashed rules across the plot.
 */
function barLayers(exp: Experiment, data: Record<string, ParamValue>[], refs: readonly Reference[]): Record<string, unknown>[] {
  const p = exp.plot;
  const groups = distinct(data, 'group');
  const series = distinct(data, 'series');
  const x = { field: 'group', type: 'nominal' as const, sort: groups, axis: { title: p.x.title, labelAngle: 0, labelLimit: 220 } };
  const xOffset = { field: 'series', type: 'nominal' as const, sort: series };
  const yScale = p.y.log ? { type: 'log' as const } : { type: 'linear' as const, zero: p.y.zero ?? true };
  const y = { field: p.y.field, type: 'quantitative' as const, scale: yScale, axis: { title: p.y.title, grid: true } };
  const layer: Record<string, unknown>[] = [
    {
      data: { values: data },
      mark: { type: 'bar' },
      encoding: {
        x, xOffset, y,
        color: { field: 'series', type: 'nominal', sort: series, title: null, legend: legendOf(data) },
      },
    },
    {
      data: { values: data },
      mark: { type: 'text', baseline: 'bottom', dy: -2, fontSize: 10, color: '#222' },
      encoding: { x, xOffset, y, text: { field: p.y.field, type: 'quantitative', format: '.3~g' } },
    },
  ];
  const vy = refs.filter((r) => r.kind === 'y');
  if (vy.length) {
    layer.push({ data: { values: vy }, mark: { type: 'rule', color: '#444', strokeDash: [5, 4], strokeWidth: 1.2 }, encoding: { y: { field: 'y', type: 'quantitative' } } });
    layer.push({
      data: { values: vy },
      mark: { type: 'text', align: 'right', baseline: 'bottom', dy: -2, x: 'width', fontSize: 10, color: '#222' },
      encoding: { y: { field: 'y', type: 'quantitative' }, text: { field: 'label' } },
    });
  }
  return layer;
}

/**
 * An axis label's width as Vega reckons it with no canvas (0.8 x the 10 px font size a
 * character: it hides a label whose box meets the last one shown), and 4 px kept between two.
 */
const LABEL_CHAR_PX = 8;
const LABEL_GAP_PX = 4;
const PLOT_WIDTH = 560;

/** A tick's label as Vega writes it (thousands separated by commas). */
function tickText(v: number): string {
  return Number.isInteger(v) ? String(v).replace(/\B(?=(\d{3})+(?!\d))/g, ',') : String(v);
}

/** Bits from the highest to the lowest set bit: 512 has 1, 768 2, 640 3, 60 4 (the rounder, the fewer). */
function significantBits(v: number): number {
  if (!Number.isSafeInteger(v) || v <= 0) return 64;
  let n = v;
  while (n % 2 === 0) n /= 2;
  return n.toString(2).length;
}

/**
 * Axis tick values, at most 12. On a byte axis the powers of two from below the smallest value to
 * above the largest (every 2nd, 3rd, ... power as needed). Otherwise the values that matter first
 * (the references' x: a cache's reach, a limit), then the grid's values, rounder ones first, each
 * kept only if its label clears the labels already kept on the drawn axis: a label Vega would
 * hide for overlap is a tick with no label, and one another renderer may draw anyway.
 */
function ticks(values: readonly number[], opts: { bytes: boolean; log: boolean; must: readonly number[] }): number[] {
  const xs = [...new Set(values)].sort((a, b) => a - b);
  if (opts.bytes && xs.length && xs[0] > 0) {
    const lo = Math.floor(Math.log2(xs[0]));
    const hi = Math.ceil(Math.log2(xs[xs.length - 1]));
    // labels level (ImageMagick places a rotated one elsewhere): every power of two whose
    // label clears its neighbours' ('256 MiB' is the widest)
    const perPower = PLOT_WIDTH / Math.max(1, hi - lo);
    const widest = Math.max(...xs.map((v) => formatBytes(2 ** Math.round(Math.log2(v))).replace('.00', '').length)) * LABEL_CHAR_PX;
    const step = Math.max(Math.ceil((hi - lo + 1) / 12), Math.ceil((widest + LABEL_GAP_PX) / perPower));
    const out: number[] = [];
    for (let e = lo; e <= hi; e += step) out.push(2 ** e);
    return out;
  }
  const all = [...new Set([...xs, ...opts.must])].filter((v) => !opts.log || v > 0).sort((a, b) => a - b);
  if (!all.length) return [];
  // where Vega draws a value: a log scale's domain is niced to powers of ten
  const f = opts.log ? Math.log10 : (v: number): number => v;
  const lo = opts.log ? Math.floor(f(all[0])) : all[0];
  const hi = opts.log ? Math.ceil(f(all[all.length - 1])) : all[all.length - 1];
  const px = (v: number): number => (hi > lo ? ((f(v) - lo) / (hi - lo)) * PLOT_WIDTH : 0);
  const width = (v: number): number => tickText(v).length * LABEL_CHAR_PX;
  const must = new Set(opts.must);
  const order = all
    .map((v, i) => ({ v, i, rank: must.has(v) ? 0 : significantBits(v) }))
    .sort((a, b) => a.rank - b.rank || a.i - b.i);
  const kept: number[] = [];
  for (const { v } of order) {
    if (kept.length === 12) break;
    if (kept.every((k) => Math.abs(px(v) - px(k)) >= (width(v) + width(k)) / 2 + LABEL_GAP_PX)) kept.push(v);
  }
  return kept.sort((a, b) => a - b);
}

/** A subtitle in lines of at most `width` characters. */
function wrap(text: string, width = 100): string[] {
  const lines: string[] = [];
  let cur = '';
  for (const w of text.split(' ')) {
    if (cur && cur.length + 1 + w.length > width) {
      lines.push(cur);
      cur = w;
    } else cur = cur ? `${cur} ${w}` : w;
  }
  if (cur) lines.push(cur);
  return lines;
}

/** The Vega-Lite spec of a sweep's plot. */
export function plotSpec(exp: Experiment, lines: readonly PointLine[]): TopLevelSpec {
  const p = exp.plot;
  // in grid order, however the lines came (a merge, a reader's own filter)
  const data = rows(exp, [...lines].sort((a, b) => a.index - b.index));
  const xs = data.map((r) => r[p.x.field]).filter((v): v is number => typeof v === 'number');
  const refs: Reference[] = p.references ? p.references(lines) : [];
  if (p.mark === 'bar') return frame(p, barLayers(exp, data, refs));
  const xScale = p.x.log ? { type: 'log' as const, base: p.x.bytes ? 2 : 10 } : { type: 'linear' as const };
  const yScale = p.y.log ? { type: 'log' as const } : { type: 'linear' as const, zero: p.y.zero ?? true };
  const must = refs.filter((r) => r.kind === 'x' || r.kind === 'point').map((r) => r.x);
  const tickValues = ticks(xs, { bytes: p.x.bytes === true, log: p.x.log === true, must });
  // a count (every value an integer) is labelled as one: 1, not 1.0
  const count = !p.x.bytes && tickValues.every((v) => Number.isInteger(v));
  const xAxis = {
    title: p.x.title,
    grid: true,
    values: tickValues,
    ...(p.x.bytes ? { labelExpr: BYTES_LABEL } : {}),
    ...(count ? { format: ',d' } : {}),
  };
  const x = { field: p.x.field, type: 'quantitative' as const, scale: xScale, axis: xAxis };
  const y = { field: p.y.field, type: 'quantitative' as const, scale: yScale, axis: { title: p.y.title, grid: true } };
  const layer: Record<string, unknown>[] = [
    {
      data: { values: data },
      mark: { type: 'line', point: { filled: true, size: 40 }, strokeWidth: 2 },
      encoding: {
        x, y,
        color: { field: 'series', type: 'nominal', title: null, legend: legendOf(data) },
      },
    },
  ];
  const vx = refs.filter((r) => r.kind === 'x');
  const vy = refs.filter((r) => r.kind === 'y');
  const pts = refs.filter((r) => r.kind === 'point');
  const refStyle = { color: '#444', strokeDash: [5, 4], strokeWidth: 1.2 };
  if (vx.length) {
    layer.push({ data: { values: vx }, mark: { type: 'rule', ...refStyle }, encoding: { x: { field: 'x', type: 'quantitative' } } });
    layer.push({
      data: { values: vx },
      mark: { type: 'text', align: 'left', baseline: 'top', dx: 3, dy: 3, y: 0, fontSize: 10, color: '#222' },
      encoding: { x: { field: 'x', type: 'quantitative' }, text: { field: 'label' } },
    });
  }
  if (vy.length) {
    layer.push({ data: { values: vy }, mark: { type: 'rule', ...refStyle }, encoding: { y: { field: 'y', type: 'quantitative' } } });
    layer.push({
      data: { values: vy },
      mark: { type: 'text', align: 'right', baseline: 'bottom', dy: -2, x: 'width', fontSize: 10, color: '#222' },
      encoding: { y: { field: 'y', type: 'quantitative' }, text: { field: 'label' } },
    });
  }
  if (pts.length) {
    layer.push({
      data: { values: pts },
      mark: { type: 'point', shape: 'diamond', filled: true, size: 90, color: 'black' },
      encoding: { x: { field: 'x', type: 'quantitative' }, y: { field: 'y', type: 'quantitative' } },
    });
    layer.push({
      data: { values: pts },
      // above and right of its diamond: a published point often sits on the measured line
      mark: { type: 'text', align: 'left', baseline: 'bottom', dx: 5, dy: -5, fontSize: 10, color: '#222' },
      encoding: { x: { field: 'x', type: 'quantitative' }, y: { field: 'y', type: 'quantitative' }, text: { field: 'label' } },
    });
  }
  return frame(p, layer);
}

/** The spec around the layers: title, the published source as subtitle, size, fonts. */
function frame(p: Experiment['plot'], layer: Record<string, unknown>[]): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: p.title, ...(p.source ? { subtitle: wrap(p.source) } : {}), anchor: 'start' },
    width: 560,
    height: 320,
    background: 'white',
    config: { font: 'sans-serif', axis: { labelFontSize: 10, titleFontSize: 11 }, legend: { labelFontSize: 10 } },
    layer,
  } as unknown as TopLevelSpec;
}

/** The shapes and text of Vega's SVG. */
const MARK_TAG = /<(path|line|rect|circle|ellipse|polygon|polyline|text)\b([^>]*?)(\/?)>/g;
/** A text element Vega hid (a label dropped for overlap): opacity 0. */
const HIDDEN_TEXT = /<text\b[^>]*\sopacity="0"[^>]*>[\s\S]*?<\/text>/g;

/**
 * Vega's SVG made the same in every renderer: every shape and text says its own fill and stroke
 * (Vega leaves them to inherit `fill="none"` from the outer group, which ImageMagick's renderer
 * does not apply: it filled the legend's background black and closed every line into a filled
 * shape), and the labels Vega hid are left out (ImageMagick draws a text of opacity 0).
 */
export function portableSvg(svg: string): string {
  return svg.replace(HIDDEN_TEXT, '').replace(MARK_TAG, (_m, tag: string, attrs: string, close: string) => {
    let a = attrs;
    if (!/\sfill="/.test(a)) a += ' fill="none"';
    if (!/\sstroke="/.test(a)) a += ' stroke="none"';
    return `<${tag}${a}${close}>`;
  });
}

/** Renders the spec to SVG (headless), portable (portableSvg). */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    return portableSvg(await view.toSVG());
  } finally {
    view.finalize();
  }
}

/** Writes `plot.svg` (and its Vega-Lite spec, `plot.vl.json`) into a sweep's folder. */
export async function writePlot(dir: string, exp: Experiment, lines: readonly PointLine[]): Promise<string> {
  const spec = plotSpec(exp, lines);
  const svg = await renderSvg(spec);
  writeFileSync(join(dir, 'plot.vl.json'), JSON.stringify(spec, null, 2) + '\n');
  const file = join(dir, 'plot.svg');
  writeFileSync(file, svg.endsWith('\n') ? svg : svg + '\n');
  return file;
}
