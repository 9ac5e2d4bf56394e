/**
 * The driver's UMR QP as mlx5_ib's umr.c runs it (issue 18 item 4): many UMRs in flight up to
 * MAX_UMR_WR (config `umrMaxInFlight`), each completion matched to its poster by wr id, and the
 * QP recovered after a failed UMR, its flushed followers posted again.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError } from '../../src/index.ts';

const PAGE = 4096;

async function burst(umrMaxInFlight: number): Promise<{ peak: number; ok: number }> {
  const tb = new Testbed({ config: { umrMaxInFlight } });
  let peak = 0;
  let ok = 0;
  await tb.run(async () => {
    const ctx = await tb.openDevice(0);
    const pd = await ctx.allocPd();
    const buf = tb.host(0).alloc(64 * PAGE);
    await (await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE)).dereg(); // starts the MR cache's fill
    await tb.quiesce(); // the cache full: every registration below is a UMR
    const mrs = await Promise.all(Array.from({ length: 24 }, (_, i) => pd.regMr(buf.addr + i * 2 * PAGE, 2 * PAGE, Access.LOCAL_WRITE)));
    ok = mrs.length;
    await Promise.all(mrs.map((m) => m.dereg()));
    peak = ctx.umr.inFlightPeak;
  });
  return { peak, ok };
}

describe('the driver UMR QP', () => {
  it('keeps many UMRs in flight, never more than umrMaxInFlight', async () => {
    const many = await burst(128);
    expect(many.ok).toBe(24);
    expect(many.peak).toBeGreaterThan(4);
    const few = await burst(2);
    expect(few.ok).toBe(24);
    expect(few.peak).toBe(2);
  });

  it('a UMR whose free-state check fails completes LOC_QP_OP_ERR; the QP is recovered and the UMRs behind it succeed', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(64 * PAGE);
      const live = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE);
      // an enable of an mkey that is not free: CHECK_FREE (mlx5's MLX5_UMR_CHECK_NOT_FREE, "fail
      // if not free", umr.c:598) fails, with others posted behind it
      const bad = ctx.umr.enable(live.deviceKey >>> 8, pd, Access.LOCAL_WRITE, buf.addr, PAGE, [tb.host(0).dmaAddress(buf.addr)]).then(() => null, (e: unknown) => e);
      const good = Array.from({ length: 6 }, (_, i) => pd.regMr(buf.addr + (i + 1) * 2 * PAGE, 2 * PAGE, Access.LOCAL_WRITE));
      const err = await bad;
      expect(err).toBeInstanceOf(VerbsError);
      expect(String((err as Error).message)).toMatch(/LOC_QP_OP_ERR/);
      const mrs = await Promise.all(good);
      expect(mrs).toHaveLength(6);
      expect(ctx.umr.recoveries).toBe(1);
      // the recovered QP works
      const again = await pd.regMr(buf.addr + 40 * PAGE, PAGE, Access.LOCAL_WRITE);
      await again.dereg();
      for (const m of mrs) await m.dereg();
      await live.dereg();
    });
    const st = tb.stats()['tb.hca0.umr_engine'];
    expect(st.errors_loc_qp_op_err).toBe(1);
  });
});
