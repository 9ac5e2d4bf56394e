/**
 * The EQEs the EQ writer puts in host memory, byte by byte at their offsets (spec/mlx5.md "EQ and
 * EQE", "Page-fault EQE data", "Other event data"), written by real events; the owner bit of
 * each pass; an overrun counted as a fatal EQ error; one interrupt per arm.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../../src/index.ts';
import { rcPair } from '../../support/rc_pair.ts';
import { EventType, PageFaultFlag } from '../../../src/rtl/formats/constants.ts';
import type { Hca } from '../../../src/rtl/hca.ts';

/** Every EQE the hardware wrote to the context's EQ (owner bit of the first pass), as raw bytes. */
function eqes(hca: Hca, eqn: number): Uint8Array[] {
  const eq = hca.cmdif.getEq(eqn)!;
  const out: Uint8Array[] = [];
  for (let i = 0; i < hca.eqWriter.produced(eqn) && i < eq.size; i++) out.push(hca.mem.read(eq.bufAddr + i * 64, 64));
  return out;
}
const u32 = (b: Uint8Array, o: number): number => new DataView(b.buffer, b.byteOffset).getUint32(o);
const u16 = (b: Uint8Array, o: number): number => new DataView(b.buffer, b.byteOffset).getUint16(o);

describe('EQEs in host memory, field by field', () => {
  it('PAGE_FAULT subtype WQE (requester), subtype RDMA (responder), COMP and WQ_ACCESS_ERROR', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    const qpns: number[] = [];
    let eqn0 = -1;
    let eqn1 = -1;
    let rkey = 0;
    let va = 0;
    await tb.run(async () => {
      const p = await rcPair(tb);
      qpns.push(p.qp0.qpNum, p.qp1.qpNum);
      eqn0 = (await p.c0.eventQueue()).eqn;
      eqn1 = (await p.c1.eventQueue()).eqn;
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const omr0 = await p.pd0.regMr(a.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const omr1 = await p.pd1.regMr(b.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE | Access.REMOTE_READ);
      rkey = omr1.rkey;
      va = b.addr + 100;
      // requester fault on the READ's destination (the HCA writes it: REQUESTOR | WRITE), and the
      // responder's fault on the READ's source (RDMA, read)
      p.qp0.postSend({ wrId: 1, opcode: 'RDMA_READ', sgList: [{ addr: a.addr, length: 300, lkey: omr0.lkey }], remoteAddr: va, rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('SUCCESS');
      // a WRITE without REMOTE_WRITE: WQ_ACCESS_ERROR at the responder
      p.qp0.postSend({ wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: omr0.lkey }], remoteAddr: va, rkey, signaled: true });
      expect((await p.cq0.wait(1))[0].status).toBe('REM_ACCESS_ERR');
      await tb.quiesce();
    });
    const hca0 = tb.hca(0);
    const hca1 = tb.hca(1);
    const [pf0] = eqes(hca0, eqn0);
    expect(pf0[1]).toBe(EventType.PAGE_FAULT); // type @1
    expect(pf0[3]).toBe(0); // sub_type @3: WQE
    expect(u32(pf0, 32 + 0)).toBe(0); // bytes_committed
    expect(u16(pf0, 32 + 6)).toBe(0); // wqe_index: the first WQE of the QP
    expect(u16(pf0, 32 + 10)).toBe(300); // packet_length
    expect(u32(pf0, 32 + 24)).toBe((((PageFaultFlag.REQUESTOR | PageFaultFlag.WRITE) << 24) | qpns[0]) >>> 0); // flags_qpn
    expect(pf0[63]).toBe(0); // owner of the first pass
    const [pf1, acc] = eqes(hca1, eqn1);
    expect([pf1[1], pf1[3]]).toEqual([EventType.PAGE_FAULT, 1]); // RDMA subtype
    expect(u32(pf1, 32 + 4)).toBe(rkey); // r_key
    expect(u32(pf1, 32 + 12)).toBe(300); // rdma_op_len
    expect(u32(pf1, 32 + 16) * 2 ** 32 + u32(pf1, 32 + 20)).toBe(va); // rdma_va u64
    expect(u32(pf1, 32 + 24)).toBe(((PageFaultFlag.RDMA << 24) | qpns[1]) >>> 0);
    expect(acc[1]).toBe(EventType.WQ_ACCESS_ERROR);
    expect(acc[32 + 20]).toBe(0); // type: QP
    expect(u32(acc, 32 + 24) & 0xffffff).toBe(qpns[1]); // qp_srq_n
  });

  it('COMP: the cqn at data+24', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    let eqn = -1;
    let cqn = -1;
    await tb.run(async () => {
      const p = await rcPair(tb);
      const ch = p.c0.createCompChannel();
      const cq = await p.c0.createCq(8, { channel: ch });
      cqn = cq.cqn;
      eqn = (await p.c0.eventQueue()).eqn;
      const qa = await p.pd0.createQp({ sendCq: cq, recvCq: cq });
      const qb = await p.pd1.createQp({ sendCq: p.cq1, recvCq: p.cq1 });
      await qa.connect(qb);
      cq.reqNotify();
      const a = tb.host(0).alloc(4096);
      const mr = await p.pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mrb = await p.pd1.regMr(tb.host(1).alloc(4096).addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      qa.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr.lkey }], remoteAddr: mrb.iova, rkey: mrb.rkey, signaled: true });
      await ch.getCqEvent({ timeout: 1e9 });
    });
    const [comp] = eqes(tb.hca(0), eqn);
    expect([comp[1], comp[3]]).toEqual([EventType.COMP, 0]);
    expect(u32(comp, 32 + 24)).toBe(cqn);
  });
});

