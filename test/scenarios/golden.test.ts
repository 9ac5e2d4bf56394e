/**
 * Golden waveforms (as Verilator projects keep them): every scenario's FSM states, traced, are
 * compared with the committed `golden/<scenario>.txt`, one `<time ps> <signal> <STATE>` line per
 * change. A speed-up of the simulator must not move a single state change; a change of the
 * model's timing shows here first, as a semantic diff (which signal, which state, golden time
 * against new time) rather than a byte diff of two VCDs.
 *
 * After a deliberate timing change, accept the new waves with
 *   UPDATE_GOLDEN=1 npx vitest run test/scenarios/golden.test.ts
 * and commit the golden files with the change that explains them.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { scenarios } from '../../scenarios/index.ts';
import { readVcdFile } from '../support/vcd_read.ts';
import { tempDir } from '../support/tmp.ts';

const GOLDEN_DIR = join(dirname(fileURLToPath(import.meta.url)), 'golden');
const UPDATE = process.env.UPDATE_GOLDEN === '1';
/** The FSM state signals: `state`, `ctx3_state`, ... */
const STATE_SIGNAL = /(^|[._])state$/;

/** Enum value names by signal path, from the .gtkw's translate filters (`^n file` before a trace). */
function enumNames(gtkwPath: string): Map<string, Map<number, string>> {
  const out = new Map<string, Map<number, string>>();
  let filter: Map<number, string> | null = null;
  for (const line of readFileSync(gtkwPath, 'utf8').split('\n')) {
    if (line.startsWith('^')) {
      const file = line.slice(line.indexOf(' ') + 1);
      filter = new Map();
      for (const l of readFileSync(file, 'utf8').split('\n')) {
        const m = /^([0-9a-fA-F]+) (\S+)$/.exec(l);
        if (m) filter.set(parseInt(m[1], 16), m[2]);
      }
    } else if (filter !== null && line.startsWith('tb.')) {
      out.set(line.replace(/\[\d+:\d+\]$/, ''), filter);
      filter = null;
    }
  }
  return out;
}

/** The golden text of a traced run: every state change, then its end time. */
async function stateLines(vcd: string, simTime: number): Promise<string[]> {
  const names = enumNames(vcd.replace(/\.vcd$/, '.gtkw'));
  const v = await readVcdFile(vcd);
  const lines: string[] = [];
  for (const [t, path, x] of v.changes) {
    if (!STATE_SIGNAL.test(path.slice(path.lastIndexOf('.') + 1))) continue;
    const name = x === null ? 'x' : (names.get(path)?.get(x) ?? String(x));
    lines.push(`${t} ${path} ${name}`);
  }
  lines.push(`end ${simTime}`);
  return lines;
}

/** A readable difference: the first divergence, with context, and what each signal did differently. */
function semanticDiff(golden: string[], now: string[]): string {
  let i = 0;
  while (i < golden.length && i < now.length && golden[i] === now[i]) i++;
  const ctx = (a: string[]): string => a.slice(Math.max(0, i - 2), i + 3).map((l, k) => `${Math.max(0, i - 2) + k === i ? '>' : ' '} ${l}`).join('\n');
  const perSignal = (ls: string[]): Map<string, string[]> => {
    const m = new Map<string, string[]>();
    for (const l of ls) {
      const [t, p, s] = l.split(' ');
      if (t === 'end') continue;
      if (!m.has(p)) m.set(p, []);
      m.get(p)!.push(`${s}@${t}`);
    }
    return m;
  };
  const g = perSignal(golden);
  const n = perSignal(now);
  const signals: string[] = [];
  for (const p of [...new Set([...g.keys(), ...n.keys()])].sort()) {
    const a = g.get(p) ?? [];
    const b = n.get(p) ?? [];
    let k = 0;
    while (k < a.length && k < b.length && a[k] === b[k]) k++;
    if (k < a.length || k < b.length) signals.push(`  ${p}: change ${k}: golden ${a[k] ?? '(none)'}, now ${b[k] ?? '(none)'} (${a.length} vs ${b.length} changes)`);
  }
  return [
    `first difference at line ${i + 1}:`,
    `golden:\n${ctx(golden)}`,
    `now:\n${ctx(now)}`,
    `signals that differ:\n${signals.join('\n')}`,
    'if the change is deliberate: UPDATE_GOLDEN=1 npx vitest run test/scenarios/golden.test.ts',
  ].join('\n');
}

describe('golden waveforms: every FSM state change of every scenario', () => {
  for (const s of scenarios) {
    it(`${s.name}`, async () => {
      const vcd = join(tempDir(`mlx5sim-golden-${s.name}-`), `${s.name}.vcd`);
      const r = await s.run({ seed: 1, trace: { vcd } });
      expect(r.checks.filter((c) => !c.ok)).toEqual([]);
      const now = await stateLines(vcd, r.simTime);
      expect(now.length).toBeGreaterThan(1);
      const file = join(GOLDEN_DIR, `${s.name}.txt`);
      if (UPDATE) {
        mkdirSync(GOLDEN_DIR, { recursive: true });
        writeFileSync(file, `${now.join('\n')}\n`);
        return;
      }
      if (!existsSync(file)) throw new Error(`no golden waves for ${s.name}: run UPDATE_GOLDEN=1 npx vitest run test/scenarios/golden.test.ts and commit ${file}`);
      const golden = readFileSync(file, 'utf8').trimEnd().split('\n');
      if (golden.join('\n') !== now.join('\n')) expect.fail(`${s.name}: the waves changed\n${semanticDiff(golden, now)}`);
    });
  }
});
