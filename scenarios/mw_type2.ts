/**
 * Memory window type 2 (2B), over two adapters (spec/semantics.md "Objects and states", "Work
 * requests", "Data path: remote access", "Remote invalidate"): allocMw(2) starts FREE; a posted
 * BIND_MW with a new rkey (same index, next tag) binds it to the posting QP; the peer WRITEs
 * through it; LOCAL_INV frees it; a re-bind with the next key works again, and only through
 * the QP it is bound to (another QP of the same PD is refused); the peer's SEND_WITH_INV
 * naming the window invalidates it (RECV, WITH_INV), after which the key is refused; the MR
 * has no window counted any more (dereg works), and the window is deallocated.
 */
import { Access, VerbsError, incRkey, type Qp } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, sameBytes, runScenario, through } from './support/two_adapters.ts';

const scenario: Scenario = {
  name: 'mw-type2',
  summary: 'type-2 window: BIND_MW, a peer WRITE through it, LOCAL_INV, re-bind with a new key, SEND_WITH_INV invalidate, dealloc',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { ctx0, pd0, pd1, cq0, cq1, pair } = await twoAdapters(tb);
      const [qp0, qp1] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);
      const isFree = async (key: number): Promise<boolean> => ((await ctx0.queryMkey(key))[0] & 0x40) !== 0;

      const buf = h0.alloc(4 * PAGE, { align: PAGE });
      const mr = await pd0.regMr(buf.addr, 4 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.MW_BIND);
      const rbuf = h0.alloc(PAGE, { align: PAGE });
      const rmr = await pd0.regMr(rbuf.addr, PAGE, Access.LOCAL_WRITE);
      const src = h1.alloc(PAGE, { align: PAGE });
      h1.write(src.addr, Uint8Array.from({ length: PAGE }, (_, i) => (i * 31 + 5) & 0xff));
      const smr = await pd1.regMr(src.addr, PAGE, Access.LOCAL_WRITE);
      const srcBytes = h1.read(src.addr, PAGE);

      const mw = await pd0.allocMw(2);
      c.check(await isFree(mw.rkey), 'allocMw(2): the window starts FREE');
      const bind = (wrId: number, addr: number, length: number): number => {
        const k = incRkey(mw.rkey);
        qp0.postSend({ wrId, opcode: 'BIND_MW', mw, rkey: k, bindInfo: { mr, addr, length, access: Access.REMOTE_WRITE }, signaled: true });
        return k;
      };
      const writeVia = (q: Qp, wrId: number, raddr: number, length: number): void =>
        q.postSend({ wrId, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length, lkey: smr.lkey }], remoteAddr: raddr, rkey: mw.rkey, signaled: true });

      // 1. bind over pages 1..2, write through it
      const w1 = buf.addr + PAGE;
      const [k1, b1] = await tb.phase('bind', through.umr(0), async () => {
        const k = bind(1, w1, 2 * PAGE);
        c.equal(mw.rkey, k, 'postSend BIND_MW sets mw.rkey to the new key');
        return [k, (await wait(cq0, 1, 'BIND_MW'))[0]] as const;
      });
      c.equal(b1 && [b1.wrId, b1.status, b1.opcode], [1, 'SUCCESS', 'BIND_MW'], 'BIND_MW completes SUCCESS');
      const raw = await ctx0.queryMkey(mw.rkey);
      c.check((raw[0] & 0x40) === 0 && raw[7] === (k1 & 0xff) && (new DataView(raw.buffer, raw.byteOffset).getUint32(4) >>> 8) === qp0.qpNum,
        'the window is VALID with the new tag, bound to the posting QP');
      const [wr1] = await tb.phase('write', through.remote(1, 0), async () => {
        writeVia(qp1, 10, w1 + 500, 1000);
        return wait(cq1, 1, 'WRITE through the window');
      });
      c.equal(wr1 && [wr1.status, wr1.byteLen], ['SUCCESS', 1000], 'a peer WRITE through the window succeeds');
      c.check(sameBytes(h0.read(w1 + 500, 1000), srcBytes.subarray(0, 1000)), 'the bytes land in the MR at the window address');

      // 2. LOCAL_INV of the window
      const [li] = await tb.phase('local_inv', through.umr(0), async () => {
        qp0.postSend({ wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: mw.rkey, signaled: true });
        return wait(cq0, 1, 'LOCAL_INV');
      });
      c.equal(li && [li.wrId, li.status, li.opcode], [2, 'SUCCESS', 'LOCAL_INV'], 'LOCAL_INV of the window completes SUCCESS');
      c.check(await isFree(mw.rkey), 'the window is FREE after LOCAL_INV');

      // 3. re-bind with the next key, over page 3
      const w2 = buf.addr + 3 * PAGE;
      const [k2, b2] = await tb.phase('rebind', through.umr(0), async () => {
        const k = bind(3, w2, PAGE);
        c.equal(k, incRkey(k1), 'the re-bind uses the next key');
        return [k, (await wait(cq0, 1, 're-bind'))[0]] as const;
      });
      c.equal(b2 && [b2.wrId, b2.status], [3, 'SUCCESS'], 'the re-bind succeeds');
      const [wr2] = await tb.phase('write_rebound', through.remote(1, 0), async () => {
        writeVia(qp1, 11, w2, 64);
        return wait(cq1, 1, 'WRITE through the re-bound window');
      });
      c.equal(wr2?.status, 'SUCCESS', 'a WRITE through the re-bound window succeeds');
      c.check(sameBytes(h0.read(w2, 64), srcBytes.subarray(0, 64)), 'the bytes land at the new window');

      //    another QP of the same PD: refused (a type-2 window belongs to its QP)
      const [qp2, qp3] = await pair(pd0, pd1);
      h0.fill(w2 + 1024, 64, 0);
      const [wr3] = await tb.phase('wrong_qp', through.remote(1, 0), async () => {
        writeVia(qp3, 12, w2 + 1024, 64);
        return wait(cq1, 1, 'WRITE via another QP');
      });
      c.equal(wr3?.status, 'REM_ACCESS_ERR', 'a WRITE arriving on another QP than the bound one fails REM_ACCESS_ERR');
      c.check(h0.read(w2 + 1024, 64).every((x) => x === 0), 'and writes nothing');
      c.equal((await qp2.query()).state, 'ERR', 'that responder QP goes to ERR');

      // 4. remote invalidate of the window by SEND_WITH_INV
      const [rv, sd] = await tb.phase('send_with_inv', ['hca1.sq', 'hca1.requester', 'link_req', 'hca0.responder', 'hca0.umr_engine', 'hca0.mkey_cache', 'link_resp', 'hca0.cq_writer', 'hca1.cq_writer'], async () => {
        qp0.postRecv({ wrId: 100, sgList: [{ addr: rbuf.addr, length: 64, lkey: rmr.lkey }] });
        qp1.postSend({ wrId: 13, opcode: 'SEND_WITH_INV', invalidateRkey: mw.rkey, sgList: [{ addr: src.addr, length: 16, lkey: smr.lkey }], signaled: true });
        return [(await wait(cq0, 1, 'receive of SEND_WITH_INV'))[0], (await wait(cq1, 1, 'SEND_WITH_INV'))[0]] as const;
      });
      c.equal(rv && [rv.wrId, rv.status, rv.opcode, [...rv.wcFlags], rv.invalidatedRkey], [100, 'SUCCESS', 'RECV', ['WITH_INV'], k2], 'RECV with WITH_INV and invalidatedRkey = the window rkey');
      c.equal(sd && [sd.status, sd.opcode], ['SUCCESS', 'SEND'], 'the sender completes SEND');
      c.check(await isFree(mw.rkey), 'the window is FREE after the remote invalidate');
      const [wr4] = await tb.phase('write_invalidated', through.remote(1, 0), async () => {
        writeVia(qp1, 14, w2, 8);
        return wait(cq1, 1, 'WRITE through the invalidated window');
      });
      c.equal(wr4?.status, 'REM_ACCESS_ERR', 'the invalidated window key is refused');

      // 5. no window counts on the MR any more; dealloc
      let errno = 'none';
      try {
        await mr.dereg();
      } catch (e) {
        errno = e instanceof VerbsError ? e.errno : String(e);
      }
      c.equal(errno, 'none', 'the MR deregisters: the invalidations released their windows');
      await mw.dealloc();
      c.check(mw.destroyed, 'the window is deallocated');
    }),
};

export default scenario;
