/**
 * The README's verbs example is code a reader will paste: it must run as written (with its
 * import pointed at this checkout and its waves at a temporary file) and print what it claims.
 * The README and docs/ link only to what ships, and nothing names a path outside the repository.
 */
import { describe, expect, it, vi } from 'vitest';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

describe('README', () => {
  it('"Verbs in brief" runs as written and completes its RDMA WRITE', async () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const m = /## Verbs in brief\n\n```ts\n([\s\S]*?)```/.exec(readme);
    expect(m).not.toBeNull();
    const dir = tempDir('mlx5sim-readme-');
    const code = m![1]
      .replace("'./src/index.ts'", JSON.stringify(join(root, 'src/index.ts')))
      .replace("'waves/mine.vcd'", JSON.stringify(join(dir, 'mine.vcd')));
    const file = join(dir, 'example.ts');
    writeFileSync(file, `${code}\nexport {};\n`);
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      await import(file);
      expect(log).toHaveBeenCalledTimes(1);
      expect(log.mock.calls[0][0]).toMatchObject([{ wrId: 1, status: 'SUCCESS', opcode: 'RDMA_WRITE', byteLen: 4096 }]);
    } finally {
      log.mockRestore();
    }
    expect(existsSync(join(dir, 'mine.vcd'))).toBe(true);
    expect(existsSync(join(dir, 'mine.gtkw'))).toBe(true);
  });
});

/** The files under `dir` (relative to the root), recursively, but for the generated API reference. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(root, dir), { withFileTypes: true })) {
    const rel = `${dir}/${e.name}`;
    if (rel === 'docs/api') continue;
    if (e.isDirectory()) out.push(...filesUnder(rel));
    else out.push(rel);
  }
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
const slug = (heading: string): string => heading.trim().toLowerCase().replace(/[^a-z0-9 _-]/g, '').replace(/ /g, '-');

describe('documentation that ships', () => {
  const shipped = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] }).files;
  const pages = ['README.md', ...filesUnder('docs').filter((f) => f.endsWith('.md'))];

  it('names no path outside the repository (../shared, /work/shared) in sources, docs, scenarios, experiments, benchmarks or examples', () => {
    const files = ['README.md', ...['src', 'docs', 'scenarios', 'experiments', 'bench', 'examples'].flatMap(filesUnder)];
    expect(files.length).toBeGreaterThan(100);
    expect(files.filter((f) => /\.\.\/shared|\/work\/shared/.test(readFileSync(join(root, f), 'utf8')))).toEqual([]);
  });

  it('links, from the README and every docs page, only to files that exist and ship, and to headings that exist', () => {
    const bad: string[] = [];
    for (const page of pages) {
      const text = readFileSync(join(root, page), 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/.test(target)) continue; // a web address
        const [path, anchor] = target.split('#');
        const file = path ? relative(root, resolve(root, dirname(page), path)).replace(/\\/g, '/') : page;
        if (!shipped.some((s) => file === s || file.startsWith(`${s}/`))) bad.push(`${page}: ${target} does not ship`);
        // the API reference is built (npm run docs, and by npm pack), not committed
        if (file.startsWith('docs/api/')) continue;
        if (!existsSync(join(root, file))) {
          bad.push(`${page}: ${target} does not exist`);
          continue;
        }
        if (anchor && file.endsWith('.md')) {
          const headings = [...readFileSync(join(root, file), 'utf8').matchAll(/^#+ (.*)$/gm)].map((h) => slug(h[1]));
          if (!headings.includes(anchor)) bad.push(`${page}: ${target}: no such heading`);
        }
      }
    }
    expect(bad).toEqual([]);
  });

  it('the guide covers the concepts, scenarios, experiments, waves, and packets and logs; its index links each', () => {
    const index = readFileSync(join(root, 'docs/guide/index.md'), 'utf8');
    for (const p of ['concepts.md', 'scenarios.md', 'experiments.md', 'waves.md', 'packets-and-logs.md']) {
      expect(existsSync(join(root, 'docs/guide', p))).toBe(true);
      expect(index).toContain(`](${p})`);
    }
  });
});
