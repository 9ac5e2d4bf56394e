/**
 * SEND_WITH_INV's remote invalidation is timed as the hardware would do it: the responder hands
 * the UMR engine a LOCAL_INV WQE (kind REMOTE_INV, the "Remote invalidate" rules of
 * spec/semantics.md), which reads the context from ICM, checks, writes it back (posted) and
 * updates the mkey cache coherently, before the receive CQE is written.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, type Mr } from '../../src/index.ts';
import type { HistogramJson } from '../../src/sim/index.ts';
import { rcPair } from '../support/rc_pair.ts';

const PAGE = 4096;

/** A counter and a histogram of `tb.stats()`. */
const count = (tb: Testbed, scope: string, name: string): number => tb.stats()[scope][name] as number;
const hist = (tb: Testbed, scope: string, name: string): HistogramJson => tb.stats()[scope][name] as HistogramJson;

async function setup(tb: Testbed) {
  const { c0: ctx0, pd0, pd1, cq0, cq1, qp0, qp1 } = await rcPair(tb);
  const h0 = tb.host(0);
  const rbuf = h0.alloc(PAGE, { align: PAGE });
  const rmr = await pd0.regMr(rbuf.addr, PAGE, Access.LOCAL_WRITE);
  const sbuf = tb.host(1).alloc(PAGE, { align: PAGE });
  const smr = await pd1.regMr(sbuf.addr, PAGE, Access.LOCAL_WRITE);
  /** A fast-reg MR on hca0, registered for remote writes. */
  const fastReg = async (): Promise<Mr> => {
    const area = h0.alloc(PAGE, { align: PAGE });
    const fmr = await pd0.allocMr('MEM_REG', 1);
    fmr.mapSg([{ addr: area.addr, length: PAGE }]);
    qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_WRITE, signaled: true });
    expect((await cq0.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'REG_MR' });
    return fmr;
  };
  return { ctx0, pd0, cq0, cq1, qp0, qp1, rbuf, rmr, sbuf, smr, fastReg };
}

