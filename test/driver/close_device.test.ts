/**
 * tb.closeDevice as Linux removes an mlx5 device: every verbs object of every context destroyed by
 * its own command (uverbs_destroy_ufile_hw: oldest first, those still in use on a later pass), then
 * the MR cache's mkeys (mlx5_mkey_cache_cleanup), the UMR QP, its CQ and PD, the completion EQs,
 * the event EQ, the command EQ; only then TEARDOWN_HCA, with nothing left for the firmware to
 * drop, and every ICM page back.
 */
import { describe, expect, it } from 'vitest';
import { Access, SIZE_MAX, Testbed } from '../../src/index.ts';
import { rcPairOn } from '../support/rc_pair.ts';

type Counts = { pds: number; mkeys: number; eqs: number; cqs: number; qps: number };

/** Logs every command the firmware completes, and its object counts after each. */
function watch(tb: Testbed, hca: number): { ops: string[]; counts: Counts[] } {
  const cmdif = tb.hca(hca).cmdif;
  const w = { ops: [] as string[], counts: [] as Counts[] };
  cmdif.tap = {
    command: (op, _opcode, _posted, _start, status) => {
      w.ops.push(status === 0 ? op : `${op}!${status}`);
      w.counts.push(cmdif.resourcesInUse());
    },
  };
  return w;
}

describe('closeDevice destroys what the driver made, in Linux order, before TEARDOWN_HCA', () => {
  it('objects of every kind on two contexts: the firmware holds none at TEARDOWN_HCA, and every page comes back', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 2 } });
    await tb.run(async () => {
      const a = await tb.openDevice(0);
      const b = await tb.openDevice(0);
      const peer = await tb.openDevice(1);
      // a connected pair with a WRITE done, so the QP has moved state and the MRs were used
      const { pd0, qp0, cq0 } = await rcPairOn(a, peer);
      const buf = tb.host(0).alloc(64 * 4096);
      const mr = await pd0.regMr(buf.addr, 64 * 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.MW_BIND);
      const odp = await pd0.regMr(buf.addr, 8 * 4096, Access.LOCAL_WRITE | Access.ON_DEMAND);
      const implicit = await pd0.regMr(0, SIZE_MAX, Access.LOCAL_WRITE | Access.ON_DEMAND);
      const fast = await pd0.allocMr('MEM_REG', 16);
      const mw1 = await pd0.allocMw(1);
      await pd0.allocMw(2);
      await pd0.localDmaLkey();
      await a.createCq(16, { compVector: 3 }); // its own completion EQ
      qp0.bindMw(mw1, { mr, addr: buf.addr, length: 4096, access: Access.REMOTE_WRITE }, { signaled: true });
      await cq0.wait(1);
      // the second context: its own PD, CQ and a QP never connected
      const pdB = await b.allocPd();
      const cqB = await b.createCq(32);
      await pdB.createQp({ sendCq: cqB, recvCq: cqB, maxSendWr: 8, maxRecvWr: 8 });
      void odp;
      void implicit;
      void fast;
      await tb.quiesce();
      const w = watch(tb, 0);
      expect(await tb.closeDevice(0)).toBe(0);
      const td = w.ops.indexOf('TEARDOWN_HCA');
      expect(td).toBeGreaterThan(0);
      expect(w.ops.slice(0, td).filter((op) => op.includes('!'))).toEqual([]); // every destroy succeeded
      // before TEARDOWN_HCA the firmware holds nothing: the counts after the command before it
      expect(w.counts[td - 1]).toEqual({ pds: 0, mkeys: 0, eqs: 0, cqs: 0, qps: 0 });
      // Linux order: user objects, then the cache's mkeys, the UMR QP pair, its CQ and PD, then the EQs
      const before = w.ops.slice(0, td);
      const firstEq = before.indexOf('DESTROY_EQ');
      expect(before.slice(firstEq).every((op) => op === 'DESTROY_EQ')).toBe(true);
      expect(before.filter((op) => op === 'DESTROY_EQ').length).toBe(4); // completion EQ of vector 3, two contexts' event EQs, the command EQ
      expect(before.slice(firstEq - 4, firstEq)).toEqual(['DESTROY_QP', 'DESTROY_QP', 'DESTROY_CQ', 'DEALLOC_PD']);
      const st = tb.stats()['tb.hca0.pages'];
      expect(st.returned).toBe(st.given);
      expect(st.held).toBe(0);
      expect(st.in_use).toBe(0);
      expect(tb.hca(0).icm.pagesInUse).toBe(0);
      expect(tb.hca(0).cmdif.hcaState).toBe('DISABLED');
      // the application's objects are gone: a later call is EINVAL (destroyed), the context EIO
      await expect(mr.dereg()).rejects.toMatchObject({ errno: 'EINVAL' });
      await expect(a.allocPd()).rejects.toMatchObject({ errno: 'EIO' });
      expect((await b.getAsyncEvent()).type).toBe('DEVICE_FATAL');
    });
  }, 60_000);
});
