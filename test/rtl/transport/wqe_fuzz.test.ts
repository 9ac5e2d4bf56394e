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

const RUNS = Number(process.env.FUZZ_RUNS ?? 2000);

const clean = { crash: null, hang: null, strayWrites: 0, completion: '', model: '' };

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
