import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { NS, Sim, Tracer } from '../../../src/sim/index.ts';
import { readVcdFile } from '../../support/vcd_read.ts';
import { Hca } from '../../../src/rtl/hca.ts';
import { resolveConfig } from '../../../src/rtl/config.ts';
import { UmrKind, UmrState, type UmrEngineOptions } from '../../../src/rtl/umr/umr_engine.ts';
import { readMkey, writeMkey, type MkeyDesc } from '../../../src/rtl/firmware/icm_writer.ts';
import type { MkeyEntry } from '../../../src/rtl/memory/icm_mkey.ts';
import { MKEY_KIND_MR, MKEY_KIND_MW1, MKEY_KIND_MW2 } from '../../../src/rtl/memory/icm_mkey.ts';
import type { AtuResult } from '../../../src/rtl/translation/atu_types.ts';
import {
  CqeSyndrome,
  MKEY_QPN_NONE,
  MkcAccessMode,
  UmrCtrlFlag,
  WqeOpcode,
  encodeCtrlSeg,
  encodeMkeyContext,
  encodeMtt,
  encodeUmrCtrlSeg,
  makeKey,
  zeroMkeyContext,
  type Klm,
} from '../../../src/rtl/formats/index.ts';
import {
  buildBindMwWqe,
  buildLocalInvWqe,
  buildRegMrWqe,
  encodeXltList,
  type BindMwWqeParams,
  type MrAccess,
  type XltList,
} from '../../../src/driver/wqe_builder.ts';
import { tempDir } from '../../support/tmp.ts';

const QPN = 0x123;
const PD = 3;
const OTHER_PD = 4;
const OK = 0;
const QP_OP = CqeSyndrome.LOCAL_QP_OP_ERR;
const BIND_ERR = CqeSyndrome.MW_BIND_ERR;
/** ib_access bits (icm_mkey.ts): LOCAL_WRITE 1, REMOTE_WRITE 2, REMOTE_READ 4, REMOTE_ATOMIC 8. */
const LW = 1;
const RW = 2;
const RR = 4;
/** A 64-byte DMA read from ICM with the defaults: 520 ns + 64 B / 12 GB/s. */
const CTX_READ_PS = 525 * NS;
/** Fake page addresses (4 KiB aligned): translated, never touched. */
const page = (i: number): number => 0x10_0000_0000 + i * 0x1000;
/** Page `i` of the user MR of index `index` (not contiguous, so segments do not merge). */
const mrPage = (index: number, i: number): number => page(index * 16 + 2 * i);

/** Offset of the mkey segment's reserved byte 3 in a UMR WQE (ctrl 16 + UMR ctrl 48 + 3). */
/** The UMR mkey segment's offset in the WQE, and its byte 3 (mlx5_mkey_seg.version, reserved). */
const SEG = 16 + 48;
const SEG_BYTE3 = SEG + 3;

function bench(opts: UmrEngineOptions = {}) {
  const sim = new Sim({ seed: 7 });
  // the engine's own defaults (PD check on), unless the test says otherwise
  const hca = new Hca(sim, sim.top, 'hca0', resolveConfig({}), { umr: { regMrPdCheck: true, ...opts } });
  const umr = hca.umrEngine;
  const atu = hca.atu.port('t');
  let tag = 0;
  return {
    sim,
    hca,
    umr,
    /** Posts one UMR WQE from the QP (qpn, pd) and waits for its completion. */
    async post(wqe: Uint8Array, q: { qpn?: number; pd?: number; fre?: boolean } = {}): Promise<{ syndrome: number; ps: number }> {
      const t0 = sim.now;
      const me = ++tag;
      await umr.req.pushWait({ tag: me, qpn: q.qpn ?? QPN, pd: q.pd ?? PD, fre: q.fre ?? true, wqe });
      const d = await umr.resp.popWait();
      expect(d.tag).toBe(me);
      return { syndrome: d.syndrome, ps: sim.now - t0 };
    },
    /** One ATU translation from the QP (qpn, pd). */
    async xlate(key: number, va: number, length: number, access = 0, q: { qpn?: number; pd?: number } = {}): Promise<AtuResult> {
      await atu.req.pushWait({ key, va, length, access, pd: q.pd ?? PD, qpn: q.qpn ?? QPN, tag: 0 });
      return (await atu.resp.popWait()).result;
    },
  };
}
type Bench = ReturnType<typeof bench>;

/** The bytes of one WQE written by a builder. */
function wqe(build: (v: DataView) => number): Uint8Array {
  const buf = new Uint8Array(1024);
  const ds = build(new DataView(buf.buffer));
  return buf.slice(0, ds * 16);
}

function desc(d: Partial<MkeyDesc> & { index: number }): MkeyDesc {
  return {
    tag: 0, free: true, accessMode: MkcAccessMode.MTT, access: 0, umrEn: true, remoteInval: true, pd: PD, qpn: MKEY_QPN_NONE,
    start: 0, length: 0, len64: false, logPageSize: 12, pgAccess: false, kind: MKEY_KIND_MR, ...d,
  };
}

/** A fast-registration MR (allocMr MEM_REG): FREE, room for `cap` MTTs. */
function frmr(b: Bench, index: number, cap = 4, d: Partial<MkeyDesc> = {}): MkeyEntry {
  return writeMkey(b.hca, desc({ index, xltCapacity: cap, ...d }));
}

/** A registered user MR (VALID, MTT) over `pages` pages from `start`. */
function userMr(b: Bench, index: number, tag: number, start: number, pages: number, d: Partial<MkeyDesc> = {}): MkeyEntry {
  return writeMkey(b.hca, desc({
    index, tag, free: false, access: LW | RW | RR, remoteInval: false, start, length: pages * 4096,
    mtt: Array.from({ length: pages }, (_, i) => mrPage(index, i) + 3), ...d,
  }));
}

/** A memory window as the driver creates it: FREE, UMR-enabled, KLMS, one KLM of room. */
function window(b: Bench, index: number, type: 1 | 2, d: Partial<MkeyDesc> = {}): MkeyEntry {
  return writeMkey(b.hca, desc({
    index, tag: 1, kind: type === 1 ? MKEY_KIND_MW1 : MKEY_KIND_MW2, accessMode: MkcAccessMode.KLMS, remoteInval: type === 2, xltCapacity: 1, ...d,
  }));
}

