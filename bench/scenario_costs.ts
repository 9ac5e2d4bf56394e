/**
 * What the firmware path costs each built-in scenario in simulated time (README "The command
 * queue: firmware commands as bytes"): `npx tsx bench/scenario_costs.ts [name ...]` runs each
 * scenario (seed 1, untraced) and prints one JSON line per scenario:
 * - `simMs`: the scenario's simulated time, as `npx mlx5sim run <name>` reports it;
 * - `startupMs`: the ICM start-up, summed over its adapters: from the first command a driver
 *   sends to its command EQ being up (ENABLE_HCA, QUERY_PAGES boot and init with their
 *   MANAGE_PAGES, INIT_HCA, CREATE_EQ), when nothing else runs yet;
 * - `fgCommands`, `queueMs`: the commands the scenario waited for (the ordinary lane, start-up
 *   excluded) and the time the queue itself added to them: each command's wait from its doorbell
 *   to its output read, less the firmware's own latency (spec/timing.md "firmware command"),
 *   which leaves the entry and mailbox DMA, the status write, the completion EQE and interrupt,
 *   and any wait behind another command in the firmware.
 * The hooks only read the clock: the simulated times are those of an unhooked run.
 */
import { scenarios } from '../scenarios/index.ts';
import { CmdQueue } from '../src/driver/core/cmd.ts';
import type { Hca } from '../src/rtl/hca.ts';
import type { Sim } from '../src/sim/index.ts';

interface Hooked {
  hca: Hca;
  sim: Sim;
  up: Promise<void> | null;
}

let startupPs = 0;
let fgCommands = 0;
let queuePs = 0;
let inStartup = 0;

const proto = CmdQueue.prototype as unknown as {
  start(this: Hooked): Promise<void>;
  send(this: Hooked, cmd: { op: string }, lane: string): Promise<unknown>;
};
const start = proto.start;
proto.start = function (this: Hooked): Promise<void> {
  if (this.up !== null) return start.call(this);
  const t0 = this.sim.now;
  inStartup++;
  const p = start.call(this);
  void p.then(
    () => {
      startupPs += this.sim.now - t0;
      inStartup--;
    },
    () => inStartup--,
  );
  return p;
};
const send = proto.send;
proto.send = async function (this: Hooked, cmd: { op: string }, lane: string): Promise<unknown> {
  const t0 = this.sim.now;
  const counted = lane === 'fg' && inStartup === 0;
  try {
    return await send.call(this, cmd, lane);
  } finally {
    if (counted) {
      fgCommands++;
      queuePs += this.sim.now - t0 - this.hca.cmdif.latencyOf(cmd.op);
    }
  }
};

const names = process.argv.slice(2);
for (const s of scenarios) {
  if (names.length > 0 && !names.includes(s.name)) continue;
  startupPs = fgCommands = queuePs = 0;
  const r = await s.run({ seed: 1 });
  const ms = (ps: number): number => Math.round(ps / 1e6) / 1e3;
  console.log(JSON.stringify({ scenario: s.name, ok: r.checks.every((c) => c.ok), simMs: ms(r.simTime), startupMs: ms(startupPs), fgCommands, queueMs: ms(queuePs) }));
}
