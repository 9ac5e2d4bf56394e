/**
 * The control segment's fence modes (fm_ce_se bits 7:5; include/linux/mlx5/qp.h
 * MLX5_FENCE_MODE_*) in the send queue engine, and the modes the driver writes (mlx5 wr.c,
 * libmlx5 qp.c): what each waits for and what it does not, the bytes per opcode, and a
 * REG_MR + READ pipeline on one QP that overlaps where the modes allow it.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed, type Qp } from '../../../src/index.ts';
import type { HcaConfig } from '../../../src/rtl/config.ts';
import { buildRdmaWqe } from '../../../src/driver/wqe_builder.ts';
import { FenceMode, WqeOpcode } from '../../../src/rtl/formats/constants.ts';
import { rcPair } from '../../support/rc_pair.ts';

const PAGE = 4096;
const BIG = 16 * PAGE;

/** The engine's start and completion time of each WQE of one QP, in the order they started. */
function watch(tb: Testbed, qp: Qp): { starts: { idx: number; t: number }[]; done: Map<number, number> } {
  const w = { starts: [] as { idx: number; t: number }[], done: new Map<number, number>() };
  tb.hca(0).sq.tap = {
    doorbell: () => undefined,
    fetched: () => undefined,
    started: (qpn, idx) => {
      if (qpn === qp.qpNum) w.starts.push({ idx, t: tb.now });
    },
    completed: (qpn, idx) => {
      if (qpn === qp.qpNum) w.done.set(idx, tb.now);
    },
  };
  return w;
}

type Earlier = 'read' | 'write' | 'umr';
const MODES: [string, number][] = [
  ['NONE', FenceMode.NONE],
  ['INITIATOR_SMALL', FenceMode.INITIATOR_SMALL],
  ['FENCE', FenceMode.FENCE],
  ['SMALL_AND_FENCE', FenceMode.SMALL_AND_FENCE],
  ['STRONG_ORDERING', FenceMode.STRONG_ORDERING],
  ['reserved 5', 5],
];
/** Whether a WQE with mode m waits for an earlier WQE of this kind (PRM semantics as README "fence modes"). */
const WAITS: Record<Earlier, Record<string, boolean>> = {
  read: { NONE: false, INITIATOR_SMALL: false, FENCE: true, SMALL_AND_FENCE: true, STRONG_ORDERING: true, 'reserved 5': true },
  write: { NONE: false, INITIATOR_SMALL: false, FENCE: false, SMALL_AND_FENCE: false, STRONG_ORDERING: true, 'reserved 5': true },
  umr: { NONE: false, INITIATOR_SMALL: true, FENCE: false, SMALL_AND_FENCE: true, STRONG_ORDERING: true, 'reserved 5': true },
};

/** Posts a slow WQE of kind `earlier`, then a 64 B WRITE with fence `mode`; returns whether the WRITE started after the first one completed. */
async function waitsFor(earlier: Earlier, mode: number): Promise<boolean> {
  const tb = new Testbed({ hcas: 2 });
  let waited = false;
  await tb.run(async () => {
    const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
    const src = tb.host(0).alloc(BIG, { align: PAGE });
    const dst = tb.host(1).alloc(BIG, { align: PAGE });
    const mr0 = await pd0.regMr(src.addr, BIG, Access.LOCAL_WRITE);
    const mr1 = await pd1.regMr(dst.addr, BIG, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
    const w = watch(tb, qp0);
    if (earlier === 'umr') {
      // a 16-page MTT list by pointer: the UMR engine reads it from host memory
      const fmr = await pd0.allocMr('MEM_REG', 16);
      fmr.mapSg([{ addr: src.addr, length: BIG }]);
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: Access.LOCAL_WRITE, signaled: true });
    } else {
      qp0.postSend({ wrId: 1, opcode: earlier === 'read' ? 'RDMA_READ' : 'RDMA_WRITE', sgList: [{ addr: src.addr, length: BIG, lkey: mr0.lkey }], remoteAddr: dst.addr, rkey: mr1.rkey, signaled: true });
    }
    qp0.postBuilt(2, 'RDMA_WRITE', (view, common) =>
      buildRdmaWqe(view, 0, { ...common, fence: mode, opcode: WqeOpcode.RDMA_WRITE, sgList: [{ addr: src.addr, length: 64, lkey: mr0.lkey }], remoteAddr: dst.addr + BIG - 64, rkey: mr1.rkey }),
    );
    const wcs = await cq0.wait(2);
    expect(wcs.map((c) => c.status)).toEqual(['SUCCESS', 'SUCCESS']);
    expect(w.starts.length).toBe(2);
    const first = w.done.get(w.starts[0].idx)!;
    // the earlier WQE really is slow: the WRITE, had it not waited, started well before its end
    expect(first - w.starts[0].t).toBeGreaterThan(500_000);
    waited = w.starts[1].t >= first;
  });
  await tb.close();
  return waited;
}

