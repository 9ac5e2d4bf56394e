/**
 * SG_GAPS fast registration (KLM), over two adapters (spec/semantics.md "Objects and states",
 * "Verbs calls" mapSg rows; spec/mlx5.md "FRWR MR allocation", KLM): three elements that are
 * not page aligned and leave gaps between them. A MEM_REG MR can map only the first of them;
 * an SG_GAPS MR maps all three, REG_MR writes them as KLMs over the PD's local DMA lkey, and a
 * peer's RDMA READ across the gaps returns the concatenated bytes of the elements.
 */
import { Access } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, sameBytes, runScenario, through } from './support/two_adapters.ts';

const scenario: Scenario = {
  name: 'sg-gaps',
  summary: 'SG_GAPS MR: mapSg of three unaligned, gapped elements, REG_MR as KLMs, a peer RDMA READ across the gaps',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { ctx0, pd0, pd1, cq0, cq1, pair } = await twoAdapters(tb);
      const attr = await ctx0.queryDevice();
      c.check(attr.deviceCapFlags.has('SG_GAPS_REG'), 'the device offers SG_GAPS_REG');
      const [qp0, qp1] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);

      // three pieces of a 4-page buffer, unaligned, with gaps between them
      const buf = h0.alloc(4 * PAGE, { align: PAGE });
      h0.write(buf.addr, Uint8Array.from({ length: 4 * PAGE }, (_, i) => (i * 5 + (i >> 9)) & 0xff));
      const sg = [
        { addr: buf.addr + 100, length: 1000 },
        { addr: buf.addr + PAGE + 300, length: 2500 },
        { addr: buf.addr + 2 * PAGE + 777, length: 3000 }, // crosses into the fourth page
      ];
      const concat = new Uint8Array(sg.reduce((a, e) => a + e.length, 0));
      let o = 0;
      for (const e of sg) { concat.set(h0.read(e.addr, e.length), o); o += e.length; }

      const pageMr = await pd0.allocMr('MEM_REG', 8);
      c.equal(pageMr.mapSg(sg), 1, 'MEM_REG: mapSg stops at the first element that is not page aligned');

      const fmr = await pd0.allocMr('SG_GAPS', 4);
      c.equal(fmr.mapSg(sg), 3, 'SG_GAPS: mapSg maps all three elements');
      c.equal([fmr.iova, fmr.length], [sg[0].addr, concat.length], 'iova is the first element, length the sum');
      // the peer's destination, registered before the work starts (firmware, ~0.3 ms): the waves
      // then show REG_MR and the READs without that wait between them
      const dst = h1.alloc(2 * PAGE, { align: PAGE });
      const dmr = await pd1.regMr(dst.addr, 2 * PAGE, Access.LOCAL_WRITE);
      const [reg] = await tb.phase('reg_mr', through.umr(0), async () => {
        qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_READ, signaled: true });
        return wait(cq0, 1, 'REG_MR');
      });
      c.equal(reg && [reg.status, reg.opcode], ['SUCCESS', 'REG_MR'], 'REG_MR (KLM) completes SUCCESS');
      const raw = await ctx0.queryMkey(fmr.lkey);
      c.equal([(raw[0] & 0x40) !== 0, raw[2] & 3], [false, 2], 'the mkey is VALID in access mode KLMS');

      // the peer reads it all, and a piece straddling the first gap: the KLM walk at the owner
      await tb.phase('reads', ['hca1.sq', 'hca1.requester', 'link_req', 'hca0.responder', 'hca0.atu', 'hca0.klm_walker', 'hca0.mkey_cache', 'hca0.mtt', 'link_resp', 'hca1.cq_writer'], async () => {
        qp1.postSend({ wrId: 10, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: concat.length, lkey: dmr.lkey }], remoteAddr: fmr.iova, rkey: fmr.rkey, signaled: true });
        const [r1] = await wait(cq1, 1, 'READ of the whole MR');
        c.equal(r1 && [r1.status, r1.byteLen], ['SUCCESS', concat.length], 'an RDMA READ of the whole MR succeeds');
        c.check(sameBytes(h1.read(dst.addr, concat.length), concat), 'it returns the three elements concatenated (the gaps skipped)');
        qp1.postSend({ wrId: 11, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr + PAGE + 8, length: 3000, lkey: dmr.lkey }], remoteAddr: fmr.iova + 900, rkey: fmr.rkey, signaled: true });
        const [r2] = await wait(cq1, 1, 'READ across the gaps');
        c.equal(r2?.status, 'SUCCESS', 'a READ from inside the first element across both gaps succeeds');
        c.check(sameBytes(h1.read(dst.addr + PAGE + 8, 3000), concat.subarray(900, 3900)), 'it returns the right slice of the concatenation');
        // one byte past the end is refused
        qp1.postSend({ wrId: 12, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 2, lkey: dmr.lkey }], remoteAddr: fmr.iova + concat.length - 1, rkey: fmr.rkey, signaled: true });
        const [r3] = await wait(cq1, 1, 'READ past the end');
        c.equal(r3?.status, 'REM_ACCESS_ERR', 'a READ one byte past the MR length fails REM_ACCESS_ERR');
      });
    }),
};

export default scenario;
