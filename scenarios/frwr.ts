/**
 * Fast registration (FRWR), end to end over two adapters: allocMr(MEM_REG), mapSg over four
 * pages, updateKey, REG_MR posted on the owner's QP, an RDMA WRITE from the peer through the
 * new rkey (bytes checked), LOCAL_INV, then the same WRITE is refused: REM_ACCESS_ERR at the
 * peer, both QPs in ERR, later work requests on either QP flushed (WR_FLUSH_ERR), and nothing
 * written (spec/semantics.md "Objects and states", "Data path: remote access", "Errors").
 */
import { Access } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, sameBytes, runScenario, through } from './support/two_adapters.ts';

const scenario: Scenario = {
  name: 'frwr',
  summary: 'fast registration: allocMr, mapSg, updateKey, REG_MR, a peer RDMA WRITE through it, LOCAL_INV, the write refused',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { ctx0, pd0, pd1, cq0, cq1, pair } = await twoAdapters(tb);
      const [qp0, qp1] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);

      // the owner's buffer, four pages, registered by FRWR
      const dst = h0.alloc(4 * PAGE, { align: PAGE });
      const fmr = await pd0.allocMr('MEM_REG', 4);
      const raw0 = await ctx0.queryMkey(fmr.lkey);
      c.check((raw0[0] & 0x40) !== 0, 'allocMr: the mkey starts FREE (status bit 6)');
      const mapped = fmr.mapSg([{ addr: dst.addr, length: 4 * PAGE }]);
      c.equal(mapped, 1, 'mapSg maps the one element');
      c.equal([fmr.iova, fmr.length], [dst.addr, 4 * PAGE], 'mapSg sets iova and length');
      const oldKey = fmr.rkey;
      fmr.updateKey(0x5a);
      c.equal(fmr.rkey, ((oldKey & 0xffffff00) | 0x5a) >>> 0, 'updateKey replaces the tag, keeps the index');
      c.equal(fmr.lkey, fmr.rkey, 'lkey == rkey');

      // the peer's source buffer, registered before the work starts (firmware, ~0.3 ms): the
      // waves then show REG_MR, the WRITE and LOCAL_INV without that wait between them
      const src = h1.alloc(4 * PAGE, { align: PAGE });
      const pattern = Uint8Array.from({ length: 2 * PAGE }, (_, i) => (i * 7 + 3) & 0xff);
      h1.write(src.addr, pattern);
      // the source MR: the pool is empty, so a CREATE_MKEY through the command queue (its view:
      // the doorbell, the entry and mailbox DMA on PCIe, the firmware's time, the status write
      // and the command-completion EQE)
      const smr = await tb.phase('create_mkey', ['hca1.cmdif', 'hca1.pcie', 'hca1.eq_writer'], () => pd1.regMr(src.addr, 4 * PAGE, Access.LOCAL_WRITE));

      // each phase is one work request and its completion, the checks' firmware commands between
      const [reg] = await tb.phase('reg_mr', through.umr(0), async () => {
        qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ, signaled: true });
        return wait(cq0, 1, 'REG_MR');
      });
      c.equal(reg && { wrId: reg.wrId, status: reg.status, opcode: reg.opcode }, { wrId: 1, status: 'SUCCESS', opcode: 'REG_MR' }, 'REG_MR completes SUCCESS with opcode REG_MR');
      const raw1 = await ctx0.queryMkey(fmr.lkey);
      c.check((raw1[0] & 0x40) === 0 && raw1[7] === 0x5a, 'after REG_MR the mkey is VALID with tag 0x5a', `status 0x${raw1[0].toString(16)} tag 0x${raw1[7].toString(16)}`);

      // the peer writes 8 KiB straddling three pages through the rkey
      const off = 1000;
      const write = (wrId: number): void =>
        qp1.postSend({ wrId, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: 2 * PAGE, lkey: smr.lkey }], remoteAddr: fmr.iova + off, rkey: fmr.rkey, signaled: true });
      const [w1] = await tb.phase('write', through.remote(1, 0), async () => {
        write(10);
        return wait(cq1, 1, 'RDMA WRITE');
      });
      c.equal(w1 && { status: w1.status, opcode: w1.opcode, byteLen: w1.byteLen }, { status: 'SUCCESS', opcode: 'RDMA_WRITE', byteLen: 2 * PAGE }, 'the peer RDMA WRITE through the fast-reg rkey succeeds');
      c.check(sameBytes(h0.read(dst.addr + off, 2 * PAGE), pattern), 'the written bytes land at iova + 1000 across the page boundaries');
      c.check(h0.read(dst.addr, off).every((b) => b === 0), 'nothing is written before the target range');

      // LOCAL_INV on the owner's QP: the MR is FREE again
      const [inv] = await tb.phase('local_inv', through.umr(0), async () => {
        qp0.postSend({ wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: fmr.rkey, signaled: true });
        return wait(cq0, 1, 'LOCAL_INV');
      });
      c.equal(inv && { wrId: inv.wrId, status: inv.status, opcode: inv.opcode }, { wrId: 2, status: 'SUCCESS', opcode: 'LOCAL_INV' }, 'LOCAL_INV completes SUCCESS with opcode LOCAL_INV');
      const raw2 = await ctx0.queryMkey(fmr.lkey);
      c.check((raw2[0] & 0x40) !== 0, 'after LOCAL_INV the mkey is FREE');

      // the same write is refused; nothing is written
      h1.fill(src.addr, 2 * PAGE, 0xee);
      const [fl] = await tb.phase('refused', [...through.remote(1, 0), 'hca0.sq'], async () => {
        write(11);
        qp1.postSend({ wrId: 12, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: 8, lkey: smr.lkey }], remoteAddr: fmr.iova, rkey: fmr.rkey });
        const errs = await wait(cq1, 2, 'WRITE refused');
        c.equal(errs.map((w) => [w.wrId, w.status]), [[11, 'REM_ACCESS_ERR'], [12, 'WR_FLUSH_ERR']], 'the write after LOCAL_INV fails REM_ACCESS_ERR; the next WR (unsignaled) is flushed');
        c.check(sameBytes(h0.read(dst.addr + off, 2 * PAGE), pattern), 'the refused write changed nothing');
        qp0.postSend({ wrId: 3, opcode: 'LOCAL_INV', invalidateRkey: fmr.rkey, signaled: false });
        return wait(cq0, 1, 'owner QP flushed');
      });
      // the QUERY_QP commands after the last phase are firmware: outside every view
      c.equal(fl && [fl.wrId, fl.status], [3, 'WR_FLUSH_ERR'], 'a later WR on the owner QP is flushed too');
      c.equal([(await qp1.query()).state, (await qp0.query()).state], ['ERR', 'ERR'], 'both QPs are in ERR');
    }),
};

export default scenario;
