/**
 * The destroy verbs: qp.destroy (ibv_destroy_qp, DESTROY_QP), cq.destroy (ibv_destroy_cq,
 * DESTROY_CQ), pd.dealloc (ibv_dealloc_pd, DEALLOC_PD). Their EBUSY rules (the kernel's usecnt),
 * EINVAL for any call on a destroyed object (spec/semantics.md), what the hardware does with a
 * destroyed QP, and the firmware's view afterwards.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, VerbsError, incRkey, type Errno } from '../../src/index.ts';
import { readMkey } from '../../src/rtl/firmware/icm_writer.ts';
import { rcPair } from '../support/rc_pair.ts';

const PAGE = 4096;

/** Expects `f` to throw (or reject with) a VerbsError of `errno` whose message matches `msg`. */
async function expectErr(f: () => unknown, errno: Errno, msg: RegExp): Promise<void> {
  let e: unknown = null;
  try {
    await f();
  } catch (x) {
    e = x;
  }
  expect(e).toBeInstanceOf(VerbsError);
  expect((e as VerbsError).errno).toBe(errno);
  expect((e as VerbsError).message).toMatch(msg);
}

async function setup(tb: Testbed) {
  const [ctx0, ctx1] = [await tb.openDevice(0), await tb.openDevice(1)];
  const [pd0, pd1] = [await ctx0.allocPd(), await ctx1.allocPd()];
  const [cq0, cq1] = [await ctx0.createCq(64), await ctx1.createCq(64)];
  const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
  const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
  await qp0.connect(qp1);
  const a = tb.host(0).alloc(PAGE, { align: PAGE });
  const b = tb.host(1).alloc(PAGE, { align: PAGE });
  const mr0 = await pd0.regMr(a.addr, PAGE, Access.LOCAL_WRITE | Access.MW_BIND);
  const mr1 = await pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  return { ctx0, ctx1, pd0, pd1, cq0, cq1, qp0, qp1, a, b, mr0, mr1 };
}

describe('qp.destroy (ibv_destroy_qp)', () => {
  it('the firmware forgets the QP; every later call on it is EINVAL', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      const qpn = s.qp0.qpNum;
      expect(s.ctx0.hca.cmdif.getQp(qpn)).toBeDefined();
      await s.qp0.destroy();
      expect(s.ctx0.hca.cmdif.getQp(qpn)).toBeUndefined();
      expect(tb.stats()['tb.hca0.cmdif'].cmd_DESTROY_QP).toBe(1);
      const mw = await s.pd0.allocMw(1);
      const sge = [{ addr: s.a.addr, length: 8, lkey: s.mr0.lkey }];
      await expectErr(() => s.qp0.postSend({ wrId: 1, opcode: 'SEND', sgList: sge }), 'EINVAL', /postSend: the QP was destroyed/);
      await expectErr(() => s.qp0.postRecv({ wrId: 1, sgList: sge }), 'EINVAL', /postRecv: the QP was destroyed/);
      await expectErr(() => s.qp0.bindMw(mw, { mr: s.mr0, addr: s.a.addr, length: 8, access: 0 }), 'EINVAL', /bindMw: the QP was destroyed/);
      await expectErr(() => s.qp0.connect(s.qp1), 'EINVAL', /connect: the QP was destroyed/);
      await expectErr(() => s.qp1.connect(s.qp0), 'EINVAL', /connect \(peer\): the QP was destroyed/);
      await expectErr(() => s.qp0.destroy(), 'EINVAL', /destroy: the QP was destroyed/);
      // a doorbell for the number is ignored by the send queue engine
      const wqes = tb.stats()['tb.hca0.sq'].wqes;
      s.ctx0.hca.pcie.ringDoorbell(s.ctx0.hca.sq.doorbell, { qpn, pi: 1 });
      await tb.quiesce(); // the doorbell has arrived and been dropped
      expect(tb.stats()['tb.hca0.sq'].wqes).toBe(wqes);
      expect(s.ctx0.hca.sq.completedWqes(qpn)).toBe(0);
    });
  });

  it("messages to a destroyed QP are dropped: the peer's send times out (RETRY_EXC_ERR), and its posted receives never complete", async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      s.qp0.postRecv({ wrId: 50, sgList: [{ addr: s.a.addr, length: 64, lkey: s.mr0.lkey }] });
      await s.qp0.destroy();
      const drops = tb.stats()['tb.hca0.responder'].drops as number;
      s.qp1.postSend({ wrId: 7, opcode: 'SEND', sgList: [{ addr: s.b.addr, length: 16, lkey: s.mr1.lkey }], signaled: true });
      const [wc] = await s.cq1.wait(1);
      expect(wc).toMatchObject({ wrId: 7, status: 'RETRY_EXC_ERR', opcode: 'SEND' });
      expect((await s.qp1.query()).state).toBe('ERR');
      const st = tb.stats();
      // every try (the first and retry_cnt retries) was dropped by the responder
      expect(st['tb.hca0.responder'].drops).toBe(drops + 1 + s.ctx1.hca.cfg.retryCount);
      expect(s.cq0.poll()).toEqual([]);
    });
  });

  it('outstanding work of a destroyed QP does not complete; the CQ and the peer stay usable', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      // work in flight when the destroy executes: a SEND the peer answers with RNR NAKs (no
      // receive posted; rnr_retry 7 retries forever), and writes queued behind it
      s.qp1.postSend({ wrId: 9, opcode: 'SEND', sgList: [{ addr: s.b.addr, length: 16, lkey: s.mr1.lkey }], signaled: true });
      for (let i = 0; i < 3; i++) {
        s.qp1.postSend({ wrId: 10 + i, opcode: 'RDMA_WRITE', sgList: [{ addr: s.b.addr, length: 256, lkey: s.mr1.lkey }], remoteAddr: s.a.addr, rkey: 0xdead00, signaled: true });
      }
      await tb.delay(20e6);
      expect(tb.stats()['tb.hca0.responder'].rnr_naks).toBeGreaterThan(0);
      const sent = tb.stats()['tb.hca1.requester'].messages;
      await s.qp1.destroy();
      await tb.delay(5e9); // long past any retry
      expect(s.cq1.poll()).toEqual([]);
      expect(s.ctx1.hca.sq.completedWqes(s.qp1.qpNum)).toBe(0); // the engine forgot the QP
      expect(tb.stats()['tb.hca1.requester'].messages).toBe(sent); // nothing more is sent for it
      // the CQ serves a new QP (which may get the same number) normally
      const qp2 = await s.pd1.createQp({ sendCq: s.cq1, recvCq: s.cq1 });
      const qp3 = await s.pd0.createQp({ sendCq: s.cq0, recvCq: s.cq0 });
      await qp2.connect(qp3);
      const mr = await s.pd0.regMr(s.a.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      qp2.postSend({ wrId: 99, opcode: 'RDMA_WRITE', sgList: [{ addr: s.b.addr, length: 64, lkey: s.mr1.lkey }], remoteAddr: s.a.addr, rkey: mr.rkey, signaled: true });
      expect(await s.cq1.wait(1)).toMatchObject([{ wrId: 99, status: 'SUCCESS', qpNum: qp2.qpNum }]);
    });
  });

  it('a type-2 window bound to the QP stays bound after destroy (IBTA leaves it): its MR cannot be deregistered', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const s = await setup(tb);
      const mw = await s.pd0.allocMw(2);
      const rkey = incRkey(mw.rkey);
      s.qp0.postSend({ wrId: 1, opcode: 'BIND_MW', mw, rkey, bindInfo: { mr: s.mr0, addr: s.a.addr, length: 64, access: 0 }, signaled: true });
      expect((await s.cq0.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'BIND_MW' });
      const qpn = s.qp0.qpNum;
      await s.qp0.destroy();
      const m = readMkey(s.ctx0.hca, mw.index);
      expect(m).toMatchObject({ free: false, qpn });
      await expectErr(() => s.mr0.dereg(), 'EBUSY', /windows are still bound/);
    });
  });
});

