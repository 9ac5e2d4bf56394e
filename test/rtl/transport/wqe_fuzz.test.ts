/**
 * Malformed WQEs never crash the simulator (issue 12): valid WQEs (data and UMR) and mutations
 * of them (random bytes, fields at their extremes, ds too big or too small, unknown opcodes, UMR
 * lists too long, segments pointing anywhere), written into a user-space or a kernel QP's send
 * queue and doorbelled. Each case: nothing throws or hangs, every WQE completes (success, or the error
 * and then flushes, the QP in ERR), no byte of process memory outside the registered writable
 * ranges and the rings changes, and for valid WQEs the reference model agrees on statuses and
 * bytes (test/support/wqe_fuzz.ts). `npm run bench -- fuzz` runs 100,000 cases.
 * `FUZZ_RUNS=20000 npx vitest run test/rtl/transport/wqe_fuzz.test.ts` runs it longer.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { fuzzCase, openSession, runFuzzCase, strayWrites, type FuzzCase } from '../../support/wqe_fuzz.ts';
import { Access, Testbed } from '../../../src/index.ts';
import { rcPair } from '../../support/rc_pair.ts';

// 500 cases in npm test (~60 s on 2 cores; each case is a fresh two-adapter testbed with ICM
// start-up): `npm run bench -- fuzz` runs 100,000, FUZZ_RUNS more here
const RUNS = Number(process.env.FUZZ_RUNS ?? 500);

const clean = { crash: null, hang: null, strayWrites: 0, dmaViolations: 0, dmaViolation: '', completion: '', model: '' };

describe('WQE fuzzer: the send queue engine, the UMR engine and the requester', () => {
  it(`${RUNS} cases: no crash, no hang, every WQE completes, no stray write, the model agrees`, async () => {
    let modelChecked = 0;
    await fc.assert(
      fc.asyncProperty(fuzzCase, async (items) => {
        const o = await runFuzzCase(items);
        if (o.modelChecked) modelChecked++;
        const { modelChecked: _m, ...rest } = o;
        expect(rest).toEqual(clean);
      }),
      {
        numRuns: RUNS,
        examples: [
          // found by the fuzzer: a READ whose data segment has the inline bit (byte_count bit 31)
          [{ kernel: false, items: [{ valid: { kind: 'read', len: 8, sges: 1, operand: 0n, mutations: [{ at: 32, value: 0x80 }] } }] }],
          // an atomic add of 2^64 - 1 (-1): a legal operand, not a malformed WQE
          [{ kernel: false, items: [{ valid: { kind: 'fadd', len: 8, sges: 1, operand: 2n ** 64n - 1n, mutations: [] } }] }],
          // a WRITE after a kernel LOCAL_INV of a window has no fence (wr.c): it may go before the
          // invalidation and land; the sequential model does not judge such a race
          [{ kernel: true, items: [{ valid: { kind: 'bind', len: 8, sges: 1, operand: 0n, mutations: [] } }, { valid: { kind: 'inv', len: 0, sges: 1, operand: 0n, mutations: [] } }, { valid: { kind: 'write', len: 1, sges: 1, operand: 0n, mutations: [] } }] }],
          // ds 63 on a WQE of one WQEBB posted alone: it ends at the producer index
          [{ kernel: false, items: [{ valid: { kind: 'write', len: 8, sges: 1, operand: 0n, mutations: [{ at: 7, value: 63 }] } }] }],
        ] as [FuzzCase][],
      },
    );
    // the model spoke for a good share of the cases
    if (RUNS >= 100) expect(modelChecked).toBeGreaterThan(RUNS / 20);
  }, 240_000);
});

describe("the fuzzer's stray-write check", () => {
  it('counts a device write into process memory outside the writable buffers and rings, and nothing else', async () => {
    const s = openSession();
    const o = await runFuzzCase({ kernel: false, items: [{ valid: { kind: 'write', len: 8, sges: 1, operand: 0n, mutations: [] } }] }, s);
    expect(o.strayWrites).toBe(0);
    const tb = s.tb;
    const qp = [...s.ctx![0].qps.values()][0];
    s.writes[0].length = 0;
    s.writes[1].length = 0;
    // as if the device wrote: into the send queue ring (process memory, not writable by it)
    s.armed = true;
    tb.hca(0).mem.write(tb.host(0).dmaAddress(qp.sq.addr + 128), new Uint8Array(8));
    // and into ICM-like memory outside the process: not counted
    tb.hca(0).mem.write(tb.host(0).mem.size - 4096, new Uint8Array(8));
    s.armed = false;
    expect(strayWrites(s)).toBe(1);
  });
});

describe('a WQE the application rewrites in its ring after posting it', () => {
  // The device reads a WQE by its ds when it fetches it: what the bytes say then is the WQE.
  // Grown to 3 WQEBBs before the fetch, it takes in the two WQEs posted after it, as the
  // hardware does (the consumer index moves by the WQE's own ds; libmlx5 moves the send queue's
  // tail from the CQE's wqe_counter): one error completion, no flush for the swallowed ones (the
  // device saw no WQE after it), the QP in ERR, and no write of theirs lands.
  it('ds grown to 12 before the fetch swallows the next two WQEs: one error CQE, none for them, nothing written', async () => {
    // no MR cache pre-fill: the quiesce below would wait for its 12,240 CREATE_MKEYs
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      tb.host(0).fill(a.addr, 4096, 0xab);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const w = (id: number) => ({ wrId: id, opcode: 'RDMA_WRITE' as const, sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr + id * 64, rkey: mr1.rkey, signaled: true });
      qp0.postSend(w(1)); // one WQEBB; the doorbell rings at once
      const ctrl = tb.host(0).read(qp0.sq.addr, 16);
      ctrl[7] = 12; // ds 12: three WQEBBs
      tb.host(0).write(qp0.sq.addr, ctrl);
      qp0.postSend([w(2), w(3)]); // in the same instant: before the device fetches WQE 0
      const [wc] = await cq0.wait(1);
      expect(wc.wrId).toBe(1);
      expect(wc.status).not.toBe('SUCCESS');
      await tb.quiesce();
      expect(cq0.poll(16)).toEqual([]); // 2 and 3 were bytes of WQE 0: no completion, not even a flush
      expect((await qp0.query()).state).toBe('ERR');
      expect(Array.from(tb.host(1).read(b.addr, 256))).toEqual(new Array<number>(256).fill(0));
    });
  });
});
