/**
 * `--pcap` and `--txlog` of `mlx5sim run` (and what `demo` writes): where the pcap of the wire
 * and the transaction log go, beside the run's waves unless a file is named.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { TestbedTrace } from '../driver/testbed.ts';
import type { RunArgs } from './args.ts';
import { UsageError } from './args.ts';
import { ensureWritable } from './writable.ts';

/** The pcap and transaction-log parts of a run's trace: `true` is `waves/<name>/<name>.<ext>`. */
export function wireTrace(a: Pick<RunArgs, 'pcap' | 'txlog'>, name: string, root = 'waves'): Pick<TestbedTrace, 'pcap' | 'txlog'> {
  const t: Pick<TestbedTrace, 'pcap' | 'txlog'> = {};
  if (a.pcap !== undefined) t.pcap = a.pcap === true ? join(root, name, `${name}.pcap`) : a.pcap;
  if (a.txlog !== undefined) t.txlog = a.txlog === true ? join(root, name, `${name}.txlog.jsonl`) : a.txlog;
  return t;
}

/** Refuses, before the run, a --pcap or --txlog that names a folder or a place it cannot write. */
export function checkWireTrace(t: Pick<TestbedTrace, 'pcap' | 'txlog'>): void {
  for (const [flag, f] of [['--pcap', t.pcap], ['--txlog', t.txlog]] as const) {
    if (f === undefined) continue;
    const p = resolve(f);
    if (existsSync(p) && statSync(p).isDirectory()) throw new UsageError(`${flag} ${f}: is a directory (name the file to write)`);
    ensureWritable(`${flag} ${f}`, dirname(p));
  }
}