describe('fence modes in the send queue engine', () => {
  for (const earlier of ['read', 'write', 'umr'] as const) {
    it(`after a slow ${earlier === 'umr' ? 'UMR (REG_MR)' : earlier.toUpperCase()}: each mode waits for it or not`, async () => {
      const got: Record<string, boolean> = {};
      for (const [name, mode] of MODES) got[name] = await waitsFor(earlier, mode);
      expect(got).toEqual(WAITS[earlier]);
    });
  }
});

/** Walks the send ring from WQE 0: the fence mode (fm_ce_se bits 7:5) of each of the first n WQEs. */
function fences(tb: Testbed, qp: Qp, n: number): number[] {
  const out: number[] = [];
  let idx = 0;
  for (let k = 0; k < n; k++) {
    const ctrl = tb.host(0).read(qp.sq.addr + (idx % qp.sq.wqeCnt) * 64, 16);
    out.push(ctrl[11] >>> 5);
    idx += Math.ceil(((ctrl[7] & 0x3f) * 16) / 64);
  }
  return out;
}

describe('the fence the driver writes per opcode (ctrl segment byte 11)', () => {
  for (const [umrFence, mode] of [['STRONG', FenceMode.STRONG_ORDERING], ['SMALL', FenceMode.INITIATOR_SMALL], ['NONE', FenceMode.NONE]] as const) {
    it(`kernel QP, umr_fence ${umrFence}: REG_MR carries it, only the next WQE the small fence; IB_SEND_FENCE FENCE or SMALL_AND_FENCE; LOCAL_INV none`, async () => {
      const tb = new Testbed({ hcas: 2, config: { umrFence } satisfies Partial<HcaConfig> });
      await tb.run(async () => {
        const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
        const src = tb.host(0).alloc(PAGE, { align: PAGE });
        const dst = tb.host(1).alloc(PAGE, { align: PAGE });
        const mr0 = await pd0.regMr(src.addr, PAGE, Access.LOCAL_WRITE);
        const mr1 = await pd1.regMr(dst.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
        const fmr = await pd0.allocMr('MEM_REG', 1);
        fmr.mapSg([{ addr: src.addr, length: PAGE }]);
        const write = (fence = false) => ({ wrId: 0, opcode: 'RDMA_WRITE' as const, sgList: [{ addr: src.addr, length: 8, lkey: mr0.lkey }], remoteAddr: dst.addr, rkey: mr1.rkey, fence, signaled: true });
        qp0.postSend([
          write(),
          { wrId: 0, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: Access.LOCAL_WRITE, signaled: true },
          write(),
          write(),
          write(true),
          { wrId: 0, opcode: 'LOCAL_INV', invalidateRkey: fmr.lkey, signaled: true },
          write(),
          { wrId: 0, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: Access.LOCAL_WRITE, signaled: true },
          write(true),
        ]);
        expect((await cq0.wait(9)).every((c) => c.status === 'SUCCESS')).toBe(true);
        const F = FenceMode;
        expect(fences(tb, qp0, 9)).toEqual([F.NONE, mode, F.INITIATOR_SMALL, F.NONE, F.FENCE, F.NONE, F.NONE, mode, F.SMALL_AND_FENCE]);
      });
      await tb.close();
    });
  }

  it('user-space QP (libmlx5): IBV_SEND_FENCE is 4 << 5 (SMALL_AND_FENCE); the WQE after a LOCAL_INV or BIND_MW gets the small fence', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1 } = await rcPair(tb);
      const qp = await pd0.createQp({ sendCq: cq0, recvCq: cq0, userSpace: true });
      const peer = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await qp.connect(peer);
      const src = tb.host(0).alloc(PAGE, { align: PAGE });
      const dst = tb.host(1).alloc(PAGE, { align: PAGE });
      const mr0 = await pd0.regMr(src.addr, PAGE, Access.LOCAL_WRITE | Access.MW_BIND);
      const mr1 = await pd1.regMr(dst.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const mw = await pd0.allocMw(2);
      const write = (fence = false) => ({ wrId: 0, opcode: 'RDMA_WRITE' as const, sgList: [{ addr: src.addr, length: 8, lkey: mr0.lkey }], remoteAddr: dst.addr, rkey: mr1.rkey, fence, signaled: true });
      const newKey = ((mw.rkey & ~0xff) | ((mw.rkey + 1) & 0xff)) >>> 0;
      qp.postSend([
        write(true),
        { wrId: 0, opcode: 'BIND_MW', mw, rkey: newKey, bindInfo: { mr: mr0, addr: src.addr, length: 64, access: Access.REMOTE_WRITE }, signaled: true },
        write(),
        { wrId: 0, opcode: 'LOCAL_INV', invalidateRkey: newKey, signaled: true },
        write(),
        write(),
      ]);
      expect((await cq0.wait(6)).map((c) => c.status)).toEqual(Array(6).fill('SUCCESS'));
      const F = FenceMode;
      expect(fences(tb, qp, 6)).toEqual([F.SMALL_AND_FENCE, F.NONE, F.INITIATOR_SMALL, F.NONE, F.INITIATOR_SMALL, F.NONE]);
    });
    await tb.close();
  });
});

