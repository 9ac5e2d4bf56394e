/**
 * The README's verbs example is code a reader will paste: it must run as written (with its
 * import pointed at this checkout and its waves at a temporary file) and print what it claims.
 */
import { describe, expect, it, vi } from 'vitest';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
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