/** A REG_MR WQE, every byte mlx5's (nothing travels beside it). */
function regMr(
  key: number, iova: number, length: number, translations: XltList,
  o: { access?: MrAccess; listAddr?: number } = {},
): Uint8Array {
  return wqe((v) => buildRegMrWqe(v, 0, {
    wqeIndex: 0, qpn: QPN, key, access: o.access ?? { localWrite: true, remoteRead: true, remoteWrite: true }, iova, length, translations,
    listAddr: o.listAddr, listLkey: o.listAddr === undefined ? undefined : 0x200,
  }));
}

const mtts = (first: number, n: number): XltList => ({ mode: 'MTT', pages: Array.from({ length: n }, (_, i) => page(first + i)), logPageSize: 12 });
const localInv = (key: number): Uint8Array => wqe((v) => buildLocalInvWqe(v, 0, { wqeIndex: 1, qpn: QPN, key }));
function bind(p: Omit<BindMwWqeParams, 'wqeIndex' | 'qpn'> & { qpn?: number }): Uint8Array {
  return wqe((v) => buildBindMwWqe(v, 0, { wqeIndex: 2, ...p, qpn: p.qpn ?? QPN }));
}
const remote = { remoteRead: true, remoteWrite: true };

/** Posts `w`, expects `syndrome`, and (on error) that no ICM entry of `indices` changed. */
async function expectUmr(b: Bench, w: Uint8Array, syndrome: number, indices: number[], q: { qpn?: number; pd?: number } = {}): Promise<void> {
  const before = indices.map((i) => readMkey(b.hca, i));
  const r = await b.post(w, q);
  expect(r.syndrome).toBe(syndrome);
  if (syndrome !== OK) expect(indices.map((i) => readMkey(b.hca, i))).toEqual(before);
}

describe('UmrEngine: fast registration (REG_MR)', () => {
  it('registers an MTT list inline: ICM takes the masked fields, the ATU translates through it, one PCIe read at least', async () => {
    const b = bench();
    frmr(b, 5, 4);
    const key = makeKey(5, 0x21);
    await b.sim.run(async () => {
      // the FREE mkey is looked up (and cached) before the registration
      expect(await b.xlate(makeKey(5, 0), 0x7000_0000, 8)).toEqual({ kind: 'error', error: 'FREE', key: makeKey(5, 0) });
      const r = await b.post(regMr(key, 0x7000_0000, 3 * 4096, mtts(100, 3)));
      expect(r.syndrome).toBe(OK);
      expect(r.ps).toBeGreaterThanOrEqual(CTX_READ_PS);
      const e = readMkey(b.hca, 5);
      expect(e).toMatchObject({
        allocated: true, free: false, tag: 0x21, start: 0x7000_0000, len: 3 * 4096, logPageSize: 12, access: LW | RW | RR,
        remoteInval: true, umrEn: true, xltCount: 3, kind: MKEY_KIND_MR, pd: PD, accessMode: MkcAccessMode.MTT,
      });
      // the stale cached FREE context is never used again
      expect(await b.xlate(key, 0x7000_1800, 16, RW)).toEqual({ kind: 'ok', segments: [{ pa: page(101) + 0x800, length: 16 }] });
      expect(await b.xlate(key, 0x7000_2ff8, 16)).toEqual({ kind: 'error', error: 'BOUNDS', key });
      expect(await b.xlate(makeKey(5, 0), 0x7000_0000, 8)).toEqual({ kind: 'error', error: 'INVALID_KEY', key: makeKey(5, 0) });
    });
    const st = b.sim.stats()['tb.hca0.umr_engine'];
    expect(st.jobs_reg_mr).toBe(1);
    expect(st.ctx_reads).toBe(1);
    expect(st.posted_writes).toBe(2); // translations, then the context
  });

  it('reads a list given by pointer (over 64 bytes) by DMA: two dependent reads', async () => {
    const b = bench();
    frmr(b, 6, 16);
    const list = mtts(200, 12);
    const listAddr = b.hca.mem.allocFrames(1)[0];
    const buf = new Uint8Array(128);
    encodeXltList(new DataView(buf.buffer), 0, list);
    b.hca.mem.write(listAddr, buf);
    const key = makeKey(6, 9);
    await b.sim.run(async () => {
      const r = await b.post(regMr(key, 0x10_0000, 12 * 4096, list, { listAddr }));
      expect(r.syndrome).toBe(OK);
      expect(r.ps).toBeGreaterThanOrEqual(2 * CTX_READ_PS);
      expect(readMkey(b.hca, 6).xltCount).toBe(12);
      expect(await b.xlate(key, 0x10_0000 + 11 * 4096 + 4, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(211) + 4, length: 8 }] });
    });
    expect(b.sim.stats()['tb.hca0.umr_engine'].xlt_reads).toBe(1);
  });

  it('registers a KLM list (SG_GAPS) whose keys are the local DMA lkey', async () => {
    const b = bench();
    // the PD's local DMA lkey: a PA mkey over all of memory
    writeMkey(b.hca, desc({ index: 2, tag: 0, free: false, accessMode: MkcAccessMode.PA, access: 15, len64: true }));
    frmr(b, 7, 4, { accessMode: MkcAccessMode.KLMS });
    const dma = makeKey(2, 0);
    const klms: Klm[] = [{ bcount: 0x1000, key: dma, va: 0x4000_0000 }, { bcount: 0x800, key: dma, va: 0x5000_0000 }];
    const key = makeKey(7, 3);
    await b.sim.run(async () => {
      expect((await b.post(regMr(key, 0x9000, 0x1800, { mode: 'KLM', klms }))).syndrome).toBe(OK);
      expect(readMkey(b.hca, 7)).toMatchObject({ free: false, tag: 3, xltCount: 2, accessMode: MkcAccessMode.KLMS });
      expect(await b.xlate(key, 0x9ff0, 0x20)).toEqual({ kind: 'ok', segments: [{ pa: 0x4000_0ff0, length: 0x10 }, { pa: 0x5000_0000, length: 0x10 }] });
    });
  });

  it('fails with LOC_QP_OP_ERR, changing nothing: VALID MR, unknown index, beyond ICM, not UMR-enabled, other PD, list too long, a window, malformed', async () => {
    const b = bench();
    userMr(b, 3, 1, 0x1000, 2);
    frmr(b, 4, 4, { umrEn: false });
    frmr(b, 5, 4, { pd: OTHER_PD });
    frmr(b, 6, 4);
    window(b, 8, 2);
    await b.sim.run(async () => {
      await expectUmr(b, regMr(makeKey(3, 2), 0, 4096, mtts(0, 1)), QP_OP, [3]); // REG_MR on a VALID MR
      await expectUmr(b, regMr(makeKey(9, 2), 0, 4096, mtts(0, 1)), QP_OP, [9]); // never created
      await expectUmr(b, regMr(makeKey(0x20000, 2), 0, 4096, mtts(0, 1)), QP_OP, []); // beyond the ICM table
      await expectUmr(b, regMr(makeKey(4, 2), 0, 4096, mtts(0, 1)), QP_OP, [4]); // not UMR-enabled
      await expectUmr(b, regMr(makeKey(5, 2), 0, 4096, mtts(0, 1)), QP_OP, [5]); // MR in another PD than the QP
      await expectUmr(b, regMr(makeKey(6, 2), 0, 5 * 4096, mtts(0, 5)), QP_OP, [6]); // 5 MTTs > the 4 reserved
      await expectUmr(b, regMr(makeKey(8, 2), 0, 4096, mtts(0, 1)), QP_OP, [8]); // a window
      const bad = regMr(makeKey(6, 2), 0, 4096, mtts(0, 1));
      bad[3] = WqeOpcode.SEND; // not a UMR
      await expectUmr(b, bad, QP_OP, [6]);
      // the same MR takes exactly its capacity
      await expectUmr(b, regMr(makeKey(6, 2), 0, 4 * 4096, mtts(0, 4)), OK, [6]);
      expect(readMkey(b.hca, 6).xltCount).toBe(4);
    });
    const st = b.sim.stats()['tb.hca0.umr_engine'];
    expect(st.errors_loc_qp_op_err).toBe(8);
    expect(st.jobs_invalid).toBe(1);
    expect(st.latency_ps).toMatchObject({ count: 9 });
  });

  it('honours regMrPdCheck: false, and a list pointer outside host memory is LOC_PROT_ERR', async () => {
    const b = bench({ regMrPdCheck: false });
    frmr(b, 5, 16, { pd: OTHER_PD });
    await b.sim.run(async () => {
      await expectUmr(b, regMr(makeKey(5, 2), 0, 4096, mtts(0, 1)), OK, [5]);
      await expectUmr(b, localInv(makeKey(5, 2)), OK, [5]);
      const far = b.hca.mem.size - 64;
      await expectUmr(b, regMr(makeKey(5, 3), 0, 12 * 4096, mtts(0, 12), { listAddr: far }), CqeSyndrome.LOCAL_PROT_ERR, [5]);
    });
  });
});

