/**
 * RDMA_READ_WITH_INV behind config.readWithInvalidate (API.md "Send work requests"): the sync
 * error with the option off, the model-private WQE encoding (an RDMA_READ with opmod
 * WQE_OPMOD_READ_WITH_INV and the key in imm), and end to end: the read lands, then the local
 * key is invalidated through the UMR engine (LOCAL_INV rules, spec/semantics.md), then the CQE.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError } from '../../src/index.ts';
import { WQE_OPMOD_READ_WITH_INV } from '../../src/rtl/formats/constants.ts';
import { rcPair } from '../support/rc_pair.ts';

const PAGE = 4096;
const SIGNALED = 2 << 2; // fm_ce_se CE = 2 (CQ update)

/** hca0: a fast-reg MR registered over a page (the read's destination); hca1: a source MR with REMOTE_READ. */
async function setup(tb: Testbed) {
  const p = await rcPair(tb);
  const h0 = tb.host(0);
  const h1 = tb.host(1);
  const dst = h0.alloc(PAGE, { align: PAGE });
  const fmr = await p.pd0.allocMr('MEM_REG', 1);
  fmr.mapSg([{ addr: dst.addr, length: PAGE }]);
  p.qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE, signaled: true });
  expect((await p.cq0.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'REG_MR' });
  const src = h1.alloc(PAGE, { align: PAGE });
  h1.write(src.addr, Uint8Array.from({ length: PAGE }, (_, i) => (i * 7 + 3) & 0xff));
  const smr = await p.pd1.regMr(src.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
  return { ...p, h0, h1, dst, fmr, src, smr };
}

