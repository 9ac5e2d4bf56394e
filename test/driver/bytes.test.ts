/**
 * The exact bytes the driver and the hardware leave in host memory, field by field against
 * spec/mlx5.md: send WQEs read back from the send queue buffer (`qp.sq`), translation lists
 * given by pointer, and CQEs read back from the CQ buffer.
 */
import { queueAddr } from '../../src/rtl/memory/pas.ts';
import { describe, expect, it } from 'vitest';
import { Access, Testbed, incRkey, type Cq, type Qp } from '../../src/index.ts';

const PAGE = 4096;

/** Big-endian field reads over a byte array (all mlx5 multi-byte fields are big-endian). */
class Be {
  private readonly v: DataView;
  constructor(readonly b: Uint8Array) {
    this.v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }
  u8(o: number): number { return this.v.getUint8(o); }
  u16(o: number): number { return this.v.getUint16(o); }
  u32(o: number): number { return this.v.getUint32(o); }
  u64(o: number): number { return this.v.getUint32(o) * 2 ** 32 + this.v.getUint32(o + 4); }
  zero(from: number, to: number): boolean { return this.b.subarray(from, to).every((x) => x === 0); }
}

/** mkey_mask with these bit positions set (spec/mlx5.md "mkey_mask bits"). */
const mask = (...bits: number[]): number => bits.reduce((a, b) => a + 2 ** b, 0);
const M = { LEN: 0, PAGE_SIZE: 1, START_ADDR: 6, PD: 7, EN_RINVAL: 8, KEY: 13, QPN: 14, LR: 17, LW: 18, RR: 19, RW: 20, A: 21, SMALL_FENCE: 23, FREE: 29 };
const FRWR_MASK = mask(M.LEN, M.PAGE_SIZE, M.START_ADDR, M.EN_RINVAL, M.KEY, M.LR, M.LW, M.RR, M.RW, M.SMALL_FENCE, M.FREE);

/** The WQE that starts at WQEBB counter `idx` (n WQEBBs, unwrapped copy). */
function wqeAt(tb: Testbed, hca: number, qp: Qp, idx: number, nbb: number): Be {
  const out = new Uint8Array(nbb * 64);
  for (let b = 0; b < nbb; b++) out.set(tb.host(hca).read(qp.sq.addr + ((idx + b) % qp.sq.wqeCnt) * 64, 64), b * 64);
  return new Be(out);
}

/**
 * CQE number `n` of a CQ, read where the hardware writes it: through the page list (pas) of the
 * CQ context.
 */
function cqeAt(tb: Testbed, hca: number, cq: Cq, n: number): Be {
  const ctx = tb.hca(hca).cmdif.getCq(cq.cqn)!;
  return new Be(tb.hca(hca).mem.read(queueAddr(ctx.pages, (n % ctx.size) * 64), 64));
}

/** The control segment (16 B) checks common to every WQE. */
function expectCtrl(w: Be, o: { wqeIndex: number; opcode: number; qpn: number; ds: number; imm: number; fmCeSe: number }): void {
  expect(w.u8(0)).toBe(0); // opmod
  expect(w.u32(0)).toBe(((o.wqeIndex << 8) | o.opcode) >>> 0); // opmod_idx_opcode
  expect(w.u16(1)).toBe(o.wqeIndex);
  expect(w.u8(3)).toBe(o.opcode);
  expect(w.u32(4)).toBe(((o.qpn << 8) | o.ds) >>> 0); // qpn_ds
  expect(w.u8(7) & 0x3f).toBe(o.ds);
  expect(w.u8(8)).toBe(0); // signature
  expect(w.u8(11)).toBe(o.fmCeSe);
  expect(w.u32(12)).toBe(o.imm >>> 0);
}

async function pairOf(tb: Testbed, cqe = 64) {
  const [ctx0, ctx1] = [await tb.openDevice(0), await tb.openDevice(1)];
  const [pd0, pd1] = [await ctx0.allocPd(), await ctx1.allocPd()];
  const [cq0, cq1] = [await ctx0.createCq(cqe), await ctx1.createCq(cqe)];
  const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
  const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
  await qp0.connect(qp1);
  return { ctx0, ctx1, pd0, pd1, cq0, cq1, qp0, qp1 };
}

const SIGNALED = 2 << 2; // fm_ce_se CE = 2 (CQ update)

