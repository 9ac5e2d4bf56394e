/**
 * The pcap of the wire against what the run posted: one run over two adapters at a 1024-byte
 * path MTU posts every RC operation (multi-packet WRITE, SEND and READ, with immediate, with
 * invalidate, both atomics, a SEND that meets no receive: RNR NAK), and tshark's InfiniBand
 * dissector must read back each packet's opcode, QPN, PSN, keys, addresses, lengths, syndromes
 * and payload bytes, with no malformed packet or expert warning, good IPv4 checksums and ICRCs.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Access, Testbed, type Qp } from '../../../src/index.ts';
import { icrcMatches, readPcap, tsharkFields } from '../../support/tshark.ts';
import { tempDir } from '../../support/tmp.ts';

const FIELDS = [
  'frame.number', 'ip.src', 'ip.dst', 'ip.checksum.status', 'udp.dstport', 'frame.protocols', '_ws.expert.message', '_ws.malformed',
  'infiniband.bth.opcode', 'infiniband.bth.se', 'infiniband.bth.m', 'infiniband.bth.padcnt', 'infiniband.bth.p_key', 'infiniband.bth.destqp',
  'infiniband.bth.a', 'infiniband.bth.psn', 'infiniband.reth.va', 'infiniband.reth.r_key', 'infiniband.reth.dmalen',
  'infiniband.aeth.syndrome', 'infiniband.aeth.msn', 'infiniband.atomiceth.swapdt', 'infiniband.atomiceth.cmpdt',
  'infiniband.atomicacketh.origremdt', 'infiniband.immdt', 'infiniband.ieth', 'data.data',
];

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const n = (s: string): number => Number(s);
/** Wireshark 4.0 lists ImmDt and IETH twice (the header and its value): the first. */
const first = (s: string): string => s.split(',')[0];