describe('the EQ ring: owner bit per pass, overrun, one interrupt per arm', () => {
  it('a 2-entry EQ: owner 0 then 1 on the next pass; a third EQE before the consumer moves is an overrun', async () => {
    const tb = new Testbed({ hcas: 1, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const hca = tb.hca(0);
      const buf = tb.host(0).alloc(4096);
      for (let i = 0; i < 2; i++) tb.host(0).write(buf.addr + i * 64 + 63, Uint8Array.of(1));
      tb.host(0).pin(buf.addr, 4096); // given to the device, as the driver pins its EQs
      const { eqn } = await hca.cmdif.exec({ op: 'CREATE_EQ', size: 2, bufAddr: tb.host(0).dmaAddress(buf.addr), eventMask: 1 << EventType.CQ_ERROR });
      let irqs = 0;
      hca.msix.requestIrq(eqn, () => irqs++);
      const post = (cqn: number): void => {
        const data = new Uint8Array(28);
        new DataView(data.buffer).setUint32(0, cqn);
        data[11] = 1; // overrun syndrome
        hca.eqWriter.post({ eqn: -1, type: EventType.CQ_ERROR, subType: 0, data });
      };
      hca.uar.ringEq(0x40, (0 | (eqn << 24)) >>> 0); // arm, ci 0
      await tb.delay(1_000_000);
      post(5);
      post(6);
      await tb.quiesce();
      expect(irqs).toBe(1); // armed once: one interrupt for the two EQEs
      const e0 = tb.host(0).read(buf.addr, 64);
      expect([e0[1], u32(e0, 32) & 0xffffff, e0[32 + 11], e0[63]]).toEqual([EventType.CQ_ERROR, 5, 1, 0]);
      post(7); // the ring is full (ci 0): overrun, a fatal EQ error
      await tb.quiesce();
      expect(hca.eqWriter.overran(eqn)).toBe(true);
      expect(tb.stats()['tb.hca0.eq_writer'].overruns).toBe(1);
      expect(hca.eqWriter.produced(eqn)).toBe(2);
    });
    // a second run: consume, then the next pass writes owner 1
    const tb2 = new Testbed({ hcas: 1, config: { mrCacheLimit: 0 } });
    await tb2.run(async () => {
      const hca = tb2.hca(0);
      const buf = tb2.host(0).alloc(4096);
      tb2.host(0).faultIn(buf.addr, 4096);
      tb2.host(0).pin(buf.addr, 4096);
      const { eqn } = await hca.cmdif.exec({ op: 'CREATE_EQ', size: 2, bufAddr: tb2.host(0).dmaAddress(buf.addr), eventMask: 1 << EventType.CQ_ERROR });
      const post = (): void => hca.eqWriter.post({ eqn: -1, type: EventType.CQ_ERROR, subType: 0, data: null });
      post();
      post();
      await tb2.quiesce();
      hca.uar.ringEq(0x48, (2 | (eqn << 24)) >>> 0); // update: ci 2, no arm
      await tb2.delay(1_000_000);
      post();
      await tb2.quiesce();
      expect(tb2.host(0).read(buf.addr, 64)[63]).toBe(1); // second pass
      expect(hca.eqWriter.overran(eqn)).toBe(false);
    });
  });
});