describe('UmrEngine: local invalidate', () => {
  it('makes a VALID MR FREE; the cached context is not used afterwards; re-registration works with new pages', async () => {
    const b = bench();
    frmr(b, 5, 4);
    const k1 = makeKey(5, 1);
    const k2 = makeKey(5, 2);
    await b.sim.run(async () => {
      expect((await b.post(regMr(k1, 0x2000, 4096, mtts(10, 1)))).syndrome).toBe(OK);
      expect(await b.xlate(k1, 0x2010, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(10) + 0x10, length: 8 }] });
      expect(b.hca.mkeyCache.holds(5)).toBe(true);
      expect((await b.post(localInv(k1))).syndrome).toBe(OK);
      expect(readMkey(b.hca, 5)).toMatchObject({ free: true, tag: 1 });
      expect(await b.xlate(k1, 0x2010, 8)).toEqual({ kind: 'error', error: 'FREE', key: k1 });
      // again, over another page: the MTT line cached above is not used either
      expect((await b.post(regMr(k2, 0x2000, 4096, mtts(11, 1)))).syndrome).toBe(OK);
      expect(await b.xlate(k2, 0x2010, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(11) + 0x10, length: 8 }] });
      expect(await b.xlate(k1, 0x2010, 8)).toEqual({ kind: 'error', error: 'INVALID_KEY', key: k1 });
    });
    expect(b.sim.stats()['tb.hca0.umr_engine'].jobs_local_inv).toBe(1);
  });

  it('succeeds on a FREE target without writing; fails on a key mismatch, a type-1 window, an unknown or non-UMR mkey', async () => {
    const b = bench();
    frmr(b, 5, 4, { tag: 7 });
    window(b, 6, 1, { tag: 4 });
    frmr(b, 7, 4, { tag: 1, umrEn: false, free: false });
    await b.sim.run(async () => {
      const writes = (): number => b.sim.stats()['tb.hca0.umr_engine'].posted_writes as number;
      const w0 = writes();
      await expectUmr(b, localInv(makeKey(5, 7)), OK, [5]);
      expect(writes()).toBe(w0);
      await expectUmr(b, localInv(makeKey(5, 8)), QP_OP, [5]); // full 32-bit key match
      await expectUmr(b, localInv(makeKey(6, 4)), QP_OP, [6]); // o10-37.2.26
      await expectUmr(b, localInv(makeKey(9, 0)), QP_OP, [9]);
      await expectUmr(b, localInv(makeKey(7, 1)), QP_OP, [7]);
    });
  });
});

