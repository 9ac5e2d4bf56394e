import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';

describe('verbs end to end (two adapters)', () => {
  it('RDMA WRITE, READ, SEND and atomics move the bytes and complete', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const c0 = await tb.openDevice(0);
      const c1 = await tb.openDevice(1);
      const pd0 = await c0.allocPd();
      const pd1 = await c1.allocPd();
      const cq0 = await c0.createCq(64);
      const cq1 = await c1.createCq(64);
      const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp0.connect(qp1);
      expect((await qp0.query()).state).toBe('RTS');
      const a = tb.host(0).alloc(8192);
      const b = tb.host(1).alloc(8192);
      tb.host(0).write(a.addr, Uint8Array.from({ length: 4096 }, (_, i) => i & 0xff));
      const mr0 = await pd0.regMr(a.addr, 8192, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 8192, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC);
      // WRITE 4 KB
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 4096, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [w] = await cq0.wait(1);
      expect(w).toMatchObject({ wrId: 1, status: 'SUCCESS', opcode: 'RDMA_WRITE', byteLen: 4096 });
      expect(tb.host(1).read(b.addr, 4096)).toEqual(tb.host(0).read(a.addr, 4096));
      // READ it back into the second page
      qp0.postSend({ wrId: 2, opcode: 'RDMA_READ', sgList: [{ addr: a.addr + 4096, length: 100, lkey: mr0.lkey }], remoteAddr: b.addr + 5, rkey: mr1.rkey, signaled: true });
      const [r] = await cq0.wait(1);
      expect(r).toMatchObject({ status: 'SUCCESS', opcode: 'RDMA_READ', byteLen: 100 });
      expect(tb.host(0).read(a.addr + 4096, 100)).toEqual(tb.host(0).read(a.addr + 5, 100));
      // SEND with immediate into a posted receive
      qp1.postRecv({ wrId: 7, sgList: [{ addr: b.addr + 4096, length: 64, lkey: mr1.lkey }] });
      qp0.postSend({ wrId: 3, opcode: 'SEND_WITH_IMM', immData: 0xabcd, sgList: [{ addr: a.addr, length: 32, lkey: mr0.lkey }], signaled: true });
      const [rv] = await cq1.wait(1);
      expect(rv).toMatchObject({ wrId: 7, status: 'SUCCESS', opcode: 'RECV', byteLen: 32, immData: 0xabcd });
      expect([...rv.wcFlags]).toEqual(['WITH_IMM']);
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 3, status: 'SUCCESS', opcode: 'SEND' });
      // fetch-and-add on 8 bytes
      tb.host(1).write(b.addr + 64, new Uint8Array([5, 0, 0, 0, 0, 0, 0, 0]));
      qp0.postSend({ wrId: 4, opcode: 'ATOMIC_FETCH_AND_ADD', compareAdd: 10, sgList: [{ addr: a.addr + 8000, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr + 64, rkey: mr1.rkey, signaled: true });
      expect((await cq0.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'FETCH_ADD', byteLen: 8 });
      expect(tb.host(1).read(b.addr + 64, 1)[0]).toBe(15);
      expect(tb.host(0).read(a.addr + 8000, 1)[0]).toBe(5);
      // a stale rkey: remote access error, both QPs to ERR, then flush
      qp0.postSend({ wrId: 5, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: (mr1.rkey + 1) >>> 0, signaled: true });
      qp0.postSend({ wrId: 6, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey });
      const errs = await cq0.wait(2);
      expect(errs.map((e) => e.status)).toEqual(['REM_ACCESS_ERR', 'WR_FLUSH_ERR']);
      expect((await qp0.query()).state).toBe('ERR');
      expect((await qp1.query()).state).toBe('ERR');
    });
  });
});
