/**
 * Issue 12, the command fuzzer (test/support/cmd_fuzz.ts): random firmware commands (every
 * modelled opcode, unknown ones, and no command at all) with random fields posted to the
 * command interface. Every command resolves or fails with a CmdError carrying a command status
 * and the rule it broke, never another exception, and the adapter works afterwards.
 * `CMD_FUZZ_RUNS=3000 npx vitest run test/rtl/firmware/cmd_fuzz.test.ts` runs it longer.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { command, runCmdCase } from '../../support/cmd_fuzz.ts';

const RUNS = Number(process.env.CMD_FUZZ_RUNS ?? 200);

describe('command fuzzer: random mailboxes get a command status, never a crash', () => {
  it(`${RUNS} sequences of up to 12 commands: each resolves or fails with a CmdError; the adapter works afterwards`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(command, { minLength: 1, maxLength: 12 }), async (cmds) => {
        expect(await runCmdCase(cmds)).toEqual([]);
      }),
      {
        numRuns: RUNS,
        // lists that are not lists, and list entries that are not entries (pd 1 exists)
        examples: [
          [[{ op: 'CREATE_MKEY', fields: { tag: 0, accessMode: 1, access: 0, pd: 1, start: 0, length: 0, mtt: 'x' } }]],
          [[{ op: 'CREATE_MKEY', fields: { tag: 0, accessMode: 1, access: 0, pd: 1, start: 0, length: 0, mtt: {} } }]],
          [[{ op: 'CREATE_MKEY', fields: { tag: 0, accessMode: 2, access: 0, pd: 1, start: 0, length: 0, klm: [null] } }]],
          [[{ op: 'CREATE_MKEY', fields: { tag: 0, accessMode: 2, access: 0, pd: 1, start: 0, length: 0, klm: 'x' } }]],
          [[{ op: 'CREATE_MKEY', fields: { tag: 0, accessMode: 1, access: 0, pd: 1, start: 0, length: 0, free: 'yes', kind: 'x', fbo: -1 } }]],
          [[{ op: 'QUERY_HCA_CAP', fields: { opMod: 'x' } }, { op: 'INIT2RTR_QP', fields: { qpn: 0x100, mtu: '4096' } }]],
        ],
      },
    );
  }, 120_000);
});
