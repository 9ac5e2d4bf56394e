/**
 * `bytes_committed` honoured (issue 18 item 1): an RDMA WRITE into a remote ODP MR whose first
 * pages are mapped and later ones are not is placed packet by packet up to the page not
 * present; the responder's page-fault EQE reports those bytes as bytes_committed (of the whole
 * operation: rdma_va and rdma_op_len as the RETH gave them), the driver maps only the rest
 * (odp.c:1455-1459 mlx5_ib_mr_rdma_pfault_handler), and after the RNR NAK the requester sends
 * only the rest, from the NAK'd packet: no byte crosses the link or PCIe twice.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';
import { PageFaultSubtype } from '../../src/rtl/formats/constants.ts';

const PAGE = 4096;
const PAGES = 4;
const LEN = PAGES * PAGE;

describe('bytes_committed: a WRITE that faults mid-way restarts where it stopped', () => {
  it('places the packets before the page not present, reports them, and moves only the rest after the resume', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true }, config: { mrCacheLimit: 0 } });
    // the responder's DMA writes into host memory, counted as the DMA checker sees them land
    let placed = 0;
    const ck = tb.checkers[1];
    const check = ck.check.bind(ck);
    ck.check = (kind, port, addr, len, qpn, wqe, now) => {
      if (kind === 'write' && port === 'responder') placed += len;
      check(kind, port, addr, len, qpn, wqe, now);
    };
    await tb.run(async () => {
      const p = await rcPair(tb);
      const a = tb.host(0).alloc(LEN);
      const b = tb.host(1).alloc(LEN);
      tb.host(0).write(a.addr, Uint8Array.from({ length: LEN }, (_, i) => i & 0xff));
      const mr0 = await p.pd0.regMr(a.addr, LEN, Access.LOCAL_WRITE);
      const omr = await p.pd1.regMr(b.addr, LEN, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      // the first two pages mapped for the device, the last two never touched
      await p.pd1.adviseMr('PREFETCH_WRITE', [{ addr: b.addr, length: 2 * PAGE, lkey: omr.lkey }], { flush: true });
      const faults0 = omr.odpStats().pageFaults;
      const sent0 = tb.stats()['tb.hca0.requester'].bytes as number;
      const eqes: { sub: number; committed: number; va: number; len: number }[] = [];
      const pf = tb.hca(1).pagefault;
      const report = pf.report.bind(pf);
      pf.report = (r, client, token) => {
        if (r.subType === PageFaultSubtype.RDMA) eqes.push({ sub: r.subType, committed: r.bytesCommitted, va: r.rdmaVa, len: r.rdmaOpLen });
        report(r, client, token);
      };
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: LEN, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: omr.rkey, signaled: true });
      const [wc] = await p.cq0.wait(1);
      expect(wc.status).toBe('SUCCESS');
      // one fault, after the two mapped pages: bytes_committed 8 KiB of the 16 KiB operation
      expect(eqes).toEqual([{ sub: PageFaultSubtype.RDMA, committed: 2 * PAGE, va: b.addr, len: LEN }]);
      // the driver mapped only the two pages left (mlx5 counts pages: odp page_faults)
      expect(omr.odpStats().pageFaults - faults0).toBe(2);
      // the whole message, then only its second half after the RNR NAK
      expect((tb.stats()['tb.hca0.requester'].bytes as number) - sent0).toBe(LEN + 2 * PAGE);
      // every byte placed once
      expect(placed).toBe(LEN);
      const got = tb.host(1).read(b.addr, LEN);
      for (let i = 0; i < LEN; i++) if (got[i] !== (i & 0xff)) throw new Error(`byte ${i}: ${got[i]}`);
    });
    expect(tb.checkers[1].violationCount).toBe(0);
  });
});
