/**
 * The driver's event queue (mlx5_eq): a ring of 64-byte EQEs in host memory that the adapter's
 * EQ writer fills, its MSI-X interrupt, and the interrupt handler (spec/semantics.md "Events").
 *
 * The handler runs `interruptPs` after the interrupt (config "interrupt to handler"), consumes
 * every EQE software owns (owner bit, spec/mlx5.md "EQ and EQE") in order, hands each to the
 * context's dispatcher, then writes the consumer index to the EQ doorbell at UAR 0x40, which
 * updates and re-arms the EQ. The handler itself takes no simulated time (hard-IRQ context);
 * work that does (the ODP fault handler) runs as a process of its own, as mlx5's workqueue.
 */
import type { Hca } from '../../rtl/hca.ts';
import type { Sim } from '../../sim/index.ts';
import type { CmdName, CmdOf, CmdOutputs } from '../../rtl/firmware/cmd_types.ts';
import { decodeEqe, eqeOwnedBySw, EQE_OWNER_INIT, type Eqe } from '../../rtl/formats/eqe.ts';
import { EQE_SIZE, EventType } from '../../rtl/formats/constants.ts';
import { UAR_EQ_ARM } from '../../rtl/hca.ts';
import { driverAlloc } from './dma_pool.ts';

/**
 * The event mask of the context's one EQ: completions, the QP and CQ events, page faults (mlx5
 * spreads these over an async EQ, a page-fault EQ and per-vector completion EQs; one EQ here,
 * which changes nothing a verbs user sees but the interrupt count).
 */
export const ALL_EVENTS_MASK = [
  EventType.COMP, EventType.PATH_MIG, EventType.COMM_EST, EventType.SQ_DRAINED, EventType.CQ_ERROR,
  EventType.WQ_CATAS_ERROR, EventType.INTERNAL_ERROR, EventType.PORT_CHANGE, EventType.PAGE_FAULT,
  EventType.WQ_INVAL_REQ_ERROR, EventType.WQ_ACCESS_ERROR,
].reduce<number>((m, t) => (m | (1 << t)) >>> 0, 0);

/** What an EQ needs of its driver: the adapter, the clock, and a way to send commands (a context, or the command queue's own start-up). */
export interface EqDevice {
  readonly hca: Hca;
  readonly tb: { readonly sim: Sim };
  readonly cmdq: { exec<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]> };
  cmd<T>(p: Promise<T>, what: string): Promise<T>;
}

export class DriverEq {
  /** Consumer counter (not wrapped). */
  private ci = 0;
  private handlerDue = false;
  private readonly logSize: number;
  private readonly eqe = new Uint8Array(EQE_SIZE);
  private readonly view = new DataView(this.eqe.buffer);

  private constructor(
    private readonly ctx: EqDevice,
    readonly eqn: number,
    readonly size: number,
    private readonly bufVa: number,
    private readonly dispatch: (e: Eqe) => void,
  ) {
    this.logSize = Math.log2(size);
  }

  /**
   * CREATE_EQ over a new ring (every owner byte 1: nothing is software's yet), request_irq on its
   * vector, and the first arm.
   */
  static async create(ctx: EqDevice, size: number, eventMask: number, dispatch: (e: Eqe) => void): Promise<DriverEq> {
    const host = ctx.hca.host;
    const buf = driverAlloc(host, 'create EQ', Math.max(4096, size * EQE_SIZE), { hugePages: size * EQE_SIZE > 4096 });
    for (let i = 0; i < size; i++) host.write(buf.addr + i * EQE_SIZE + 63, OWNER_INIT);
    const bufAddr = host.dmaAddress(buf.addr);
    host.pin(buf.addr, buf.length); // the device's ring for the EQ's life (never freed here)
    const { eqn } = await ctx.cmd(ctx.cmdq.exec({ op: 'CREATE_EQ', size, bufAddr, eventMask }), 'create EQ');
    const eq = new DriverEq(ctx, eqn, size, buf.addr, dispatch);
    ctx.hca.msix.requestIrq(eqn, () => eq.onInterrupt());
    eq.arm();
    return eq;
  }

  /**
   * DESTROY_EQ (eq.c:719-732 cleanup_async_eq, eq.c:1227-1237 mlx5_eq_table_destroy): the device
   * forgets the EQ; its handler stays registered (an interrupt of a destroyed EQ finds nothing
   * software owns) and its ring stays pinned, as the ring was never freed here.
   */
  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    await this.ctx.cmd(this.ctx.cmdq.exec({ op: 'DESTROY_EQ', eqn: this.eqn }), 'destroy EQ');
  }

  private destroyed = false;

  /** Writes the consumer index to the EQ doorbell, arming the EQ for its next EQE. */
  private arm(): void {
    this.ctx.hca.uar.ringEq(UAR_EQ_ARM, ((this.ci & 0xffffff) | (this.eqn << 24)) >>> 0);
  }

  /** The handler's event (one object for every interrupt). */
  private readonly handler = { fire: (): void => this.handle() };

  private onInterrupt(): void {
    if (this.handlerDue) return;
    this.handlerDue = true;
    this.ctx.tb.sim.after(this.ctx.hca.cfg.interruptPs, this.handler);
  }

  /** The interrupt handler: consume what software owns, in order, then update and re-arm. */
  private handle(): void {
    this.handlerDue = false;
    const host = this.ctx.hca.host;
    for (;;) {
      const at = this.bufVa + (this.ci & (this.size - 1)) * EQE_SIZE;
      host.readInto(at, this.eqe, 0, EQE_SIZE);
      if (!eqeOwnedBySw(this.eqe[63], this.ci, this.logSize)) break;
      // the owner byte of the ring starts at 1, and hardware's first pass writes 0
      const e = decodeEqe(this.view, 0);
      this.ci++;
      this.dispatch(e);
    }
    this.arm();
  }
}

const OWNER_INIT = new Uint8Array([EQE_OWNER_INIT]);
