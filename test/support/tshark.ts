/**
 * Wireshark's command line (tshark, Debian package `tshark`) over a pcap of the wire, and an
 * independent reader of the pcap file: its frames and a recomputation of each RoCEv2 ICRC (as
 * Linux rxe computes it, rxe_icrc.c, with zlib's CRC-32), since tshark 4.0 shows the ICRC but
 * does not check it.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { crc32 } from 'node:zlib';

/**
 * The heuristic dissectors Wireshark 4.0 tries on an InfiniBand payload (`tshark -G
 * heuristic-decodes`, table infiniband.payload), by their short names: upper-layer protocols
 * (NFS over RDMA, SMB Direct, iSER, EoIB, ...) that the simulated bytes are not. Left on,
 * RPCoRDMA reads a 6-byte SEND payload as a short RPC header and reports a malformed packet of
 * its own; off, the payload is Data, as the InfiniBand dissector hands it on.
 */
export const PAYLOAD_HEURISTICS = [
  'mellanox_eoib', 'eth_over_ib', 'fc_infiniband', 'iser_infiniband', 'lnet_ib', 'rpcrdma_infiniband', 'sdp_infiniband',
  'smb_direct_infiniband', 'smcr_infiniband', 'nvme_rdma',
];

/** tshark's options for every read: UDP 4791 as RoCEv2 (InfiniBand), IPv4 checksums checked, no ULP guesses. */
export const TSHARK_OPTS = [
  '-d', 'udp.port==4791,infiniband', '-o', 'ip.check_checksum:TRUE', '-o', 'udp.check_checksum:TRUE',
  ...PAYLOAD_HEURISTICS.flatMap((h) => ['--disable-heuristic', h]),
];

/** One row per frame: each field's values joined by ',' ('' when absent). */
export function tsharkFields(file: string, fields: readonly string[], filter?: string): Record<string, string>[] {
  const args = ['-r', file, ...TSHARK_OPTS, '-T', 'fields', '-E', 'separator=\t', '-E', 'occurrence=a', '-E', 'aggregator=,'];
  if (filter) args.push('-Y', filter);
  for (const f of fields) args.push('-e', f);
  let out: string;
  try {
    out = execFileSync('tshark', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 28 });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') throw new Error('tshark is not installed (Debian/Ubuntu: apt-get install tshark; .ci/run installs it)');
    throw e;
  }
  return out.split('\n').filter((l) => l !== '').map((l) => {
    const v = l.split('\t');
    return Object.fromEntries(fields.map((f, i) => [f, v[i] ?? '']));
  });
}

/** A frame of a classic pcap file: its time in ns and its bytes. */
export interface PcapFrame {
  ns: bigint;
  bytes: Uint8Array;
}

/** Reads a pcap with nanosecond timestamps (magic 0xa1b23c4d, little-endian); throws on any other. */
export function readPcap(file: string): { linkType: number; frames: PcapFrame[] } {
  const b = readFileSync(file);
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  if (v.getUint32(0, true) !== 0xa1b23c4d) throw new Error(`${file}: not a nanosecond pcap (magic 0x${v.getUint32(0, true).toString(16)})`);
  const linkType = v.getUint32(20, true);
  const frames: PcapFrame[] = [];
  for (let o = 24; o < b.length; ) {
    const sec = BigInt(v.getUint32(o, true));
    const nsec = BigInt(v.getUint32(o + 4, true));
    const incl = v.getUint32(o + 8, true);
    if (v.getUint32(o + 12, true) !== incl) throw new Error(`${file}: a frame captured short at byte ${o}`);
    frames.push({ ns: sec * 1_000_000_000n + nsec, bytes: new Uint8Array(b.buffer, b.byteOffset + o + 16, incl) });
    o += 16 + incl;
  }
  return { linkType, frames };
}

/**
 * The ICRC a receiver computes for a RoCEv2-over-IPv4 frame (no VLAN): rxe_icrc_hdr's masks
 * (IP TOS, TTL and checksum, UDP checksum, BTH byte 4 as 1s) over a 0xff * 8 prefix standing
 * for the LRH, then the rest up to the ICRC; compared with the last 4 bytes, little-endian.
 */
export function icrcMatches(f: Uint8Array): boolean {
  const body = Buffer.from(f.subarray(14, f.length - 4));
  body[1] = 0xff; // TOS
  body[8] = 0xff; // TTL
  body[10] = body[11] = 0xff; // IP checksum
  body[26] = body[27] = 0xff; // UDP checksum
  body[28 + 4] = 0xff; // BTH: FECN, BECN, reserved
  const want = crc32(Buffer.concat([Buffer.alloc(8, 0xff), body]));
  const got = new DataView(f.buffer, f.byteOffset + f.length - 4, 4).getUint32(0, true);
  return want >>> 0 === got;
}
