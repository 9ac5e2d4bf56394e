/**
 * RoCEv2 frame encoding: the ICRC against a frame captured from real hardware (a CNP from a
 * ConnectX-4 Lx, as published with scapy's RoCE tests), the IPv4 header checksum, and a frame's
 * layout (lengths, pad count, where each header lands).
 */
import { describe, expect, it } from 'vitest';
import { encodeRoce, ipv4Checksum, roceFrameBytes, roceIcrc, IbOpcode, type RocePacket } from '../../../src/rtl/formats/roce.ts';
import { icrcMatches } from '../../support/tshark.ts';

/** 74 bytes: Ethernet, IPv4 (ECN set), UDP to 4791, BTH opcode 0x81 (CNP, BECN set), 16 bytes of padding, ICRC. */
const CNP = Uint8Array.from(Buffer.from(`
  e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2 003c 718c 4000 4011 9161 0a00 1101 0a00
  1201 0000 12b7 0028 0000 8100 ffff 4000 0118 0000 0000 0000 0000 0000 0000 0000
  0000 0000 0000 82fd 002a`.replace(/\s/g, ''), 'hex'));

describe('RoCEv2 frames', () => {
  it('the ICRC of a frame a ConnectX-4 Lx sent: masked TOS, TTL, checksums and BTH byte 4, stored least significant byte first', () => {
    const c = roceIcrc(CNP, CNP.length - 4);
    expect(new DataView(CNP.buffer).getUint32(CNP.length - 4, true)).toBe(c);
    expect(icrcMatches(CNP)).toBe(true); // the tests' own reader agrees
    // the masked fields do not count; any other byte does
    const ecn = CNP.slice();
    ecn[15] ^= 0x03; // TOS
    ecn[22] ^= 0x01; // TTL
    ecn[46] ^= 0xc0; // FECN/BECN
    expect(roceIcrc(ecn, ecn.length - 4)).toBe(c);
    const qp = CNP.slice();
    qp[49] ^= 1; // the destination QP
    expect(roceIcrc(qp, qp.length - 4)).not.toBe(c);
  });

  it('the IPv4 header checksum of that frame', () => {
    expect(ipv4Checksum(CNP, 14)).toBe(0x9161);
  });

  it('lays out a WRITE ONLY with immediate: RETH then ImmDt, payload padded to 4 bytes, checksums valid', () => {
    const payload = Uint8Array.of(1, 2, 3, 4, 5);
    const p: RocePacket = {
      srcMac: Uint8Array.of(2, 0, 0, 0, 0, 1), dstMac: Uint8Array.of(2, 0, 0, 0, 0, 2), srcIp: 0x0a000001, dstIp: 0x0a000002,
      udpSrcPort: 0xc100, opcode: IbOpcode.WRITE_ONLY_IMM, se: true, destQp: 0x123456, ackReq: true, psn: 0xabcdef,
      reth: { va: 0x7000_0000_1234, rkey: 0xdeadbeef, length: 5 }, imm: 0x01020304, payload, payloadOff: 0, payloadLen: 5,
    };
    const out = new Uint8Array(256);
    const n = encodeRoce(p, out);
    expect(n).toBe(roceFrameBytes(p));
    expect(n).toBe(14 + 20 + 8 + 12 + 16 + 4 + 8 + 4);
    const v = new DataView(out.buffer);
    expect(v.getUint16(16)).toBe(n - 14); // IP total length
    expect(ipv4Checksum(out, 14)).toBe(v.getUint16(24));
    expect(v.getUint16(36)).toBe(4791);
    expect(out[42]).toBe(IbOpcode.WRITE_ONLY_IMM);
    expect(out[43]).toBe(0x80 | 0x40 | (3 << 4)); // SE, MigReq, pad 3
    expect(v.getUint32(46) & 0xffffff).toBe(0x123456);
    expect(v.getUint32(50) >>> 0).toBe((0x80000000 | 0xabcdef) >>> 0);
    expect(v.getUint32(54) * 2 ** 32 + v.getUint32(58)).toBe(0x7000_0000_1234);
    expect(v.getUint32(62) >>> 0).toBe(0xdeadbeef);
    expect(v.getUint32(70)).toBe(0x01020304);
    expect([...out.subarray(74, 82)]).toEqual([1, 2, 3, 4, 5, 0, 0, 0]);
    expect(icrcMatches(out.subarray(0, n))).toBe(true);
  });
});
