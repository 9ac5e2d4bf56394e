import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, type Mr } from '../../src/index.ts';
import { BOOT_PAGES, INIT_PAGES, PAGE_REQUEST_BATCH } from '../../src/rtl/firmware/fw_pages.ts';
import { CmdQueue } from '../../src/driver/core/cmd.ts';
import { CmdStatus } from '../../src/rtl/firmware/cmd_types.ts';

const MiB = 2 ** 20;

/** The firmware's commands in execution order (the transaction log's tap). */
function logCommands(tb: Testbed): string[] {
  const log: string[] = [];
  tb.hca(0).cmdif.tap = { command: (op, _opcode, _posted, _start, status) => log.push(status === 0 ? op : `${op}!${status}`) };
  return log;
}

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof VerbsError) return `${e.errno}: ${e.message}`;
    throw e;
  }
}

describe('ICM pages from the driver (MANAGE_PAGES, PAGE_REQUEST)', () => {
  it('starts as mlx5_core does: ENABLE_HCA, boot pages, init pages, INIT_HCA, then the command EQ; pages given are the pages asked', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    const log = logCommands(tb);
    await tb.run(async () => {
      await tb.openDevice(0);
      await tb.quiesce();
    });
    expect(log.slice(0, 7)).toEqual(['ENABLE_HCA', 'QUERY_PAGES', 'MANAGE_PAGES', 'QUERY_PAGES', 'MANAGE_PAGES', 'INIT_HCA', 'CREATE_EQ']);
    const pages = tb.hca(0).pages;
    const st = tb.stats()['tb.hca0.pages'];
    expect(st.given).toBe(BOOT_PAGES + INIT_PAGES + (st.requested as number));
    expect(st.returned).toBe(0);
    expect(pages.used + pages.available).toBe(st.given);
    expect(tb.hca(0).cmdif.hcaState).toBe('UP');
    const drv = CmdQueue.of(tb.hca(0), tb.sim).pages;
    expect(drv?.given).toBe(st.given);
  });

  it('a command before INIT_HCA fails BAD_SYS_STATE; INIT_HCA or ENABLE_HCA again too', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      await tb.openDevice(0);
      const cmdif = tb.hca(0).cmdif;
      await expect(cmdif.exec({ op: 'INIT_HCA' })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE });
      await expect(cmdif.exec({ op: 'ENABLE_HCA' })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE });
    });
    const fresh = new Testbed({ config: { mrCacheLimit: 0 } });
    await fresh.run(async () => {
      const cmdif = fresh.hca(0).cmdif;
      await cmdif.exec({ op: 'ENABLE_HCA' });
      await expect(cmdif.exec({ op: 'ALLOC_PD' })).rejects.toMatchObject({ status: CmdStatus.BAD_SYS_STATE, rule: 'hca_not_initialized' });
      await cmdif.exec({ op: 'INIT_HCA' });
      expect((await cmdif.exec({ op: 'ALLOC_PD' })).pd).toBeGreaterThan(0);
    });
  });

  it('many MRs need more ICM: the firmware raises PAGE_REQUEST, the driver gives them, the MRs register', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const before = tb.stats()['tb.hca0.pages'];
      const buf = tb.host(0).alloc(48 * 2 * MiB);
      const mrs: Mr[] = [];
      // 2 MiB each: 512 MTTs, a 4 KiB translation page of its own
      for (let i = 0; i < 48; i++) mrs.push(await pd.regMr(buf.addr + i * 2 * MiB, 2 * MiB, Access.LOCAL_WRITE));
      const st = tb.stats()['tb.hca0.pages'];
      expect(st.page_requests as number).toBeGreaterThan(before.page_requests as number);
      expect(st.requested as number).toBeGreaterThanOrEqual(PAGE_REQUEST_BATCH);
      expect(st.given).toBe(BOOT_PAGES + INIT_PAGES + (st.requested as number));
      expect(st.in_use as number).toBeGreaterThanOrEqual(48);
      expect(tb.hca(0).icm.pagesInUse).toBe(st.in_use);
      // deregistered MRs' pages stay the firmware's (no reclaim)
      for (const mr of mrs) await mr.dereg();
      const after = tb.stats()['tb.hca0.pages'];
      expect(after.given).toBe(st.given);
    });
  });

  it('the given pages are pinned and the DMA checker counts them as the device\'s; ICM lives in them', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(8192);
      const mr = await pd.regMr(buf.addr, 8192, Access.LOCAL_WRITE);
      const hca = tb.hca(0);
      const held = hca.pages.heldPages();
      expect(held.length).toBeGreaterThan(0);
      for (const pa of held) expect(hca.mem.firstUnowned(pa, 4096)).toBe(-1);
      const ctxAddr = hca.icm.mkeyContextAddr(mr.lkey >>> 8);
      const ctxPage = ctxAddr - (ctxAddr % 4096);
      expect(held).toContain(ctxPage);
    });
  });

  it('host ENOMEM: MANAGE_PAGES ALLOCATION_FAIL, the registration is VerbsError ENOMEM, the adapter keeps working', async () => {
    const tb = new Testbed({ config: { hostMemBytes: 64 * MiB, mrCacheLimit: 0 } });
    const log = logCommands(tb);
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const host = tb.host(0);
      const buf = host.alloc(40 * MiB);
      host.fill(buf.addr, 40 * MiB, 1); // every page backed: pinning needs no more frames
      const cmd = CmdQueue.of(tb.hca(0), tb.sim);
      const small: Mr = await pd.regMr(buf.addr, 4096, Access.LOCAL_WRITE); // mailboxes in the pool now
      const mem = tb.hca(0).mem;
      const spare = tb.hca(0).pages.available;
      const hog = mem.allocFrames(mem.frameCount - 1 - mem.framesInUse - 8); // 8 frames left; the table needs 20 more than the firmware holds
      expect(spare).toBeLessThan(20);
      const failsBefore = cmd.pages?.allocFailed ?? 0;
      expect(await outcome(pd.regMr(buf.addr, 40 * MiB, Access.LOCAL_WRITE))).toMatch(/^ENOMEM: .*NO_RESOURCES/);
      expect(cmd.pages?.allocFailed ?? 0).toBeGreaterThan(failsBefore);
      expect(tb.stats()['tb.hca0.pages'].alloc_fail).toBeGreaterThan(0);
      mem.freeFrames(hog);
      const mr = await pd.regMr(buf.addr, 40 * MiB, Access.LOCAL_WRITE);
      await mr.dereg();
      await small.dereg();
    });
    expect(log).toContain('MANAGE_PAGES');
  });
});
