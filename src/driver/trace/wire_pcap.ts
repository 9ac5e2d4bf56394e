/**
 * The pcap of the wire (`trace.pcap`, `mlx5sim run --pcap`): every packet the link carries, in
 * both directions, as a RoCEv2 frame Wireshark dissects, stamped with its simulated time at
 * nanosecond resolution (classic pcap, magic 0xa1b23c4d, link type Ethernet).
 *
 * The model moves whole messages and numbers them per QP (`seq`); the wire numbers packets.
 * This tap keeps the mapping: a request's first PSN is the sum of the packets (READ: the
 * response packets) of the QP's messages before it, as IBTA 9.7.1 counts them, so the PSNs and
 * the MSN (9.7.5.1.2: messages the responder completed) are what a real capture would show.
 * A message sent again (RNR, timeout: go-back-N) keeps its PSNs.
 *
 * Addresses are fixed per adapter: adapter i is MAC 02:00:00:00:00:(i+1), IPv4 10.0.0.(i+1);
 * the UDP source port is 0xC000 | (source QPN & 0x3fff) (RoCEv2 uses it for ECMP entropy).
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LinkTap } from '../../rtl/transport/link.ts';
import { Link, PACKET_HEADER_BYTES } from '../../rtl/transport/link.ts';
import type { RcRequest, RcResponse } from '../../rtl/transport/rc_types.ts';
import { AethSyndrome, encodeRoce, IbOpcode, type RocePacket } from '../../rtl/formats/roce.ts';

/** The MAC address of adapter `i`: locally administered, 02:00:00:00:00:(i+1). */
export function adapterMac(i: number): Uint8Array {
  return Uint8Array.of(0x02, 0, 0, 0, 0, (i + 1) & 0xff);
}

/** The IPv4 address of adapter `i`: 10.0.0.(i+1), as a 32-bit number. */
export function adapterIp(i: number): number {
  return ((10 << 24) | (i + 1)) >>> 0;
}

/** A requester QP's packet numbering: per message (seq), its first PSN and packet count. */
interface QpWire {
  srcHca: number;
  srcQpn: number;
  dstHca: number;
  dstQpn: number;
  nextPsn: number;
  psn: number[];
  packets: number[];
  /** The operation: an ACK names a message's last packet. */
  op: RcRequest['op'][];
}

const qpKey = (hca: number, qpn: number): number => hca * 2 ** 24 + qpn;

/** A frame waiting for every earlier one (the two directions interleave in time). */
interface Pending {
  t: number;
  n: number;
  bytes: Uint8Array;
}

const BUF = 1 << 20;

export class WirePcap {
  private readonly fd: number;
  private buf = new Uint8Array(BUF);
  private fill = 0;
  private readonly frame = new Uint8Array(4096 + 256);
  private readonly qps = new Map<number, QpWire>();
  private pending: Pending[] = [];
  private seqNo = 0;
  private readonly macs: Uint8Array[] = [];
  private readonly pkt: RocePacket;
  private closed = false;
  /** Packets written so far. */
  packets = 0;
  /** The two taps: requests to responders, answers back to requesters. */
  readonly requests: LinkTap<RcRequest>;
  readonly responses: LinkTap<RcResponse>;

  constructor(
    readonly path: string,
    private readonly now: () => number,
    private readonly rnrTimerCode: number,
  ) {
    mkdirSync(dirname(path), { recursive: true });
    this.fd = openSync(path, 'w');
    const h = new DataView(this.buf.buffer);
    h.setUint32(0, 0xa1b23c4d, true); // nanosecond timestamps
    h.setUint16(4, 2, true);
    h.setUint16(6, 4, true);
    h.setUint32(16, 65535, true); // snaplen
    h.setUint32(20, 1, true); // LINKTYPE_ETHERNET
    this.fill = 24;
    this.pkt = {
      srcMac: this.mac(0), dstMac: this.mac(0), srcIp: 0, dstIp: 0, udpSrcPort: 0, opcode: 0, se: false, destQp: 0,
      ackReq: false, psn: 0, payload: new Uint8Array(0), payloadOff: 0, payloadLen: 0,
    };
    this.requests = { sent: (to, m, _b, mtu, start, _at, ppb) => this.request(to, m, mtu, start, ppb) };
    this.responses = { sent: (_to, a, _b, mtu, start, at, ppb) => this.response(a, mtu, start, at, ppb) };
  }

  private mac(i: number): Uint8Array {
    return (this.macs[i] ??= adapterMac(i));
  }