describe('pcap of the wire', () => {
  it('shows every RC operation as Wireshark reads RoCEv2: opcodes, PSNs, headers, payload, checksums', async () => {
    const dir = tempDir('mlx5sim-pcap-');
    const pcap = join(dir, 'ops.pcap');
    const tb = new Testbed({ hcas: 2, trace: { pcap } });
    const MTU = 1024;
    const want: { qp0: number; qp1: number; rkey: number; remote: number; srcBytes: Uint8Array; invKey: number } = { qp0: 0, qp1: 0, rkey: 0, remote: 0, srcBytes: new Uint8Array(), invKey: 0 };
    await tb.run(async () => {
      const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
      const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
      const [cq0, cq1] = [await c0.createCq(64), await c1.createCq(64)];
      const qp0: Qp = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const qp1: Qp = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp0.connect(qp1, { mtu: MTU });
      const a = tb.host(0).alloc(4 * 4096);
      const b = tb.host(1).alloc(4 * 4096);
      const src = new Uint8Array(3000).map((_, i) => (i * 7 + 3) & 0xff);
      tb.host(0).write(a.addr, src);
      const mr0 = await pd0.regMr(a.addr, 4 * 4096, Access.LOCAL_WRITE);
      const all = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC;
      const mr1 = await pd1.regMr(b.addr, 4 * 4096, all);
      // a fast-registration MR: the one kind SEND_WITH_INV may invalidate
      const inv = await pd1.allocMr('MEM_REG', 1);
      qp1.postSend({ wrId: 50, opcode: 'REG_MR', mr: inv, key: inv.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_WRITE, signaled: true });
      await cq1.wait(1, { timeout: 1e9 });
      Object.assign(want, { qp0: qp0.qpNum, qp1: qp1.qpNum, rkey: mr1.rkey, remote: b.addr, srcBytes: src, invKey: inv.rkey });
      const sge = (off: number, len: number) => [{ addr: a.addr + off, length: len, lkey: mr0.lkey }];
      for (let i = 0; i < 3; i++) qp1.postRecv({ wrId: 100 + i, sgList: [{ addr: b.addr + 8192, length: 4096, lkey: mr1.lkey }] });
      qp0.postSend([
        { wrId: 1, opcode: 'RDMA_WRITE', sgList: sge(0, 3000), remoteAddr: b.addr, rkey: mr1.rkey, signaled: true },
        { wrId: 2, opcode: 'RDMA_WRITE_WITH_IMM', sgList: sge(0, 10), remoteAddr: b.addr + 4000, rkey: mr1.rkey, immData: 0x1234abcd, signaled: true },
        { wrId: 3, opcode: 'SEND', sgList: sge(0, 2500), signaled: true, solicited: true },
        { wrId: 4, opcode: 'SEND_WITH_INV', sgList: sge(0, 6), invalidateRkey: inv.rkey, signaled: true },
        { wrId: 5, opcode: 'RDMA_READ', sgList: sge(4096, 2500), remoteAddr: b.addr, rkey: mr1.rkey, signaled: true },
        { wrId: 6, opcode: 'ATOMIC_FETCH_AND_ADD', sgList: sge(8192, 8), remoteAddr: b.addr + 4096, rkey: mr1.rkey, compareAdd: 5, signaled: true },
        { wrId: 7, opcode: 'ATOMIC_CMP_AND_SWP', sgList: sge(8200, 8), remoteAddr: b.addr + 4096, rkey: mr1.rkey, compareAdd: 5, swap: 0x0102030405060708n, signaled: true },
      ]);
      const wcs = await cq0.wait(7, { timeout: 1e9 });
      expect(wcs.map((w) => w.status)).toEqual(Array(7).fill('SUCCESS'));
      // a SEND with no receive posted: RNR NAK, then it goes again once one is
      qp0.postSend({ wrId: 8, opcode: 'SEND', sgList: sge(0, 4), signaled: true });
      await tb.delay(5_000_000);
      qp1.postRecv({ wrId: 103, sgList: [{ addr: b.addr + 8192, length: 4096, lkey: mr1.lkey }] });
      const [wc] = await cq0.wait(1, { timeout: 1e10 });
      expect(wc.status).toBe('SUCCESS');
    });
    await tb.close();
    expect(tb.traceFiles).toContain(pcap);

    const rows = tsharkFields(pcap, FIELDS);
    // nothing malformed, no expert warning (bad checksum included), every frame RoCEv2
    for (const r of rows) {
      expect(r['_ws.malformed'], `frame ${r['frame.number']}`).toBe('');
      expect(r['_ws.expert.message'], `frame ${r['frame.number']}`).toBe('');
      expect(r['frame.protocols']).toMatch(/^eth:ethertype:ip:udp:infiniband/);
      expect(r['udp.dstport']).toBe('4791');
      expect(r['ip.checksum.status']).toBe('1'); // good
      expect(r['infiniband.bth.p_key']).toBe('65535');
      expect(r['infiniband.bth.m']).toBe('1');
    }
    const { frames } = readPcap(pcap);
    expect(frames.length).toBe(rows.length);
    for (const f of frames) expect(icrcMatches(f.bytes)).toBe(true);
    // the check would see a flipped payload bit
    const bad = frames[0].bytes.slice();
    bad[bad.length - 10] ^= 1;
    expect(icrcMatches(bad)).toBe(false);
    // times never go back
    for (let i = 1; i < frames.length; i++) expect(frames[i].ns >= frames[i - 1].ns).toBe(true);

    const req = rows.filter((r) => r['ip.src'] === '10.0.0.1');
    const rsp = rows.filter((r) => r['ip.src'] === '10.0.0.2');
    const qp1 = `0x${want.qp1.toString(16).padStart(6, '0')}`;
    const qp0 = `0x${want.qp0.toString(16).padStart(6, '0')}`;
    for (const r of req) expect(r['infiniband.bth.destqp']).toBe(qp1);
    for (const r of rsp) expect(r['infiniband.bth.destqp']).toBe(qp0);
    // requests: opcode, PSN (a READ takes the PSNs of its 3 responses), ack request on the last packet
    const reqOps = req.map((r) => [n(r['infiniband.bth.opcode']), n(r['infiniband.bth.psn']), r['infiniband.bth.a']]);
    expect(reqOps).toEqual([
      [0x06, 0, '0'], [0x07, 1, '0'], [0x08, 2, '1'], // WRITE 3000 B: first, middle, last
      [0x0b, 3, '1'], // WRITE with immediate, one packet
      [0x00, 4, '0'], [0x01, 5, '0'], [0x02, 6, '1'], // SEND 2500 B
      [0x17, 7, '1'], // SEND with invalidate, one packet
      [0x0c, 8, '1'], // READ 2500 B: PSNs 8, 9, 10
      [0x14, 11, '1'], [0x13, 12, '1'], // FETCH_ADD, CMP_SWAP
      [0x04, 13, '1'], [0x04, 13, '1'], // SEND, RNR NAK'd, sent again with the same PSN
    ]);
    const va = (x: number): string => `0x${x.toString(16).padStart(16, '0')}`;
    const key = `0x${want.rkey.toString(16).padStart(8, '0')}`;
    expect([req[0]['infiniband.reth.va'], req[0]['infiniband.reth.r_key'], req[0]['infiniband.reth.dmalen']]).toEqual([va(want.remote), key, '3000']);
    expect(req[1]['infiniband.reth.va']).toBe('');
    expect([req[3]['infiniband.reth.va'], req[3]['infiniband.reth.dmalen'], first(req[3]['infiniband.immdt'])]).toEqual([va(want.remote + 4000), '10', '1234abcd']);
    expect(req[6]['infiniband.bth.se']).toBe('1'); // solicited: the last packet of the SEND
    expect(req[4]['infiniband.bth.se']).toBe('0');
    expect(first(req[7]['infiniband.ieth'])).toBe(want.invKey.toString(16).padStart(8, '0'));
    expect([req[8]['infiniband.reth.va'], req[8]['infiniband.reth.r_key'], req[8]['infiniband.reth.dmalen']]).toEqual([va(want.remote), key, '2500']);
    expect(n(req[9]['infiniband.atomiceth.swapdt'])).toBe(5);
    expect(BigInt(req[10]['infiniband.atomiceth.swapdt'])).toBe(0x0102030405060708n);
    expect(n(req[10]['infiniband.atomiceth.cmpdt'])).toBe(5);
    // payload: the bytes posted, cut at the MTU; padding to 4 bytes counted in the BTH
    expect(req.slice(0, 3).map((r) => r['data.data']).join('')).toBe(hex(want.srcBytes));
    // (tshark 4.0 shows the pad bytes as part of the data)
    expect(req[3]['data.data']).toBe(hex(want.srcBytes.subarray(0, 10)) + '0000');
    expect(n(req[3]['infiniband.bth.padcnt'])).toBe(2);
    // answers: ACKs name the message's last PSN, READ responses take the READ's PSNs, MSN counts messages
    const rspOps = rsp.map((r) => [n(r['infiniband.bth.opcode']), n(r['infiniband.bth.psn']), r['infiniband.aeth.syndrome'], r['infiniband.aeth.msn']]);
    expect(rspOps).toEqual([
      [0x11, 2, '31', '1'],
      [0x11, 3, '31', '2'],
      [0x11, 6, '31', '3'],
      [0x11, 7, '31', '4'],
      [0x0d, 8, '31', '5'], [0x0e, 9, '', ''], [0x0f, 10, '31', '5'], // READ response first, middle, last
      [0x12, 11, '31', '6'], [0x12, 12, '31', '7'], // atomic ACKs
      [0x11, 13, String(0x20 | 12), '7'], // RNR NAK with the timer code (12: 0.64 ms)
      [0x11, 13, '31', '8'],
    ]);
    expect(rsp.slice(4, 7).map((r) => r['data.data']).join('')).toBe(hex(want.srcBytes.subarray(0, 2500)));
    expect(n(rsp[7]['infiniband.atomicacketh.origremdt'])).toBe(0); // the word was 0, FETCH_ADD made it 5
    expect(n(rsp[8]['infiniband.atomicacketh.origremdt'])).toBe(5);
  });
});
