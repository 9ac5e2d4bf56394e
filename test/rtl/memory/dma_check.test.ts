/**
 * The DMA-ownership checker catches what it is for: planted violations (a driver that lets a
 * registration's pages go while the device still reaches them) stop the run with the frame, the
 * address, the module and the work request; in record mode they are counted.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../../src/index.ts';
import { DmaViolationError } from '../../../src/rtl/memory/dma_check.ts';
import { rcPair } from '../../support/rc_pair.ts';

describe('DMA checker', () => {
  it('stops the run at a peer WRITE into a frame the registration no longer pins, naming frame, address, module and QP', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    let qpn = -1;
    let frame = -1;
    const run = tb.run(async () => {
      const p = await rcPair(tb);
      qpn = p.qp1.qpNum;
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      frame = mr1.pins![0];
      tb.host(1).unpin(mr1.pins!); // the planted bug: the pages let go while the rkey is live
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + 8, length: 64, lkey: mr0.lkey }], remoteAddr: b.addr + 100, rkey: mr1.rkey, signaled: true });
      await p.cq0.wait(1);
    });
    const e = await run.then(() => null, (x: unknown) => x);
    expect(e).toBeInstanceOf(DmaViolationError);
    const v = (e as DmaViolationError).violation;
    expect(v).toMatchObject({ kind: 'write', port: 'responder', frame, addr: frame + 100, length: 64, state: 'not pinned', qpn });
    expect((e as Error).message).toContain(`tb.hca1.responder write of 64 B at 0x${(frame + 100).toString(16)}`);
    expect((e as Error).message).toContain(`QP 0x${qpn.toString(16)}`);
  });

  it('records (record mode) a gather from a freed frame, with the WQE, and the run goes on', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
    tb.checkers[0].mode = 'record';
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(8192);
      const b = tb.host(1).alloc(8192);
      const mr0 = await p.pd0.regMr(a.addr, 8192, Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 8192, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      tb.host(0).unpin(mr0.pins!);
      await tb.host(0).munmap(a.addr, 8192); // unpinned: the frames are free now
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8192, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
    });
    const c = tb.checkers[0];
    expect(c.violationCount).toBe(2);
    expect(c.violations[0]).toMatchObject({ kind: 'read', port: 'requester', state: 'free', wqe: 0, length: 4096 });
    expect(tb.checkers[1].violationCount).toBe(0);
    expect(c.checked).toBeGreaterThan(2);
  });

  it('is off unless asked outside vitest, and trace: { checkDma } needs no VCD', () => {
    const saved = Testbed.checkDmaByDefault;
    try {
      Testbed.checkDmaByDefault = false;
      expect(new Testbed().checkers).toEqual([]);
      expect(new Testbed({ hcas: 2, trace: { checkDma: true } }).checkers.length).toBe(2);
      expect(() => new Testbed({ trace: { depth: 1 } as never })).toThrow(/trace without vcd/);
    } finally {
      Testbed.checkDmaByDefault = saved;
    }
    expect(new Testbed().checkers.length).toBe(1); // under vitest: on
  });
});