describe('cq.destroy (ibv_destroy_cq)', () => {
  it('EBUSY while a live QP uses it as send or receive CQ; then DESTROY_CQ, and every later call is EINVAL', async () => {
    const tb = new Testbed();
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const [scq, rcq] = [await ctx.createCq(16), await ctx.createCq(16)];
      const qp = await pd.createQp({ sendCq: scq, recvCq: rcq });
      await expectErr(() => scq.destroy(), 'EBUSY', /send or receive CQ of 1 QP/);
      await expectErr(() => rcq.destroy(), 'EBUSY', /send or receive CQ of 1 QP/);
      await qp.destroy();
      await scq.destroy();
      await rcq.destroy();
      expect(ctx.hca.cmdif.getCq(scq.cqn)).toBeUndefined();
      expect(ctx.hca.cmdif.getCq(rcq.cqn)).toBeUndefined();
      await expectErr(() => scq.poll(), 'EINVAL', /poll: the CQ was destroyed/);
      await expectErr(() => scq.wait(1), 'EINVAL', /wait: the CQ was destroyed/);
      await expectErr(() => scq.destroy(), 'EINVAL', /destroy: the CQ was destroyed/);
      await expectErr(() => pd.createQp({ sendCq: scq, recvCq: scq }), 'EINVAL', /createQp \(sendCq\): the CQ was destroyed/);
      // a new CQ (the same number again) starts at its first CQE
      const cq = await ctx.createCq(16);
      expect(cq.cqn).toBe(scq.cqn);
      const mr = await pd.allocMr('MEM_REG', 1);
      const qp2 = await pd.createQp({ sendCq: cq, recvCq: cq });
      const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
      await qp2.connect(peer);
      qp2.postSend({ wrId: 3, opcode: 'LOCAL_INV', invalidateRkey: mr.rkey, signaled: true });
      expect(await cq.wait(1)).toMatchObject([{ wrId: 3, status: 'SUCCESS', opcode: 'LOCAL_INV' }]);
    });
  });
});

