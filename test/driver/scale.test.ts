/**
 * Scale (issue 10 item 8, issue 12's mkey pool): registrations as large and as many as the
 * configuration allows, and the errors of a real shortage.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, type Context, type Mr, type Qp } from '../../src/index.ts';

const GiB = 2 ** 30;
const MiB = 2 ** 20;

/** A loopback RC pair on adapter 0 (one PD, one CQ). */
async function loopback(tb: Testbed): Promise<{ ctx: Context; pd: Awaited<ReturnType<Context['allocPd']>>; qp: Qp; cq: Awaited<ReturnType<Context['createCq']>> }> {
  const ctx = await tb.openDevice(0);
  const pd = await ctx.allocPd();
  const cq = await ctx.createCq(16);
  const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
  const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
  await qp.connect(peer);
  return { ctx, pd, qp, cq };
}

/** Errors of `p`, as `errno: message`, or 'ok'. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    return e instanceof VerbsError ? `${e.errno}: ${e.message}` : `not a VerbsError: ${String(e)}`;
  }
}

describe('scale', () => {
  it('registers a 1 M-page (4 GiB) MR, its table over scattered ICM pages, and READs its last page', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const { pd, qp, cq } = await loopback(tb);
      const host = tb.host(0);
      const big = host.alloc(4 * GiB);
      host.write(big.addr + 4 * GiB - 8, Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8));
      const mr = await pd.regMr(big.addr, 4 * GiB, Access.LOCAL_WRITE | Access.REMOTE_READ);
      const dst = host.alloc(4096);
      const dmr = await pd.regMr(dst.addr, 4096, Access.LOCAL_WRITE);
      qp.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 8, lkey: dmr.lkey }], remoteAddr: big.addr + 4 * GiB - 8, rkey: mr.rkey, signaled: true });
      const [wc] = await cq.wait(1);
      expect(wc.status).toBe('SUCCESS');
      expect(host.read(dst.addr, 8)).toEqual(Uint8Array.of(1, 2, 3, 4, 5, 6, 7, 8));
      expect(tb.hca(0).icm.xltBytesInUse).toBeGreaterThanOrEqual(8 * 2 ** 20);
      await mr.dereg();
    });
  }, 60_000);

  it('a registration whose translation table host memory cannot back is VerbsError ENOMEM; freed memory makes it work', async () => {
    const tb = new Testbed({ config: { hostMemBytes: 64 * MiB } });
    await tb.run(async () => {
      const { pd } = await loopback(tb);
      const host = tb.host(0);
      const buf = host.alloc(40 * MiB);
      host.fill(buf.addr, 40 * MiB, 1); // every page backed: pinning needs no more frames
      const mem = tb.hca(0).mem;
      const hog = mem.allocFrames(mem.frameCount - 1 - mem.framesInUse - 4); // 4 frames left; the table needs 20
      // the firmware's ICM, or before it the driver's mailboxes for the command's 10,240 MTTs
      // (host memory either way, as mlx5's command messages beyond its cache)
      expect(await outcome(pd.regMr(buf.addr, 40 * MiB, Access.LOCAL_WRITE))).toMatch(/^ENOMEM: (.*regMr: CREATE_MKEY.*NO_RESOURCES.*translation table|.*CREATE_MKEY: command mailbox)/);
      mem.freeFrames(hog);
      const mr: Mr = await pd.regMr(buf.addr, 40 * MiB, Access.LOCAL_WRITE);
      await mr.dereg();
    });
  });

  it('advertises as many MRs as the device holds: maxMr of them register, the next is ENOMEM', async () => {
    const dflt = new Testbed();
    await dflt.run(async () => expect((await dflt.openDevice(0)).deviceAttr.maxMr).toBe(2 ** 24 - 2));
    // an MR cache never filled (limit 0): each registration a miss, a cache mkey made for it
    const tb = new Testbed({ config: { icmMkeyEntries: 40, mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const max = ctx.deviceAttr.maxMr;
      expect(max).toBe(38);
      const size = 600 * 4096; // the 1,024-entry bucket: one CREATE_MKEY each (a miss)
      const buf = tb.host(0).alloc(size * (max + 1));
      const mrs: Mr[] = [];
      for (let i = 0; i < max; i++) mrs.push(await pd.regMr(buf.addr + i * size, size, Access.LOCAL_WRITE));
      expect(await outcome(pd.regMr(buf.addr + max * size, size, Access.LOCAL_WRITE))).toMatch(/^ENOMEM: .*NO_RESOURCES/);
      await mrs[7].dereg();
      mrs[7] = await pd.regMr(buf.addr + max * size, size, Access.LOCAL_WRITE);
    });
  });

  it('a wait nothing in flight can end stalls at once, naming what it waits for and what is pending', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } }); // no MR cache pre-fill in flight
    let idleAt = 0;
    const err = await tb
      .run(async () => {
        const { pd, qp, cq } = await loopback(tb);
        const buf = tb.host(0).alloc(8192);
        const mr = await pd.regMr(buf.addr, 8192, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
        qp.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: buf.addr, length: 64, lkey: mr.lkey }], remoteAddr: buf.addr + 4096, rkey: mr.rkey, signaled: true });
        await cq.wait(1); // its ACK timer stays armed, ~67 ms out
        await tb.quiesce();
        idleAt = tb.now;
        await cq.wait(1); // nothing will ever complete
      })
      .then(() => null, (e: unknown) => e as Error);
    expect(err?.message).toMatch(/^simulation stalled at \d+ ps: the main process waits \(cq\.wait: 1 completion\(s\) on CQ 0x1 of adapter 0, 0 polled so far\), but nothing is in flight/);
    expect(err?.message).toMatch(/only timers of idle modules are pending \(tb\.hca0\.requester at \d+ ps/);
    expect(tb.now - idleAt).toBeLessThan(1e6); // within a microsecond, not after the 67 ms ACK timer
  });
});
