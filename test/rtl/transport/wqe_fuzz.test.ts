/**
 * Malformed WQEs never crash the simulator: random bytes, every field at its extremes, ds too
 * big or too small, written into a send queue and doorbelled. Each WQE completes (or the QP is in
 * ERR and flushes), the run never throws, and nothing is left in flight (no hang).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { Access, Testbed } from '../../../src/index.ts';
import { rcPair } from '../../support/rc_pair.ts';
import { buildAtomicWqe, buildRdmaWqe, buildSendWqe, wqeBasicBlocks } from '../../../src/driver/wqe_builder.ts';
import { WqeOpcode } from '../../../src/rtl/formats/constants.ts';

/** A valid data WQE over the test's real keys, then mutated: bytes flipped, or a field at an extreme. */
interface Valid {
  kind: 'write' | 'read' | 'send' | 'cas' | 'fadd';
  len: number;
  sges: number;
  mutations: { at: number; value: number }[];
}
const valid: fc.Arbitrary<Valid> = fc.record({
  kind: fc.constantFrom('write' as const, 'read' as const, 'send' as const, 'cas' as const, 'fadd' as const),
  len: fc.oneof(fc.integer({ min: 0, max: 64 }), fc.constantFrom(8, 4096, 8192)),
  sges: fc.integer({ min: 1, max: 3 }),
  mutations: fc.array(
    fc.oneof(
      fc.record({ at: fc.integer({ min: 0, max: 255 }), value: fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0, 0xff, 0x80, 0x7f)) }),
      // ds (byte 7) too small or too big: an atomic without its data segment, a segment past the end
      fc.record({ at: fc.constant(7), value: fc.integer({ min: 0, max: 8 }) }),
      // a data segment's byte count or address high byte at an extreme (2 GiB+, >= 2^53)
      fc.record({ at: fc.constantFrom(32, 36, 40, 48, 52, 56), value: fc.constantFrom(0x80, 0xff, 0x7f) }),
    ),
    { maxLength: 4 },
  ),
});

const RUNS = Number(process.env.FUZZ_RUNS ?? 300);

/** A WQE's bytes: up to 4 WQEBBs of random bytes, with a plausible control segment now and then. */
const wqe = fc
  .record({
    bbs: fc.integer({ min: 1, max: 4 }),
    bytes: fc.uint8Array({ minLength: 256, maxLength: 256 }),
    opcode: fc.constantFrom(0x00, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x10, 0x11, 0x12, 0x25, 0x01, 0x7f, 0xff),
    ds: fc.oneof(fc.integer({ min: 0, max: 63 }), fc.constant(1), fc.constant(3), fc.constant(4)),
    keepCtrl: fc.boolean(),
  })
  .map(({ bbs, bytes, opcode, ds, keepCtrl }) => {
    const b = bytes.slice(0, bbs * 64);
    if (keepCtrl) {
      b[3] = opcode;
      b[7] = ds;
    }
    return b;
  });

describe('WQE fuzzer: the send queue engine and the requester', () => {
  it(`${RUNS} random WQEs complete or flush; the run never throws and nothing hangs`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(wqe.map((b) => ({ raw: b })), valid.map((v) => ({ valid: v }))), { minLength: 1, maxLength: 4 }), async (items) => {
        const tb = new Testbed({ hcas: 2 });
        await tb.run(async () => {
          const { pd0, pd1, qp0, qp1 } = await rcPair(tb);
          const a = tb.host(0).alloc(8192);
          const b = tb.host(1).alloc(8192);
          const mr0 = await pd0.regMr(a.addr, 8192, Access.LOCAL_WRITE);
          const mr1 = await pd1.regMr(b.addr, 8192, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC);
          // receives for SENDs (an RNR NAK retries forever with rnr_retry 7: not a hang of the model)
          for (let k = 0; k < 8; k++) qp1.postRecv({ wrId: k, sgList: [{ addr: b.addr + 4096, length: 4096, lkey: mr1.lkey }] });
          const list = items.map((it, i) => {
            if ('raw' in it) return it.raw;
            const v = it.valid;
            const buf = new Uint8Array(256);
            const view = new DataView(buf.buffer);
            const sgList = Array.from({ length: v.kind === 'cas' || v.kind === 'fadd' ? 1 : v.sges }, (_, k) => ({ addr: a.addr + k * 64, length: v.kind === 'cas' || v.kind === 'fadd' ? 8 : v.len, lkey: mr0.lkey }));
            const common = { wqeIndex: i, qpn: qp0.qpNum, signaled: true };
            let ds: number;
            if (v.kind === 'write' || v.kind === 'read') ds = buildRdmaWqe(view, 0, { ...common, opcode: v.kind === 'write' ? WqeOpcode.RDMA_WRITE : WqeOpcode.RDMA_READ, sgList, remoteAddr: b.addr, rkey: mr1.rkey });
            else if (v.kind === 'send') ds = buildSendWqe(view, 0, { ...common, opcode: WqeOpcode.SEND, sgList });
            else ds = buildAtomicWqe(view, 0, v.kind === 'cas' ? { ...common, opcode: WqeOpcode.ATOMIC_CS, sgList, remoteAddr: b.addr, rkey: mr1.rkey, compare: 0, swap: 1 } : { ...common, opcode: WqeOpcode.ATOMIC_FA, sgList, remoteAddr: b.addr, rkey: mr1.rkey, add: 1 });
            const n = wqeBasicBlocks(ds);
            for (const m of v.mutations) if (m.at < n * 64) buf[m.at] = m.value;
            return buf.slice(0, n * 64);
          });
          // raw WQEs in qp0's ring, then the doorbell (the driver is bypassed on purpose)
          let pi = 0;
          for (const w of list) {
            for (let k = 0; k < w.length / 64; k++) {
              const slot = (pi + k) & (qp0.sq.wqeCnt - 1);
              tb.host(0).write(qp0.sq.addr + slot * 64, w.subarray(k * 64, k * 64 + 64));
            }
            pi += w.length / 64;
          }
          tb.hca(0).uar.ringSq(qp0.qpNum, pi);
          await tb.quiesce({ timeout: 10e12 });
        });
        expect(tb.busyModules()).toEqual([]);
      }),
      {
        numRuns: RUNS,
        // found by the fuzzer: a READ whose data segment has the inline bit (byte_count bit 31)
        examples: [[[{ valid: { kind: 'read', len: 8, sges: 1, mutations: [{ at: 32, value: 0x80 }] } }]]],
      },
    );
  }, 120_000);
});
