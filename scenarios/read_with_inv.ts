/**
 * RDMA_READ_WITH_INV, the iWARP operation mlx5 does not have (API.md; spec/semantics.md "postSend
 * RDMA_READ_WITH_INV: mlx5 (no iWARP): EOPNOTSUPP"). On a default adapter the post is refused
 * at once. With `config.readWithInvalidate` (this model's opt-in, encoded as an RDMA_READ WQE
 * with opmod 0x01 and the key in imm) the read lands in a fast-registration MR, then the send
 * queue engine has the UMR engine invalidate that MR (LOCAL_INV rules), then the completion is
 * RDMA_READ: the MR is FREE and a later read into it is refused. Naming a key that is no MR's
 * completes LOC_QP_OP_ERR after the data has landed, and the QP goes to ERR.
 */
import { Access, Testbed, VerbsError } from '../src/index.ts';
import { Checks, type Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, sameBytes, runScenario, through } from './support/two_adapters.ts';

/** RDMA_READ_WITH_INV on adapter 0: the READ to adapter 1 and back, then the local invalidation by UMR. */
const READ_INV = ['hca0.sq', 'hca0.requester', 'link_req', 'hca1.responder', 'hca1.atu', 'link_resp', 'hca0.atu', 'hca0.umr_engine', 'hca0.mkey_cache', 'hca0.cq_writer'];

const scenario: Scenario = {
  name: 'read-with-inv',
  summary: 'RDMA_READ_WITH_INV: EOPNOTSUPP on mlx5; with config.readWithInvalidate the read lands, then the local MR is invalidated',
  async run({ seed, trace, config }) {
    const c = new Checks();

    // a default adapter (untraced: nothing reaches the hardware)
    const plain = new Testbed({ seed, hcas: 2, ...(config ? { config: { ...config, readWithInvalidate: false } } : {}) });
    await plain.run(async () => {
      const { pd0, pd1, pair } = await twoAdapters(plain);
      const [qp0] = await pair(pd0, pd1);
      const b = plain.host(0).alloc(PAGE);
      const mr = await pd0.regMr(b.addr, PAGE, Access.LOCAL_WRITE);
      let errno = '';
      try {
        qp0.postSend({ wrId: 1, opcode: 'RDMA_READ_WITH_INV', sgList: [{ addr: b.addr, length: 8, lkey: mr.lkey }], remoteAddr: 0, rkey: 0, invalidateRkey: mr.lkey });
      } catch (e) {
        errno = e instanceof VerbsError ? e.errno : String(e);
      }
      c.equal(errno, 'EOPNOTSUPP', 'default mlx5: postSend RDMA_READ_WITH_INV throws EOPNOTSUPP');
    });
    await plain.close();

    return runScenario({ seed, trace, config: { ...config, readWithInvalidate: true } }, async (tb, c, wait) => {
      const { ctx0, pd0, pd1, cq0, pair } = await twoAdapters(tb);
      const [qp0] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);

      // the source on adapter 1, readable remotely
      const src = h1.alloc(PAGE, { align: PAGE });
      const data = Uint8Array.from({ length: 3000 }, (_, i) => (i * 7 + 3) & 0xff);
      h1.write(src.addr, data);
      const smr = await pd1.regMr(src.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);

      // the sink on adapter 0: a fast-registration MR over one page
      const dst = h0.alloc(PAGE, { align: PAGE });
      const fmr = await pd0.allocMr('MEM_REG', 1);
      fmr.mapSg([{ addr: dst.addr, length: PAGE }]);
      const [reg] = await tb.phase('reg_mr', through.umr(0), async () => {
        qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: Access.LOCAL_WRITE, signaled: true });
        return wait(cq0, 1, 'REG_MR');
      });
      c.equal(reg?.status, 'SUCCESS', 'REG_MR of the sink MR succeeds');

      const [rd] = await tb.phase('read_with_inv', READ_INV, async () => {
        qp0.postSend({ wrId: 2, opcode: 'RDMA_READ_WITH_INV', sgList: [{ addr: dst.addr, length: data.length, lkey: fmr.lkey }], remoteAddr: src.addr, rkey: smr.rkey, invalidateRkey: fmr.lkey, signaled: true });
        return wait(cq0, 1, 'RDMA_READ_WITH_INV');
      });
      c.equal(rd && [rd.wrId, rd.status, rd.opcode, rd.byteLen], [2, 'SUCCESS', 'RDMA_READ', data.length], 'the read completes RDMA_READ SUCCESS with its byte count');
      c.check(sameBytes(h0.read(dst.addr, data.length), data), 'the data landed in the sink');
      const raw = await ctx0.queryMkey(fmr.lkey);
      c.check((raw[0] & 0x40) !== 0, 'the sink MR is FREE: invalidated after the read');

      // the invalidated key is refused as an lkey
      const [again] = await tb.phase('read_invalidated', through.remote(0, 1), async () => {
        qp0.postSend({ wrId: 3, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 8, lkey: fmr.lkey }], remoteAddr: src.addr, rkey: smr.rkey, signaled: true });
        return wait(cq0, 1, 'RDMA_READ into the invalidated MR');
      });
      c.equal(again?.status, 'LOC_PROT_ERR', 'a read into the invalidated MR fails LOC_PROT_ERR');

      // fresh QPs: the key to invalidate names nothing (a stale tag)
      const [qp2] = await pair(pd0, pd1);
      const sink = h0.alloc(PAGE, { align: PAGE });
      const umr = await pd0.regMr(sink.addr, PAGE, Access.LOCAL_WRITE);
      const stale = ((umr.lkey & 0xffffff00) | ((umr.lkey + 1) & 0xff)) >>> 0;
      const [bad] = await tb.phase('inv_stale', READ_INV, async () => {
        qp2.postSend({ wrId: 4, opcode: 'RDMA_READ_WITH_INV', sgList: [{ addr: sink.addr, length: 64, lkey: umr.lkey }], remoteAddr: src.addr, rkey: smr.rkey, invalidateRkey: stale, signaled: true });
        return wait(cq0, 1, 'RDMA_READ_WITH_INV of a stale key');
      });
      c.equal(bad && [bad.wrId, bad.status], [4, 'LOC_QP_OP_ERR'], 'invalidating a key that names no MR completes LOC_QP_OP_ERR');
      c.check(sameBytes(h0.read(sink.addr, 64), data.subarray(0, 64)), 'the read data landed before the invalidation failed');
      c.equal((await qp2.query()).state, 'ERR', 'the QP goes to ERR');
    }, c);
  },
};

export default scenario;
