/**
 * Memory window type 1, over two adapters (spec/semantics.md "Objects and states", "Verbs
 * calls", "Data path: remote access"): allocMw(1); the bindMw verb returns incRkey of the old
 * rkey and sets mw.rkey at once; the peer READs through the window; a READ reaching past the
 * window's end is refused (REM_ACCESS_ERR) even though the MR covers it; deregistering the MR
 * while the window is bound fails EBUSY; a bind of length 0 unbinds, and the dereg then works.
 */
import { Access, VerbsError, incRkey } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, sameBytes, runScenario, through } from './support/two_adapters.ts';

const scenario: Scenario = {
  name: 'mw-type1',
  summary: 'type-1 window: bindMw (incRkey), a remote READ through it, an out-of-window READ refused, dereg EBUSY, unbind, dereg',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { ctx0, pd0, pd1, cq0, cq1, pair } = await twoAdapters(tb);
      const [qp0, qp1] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);

      // the owner's MR: 4 pages with MW_BIND; the window: its second page
      const buf = h0.alloc(4 * PAGE, { align: PAGE });
      const content = Uint8Array.from({ length: 4 * PAGE }, (_, i) => (i ^ (i >> 8)) & 0xff);
      h0.write(buf.addr, content);
      const mr = await pd0.regMr(buf.addr, 4 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ | Access.MW_BIND);
      const mw = await pd0.allocMw(1);
      const raw0 = await ctx0.queryMkey(mw.rkey);
      c.check((raw0[0] & 0x40) !== 0, 'allocMw(1): the window starts FREE');
      const old = mw.rkey;
      const winAddr = buf.addr + PAGE;
      const [newRkey, b] = await tb.phase('bind', through.umr(0), async () => {
        const k = qp0.bindMw(mw, { mr, addr: winAddr, length: PAGE, access: Access.REMOTE_READ }, { wrId: 1, signaled: true });
        c.equal(k, incRkey(old), 'bindMw returns incRkey(old rkey)');
        c.equal(mw.rkey, k, 'bindMw updates mw.rkey at once');
        return [k, (await wait(cq0, 1, 'bindMw'))[0]] as const;
      });
      c.equal(b && [b.wrId, b.status, b.opcode], [1, 'SUCCESS', 'BIND_MW'], 'the bind completes SUCCESS with opcode BIND_MW');

      // the peer reads through the window
      const dst = h1.alloc(PAGE, { align: PAGE });
      const dmr = await pd1.regMr(dst.addr, PAGE, Access.LOCAL_WRITE);
      const [r] = await tb.phase('read', through.remote(1, 0), async () => {
        qp1.postSend({ wrId: 10, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 300, lkey: dmr.lkey }], remoteAddr: winAddr + 100, rkey: mw.rkey, signaled: true });
        return wait(cq1, 1, 'READ through the window');
      });
      c.equal(r && [r.status, r.opcode, r.byteLen], ['SUCCESS', 'RDMA_READ', 300], 'a remote READ inside the window succeeds');
      c.check(sameBytes(h1.read(dst.addr, 300), content.subarray(PAGE + 100, PAGE + 400)), 'the READ returns the window bytes');

      // dereg while bound
      let errno = '';
      try {
        await mr.dereg();
      } catch (e) {
        errno = e instanceof VerbsError ? e.errno : String(e);
      }
      c.equal(errno, 'EBUSY', 'dereg of the MR while a window is bound fails EBUSY');

      // a READ reaching past the window's end (inside the MR) is refused
      h1.fill(dst.addr, PAGE, 0);
      const [bad] = await tb.phase('read_refused', through.remote(1, 0), async () => {
        qp1.postSend({ wrId: 11, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 100, lkey: dmr.lkey }], remoteAddr: winAddr + PAGE - 50, rkey: mw.rkey, signaled: true });
        return wait(cq1, 1, 'out-of-window READ');
      });
      c.equal(bad?.status, 'REM_ACCESS_ERR', 'a READ past the window end fails REM_ACCESS_ERR');
      c.check(h1.read(dst.addr, 100).every((x) => x === 0), 'the refused READ placed nothing');
      c.equal([(await qp0.query()).state, (await qp1.query()).state], ['ERR', 'ERR'], 'both QPs are in ERR');

      // unbind (length 0) from a fresh QP: a type-1 window belongs to its PD, not to a QP
      const [qp2] = await pair(pd0, pd1);
      const [u] = await tb.phase('unbind', through.umr(0), async () => {
        const k2 = qp2.bindMw(mw, { mr, addr: winAddr, length: 0, access: 0 }, { wrId: 2, signaled: true });
        c.equal(k2, incRkey(newRkey), 'the unbind takes the next rkey too');
        return wait(cq0, 1, 'unbind');
      });
      c.equal(u && [u.wrId, u.status, u.opcode], [2, 'SUCCESS', 'BIND_MW'], 'the unbind (length 0) completes SUCCESS');
      const raw1 = await ctx0.queryMkey(mw.rkey);
      c.check((raw1[0] & 0x40) !== 0, 'after the unbind the window is FREE');
      errno = 'none';
      try {
        await mr.dereg();
      } catch (e) {
        errno = e instanceof VerbsError ? e.errno : String(e);
      }
      c.equal(errno, 'none', 'dereg succeeds once the window is unbound');
      await mw.dealloc();
    }),
};

export default scenario;