describe('send WQE bytes (spec/mlx5.md "Send WQE")', () => {
  it('REG_MR with MTTs: inline (8 pages) and by pointer (16 pages), with the completion CQEs', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, cq0, qp0 } = await pairOf(tb);
      const h = tb.host(0);
      // inline: 8 MTTs = 64 bytes
      const a = h.alloc(8 * PAGE, { align: PAGE });
      const fmr = await pd0.allocMr('MEM_REG', 8);
      expect(fmr.mapSg([{ addr: a.addr, length: 8 * PAGE }])).toBe(1);
      fmr.updateKey(0x3c);
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ, signaled: true });
      const w = wqeAt(tb, 0, qp0, 0, 3);
      expectCtrl(w, { wqeIndex: 0, opcode: 0x25, qpn: qp0.qpNum, ds: 12, imm: fmr.rkey, fmCeSe: SIGNALED | (1 << 5) }); // the umr_fence capability (default SMALL): INITIATOR_SMALL
      // UMR control segment @16
      expect(w.u8(16)).toBe(0x80 | 0x20); // INLINE | "must be free"
      expect(w.u16(20)).toBe(4); // xlt_octowords = ALIGN(64, 64) / 16
      expect(w.u16(22)).toBe(0); // xlt_offset
      expect(w.u64(24)).toBe(FRWR_MASK); // no A: no remote atomic
      expect(w.u32(32)).toBe(0); // xlt_offset_47_16
      expect(w.zero(36, 64)).toBe(true);
      // mkey segment @64
      expect(w.u8(64)).toBe(0); // not free, access_mode[4:2] = 0
      expect(w.u8(66)).toBe(0x80 | 0x20 | 0x10 | 0x08 | 0x04 | 1); // UMR_EN RW RR LW LR | MTT
      expect(w.u32(68)).toBe((0xffffff00 | 0x3c) >>> 0); // qpn none, tag
      expect(w.u32(76)).toBe(0x01000000); // flags_pd: REMOTE_INVAL
      expect(w.u64(80)).toBe(a.addr); // start_addr = iova
      expect(w.u64(88)).toBe(8 * PAGE); // len
      expect(w.u32(116)).toBe(4); // translations_octword_size = ALIGN(8, 8) / 2
      expect(w.u8(123) & 0x3f).toBe(12); // log2_page_size
      // 8 inline MTTs @128: page PA | RD | WR
      for (let i = 0; i < 8; i++) expect(w.u64(128 + i * 8)).toBe(h.dmaAddress(a.addr + i * PAGE) + 3);
      const [wc] = await cq0.wait(1);
      expect(wc).toMatchObject({ wrId: 1, status: 'SUCCESS', opcode: 'REG_MR' });
      // its CQE: REQ, WQE opcode UMR, the QP, wqe_counter 0, owner 0 (first pass)
      const c = cqeAt(tb, 0, cq0, 0);
      expect(c.u8(63)).toBe(0x00); // op_own: opcode REQ(0) << 4 | owner 0
      expect(c.u32(56)).toBe(((0x25 << 24) | qp0.qpNum) >>> 0); // sop_drop_qpn
      expect(c.u16(60)).toBe(0); // wqe_counter
      expect(cqeAt(tb, 0, cq0, 1).u8(63)).toBe(0xf0); // the next entry is still INVALID

      // by pointer: 16 MTTs = 128 bytes; with remote atomic (mask A)
      const b = h.alloc(16 * PAGE, { align: PAGE });
      const big = await pd0.allocMr('MEM_REG', 16);
      expect(big.mapSg([{ addr: b.addr + 512, length: 16 * PAGE - 1024 }])).toBe(1);
      qp0.postSend({ wrId: 2, opcode: 'REG_MR', mr: big, key: big.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_ATOMIC, signaled: true });
      const p = wqeAt(tb, 0, qp0, 3, 3);
      // DS: ctrl 1 + UMR ctrl 3 + mkey 4 + one data segment = 9 (3 WQEBBs). It follows a REG_MR:
      // the initiator-small fence (1 in bits 7:5 of fm_ce_se)
      expect(p.u32(0)).toBe(((3 << 8) | 0x25) >>> 0);
      expect(p.u8(7) & 0x3f).toBe(9);
      expect(p.u8(11) & 0x1f).toBe(SIGNALED);
      expect(p.u8(11) >> 5).toBe(1);
      expect(p.u32(12)).toBe(big.rkey);
      expect(p.u8(16)).toBe(0x20); // "must be free", not inline
      expect(p.u16(20)).toBe(8); // xlt_octowords = 128 / 16
      expect(p.u64(24)).toBe(FRWR_MASK + 2 ** M.A);
      expect(p.u8(66)).toBe(0x80 | 0x40 | 0x08 | 0x04 | 1); // UMR_EN A LW LR | MTT
      expect(p.u64(80)).toBe(b.addr + 512);
      expect(p.u64(88)).toBe(16 * PAGE - 1024);
      expect(p.u32(116)).toBe(8); // ALIGN(16, 8) / 2
      expect(p.u8(123) & 0x3f).toBe(12);
      // the data segment @128 points at the list (ALIGN(128, 64) bytes)
      expect(p.u32(128)).toBe(128);
      const listAddr = p.u64(136);
      const list = new Be(tb.hca(0).mem.read(listAddr, 128));
      for (let i = 0; i < 16; i++) expect(list.u64(i * 8)).toBe(h.dmaAddress(b.addr + i * PAGE) + 3);
      const [wc2] = await cq0.wait(1);
      expect(wc2).toMatchObject({ wrId: 2, status: 'SUCCESS', opcode: 'REG_MR' });
      const c2 = cqeAt(tb, 0, cq0, 1);
      expect(c2.u8(63)).toBe(0x00);
      expect(c2.u32(56)).toBe(((0x25 << 24) | qp0.qpNum) >>> 0);
      expect(c2.u16(60)).toBe(3); // the WQEBB index of the second WQE

      // re-registration without remote atomic of an MR once registered with it: A stays in the
      // mask with the atomic bit clear, so the earlier right is revoked (the driver's documented
      // choice, RegMrWqeParams.clearAtomic); a remote atomic through it is then refused
      qp0.postSend({ wrId: 3, opcode: 'LOCAL_INV', invalidateRkey: big.rkey, signaled: true });
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 3, status: 'SUCCESS', opcode: 'LOCAL_INV' });
      qp0.postSend({ wrId: 4, opcode: 'REG_MR', mr: big, key: big.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_READ, signaled: true });
      const r = wqeAt(tb, 0, qp0, 8, 3);
      expect(r.u32(0)).toBe(((8 << 8) | 0x25) >>> 0);
      expect(r.u64(24)).toBe(FRWR_MASK + 2 ** M.A);
      expect(r.u8(66)).toBe(0x80 | 0x10 | 0x08 | 0x04 | 1); // UMR_EN RR LW LR | MTT: no A
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 4, status: 'SUCCESS', opcode: 'REG_MR' });
      expect((await tb.hca(0).cmdif.exec({ op: 'QUERY_MKEY', index: big.rkey >>> 8 })).context[2] & 0x40).toBe(0);
    });
  });

  it('REG_MR of a mapSg with pageSize 8192: 8 KiB MTTs over huge pages, 4 KiB MTTs over scattered frames', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0, qp1 } = await pairOf(tb);
      const h = tb.host(0);
      const sink = tb.host(1).alloc(4 * PAGE);
      const smr = await pd1.regMr(sink.addr, 4 * PAGE, Access.LOCAL_WRITE);
      /** RDMA READ of `len` bytes at `addr` through `rkey` into hca1's sink: the bytes hca0 holds there. */
      const readBack = async (rkey: number, addr: number, len: number): Promise<void> => {
        qp1.postSend({ wrId: 9, opcode: 'RDMA_READ', sgList: [{ addr: sink.addr, length: len, lkey: smr.lkey }], remoteAddr: addr, rkey, signaled: true });
        expect((await cq1.wait(1))[0]).toMatchObject({ status: 'SUCCESS', byteLen: len });
        expect(tb.host(1).read(sink.addr, len)).toEqual(h.read(addr, len));
      };
      // huge pages (2 MiB physically contiguous): one MTT per 8 KiB page, log_page_size 13
      const huge = h.alloc(2 ** 21, { hugePages: true });
      h.write(huge.addr, Uint8Array.from({ length: 8 * PAGE }, (_, i) => (i * 13) & 0xff));
      const big = await pd0.allocMr('MEM_REG', 4);
      const iova = huge.addr + 2 * PAGE + 100;
      expect(big.mapSg([{ addr: iova, length: 6 * PAGE - 100 }], 2 * PAGE)).toBe(1);
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: big, key: big.rkey, access: Access.REMOTE_READ, signaled: true });
      const w = wqeAt(tb, 0, qp0, 0, 3);
      expect(w.u8(7) & 0x3f).toBe(12); // 8 DS + 3 MTTs inline (one 64-byte unit)
      expect(w.u64(80)).toBe(iova); // start_addr
      expect(w.u8(123) & 0x3f).toBe(13); // log2_page_size
      for (let i = 0; i < 3; i++) expect(w.u64(128 + i * 8)).toBe(h.dmaAddress(huge.addr + (i + 1) * 2 * PAGE) + 3);
      expect(w.u64(128 + 3 * 8)).toBe(0); // padding
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 1, status: 'SUCCESS', opcode: 'REG_MR' });
      await readBack(big.rkey, iova + 3 * PAGE - 50, 3000);

      // scattered 4 KiB frames, and the 8 KiB page below the element starts in an unmapped guard
      // gap: mapSg takes no DMA address there, and posts the bytes as 4 KiB MTTs
      h.alloc(2 * PAGE, { align: 2 * PAGE });
      const b = h.alloc(4 * PAGE);
      expect(b.addr % (2 * PAGE)).toBe(PAGE);
      expect(h.isMapped(b.addr - PAGE, 1)).toBe(false);
      expect(h.dmaAddress(b.addr + PAGE)).not.toBe(h.dmaAddress(b.addr) + PAGE); // scattered (this seed)
      h.write(b.addr, Uint8Array.from({ length: 4 * PAGE }, (_, i) => (i * 7 + 3) & 0xff));
      const small = await pd0.allocMr('MEM_REG', 2);
      expect(small.mapSg([{ addr: b.addr, length: 3 * PAGE }], 2 * PAGE)).toBe(1); // 2 pages of 8 KiB
      qp0.postSend({ wrId: 2, opcode: 'REG_MR', mr: small, key: small.rkey, access: Access.REMOTE_READ, signaled: true });
      const s = wqeAt(tb, 0, qp0, 3, 3);
      expect(s.u64(80)).toBe(b.addr);
      expect(s.u8(123) & 0x3f).toBe(12);
      for (let i = 0; i < 3; i++) expect(s.u64(128 + i * 8)).toBe(h.dmaAddress(b.addr + i * PAGE) + 3);
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 2, status: 'SUCCESS', opcode: 'REG_MR' });
      await readBack(small.rkey, b.addr + 100, 3 * PAGE - 200);
    });
  });

  it('REG_MR with KLMs (SG_GAPS): inline (3 elements) and by pointer (5 elements)', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, cq0, qp0 } = await pairOf(tb);
      const h = tb.host(0);
      const a = h.alloc(8 * PAGE, { align: PAGE });
      const sg = [
        { addr: a.addr + 100, length: 1000 },
        { addr: a.addr + PAGE + 300, length: 2500 },
        { addr: a.addr + 2 * PAGE + 777, length: 3000 },
        { addr: a.addr + 5 * PAGE + 8, length: 64 },
        { addr: a.addr + 7 * PAGE, length: 4096 },
      ];
      const fmr = await pd0.allocMr('SG_GAPS', 3);
      expect(fmr.mapSg(sg.slice(0, 3))).toBe(3);
      const dma = pd0.dmaLkeyNow >>> 0;
      expect(dma).toBeGreaterThan(0);
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.REMOTE_READ, signaled: true });
      const w = wqeAt(tb, 0, qp0, 0, 3);
      expectCtrl(w, { wqeIndex: 0, opcode: 0x25, qpn: qp0.qpNum, ds: 12, imm: fmr.rkey, fmCeSe: SIGNALED | (1 << 5) }); // umr_fence SMALL
      expect(w.u8(16)).toBe(0xa0);
      expect(w.u16(20)).toBe(4); // 48 bytes of KLMs, ALIGN(48, 64) / 16
      expect(w.u64(24)).toBe(FRWR_MASK);
      expect(w.u8(64)).toBe(0);
      expect(w.u8(66)).toBe(0x80 | 0x10 | 0x04 | 2); // UMR_EN RR LR | KLMS
      expect(w.u32(68)).toBe((0xffffff00 | (fmr.rkey & 0xff)) >>> 0);
      expect(w.u32(76)).toBe(0x01000000);
      expect(w.u64(80)).toBe(sg[0].addr);
      expect(w.u64(88)).toBe(6500);
      expect(w.u32(116)).toBe(8); // KLMs take twice MTTs: ALIGN(3, 8) / 2 * 2
      for (let i = 0; i < 3; i++) {
        expect(w.u32(128 + i * 16)).toBe(sg[i].length); // bcount
        expect(w.u32(132 + i * 16)).toBe(dma); // the PD's local DMA lkey
        expect(w.u64(136 + i * 16)).toBe(h.dmaAddress(sg[i].addr)); // va: the DMA address
      }
      expect(w.zero(176, 192)).toBe(true); // padding to 64 bytes
      expect((await cq0.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'REG_MR' });

      const big = await pd0.allocMr('SG_GAPS', 5);
      expect(big.mapSg(sg)).toBe(5);
      qp0.postSend({ wrId: 2, opcode: 'REG_MR', mr: big, key: big.rkey, access: Access.LOCAL_WRITE, signaled: true });
      const p = wqeAt(tb, 0, qp0, 3, 3);
      expect(p.u32(0)).toBe(((3 << 8) | 0x25) >>> 0);
      expect(p.u8(7) & 0x3f).toBe(9);
      expect(p.u8(16)).toBe(0x20);
      expect(p.u16(20)).toBe(8); // 80 bytes -> ALIGN(80, 64) / 16
      expect(p.u8(66)).toBe(0x80 | 0x08 | 0x04 | 2);
      expect(p.u32(116)).toBe(8); // ALIGN(5, 8) / 2 * 2
      expect(p.u32(128)).toBe(128); // byte_count ALIGN(80, 64)
      const list = new Be(tb.hca(0).mem.read(p.u64(136), 128));
      for (let i = 0; i < 5; i++) {
        expect(list.u32(i * 16)).toBe(sg[i].length);
        expect(list.u32(i * 16 + 4)).toBe(dma);
        expect(list.u64(i * 16 + 8)).toBe(h.dmaAddress(sg[i].addr));
      }
      expect(list.zero(80, 128)).toBe(true);
      expect((await cq0.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'REG_MR' });
    });
  });

  it('LOCAL_INV, BIND_MW (type 2 and the type-1 verb, bind and unbind)', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, cq0, qp0 } = await pairOf(tb);
      const h = tb.host(0);
      const a = h.alloc(4 * PAGE, { align: PAGE });
      const mr = await pd0.regMr(a.addr, 4 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.MW_BIND);
      let idx = 0;

      // LOCAL_INV of an MR (unsignaled: only the bytes matter; the user MR becomes FREE)
      const fmr = await pd0.allocMr('MEM_REG', 1);
      qp0.postSend({ wrId: 1, opcode: 'LOCAL_INV', invalidateRkey: fmr.rkey, signaled: true });
      const li = wqeAt(tb, 0, qp0, idx, 2);
      expectCtrl(li, { wqeIndex: idx, opcode: 0x25, qpn: qp0.qpNum, ds: 8, imm: fmr.rkey, fmCeSe: SIGNALED });
      expect(li.u8(16)).toBe(0x80); // INLINE only: no check flag
      expect(li.u16(20)).toBe(0); // xlt_octowords
      expect(li.u64(24)).toBe(mask(M.FREE));
      expect(li.u8(64)).toBe(0x40); // status free
      expect(li.zero(65, 128)).toBe(true); // the rest of the mkey segment is zero
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 1, status: 'SUCCESS', opcode: 'LOCAL_INV' });
      idx += 2;

      // BIND_MW type 2
      const mw2 = await pd0.allocMw(2);
      const old2 = mw2.rkey;
      const k2 = incRkey(old2);
      qp0.postSend({ wrId: 2, opcode: 'BIND_MW', mw: mw2, rkey: k2, bindInfo: { mr, addr: a.addr + PAGE, length: 2 * PAGE, access: Access.REMOTE_WRITE | Access.REMOTE_READ }, signaled: true });
      const b2 = wqeAt(tb, 0, qp0, idx, 3);
      expect(b2.u32(0)).toBe(((idx << 8) | 0x25) >>> 0);
      expect(b2.u32(4)).toBe(((qp0.qpNum << 8) | 12) >>> 0);
      expect(b2.u8(11) & 0x1f).toBe(SIGNALED);
      expect(b2.u32(12)).toBe(old2); // imm: the window's current rkey
      expect(b2.u8(16)).toBe(0x80 | 0x10 | 0x20); // INLINE | TRANSLATION_OFFSET | must be free
      expect(b2.u16(20)).toBe(4); // one KLM, padded to 64 bytes
      expect(b2.u64(24)).toBe(mask(M.FREE, M.KEY, M.QPN, M.LEN, M.START_ADDR, M.LW, M.RR, M.RW, M.A));
      expect(b2.u8(64) & 0x40).toBe(0); // not free
      expect(b2.u8(66) & 0x7c).toBe(0x20 | 0x10); // RW RR (no LW, no A)
      expect(b2.u32(68)).toBe(((qp0.qpNum << 8) | (k2 & 0xff)) >>> 0); // bound to the posting QP, new tag
      expect(b2.u64(80)).toBe(a.addr + PAGE);
      expect(b2.u64(88)).toBe(2 * PAGE);
      expect(b2.u32(128)).toBe(2 * PAGE); // KLM bcount
      expect(b2.u32(132)).toBe(mr.lkey); // KLM key: the MR's lkey
      expect(b2.u64(136)).toBe(a.addr + PAGE); // KLM va
      expect(b2.zero(144, 192)).toBe(true);
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 2, status: 'SUCCESS', opcode: 'BIND_MW' });
      idx += 3;

      // type 1 through the verb: no "must be free", no QPN, qpn 0xffffff
      const mw1 = await pd0.allocMw(1);
      const old1 = mw1.rkey;
      const k1 = qp0.bindMw(mw1, { mr, addr: a.addr, length: PAGE, access: Access.REMOTE_READ }, { wrId: 3, signaled: true });
      const b1 = wqeAt(tb, 0, qp0, idx, 3);
      expect(b1.u32(0)).toBe(((idx << 8) | 0x25) >>> 0);
      expect(b1.u8(7) & 0x3f).toBe(12);
      expect(b1.u32(12)).toBe(old1);
      expect(b1.u8(16)).toBe(0x90);
      expect(b1.u64(24)).toBe(mask(M.FREE, M.KEY, M.LEN, M.START_ADDR, M.LW, M.RR, M.RW, M.A));
      expect(b1.u8(66) & 0x7c).toBe(0x10);
      expect(b1.u32(68)).toBe((0xffffff00 | (k1 & 0xff)) >>> 0);
      expect(b1.u64(80)).toBe(a.addr);
      expect(b1.u64(88)).toBe(PAGE);
      expect([b1.u32(128), b1.u32(132), b1.u64(136)]).toEqual([PAGE, mr.lkey, a.addr]);
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 3, status: 'SUCCESS', opcode: 'BIND_MW' });
      idx += 3;

      // type-1 unbind (length 0): no KLM, FREE set, 8 DS
      const k1b = qp0.bindMw(mw1, { mr, addr: a.addr, length: 0, access: 0 }, { wrId: 4, signaled: true });
      const u1 = wqeAt(tb, 0, qp0, idx, 2);
      expect(u1.u32(0)).toBe(((idx << 8) | 0x25) >>> 0);
      expect(u1.u8(7) & 0x3f).toBe(8);
      expect(u1.u32(12)).toBe(k1);
      expect(u1.u8(16)).toBe(0x90); // INLINE | TRANSLATION_OFFSET; CHECK_QPN only for type 2
      expect(u1.u16(20)).toBe(0);
      expect(u1.u64(24)).toBe(mask(M.FREE, M.KEY));
      expect(u1.u8(64) & 0x40).toBe(0x40); // FREE
      expect(u1.u32(68)).toBe((0xffffff00 | (k1b & 0xff)) >>> 0);
      expect((await cq0.wait(1))[0]).toMatchObject({ wrId: 4, status: 'SUCCESS', opcode: 'BIND_MW' });

      // the CQEs of these four: REQ, WQE opcode UMR, wqe_counter = each WQE's first WQEBB
      const counters = [0, 2, 5, 8];
      counters.forEach((ctr, n) => {
        const c = cqeAt(tb, 0, cq0, n);
        expect(c.u8(63)).toBe(0x00);
        expect(c.u32(56)).toBe(((0x25 << 24) | qp0.qpNum) >>> 0);
        expect(c.u16(60)).toBe(ctr);
      });
    });
  });

  it('a WQE that wraps the send queue ring is written WQEBB by WQEBB from the ring start', async () => {
    const tb = new Testbed({ hcas: 1 });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const cq = await ctx.createCq(16);
      const qp = await pd.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 1 });
      const peer = await pd.createQp({ sendCq: cq, recvCq: cq });
      await qp.connect(peer);
      expect(qp.sq.wqeCnt).toBe(4);
      expect(qp.sq.stride).toBe(64);
      const h = tb.host(0);
      const a = h.alloc(8 * PAGE, { align: PAGE });
      const fmr = await pd.allocMr('MEM_REG', 8);
      fmr.mapSg([{ addr: a.addr, length: 8 * PAGE }]);
      qp.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE, signaled: true }); // WQEBBs 0..2
      expect((await cq.wait(1))[0]).toMatchObject({ status: 'SUCCESS' });
      qp.postSend({ wrId: 2, opcode: 'LOCAL_INV', invalidateRkey: fmr.rkey, signaled: true }); // WQEBBs 3, 4 -> slots 3, 0
      // this one wraps: its control and UMR control are in slot 3, its mkey segment in slot 0
      const wrapped = wqeAt(tb, 0, qp, 3, 2);
      expect(wrapped.u32(0)).toBe(((3 << 8) | 0x25) >>> 0);
      expect(wrapped.u32(12)).toBe(fmr.rkey);
      expect(wrapped.u64(24)).toBe(mask(M.FREE));
      expect(wrapped.u8(64)).toBe(0x40);
      expect(wrapped.zero(65, 128)).toBe(true);
      expect(h.read(qp.sq.addr, 1)[0]).toBe(0x40); // slot 0 starts with the mkey segment's status
      expect((await cq.wait(1))[0]).toMatchObject({ status: 'SUCCESS', opcode: 'LOCAL_INV' });
      fmr.updateKey(incRkey(fmr.rkey) & 0xff);
      qp.postSend({ wrId: 3, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE, signaled: true }); // 5, 6, 7 -> slots 1, 2, 3
      // counter 5 is slot 1, and its MTTs continue into slots 2 and 3
      const rm = wqeAt(tb, 0, qp, 5, 3);
      expect(rm.u32(0)).toBe(((5 << 8) | 0x25) >>> 0);
      for (let i = 0; i < 8; i++) expect(rm.u64(128 + i * 8)).toBe(h.dmaAddress(a.addr + i * PAGE) + 3);
      expect((await cq.wait(1))[0]).toMatchObject({ wrId: 3, status: 'SUCCESS', opcode: 'REG_MR' });
      qp.postSend({ wrId: 4, opcode: 'LOCAL_INV', invalidateRkey: fmr.rkey, signaled: true }); // WQEBBs 8, 9 -> slots 0, 1
      const li = wqeAt(tb, 0, qp, 8, 2);
      expect(li.u32(0)).toBe(((8 << 8) | 0x25) >>> 0);
      expect(li.u32(12)).toBe(fmr.rkey);
      expect(li.u64(24)).toBe(mask(M.FREE));
      expect(li.u8(64)).toBe(0x40);
      expect((await cq.wait(1))[0]).toMatchObject({ wrId: 4, status: 'SUCCESS', opcode: 'LOCAL_INV' });
    });
  });

  it('SEND_WITH_INV: the WQE, the RESP_SEND_INV CQE at the receiver, the REQ CQE at the sender', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0, qp1 } = await pairOf(tb);
      const h0 = tb.host(0);
      const h1 = tb.host(1);
      const area = h0.alloc(PAGE, { align: PAGE });
      const fmr = await pd0.allocMr('MEM_REG', 1);
      fmr.mapSg([{ addr: area.addr, length: PAGE }]);
      qp0.postSend({ wrId: 1, opcode: 'REG_MR', mr: fmr, key: fmr.rkey, access: Access.LOCAL_WRITE | Access.REMOTE_WRITE, signaled: true });
      await cq0.wait(1);
      const rbuf = h0.alloc(PAGE, { align: PAGE });
      const rmr = await pd0.regMr(rbuf.addr, PAGE, Access.LOCAL_WRITE);
      const sbuf = h1.alloc(PAGE, { align: PAGE });
      const smr = await pd1.regMr(sbuf.addr, PAGE, Access.LOCAL_WRITE);
      qp0.postRecv({ wrId: 7, sgList: [{ addr: rbuf.addr, length: 512, lkey: rmr.lkey }] });
      qp1.postSend({ wrId: 9, opcode: 'SEND_WITH_INV', invalidateRkey: fmr.rkey, solicited: true, sgList: [{ addr: sbuf.addr + 16, length: 300, lkey: smr.lkey }], signaled: true });
      const w = wqeAt(tb, 1, qp1, 0, 1);
      expectCtrl(w, { wqeIndex: 0, opcode: 0x01, qpn: qp1.qpNum, ds: 2, imm: fmr.rkey, fmCeSe: SIGNALED | 2 });
      expect(w.u32(16)).toBe(300); // data segment: byte_count (not inline)
      expect(w.u32(20)).toBe(smr.lkey);
      expect(w.u64(24)).toBe(sbuf.addr + 16);
      expect(w.zero(32, 64)).toBe(true);

      const [rv] = await cq0.wait(1);
      expect(rv).toMatchObject({ wrId: 7, status: 'SUCCESS', opcode: 'RECV', byteLen: 300, invalidatedRkey: fmr.rkey });
      const [sd] = await cq1.wait(1);
      expect(sd).toMatchObject({ wrId: 9, status: 'SUCCESS', opcode: 'SEND' });
      // receiver: CQE 1 of cq0 (CQE 0 was the REG_MR)
      const r = cqeAt(tb, 0, cq0, 1);
      expect(r.u8(63) >> 4).toBe(4); // RESP_SEND_INV
      expect(r.u8(63) & 2).toBe(2); // SE: posted solicited
      expect(r.u8(63) & 1).toBe(0); // owner, first pass
      expect(r.u32(36)).toBe(fmr.rkey); // imm_inval_pkey: the invalidated rkey
      expect(r.u32(44)).toBe(300); // byte_cnt
      expect(r.u32(56) & 0xffffff).toBe(qp0.qpNum);
      expect(r.u16(60)).toBe(0); // the first receive WQE
      // sender: REQ, WQE opcode SEND_INVAL
      const s = cqeAt(tb, 1, cq1, 0);
      expect(s.u8(63)).toBe(0x00);
      expect(s.u32(56)).toBe(((0x01 << 24) | qp1.qpNum) >>> 0);
      expect(s.u16(60)).toBe(0);
    });
  });
});