  private request(to: number, m: RcRequest, mtu: number, start: number, ppb: number): void {
    const key = qpKey(m.srcHca, m.srcQpn);
    let q = this.qps.get(key);
    if (q === undefined) {
      q = { srcHca: m.srcHca, srcQpn: m.srcQpn, dstHca: to, dstQpn: m.dstQpn, nextPsn: 0, psn: [], packets: [], op: [] };
      this.qps.set(key, q);
    }
    if (q.psn[m.seq] === undefined) {
      // first try: the message takes the next PSNs (a READ those of its responses)
      const isAtomic = m.op === 'CMP_SWAP' || m.op === 'FETCH_ADD';
      const wirePackets = isAtomic ? 1 : Link.packets(m.op === 'READ' ? m.length : (m.payload?.length ?? 0), mtu);
      q.psn[m.seq] = q.nextPsn;
      q.packets[m.seq] = wirePackets;
      q.op[m.seq] = m.op;
      q.nextPsn = (q.nextPsn + wirePackets) & 0xffffff;
    }
    const p = this.pkt;
    this.address(m.srcHca, to, m.srcQpn);
    p.destQp = m.dstQpn;
    p.imm = undefined;
    p.ieth = undefined;
    p.aeth = undefined;
    p.atomicAck = undefined;
    p.atomic = undefined;
    p.reth = undefined;
    const psn0 = q.psn[m.seq];
    if (m.op === 'READ' || m.op === 'CMP_SWAP' || m.op === 'FETCH_ADD') {
      p.se = false;
      p.ackReq = true;
      p.psn = psn0;
      p.payloadLen = 0;
      if (m.op === 'READ') {
        p.opcode = IbOpcode.READ_REQUEST;
        p.reth = { va: m.raddr, rkey: m.rkey, length: m.length };
      } else {
        p.opcode = m.op === 'CMP_SWAP' ? IbOpcode.CMP_SWAP : IbOpcode.FETCH_ADD;
        p.atomic = { va: m.raddr, rkey: m.rkey, swapAdd: m.swapAdd!, compare: m.compare! };
      }
      this.emit(start, ppb, 0);
      return;
    }
    const data = m.payload ?? new Uint8Array(0);
    const n = Link.packets(data.length, mtu);
    const write = m.op === 'WRITE' || m.op === 'WRITE_IMM';
    // a resend after an RNR NAK with bytes placed starts at the NAK'd packet: no RETH, its PSN
    const skip = Math.floor((m.offset ?? 0) / mtu);
    p.payload = data;
    let t = 0;
    for (let i = 0; i < n; i++) {
      const first = i === 0 && skip === 0;
      const last = i === n - 1;
      p.payloadOff = i * mtu;
      p.payloadLen = Math.min(mtu, data.length - i * mtu);
      p.psn = (psn0 + skip + i) & 0xffffff;
      p.ackReq = last;
      p.se = last && m.se;
      p.reth = write && first ? { va: m.raddr, rkey: m.rkey, length: m.length } : undefined;
      p.imm = last && (m.op === 'WRITE_IMM' || m.op === 'SEND_IMM') ? m.imm : undefined;
      p.ieth = last && m.op === 'SEND_INV' ? m.invRkey : undefined;
      p.opcode = requestOpcode(m.op, first, last);
      this.emit(start, ppb, t);
      t += p.payloadLen + PACKET_HEADER_BYTES;
    }
  }

  private response(a: RcResponse, mtu: number, start: number, _at: number, ppb: number): void {
    const q = this.qps.get(qpKey(a.dstHca, a.dstQpn));
    if (q === undefined || q.psn[a.seq] === undefined) return; // never asked (cannot happen)
    const p = this.pkt;
    this.address(q.dstHca, q.srcHca, q.dstQpn);
    p.destQp = q.srcQpn;
    p.se = false;
    p.ackReq = false;
    p.reth = undefined;
    p.atomic = undefined;
    p.atomicAck = undefined;
    p.imm = undefined;
    p.ieth = undefined;
    p.payloadLen = 0;
    const psn0 = q.psn[a.seq];
    // MSN: the messages this responder QP has completed, this one included (an error: not)
    const msn = (a.seq + 1) & 0xffffff;
    if (a.kind === 'READ_DATA') {
      const data = a.data ?? new Uint8Array(0);
      const n = Link.packets(data.length, mtu);
      p.payload = data;
      let t = 0;
      for (let i = 0; i < n; i++) {
        const first = i === 0;
        const last = i === n - 1;
        p.opcode = n === 1 ? IbOpcode.READ_RESPONSE_ONLY : first ? IbOpcode.READ_RESPONSE_FIRST : last ? IbOpcode.READ_RESPONSE_LAST : IbOpcode.READ_RESPONSE_MIDDLE;
        p.aeth = first || last ? { syndrome: AethSyndrome.ACK, msn } : undefined;
        p.psn = (psn0 + i) & 0xffffff;
        p.payloadOff = i * mtu;
        p.payloadLen = Math.min(mtu, data.length - i * mtu);
        this.emit(start, ppb, t);
        t += p.payloadLen + PACKET_HEADER_BYTES;
      }
      return;
    }
    if (a.kind === 'ATOMIC_DATA') {
      p.opcode = IbOpcode.ATOMIC_ACKNOWLEDGE;
      p.aeth = { syndrome: AethSyndrome.ACK, msn };
      p.atomicAck = a.data;
      p.psn = psn0;
    } else {
      p.opcode = IbOpcode.ACKNOWLEDGE;
      // an ACK names the last packet of the message; a NAK the packet it refuses (the first)
      if (a.kind === 'ACK') {
        p.aeth = { syndrome: AethSyndrome.ACK, msn };
        p.psn = (psn0 + (q.op[a.seq] === 'READ' ? 0 : q.packets[a.seq] - 1)) & 0xffffff;
      } else {
        p.aeth = { syndrome: nakSyndrome(a.nak, this.rnrTimerCode), msn: a.seq & 0xffffff };
        p.psn = psn0;
      }
    }
    this.emit(start, ppb, 0);
  }

