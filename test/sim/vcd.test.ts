import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Module, Sim, Tracer, type Signal, type TraceOptions } from '../../src/sim/index.ts';
import { KernelDemo } from '../../scenarios/kernel_demo.ts';
import { readVcd, readVcdFile, type ParsedVcd } from '../support/vcd_read.ts';
import { tempDir } from '../support/tmp.ts';

const dir = tempDir('mlx5sim-vcd-');
let n = 0;
const tmp = (name: string): string => join(dir, `${name}-${n++}.vcd`);

/** Runs the example design traced; returns what the kernel reported to the tracer. */
function tracedRun(seed: number, items: number, opts: Partial<TraceOptions> = {}, until = 2_000_000) {
  const sim = new Sim({ seed });
  const demo = new KernelDemo(sim, items);
  const vcd = opts.vcd ?? tmp('run');
  const tracer = new Tracer(sim, { vcd, ...opts });
  const initial = new Map<string, number>();
  const traced: Signal[] = [];
  for (const m of sim.top.walk()) for (const s of m.signals) if (s.tid >= 0) { traced.push(s); initial.set(s.path, s.q); }
  const changes: [number, string, number][] = [];
  const orig = tracer.change.bind(tracer);
  tracer.change = (s: Signal, v: number): void => {
    changes.push([sim.now, s.path, v]);
    orig(s, v);
  };
  // clocks: the tracer writes the fall itself, half a period after the rise
  const origEdge = tracer.clockEdge.bind(tracer);
  tracer.clockEdge = (s: Signal, fall: number): void => {
    origEdge(s, fall);
    changes.push([fall, s.path, 0]);
  };
  sim.runUntil(until);
  tracer.close();
  const end = Math.min(sim.now, opts.stop ?? Infinity);
  const start = opts.start ?? 0;
  changes.sort((a, b) => a[0] - b[0]); // stable: falls join the changes at their time
  const inWindow = changes.filter(([t]) => t >= start && t <= end);
  changes.length = 0;
  changes.push(...inWindow);
  return { sim, demo, vcd, tracer, initial, changes, traced };
}

/** Signal values at every timestamp: apply changes in order; the last value at a time wins. */
function timeline(initial: Map<string, number>, changes: [number, string, number | null][], from = 0): Map<string, [number, number | null][]> {
  const out = new Map<string, [number, number | null][]>();
  for (const [p, v] of initial) out.set(p, [[from, v]]);
  for (const [t, p, v] of changes) {
    const h = out.get(p) ?? [];
    if (h.length && h[h.length - 1][0] === t) h[h.length - 1][1] = v;
    else h.push([t, v]);
    out.set(p, h);
  }
  // drop repeated values so both sides are in canonical form
  for (const [p, h] of out) out.set(p, h.filter((x, i) => i === 0 || x[1] !== h[i - 1][1]));
  return out;
}

function vcdTimeline(v: ParsedVcd): Map<string, [number, number | null][]> {
  return timeline(new Map(), v.changes);
}