describe('UmrEngine: the mkey pool\'s retire and zero-based registrations (model-private fields)', () => {
  it('FREE | KEY on an MR (the pool revoking a user MR) frees it under the new tag, with LOCAL_INV\'s checks', async () => {
    const b = bench();
    userMr(b, 5, 0x21, 0x7000, 1);
    const retire = (key: number, newTag: number): Uint8Array => wqe((v) => buildLocalInvWqe(v, 0, { wqeIndex: 1, qpn: QPN, key, newTag }));
    await b.sim.run(async () => {
      await expectUmr(b, retire(makeKey(5, 0x20), 0x22), QP_OP, [5]); // full key match
      await expectUmr(b, retire(makeKey(5, 0x21), 0x22), OK, [5]);
      expect(readMkey(b.hca, 5)).toMatchObject({ free: true, tag: 0x22 });
      // the old key names nothing now: a LOCAL_INV of it fails; the new key's (FREE) succeeds
      await expectUmr(b, localInv(makeKey(5, 0x21)), QP_OP, [5]);
      await expectUmr(b, localInv(makeKey(5, 0x22)), OK, [5]);
      // an already FREE MR takes the new tag too
      await expectUmr(b, retire(makeKey(5, 0x22), 0x30), OK, [5]);
      expect(readMkey(b.hca, 5)).toMatchObject({ free: true, tag: 0x30 });
    });
  });

  // Changed with issue 18 item 7: the first byte offset that came beside the WQE (the removed
  // umr_sideband.ts) is gone. mlx5 has none: start_addr is both the iova and the first byte's page
  // offset (Linux 6.12 drivers/infiniband/hw/mlx5/mlx5_ib.h:1720-1723), so iova 0 is byte 0 of
  // the first MTT page.
  it('REG_MR: a start of 0 is zero-based, at byte 0 of its first page; it applies under START_ADDR; no window binds to such an MR', async () => {
    const b = bench();
    frmr(b, 5, 4);
    window(b, 8, 2);
    window(b, 9, 1);
    const key = makeKey(5, 3);
    await b.sim.run(async () => {
      const w = regMr(key, 0, 2 * 4096, mtts(100, 2), { access: { localWrite: true, remoteRead: true } });
      // the WQE is mlx5's: the mkey segment's reserved bytes (byte 3, 8..11) are zero, start_addr 0
      expect([w[SEG_BYTE3], ...w.subarray(SEG + 8, SEG + 12)]).toEqual([0, 0, 0, 0, 0]);
      expect(new DataView(w.buffer).getUint32(SEG + 16) + new DataView(w.buffer).getUint32(SEG + 20)).toBe(0);
      expect((await b.post(w)).syndrome).toBe(OK);
      expect(readMkey(b.hca, 5)).toMatchObject({ start: 0, zeroBased: true });
      // iova 0 is byte 0 of the first page
      expect(await b.xlate(key, 0x123, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(100) + 0x123, length: 8 }] });
      expect(await b.xlate(key, 0x1000, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(101), length: 8 }] });
      // a window of either type on it: MW_BIND_ERR (rxe's rule, as the reference model)
      const klm = { mrLkey: key, addr: 0, length: 16, access: remote };
      await expectUmr(b, bind({ mwType: 2, mwRkey: makeKey(8, 1), newRkey: makeKey(8, 2), bind: klm }), BIND_ERR, [5, 8]);
      await expectUmr(b, bind({ mwType: 1, mwRkey: makeKey(9, 1), newRkey: makeKey(9, 2), bind: klm }), BIND_ERR, [5, 9]);
      // re-registered without ZERO_BASED (after LOCAL_INV): both fields are cleared
      expect((await b.post(localInv(key))).syndrome).toBe(OK);
      expect((await b.post(regMr(makeKey(5, 4), 0x9000, 4096, mtts(100, 1))))).toMatchObject({ syndrome: OK });
      expect(readMkey(b.hca, 5)).toMatchObject({ start: 0x9000, zeroBased: false });
    });
  });
});

