/**
 * `mlx5sim run --pcap --txlog`: the files land where asked (or beside the waves by default),
 * also without a VCD, and the run says where they are.
 */
import { describe, expect, it, vi } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli } from '../../src/cli/cli.ts';
import { wireTrace } from '../../src/cli/wire_trace.ts';
import { readPcap } from '../support/tshark.ts';
import { tempDir } from '../support/tmp.ts';

describe('run --pcap --txlog', () => {
  it('default to waves/<name>/<name>.pcap and .txlog.jsonl', () => {
    expect(wireTrace({ pcap: true, txlog: true }, 'frwr')).toEqual({ pcap: join('waves', 'frwr', 'frwr.pcap'), txlog: join('waves', 'frwr', 'frwr.txlog.jsonl') });
    expect(wireTrace({ pcap: 'a/x.pcap' }, 'frwr')).toEqual({ pcap: 'a/x.pcap' });
    expect(wireTrace({}, 'frwr')).toEqual({});
  });

  it('write the pcap, the log and its Perfetto file with --no-vcd, and name them', async () => {
    const dir = tempDir('mlx5sim-cli-wire-');
    const pcap = join(dir, 'p', 'sg.pcap');
    const txlog = join(dir, 'l', 'sg.txlog.jsonl');
    const out: string[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((m: string) => void out.push(m));
    let code: number;
    try {
      code = await runCli(['run', 'sg-gaps', '--no-vcd', '--pcap', pcap, '--txlog', txlog]);
    } finally {
      spy.mockRestore();
    }
    expect(code).toBe(0);
    expect(readPcap(pcap).frames.length).toBeGreaterThan(0);
    expect(readFileSync(txlog, 'utf8').split('\n').filter((l) => l.includes('"type":"wr"')).length).toBeGreaterThan(0);
    expect(existsSync(join(dir, 'l', 'sg.trace.json'))).toBe(true);
    expect(existsSync(join(dir, 'p', 'sg.vcd'))).toBe(false);
    const text = out.join('\n');
    expect(text).toContain(`packets: ${pcap}`);
    expect(text).toContain(`transaction log: ${txlog}`);
    expect(text).not.toContain('waves in');
  });
});