  private address(src: number, dst: number, srcQpn: number): void {
    const p = this.pkt;
    p.srcMac = this.mac(src);
    p.dstMac = this.mac(dst);
    p.srcIp = adapterIp(src);
    p.dstIp = adapterIp(dst);
    p.udpSrcPort = 0xc000 | (srcQpn & 0x3fff);
  }

  /** Encodes the current packet, leaving at `start` + `bytesBefore` of serialization. */
  private emit(start: number, ppb: number, bytesBefore: number): void {
    const n = encodeRoce(this.pkt, this.frame);
    const t = start + Math.floor(bytesBefore * ppb);
    this.pending.push({ t, n: this.seqNo++, bytes: this.frame.slice(0, n) });
    this.packets++;
    // nothing sent from now on leaves before now: the frames before it are in their order
    this.drain(this.now());
  }

  private drain(upTo: number): void {
    if (this.pending.length === 0) return;
    const ready: Pending[] = [];
    const rest: Pending[] = [];
    for (const f of this.pending) (f.t < upTo ? ready : rest).push(f);
    if (ready.length === 0) return;
    this.pending = rest;
    ready.sort((a, b) => a.t - b.t || a.n - b.n);
    for (const f of ready) this.record(f.t, f.bytes);
  }

  private record(ps: number, bytes: Uint8Array): void {
    if (this.fill + 16 + bytes.length > this.buf.length) this.flush();
    const v = new DataView(this.buf.buffer, this.fill, 16);
    const ns = Math.floor(ps / 1000);
    v.setUint32(0, Math.floor(ns / 1e9), true);
    v.setUint32(4, ns % 1e9, true);
    v.setUint32(8, bytes.length, true);
    v.setUint32(12, bytes.length, true);
    this.buf.set(bytes, this.fill + 16);
    this.fill += 16 + bytes.length;
  }

  private flush(): void {
    if (this.fill > 0) writeSync(this.fd, this.buf, 0, this.fill);
    this.fill = 0;
  }

  /** Writes what is left and closes the file. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.drain(Infinity);
    this.flush();
    closeSync(this.fd);
  }
}

function requestOpcode(op: RcRequest['op'], first: boolean, last: boolean): number {
  const only = first && last;
  switch (op) {
    case 'WRITE':
    case 'WRITE_IMM': {
      const imm = op === 'WRITE_IMM';
      if (only) return imm ? IbOpcode.WRITE_ONLY_IMM : IbOpcode.WRITE_ONLY;
      if (first) return IbOpcode.WRITE_FIRST;
      if (last) return imm ? IbOpcode.WRITE_LAST_IMM : IbOpcode.WRITE_LAST;
      return IbOpcode.WRITE_MIDDLE;
    }
    default: {
      if (only) return op === 'SEND_IMM' ? IbOpcode.SEND_ONLY_IMM : op === 'SEND_INV' ? IbOpcode.SEND_ONLY_INV : IbOpcode.SEND_ONLY;
      if (first) return IbOpcode.SEND_FIRST;
      if (last) return op === 'SEND_IMM' ? IbOpcode.SEND_LAST_IMM : op === 'SEND_INV' ? IbOpcode.SEND_LAST_INV : IbOpcode.SEND_LAST;
      return IbOpcode.SEND_MIDDLE;
    }
  }
}

function nakSyndrome(k: RcResponse['nak'], rnrTimerCode: number): number {
  switch (k) {
    case 'RNR':
      return AethSyndrome.RNR | (rnrTimerCode & 0x1f);
    case 'ACCESS':
      return AethSyndrome.NAK_REM_ACCESS;
    case 'INV_REQ':
      return AethSyndrome.NAK_INV_REQ;
    default:
      return AethSyndrome.NAK_REM_OP;
  }
}
