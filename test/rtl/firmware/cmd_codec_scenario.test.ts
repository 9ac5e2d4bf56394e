/**
 * The codec against what the driver really sends: built-in scenarios run with every firmware
 * command passed through bytes on its way in and out (Cmdif.exec and execBackground wrapped in
 * this test only). The firmware executes the command decoded from the bytes, not the driver's
 * object, and the driver gets the output decoded from the bytes; the scenario's own checks must
 * still pass, so a field lost or changed on the way shows as a scenario failure.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { scenarios } from '../../../scenarios/index.ts';
import { Cmdif } from '../../../src/rtl/firmware/cmdif.ts';
import { CmdError, type Cmd, type CmdName, type CmdOf, type CmdOutputs } from '../../../src/rtl/firmware/cmd_types.ts';
import { cmdOutputLength, decodeCmdInput, decodeCmdOutput, encodeCmdError, encodeCmdInput, encodeCmdOutput } from '../../../src/rtl/firmware/cmd_codec.ts';

type Exec = <K extends CmdName>(this: Cmdif, cmd: CmdOf<K>) => Promise<CmdOutputs[K]>;
const original = { exec: Cmdif.prototype.exec as Exec, execBackground: Cmdif.prototype.execBackground as Exec };

/** Ops seen, and every mismatch between a command and its bytes. */
const seen = new Map<string, number>();
const problems: string[] = [];

function throughBytes(run: Exec): Exec {
  return async function <K extends CmdName>(this: Cmdif, cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    const bytes = encodeCmdInput(cmd as Cmd);
    const d = decodeCmdInput(bytes);
    if (!d.ok) {
      problems.push(`${cmd.op}: its own bytes decode to ${d.error.message}`);
      return run.call(this, cmd as never) as Promise<CmdOutputs[K]>;
    }
    seen.set(cmd.op, (seen.get(cmd.op) ?? 0) + 1);
    let out: CmdOutputs[K];
    try {
      out = (await run.call(this, d.cmd as never)) as CmdOutputs[K];
    } catch (e) {
      if (!(e instanceof CmdError)) throw e;
      // the output bytes of a failure: status and syndrome reach the driver
      try {
        decodeCmdOutput(cmd, encodeCmdError(e));
        problems.push(`${cmd.op}: a failed output decoded as a success`);
      } catch (x) {
        if (!(x instanceof CmdError) || x.status !== e.status || x.syndrome !== e.syndrome) problems.push(`${cmd.op}: status/syndrome lost`);
      }
      throw e;
    }
    const ob = encodeCmdOutput(cmd.op, out);
    if (ob.length > cmdOutputLength(cmd as Cmd)) problems.push(`${cmd.op}: ${ob.length} output bytes, room for ${cmdOutputLength(cmd as Cmd)}`);
    return decodeCmdOutput(cmd, ob);
  };
}

afterEach(() => {
  Cmdif.prototype.exec = original.exec as typeof Cmdif.prototype.exec;
  Cmdif.prototype.execBackground = original.execBackground as typeof Cmdif.prototype.execBackground;
});

describe('scenarios with every firmware command through the codec', () => {
  it('their checks still pass, and every command survives its bytes', async () => {
    Cmdif.prototype.exec = throughBytes(original.exec) as typeof Cmdif.prototype.exec;
    Cmdif.prototype.execBackground = throughBytes(original.execBackground) as typeof Cmdif.prototype.execBackground;
    for (const name of ['translation', 'frwr', 'mw-type2', 'odp-fault', 'odp-implicit', 'cq-events']) {
      const s = scenarios.find((x) => x.name === name)!;
      const r = await s.run({ seed: 1 });
      expect(r.checks.filter((c) => !c.ok).map((c) => `${name}: ${c.what} ${c.detail ?? ''}`)).toEqual([]);
    }
    expect(problems).toEqual([]);
    // the commands a scenario's setup and data path use all went through
    for (const op of ['QUERY_HCA_CAP', 'ALLOC_PD', 'CREATE_EQ', 'CREATE_CQ', 'CREATE_QP', 'RST2INIT_QP', 'INIT2RTR_QP', 'RTR2RTS_QP', 'CREATE_MKEY', 'PAGE_FAULT_RESUME']) {
      expect(seen.get(op) ?? 0, op).toBeGreaterThan(0);
    }
  });
});
