/**
 * On-demand paging end to end (spec/semantics.md "On-demand paging"): the ATU's FAULT, the
 * page-fault unit's EQE and QP stall, the driver's fault handler (UMR of the MTTs, then
 * PAGE_FAULT_RESUME), and the work request going on from where it stopped.
 */
import { describe, expect, it } from 'vitest';
import { Access, SIZE_MAX, Testbed } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';
import { writeCase } from '../support/odp_case.ts';

const US = 1_000_000;

describe('on-demand paging: requester faults', () => {
  it('a cold RDMA WRITE from an ODP MR faults once, is mapped by the driver, resumes, and lands intact; the next one is warm', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      expect(await s.write(1)).toBeGreaterThan(100 * US);
      expect(await s.write(2)).toBeLessThan(10 * US);
      expect(tb.host(1).read(s.b.addr, 4096)).toEqual(s.pattern);
      expect(s.omr.odpStats()).toMatchObject({ pageFaults: 1, pageFaultsHandled: 1 });
    });
    expect(tb.stats()['tb.hca0.pagefault']).toMatchObject({ faults: 1, resumes: 1 });
  });
});

describe('on-demand paging: responder faults, invalidation, munmap', () => {
  it('an RDMA READ of a cold ODP MR at the responder: RNR-NAK meanwhile, subtype RDMA EQE, then the retry succeeds', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(8192);
      tb.host(1).write(b.addr + 4096, new Uint8Array([1, 2, 3, 4]));
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const omr = await p.pd1.regMr(b.addr, 8192, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_READ);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: a.addr, length: 4, lkey: mr0.lkey }], remoteAddr: b.addr + 4096, rkey: omr.rkey, signaled: true });
      const [wc] = await p.cq0.wait(1);
      expect(wc.status).toBe('SUCCESS');
      expect([...tb.host(0).read(a.addr, 4)]).toEqual([1, 2, 3, 4]);
      expect(omr.odpStats()).toMatchObject({ pageFaults: 1, pageFaultsHandled: 1 });
    });
    const st = tb.stats();
    expect(st['tb.hca1.pagefault']).toMatchObject({ faults: 1, resumes: 1 });
    expect(st['tb.hca1.responder'].page_fault_rnr_naks).toBeGreaterThanOrEqual(1);
  });

  it('a SEND into a cold ODP receive buffer faults (subtype WQE without REQUESTOR) and is received after the retry', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      tb.host(0).write(a.addr, new Uint8Array([9, 8, 7]));
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const omr = await p.pd1.regMr(b.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      p.qp1.postRecv({ wrId: 7, sgList: [{ addr: b.addr, length: 64, lkey: omr.lkey }] });
      p.qp0.postSend({ wrId: 1, opcode: 'SEND', sgList: [{ addr: a.addr, length: 3, lkey: mr0.lkey }], signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      const [rc] = await p.cq1.wait(1);
      expect([rc.status, rc.wrId, rc.byteLen]).toEqual(['SUCCESS', 7, 3]);
      expect([...tb.host(1).read(b.addr, 3)]).toEqual([9, 8, 7]);
      expect(omr.odpStats().pageFaults).toBe(1);
    });
  });

  it('madviseDontNeed zaps the mapped pages by UMR before the frames are freed; the next access faults again and sees the new (zeroed) page', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      await s.write(1);
      expect(tb.host(1).read(s.b.addr, 4096)).toEqual(s.pattern);
      await tb.host(0).madviseDontNeed(s.a.addr, 4096);
      expect(s.omr.odpStats()).toMatchObject({ pageInvalidations: 1, pageInvalidationsHandled: 1 });
      const t = await s.write(2);
      expect(t).toBeGreaterThan(200 * US); // faulted again
      expect(tb.host(1).read(s.b.addr, 4096)).toEqual(new Uint8Array(4096)); // the new page is zero
      await tb.quiesce(); // the handler counts a fault once its PAGE_FAULT_RESUME's completion EQE is in
      expect(s.omr.odpStats()).toMatchObject({ pageFaults: 2, pageFaultsHandled: 2 });
    });
  });

  it('munmap, then a local access: the fault resumes with ERROR and the WQE completes LOC_ACCESS_ERR; a remote one gets REM_ACCESS_ERR', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const omr0 = await p.pd0.regMr(a.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const omr1 = await p.pd1.regMr(b.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      await tb.host(0).munmap(a.addr, 4096);
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: omr0.lkey }], remoteAddr: b.addr, rkey: omr1.rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('LOC_ACCESS_ERR');
      expect(tb.stats()['tb.hca0.pagefault']).toMatchObject({ faults: 1, resume_errors: 1 });
      // a second pair: the responder's buffer unmapped
      const p2 = await rcPair(tb);
      const c = tb.host(0).alloc(4096);
      const d = tb.host(1).alloc(4096);
      const mr2 = await p2.pd0.regMr(c.addr, 4096, Access.LOCAL_WRITE);
      const omr3 = await p2.pd1.regMr(d.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      await tb.host(1).munmap(d.addr, 4096);
      p2.qp0.postSend({ wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: c.addr, length: 8, lkey: mr2.lkey }], remoteAddr: d.addr, rkey: omr3.rkey, signaled: true });
      expect((await p2.cq0.wait(1))[0].status).toBe('REM_ACCESS_ERR');
    });
  });
});