describe('remote invalidation (SEND_WITH_INV) through the UMR engine', () => {
  it('a cached key is refused right after the invalidation: the mkey cache is coherent', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await setup(tb);
      const fmr = await s.fastReg();
      const write = (wrId: number) =>
        s.qp1.postSend({ wrId, opcode: 'RDMA_WRITE', sgList: [{ addr: s.sbuf.addr, length: 32, lkey: s.smr.lkey }], remoteAddr: fmr.iova, rkey: fmr.rkey, signaled: true });
      // the key is now in hca0's mkey cache
      write(10);
      expect((await s.cq1.wait(1))[0]).toMatchObject({ wrId: 10, status: 'SUCCESS' });
      const hitsBefore = count(tb, 'tb.hca0.mkey_cache', 'hits');
      s.qp0.postRecv({ wrId: 20, sgList: [{ addr: s.rbuf.addr, length: 64, lkey: s.rmr.lkey }] });
      s.qp1.postSend({ wrId: 11, opcode: 'SEND_WITH_INV', invalidateRkey: fmr.rkey, sgList: [{ addr: s.sbuf.addr, length: 16, lkey: s.smr.lkey }], signaled: true });
      expect((await s.cq0.wait(1))[0]).toMatchObject({ wrId: 20, status: 'SUCCESS', wcFlags: new Set(['WITH_INV']), invalidatedRkey: fmr.rkey });
      expect((await s.cq1.wait(1))[0]).toMatchObject({ wrId: 11, status: 'SUCCESS', opcode: 'SEND' });
      const st = tb.stats();
      expect(st['tb.hca0.umr_engine'].jobs_remote_inv).toBe(1);
      expect(st['tb.hca0.umr_engine'].posted_writes).toBeGreaterThanOrEqual(2); // the REG_MR's and the invalidation's
      expect(st['tb.hca0.responder'].remote_invalidations).toBe(1);
      // the FREE context, straight from the cache (no stale VALID entry): remote access error
      write(12);
      expect((await s.cq1.wait(1))[0]).toMatchObject({ wrId: 12, status: 'REM_ACCESS_ERR' });
      expect(count(tb, 'tb.hca0.mkey_cache', 'hits')).toBeGreaterThan(hitsBefore);
      expect((await s.ctx0.queryMkey(fmr.rkey))[0] & 0x40).toBe(0x40);
    });
  });

  it('takes what a LOCAL_INV takes (an ICM context read, the check, a posted write), before the receive CQE', async () => {
    // no MR-cache pre-fill: its background commands' mailbox DMA shares PCIe with what is timed
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      const [a, b] = [await s.fastReg(), await s.fastReg()];
      // LOCAL_INV of a: the UMR engine's latency for it
      s.qp0.postSend({ wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: a.rkey, signaled: true });
      expect((await s.cq0.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'LOCAL_INV' });
      const localInv = hist(tb, 'tb.hca0.umr_engine', 'latency_ps').min; // the LOCAL_INV: the fewest writes of the three jobs
      // SEND vs SEND_WITH_INV of b, the same 16 bytes: post to receive completion
      const recvTime = async (inv: boolean): Promise<number> => {
        s.qp0.postRecv({ wrId: 30, sgList: [{ addr: s.rbuf.addr, length: 64, lkey: s.rmr.lkey }] });
        const t0 = tb.now;
        s.qp1.postSend({ wrId: 31, opcode: inv ? 'SEND_WITH_INV' : 'SEND', ...(inv ? { invalidateRkey: b.rkey } : {}), sgList: [{ addr: s.sbuf.addr, length: 16, lkey: s.smr.lkey }], signaled: true });
        const [rv] = await s.cq0.wait(1);
        expect(rv.status).toBe('SUCCESS');
        const t = tb.now - t0;
        await s.cq1.wait(1);
        return t;
      };
      await recvTime(false); // warm the lkeys' cache entries
      const plain = await recvTime(false);
      const withInv = await recvTime(true);
      const remote = hist(tb, 'tb.hca0.responder', 'remote_inv_latency_ps');
      expect(remote.count).toBe(1);
      const cfg = tb.hca(0).cfg;
      const cycle = 1e6 / cfg.coreClockMHz;
      // one dependent ICM read (64 B) at least, and within a few cycles of the LOCAL_INV
      expect(remote.max).toBeGreaterThanOrEqual(cfg.pcieReadBasePs);
      expect(Math.abs(remote.max - localInv)).toBeLessThanOrEqual(4 * cycle);
      // the receive CQE waits for it
      expect(withInv - plain).toBeGreaterThanOrEqual(remote.max - 2 * cycle);
      expect(withInv - plain).toBeLessThanOrEqual(remote.max + 4 * cycle);
    });
  });

  it('a failed remote invalidation costs the context read too, changes nothing, and completes REM_INV_REQ_ERR', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await setup(tb);
      const fmr = await s.fastReg();
      s.qp0.postRecv({ wrId: 40, sgList: [{ addr: s.rbuf.addr, length: 64, lkey: s.rmr.lkey }] });
      // a user MR: no remote invalidation (en_rinval clear)
      s.qp1.postSend({ wrId: 41, opcode: 'SEND_WITH_INV', invalidateRkey: s.rmr.rkey, sgList: [{ addr: s.sbuf.addr, length: 16, lkey: s.smr.lkey }], signaled: true });
      expect((await s.cq0.wait(1))[0]).toMatchObject({ wrId: 40, status: 'REM_INV_REQ_ERR' });
      expect((await s.cq1.wait(1))[0]).toMatchObject({ wrId: 41, status: 'SUCCESS' });
      const st = tb.stats();
      expect(st['tb.hca0.umr_engine'].errors_rem_inv_req_err).toBe(1);
      expect(hist(tb, 'tb.hca0.responder', 'remote_inv_latency_ps').min).toBeGreaterThanOrEqual(tb.hca(0).cfg.pcieReadBasePs);
      expect((await s.qp0.query()).state).toBe('ERR');
      expect((await s.ctx0.queryMkey(s.rmr.rkey))[0] & 0x40).toBe(0);
      expect((await s.ctx0.queryMkey(fmr.rkey))[0] & 0x40).toBe(0);
    });
  });
});
