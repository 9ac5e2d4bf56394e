import { readFileSync } from 'node:fs';

/**
 * Reads a `--config cfg.json` file: a JSON object of configuration fields. A syntax error is
 * reported with its line and column; a non-object with the file name.
 */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`--config ${path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    const msg = (e as Error).message;
    const m = /position (\d+)/.exec(msg);
    if (m) {
      const pos = Number(m[1]);
      const before = text.slice(0, pos);
      const line = before.split('\n').length;
      const col = pos - before.lastIndexOf('\n');
      throw new Error(`${path}:${line}:${col}: invalid JSON (${msg.replace(/ in JSON at position \d+.*$/, '')})`);
    }
    throw new Error(`${path}: invalid JSON (${msg})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new Error(`${path}: the configuration must be a JSON object of fields, e.g. {"coreClockMHz": 500}`);
  }
  return v as Record<string, unknown>;
}
