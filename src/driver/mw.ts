/** A memory window (ibv_mw) of type 1 or 2. */
import type { Pd } from './pd.ts';
import { VerbsError } from './verbs_error.ts';

export class Mw {
  rkey: number;
  destroyed = false;

  constructor(
    readonly pd: Pd,
    key: number,
    readonly type: 1 | 2,
  ) {
    this.rkey = key >>> 0;
  }

  get index(): number {
    return this.rkey >>> 8;
  }

  checkAlive(what: string): void {
    if (this.destroyed) throw new VerbsError('EINVAL', `${what}: the window was deallocated`);
  }

  /** ibv_dealloc_mw */
  async dealloc(): Promise<void> {
    this.checkAlive('dealloc');
    this.pd.ctx.tb.checkInRun('dealloc');
    await this.removeHw();
  }

  /** @internal DESTROY_MKEY; also the device's removal (Context.disassociate). True: gone. */
  async removeHw(): Promise<boolean> {
    if (this.destroyed) return true;
    this.destroyed = true;
    this.pd.untrack(this);
    const ctx = this.pd.ctx;
    await ctx.cmd(ctx.cmdq.exec({ op: 'DESTROY_MKEY', index: this.index }), 'dealloc');
    return true;
  }
}