describe('UmrEngine: memory-window bind (type 2)', () => {
  const W = 8;
  const MR = 3;
  const mrKey = makeKey(MR, 1);
  const MR_START = 0x10_0000;
  function setup(opts: UmrEngineOptions = {}) {
    const b = bench(opts);
    userMr(b, MR, 1, MR_START, 4);
    window(b, W, 2);
    return b;
  }
  const bind2 = (newTag: number, addr: number, length: number, o: { access?: MrAccess; zeroBased?: boolean; qpn?: number; mr?: number } = {}): Uint8Array =>
    bind({ mwType: 2, mwRkey: makeKey(W, 1), newRkey: makeKey(W, newTag), qpn: o.qpn, bind: { mrLkey: o.mr ?? mrKey, addr, length, access: o.access ?? remote, zeroBased: o.zeroBased } });

  it('binds: the window is VALID on the QP, counts on the MR, and its key translates to the MR pages', async () => {
    const b = setup();
    const rkey = makeKey(W, 2);
    await b.sim.run(async () => {
      const r = await b.post(bind2(2, MR_START + 0x1800, 0x1000));
      expect(r.syndrome).toBe(OK);
      expect(r.ps).toBeGreaterThanOrEqual(CTX_READ_PS);
      expect(readMkey(b.hca, W)).toMatchObject({
        free: false, tag: 2, qpn: QPN, start: MR_START + 0x1800, len: 0x1000, access: RR | RW, xltCount: 1, kind: MKEY_KIND_MW2,
      });
      expect(readMkey(b.hca, MR).mwCount).toBe(1);
      expect(await b.xlate(rkey, MR_START + 0x1ff8, 16, RR)).toEqual({
        kind: 'ok', segments: [{ pa: mrPage(MR, 1) + 0xff8, length: 8 }, { pa: mrPage(MR, 2), length: 8 }],
      });
      expect(await b.xlate(rkey, MR_START + 0x1800, 8, RR, { qpn: QPN + 1 })).toEqual({ kind: 'error', error: 'QPN', key: rkey });
      expect(await b.xlate(rkey, MR_START + 0x1800, 8, 8)).toEqual({ kind: 'error', error: 'ACCESS', key: rkey });
      expect(await b.xlate(makeKey(W, 1), MR_START + 0x1800, 8, RR)).toEqual({ kind: 'error', error: 'INVALID_KEY', key: makeKey(W, 1) });
      // the MR cannot be invalidated while the window is bound; the window can, then the MR
      await expectUmr(b, localInv(mrKey), QP_OP, [MR]);
      await expectUmr(b, localInv(rkey), OK, [W]);
      expect(readMkey(b.hca, W).free).toBe(true);
      expect(readMkey(b.hca, MR).mwCount).toBe(0);
      expect(await b.xlate(rkey, MR_START + 0x1800, 8, RR)).toEqual({ kind: 'error', error: 'FREE', key: rkey });
      await expectUmr(b, localInv(mrKey), OK, [MR]);
      await expectUmr(b, localInv(rkey), OK, [W]); // already FREE
    });
    const st = b.sim.stats()['tb.hca0.umr_engine'];
    expect(st.jobs_bind_mw).toBe(1);
    // bind: window + MR; inv MR (fails); inv window: window, then its KLM, then its MR; inv MR; inv window (FREE)
    expect(st.ctx_reads).toBe(2 + 1 + 2 + 1 + 1);
    expect(st.xlt_reads).toBe(1);
  });

  it('a zero-based window starts at 0 and maps to addr + offset', async () => {
    const b = setup();
    await b.sim.run(async () => {
      expect((await b.post(bind2(5, MR_START + 0x2000, 0x800, { zeroBased: true }))).syndrome).toBe(OK);
      expect(readMkey(b.hca, W)).toMatchObject({ start: 0, len: 0x800 });
      expect(await b.xlate(makeKey(W, 5), 0x10, 8, RR)).toEqual({ kind: 'ok', segments: [{ pa: mrPage(MR, 2) + 0x10, length: 8 }] });
    });
  });

  it('fails with MW_BIND_ERR, changing nothing, for every rule', async () => {
    const b = setup();
    const FRMR = 4; // FREE: never registered
    frmr(b, FRMR, 4);
    userMr(b, 5, 1, MR_START, 4);
    userMr(b, 6, 1, MR_START, 4, { access: RR });
    userMr(b, 7, 1, MR_START, 4, { pd: OTHER_PD });
    window(b, 9, 2, { pd: OTHER_PD });
    const all = [W, MR, FRMR, 5, 6, 7, 9];
    await b.sim.run(async () => {
      await expectUmr(b, bind2(2, MR_START, 0x100), BIND_ERR, all, { pd: OTHER_PD }); // C10-72
      await expectUmr(b, bind2(2, MR_START, 0x100, { mr: makeKey(FRMR, 0) }), BIND_ERR, all); // MR not VALID
      await expectUmr(b, bind2(2, MR_START, 0x100, { mr: makeKey(MR, 2) }), BIND_ERR, all); // MR key not current
      await expectUmr(b, bind2(2, MR_START, 0x100, { mr: makeKey(0x30, 1) }), BIND_ERR, all); // no such MR
      // Changed with issue 18 item 7: no C10-73. An MR registered without IB_ACCESS_MW_BIND
      // takes the bind: mlx5's mkey has no bit for it (Linux 6.12 drivers/infiniband/hw/mlx5/
      // wr.c:180 get_umr_flags, umr.c:443 mlx5r_umr_set_access_flags drop it), and rdma-core
      // checks it only in an MLX5_MW_DEBUG build (providers/mlx5/qp.c set_bind_wr)
      await expectUmr(b, bind2(2, MR_START, 0x100, { mr: makeKey(5, 1) }), OK, [W]);
      await expectUmr(b, localInv(makeKey(W, 2)), OK, [W]);
      await expectUmr(b, bind2(2, MR_START, 0x100, { mr: makeKey(6, 1) }), BIND_ERR, all); // C10-74: RW needs MR LW
      await expectUmr(b, bind2(2, MR_START, 0x100, { mr: makeKey(6, 1), access: { remoteRead: true } }), OK, [W]); // ...RR does not
      await expectUmr(b, localInv(makeKey(W, 2)), OK, [W]);
      await expectUmr(b, bind2(3, MR_START + 0x3f00, 0x200), BIND_ERR, all); // C10-75: past the end
      await expectUmr(b, bind2(3, MR_START - 0x100, 0x200), BIND_ERR, all); // C10-75: before the start
      await expectUmr(b, bind2(3, MR_START, 0x100, { mr: makeKey(7, 1) }), BIND_ERR, all); // MR in another PD than the window
      await expectUmr(b, bind({ mwType: 2, mwRkey: makeKey(9, 1), newRkey: makeKey(9, 2), bind: { mrLkey: mrKey, addr: MR_START, length: 8, access: remote } }), BIND_ERR, all, { pd: OTHER_PD });
      await expectUmr(b, bind({ mwType: 2, mwRkey: makeKey(MR, 1), newRkey: makeKey(MR, 2), bind: { mrLkey: mrKey, addr: MR_START, length: 8, access: remote } }), BIND_ERR, all); // not a window
      await expectUmr(b, bind({ mwType: 2, mwRkey: makeKey(W, 3), newRkey: makeKey(W, 4) }), BIND_ERR, all); // o10-37.2.40: zero length
      const zeroLen = bind2(3, MR_START, 0x100);
      zeroLen.fill(0, 64 + 24, 64 + 32); // a bind WQE whose segment says length 0 (o10-37.2.40)
      await expectUmr(b, zeroLen, BIND_ERR, all);
      // a bound type-2 window must be FREE to bind again (o10-37.2.30)
      await expectUmr(b, bind2(3, MR_START, 0x100), OK, [W]);
      await expectUmr(b, bind2(4, MR_START, 0x100), BIND_ERR, all);
      expect(readMkey(b.hca, MR).mwCount).toBe(1);
    });
    const st = b.sim.stats()['tb.hca0.umr_engine'];
    expect(st.errors_mw_bind_err).toBe(13);
  });

  it("type2Unbind: 'invalidate' executes the zero-length bind as mlx5 does: CHECK_QPN and a full key match", async () => {
    const b = setup({ type2Unbind: 'invalidate' });
    const unbind = (tag: number, qpn = QPN): Uint8Array => bind({ mwType: 2, mwRkey: makeKey(W, tag), newRkey: makeKey(W, tag), qpn });
    await b.sim.run(async () => {
      await expectUmr(b, bind2(2, MR_START, 0x100), OK, [W]);
      await expectUmr(b, unbind(2, QPN + 1), QP_OP, [W, MR], { qpn: QPN + 1 }); // the window is bound to QPN
      await expectUmr(b, unbind(3), QP_OP, [W, MR]); // not its current key
      await expectUmr(b, unbind(2), OK, [W, MR]);
      expect(readMkey(b.hca, W)).toMatchObject({ free: true, tag: 2 });
      expect(readMkey(b.hca, MR).mwCount).toBe(0);
      await expectUmr(b, unbind(2), OK, [W, MR]); // already FREE: as LOCAL_INV, nothing to check or change
      expect(readMkey(b.hca, MR).mwCount).toBe(0);
    });
    expect(b.sim.stats()['tb.hca0.umr_engine'].jobs_unbind).toBe(4);
  });
});

