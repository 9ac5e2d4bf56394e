/**
 * Every verbs scenario's pcap, read by tshark's InfiniBand dissector (RoCEv2 on UDP 4791): no
 * malformed packet, no expert warning, good IPv4 checksums and ICRCs, PSNs that follow IBTA's
 * numbering; and each work request that went on the wire (from the transaction log, which
 * records what the driver posted) has its first packet in the pcap at its time, from its QP,
 * with its opcode, rkey, remote address and length.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { scenarios } from '../../scenarios/index.ts';
import { icrcMatches, readPcap, tsharkFields } from '../support/tshark.ts';
import { tempDir } from '../support/tmp.ts';
import { readTxLog } from '../../src/cli/log.ts';
import type { WrLine } from '../../src/driver/trace/txlog.ts';
import { adapterIp } from '../../src/driver/trace/wire_pcap.ts';
import { IbOpcode } from '../../src/rtl/formats/roce.ts';

/** The scenarios that build no testbed (no link, no pcap). */
const NOT_VERBS = new Set(['kernel-pipeline', 'translation']);

const FIELDS = [
  'frame.time_epoch', 'frame.protocols', '_ws.expert.message', '_ws.malformed', 'ip.checksum.status', 'ip.src', 'udp.srcport',
  'infiniband.bth.opcode', 'infiniband.bth.destqp', 'infiniband.bth.psn', 'infiniband.reth.va', 'infiniband.reth.r_key',
  'infiniband.reth.dmalen',
];

/** The opcodes a request message's first packet can have, by the verb posted. */
const FIRST: Record<string, readonly number[]> = {
  RDMA_WRITE: [IbOpcode.WRITE_FIRST, IbOpcode.WRITE_ONLY],
  RDMA_WRITE_WITH_IMM: [IbOpcode.WRITE_FIRST, IbOpcode.WRITE_ONLY_IMM],
  SEND: [IbOpcode.SEND_FIRST, IbOpcode.SEND_ONLY],
  SEND_WITH_IMM: [IbOpcode.SEND_FIRST, IbOpcode.SEND_ONLY_IMM],
  SEND_WITH_INV: [IbOpcode.SEND_FIRST, IbOpcode.SEND_ONLY_INV],
  RDMA_READ: [IbOpcode.READ_REQUEST],
  RDMA_READ_WITH_INV: [IbOpcode.READ_REQUEST],
  ATOMIC_FETCH_AND_ADD: [IbOpcode.FETCH_ADD],
  ATOMIC_CMP_AND_SWP: [IbOpcode.CMP_SWAP],
};

describe('pcap of every verbs scenario', () => {
  const verbs = scenarios.filter((s) => !NOT_VERBS.has(s.name));
  it('covers the verbs scenarios', () => expect(verbs.length).toBeGreaterThanOrEqual(10));
  for (const s of verbs) {
    it(`${s.name}: tshark reads every packet cleanly, and the WRs posted are on the wire as posted`, async () => {
      const dir = tempDir(`mlx5sim-wire-${s.name}-`);
      const pcap = join(dir, `${s.name}.pcap`);
      const txlog = join(dir, `${s.name}.txlog.jsonl`);
      const r = await s.run({ seed: 1, trace: { pcap, txlog } });
      expect(r.checks.filter((c) => !c.ok)).toEqual([]);
      const rows = tsharkFields(pcap, FIELDS);
      const { frames } = readPcap(pcap);
      expect(rows.length).toBe(frames.length);
      for (const [i, row] of rows.entries()) {
        const at = `frame ${i + 1}`;
        expect(row['_ws.malformed'], at).toBe('');
        expect(row['_ws.expert.message'], at).toBe('');
        expect(row['frame.protocols'], at).toMatch(/^eth:ethertype:ip:udp:infiniband/);
        expect(row['ip.checksum.status'], at).toBe('1');
        expect(icrcMatches(frames[i].bytes), at).toBe(true);
      }
      // PSNs per requester QP: a new message takes the next ones (a READ as many as its
      // responses: 4096-byte MTU here), a resend repeats earlier ones; answers name sent PSNs
      const next = new Map<string, number>();
      const isRequest = (op: number): boolean => op <= IbOpcode.READ_REQUEST || op === IbOpcode.CMP_SWAP || op === IbOpcode.FETCH_ADD || op >= IbOpcode.SEND_LAST_INV;
      for (const row of rows) {
        const op = Number(row['infiniband.bth.opcode']);
        const psn = Number(row['infiniband.bth.psn']);
        if (isRequest(op)) {
          const k = `${row['ip.src']}/${row['udp.srcport']}`;
          const n = next.get(k) ?? 0;
          if (psn === n) next.set(k, n + (op === IbOpcode.READ_REQUEST ? Math.max(1, Math.ceil(Number(row['infiniband.reth.dmalen']) / 4096)) : 1));
          else expect(psn, `a resent PSN of ${k}`).toBeLessThan(n);
        }
      }
      // the log's WRs on the wire: their first packet, at their time, from their QP, as posted
      const wrs = readTxLog(txlog).filter((l): l is WrLine => l.type === 'wr' && l.stages.firstPacket !== undefined);
      for (const w of wrs) {
        const ns = Math.floor(w.stages.firstPacket! / 1000);
        const src = ipText(adapterIp(w.hca));
        const port = String(0xc000 | (w.qp & 0x3fff));
        const f = rows.find((row) => row['ip.src'] === src && row['udp.srcport'] === port && epochNs(row['frame.time_epoch']) === ns && FIRST[w.opcode].includes(Number(row['infiniband.bth.opcode'])));
        expect(f, `WR ${w.wrId} (${w.opcode}) of QP ${w.qp} at ${ns} ns`).toBeDefined();
        // (tshark 4.0 shows an AtomicETH's address and key as the RETH fields, without a length)
        if (w.remoteAddr !== undefined) {
          expect(BigInt(f!['infiniband.reth.va']), `WR ${w.wrId}`).toBe(BigInt(w.remoteAddr));
          expect(Number(f!['infiniband.reth.r_key']), `WR ${w.wrId}`).toBe(w.rkey);
        }
        if (f!['infiniband.reth.dmalen'] !== '') expect(Number(f!['infiniband.reth.dmalen']), `WR ${w.wrId}`).toBe(w.length);
      }
    });
  }
});

function ipText(ip: number): string {
  return [ip >>> 24, (ip >>> 16) & 255, (ip >>> 8) & 255, ip & 255].join('.');
}

/** `frame.time_epoch` ("0.001465526000") to whole ns. */
function epochNs(s: string): number {
  const [sec, frac = ''] = s.split('.');
  return Number(sec) * 1e9 + Number(frac.padEnd(9, '0').slice(0, 9));
}