describe('CQE bytes (spec/mlx5.md "CQE")', () => {
  it('solicited: the SE bit of fm_ce_se (bit 1) in the WQE, and of op_own (bit 1) in the receive CQE', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0, qp1 } = await pairOf(tb);
      const rbuf = tb.host(0).alloc(PAGE, { align: PAGE });
      const rmr = await pd0.regMr(rbuf.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const sbuf = tb.host(1).alloc(PAGE, { align: PAGE });
      const smr = await pd1.regMr(sbuf.addr, PAGE, Access.LOCAL_WRITE);
      const sge = [{ addr: sbuf.addr, length: 16, lkey: smr.lkey }];
      // SEND, SEND_WITH_IMM, RDMA_WRITE_WITH_IMM, each solicited and not (RDMA_WRITE_WITH_IMM
      // consumes a receive too: SE is valid for it, man ibv_post_send IBV_SEND_SOLICITED)
      const wrs = [
        { opcode: 'SEND' as const },
        { opcode: 'SEND_WITH_IMM' as const, immData: 0x1234 },
        { opcode: 'RDMA_WRITE_WITH_IMM' as const, immData: 0x5678, remoteAddr: rbuf.addr + 1024, rkey: rmr.rkey },
      ];
      let n = 0;
      for (const w of wrs) {
        for (const solicited of [true, false]) {
          qp0.postRecv({ wrId: 100 + n, sgList: [{ addr: rbuf.addr + 64 * n, length: 64, lkey: rmr.lkey }] });
          qp1.postSend({ wrId: n, ...w, sgList: sge, solicited, signaled: true });
          // WQE n is one WQEBB (ctrl [+ raddr] + one data segment)
          const wqe = wqeAt(tb, 1, qp1, n, 1);
          expect(wqe.u8(11) & 2, `${w.opcode} solicited ${solicited}: WQE SE`).toBe(solicited ? 2 : 0);
          expect(wqe.u8(11)).toBe(SIGNALED | (solicited ? 2 : 0));
          const [rv] = await cq0.wait(1);
          expect(rv).toMatchObject({ wrId: 100 + n, status: 'SUCCESS' });
          expect((await cq1.wait(1))[0]).toMatchObject({ wrId: n, status: 'SUCCESS' });
          const c = cqeAt(tb, 0, cq0, n);
          expect(c.u8(63) >> 4).toBe(w.opcode === 'SEND' ? 2 : w.opcode === 'SEND_WITH_IMM' ? 3 : 1); // RESP_SEND / _IMM / RESP_WR_IMM
          expect(c.u8(63) & 2, `${w.opcode} solicited ${solicited}: CQE SE`).toBe(solicited ? 2 : 0);
          // the sender's REQ CQE never carries SE
          expect(cqeAt(tb, 1, cq1, n).u8(63) & 2).toBe(0);
          n++;
        }
      }
    });
  });

  it('a new CQ buffer is op_own 0xF0; the owner bit flips on the second pass; wqe_counter and byte_cnt', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq1, qp1 } = await (async () => {
        const [ctx0, ctx1] = [await tb.openDevice(0), await tb.openDevice(1)];
        const [pd0, pd1] = [await ctx0.allocPd(), await ctx1.allocPd()];
        const cq0 = await ctx0.createCq(4);
        const cq1 = await ctx1.createCq(4); // 4 entries: the sixth CQE is on the second pass
        const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
        const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
        await qp0.connect(qp1);
        return { pd0, pd1, cq1, qp1 };
      })();
      const ctx = tb.hca(1).cmdif.getCq(cq1.cqn)!;
      expect(ctx.size).toBe(4);
      for (let n = 0; n < 4; n++) expect(cqeAt(tb, 1, cq1, n).u8(63)).toBe(0xf0);
      const h0 = tb.host(0);
      const h1 = tb.host(1);
      const t = h0.alloc(PAGE, { align: PAGE });
      const tmr = await pd0.regMr(t.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
      const s = h1.alloc(PAGE, { align: PAGE });
      const smr = await pd1.regMr(s.addr, PAGE, Access.LOCAL_WRITE);
      // six signaled WQEs of one WQEBB each (2 DS + 1 SGE = 3 DS), three then three
      const post = (i: number): void =>
        i % 2 === 0
          ? qp1.postSend({ wrId: i, opcode: 'RDMA_WRITE', sgList: [{ addr: s.addr, length: 100 + i, lkey: smr.lkey }], remoteAddr: t.addr, rkey: tmr.rkey, signaled: true })
          : qp1.postSend({ wrId: i, opcode: 'RDMA_READ', sgList: [{ addr: s.addr + 1024, length: 200 + i, lkey: smr.lkey }], remoteAddr: t.addr, rkey: tmr.rkey, signaled: true });
      for (let i = 0; i < 3; i++) post(i);
      expect((await cq1.wait(3)).map((w) => w.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS']);
      for (let i = 3; i < 6; i++) post(i);
      expect((await cq1.wait(3)).map((w) => w.wrId)).toEqual([3, 4, 5]);
      for (let n = 0; n < 6; n++) {
        const c = cqeAt(tb, 1, cq1, n);
        const slot = n % 4;
        // slots 0 and 1 hold CQEs 4 and 5 now (owner 1); slots 2 and 3 CQEs 2 and 3 (owner 0)
        const shown = slot < 2 ? slot + 4 : slot;
        if (shown !== n) continue;
        expect(c.u8(63)).toBe(n >= 4 ? 0x01 : 0x00);
        expect(c.u32(56)).toBe((((n % 2 === 0 ? 0x08 : 0x10) << 24) | qp1.qpNum) >>> 0);
        expect(c.u16(60)).toBe(n); // one WQEBB per WQE
        if (n % 2 === 1) expect(c.u32(44)).toBe(200 + n); // byte_cnt of an RDMA READ
      }
    });
  });

  it('error CQEs: REQ_ERR with syndrome 0x13 and the failed WQE; flush 0x05; RESP_ERR 0x12', async () => {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const { pd0, pd1, cq0, cq1, qp0, qp1 } = await pairOf(tb);
      const h0 = tb.host(0);
      const h1 = tb.host(1);
      const t = h0.alloc(PAGE, { align: PAGE });
      const tmr = await pd0.regMr(t.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const s = h1.alloc(PAGE, { align: PAGE });
      const smr = await pd1.regMr(s.addr, PAGE, Access.LOCAL_WRITE);
      qp1.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: s.addr, length: 8, lkey: smr.lkey }], remoteAddr: t.addr, rkey: tmr.rkey, signaled: true });
      qp1.postSend({ wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: s.addr, length: 8, lkey: smr.lkey }], remoteAddr: t.addr, rkey: incRkey(tmr.rkey), signaled: true });
      qp1.postSend({ wrId: 3, opcode: 'RDMA_READ', sgList: [{ addr: s.addr, length: 8, lkey: smr.lkey }], remoteAddr: t.addr, rkey: tmr.rkey });
      const wcs = await cq1.wait(3);
      expect(wcs.map((w) => w.status)).toEqual(['SUCCESS', 'REM_ACCESS_ERR', 'WR_FLUSH_ERR']);
      const e = cqeAt(tb, 1, cq1, 1);
      expect(e.u8(63) >> 4).toBe(13); // REQ_ERR
      expect(e.u8(63) & 1).toBe(0);
      expect(e.u8(55)).toBe(0x13); // syndrome: remote access error
      expect(e.u32(56)).toBe(((0x08 << 24) | qp1.qpNum) >>> 0); // s_wqe_opcode_qpn
      expect(e.u16(60)).toBe(1);
      const f = cqeAt(tb, 1, cq1, 2);
      expect(f.u8(63) >> 4).toBe(13);
      expect(f.u8(55)).toBe(0x05); // WR_FLUSH_ERR
      expect(f.u32(56)).toBe(((0x10 << 24) | qp1.qpNum) >>> 0);
      expect(f.u16(60)).toBe(2);
      expect((await qp0.query()).state).toBe('ERR');

      // RESP_ERR at a receiver: SEND_WITH_INV naming a user MR (fresh QPs)
      const q0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const q1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await q0.connect(q1);
      const rb = h0.alloc(PAGE, { align: PAGE });
      const rmr = await pd0.regMr(rb.addr, PAGE, Access.LOCAL_WRITE);
      const before = tb.hca(0).cqWriter.produced(cq0.cqn);
      q0.postRecv({ wrId: 5, sgList: [{ addr: rb.addr, length: 64, lkey: rmr.lkey }] });
      q1.postSend({ wrId: 6, opcode: 'SEND_WITH_INV', invalidateRkey: rmr.rkey, sgList: [{ addr: s.addr, length: 16, lkey: smr.lkey }], signaled: true });
      const [rv] = await cq0.wait(1);
      expect(rv).toMatchObject({ wrId: 5, status: 'REM_INV_REQ_ERR' });
      const r = cqeAt(tb, 0, cq0, before);
      expect(r.u8(63) >> 4).toBe(14); // RESP_ERR
      expect(r.u8(55)).toBe(0x12); // syndrome: remote invalid request
      expect(r.u32(56) & 0xffffff).toBe(q0.qpNum);
      expect(r.u16(60)).toBe(0);
    });
  });
});
