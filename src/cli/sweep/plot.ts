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
        color: { field: 'series', type: 'nominal', sort: series, title: null, legend: { orient: 'bottom', direction: 'vertical', labelLimit: 400 } },
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
 * Axis tick values, at most about 12: on a byte axis the powers of two from below the smallest
 * value to above the largest (every 2nd, 3rd, ... power as needed), else the distinct values.
 */
function ticks(values: readonly number[], bytes: boolean): number[] {
  const xs = [...new Set(values)].sort((a, b) => a - b);
  if (bytes && xs.length && xs[0] > 0) {
    const lo = Math.floor(Math.log2(xs[0]));
    const hi = Math.ceil(Math.log2(xs[xs.length - 1]));
    const step = Math.ceil((hi - lo + 1) / 12);
    const out: number[] = [];
    for (let e = lo; e <= hi; e += step) out.push(2 ** e);
    return out;
  }
  const step = Math.ceil(xs.length / 12);
  return xs.filter((_, i) => i % step === 0);
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
  const xAxis = { title: p.x.title, grid: true, values: ticks(xs, p.x.bytes === true), ...(p.x.bytes ? { labelExpr: BYTES_LABEL, labelAngle: -30 } : {}) };
  const x = { field: p.x.field, type: 'quantitative' as const, scale: xScale, axis: xAxis };
  const y = { field: p.y.field, type: 'quantitative' as const, scale: yScale, axis: { title: p.y.title, grid: true } };
  const layer: Record<string, unknown>[] = [
    {
      data: { values: data },
      mark: { type: 'line', point: { filled: true, size: 40 }, strokeWidth: 2 },
      encoding: {
        x, y,
        color: { field: 'series', type: 'nominal', title: null, legend: { orient: 'bottom', direction: 'vertical', labelLimit: 400 } },
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

/** Renders the spec to SVG (headless). */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
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
