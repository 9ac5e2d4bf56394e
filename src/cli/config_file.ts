/**
 * The adapter's configuration on the command line: `--config cfg.json`, `run --set field=value`
 * over it, and the `mlx5sim config` listing of the fields.
 */
import { readFileSync } from 'node:fs';
import { UsageError, type RunArgs } from './args.ts';
import { resolveConfig, type HcaConfig } from '../rtl/config.ts';
import { configTable } from '../rtl/config_fields.ts';
import { checkConfigValue, isConfigField, typed } from './sweep/grid.ts';

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

/**
 * The run's configuration: --config's file, then each --set field over it, the whole checked
 * (a field's rule may name another, as mttCacheWays divides mttCacheLines).
 */
export function runConfig(a: RunArgs): Record<string, unknown> | undefined {
  const config: Record<string, unknown> | undefined = a.config ? readConfigFile(a.config) : a.sets.length ? {} : undefined;
  for (const s of a.sets) {
    if (!isConfigField(s.field)) throw new UsageError(`--set ${s.field}: not a configuration field (mlx5sim config lists them)`);
    const v = typed(s.values[0]);
    checkConfigValue(s.field, v);
    config![s.field] = v;
  }
  if (a.sets.length) {
    try {
      resolveConfig(config as Partial<HcaConfig>);
    } catch (e) {
      throw new UsageError(`--set: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
  return config;
}

/** `mlx5sim config`: a table of every configuration field. */
export function printConfig(): void {
  const rows = [['field', 'default', 'unit', 'meaning'], ...configTable()];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i].length)));
  for (const r of rows) console.log(r.map((c, i) => (i < 3 ? c.padEnd(widths[i]) : c)).join('  ').trimEnd());
  console.log(`\nSet them with mlx5sim run <scenario> --set field=value, --config file.json, or mlx5sim sweep <experiment> --set field=v1,v2.`);
}
