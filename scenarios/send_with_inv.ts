/**
 * Remote invalidation (SEND_WITH_INV), over two adapters (spec/semantics.md "Remote
 * invalidate"): a fast-registration MR is registered on the receiver; the peer SENDs WITH_INV
 * naming its rkey: the receive completion is RECV with flag WITH_INV and the invalidated rkey,
 * the message is placed, the MR is FREE and a later WRITE through the key is refused. Then, on
 * a fresh pair of QPs, a SEND_WITH_INV naming a user MR (regMr: no remote invalidation) fails
 * at the receiver with REM_INV_REQ_ERR, the receiver's QP goes to ERR, the key stays valid, and
 * the sender's SEND completes SUCCESS.
 */
import { Access } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, sameBytes, runScenario, through } from './support/two_adapters.ts';

/** SEND_WITH_INV from adapter 1: the send, the receive on adapter 0 and its remote invalidation by UMR, both CQEs. */
const REMOTE_INV = ['hca1.sq', 'hca1.requester', 'link_req', 'hca0.responder', 'hca0.umr_engine', 'hca0.mkey_cache', 'link_resp', 'hca0.cq_writer', 'hca1.cq_writer'];

const scenario: Scenario = {
  name: 'send-with-inv',
  summary: 'remote invalidate: SEND_WITH_INV frees a fast-reg MR (RECV, WITH_INV, invalidatedRkey); naming a user MR gives REM_INV_REQ_ERR',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { ctx0, pd0, pd1, cq0, cq1, pair } = await twoAdapters(tb);
      const [qp0, qp1] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);

      // receiver (adapter 0): a receive buffer and a fast-reg MR over two pages
      const rbuf = h0.alloc(PAGE, { align: PAGE });
      const rmr = await pd0.regMr(rbuf.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const area = h0.alloc(2 * PAGE, { align: PAGE });
      const fmr = await pd0.allocMr('MEM_REG', 2);
      fmr.mapSg([{ addr: area.addr, length: 2 * PAGE }]);
      const [reg] = await tb.phase('reg_mr', through.umr(0), async () => {
        qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_WRITE, signaled: true });
        return wait(cq0, 1, 'REG_MR');
      });
      c.equal(reg?.status, 'SUCCESS', 'REG_MR of the fast-reg MR succeeds');

      // sender (adapter 1)
      const sbuf = h1.alloc(PAGE, { align: PAGE });
      const msg = Uint8Array.from({ length: 200 }, (_, i) => (i * 13 + 1) & 0xff);
      h1.write(sbuf.addr, msg);
      const smr = await pd1.regMr(sbuf.addr, PAGE, Access.LOCAL_WRITE);

      const [rv, sd] = await tb.phase('send_with_inv', REMOTE_INV, async () => {
        qp0.postRecv({ wrId: 100, sgList: [{ addr: rbuf.addr, length: 256, lkey: rmr.lkey }] });
        qp1.postSend({ wrId: 20, opcode: 'SEND_WITH_INV', invalidateRkey: fmr.rkey, sgList: [{ addr: sbuf.addr, length: msg.length, lkey: smr.lkey }], signaled: true });
        return [(await wait(cq0, 1, 'the receive of SEND_WITH_INV'))[0], (await wait(cq1, 1, 'the SEND_WITH_INV'))[0]] as const;
      });
      c.equal(
        rv && { wrId: rv.wrId, status: rv.status, opcode: rv.opcode, byteLen: rv.byteLen, flags: [...rv.wcFlags], inv: rv.invalidatedRkey },
        { wrId: 100, status: 'SUCCESS', opcode: 'RECV', byteLen: msg.length, flags: ['WITH_INV'], inv: fmr.rkey },
        'receive completion: RECV, WITH_INV, invalidatedRkey = the fast-reg rkey',
      );
      c.equal(sd && [sd.wrId, sd.status, sd.opcode], [20, 'SUCCESS', 'SEND'], "the sender's completion is SEND SUCCESS");
      c.check(sameBytes(h0.read(rbuf.addr, msg.length), msg), 'the message is placed in the receive buffer');
      const raw = await ctx0.queryMkey(fmr.lkey);
      c.check((raw[0] & 0x40) !== 0, 'the fast-reg MR is FREE after the remote invalidate');

      // the invalidated key is refused
      const [w] = await tb.phase('write_refused', through.remote(1, 0), async () => {
        qp1.postSend({ wrId: 21, opcode: 'RDMA_WRITE', sgList: [{ addr: sbuf.addr, length: 64, lkey: smr.lkey }], remoteAddr: fmr.iova, rkey: fmr.rkey, signaled: true });
        return wait(cq1, 1, 'WRITE through the invalidated key');
      });
      c.equal(w?.status, 'REM_ACCESS_ERR', 'a WRITE through the invalidated rkey fails REM_ACCESS_ERR');
      c.check(h0.read(area.addr, 64).every((b) => b === 0), 'nothing was written through the invalidated key');
      c.equal([(await qp0.query()).state, (await qp1.query()).state], ['ERR', 'ERR'], 'both QPs are in ERR after the remote access error');

      // fresh QPs: SEND_WITH_INV naming a user MR (no remote invalidation)
      const [qp2, qp3] = await pair(pd0, pd1);
      const [bad, sd2] = await tb.phase('inv_user_mr', REMOTE_INV, async () => {
        qp2.postRecv({ wrId: 200, sgList: [{ addr: rbuf.addr + 1024, length: 256, lkey: rmr.lkey }] });
        qp3.postSend({ wrId: 30, opcode: 'SEND_WITH_INV', invalidateRkey: rmr.rkey, sgList: [{ addr: sbuf.addr, length: 32, lkey: smr.lkey }], signaled: true });
        return [(await wait(cq0, 1, 'the receive of SEND_WITH_INV on a user MR'))[0], (await wait(cq1, 1, 'the SEND_WITH_INV on a user MR'))[0]] as const;
      });
      c.equal(bad && [bad.wrId, bad.status, bad.opcode, bad.wcFlags.has('WITH_INV')], [200, 'REM_INV_REQ_ERR', 'RECV', false], 'naming a user MR: receive completion REM_INV_REQ_ERR');
      c.equal(sd2 && [sd2.wrId, sd2.status, sd2.opcode], [30, 'SUCCESS', 'SEND'], "the sender's completion is SEND SUCCESS");
      c.equal((await qp2.query()).state, 'ERR', "the receiver's QP goes to ERR");
      const raw2 = await ctx0.queryMkey(rmr.lkey);
      c.check((raw2[0] & 0x40) === 0 && raw2[7] === (rmr.rkey & 0xff), 'the user MR stays VALID with its key');
    }),
};

export default scenario;
