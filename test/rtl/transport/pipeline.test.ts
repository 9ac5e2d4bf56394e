/**
 * The data path as a pipeline: many QPs and many messages in flight, each QP in order, the
 * limits named in the stats, a QP stalled while the others run, RNR and retries per QP.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, type Qp, type WorkCompletion } from '../../../src/index.ts';
import { readDeep } from '../../../bench/verbs.ts';
import { rcPair } from '../../support/rc_pair.ts';

// none of these studies the MR cache: no pre-fill at open (its 12,240 CREATE_MKEYs would run
// under every quiesce and every long wait)
const NO_CACHE = { mrCacheLimit: 0 };

describe('transport pipeline', () => {
  it('8 QPs x 16 outstanding 64 B READs reach 20 M READs per simulated second; one warm READ keeps 2.15 us', async () => {
    const deep = await readDeep(8, 16, 4000, 1000, undefined, 1, NO_CACHE);
    expect(deep.json.simOpsPerSec as number).toBeGreaterThan(20e6);
    // many messages really were in flight at once, on both sides
    expect(deep.stats['tb.hca0.requester'].contexts_peak as number).toBeGreaterThanOrEqual(64);
    expect(deep.stats['tb.hca1.responder'].contexts_peak as number).toBeGreaterThanOrEqual(32);
    // the responder's host reads are the limit: PCIe's outstanding reads fill up
    expect(deep.stats['tb.hca1.pcie'].max_outstanding as number).toBe(64);
    const one = await readDeep(1, 1, 500, 100, undefined, 1, NO_CACHE);
    // 2.15 us per READ end to end (spec/timing.md: ~1.6-2 us ib_read_lat, within 15%)
    expect(1e12 / (one.json.simOpsPerSec as number)).toBeGreaterThan(2.0e6);
    expect(1e12 / (one.json.simOpsPerSec as number)).toBeLessThan(2.3e6);
  });

  it('a stalled QP executes nothing while the other QPs of the adapter run; resumed, it completes in order', async () => {
    const tb = new Testbed({ hcas: 2, config: NO_CACHE });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0: a } = await rcPair(tb);
      const b = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const b1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await b.connect(b1);
      const src = tb.host(0).alloc(4096);
      const dst = tb.host(1).alloc(4096);
      tb.host(0).fill(src.addr, 4096, 0x5a);
      const mr0 = await pd0.regMr(src.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(dst.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = (q: Qp, id: number, off: number): void =>
        q.postSend({ wrId: id, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: 64, lkey: mr0.lkey }], remoteAddr: dst.addr + off, rkey: mr1.rkey, signaled: true });
      tb.hca(0).sq.stallQp(a.qpNum);
      for (let i = 0; i < 4; i++) write(a, 100 + i, i * 64);
      for (let i = 0; i < 4; i++) write(b, 200 + i, 1024 + i * 64);
      const got = await cq0.wait(4, { timeout: 50_000_000 });
      expect(got.map((w) => [w.qpNum, w.wrId])).toEqual([0, 1, 2, 3].map((i) => [b.qpNum, 200 + i]));
      await tb.delay(50_000_000);
      expect(cq0.poll(16)).toEqual([]); // still nothing of the stalled QP
      expect(tb.host(1).read(dst.addr, 256).every((x) => x === 0)).toBe(true);
      tb.hca(0).sq.resumeQp(a.qpNum);
      const rest = await cq0.wait(4, { timeout: 50_000_000 });
      expect(rest.map((w) => [w.qpNum, w.wrId, w.status])).toEqual([0, 1, 2, 3].map((i) => [a.qpNum, 100 + i, 'SUCCESS']));
      expect(tb.host(1).read(dst.addr, 256).every((x) => x === 0x5a)).toBe(true);
    });
  });

  it('SENDs into an empty receive queue: RNR NAK, the QP resends them in order (go-back-N), the other QP is not held up', async () => {
    const tb = new Testbed({ hcas: 2, config: { rnrTimerCode: 1 } }); // 10 us RNR timer
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0, qp1 } = await rcPair(tb);
      const src = tb.host(0).alloc(4096);
      const dst = tb.host(1).alloc(4096);
      for (let i = 0; i < 4; i++) tb.host(0).fill(src.addr + i * 64, 64, 0x10 + i);
      const mr0 = await pd0.regMr(src.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(dst.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      // another pair on the same adapters keeps writing meanwhile
      const b = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const b1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await b.connect(b1);
      for (let i = 0; i < 4; i++) {
        qp0.postSend({ wrId: i, opcode: 'SEND', sgList: [{ addr: src.addr + i * 64, length: 64, lkey: mr0.lkey }], signaled: true });
      }
      b.postSend({ wrId: 99, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: 64, lkey: mr0.lkey }], remoteAddr: dst.addr + 2048, rkey: mr1.rkey, signaled: true });
      const first = await cq0.wait(1, { timeout: 5_000_000 });
      expect(first.map((w) => w.wrId)).toEqual([99]);
      await tb.delay(15_000_000); // an RNR NAK and at least one resend happened meanwhile
      for (let i = 0; i < 4; i++) qp1.postRecv({ wrId: 50 + i, sgList: [{ addr: dst.addr + i * 64, length: 64, lkey: mr1.lkey }] });
      const sends: WorkCompletion[] = await cq0.wait(4, { timeout: 1_000_000_000 });
      expect(sends.map((w) => [w.wrId, w.status])).toEqual([0, 1, 2, 3].map((i) => [i, 'SUCCESS']));
      const recvs = await cq1.wait(4, { timeout: 1_000_000_000 });
      expect(recvs.map((w) => [w.wrId, w.status, w.byteLen])).toEqual([0, 1, 2, 3].map((i) => [50 + i, 'SUCCESS', 64]));
      for (let i = 0; i < 4; i++) expect(tb.host(1).read(dst.addr + i * 64, 64).every((x) => x === 0x10 + i)).toBe(true);
      const st = tb.stats();
      expect(st['tb.hca1.responder'].rnr_naks as number).toBeGreaterThanOrEqual(1);
      expect(st['tb.hca0.requester'].retries as number).toBeGreaterThanOrEqual(1);
    });
  });

  it('a failing READ flushes the later messages of its QP only; the other QP completes', async () => {
    const tb = new Testbed({ hcas: 2, config: NO_CACHE });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0 } = await rcPair(tb);
      const b = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const b1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await b.connect(b1);
      const buf = tb.host(0).alloc(4096);
      const rem = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(buf.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(rem.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ);
      const read = (q: Qp, id: number, rkey: number): void =>
        q.postSend({ wrId: id, opcode: 'RDMA_READ', sgList: [{ addr: buf.addr + (id % 8) * 64, length: 64, lkey: mr0.lkey }], remoteAddr: rem.addr, rkey, signaled: true });
      read(qp0, 1, mr1.rkey);
      read(qp0, 2, mr1.rkey ^ 0xff); // a stale tag: remote access error
      read(qp0, 3, mr1.rkey);
      read(qp0, 4, mr1.rkey);
      for (let i = 0; i < 4; i++) read(b, 10 + i, mr1.rkey);
      const wcs = await cq0.wait(8, { timeout: 100_000_000 });
      const of = (q: Qp): [number, string][] => wcs.filter((w) => w.qpNum === q.qpNum).map((w) => [Number(w.wrId), w.status]);
      expect(of(qp0)).toEqual([[1, 'SUCCESS'], [2, 'REM_ACCESS_ERR'], [3, 'WR_FLUSH_ERR'], [4, 'WR_FLUSH_ERR']]);
      expect(of(b)).toEqual([10, 11, 12, 13].map((i) => [i, 'SUCCESS']));
    });
  });

  it('a WRITE waits for every earlier READ of its QP to read its data, not only the one just before (a zero-length READ between them)', async () => {
    const tb = new Testbed({ hcas: 2, config: NO_CACHE });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const local = tb.host(0).alloc(16384);
      const remote = tb.host(1).alloc(16384);
      for (let i = 0; i < 16384; i++) tb.host(1).write(remote.addr + i, new Uint8Array([(i * 7) & 0xff]));
      const expected = tb.host(1).read(remote.addr + 5000, 5000);
      const mr0 = await pd0.regMr(local.addr, 16384, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(remote.addr, 16384, Access.LOCAL_WRITE | Access.REMOTE_READ | Access.REMOTE_WRITE);
      qp0.postSend([
        // 10,000 bytes into two SGEs over the same 5,000 local bytes: the second half wins
        { wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: local.addr, length: 5000, lkey: mr0.lkey }, { addr: local.addr, length: 5000, lkey: mr0.lkey }], remoteAddr: remote.addr, rkey: mr1.rkey },
        { wrId: 2, opcode: 'RDMA_READ', sgList: [], remoteAddr: remote.addr, rkey: mr1.rkey },
        // a later WRITE into the range the first READ reads (inline: it gathers nothing, so the
        // requester sends it at once): the READ must not see it
        { wrId: 3, opcode: 'RDMA_WRITE', sgList: [{ addr: local.addr + 8000, length: 1, lkey: mr0.lkey }], inline: true, remoteAddr: remote.addr + 5144, rkey: mr1.rkey, signaled: true },
      ]);
      expect((await cq0.wait(1)).map((w) => [w.wrId, w.status])).toEqual([[3, 'SUCCESS']]);
      expect(tb.host(0).read(local.addr, 5000)).toEqual(expected);
    });
  });
});
