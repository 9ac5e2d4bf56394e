/**
 * On-demand paging end to end (spec/semantics.md "On-demand paging"): the ATU's FAULT, the
 * page-fault unit's EQE and QP stall, the driver's fault handler (UMR of the MTTs, then
 * PAGE_FAULT_RESUME), and the work request going on from where it stopped.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';

const US = 1_000_000;

async function writeCase(tb: Testbed, size: number) {
  const p = await rcPair(tb);
  const a = tb.host(0).alloc(size, { hugePages: size > 4096 });
  const b = tb.host(1).alloc(size, { hugePages: size > 4096 });
  const pattern = new Uint8Array(size).map((_, i) => (i * 7 + 3) & 0xff);
  tb.host(0).write(a.addr, pattern);
  const omr = await p.pd0.regMr(a.addr, size, Access.ON_DEMAND | Access.LOCAL_WRITE);
  const mr1 = await p.pd1.regMr(b.addr, size, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const write = async (id: number): Promise<number> => {
    const t0 = tb.now;
    p.qp0.postSend({ wrId: id, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: size, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
    const [wc] = await p.cq0.wait(1);
    expect(wc.status).toBe('SUCCESS');
    return tb.now - t0;
  };
  return { p, a, b, omr, pattern, write };
}

describe('on-demand paging: requester faults', () => {
  it('a cold 4 KB RDMA WRITE from an ODP MR faults once, is mapped by the driver, resumes, and lands intact (~220 us)', async () => {
    const tb = new Testbed({ hcas: 2 });
    let cold = 0;
    let warm = 0;
    await tb.run(async () => {
      const s = await writeCase(tb, 4096);
      cold = await s.write(1);
      warm = await s.write(2);
      expect(tb.host(1).read(s.b.addr, 4096)).toEqual(s.pattern);
      expect(s.omr.odpStats()).toMatchObject({ pageFaults: 1, pageFaultsHandled: 1 });
    });
    expect(tb.stats()['tb.hca0.pagefault']).toMatchObject({ faults: 1, resumes: 1 });
    expect(cold / US).toBeGreaterThan(220 * 0.85);
    expect(cold / US).toBeLessThan(220 * 1.15);
    expect(warm / US).toBeLessThan(10);
  });

  it('a cold 4 MB RDMA WRITE: one fault maps the whole range, ~350 us over the same write warm', async () => {
    const tb = new Testbed({ hcas: 2 });
    let cold = 0;
    let warm = 0;
    await tb.run(async () => {
      const s = await writeCase(tb, 4 * 1024 * 1024);
      cold = await s.write(1);
      warm = await s.write(2);
      expect(s.omr.odpStats()).toMatchObject({ pageFaults: 1, pageFaultsHandled: 1 });
    });
    expect((cold - warm) / US).toBeGreaterThan(350 * 0.85);
    expect((cold - warm) / US).toBeLessThan(350 * 1.15);
  });
});