describe('VCD tracing', () => {
  it('reads back with vcd-stream to exactly the values the simulation traced', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 1000 }), fc.integer({ min: 1, max: 40 }), async (seed, items) => {
        const r = tracedRun(seed, items);
        const v = await readVcdFile(r.vcd);
        expect(v.timescale).toBe('1ps');
        const want = timeline(r.initial, r.changes);
        const got = vcdTimeline(v);
        expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
        for (const [p, h] of want) expect(got.get(p), p).toEqual(h);
        // the design did its job (so the waves show real activity)
        expect(r.demo.consumer.sum.q).toBe(KernelDemo.expectedSum(seed, items));
      }),
      { numRuns: 15 },
    );
  });

  it('declares every scope of the run and ends at the last simulated time', async () => {
    const r = tracedRun(7, 10);
    const v = await readVcdFile(r.vcd);
    expect(v.scopes).toEqual(['tb', 'tb.demo', 'tb.demo.source', 'tb.demo.consumer']);
    expect(v.times[v.times.length - 1]).toBe(r.sim.now);
    expect(v.decls.find((d) => d.path === 'tb.demo.consumer.state')?.width).toBe(2);
    expect(v.decls.find((d) => d.path === 'tb.demo.source.data')?.width).toBe(32);
  });

  it('are byte-identical for the same seed, and differ for another seed', () => {
    const a = readFileSync(tracedRun(42, 30).vcd);
    const b = readFileSync(tracedRun(42, 30).vcd);
    const c = readFileSync(tracedRun(43, 30).vcd);
    expect(a.equals(b)).toBe(true);
    expect(a.equals(c)).toBe(false);
    const sa = JSON.stringify(tracedRun(42, 30).sim.stats());
    expect(JSON.stringify(tracedRun(42, 30).sim.stats())).toBe(sa);
  });

  it('select by scope glob and depth; unselected signals are not traced at all', async () => {
    const r = tracedRun(1, 10, { scopes: ['tb.demo.cons*'] });
    const v = await readVcdFile(r.vcd);
    expect(new Set(v.decls.map((d) => d.path.split('.').slice(0, 3).join('.')))).toEqual(new Set(['tb.demo.consumer']));
    expect(r.demo.source.data.tid).toBe(-1);
    expect(r.changes.every(([, p]) => p.startsWith('tb.demo.consumer.'))).toBe(true);
    const d = tracedRun(1, 10, { depth: 2 });
    const vd = await readVcdFile(d.vcd);
    expect(vd.decls.map((x) => x.path)).toEqual(['tb.demo.clk_core', 'tb.demo.clk_io']);
  });

  it('write only the time window, starting with $dumpvars of the values at its start', async () => {
    const full = tracedRun(5, 30);
    const start = 20_000;
    const stop = 60_000;
    const w = tracedRun(5, 30, { start, stop });
    const v = await readVcdFile(w.vcd);
    expect(v.times[0]).toBe(start);
    expect(v.times[v.times.length - 1]).toBeLessThanOrEqual(stop);
    // every signal's value at any time in the window equals the full run's
    const fullV = vcdTimeline(await readVcdFile(full.vcd));
    const winV = vcdTimeline(v);
    const at = (h: [number, number | null][], t: number): number | null => {
      let val: number | null = null;
      for (const [tt, x] of h) if (tt <= t) val = x;
      return val;
    };
    for (const [p, h] of winV) for (let t = start; t <= stop; t += 1000) expect(at(h, t), `${p}@${t}`).toBe(at(fullV.get(p)!, t));
  });

  it('the strict reader rejects time going backwards, undeclared ids and over-wide values', async () => {
    const good = readFileSync(tracedRun(3, 5).vcd, 'utf8');
    await expect(readVcd(good)).resolves.toBeTruthy();
    const backwards = good.replace(/^#4000$/m, '#1000');
    expect(backwards).not.toBe(good);
    await expect(readVcd(backwards)).rejects.toThrow(/backwards|strictly increase/);
    const undeclared = good.replace(/^#4000$/m, '#4000\n1~~');
    await expect(readVcd(undeclared)).rejects.toThrow(/undeclared id/);
    // the consumer state is 2 bits wide: a 3-bit value is invalid
    const id = /\$var wire 2 (\S+) state/.exec(good)![1];
    const wide = good.replace(/^#4000$/m, `#4000\nb111 ${id}`);
    await expect(readVcd(wide)).rejects.toThrow(/wider than 2 bits|exceeds 2 bits/);
  });

  it('refuse a value wider than its signal, naming the signal', () => {
    const sim = new Sim();
    new KernelDemo(sim, 1);
    const tracer = new Tracer(sim, { vcd: tmp('wide'), gtkw: false });
    const st = [...sim.top.walk()].find((m) => m.name === 'consumer')!.signals.find((s) => s.name === 'busy')!;
    expect(() => tracer.change(st, 2)).toThrow(/tb\.demo\.consumer\.busy: value 2 does not fit its 1 bits/);
    tracer.close();
  });

  it('write the string dialect only when asked', () => {
    const r = tracedRun(2, 5, { strings: true });
    const text = readFileSync(r.vcd, 'utf8');
    expect(text).toMatch(/\$var string 1 \S+ state \$end/);
    expect(text).toMatch(/^sFETCH \S+$/m);
    const plain = readFileSync(tracedRun(2, 5).vcd, 'utf8');
    expect(plain).not.toMatch(/\$var string/);
  });
});

describe('GTKWave save file', () => {
  it('names only signals that exist in its VCD, with their widths, in one group per module', async () => {
    const r = tracedRun(11, 20);
    const v = await readVcdFile(r.vcd);
    const gtkw = readFileSync(r.vcd.replace(/\.vcd$/, '.gtkw'), 'utf8');
    const decl = new Map(v.decls.map((d) => [d.path, d.width]));
    const lines = gtkw.split('\n').filter((l) => l && !/^[[@\-^*]/.test(l));
    expect(lines.length).toBe(decl.size);
    for (const l of lines) {
      const m = /^(.*?)(?:\[(\d+):0\])?$/.exec(l)!;
      expect(decl.has(m[1]), l).toBe(true);
      expect(decl.get(m[1])).toBe(m[2] ? Number(m[2]) + 1 : 1);
    }
    expect(gtkw).toContain(`[dumpfile] "${r.vcd}"`);
    expect(gtkw.match(/^@800200$/gm)?.length).toBe(2);
    expect(gtkw.indexOf('tb.demo.clk_core')).toBeLessThan(gtkw.indexOf('-demo.source'));
  });

  it('opens on the traced window: [timestart] at its start, zoomed to its length, not the whole run', () => {
    const whole = readFileSync(tracedRun(3, 20).vcd.replace(/\.vcd$/, '.gtkw'), 'utf8');
    const part = readFileSync(tracedRun(3, 20, { start: 400_000, stop: 500_000 }).vcd.replace(/\.vcd$/, '.gtkw'), 'utf8');
    expect(whole).toMatch(/^\[timestart\] 0$/m);
    expect(part).toMatch(/^\[timestart\] 400000$/m);
    const zoom = (g: string): number => Number(/^\*(-?[\d.]+) /m.exec(g)![1]);
    // a window a twentieth of the run is shown about 2^4 times closer
    expect(zoom(part) - zoom(whole)).toBeGreaterThanOrEqual(4);
  });

  it('writes named markers: times in the zoom line, labels as [markername] lines, A..Z in time order, every one in the legend', () => {
    const sim = new Sim({ seed: 1 });
    new KernelDemo(sim, 5);
    const vcd = tmp('marks');
    const tracer = new Tracer(sim, { vcd, start: 1000 });
    tracer.mark('before the window', 500); // outside the window: not shown
    tracer.mark('second\nline', 60_000);
    tracer.mark('first', 20_000);
    for (let i = 0; i < 30; i++) tracer.mark(`m${i}`, 80_000 + i);
    sim.runUntil(100_000);
    tracer.close();
    expect(tracer.droppedMarkers).toBe(6); // 2 + 30 asked inside the window, 26 named
    const gtkw = readFileSync(vcd.replace(/\.vcd$/, '.gtkw'), 'utf8');
    const zoom = /^\*\S+ (.*)$/m.exec(gtkw)![1].split(' ').map(Number);
    expect(zoom.length).toBe(27); // the primary marker, then A..Z
    expect(zoom[0]).toBe(-1);
    expect(zoom.slice(1, 4)).toEqual([20_000, 60_000, 80_000]);
    const names = gtkw.split('\n').filter((l) => l.startsWith('[markername]'));
    expect(names.slice(0, 2)).toEqual(['[markername] Afirst', '[markername] Bsecond line']);
    // m0..m23 fall on one pixel: one label for the cluster, blanks for the rest
    expect(names[2]).toMatch(/^\[markername\] CC-Z:m0 \/ m1 \/ .*\.\.$/);
    expect(names.slice(3)).toEqual([...'DEFGHIJKLMNOPQRSTUVWXYZ'].map((l) => `[markername] ${l} `));
    // the legend lists all 32 with their letters and times (the last 6 have none)
    const legend = gtkw.slice(gtkw.indexOf('-markers (32)'), gtkw.lastIndexOf('-markers (32)'));
    const rows = legend.split('\n').filter((l) => /^-[A-Z ] {2}\d/.test(l));
    expect(rows.length).toBe(32);
    expect(rows[0]).toBe('-A  0.020 us  first');
    expect(rows[2]).toBe('-C  0.080 us  m0');
    expect(rows[31]).toBe('-   0.080 us  m29');
    // with more than 8 it starts collapsed, so it does not widen the signal pane
    expect(gtkw).toMatch(/^@c00200\n-markers \(32\)$/m);
  });

  it('opens a little before the first marker or work request, or on the view a mark or the options name', async () => {
    const open = async (opts: Partial<TraceOptions>, act: (t: Tracer) => void): Promise<string> => {
      const sim = new Sim({ seed: 1 });
      new KernelDemo(sim, 5);
      const vcd = tmp('view');
      const tracer = new Tracer(sim, { vcd, ...opts });
      await sim.run(async () => {
        await sim.delay(1_000_000);
        act(tracer);
        await sim.delay(1_000_000);
      });
      tracer.close();
      return readFileSync(vcd.replace(/\.vcd$/, '.gtkw'), 'utf8');
    };
    const timestart = (g: string): number => Number(/^\[timestart\] (\d+)$/m.exec(g)![1]);
    // 3% of the 1 us of work after the anchor: 30 ns before it
    expect(timestart(await open({}, (t) => t.mark('go')))).toBe(970_000);
    expect(timestart(await open({}, (t) => t.workPosted()))).toBe(970_000);
    expect(timestart(await open({}, (t) => t.mark('go', 1_000_000, { view: 'start' })))).toBe(1_000_000);
    expect(timestart(await open({ view: { start: 1_500_000 } }, (t) => t.mark('go')))).toBe(1_500_000);
    expect(timestart(await open({}, () => {}))).toBe(0);
    // a named end zooms in: from 1 us to 1.2 us (and 6% more, room for its label) instead of 2 us
    const zoom = (g: string): number => Number(/^\*(-?[\d.]+) /m.exec(g)![1]);
    const toEnd = await open({}, (t) => t.mark('go', 1_000_000, { view: 'start' }));
    const short = await open({ view: { end: 1_200_000 } }, (t) => t.mark('go', 1_000_000, { view: 'start' }));
    expect(zoom(short) - zoom(toEnd)).toBeCloseTo(Math.log2(0.97 / (0.212 * 1.02)), 3);
  });

  it('shows the modules that changed during the view first and open, the idle ones after them, collapsed', async () => {
    class Block extends Module {
      readonly r = this.reg('r', 4);
    }
    const run = async (act: (t: Tracer) => void): Promise<{ gtkw: string; vcd: string }> => {
      const sim = new Sim({ seed: 1 });
      const early = new Block(sim, sim.top, 'early');
      const late = new Block(sim, sim.top, 'late');
      const after = new Block(sim, sim.top, 'after');
      const vcd = tmp('groups');
      const tracer = new Tracer(sim, { vcd });
      await sim.run(async () => {
        await sim.delay(1_000_000);
        early.r.setNow(1); // long before the work
        await sim.delay(99_000_000);
        act(tracer); // at 100 us
        await sim.delay(50_000_000);
        late.r.setNow(2); // at 150 us
        await sim.delay(30_000_000);
        after.r.setNow(3); // at 180 us
        await sim.delay(20_000_000);
      });
      tracer.close();
      return { gtkw: readFileSync(vcd.replace(/\.vcd$/, '.gtkw'), 'utf8'), vcd };
    };
    const groups = (g: string): string[] => [...g.matchAll(/^(@800200|@c00200)\n-(\w+)$/gm)].map((m) => `${m[1] === '@800200' ? 'open' : 'closed'} ${m[2]}`);
    expect(groups((await run((t) => t.mark('work'))).gtkw)).toEqual(['open late', 'open after', 'closed early']);
    const ended = await run((t) => {
      t.mark('work');
      t.mark('end', 160_000_000, { view: 'end' });
    });
    expect(groups(ended.gtkw)).toEqual(['open late', 'closed early', 'closed after']);
    expect(groups((await run(() => {})).gtkw)).toEqual(['open early', 'open late', 'open after']);
    // collapsed or not, every signal is still in the save file and in the VCD
    expect(ended.gtkw.match(/^tb\.\w+\.r\[3:0\]$/gm)?.length).toBe(3);
    expect((await readVcdFile(ended.vcd)).decls.length).toBe(3);
  });

  it('shows enums through a translate filter file with every value named at the signal width', () => {
    const r = tracedRun(11, 5);
    const gtkw = readFileSync(r.vcd.replace(/\.vcd$/, '.gtkw'), 'utf8');
    const m = /^\^1 (.*)\n@2022\ntb\.demo\.consumer\.state\[1:0\]$/m.exec(gtkw);
    expect(m).not.toBeNull();
    expect(existsSync(m![1])).toBe(true);
    const filter = readFileSync(m![1], 'utf8').split('\n').filter((l) => l && !l.startsWith('#'));
    expect(filter).toEqual(['0 IDLE', '1 FETCH', '2 PROCESS', '3 WRITEBACK']);
    expect(r.tracer.files).toContain(m![1]);
    // in filters/ beside the VCD, named by the enum type: every run of the folder shares it
    expect(m![1]).toBe(join(dir, 'filters', 'consumer_state.txt'));
    const again = readFileSync(tracedRun(12, 5).vcd.replace(/\.vcd$/, '.gtkw'), 'utf8');
    expect(again).toContain(`^1 ${m![1]}\n`);
  });

  it('writes the filters into the folder it is given, creating it and the VCD folder', () => {
    const vcd = join(dir, 'nested', 'run', 'run.vcd');
    const filters = join(dir, 'nested', 'shared-filters');
    const r = tracedRun(11, 5, { vcd, filters });
    expect(existsSync(r.vcd)).toBe(true);
    expect(r.tracer.files.filter((f) => f.endsWith('.txt')).every((f) => f.startsWith(filters + '/'))).toBe(true);
    expect(readFileSync(join(dir, 'nested', 'run', 'run.gtkw'), 'utf8')).toContain(`^1 ${join(filters, 'consumer_state.txt')}`);
  });
});

describe('attaching a tracer', () => {
  it('is refused once simulated time has passed (untraced modules keep no waves-only probes), with the start option named', () => {
    const sim = new Sim({ seed: 1 });
    new KernelDemo(sim, 4);
    sim.runUntil(10_000);
    expect(() => new Tracer(sim, { vcd: tmp('late'), gtkw: false })).toThrow(/attached at time 0.*now is 10000 ps.*`start`/);
    expect(sim.tracer).toBeNull();
  });
});
