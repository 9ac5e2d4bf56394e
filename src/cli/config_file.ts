import { readFileSync } from 'node:fs';
import { UsageError } from './args.ts';
import { resolveConfig, type HcaConfig } from '../rtl/config.ts';

/**
 * Reads a `--config cfg.json` file: a JSON object of configuration fields. A syntax error is
 * reported with its line and column; a non-object with the file name.
 */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new UsageError(`--config ${path}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
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
      throw new UsageError(`${path}:${line}:${col}: invalid JSON (${msg.replace(/ in JSON at position \d+.*$/, '')})`);
    }
    throw new UsageError(`${path}: invalid JSON (${msg})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new UsageError(`${path}: the configuration must be a JSON object of fields, e.g. {"coreClockMHz": 500}`);
  }
  // the fields are checked now, not when the run builds its adapters (exit code 2, the field named)
  try {
    resolveConfig(v as Partial<HcaConfig>);
  } catch (e) {
    throw new UsageError(`--config ${path}: ${e instanceof Error ? e.message : String(e)}`);
  }
  return v as Record<string, unknown>;
}
