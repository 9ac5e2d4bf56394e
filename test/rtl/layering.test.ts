/**
 * The rule between folders (README "Layers"): reads the imports of every file under src/ and
 * checks each against the layers it may use. The hardware folders of src/rtl follow the block
 * diagram upwards: memory/ (host memory, PCIe, ICM) at the bottom, translation/ over it, then
 * umr/ and completion/, then transport/; firmware/ configures them all and is imported only by
 * the adapter that assembles them (src/rtl/hca.ts). No module under a folder imports hca.ts:
 * each is given narrow dependencies when hca.ts wires it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

/** The layer of a file: its folder (`rtl/memory`), or a named file (`rtl/hca`, `rtl/config`). */
type Layer =
  | 'sim' | 'model' | 'driver' | 'cli' | 'root' | 'outside'
  | 'rtl/formats' | 'rtl/config' | 'rtl/memory' | 'rtl/translation' | 'rtl/umr' | 'rtl/completion'
  | 'rtl/transport' | 'rtl/firmware' | 'rtl/hca';

const BASE: readonly Layer[] = ['sim', 'rtl/config', 'rtl/formats'];
const RTL: readonly Layer[] = [
  ...BASE, 'rtl/memory', 'rtl/translation', 'rtl/umr', 'rtl/completion', 'rtl/transport', 'rtl/firmware', 'rtl/hca',
];

/** What each layer may import besides itself. */
export const ALLOWED: Readonly<Record<Layer, readonly Layer[]>> = {
  sim: [], // the kernel knows nothing of RDMA
  'rtl/formats': [], // byte layouts: a leaf the driver and the model share
  'rtl/config': ['sim'],
  model: ['rtl/formats'], // the oracle shares only the encodings
  'rtl/memory': BASE,
  'rtl/translation': [...BASE, 'rtl/memory'],
  'rtl/umr': [...BASE, 'rtl/memory', 'rtl/translation'],
  'rtl/completion': [...BASE, 'rtl/memory'],
  // the send queue, requester and responder use the engines below them by their job types and
  // ports; the QP table reaches them as a narrow interface, never as firmware/ itself
  'rtl/transport': [...BASE, 'rtl/memory', 'rtl/translation', 'rtl/umr', 'rtl/completion'],
  // commands change ICM through the ICM writer, which keeps the caches of translation/ coherent
  'rtl/firmware': [...BASE, 'rtl/memory', 'rtl/translation'],
  'rtl/hca': RTL, // the adapter assembled: all wiring is here
  driver: RTL, // DESIGN.md: cli -> driver -> rtl -> sim
  root: [...RTL, 'driver'],
  cli: [...RTL, 'driver', 'model', 'root', 'outside'],
  outside: [],
};


/** The layer of a path relative to src/ (`..`-paths are outside src). */
export function layerOf(rel: string): Layer {
  if (rel.startsWith('..')) return 'outside';
  const parts = rel.split('/');
  switch (parts[0]) {
    case 'sim':
    case 'model':
    case 'driver':
    case 'cli':
      return parts[0];
    case 'rtl':
      // config_fields.ts describes config.ts's fields beside it: the same layer
      if (parts.length === 2) return parts[1] === 'hca.ts' ? 'rtl/hca' : parts[1] === 'config.ts' || parts[1] === 'config_fields.ts' ? 'rtl/config' : 'outside';
      return `rtl/${parts[1]}` as Layer;
    default:
      return parts.length === 1 ? 'root' : 'outside';
  }
}

/** The relative module specifiers a source file imports or re-exports (static and dynamic). */
export function importsOf(source: string): string[] {
  // comments may quote imports (doc examples): drop them first
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const out: string[] = [];
  for (const m of code.matchAll(/(?:^|[;\n])\s*(?:import|export)\s+(?:type\s+)?[^'";]*?from\s*['"]([^'"]+)['"]/g)) out.push(m[1]);
  for (const m of code.matchAll(/(?:^|[;\n])\s*import\s*['"]([^'"]+)['"]/g)) out.push(m[1]);
  for (const m of code.matchAll(/\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]);
  return out.filter((s) => s.startsWith('.'));
}

/** Every `from -> to` edge (paths relative to src/) that the rule forbids. */
export function violations(files: readonly { path: string; imports: readonly string[] }[]): string[] {
  const bad: string[] = [];
  for (const f of files) {
    const from = layerOf(f.path);
    for (const spec of f.imports) {
      const target = relative('.', join(dirname(f.path), spec)).split('\\').join('/');
      const to = layerOf(target);
      if (to === 'cli' && from !== 'cli') bad.push(`${f.path} -> ${target}`); // nothing imports cli
      else if (to !== from && !ALLOWED[from].includes(to)) bad.push(`${f.path} -> ${target}`);
    }
  }
  return bad.sort();
}

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...sources(p));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

const FILES = sources(SRC).map((p) => ({ path: relative(SRC, p).split('\\').join('/'), imports: importsOf(readFileSync(p, 'utf8')) }));

describe('layering: the imports of src/ follow the rule between folders', () => {
  it('reads the imports of every file (the parser sees what tsc sees)', () => {
    expect(FILES.length).toBeGreaterThan(80);
    const hca = FILES.find((f) => f.path === 'rtl/hca.ts')!;
    expect(hca.imports).toContain('./memory/pcie.ts');
    expect(importsOf("import {\n  A,\n  B,\n} from './a.ts';\nexport * from '../b.ts';\nimport type { C } from './c.ts';\n// import { D } from './d.ts';\nconst e = await import('./e.ts');"))
      .toEqual(['./a.ts', '../b.ts', './c.ts', './e.ts']);
  });

  it('flags what the rule forbids (the checker can fail)', () => {
    expect(
      violations([
        { path: 'rtl/memory/pcie.ts', imports: ['../translation/atu.ts', '../formats/mtt.ts', '../../sim/fifo.ts', './host_mem.ts'] },
        { path: 'rtl/transport/sq.ts', imports: ['../firmware/cmdif.ts', '../umr/umr_types.ts'] },
        { path: 'rtl/umr/umr_engine.ts', imports: ['../hca.ts'] },
        { path: 'sim/fifo.ts', imports: ['../rtl/config.ts'] },
        { path: 'model/keys.ts', imports: ['../rtl/formats/constants.ts'] },
        { path: 'driver/qp.ts', imports: ['../cli/main.ts'] },
      ]),
    ).toEqual([
      'driver/qp.ts -> cli/main.ts',
      'rtl/memory/pcie.ts -> rtl/translation/atu.ts',
      'rtl/transport/sq.ts -> rtl/firmware/cmdif.ts',
      'rtl/umr/umr_engine.ts -> rtl/hca.ts',
      'sim/fifo.ts -> rtl/config.ts',
    ]);
  });

  it('every import of src/ obeys the rule', () => {
    const bad = violations(FILES);
    expect(bad).toEqual([]);
  });
});