describe('on-demand paging: prefetch (adviseMr)', () => {
  it('PREFETCH with flush maps the pages: the first access takes no fault', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      await s.p.pd0.adviseMr('PREFETCH', [{ addr: s.a.addr, length: 4096, lkey: s.omr.lkey }], { flush: true });
      const t = await s.write(1);
      expect(t).toBeLessThan(10 * US);
      expect(s.omr.odpStats()).toMatchObject({ pageFaults: 0, pagePrefetch: 1 });
      expect(tb.stats()['tb.hca0.pagefault']?.faults ?? 0).toBe(0);
    });
  });

  it('PREFETCH_NO_FAULT maps only pages the process has present; a dropped page still faults', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await writeCase(tb, 8192);
      await tb.host(0).madviseDontNeed(s.a.addr + 4096, 4096);
      await s.p.pd0.adviseMr('PREFETCH_NO_FAULT', [{ addr: s.a.addr, length: 8192, lkey: s.omr.lkey }], { flush: true });
      expect(s.omr.odpStats().pageFaults).toBe(0);
      await s.write(1);
      expect(s.omr.odpStats().pageFaults).toBe(1); // the dropped page
    });
  });

  it('adviseMr refuses a key that names no ODP MR of the PD, a range outside the MR, and a bad advice', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      const pinned = await s.p.pd0.regMr(s.a.addr, 4096, Access.LOCAL_WRITE);
      const pdOther = await s.p.c0.allocPd();
      const e = { addr: s.a.addr, length: 4096, lkey: s.omr.lkey };
      await expect(s.p.pd0.adviseMr('PREFETCH', [{ ...e, lkey: pinned.lkey }])).rejects.toMatchObject({ errno: 'EINVAL' });
      await expect(pdOther.adviseMr('PREFETCH', [e])).rejects.toMatchObject({ errno: 'EINVAL' });
      await expect(s.p.pd0.adviseMr('PREFETCH', [{ ...e, length: 8192 }])).rejects.toMatchObject({ errno: 'EINVAL' });
      await expect(s.p.pd0.adviseMr('FLUSH' as 'PREFETCH', [e])).rejects.toMatchObject({ errno: 'EINVAL' });
      await expect(s.p.pd0.adviseMr('PREFETCH', [])).rejects.toMatchObject({ errno: 'EINVAL' });
    });
  });
});

describe('on-demand paging: capabilities', () => {
  it('an RC ODP capability turned off: queryDevice reports it, and an operation that needs it completes with an access error instead of mapping', async () => {
    const tb = new Testbed({ hcas: 2, caps: { rcOdpCaps: ['SEND', 'RECV', 'READ', 'ATOMIC'] } });
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      const attr = await s.p.c0.queryDevice();
      expect([...attr.odpCaps.rcOdpCaps].sort()).toEqual(['ATOMIC', 'READ', 'RECV', 'SEND']);
      s.p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: s.a.addr, length: 64, lkey: s.omr.lkey }], remoteAddr: s.b.addr, rkey: (await s.p.pd1.regMr(s.b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE)).rkey, signaled: true });
      expect((await s.p.cq0.wait(1))[0].status).toBe('LOC_ACCESS_ERR');
    });
  });
});

