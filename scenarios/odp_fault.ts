/**
 * On-demand paging faults, end to end over two adapters (spec/semantics.md "On-demand
 * paging"): a requester's own SGE cold in an ODP MR (subtype WQE, REQUESTOR), a responder's
 * RDMA READ target cold (subtype RDMA, RNR-NAK meanwhile), a SEND into a cold receive buffer
 * (subtype WQE without REQUESTOR), and a munmapped range (the fault resumes with ERROR). In the
 * waves: the ATU's FAULT result, the pagefault unit's FAULT with the QP stalled, the EQE written
 * (eq_writer), the driver's UMR (umr_engine), the resume.
 */
import { Access } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, sameBytes, runScenario, through } from './support/two_adapters.ts';

const US = 1_000_000;

const scenario: Scenario = {
  name: 'odp-fault',
  summary: 'ODP faults: a requester SGE, a responder RDMA READ target and a receive buffer cold in ODP MRs, each mapped by the fault handler; a munmapped range fails',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { pd0, pd1, cq0, cq1, pair } = await twoAdapters(tb);
      const [qp0, qp1] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);
      const src = h0.alloc(4 * PAGE);
      const dst = h1.alloc(4 * PAGE);
      const pattern = Uint8Array.from({ length: PAGE }, (_, i) => (i * 5 + 1) & 0xff);
      const omr0 = await pd0.regMr(src.addr, 4 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      // written after regMr: resident in the process but not mapped for the device (regMr maps
      // the pages resident then: mlx5_ib_init_odp_mr's snapshot)
      h0.write(src.addr, pattern);
      const omr1 = await pd1.regMr(dst.addr, 4 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
      const pinned = h1.alloc(PAGE);
      const pmr1 = await pd1.regMr(pinned.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);

      // 1. requester: the WRITE's source page is not present
      tb.mark('requester_fault');
      const t0 = tb.now;
      const [w1] = await tb.phase('requester_fault', through.faultingWrite(0, 1), async () => {
        qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: PAGE, lkey: omr0.lkey }], remoteAddr: pinned.addr, rkey: pmr1.rkey, signaled: true });
        return wait(cq0, 1, 'write_done');
      });
      c.equal(w1?.status, 'SUCCESS', 'the WRITE from a cold ODP source completes SUCCESS');
      const t = (tb.now - t0) / US;
      c.check(t > 190 && t < 260, 'the cold 4 KB write takes ~220 us (one fault, the driver maps and resumes)', `${t.toFixed(1)} us`);
      c.check(sameBytes(h1.read(pinned.addr, PAGE), pattern), 'the bytes land intact');
      c.equal(omr0.odpStats().pageFaults, 1, 'one requester fault on the source MR');

      // 2. responder: an RDMA READ of a cold page of the peer's ODP MR
      tb.mark('responder_fault');
      h1.write(dst.addr + 2 * PAGE, Uint8Array.of(0xaa, 0xbb));
      // the READ target faults at the responder (RNR NAK, retry), then its destination at the requester
      const [r2] = await tb.phase('responder_fault', ['hca0.sq', 'hca0.requester', 'link_req', 'hca1.responder', 'hca1.atu', ...through.fault(1), 'link_resp', 'hca0.atu', ...through.fault(0), 'hca0.cq_writer'], async () => {
        qp0.postSend({ wrId: 2, opcode: 'RDMA_READ', sgList: [{ addr: src.addr + 2 * PAGE, length: 2, lkey: omr0.lkey }], remoteAddr: dst.addr + 2 * PAGE, rkey: omr1.rkey, signaled: true });
        return wait(cq0, 1, 'read_done');
      });
      c.equal(r2?.status, 'SUCCESS', 'the READ of a cold responder page completes after the RNR retry');
      c.equal([...h0.read(src.addr + 2 * PAGE, 2)], [0xaa, 0xbb], 'the READ brings the bytes');

      // 3. receive buffer: a SEND into a cold page
      tb.mark('recv_fault');
      await tb.phase('recv_fault', ['hca0.sq', 'hca0.requester', 'link_req', 'hca1.responder', 'hca1.atu', ...through.fault(1), 'link_resp', 'hca1.cq_writer', 'hca0.cq_writer'], async () => {
        qp1.postRecv({ wrId: 3, sgList: [{ addr: dst.addr + 3 * PAGE, length: 64, lkey: omr1.lkey }] });
        qp0.postSend({ wrId: 4, opcode: 'SEND', sgList: [{ addr: src.addr, length: 16, lkey: omr0.lkey }], signaled: true });
        const [rc] = await wait(cq1, 1, 'recv_done');
        c.equal(rc && [rc.wrId, rc.status, rc.byteLen], [3, 'SUCCESS', 16], 'the SEND into a cold receive buffer is received');
        await wait(cq0, 1, 'send_done');
      });

      // 4. munmap: the fault cannot be resolved
      tb.mark('munmap');
      const [e5] = await tb.phase('munmap', through.faultingWrite(0, 1), async () => {
        await h0.munmap(src.addr + 3 * PAGE, PAGE);
        qp0.postSend({ wrId: 5, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr + 3 * PAGE, length: 8, lkey: omr0.lkey }], remoteAddr: dst.addr, rkey: omr1.rkey, signaled: true });
        return wait(cq0, 1, 'munmap_error');
      });
      c.equal(e5?.status, 'LOC_ACCESS_ERR', 'an access to a munmapped page of an ODP MR completes LOC_ACCESS_ERR');
      const st = tb.stats();
      c.equal([st['tb.hca0.pagefault']?.faults, st['tb.hca1.pagefault']?.faults], [3, 2], 'faults on hca0: the WRITE source, the READ destination (REQUESTOR | WRITE), the munmapped page; on hca1: the READ target and the receive buffer');
    }),
};

export default scenario;
