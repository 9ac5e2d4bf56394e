import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PayloadPool, type PooledBuf } from '../../../src/rtl/memory/payload_pool.ts';
import { Access, Testbed } from '../../../src/index.ts';
import { rcPair } from '../../support/rc_pair.ts';

describe('payload pool', () => {
  it('reuses a buffer only after its last reference goes', () => {
    const pool = new PayloadPool();
    const a = pool.take(4096);
    a.retain(); // a write in flight
    a.release(); // its taker lets go
    expect(pool.take(4096)).not.toBe(a); // still held by the write
    a.fire(); // the write landed
    expect(a.refs).toBe(0);
    expect(pool.take(100)).not.toBe(a); // another size class (65 .. 128 B)
    const b = pool.take(3000);
    expect(b).toBe(a); // the same class: 2049 .. 4096 B
    expect(b.bytes.length).toBe(3000);
    expect(() => { b.release(); b.release(); }).toThrow(/released more often/);
  });

  it('never hands out a buffer that is still referenced (random take / retain / release)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ op: fc.constantFrom('take', 'retain', 'release'), pick: fc.nat(), len: fc.integer({ min: 1, max: 20000 }) }), { maxLength: 200 }),
        (ops) => {
          const pool = new PayloadPool();
          const live: PooledBuf[] = []; // one entry per reference held
          for (const o of ops) {
            if (o.op === 'take') {
              const b = pool.take(o.len);
              expect(live).not.toContain(b);
              expect(b.bytes.length).toBe(o.len);
              expect(b.refs).toBe(1);
              live.push(b);
            } else if (live.length > 0) {
              const i = o.pick % live.length;
              const b = live[i];
              if (o.op === 'retain') { b.retain(); live.push(b); } else { b.release(); live.splice(i, 1); }
              expect(b.refs).toBe(live.filter((x) => x === b).length);
            }
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('the RDMA WRITE and READ paths return their buffers: a long run allocates a bounded number', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const a = tb.host(0).alloc(8192);
      const b = tb.host(1).alloc(8192);
      const mr0 = await pd0.regMr(a.addr, 8192, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 8192, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
      for (let i = 0; i < 100; i++) {
        tb.host(0).fill(a.addr, 4096, i);
        qp0.postSend({ wrId: i, opcode: i % 2 ? 'RDMA_READ' : 'RDMA_WRITE', sgList: [{ addr: a.addr + (i % 2) * 4096, length: 4096, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
        const [wc] = await cq0.wait(1);
        expect(wc.status).toBe('SUCCESS');
        // a WRITE of fill i, then a READ of it back: no buffer was reused while still in use
        if (i % 2) expect(tb.host(0).read(a.addr + 4096, 4096)).toEqual(new Uint8Array(4096).fill(i - 1));
      }
      expect(tb.hca(0).payloads.allocated + tb.hca(1).payloads.allocated).toBeLessThanOrEqual(4);
    });
  });

  it('a WRITE that runs out of retries keeps its buffer from the pool: copies still on the wire write their own bytes', async () => {
    // an ACK timeout of 8 us (code 1) against a 256 KiB write (~21 us on the 100 Gb/s link):
    // every try times out, up to RETRY_EXC_ERR, while the responder still has copies to write
    // (one retry: an ACK of the first copy, for the same PSN, would otherwise complete it)
    const SZ = 256 * 1024;
    const tb = new Testbed({ hcas: 2, config: { ackTimeout: 1, retryCount: 1 } });
    await tb.run(async () => {
      const { c1, pd0, pd1, cq1, qp0, qp1 } = await rcPair(tb);
      const qp2 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      const qp3 = await pd0.createQp({ sendCq: qp0.attr.sendCq, recvCq: qp0.attr.recvCq });
      await qp2.connect(qp3);
      const [dstA, dstB] = [tb.host(0).alloc(SZ), tb.host(0).alloc(SZ)];
      const [srcA, srcB] = [tb.host(1).alloc(SZ), tb.host(1).alloc(SZ)];
      tb.host(1).fill(srcA.addr, SZ, 0xaa);
      tb.host(1).fill(srcB.addr, SZ, 0xbb);
      const remote = Access.LOCAL_WRITE | Access.REMOTE_WRITE;
      const [mrA, mrB] = [await pd0.regMr(dstA.addr, SZ, remote), await pd0.regMr(dstB.addr, SZ, remote)];
      const [sA, sB] = [await pd1.regMr(srcA.addr, SZ, Access.LOCAL_WRITE), await pd1.regMr(srcB.addr, SZ, Access.LOCAL_WRITE)];
      qp1.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: srcA.addr, length: SZ, lkey: sA.lkey }], remoteAddr: dstA.addr, rkey: mrA.rkey, signaled: true });
      expect((await cq1.wait(1))[0].status).toBe('RETRY_EXC_ERR');
      // the next gather on the adapter must not get A's buffer while its copies are on the wire
      qp2.postSend({ wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: srcB.addr, length: SZ, lkey: sB.lkey }], remoteAddr: dstB.addr, rkey: mrB.rkey, signaled: true });
      await tb.quiesce(); // the copies on the wire have landed
      expect(tb.stats()['tb.hca0.responder'].messages as number).toBeGreaterThan(2); // the copies arrived
      expect(tb.host(0).read(dstA.addr, SZ).every((x) => x === 0xaa)).toBe(true);
      expect(tb.host(0).read(dstB.addr, SZ).every((x) => x === 0xbb)).toBe(true);
      expect(c1.hca.payloads.allocated).toBe(2); // A's buffer was dropped, not recycled
    });
  });
});