describe('pd.dealloc (ibv_dealloc_pd)', () => {
  it('EBUSY while a live MR, memory window or QP belongs to it; then DEALLOC_PD, and every later call is EINVAL', async () => {
    // no MR cache pre-fill: a fill would take the freed index the test looks at
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const cq = await ctx.createCq(16);
      const buf = tb.host(0).alloc(PAGE, { align: PAGE });
      const pd = await ctx.allocPd();
      const mr = await pd.regMr(buf.addr, PAGE, Access.LOCAL_WRITE);
      await expectErr(() => pd.dealloc(), 'EBUSY', /1 MR\(s\), 0 memory window\(s\) and 0 QP\(s\)/);
      await mr.dereg();
      const mw = await pd.allocMw(1);
      await expectErr(() => pd.dealloc(), 'EBUSY', /0 MR\(s\), 1 memory window\(s\) and 0 QP\(s\)/);
      await mw.dealloc();
      const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
      await expectErr(() => pd.dealloc(), 'EBUSY', /0 MR\(s\), 0 memory window\(s\) and 1 QP\(s\)/);
      await qp.destroy();
      // an SG_GAPS MR makes the PD's local DMA lkey, which dealloc destroys with the PD
      const fmr = await pd.allocMr('SG_GAPS', 2);
      const dma = pd.dmaLkeyNow;
      expect(readMkey(ctx.hca, dma >>> 8).allocated).toBe(true);
      await fmr.dereg();
      await pd.dealloc();
      expect(ctx.hca.cmdif.hasPd(pd.pdn)).toBe(false);
      expect(readMkey(ctx.hca, dma >>> 8).allocated).toBe(false);
      expect((await ctx.hca.cmdif.exec({ op: 'QUERY_MKEY', index: dma >>> 8 })).allocated).toBe(false);
      await expectErr(() => pd.regMr(buf.addr, PAGE, 0), 'EINVAL', /regMr: the PD was deallocated/);
      await expectErr(() => pd.allocMr('MEM_REG', 1), 'EINVAL', /allocMr: the PD was deallocated/);
      await expectErr(() => pd.allocMw(2), 'EINVAL', /allocMw: the PD was deallocated/);
      await expectErr(() => pd.createQp({ sendCq: cq, recvCq: cq }), 'EINVAL', /createQp: the PD was deallocated/);
      await expectErr(() => pd.dealloc(), 'EINVAL', /dealloc: the PD was deallocated/);
      // the CQ is free again too
      await cq.destroy();
    });
  });

  it('a QP destroyed between the send queue engine handing over a WQE and the requester taking it: no crash, nothing sent', async () => {
    // Two runs of the same deterministic setup: the first measures when the requester gets the
    // job after the post and when DESTROY_QP takes effect after it is issued; the second lines
    // the two up on the same edge (the window is one cycle wide).
    const run = async (destroyAt: number | null): Promise<{ post2push: number; exec2effect: number; sent: number }> => {
      const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
      let post2push = -1;
      let exec2effect = -1;
      let sent = 0;
      await tb.run(async () => {
        const { c1, pd0, pd1, cq1, qp0, qp1 } = await rcPair(tb);
        const a = tb.host(0).alloc(PAGE, { align: PAGE });
        const b = tb.host(1).alloc(PAGE, { align: PAGE });
        const mr0 = await pd0.regMr(a.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
        const mr1 = await pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE);
        await tb.quiesce(); // the driver's background mkey pool refills are done: firmware idle
        const req = c1.hca.requester.req;
        const push = req.push.bind(req);
        let pushedAt = -1;
        req.push = (job) => {
          if (pushedAt < 0) pushedAt = tb.now;
          push(job);
        };
        let effectAt = -1;
        c1.hca.cmdif.destroyListeners.push(() => { effectAt = tb.now; });
        const write = (): void => qp1.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: b.addr, length: 256, lkey: mr1.lkey }], remoteAddr: a.addr, rkey: mr0.rkey, signaled: true });
        if (destroyAt === null) {
          const t0 = tb.now;
          write();
          await cq1.wait(1);
          post2push = pushedAt - t0;
          const t1 = tb.now;
          await c1.hca.cmdif.exec({ op: 'DESTROY_QP', qpn: qp1.qpNum });
          exec2effect = effectAt - t1;
        } else {
          const destroyed = c1.hca.cmdif.exec({ op: 'DESTROY_QP', qpn: qp1.qpNum });
          await tb.delay(destroyAt);
          write();
          await destroyed;
          await tb.delay(10_000_000);
          expect(pushedAt).toBe(effectAt); // the job was handed over on the destroy's edge
        }
        sent = tb.stats()['tb.hca1.requester'].messages as number;
        expect((await qp0.query()).state).toBe('RTS');
      });
      return { post2push, exec2effect, sent };
    };
    const m = await run(null);
    expect(m.sent).toBe(1);
    const r = await run(m.exec2effect - m.post2push);
    expect(r.sent).toBe(0); // the requester dropped the job of the destroyed QP
  });
});
