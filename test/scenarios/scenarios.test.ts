import { describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scenarios } from '../../scenarios/index.ts';
import { readVcdFile } from '../support/vcd_read.ts';
import { PANE_PX } from '../../src/sim/trace/view.ts';

describe('built-in scenarios', () => {
  it('are registered with unique, file-name-safe names, the new ones after translation', () => {
    const names = scenarios.map((s) => s.name);
    expect(new Set(names).size).toBe(names.length);
    for (const n of names) expect(n).toMatch(/^[a-z0-9][a-z0-9-]*$/);
    const at = names.indexOf('translation');
    expect(at).toBeGreaterThanOrEqual(0);
    expect(names.slice(at + 1, at + 7)).toEqual(['frwr', 'send-with-inv', 'mw-type1', 'mw-type2', 'sg-gaps', 'bad-keys']);
    for (const s of scenarios) expect(s.summary.length).toBeGreaterThan(0);
  });

  for (const s of scenarios) {
    it(`${s.name}: every check passes (no trace)`, async () => {
      const r = await s.run({ seed: 1 });
      expect(r.checks.length).toBeGreaterThan(0);
      const failed = r.checks.filter((c) => !c.ok).map((c) => `${c.what}${c.detail ? `: ${c.detail}` : ''}`);
      expect(failed).toEqual([]);
      expect(r.simTime).toBeGreaterThan(0);
      expect(Object.keys(r.stats).length).toBeGreaterThan(0);
    });
  }

  it('mw-type2 traced: the VCD reads back strictly, and the .gtkw is written beside it', async () => {
    const s = scenarios.find((x) => x.name === 'mw-type2')!;
    const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-scn-'));
    try {
      const vcd = join(dir, 'mw-type2.vcd');
      const traced = await s.run({ seed: 1, trace: { vcd } });
      expect(traced.checks.filter((c) => !c.ok)).toEqual([]);
      // tracing changes nothing the scenario sees
      const plain = await s.run({ seed: 1 });
      expect(traced.simTime).toBe(plain.simTime);
      expect(traced.checks).toEqual(plain.checks);
      const v = await readVcdFile(vcd);
      expect(v.timescale).toMatch(/1\s*ps/);
      expect(v.scopes).toContain('tb.hca0.umr_engine');
      expect(v.scopes).toContain('tb.hca1.requester');
      expect(v.decls.some((d) => d.path === 'tb.hca0.umr_engine.state')).toBe(true);
      // the UMR engine did something, and nothing is dated after the end of the run
      expect(v.changes.some(([t, p, x]) => t > 0 && p === 'tb.hca0.umr_engine.state' && x !== 0)).toBe(true);
      expect(v.times[v.times.length - 1]).toBeLessThanOrEqual(traced.simTime);
      const gtkw = join(dir, 'mw-type2.gtkw');
      expect(existsSync(gtkw)).toBe(true);
      expect(readFileSync(gtkw, 'utf8')).toContain('mw-type2.vcd');
      // each awaited completion is a named marker, labelled as the scenario calls it
      expect(readFileSync(gtkw, 'utf8')).toMatch(/^\[markername\] A\S/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('frwr traced: the .gtkw opens on the registration, write and invalidation, not the firmware setup, busy modules first', async () => {
    const s = scenarios.find((x) => x.name === 'frwr')!;
    const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-scn-'));
    try {
      const r = await s.run({ seed: 1, trace: { vcd: join(dir, 'frwr.vcd') } });
      const gtkw = readFileSync(join(dir, 'frwr.gtkw'), 'utf8');
      const timestart = Number(/^\[timestart\] (\d+)$/m.exec(gtkw)![1]);
      const zoom = /^\*(\S+) -1 (.*)$/m.exec(gtkw)!;
      const shownTo = timestart + PANE_PX * (2 ** -Number(zoom[1]) / 200);
      const marks = zoom[2].split(' ').map(Number).filter((t) => t >= 0);
      expect(marks.length).toBe(5);
      // the first doorbell (REG_MR) comes after a millisecond of firmware commands: the view skips them
      expect(timestart).toBeGreaterThan(1_000_000_000);
      expect(timestart).toBeLessThan(marks[0]);
      // every marker is on screen, and the view ends inside the run (GTKWave's rule for [timestart])
      for (const t of marks) expect(t).toBeLessThanOrEqual(shownTo);
      expect(shownTo).toBeLessThanOrEqual(r.simTime);
      // the marks' labels: the registration whole; the write and the invalidation, 1.8 us apart, share one
      expect(gtkw).toMatch(/^\[markername\] AREG_MR$/m);
      expect(gtkw).toMatch(/^\[markername\] BB,C:/m);
      expect(gtkw).toMatch(/^-C {2}\d+\.\d{3} us {2}LOCAL_INV$/m);
      // groups: busy ones open in data-flow order, idle ones (hca0 never requests) collapsed after
      const groups = [...gtkw.matchAll(/^(@800200|@c00200)\n-(.+)$/gm)].map((m) => [m[1] === '@800200', m[2]] as const);
      expect(groups[0]).toEqual([true, 'markers (5)']);
      expect(groups[1]).toEqual([true, 'hca0.sq']);
      const firstIdle = groups.findIndex(([open]) => !open);
      expect(groups.slice(firstIdle).every(([open]) => !open)).toBe(true);
      expect(groups.slice(firstIdle).map(([, g]) => g)).toContain('hca0.requester');
      expect(groups.slice(0, firstIdle).map(([, g]) => g)).toEqual(expect.arrayContaining(['hca0.umr_engine', 'hca1.requester', 'hca0.responder']));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
