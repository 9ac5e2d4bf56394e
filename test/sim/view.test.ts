/**
 * The opening view of a .gtkw (src/sim/trace/view.ts): GTKWave 3.3 honours `[timestart]` only
 * when the pane, from there, ends inside the dump; labels are centred on their markers on one
 * row, so the ones written must not overlap at the measured character width.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CLUSTER_PX, LABEL_CHAR_PX, PANE_PX, TAIL_SLACK, fitLabels, leadIn, openingView } from '../../src/sim/trace/view.ts';

const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

describe('opening view', () => {
  it('starts where asked and, from past the dump start, ends inside the dump even for a pane 3% wider', () => {
    fc.assert(
      fc.property(fc.nat(1e9), fc.nat(1e9), fc.nat(1e9), fc.integer({ min: 1000, max: 1e10 }), (d0, a, b, len) => {
        const dumpEnd = d0 + len;
        const [s, e] = [d0 + (a % len), d0 + (b % len)].sort((x, y) => x - y);
        const v = openingView(d0, dumpEnd, { start: s, end: e });
        expect(v.start).toBe(s);
        expect(2 ** -v.zoom / 200).toBeCloseTo(v.psPerPx, 6);
        if (s > d0) expect(v.start + PANE_PX * (1 + TAIL_SLACK) * v.psPerPx).toBeLessThanOrEqual(dumpEnd + 1e-6 * len);
        // shows what was asked, but for the slack GTKWave needs at the end
        expect(v.end).toBeGreaterThanOrEqual(Math.min(Math.max(e, s + 1000), s + (dumpEnd - s) * (1 - TAIL_SLACK)) - 1e-6 * len);
      }),
      { numRuns: 500 },
    );
  });

  it('from the dump start shows the whole wish with room; a late start leads in by 3% of the work (10 ns at least)', () => {
    const v = openingView(0, 1_000_000, { start: 0, end: 1_000_000 });
    expect(v.start).toBe(0);
    expect(v.end).toBeGreaterThan(1_000_000);
    expect(leadIn(1_000_000_000, 2_000_000_000)).toBe(970_000_000);
    expect(leadIn(50_000, 60_000)).toBe(40_000);
    expect(leadIn(5_000, 60_000)).toBe(0);
  });
});

/** What GTKWave draws for a written label: its text, or the marker's letter when empty. */
const drawnWidth = (text: string): number => (text === '' ? 1 : text.length) * LABEL_CHAR_PX;

describe('marker labels', () => {
  const arb = fc.record({
    start: fc.nat(1e6),
    psPerPx: fc.integer({ min: 1, max: 10_000 }),
    marks: fc.array(fc.record({ x: fc.integer({ min: -200, max: PANE_PX + 200 }), label: fc.string({ minLength: 1, maxLength: 40, unit: fc.constantFrom('a', 'W', ' ', '_', '1') }) }), { maxLength: 26 }),
  });

  it('never overlap on screen, stay inside the pane when they are text, and keep every off-screen label', () => {
    fc.assert(
      fc.property(arb, ({ start, psPerPx, marks }) => {
        const view = { start, end: start + PANE_PX * psPerPx, psPerPx, zoom: -Math.log2(psPerPx * 200) };
        const markers = marks.map((m) => ({ time: start + m.x * psPerPx, label: m.label }));
        const out = fitLabels(markers, LETTERS.split(''), view);
        expect(out.length).toBe(markers.length);
        const shown: { x: number; w: number }[] = [];
        markers.forEach((m, i) => {
          const x = marks[i].x;
          if (x < 0 || x > PANE_PX) return expect(out[i]).toBe(m.label);
          if (out[i] === ' ') return; // a blank: the marker shares a neighbour's label
          const ok = out[i] === m.label || out[i] === '' || /^[A-Z]([,-][A-Z])?(:.*\.\.)?$/.test(out[i]) || /^[A-Z][,-][A-Z]: /.test(out[i]);
          expect(ok, out[i]).toBe(true);
          if (out[i].length > 1) {
            expect(x - drawnWidth(out[i]) / 2).toBeGreaterThanOrEqual(-1e-9);
            expect(x + drawnWidth(out[i]) / 2).toBeLessThanOrEqual(PANE_PX + 1e-9);
          }
          shown.push({ x, w: drawnWidth(out[i]) });
        });
        shown.sort((a, b) => a.x - b.x);
        for (let k = 0; k + 1 < shown.length; k++) expect(shown[k].x + shown[k].w / 2).toBeLessThanOrEqual(shown[k + 1].x - shown[k + 1].w / 2 + 1e-9);
      }),
      { numRuns: 500 },
    );
  });

  it('markers a few pixels apart share one label, and so does a label its neighbour would cut short', () => {
    const psPerPx = 1000;
    const view = { start: 0, end: PANE_PX * psPerPx, psPerPx, zoom: 0 };
    const at = (x: number, label: string): { time: number; label: string } => ({ time: x * psPerPx, label });
    const fit = (d: number): string[] => fitLabels([at(100, 'REG_MR'), at(500, 'RDMA WRITE'), at(502, 'LOCAL_INV'), at(d, 'WRITE refused'), at(800, 'flushed')], LETTERS.split(''), view);
    // 120 px after the pair there is room for both labels whole
    expect(fit(620)).toEqual(['REG_MR', 'B,C: RDMA WRITE / LOCAL_INV', ' ', 'WRITE refused', 'flushed']);
    // 70 px after it, the pair's label would be cut to 8 characters: the three share one
    expect(fit(570)).toEqual(['REG_MR', 'B-D: RDMA WRITE / LOCAL_INV / WRITE refused', ' ', ' ', 'flushed']);
    // room for everything: the cluster's label names both
    const wide = fitLabels([at(100, 'RDMA WRITE'), at(100 + CLUSTER_PX - 1, 'LOCAL_INV')], LETTERS.split(''), view);
    expect(wide).toEqual(['A,B: RDMA WRITE / LOCAL_INV', ' ']);
    // the pane's edge, not a neighbour, cuts a label at the very end: it stays alone
    expect(fitLabels([at(600, 'READ of the whole MR'), at(920, 'READ past the end')], LETTERS.split(''), view)).toEqual(['READ of the whole MR', 'B:REA..']);
  });
});
