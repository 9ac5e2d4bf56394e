/**
 * The driver's command interface (mlx5_core's cmd.c, `mlx5_cmd_exec`): every firmware command
 * the driver sends goes through here, so the verbs part (`src/driver/*.ts`, mlx5_ib's job)
 * never touches the adapter's command engine itself. `exec` is the ordinary path;
 * `execBackground` is the lane the MR cache fills and empties itself through (mlx5's
 * `mlx5_cmd_exec_cb`, callbacks that do not wait behind the caller's commands).
 */
import type { Hca } from '../../rtl/hca.ts';
import type { CmdName, CmdOf, CmdOutputs } from '../../rtl/firmware/cmd_types.ts';

export class CmdQueue {
  /** @internal The context's adapter makes one. */
  constructor(private readonly hca: Hca) {}

  /** Runs one command and resolves with its output (rejects with CmdError on a bad status). */
  exec<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    return this.hca.cmdif.exec(cmd);
  }

  /** As `exec`, in the background lane (never ahead of or in the way of `exec`'s commands). */
  execBackground<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    return this.hca.cmdif.execBackground(cmd);
  }
}