describe('a REG_MR + READ pipeline on one QP (rdma_rw: LOCAL_INV unsignaled, REG_MR, READ)', () => {
  /** Two I/Os posted at once, each through its own MR; returns whether the second REG_MR started before the first READ was done, and the span. */
  async function pipeline(umrFence: 'STRONG' | 'SMALL' | 'NONE'): Promise<{ overlapped: boolean; ps: number }> {
    const tb = new Testbed({ hcas: 2, config: { umrFence } });
    const out = { overlapped: false, ps: 0 };
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const local = tb.host(0).alloc(2 * BIG, { align: PAGE });
      const remote = tb.host(1).alloc(BIG, { align: PAGE });
      const rmr = await pd1.regMr(remote.addr, BIG, Access.LOCAL_WRITE | Access.REMOTE_READ);
      tb.host(1).fill(remote.addr, BIG, 0x3c);
      const mrs = [await pd0.allocMr('MEM_REG', 16), await pd0.allocMr('MEM_REG', 16)];
      const w = watch(tb, qp0);
      const t0 = tb.now;
      const wrs = mrs.flatMap((m, k) => {
        m.mapSg([{ addr: local.addr + k * BIG, length: BIG }]);
        return [
          { wrId: 10 + k, opcode: 'LOCAL_INV' as const, invalidateRkey: m.lkey, signaled: false },
          { wrId: 20 + k, opcode: 'REG_MR' as const, mr: m, key: m.lkey, access: Access.LOCAL_WRITE, signaled: false },
          { wrId: 30 + k, opcode: 'RDMA_READ' as const, sgList: [{ addr: m.iova, length: BIG, lkey: m.lkey }], remoteAddr: remote.addr, rkey: rmr.rkey, signaled: true },
        ];
      });
      qp0.postSend(wrs);
      const wcs = await cq0.wait(2);
      expect(wcs.map((c) => [c.wrId, c.status])).toEqual([[30, 'SUCCESS'], [31, 'SUCCESS']]);
      expect(tb.host(0).read(local.addr, 2 * BIG).every((b) => b === 0x3c)).toBe(true);
      out.ps = tb.now - t0;
      // WQEs 0..5 started in order: LOCAL_INV, REG_MR, READ, LOCAL_INV, REG_MR, READ
      expect(w.starts.length).toBe(6);
      const firstRead = w.done.get(w.starts[2].idx)!;
      out.overlapped = w.starts[4].t < firstRead;
    });
    await tb.close();
    return out;
  }

  it('overlaps the second registration with the first READ under umr_fence SMALL and NONE, not under STRONG', async () => {
    const strong = await pipeline('STRONG');
    const small = await pipeline('SMALL');
    const none = await pipeline('NONE');
    expect([strong.overlapped, small.overlapped, none.overlapped]).toEqual([false, true, true]);
    expect(small.ps).toBeLessThan(strong.ps);
  });
});
