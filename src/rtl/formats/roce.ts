/**
 * RoCEv2 frames (IBTA Vol 1 ch. 9 transport headers; RoCEv2 annex A17): Ethernet, IPv4, UDP to
 * port 4791, BTH and the RC extended headers, payload, pad and the ICRC. Encodes one packet
 * into a caller's buffer; used by the pcap of the wire (the model itself moves whole messages).
 *
 * | header | bytes | fields |
 * |---|---|---|
 * | BTH | 12 | opcode; SE, M, PadCnt, TVer; P_Key; FECN/BECN/resv; DestQP; A, resv7; PSN |
 * | RETH | 16 | VA u64, R_Key u32, DMA length u32 |
 * | AETH | 4 | syndrome u8, MSN u24 |
 * | AtomicETH | 28 | VA u64, R_Key u32, swap/add u64, compare u64 |
 * | AtomicAckETH | 8 | original remote data u64 |
 * | ImmDt, IETH | 4 | immediate data; the rkey to invalidate |
 */

/** The UDP destination port of RoCEv2 (IANA). */
export const ROCE_V2_UDP_PORT = 4791;
/** IBTA RC opcodes (Table 38: transport service RC = 000b in the top bits). */
export const IbOpcode = {
  SEND_FIRST: 0x00, SEND_MIDDLE: 0x01, SEND_LAST: 0x02, SEND_LAST_IMM: 0x03, SEND_ONLY: 0x04, SEND_ONLY_IMM: 0x05,
  WRITE_FIRST: 0x06, WRITE_MIDDLE: 0x07, WRITE_LAST: 0x08, WRITE_LAST_IMM: 0x09, WRITE_ONLY: 0x0a, WRITE_ONLY_IMM: 0x0b,
  READ_REQUEST: 0x0c, READ_RESPONSE_FIRST: 0x0d, READ_RESPONSE_MIDDLE: 0x0e, READ_RESPONSE_LAST: 0x0f, READ_RESPONSE_ONLY: 0x10,
  ACKNOWLEDGE: 0x11, ATOMIC_ACKNOWLEDGE: 0x12, CMP_SWAP: 0x13, FETCH_ADD: 0x14,
  SEND_LAST_INV: 0x16, SEND_ONLY_INV: 0x17,
} as const;

/** AETH syndromes (IBTA 9.7.5.2.2): ACK with no credit limit, RNR NAK + timer, NAK codes. */
export const AethSyndrome = {
  ACK: 0x1f, // 000b, credit count 11111b: "invalid credit count" (no end-to-end flow control)
  RNR: 0x20, // 001b | the RNR timer code
  NAK_PSN_SEQ: 0x60,
  NAK_INV_REQ: 0x61,
  NAK_REM_ACCESS: 0x62,
  NAK_REM_OP: 0x63,
} as const;

/** What one packet carries besides its addresses; absent headers are null / undefined. */
export interface RocePacket {
  srcMac: Uint8Array;
  dstMac: Uint8Array;
  /** IPv4 addresses as 32-bit numbers. */
  srcIp: number;
  dstIp: number;
  udpSrcPort: number;
  opcode: number;
  se: boolean;
  destQp: number;
  ackReq: boolean;
  psn: number;
  reth?: { va: number; rkey: number; length: number };
  aeth?: { syndrome: number; msn: number };
  /** 8-byte operands as little-endian host words (the model's form); written big-endian. */
  atomic?: { va: number; rkey: number; swapAdd: Uint8Array; compare: Uint8Array };
  atomicAck?: Uint8Array;
  imm?: number;
  ieth?: number;
  payload: Uint8Array;
  payloadOff: number;
  payloadLen: number;
}

const ETH = 14;
const IP = 20;
const UDP = 8;
const BTH = 12;

/** Bytes of the frame `p` encodes to (Ethernet header to ICRC; no FCS). */
export function roceFrameBytes(p: RocePacket): number {
  return ETH + IP + UDP + BTH + extBytes(p) + ((p.payloadLen + 3) & ~3) + 4;
}

function extBytes(p: RocePacket): number {
  return (p.reth ? 16 : 0) + (p.aeth ? 4 : 0) + (p.atomic ? 28 : 0) + (p.atomicAck ? 8 : 0) + (p.imm !== undefined ? 4 : 0) + (p.ieth !== undefined ? 4 : 0);
}