describe('UmrEngine: memory-window bind (type 1)', () => {
  it('binds, rebinds to another MR (the count moves), and unbinds with length 0; LOCAL_INV never applies', async () => {
    const b = bench();
    userMr(b, 3, 1, 0x1_0000, 2);
    userMr(b, 4, 1, 0x8_0000, 2);
    window(b, 8, 1);
    const bind1 = (from: number, to: number, mr: number, addr: number, length: number): Uint8Array =>
      bind({ mwType: 1, mwRkey: makeKey(8, from), newRkey: makeKey(8, to), bind: { mrLkey: makeKey(mr, 1), addr, length, access: remote } });
    await b.sim.run(async () => {
      // type 1: no C10-72 on the QP's PD (the verb checks the window's PD against the MR's)
      await expectUmr(b, bind1(1, 2, 3, 0x1_0100, 0x100), OK, [8], { pd: OTHER_PD });
      expect(readMkey(b.hca, 8)).toMatchObject({ free: false, tag: 2, qpn: MKEY_QPN_NONE, start: 0x1_0100, len: 0x100 });
      expect(readMkey(b.hca, 3).mwCount).toBe(1);
      // rebinding a bound type-1 window is allowed: the old MR counts one window less
      await expectUmr(b, bind1(2, 3, 4, 0x8_1000, 0x200), OK, [8]);
      expect(readMkey(b.hca, 3).mwCount).toBe(0);
      expect(readMkey(b.hca, 4).mwCount).toBe(1);
      expect(await b.xlate(makeKey(8, 3), 0x8_1010, 8, RR, { qpn: 0x777 })).toEqual({ kind: 'ok', segments: [{ pa: mrPage(4, 1) + 0x10, length: 8 }] });
      await expectUmr(b, bind1(3, 4, 4, 0x8_1000, 0x100), OK, [8]); // the same MR again: still one
      expect(readMkey(b.hca, 4).mwCount).toBe(1);
      await expectUmr(b, localInv(makeKey(8, 4)), QP_OP, [8, 4]); // o10-37.2.26
      await expectUmr(b, bind1(4, 5, 4, 0, 0), OK, [8]); // unbind
      expect(readMkey(b.hca, 8)).toMatchObject({ free: true, tag: 5 });
      expect(readMkey(b.hca, 4).mwCount).toBe(0);
      expect(await b.xlate(makeKey(8, 5), 0x8_1010, 8, RR)).toEqual({ kind: 'error', error: 'FREE', key: makeKey(8, 5) });
    });
    const st = b.sim.stats()['tb.hca0.umr_engine'];
    expect(st.jobs_bind_mw).toBe(3);
    expect(st.jobs_unbind).toBe(1);
  });
});

describe('UmrEngine: remote invalidation (rinv, SEND_WITH_INV at the responder)', () => {
  const REM_INV = CqeSyndrome.REMOTE_INVAL_REQ_ERR;
  /** Submits a LOCAL_INV WQE of `key` on the rinv queues, as the responder of QP (qpn, pd) does. */
  async function remoteInv(b: Bench, key: number, pd = PD): Promise<{ syndrome: number; ps: number }> {
    const t0 = b.sim.now;
    await b.umr.rinv.req.pushWait({ tag: 9, qpn: QPN, pd, fre: true, wqe: localInv(key) });
    const d = await b.umr.rinv.resp.popWait();
    return { syndrome: d.syndrome, ps: b.sim.now - t0 };
  }

  it('checks the Remote invalidate rules (REM_INV_REQ_ERR, nothing changed), releases a type-2 window, frees the MR', async () => {
    const b = bench();
    frmr(b, 5, 4);
    userMr(b, 3, 1, 0x1_0000, 1); // no en_rinval
    window(b, 8, 2);
    window(b, 9, 1, { tag: 4 });
    const k5 = makeKey(5, 1);
    await b.sim.run(async () => {
      expect((await b.post(regMr(k5, 0x2000, 4096, mtts(10, 1)))).syndrome).toBe(OK);
      // a type-2 window bound to MR 5
      const bw = bind({ mwType: 2, mwRkey: makeKey(8, 1), newRkey: makeKey(8, 2), bind: { mrLkey: k5, addr: 0x2000, length: 0x100, access: remote } });
      expect((await b.post(bw)).syndrome).toBe(OK);
      expect(readMkey(b.hca, 5).mwCount).toBe(1);
      const expectRemote = async (key: number, syndrome: number, indices: number[], pd = PD): Promise<number> => {
        const before = indices.map((i) => readMkey(b.hca, i));
        const r = await remoteInv(b, key, pd);
        expect(r.syndrome, `remote invalidate of 0x${key.toString(16)}`).toBe(syndrome);
        if (syndrome !== OK) expect(indices.map((i) => readMkey(b.hca, i))).toEqual(before);
        return r.ps;
      };
      await expectRemote(k5, REM_INV, [5]); // windows still bound
      await expectRemote(makeKey(5, 2), REM_INV, [5]); // full key match
      await expectRemote(makeKey(3, 1), REM_INV, [3]); // a user MR: no remote invalidation
      await expectRemote(makeKey(9, 4), REM_INV, [9]); // a type-1 window
      await expectRemote(makeKey(8, 2), REM_INV, [8], OTHER_PD); // the responder QP's PD
      await expectRemote(makeKey(200, 1), REM_INV, [200]); // names nothing
      // the window: FREE, and MR 5 counts it no more (its KLM and the MR's context read first)
      const psWindow = await expectRemote(makeKey(8, 2), OK, []);
      expect(readMkey(b.hca, 8)).toMatchObject({ free: true, tag: 2 });
      expect(readMkey(b.hca, 5).mwCount).toBe(0);
      expect(psWindow).toBeGreaterThanOrEqual(3 * CTX_READ_PS); // three dependent reads
      // now the MR, with one context read; the cached context is not used afterwards
      expect(await b.xlate(k5, 0x2010, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(10) + 0x10, length: 8 }] });
      const psMr = await expectRemote(k5, OK, []);
      expect(psMr).toBeGreaterThanOrEqual(CTX_READ_PS);
      expect(psMr).toBeLessThan(2 * CTX_READ_PS);
      expect(readMkey(b.hca, 5)).toMatchObject({ free: true, tag: 1 });
      expect(await b.xlate(k5, 0x2010, 8)).toEqual({ kind: 'error', error: 'FREE', key: k5 });
      await expectRemote(k5, OK, []); // already FREE: succeeds (as LOCAL_INV)
    });
    const st = b.sim.stats()['tb.hca0.umr_engine'];
    expect(st.jobs_remote_inv).toBe(9);
    expect(st.jobs_local_inv).toBe(0);
    expect(st.errors_rem_inv_req_err).toBe(6);
  });

  it('takes the send queue jobs and the responder jobs in turn, each completion on its own queue', async () => {
    const b = bench();
    for (const i of [5, 6, 7, 10]) frmr(b, i, 4);
    await b.sim.run(async () => {
      for (const i of [5, 6, 7, 10]) expect((await b.post(regMr(makeKey(i, 1), 0, 4096, mtts(i, 1)))).syndrome).toBe(OK);
      await b.umr.req.pushWait({ tag: 1, qpn: QPN, pd: PD, fre: true, wqe: localInv(makeKey(5, 1)) });
      await b.umr.req.pushWait({ tag: 2, qpn: QPN, pd: PD, fre: true, wqe: localInv(makeKey(6, 1)) });
      await b.umr.rinv.req.pushWait({ tag: 3, qpn: QPN, pd: PD, fre: true, wqe: localInv(makeKey(7, 1)) });
      await b.umr.rinv.req.pushWait({ tag: 4, qpn: QPN, pd: OTHER_PD, fre: true, wqe: localInv(makeKey(10, 1)) });
      const local = [await b.umr.resp.popWait(), await b.umr.resp.popWait()];
      const rem = [await b.umr.rinv.resp.popWait(), await b.umr.rinv.resp.popWait()];
      expect(local).toEqual([{ tag: 1, syndrome: OK }, { tag: 2, syndrome: OK }]);
      expect(rem).toEqual([{ tag: 3, syndrome: OK }, { tag: 4, syndrome: REM_INV }]);
      expect([5, 6, 7, 10].map((i) => readMkey(b.hca, i).free)).toEqual([true, true, true, false]);
    });
  });
});

