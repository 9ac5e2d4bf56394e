/**
 * ICM pages going back to the host: the firmware's own request (a negative PAGE_REQUEST when
 * many pages lie idle), the driver's close (TEARDOWN_HCA, every page reclaimed with MANAGE_PAGES
 * HCA_RETURN_PAGES, DISABLE_HCA), and the QP/CQ/EQ context tables taking pages as objects are
 * made.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError } from '../../src/index.ts';
import { CmdQueue } from '../../src/driver/core/cmd.ts';
import { OPTIMAL_RECLAIMED_PAGES } from '../../src/driver/core/pagealloc.ts';
import { CmdStatus } from '../../src/rtl/firmware/cmd_types.ts';
import { PAGE_REQUEST_BATCH, RECLAIM_ABOVE, RECLAIM_IDLE_PS } from '../../src/rtl/firmware/fw_pages.ts';
import { QPC_ICM_BYTES } from '../../src/rtl/memory/icm.ts';
import { CmdOpcode, ManagePagesOpMod } from '../../src/rtl/formats/constants.ts';
import { join } from 'node:path';
import { readVcdFile } from '../support/vcd_read.ts';
import { tempDir } from '../support/tmp.ts';

const MiB = 2 ** 20;

function logCommands(tb: Testbed): string[] {
  const log: string[] = [];
  tb.hca(0).cmdif.tap = { command: (op, _opcode, _posted, _start, status) => log.push(status === 0 ? op : `${op}!${status}`) };
  return log;
}

describe('the page lane in the waves', () => {
  it('cmdif.pg_*: start-up gives the boot and init pages, close takes them back, between TEARDOWN_HCA and DISABLE_HCA on cmdif.opcode', async () => {
    const vcd = join(tempDir('mlx5sim-pg-'), 'pg.vcd');
    const tb = new Testbed({ config: { mrCacheLimit: 0 }, trace: { vcd, scopes: ['tb.hca0.cmdif'] } });
    await tb.run(async () => {
      await tb.openDevice(0);
      await tb.closeDevice(0);
    });
    await tb.close();
    const v = await readVcdFile(vcd);
    const of = (sig: string): number[] => v.changes.filter(([, p, x]) => p === `tb.hca0.cmdif.${sig}` && x !== null).map(([, , x]) => x as number);
    const ops = of('pg_opcode');
    expect(ops.filter((x) => x === CmdOpcode.MANAGE_PAGES).length).toBeGreaterThanOrEqual(3);
    expect(of('pg_op_mod')).toEqual(expect.arrayContaining([ManagePagesOpMod.ALLOCATION_SUCCESS, ManagePagesOpMod.HCA_RETURN_PAGES]));
    const given = tb.stats()['tb.hca0.pages'].given as number;
    expect(of('pg_pages')).toEqual(expect.arrayContaining([1, 19, given]));
    const fg = of('opcode');
    expect(fg.indexOf(CmdOpcode.TEARDOWN_HCA)).toBeLessThan(fg.indexOf(CmdOpcode.DISABLE_HCA));
    expect(fg).toContain(CmdOpcode.QUERY_PAGES);
  });
});

describe('ICM pages returned', () => {
  it('close: TEARDOWN_HCA, MANAGE_PAGES HCA_RETURN_PAGES until every page is back and freed, DISABLE_HCA; then EIO', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 2 } });
    const log = logCommands(tb);
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const cq = await ctx.createCq(64);
      await pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 16, maxRecvWr: 16 });
      const buf = tb.host(0).alloc(4 * MiB);
      const mr = await pd.regMr(buf.addr, 4 * MiB, Access.LOCAL_WRITE);
      const hca = tb.hca(0);
      const held = hca.pages.heldPages();
      expect(held.length).toBeGreaterThan(0);
      for (const pa of held) expect(hca.mem.firstUnowned(pa, 4096)).toBe(-1);
      log.length = 0;
      expect(await tb.closeDevice(0)).toBe(0);
      // the MR cache's fills in flight end first, the driver destroys its objects and EQs
      // (close_device.test.ts), then mlx5_function_teardown's order: TEARDOWN_HCA, the reclaim, DISABLE_HCA
      const end = log.slice(log.indexOf('TEARDOWN_HCA'));
      const ops = new Set(['CREATE_MKEY', 'MANAGE_PAGES', 'DESTROY_MKEY', 'DESTROY_QP', 'DESTROY_CQ', 'DEALLOC_PD', 'DESTROY_EQ']);
      expect(log.slice(0, log.indexOf('TEARDOWN_HCA')).filter((op) => !ops.has(op))).toEqual([]);
      expect(log[log.indexOf('TEARDOWN_HCA') - 1]).toBe('DESTROY_EQ');
      expect(end.at(-1)).toBe('DISABLE_HCA');
      expect(end.slice(1, -1).every((op) => op === 'MANAGE_PAGES')).toBe(true);
      const st = tb.stats()['tb.hca0.pages'];
      expect(end.length - 2).toBe(Math.ceil((st.given as number) / OPTIMAL_RECLAIMED_PAGES));
      expect(st.returned).toBe(st.given);
      expect(st.held).toBe(0);
      expect(st.in_use).toBe(0);
      expect(CmdQueue.of(hca, tb.sim).pages?.holding).toBe(0);
      expect(CmdQueue.of(hca, tb.sim).pages?.returned).toBe(st.given);
      expect(hca.cmdif.hcaState).toBe('DISABLED');
      // every page is the host's again: no longer pinned for the device
      for (const pa of held) expect(hca.mem.firstUnowned(pa, 4096)).toBe(pa);
      expect(hca.icm.pagesInUse).toBe(0);
      // a context of a closed device: DEVICE_FATAL, and every command is EIO
      expect((await ctx.getAsyncEvent()).type).toBe('DEVICE_FATAL');
      await expect(ctx.allocPd()).rejects.toMatchObject({ errno: 'EIO' });
      await expect(mr.dereg()).rejects.toBeInstanceOf(VerbsError);
      await expect(tb.openDevice(0)).rejects.toMatchObject({ errno: 'EIO' });
    });
  });

  it('the firmware after TEARDOWN_HCA runs only the page commands and DISABLE_HCA; after DISABLE_HCA only ENABLE_HCA', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const { pd } = await ctx.cmdq.exec({ op: 'ALLOC_PD' });
      const cmdif = tb.hca(0).cmdif;
      await expect(cmdif.exec({ op: 'DISABLE_HCA' })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE, rule: 'hca_disable_state' });
      await expect(cmdif.exec({ op: 'TEARDOWN_HCA', profile: 1 })).rejects.toMatchObject({ status: CmdStatus.BAD_PARAM, rule: 'teardown_profile' });
      await cmdif.exec({ op: 'TEARDOWN_HCA' });
      expect(cmdif.resourcesInUse()).toEqual({ pds: 0, mkeys: 0, eqs: 0, cqs: 0, qps: 0 });
      await expect(cmdif.exec({ op: 'DEALLOC_PD', pd })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE, rule: 'hca_torn_down' });
      await expect(cmdif.exec({ op: 'ALLOC_PD' })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE });
      await expect(cmdif.exec({ op: 'TEARDOWN_HCA' })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE });
      await expect(cmdif.exec({ op: 'INIT_HCA' })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE });
      // ICM is empty: every page held is free, and a return hands them out (at most as many as asked)
      const pages = tb.hca(0).pages;
      expect(pages.used).toBe(0);
      const all = pages.available;
      const { pas } = await cmdif.exec({ op: 'MANAGE_PAGES', opMod: 2, numEntries: 3 });
      expect(pas.length).toBe(3);
      expect(pages.available).toBe(all - 3);
      await cmdif.exec({ op: 'DISABLE_HCA' });
      expect(cmdif.hcaState).toBe('DISABLED');
      await expect(cmdif.exec({ op: 'QUERY_PAGES', opMod: 1 })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE, rule: 'hca_disabled' });
      await cmdif.exec({ op: 'ENABLE_HCA' });
      expect(cmdif.hcaState).toBe('ENABLED');
    });
  });

  it('many QPs: their contexts take ICM pages, the firmware raises PAGE_REQUEST; destroyed, the pages go back to the pool', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const icm = tb.hca(0).icm;
      const { eqn } = await ctx.cmdq.exec({ op: 'CREATE_EQ', size: 64 });
      const { pd } = await ctx.cmdq.exec({ op: 'ALLOC_PD' });
      const { cqn } = await ctx.cmdq.exec({ op: 'CREATE_CQ', size: 64, eqn });
      const before = tb.stats()['tb.hca0.pages'];
      const perPage = 4096 / QPC_ICM_BYTES;
      const n = 24 * perPage; // 24 pages of QP contexts: more than the init pages left
      const qpns: number[] = [];
      for (let i = 0; i < n; i++) qpns.push((await ctx.cmdq.exec({ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 8, rqSize: 8 })).qpn);
      const st = tb.stats()['tb.hca0.pages'];
      expect(st.page_requests as number).toBeGreaterThan(before.page_requests as number);
      expect(icm.qpc.pagesInUse).toBeGreaterThanOrEqual(24);
      expect(new Set(qpns).size).toBe(n); // no number skipped or repeated while a CREATE_QP waited for pages
      expect(qpns.at(-1)! - qpns[0]).toBe(n - 1);
      const used = st.in_use as number;
      for (const qpn of qpns) await ctx.cmdq.exec({ op: 'DESTROY_QP', qpn });
      expect(tb.stats()['tb.hca0.pages'].in_use).toBe(used - (icm.qpc.pagesInUse === 1 ? 23 : 24));
    });
  });

  it('many mkeys destroyed, ICM idle: the firmware asks pages back (negative PAGE_REQUEST), the driver reclaims them, a reserve stays', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const { pd } = await ctx.cmdq.exec({ op: 'ALLOC_PD' });
      // free mkeys with room for 16,384 MTTs: 32 pages of translation table each (as the MR cache makes them)
      const mkey = { op: 'CREATE_MKEY', tag: 0, free: true, accessMode: 1, access: 0, umrEn: true, pd, start: 0, length: 0, logPageSize: 12, xltCapacity: 16384 } as const;
      const indices: number[] = [];
      for (let i = 0; i < 12; i++) indices.push((await ctx.cmdq.exec(mkey)).index);
      const peak = tb.stats()['tb.hca0.pages'];
      expect(peak.returned).toBe(0);
      for (const index of indices) await ctx.cmdq.exec({ op: 'DESTROY_MKEY', index });
      const freed = tb.stats()['tb.hca0.pages'];
      expect((freed.held as number) - (freed.in_use as number)).toBeGreaterThan(RECLAIM_ABOVE);
      expect(freed.return_requests).toBe(0); // not before ICM has been idle
      await tb.delay(2 * RECLAIM_IDLE_PS);
      await tb.quiesce();
      const st = tb.stats()['tb.hca0.pages'];
      expect(st.return_requests).toBe(1);
      expect(st.returned as number).toBeGreaterThan(300);
      expect((st.held as number) - (st.in_use as number)).toBe(PAGE_REQUEST_BATCH);
      const drv = CmdQueue.of(tb.hca(0), tb.sim).pages!;
      expect(drv.returned).toBe(st.returned);
      expect(drv.holding).toBe(st.held);
      // the adapter goes on: a new mkey takes pages again (the reserve, then a PAGE_REQUEST)
      const again = await ctx.cmdq.exec(mkey);
      await ctx.cmdq.exec({ op: 'DESTROY_MKEY', index: again.index });
      expect(await tb.closeDevice(0)).toBe(0);
      expect(tb.stats()['tb.hca0.pages'].returned).toBe(tb.stats()['tb.hca0.pages'].given);
    });
  });
});
