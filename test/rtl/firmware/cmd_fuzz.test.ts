/**
 * The command fuzzer on raw bytes (test/support/cmd_fuzz.ts): random firmware commands (every
 * modelled opcode, reserved ones, garbage) posted in the command queue with broken lengths,
 * chains, block numbers, tokens, signatures, types, reserved bytes, pointers, ownership and
 * doubled doorbells. Every entry comes back with the delivery status mlx5 defines for its fault
 * (or OK and a command status), never a crash, and the adapter works afterwards.
 * `CMD_FUZZ_RUNS=3000 npx vitest run test/rtl/firmware/cmd_fuzz.test.ts` runs it longer.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FAULTS, post, runCmdCase, type FuzzPost } from '../../support/cmd_fuzz.ts';

const RUNS = Number(process.env.CMD_FUZZ_RUNS ?? 60);
const mkey = { op: 'CREATE_MKEY', fields: { tag: 0, accessMode: 1, access: 0, pd: 1, start: 0, length: 4096 * 80, mtt: Array.from({ length: 80 }, (_, i) => 0x100000 + i * 4096) } };

describe('command fuzzer: raw queue entries get a delivery or command status, never a crash', () => {
  it('every fault, on a command long enough for a mailbox chain, ends with its delivery status', async () => {
    const posts: FuzzPost[] = FAULTS.map((fault, n) => ({ cmd: mkey, fault, n: n * 3 + 1 }));
    expect(await runCmdCase(posts)).toEqual([]);
  }, 120_000);

  it('an xlt capacity at the entry limit, one past it and 2^32-1: raw CREATE_MKEYs answered without gigabytes of ICM', async () => {
    const at = (xltCapacity: number): FuzzPost => ({ cmd: { op: 'CREATE_MKEY', fields: { tag: 1, accessMode: 1, access: 1, pd: 1, start: 0x1000, length: 4096, xltCapacity } }, fault: 'none', n: 0 });
    expect(await runCmdCase([at(2 ** 24), at(2 ** 24 + 1), at(2 ** 32 - 1)])).toEqual([]);
  }, 120_000);

  it('a raw CQ on the command EQ (eqn 0): the close passes over the refused DESTROY_EQ, TEARDOWN_HCA drops both', async () => {
    expect(await runCmdCase([{ cmd: { op: 'CREATE_CQ', fields: { size: 8, eqn: 0, pas: [0x10000] } }, fault: 'none', n: 0 }])).toEqual([]);
  }, 60_000);

  it(`${RUNS} sequences of up to 8 postings: each entry comes back with a known status; the adapter works afterwards`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(post, { minLength: 1, maxLength: 8 }), async (posts) => {
        expect(await runCmdCase(posts)).toEqual([]);
      }),
      { numRuns: RUNS },
    );
  }, 240_000);
});
