/**
 * Translation updates carry the check mlx5 sets on them (issue 18 item 6):
 * mlx5r_umr_set_update_xlt_ctrl_seg (Linux 6.12 drivers/infiniband/hw/mlx5/umr.c:591-600) puts
 * MLX5_UMR_CHECK_FREE, "fail if free", on an update that does not enable the mkey (ODP maps and
 * zaps, an implicit parent's KSM entries), MLX5_UMR_CHECK_NOT_FREE, "fail if not free", on one
 * that enables it (here: the REG_MR that enables a cache mkey). When the check fails the UMR
 * completes LOC_QP_OP_ERR and writes nothing; the driver then recovers its UMR QP (umr.c:391-408)
 * and, for a zap, lets the pages go all the same (odp.c:327-340 ignores the zap's result).
 */
import { describe, expect, it } from 'vitest';
import { Access, SIZE_MAX, Testbed, VerbsError } from '../../src/index.ts';
import { buildXltUpdateWqe } from '../../src/driver/wqe_builder.ts';
import { UmrCtrlFlag } from '../../src/rtl/formats/constants.ts';
import { rcPair } from '../support/rc_pair.ts';

const PAGE = 4096;

describe('translation updates: "fail if free" as umr.c sets it', () => {
  it('an ODP translation update carries TRANSLATION_OFFSET_EN and mlx5\'s CHECK_FREE bit (0x40, "fail if free"), not the enabling check', () => {
    const buf = new Uint8Array(256);
    const v = new DataView(buf.buffer);
    buildXltUpdateWqe(v, 0, { wqeIndex: 0, qpn: 0x10, key: 0x1234, xltOffsetOcto: 4, list: new Uint8Array(128), listAddr: 0x10_0000, listLkey: 0x100 });
    const flags = buf[16];
    expect(flags).toBe(0x10 | 0x40); // behind a data segment: not INLINE
    expect(flags & UmrCtrlFlag.CHECK_NOT_FREE).toBe(0x40); // device.h:291 MLX5_UMR_CHECK_FREE = 2 << 5
    expect(flags & UmrCtrlFlag.CHECK_FREE).toBe(0); // device.h:290 MLX5_UMR_CHECK_NOT_FREE = 1 << 5: enabling only
  });

  it('after a consumer\'s LOCAL_INV of an ODP MR, its zap fails LOC_QP_OP_ERR (the UMR QP recovers) and madvise still frees the page; a prefetch, whose map fails, is EFAULT', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true }, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const h0 = tb.host(0);
      const a = h0.alloc(PAGE);
      const omr = await p.pd0.regMr(a.addr, PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      await p.pd0.adviseMr('PREFETCH_WRITE', [{ addr: a.addr, length: PAGE, lkey: omr.lkey }], { flush: true });
      const frame = h0.dmaAddress(a.addr);
      const umr = tb.stats()['tb.hca0.umr_engine'];
      const errors0 = umr.errors_loc_qp_op_err as number;
      p.qp0.postSend({ wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: omr.lkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      await h0.madviseDontNeed(a.addr, PAGE);
      // the zap met a free mkey: nothing written, the check's error
      expect((tb.stats()['tb.hca0.umr_engine'].errors_loc_qp_op_err as number) - errors0).toBe(1);
      expect(p.c0.odp.failedUpdates).toBe(1);
      expect(p.c0.umr.recoveries).toBe(1);
      expect(tb.hca(0).mem.isAllocated(frame)).toBe(false); // the page went all the same
      // a prefetch maps the page again: its map UMR fails the same way, and the call with it
      const err = await p.pd0.adviseMr('PREFETCH_WRITE', [{ addr: a.addr, length: PAGE, lkey: omr.lkey }], { flush: true }).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(VerbsError);
      expect((err as VerbsError).errno).toBe('EFAULT');
      expect(p.c0.odp.failedUpdates).toBe(2);
      await omr.dereg();
    });
    expect(tb.checkers[0].violationCount).toBe(0);
    expect(tb.hca(0).mem.framesOrphaned).toBe(0);
  });

  it('after a consumer\'s LOCAL_INV of an implicit ODP MR, freeing an emptied child rewrites the parent\'s KSM entry, which fails; madvise returns all the same (odp.c:216 ignores it)', async () => {
    const tb = new Testbed({ hcas: 2, trace: { checkDma: true }, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const p = await rcPair(tb);
      const h0 = tb.host(0);
      const a = h0.alloc(PAGE);
      const imr = await p.pd0.regMr(0, SIZE_MAX, Access.ON_DEMAND | Access.LOCAL_WRITE);
      // the prefetch makes the child MR over the page and writes the parent's KSM entry for it
      await p.pd0.adviseMr('PREFETCH_WRITE', [{ addr: a.addr, length: PAGE, lkey: imr.lkey }], { flush: true });
      const frame = h0.dmaAddress(a.addr);
      p.qp0.postSend({ wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: imr.lkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      const failed0 = p.c0.odp.failedUpdates;
      // the child's only page goes: the child is freed, and its entry in the (free) parent is rewritten
      await h0.madviseDontNeed(a.addr, PAGE);
      await tb.quiesce();
      expect(p.c0.odp.failedUpdates - failed0).toBe(1);
      expect(tb.hca(0).mem.isAllocated(frame)).toBe(false);
      await imr.dereg();
    });
    expect(tb.checkers[0].violationCount).toBe(0);
    expect(tb.hca(0).mem.framesOrphaned).toBe(0);
  });
});