describe('UmrEngine: translation update, queueing, trace names', () => {
  it('updates MTTs at a translation offset (ODP) without changing the mkey state, coherently with the MTT cache', async () => {
    const b = bench();
    const key = makeKey(5, 1);
    writeMkey(b.hca, desc({ index: 5, tag: 1, free: false, access: LW, start: 0, length: 16 * 4096, pgAccess: true, mtt: new Array<number>(16).fill(0) }));
    const w = new Uint8Array(12 * 16);
    const v = new DataView(w.buffer);
    encodeCtrlSeg(v, 0, { opmod: 0, wqeIndex: 0, opcode: WqeOpcode.UMR, qpn: 0x10, ds: 12, signature: 0, fence: 0, ce: 0, se: false, imm: key });
    encodeUmrCtrlSeg(v, 16, { flags: UmrCtrlFlag.INLINE | UmrCtrlFlag.TRANSLATION_OFFSET_EN | UmrCtrlFlag.CHECK_NOT_FREE, xltOctowords: 4, xltOffset: 4, mkeyMask: 0 });
    encodeMkeyContext(v, 64, zeroMkeyContext());
    for (let i = 0; i < 8; i++) encodeMtt(v, 128 + i * 8, { addr: page(300 + i), read: true, write: true });
    await b.sim.run(async () => {
      expect(await b.xlate(key, 9 * 4096, 8)).toEqual({ kind: 'fault', va: 9 * 4096, bytesCommitted: 0, write: false });
      await expectUmr(b, w, OK, [5], { pd: 99 });
      expect(readMkey(b.hca, 5)).toMatchObject({ free: false, tag: 1, xltCount: 16 });
      expect(await b.xlate(key, 9 * 4096, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(301), length: 8 }] });
      expect((await b.xlate(key, 7 * 4096, 8)).kind).toBe('fault');
    });
    expect(b.sim.stats()['tb.hca0.umr_engine'].jobs_xlt_update).toBe(1);
  });

  it('runs queued jobs in order, each after the previous one wrote', async () => {
    const b = bench();
    frmr(b, 5, 4);
    await b.sim.run(async () => {
      const jobs = [regMr(makeKey(5, 1), 0, 4096, mtts(1, 1)), localInv(makeKey(5, 1)), regMr(makeKey(5, 2), 0, 4096, mtts(2, 1)), regMr(makeKey(5, 3), 0, 4096, mtts(3, 1))];
      for (let i = 0; i < jobs.length; i++) await b.umr.req.pushWait({ tag: i, qpn: QPN, pd: PD, fre: true, wqe: jobs[i] });
      const done = [];
      for (let i = 0; i < jobs.length; i++) done.push(await b.umr.resp.popWait());
      expect(done).toEqual([{ tag: 0, syndrome: OK }, { tag: 1, syndrome: OK }, { tag: 2, syndrome: OK }, { tag: 3, syndrome: QP_OP }]);
      expect(readMkey(b.hca, 5)).toMatchObject({ free: false, tag: 2 });
      expect(await b.xlate(makeKey(5, 2), 8, 8)).toEqual({ kind: 'ok', segments: [{ pa: page(2) + 8, length: 8 }] });
    });
  });

  it('traces its FSM, key, kind and syndrome into a VCD that reads back strictly', async () => {
    const b = bench();
    expect(b.umr.path).toBe('tb.hca0.umr_engine');
    frmr(b, 5, 4);
    const vcd = join(tempDir('mlx5sim-umr-'), 'umr.vcd');
    const tracer = new Tracer(b.sim, { vcd, scopes: ['tb.hca0.umr_engine'] });
    const key = makeKey(5, 0x42);
    await b.sim.run(async () => {
      expect((await b.post(regMr(key, 0, 4096, mtts(1, 1)))).syndrome).toBe(OK);
      expect((await b.post(regMr(key, 0, 4096, mtts(1, 1)))).syndrome).toBe(QP_OP);
    });
    tracer.close();
    const v = await readVcdFile(vcd);
    const values = (name: string): (number | null)[] => v.changes.filter(([, path]) => path === `tb.hca0.umr_engine.${name}`).map(([, , x]) => x);
    const S = (n: string): number => UmrState.valueOf(n);
    expect(values('state')).toEqual([
      S('IDLE'), S('FETCH_MKEY'), S('WAIT_MKEY'), S('CHECK'), S('WRITE'), S('WAIT_LANDED'), S('DONE'), S('IDLE'), // success: two posted writes, then their landing
      S('FETCH_MKEY'), S('WAIT_MKEY'), S('CHECK'), S('DONE'), S('IDLE'), // "must be free" fails: no write
    ]);
    expect(values('key')).toEqual([0, key]);
    expect(values('kind')).toEqual([0, UmrKind.valueOf('REG_MR')]);
    expect(values('syndrome')).toEqual([0, QP_OP]); // held until the next job starts
  });
});

/** A translation update of 8 MTTs (one 64-byte unit) at entry `first`, inline, with `flags` (+ INLINE, TRANSLATION_OFFSET_EN). */
function xltUpdate(key: number, first: number, pages: readonly number[], flags: number): Uint8Array {
  const w = new Uint8Array(12 * 16);
  const v = new DataView(w.buffer);
  encodeCtrlSeg(v, 0, { opmod: 0, wqeIndex: 0, opcode: WqeOpcode.UMR, qpn: QPN, ds: 12, signature: 0, fence: 0, ce: 0, se: false, imm: key });
  encodeUmrCtrlSeg(v, 16, { flags: UmrCtrlFlag.INLINE | UmrCtrlFlag.TRANSLATION_OFFSET_EN | flags, xltOctowords: 4, xltOffset: first / 2, mkeyMask: 0 });
  encodeMkeyContext(v, 64, zeroMkeyContext());
  for (let i = 0; i < 8; i++) encodeMtt(v, 128 + i * 8, { addr: pages[i] === 0 ? 0 : pages[i], read: pages[i] !== 0, write: pages[i] !== 0 });
  return w;
}

