/**
 * The committed plots draw the same in ImageMagick as in resvg (a browser-grade renderer): each
 * docs/experiments/*.svg rendered by both, compared pixel by pixel. ImageMagick's own SVG
 * renderer once filled the legend's background black and closed every line into a filled shape
 * (Vega left `fill="none"` to be inherited from the outer group). The text is left out of the
 * comparison: which font stands in for sans-serif differs between machines, not between a good
 * SVG and a bad one. Also the plots' axes: ticks where labels fit, integer ticks on a count, no
 * legend for a single series.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Resvg } from '@resvg/resvg-js';
import { describe, expect, it } from 'vitest';
import { plotSpec, portableSvg, renderSvg } from '../../src/cli/sweep/plot.ts';
import { findExperiment } from '../../src/cli/sweep/sweep.ts';
import type { PointLine } from '../../src/experiment.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dir = join(root, 'docs/experiments');
const svgs = readdirSync(dir).filter((f) => f.endsWith('.svg')).sort();

/** The SVG without its text (fonts differ by machine) and its width and height. */
function shapesOnly(svg: string): { svg: string; width: number; height: number } {
  const m = /<svg [^>]*width="(\d+)" height="(\d+)"/.exec(svg);
  if (!m) throw new Error('no width and height on the <svg> element');
  return { svg: svg.replace(/<text\b[\s\S]*?<\/text>/g, ''), width: Number(m[1]), height: Number(m[2]) };
}

/** RGB bytes of an ImageMagick render on white. */
function magick(svg: string): Buffer {
  return execFileSync('convert', ['-background', 'white', 'svg:-', '-flatten', '-depth', '8', 'rgb:-'], { input: svg, maxBuffer: 64 << 20 });
}

/** RGB bytes of a resvg render on white. */
function resvg(svg: string): Buffer {
  const rgba = new Resvg(svg, { background: 'white' }).render().pixels;
  const rgb = Buffer.alloc((rgba.length / 4) * 3);
  for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) rgb.set(rgba.subarray(i, i + 3), j);
  return rgb;
}

/** The share of pixels whose colour differs by more than anti-aliasing does (any channel by > 96). */
function differing(a: Buffer, b: Buffer): number {
  let n = 0;
  for (let i = 0; i < a.length; i += 3) {
    if (Math.abs(a[i] - b[i]) > 96 || Math.abs(a[i + 1] - b[i + 1]) > 96 || Math.abs(a[i + 2] - b[i + 2]) > 96) n++;
  }
  return n / (a.length / 3);
}

describe('plots render the same everywhere', () => {
  it('finds the committed plots', () => {
    expect(svgs).toEqual(['dereg-storm.svg', 'indirection.svg', 'mr-count.svg', 'mtt-cliff.svg', 'odp-latency.svg', 'odp-prefetch.svg', 'sge-vs-klm.svg']);
  });

  it.each(svgs)('%s: every shape and text carries its own fill and stroke; ImageMagick and resvg agree to 0.5% of pixels', (name) => {
    const svg = readFileSync(join(dir, name), 'utf8');
    // what the plot code writes now: already portable
    expect(portableSvg(svg)).toBe(svg);
    expect(svg).not.toMatch(/opacity="0"/);
    const { svg: shapes, width, height } = shapesOnly(svg);
    const a = magick(shapes);
    const b = resvg(shapes);
    expect(a.length).toBe(width * height * 3);
    expect(b.length).toBe(a.length);
    expect(differing(a, b)).toBeLessThan(0.005);
  });

  it('a shape left to inherit fill="none" is what ImageMagick got wrong: the same comparison fails on it', () => {
    const svg = readFileSync(join(dir, 'mr-count.svg'), 'utf8');
    // undo portableSvg's explicit paint on the paths: Vega's output as it was
    const bare = shapesOnly(svg.replace(/(<path\b[^>]*?) fill="none"/g, '$1').replace(/(<path\b[^>]*?) stroke="none"/g, '$1')).svg;
    expect(differing(magick(bare), resvg(bare))).toBeGreaterThan(0.005);
  });
});

/** A line of points as a sweep writes it. */
const pt = (experiment: string, index: number, params: PointLine['params'], figures: PointLine['figures']): PointLine => ({
  experiment, index, params, seed: 1, figures, stats: {}, wallSeconds: 0,
});

interface Axis { values?: number[]; format?: string }
const xAxisOf = (spec: unknown): Axis => (spec as { layer: { encoding: { x: { axis: Axis } } }[] }).layer[0].encoding.x.axis;
const legendOf = (spec: unknown): unknown => (spec as { layer: { encoding: { color: { legend: unknown } } }[] }).layer[0].encoding.color.legend;

describe('plot axes', () => {
  it("mr-count: the mkey cache's 512 is a labelled tick; no two ticks' labels meet; one series has no legend", async () => {
    const exp = findExperiment('mr-count');
    const mrs = [16, 64, 256, 384, 512, 640, 768, 1024, 2048, 4096];
    const spec = plotSpec(exp, mrs.map((n, i) => pt('mr-count', i, { mrs: n, reads: 20_000 }, { mReadsPerSec: n <= 512 ? 54 : 54 * (512 / n) })));
    const ticks = xAxisOf(spec).values ?? [];
    expect(ticks).toContain(512);
    expect(ticks).not.toContain(384); // 23 px from 512: Vega would hide one of the two labels
    expect(legendOf(spec)).toBeNull();
    // Vega hid no label: every tick in the SVG has its text
    const svg = await renderSvg(spec);
    for (const t of ticks) expect(svg).toContain(`>${t.toLocaleString('en-US')}</text>`);
  });

  it('sge-vs-klm: 60 and 64 are not both ticks (their labels merged); the SGE limit is', () => {
    const exp = findExperiment('sge-vs-klm');
    const pages = [1, 4, 16, 30, 31, 32, 60, 64, 128, 256];
    const lines = pages.flatMap((n, i) => ['sge', 'klm'].map((method, j) => pt('sge-vs-klm', 2 * i + j, { pages: n, method }, { gbps: 90, maxSge: 30 })));
    const spec = plotSpec(exp, lines);
    const ticks = xAxisOf(spec).values ?? [];
    expect(ticks).toContain(30);
    expect(ticks.includes(60) && ticks.includes(64)).toBe(false);
    expect(legendOf(spec)).not.toBeNull(); // two methods
  });

  it('indirection: integer ticks on the depth (a count), latency in us like its references', () => {
    const exp = findExperiment('indirection');
    const spec = plotSpec(exp, [0, 1, 2, 3, 4].map((d) => pt('indirection', d, { depth: d }, { coldExtraUs: 1.06 * (d + 1), coldExtraNs: 1060 * (d + 1) })));
    expect(xAxisOf(spec)).toMatchObject({ values: [0, 1, 2, 3, 4], format: ',d' });
    expect(exp.plot.y).toMatchObject({ field: 'coldExtraUs', title: expect.stringMatching(/\(us\)/) });
    const refs = exp.plot.references?.([]) ?? [];
    expect(refs.every((r) => r.kind !== 'point' || r.y < 10)).toBe(true); // in us, as the axis
  });
});