/** Writes `p` at `out[0..]`; returns its length (roceFrameBytes). */
export function encodeRoce(p: RocePacket, out: Uint8Array): number {
  const v = new DataView(out.buffer, out.byteOffset, out.byteLength);
  const pad = (4 - (p.payloadLen & 3)) & 3;
  const n = roceFrameBytes(p);
  out.set(p.dstMac, 0);
  out.set(p.srcMac, 6);
  v.setUint16(12, 0x0800); // IPv4
  // IPv4: no options, DSCP/ECN 0, DF (RoCEv2 packets are never fragmented), TTL 64, UDP
  let o = ETH;
  v.setUint8(o, 0x45);
  v.setUint8(o + 1, 0);
  v.setUint16(o + 2, n - ETH);
  v.setUint16(o + 4, 0);
  v.setUint16(o + 6, 0x4000);
  v.setUint8(o + 8, 64);
  v.setUint8(o + 9, 17);
  v.setUint16(o + 10, 0);
  v.setUint32(o + 12, p.srcIp >>> 0);
  v.setUint32(o + 16, p.dstIp >>> 0);
  v.setUint16(o + 10, ipv4Checksum(out, o));
  o += IP;
  // UDP: checksum 0 (none: the ICRC covers the transport; RoCEv2 annex A17.4)
  v.setUint16(o, p.udpSrcPort);
  v.setUint16(o + 2, ROCE_V2_UDP_PORT);
  v.setUint16(o + 4, n - ETH - IP);
  v.setUint16(o + 6, 0);
  o += UDP;
  // BTH: M = 1 (a QP without alternate path is in the Migrated state), TVer 0, default P_Key
  v.setUint8(o, p.opcode);
  v.setUint8(o + 1, (p.se ? 0x80 : 0) | 0x40 | (pad << 4));
  v.setUint16(o + 2, 0xffff);
  v.setUint32(o + 4, p.destQp & 0xffffff);
  v.setUint32(o + 8, ((p.ackReq ? 0x80 : 0) << 24 | (p.psn & 0xffffff)) >>> 0);
  o += BTH;
  if (p.reth) {
    setU64(v, o, p.reth.va);
    v.setUint32(o + 8, p.reth.rkey >>> 0);
    v.setUint32(o + 12, p.reth.length >>> 0);
    o += 16;
  }
  if (p.atomic) {
    setU64(v, o, p.atomic.va);
    v.setUint32(o + 8, p.atomic.rkey >>> 0);
    beFromLe(out, o + 12, p.atomic.swapAdd);
    beFromLe(out, o + 20, p.atomic.compare);
    o += 28;
  }
  if (p.aeth) {
    v.setUint32(o, ((p.aeth.syndrome << 24) | (p.aeth.msn & 0xffffff)) >>> 0);
    o += 4;
  }
  if (p.atomicAck) {
    beFromLe(out, o, p.atomicAck);
    o += 8;
  }
  if (p.imm !== undefined) {
    v.setUint32(o, p.imm >>> 0);
    o += 4;
  }
  if (p.ieth !== undefined) {
    v.setUint32(o, p.ieth >>> 0);
    o += 4;
  }
  out.set(p.payload.subarray(p.payloadOff, p.payloadOff + p.payloadLen), o);
  o += p.payloadLen;
  out.fill(0, o, o + pad);
  o += pad;
  v.setUint32(o, roceIcrc(out, o), true);
  return o + 4;
}

function setU64(v: DataView, o: number, x: number): void {
  v.setUint32(o, Math.floor(x / 2 ** 32));
  v.setUint32(o + 4, x >>> 0);
}

/** An 8-byte little-endian host word, written big-endian (the wire's order). */
function beFromLe(out: Uint8Array, o: number, le: Uint8Array): void {
  for (let i = 0; i < 8; i++) out[o + i] = le[7 - i];
}

/** The IPv4 header checksum (RFC 791) of the 20 bytes at `o` (its own field counted as 0). */
export function ipv4Checksum(b: Uint8Array, o: number): number {
  let s = 0;
  for (let i = 0; i < IP; i += 2) if (i !== 10) s += (b[o + i] << 8) | b[o + i + 1];
  while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
  return ~s & 0xffff;
}

const CRC_TABLE = ((): Uint32Array => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

function crcOver(crc: number, b: Uint8Array, from: number, to: number): number {
  for (let i = from; i < to; i++) crc = CRC_TABLE[(crc ^ b[i]) & 0xff] ^ (crc >>> 8);
  return crc;
}

function crcByte(crc: number, x: number): number {
  return CRC_TABLE[(crc ^ x) & 0xff] ^ (crc >>> 8);
}

/**
 * The ICRC of the RoCEv2 frame in `f[0..end)` (end: where the ICRC goes), as the RoCEv2 annex
 * defines it: CRC-32 (Ethernet's polynomial) over 8 bytes of 1s standing for the LRH, then the
 * IP header with TOS, TTL and checksum set to 1s, the UDP header with its checksum set to 1s,
 * the BTH with its FECN/BECN/reserved byte set to 1s, then the rest to the end of the pad.
 * Stored little-endian, as the Ethernet FCS (Linux rxe: rxe_icrc.c).
 */
export function roceIcrc(f: Uint8Array, end: number): number {
  let c = 0xffffffff;
  for (let i = 0; i < 8; i++) c = crcByte(c, 0xff);
  const ip = ETH;
  for (let i = 0; i < IP; i++) {
    const masked = i === 1 || i === 8 || i === 10 || i === 11;
    c = crcByte(c, masked ? 0xff : f[ip + i]);
  }
  const udp = ip + IP;
  for (let i = 0; i < UDP; i++) c = crcByte(c, i === 6 || i === 7 ? 0xff : f[udp + i]);
  const bth = udp + UDP;
  for (let i = 0; i < BTH; i++) c = crcByte(c, i === 4 ? 0xff : f[bth + i]);
  c = crcOver(c, f, bth + BTH, end);
  return ~c >>> 0;
}