describe('UmrEngine: CHECK_FREE / CHECK_NOT_FREE and the DMA fence (issue 18)', () => {
  it('a translation update with CHECK_NOT_FREE (mlx5 "fail if free") fails on a FREE MR, and one with CHECK_FREE on a VALID MR: LOC_QP_OP_ERR, nothing written', async () => {
    const b = bench();
    frmr(b, 5, 8);
    userMr(b, 6, 1, 0, 8);
    const zeros = new Array<number>(8).fill(0);
    await b.sim.run(async () => {
      await expectUmr(b, xltUpdate(makeKey(5, 0), 0, zeros, UmrCtrlFlag.CHECK_NOT_FREE), QP_OP, [5]);
      await expectUmr(b, xltUpdate(makeKey(6, 1), 0, zeros, UmrCtrlFlag.CHECK_FREE), QP_OP, [6]);
      await expectUmr(b, xltUpdate(makeKey(6, 1), 0, zeros, UmrCtrlFlag.CHECK_NOT_FREE), OK, [6]);
    });
    expect(b.sim.stats()['tb.hca0.umr_engine'].errors_loc_qp_op_err).toBe(2);
  });

  it('a translation update that fails "fail if free" completes behind the DMA through its mkey (a LOCAL_INV that freed it may still be held)', async () => {
    const b = bench();
    frmr(b, 5, 8);
    const fence = b.hca.dmaFence;
    await b.sim.run(async () => {
      const h = fence.hold(5);
      await b.umr.req.pushWait({ tag: 100, qpn: QPN, pd: PD, fre: true, wqe: xltUpdate(makeKey(5, 0), 0, new Array<number>(8).fill(0), UmrCtrlFlag.CHECK_NOT_FREE) });
      await b.sim.delay(20_000_000);
      expect(b.umr.resp.canPop()).toBe(false);
      fence.release(h);
      expect(await b.umr.resp.popWait()).toEqual({ tag: 100, syndrome: QP_OP });
    });
  });

  it('holds a zap, a LOCAL_INV and a revoke until the DMA translated through their mkey before them is over; a map, and DMA through another mkey, hold nothing, and jobs behind a held one go on', async () => {
    const b = bench();
    const key = makeKey(6, 1);
    userMr(b, 6, 1, 0, 16, { pgAccess: true, mtt: [...Array.from({ length: 8 }, (_, i) => mrPage(6, i) + 3), ...new Array<number>(8).fill(0)] });
    frmr(b, 7, 4);
    const fence = b.hca.dmaFence;
    await b.sim.run(async () => {
      const hold = fence.hold(6); // a message translated through the MR (index 6), its DMA not over
      // a map over entries that were not present: done at once
      const map = await b.post(xltUpdate(key, 8, Array.from({ length: 8 }, (_, i) => page(500 + i)), UmrCtrlFlag.CHECK_NOT_FREE));
      expect(map.syndrome).toBe(OK);
      // the same entries again (unchanged): no invalidation either
      expect((await b.post(xltUpdate(key, 8, Array.from({ length: 8 }, (_, i) => page(500 + i)), UmrCtrlFlag.CHECK_NOT_FREE))).syndrome).toBe(OK);
      // a zap of entries 0..7: its writes land, but its completion waits for the hold
      await b.umr.req.pushWait({ tag: 100, qpn: QPN, pd: PD, fre: true, wqe: xltUpdate(key, 0, new Array<number>(8).fill(0), UmrCtrlFlag.CHECK_NOT_FREE) });
      // a job behind it (a REG_MR of another MR) runs and completes first
      await b.umr.req.pushWait({ tag: 101, qpn: QPN, pd: PD, fre: true, wqe: regMr(makeKey(7, 1), 0, 4096, mtts(1, 1)) });
      expect(await b.umr.resp.popWait()).toEqual({ tag: 101, syndrome: OK });
      expect((await b.xlate(key, 0, 8)).kind).toBe('fault'); // the zap took effect
      await b.sim.delay(50_000_000);
      expect(b.umr.resp.canPop()).toBe(false);
      const t = b.sim.now;
      fence.release(hold);
      expect(await b.umr.resp.popWait()).toEqual({ tag: 100, syndrome: OK });
      expect(b.sim.now - t).toBeLessThan(100_000);
      // a consumer's LOCAL_INV of another mkey (index 7): DMA through index 6 does not hold it
      const h2 = fence.hold(6);
      await b.umr.req.pushWait({ tag: 102, qpn: QPN, pd: PD, fre: true, wqe: localInv(makeKey(7, 1)) });
      expect(await b.umr.resp.popWait()).toEqual({ tag: 102, syndrome: OK });
      // ...but DMA through its own mkey does: held until that DMA is over
      expect((await b.post(regMr(makeKey(7, 2), 0, 4096, mtts(1, 1)))).syndrome).toBe(OK);
      const h7 = fence.hold(7);
      await b.umr.req.pushWait({ tag: 104, qpn: QPN, pd: PD, fre: true, wqe: localInv(makeKey(7, 2)) });
      await b.sim.delay(20_000_000);
      expect(b.umr.resp.canPop()).toBe(false);
      fence.release(h7);
      expect(await b.umr.resp.popWait()).toEqual({ tag: 104, syndrome: OK });
      // the MR cache's revoke (FREE | KEY, a new tag) is held
      await b.umr.req.pushWait({ tag: 103, qpn: QPN, pd: PD, fre: true, wqe: wqe((v) => buildLocalInvWqe(v, 0, { wqeIndex: 1, qpn: QPN, key, newTag: 9 })) });
      await b.sim.delay(20_000_000);
      expect(b.umr.resp.canPop()).toBe(false);
      fence.release(h2);
      expect(await b.umr.resp.popWait()).toEqual({ tag: 103, syndrome: OK });
    });
    const st = b.sim.stats()['tb.hca0.umr_engine'];
    expect(st.fenced).toBe(3);
  });
});