describe('on-demand paging: implicit ODP', () => {
  it('regMr(0, SIZE_MAX, ON_DEMAND): one key for the whole address space; the first fault in a GiB makes its child, later ones only map', async () => {
    const tb = new Testbed({ hcas: 2 });
    const t: number[] = [];
    await tb.run(async () => {
      const p = await rcPair(tb);
      expect((await p.c0.queryDevice()).odpCaps.generalCaps.has('IMPLICIT')).toBe(true);
      const imr = await p.pd0.regMr(0, SIZE_MAX, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_READ);
      expect([imr.iova, imr.length]).toEqual([0, SIZE_MAX]);
      const a = tb.host(0).alloc(3 * 4096);
      const b = tb.host(1).alloc(4096);
      tb.host(0).write(a.addr, Uint8Array.of(1, 2, 3));
      tb.host(0).write(a.addr + 8192, Uint8Array.of(7, 8, 9));
      const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = async (off: number): Promise<void> => {
        const t0 = tb.now;
        p.qp0.postSend({ wrId: off, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + off, length: 3, lkey: imr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
        expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
        t.push(tb.now - t0);
      };
      await write(0); // a new GiB: the child is made (CREATE_MKEY) and written into the KSM table
      expect([...tb.host(1).read(b.addr, 3)]).toEqual([1, 2, 3]);
      await write(8192); // the same GiB: only the page is mapped
      expect([...tb.host(1).read(b.addr, 3)]).toEqual([7, 8, 9]);
      await write(8192); // warm
      await tb.quiesce(); // the last resume's completion EQE
      expect(imr.odpStats()).toMatchObject({ pageFaults: 2, pageFaultsHandled: 2 });
      // the peer reads through the implicit rkey: a responder fault, then the RNR retry
      const c = tb.host(0).alloc(4096);
      tb.host(0).write(c.addr, Uint8Array.of(0x5a));
      const d = tb.host(1).alloc(4096);
      const mrd = await p.pd1.regMr(d.addr, 4096, Access.LOCAL_WRITE);
      p.qp1.postSend({ wrId: 9, opcode: 'RDMA_READ', sgList: [{ addr: d.addr, length: 1, lkey: mrd.lkey }], remoteAddr: c.addr, rkey: imr.rkey, signaled: true });
      expect((await p.cq1.wait(1))[0].status).toBe('SUCCESS');
      expect(tb.host(1).read(d.addr, 1)[0]).toBe(0x5a);
      // prefetch through the implicit key
      const e = tb.host(0).alloc(4096);
      await p.pd0.adviseMr('PREFETCH', [{ addr: e.addr, length: 4096, lkey: imr.lkey }], { flush: true });
      expect(imr.odpStats().pagePrefetch).toBe(1);
      await imr.dereg();
    });
    expect(t[0] - t[1]).toBeGreaterThan(200e6); // the child's CREATE_MKEY (230 us)
    expect(t[2]).toBeLessThan(10e6);
  });

  it('without the IMPLICIT capability, regMr(0, SIZE_MAX) is EOPNOTSUPP', async () => {
    const tb = new Testbed({ hcas: 1, caps: { odpImplicit: false } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      expect((await ctx.queryDevice()).odpCaps.generalCaps.has('IMPLICIT')).toBe(false);
      await expect(pd.regMr(0, SIZE_MAX, Access.ON_DEMAND | Access.LOCAL_WRITE)).rejects.toMatchObject({ errno: 'EOPNOTSUPP' });
      await expect(pd.regMr(0, SIZE_MAX, Access.LOCAL_WRITE)).rejects.toMatchObject({ errno: 'EOPNOTSUPP' });
    });
  });
});

describe('on-demand paging: RNR with messages in flight behind the fault', () => {
  it('WRITEs pipelined behind a faulting one are discarded, not answered, and all succeed on the retry (no RETRY_EXC_ERR)', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const o = tb.host(1).alloc(4096);
      tb.host(0).write(a.addr, Uint8Array.of(0x11, 0x22, 0x33));
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await p.pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const omr = await p.pd1.regMr(o.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      p.qp0.postSend([
        { wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 1, lkey: mr0.lkey }], remoteAddr: b.addr + 4095, rkey: mr1.rkey },
        { wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + 1, length: 1, lkey: mr0.lkey }], remoteAddr: o.addr, rkey: omr.rkey },
        { wrId: 3, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + 2, length: 1, lkey: mr0.lkey }], remoteAddr: o.addr + 4095, rkey: omr.rkey, signaled: true },
      ]);
      const [wc] = await p.cq0.wait(1);
      expect([wc.wrId, wc.status]).toEqual([3, 'SUCCESS']);
      expect([tb.host(1).read(b.addr + 4095, 1)[0], tb.host(1).read(o.addr, 1)[0], tb.host(1).read(o.addr + 4095, 1)[0]]).toEqual([0x11, 0x22, 0x33]);
    });
    expect(tb.stats()['tb.hca1.responder'].out_of_sequence).toBeGreaterThanOrEqual(1);
  });
});

describe('on-demand paging: a range with a page the process unmapped', () => {
  it('behaves as a pinned MR would: an access within the mapped pages works, one that reaches the unmapped page fails', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(2 * 4096);
      tb.host(0).write(a.addr, Uint8Array.of(0x77));
      const mr0 = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const omr = await p.pd1.regMr(b.addr, 2 * 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      await tb.host(1).munmap(b.addr + 4096, 4096);
      // the receive SGE spans both pages; a 1-byte SEND needs only the first
      p.qp1.postRecv({ wrId: 1, sgList: [{ addr: b.addr, length: 2 * 4096, lkey: omr.lkey }] });
      p.qp0.postSend({ wrId: 1, opcode: 'SEND', sgList: [{ addr: a.addr, length: 1, lkey: mr0.lkey }], signaled: true });
      expect((await p.cq1.wait(1))[0]).toMatchObject({ wrId: 1, status: 'SUCCESS', byteLen: 1 });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      expect(tb.host(1).read(b.addr, 1)[0]).toBe(0x77);
      // a SEND that reaches the unmapped page fails, as on a pinned MR over unmapped memory
      p.qp1.postRecv({ wrId: 2, sgList: [{ addr: b.addr + 4090, length: 100, lkey: omr.lkey }] });
      p.qp0.postSend({ wrId: 2, opcode: 'SEND', sgList: [{ addr: a.addr, length: 50, lkey: mr0.lkey }], signaled: true });
      expect((await p.cq1.wait(1))[0]).toMatchObject({ wrId: 2, status: 'LOC_ACCESS_ERR' });
      expect((await p.cq0.wait(1))[0].status).toBe('REM_OP_ERR');
    });
  });
});