describe('RDMA_READ_WITH_INV (config.readWithInvalidate)', () => {
  it('is EOPNOTSUPP with the option off (the default), and posts with it on', async () => {
    for (const on of [false, true]) {
      const tb = new Testbed({ hcas: 2, config: { readWithInvalidate: on } });
      await tb.run(async () => {
        const s = await setup(tb);
        const wr = { wrId: 2, opcode: 'RDMA_READ_WITH_INV' as const, sgList: [{ addr: s.dst.addr, length: 8, lkey: s.fmr.lkey }], remoteAddr: s.src.addr, rkey: s.smr.rkey, invalidateRkey: s.fmr.lkey };
        let err: unknown = null;
        try {
          s.qp0.postSend(wr);
        } catch (e) {
          err = e;
        }
        if (on) expect(err).toBeNull();
        else {
          expect(err).toBeInstanceOf(VerbsError);
          expect((err as VerbsError).errno).toBe('EOPNOTSUPP');
          expect((err as VerbsError).message).toMatch(/RDMA_READ_WITH_INV/);
        }
      });
    }
  });

  it('WQE bytes: RDMA_READ 0x10 with opmod 0x01 and the key in imm; the read lands, the MR is FREE after', async () => {
    const tb = new Testbed({ hcas: 2, config: { readWithInvalidate: true } });
    await tb.run(async () => {
      const s = await setup(tb);
      const ctx0 = s.pd0.ctx;
      s.qp0.postSend({ wrId: 2, opcode: 'RDMA_READ_WITH_INV', sgList: [{ addr: s.dst.addr + 64, length: 200, lkey: s.fmr.lkey }], remoteAddr: s.src.addr + 8, rkey: s.smr.rkey, invalidateRkey: s.fmr.lkey, signaled: true });
      const idx = 3; // the REG_MR before it (inline MTTs) took WQEBBs 0..2
      const w = new DataView(tb.host(0).read(s.qp0.sq.addr + idx * 64, 64).buffer);
      expect(WQE_OPMOD_READ_WITH_INV).toBe(0x01);
      expect(w.getUint32(0)).toBe(((0x01 << 24) | (idx << 8) | 0x10) >>> 0); // opmod | wqe_index | RDMA_READ
      expect(w.getUint32(4)).toBe(((s.qp0.qpNum << 8) | 3) >>> 0); // ctrl + raddr + one data segment
      expect(w.getUint8(11)).toBe(SIGNALED | (1 << 5)); // after a UMR: the initiator-small fence
      expect(w.getUint32(12)).toBe(s.fmr.lkey); // imm: the key to invalidate
      expect(w.getUint32(16) * 2 ** 32 + w.getUint32(20)).toBe(s.src.addr + 8); // raddr
      expect(w.getUint32(24)).toBe(s.smr.rkey);
      expect(w.getUint32(32)).toBe(200); // data segment
      expect(w.getUint32(36)).toBe(s.fmr.lkey);
      expect(w.getUint32(40) * 2 ** 32 + w.getUint32(44)).toBe(s.dst.addr + 64);

      const t0 = tb.now;
      const [wc] = await s.cq0.wait(1);
      expect(wc).toMatchObject({ wrId: 2, status: 'SUCCESS', opcode: 'RDMA_READ', byteLen: 200 });
      expect(tb.host(0).read(s.dst.addr + 64, 200)).toEqual(tb.host(1).read(s.src.addr + 8, 200));
      // the invalidation went through the UMR engine (one more LOCAL_INV job) before the CQE
      const umr = tb.stats()['tb.hca0.umr_engine'];
      expect(umr.jobs_local_inv).toBe(1);
      expect(tb.now - t0).toBeGreaterThan(0);
      // the MR is FREE: its context says so, and a later local access through it fails
      const raw = await ctx0.queryMkey(s.fmr.lkey);
      expect(raw[0] & 0x40).toBe(0x40);
      s.qp0.postSend({ wrId: 3, opcode: 'RDMA_READ', sgList: [{ addr: s.dst.addr, length: 8, lkey: s.fmr.lkey }], remoteAddr: s.src.addr, rkey: s.smr.rkey, signaled: true });
      expect((await s.cq0.wait(1))[0]).toMatchObject({ wrId: 3, status: 'LOC_PROT_ERR', opcode: 'RDMA_READ' });
    });
  });

  it('a key that names nothing: LOC_QP_OP_ERR after the read; the QP goes to ERR and the next WR is flushed', async () => {
    const tb = new Testbed({ hcas: 2, config: { readWithInvalidate: true } });
    await tb.run(async () => {
      const s = await setup(tb);
      const bogus = ((s.fmr.lkey >>> 8) + 0x300) * 256 + 0x11; // an index nothing was created at
      s.qp0.postSend({ wrId: 2, opcode: 'RDMA_READ_WITH_INV', sgList: [{ addr: s.dst.addr, length: 32, lkey: s.fmr.lkey }], remoteAddr: s.src.addr, rkey: s.smr.rkey, invalidateRkey: bogus, signaled: true });
      s.qp0.postSend({ wrId: 3, opcode: 'RDMA_READ', sgList: [{ addr: s.dst.addr, length: 8, lkey: s.fmr.lkey }], remoteAddr: s.src.addr, rkey: s.smr.rkey, signaled: true });
      const wcs = await s.cq0.wait(2);
      expect(wcs.map((w) => [w.wrId, w.status, w.opcode])).toEqual([[2, 'LOC_QP_OP_ERR', 'RDMA_READ'], [3, 'WR_FLUSH_ERR', 'RDMA_READ']]);
      expect((await s.qp0.query()).state).toBe('ERR');
      // the read data was placed before the invalidation failed (the model's order too)
      expect(tb.host(0).read(s.dst.addr, 32)).toEqual(tb.host(1).read(s.src.addr, 32));
      // the destination MR is untouched: still VALID
      const raw = await s.pd0.ctx.queryMkey(s.fmr.lkey);
      expect(raw[0] & 0x40).toBe(0);
    });
  });

  it('with the option off, the encoding arriving anyway is an unknown opmod: LOC_QP_OP_ERR, nothing read', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const s = await setup(tb);
      s.qp0.postSend({ wrId: 2, opcode: 'RDMA_READ', sgList: [{ addr: s.dst.addr, length: 32, lkey: s.fmr.lkey }], remoteAddr: s.src.addr, rkey: s.smr.rkey, signaled: true });
      // patch the posted WQE before the doorbell reaches the adapter (no simulated time passed):
      // opmod READ_WITH_INV and a key in imm, as a driver built for the option would write
      const at = s.qp0.sq.addr + 3 * 64;
      tb.host(0).write(at, Uint8Array.of(WQE_OPMOD_READ_WITH_INV));
      const imm = new Uint8Array(4);
      new DataView(imm.buffer).setUint32(0, s.fmr.lkey);
      tb.host(0).write(at + 12, imm);
      const [wc] = await s.cq0.wait(1);
      expect(wc).toMatchObject({ wrId: 2, status: 'LOC_QP_OP_ERR', opcode: 'RDMA_READ' });
      expect(tb.host(0).read(s.dst.addr, 32).every((b) => b === 0)).toBe(true);
      expect((await s.pd0.ctx.queryMkey(s.fmr.lkey))[0] & 0x40).toBe(0);
    });
  });
});
