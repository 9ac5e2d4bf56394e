/**
 * The EQ writer (`tb.hcaN.eq_writer`): turns events into 64-byte EQEs written by posted PCIe
 * writes into the EQ's ring in host memory (spec/mlx5.md "EQ and EQE"), and raises the EQ's
 * interrupt (its MSI-X vector) once per arm.
 *
 * - Ownership: every EQE starts with owner 1 (the driver fills the ring so); the writer writes
 *   owner = (producer index >> log2(size)) & 1, so software owns entry ci when the owner bit
 *   equals (ci >> log2(size)) & 1.
 * - The EQ doorbell (UAR offset 0x40 "update and arm", 0x48 "update") carries the consumer
 *   index: `(ci & 0xffffff) | eqn << 24`. An armed EQ raises its interrupt after the next EQE
 *   lands (the MSI-X message is a posted write that follows the EQE's), then is disarmed; an
 *   arm while EQEs are already waiting past ci raises it at once (no lost wake-up).
 * - Overrun: an EQE for a ring with no free entry (producer - consumer = size) is a fatal error
 *   of that EQ: counted, shown in the waves, the EQ stops (nothing more is written to it), and
 *   the device reports the error to the driver (its health syndrome, `onFatal`), so the loss of
 *   what follows is never silent.
 * - Routing: a COMP event goes to the EQ its CQ names; every other event to the lowest-numbered
 *   EQ whose event mask has the type's bit (CREATE_EQ's bitmask; mlx5 maps async events and
 *   page faults that way).
 */
import { EnumType, Fifo, Module, enumType, type Reg, type Signal, type WireOptions } from '../../sim/index.ts';
import type { EventTarget } from '../../sim/event_queue.ts';
import { dmaWrite, type DmaPort } from '../memory/pcie.ts';
import { EQE_DATA_SIZE, EQE_SIZE, encodeEqe } from '../formats/eqe.ts';
import { EventType, PageFaultSubtype } from '../formats/constants.ts';

/** An event to write: its type, subtype and the 28 data bytes (spec/mlx5.md layouts). */
export interface EqeJob {
  /** The EQ, or -1: route by the event mask (every type but COMP). */
  eqn: number;
  /** EventType. */
  type: number;
  subType: number;
  /** 28 bytes, or null for all zero. */
  data: Uint8Array | null;
}

/** What the writer needs of an EQ: where its ring is, its size and its event mask. */
export interface EqPlace {
  readonly eqn: number;
  readonly bufAddr: number;
  readonly size: number;
  readonly eventMask: number;
}

/** The EQ table (the firmware's, filled by CREATE_EQ). */
export interface EqTable {
  getEq(eqn: number): EqPlace | undefined;
  /** Every EQ, for routing by event mask (in increasing eqn order). */
  eqList(): readonly EqPlace[];
}

/** The EQ doorbell as the UAR write carries it: the consumer index, and whether it arms. */
export interface EqDoorbell {
  eqn: number;
  ci: number;
  arm: boolean;
}

/** Event types by name, for the waves. */
export const EventTypeEnum = new EnumType(
  'eqe_type',
  Object.fromEntries(Object.entries(EventType).map(([k, v]) => [v, k])) as Record<number, string>,
);

/**
 * Event subtypes: only page faults have any here (PageFaultSubtype: the WQE or RDMA layout), so
 * 0 is also every other event's.
 */
export const EventSubTypeEnum = new EnumType('eqe_sub_type', { [PageFaultSubtype.WQE]: 'NONE_or_PF_WQE', [PageFaultSubtype.RDMA]: 'PF_RDMA' });

/** What the writer did this edge: wrote an EQE, dropped one on an overrun EQ, or nothing. */
export const [EqWriterState, EQW] = enumType('eq_writer_state', ['IDLE', 'WRITE', 'OVERRUN', 'UNROUTED']);

/** Wiring of the EQ writer: posted writes over its DMA port; EQs from the EQ table. */
export type EqWriterOptions = WireOptions<{ readonly dma: DmaPort }, { readonly eqs: EqTable }>;

interface EqState {
  pi: number;
  ci: number;
  armed: boolean;
  /** A fatal overrun stopped the EQ. */
  overrun: boolean;
}

export class EqWriter extends Module implements EventTarget {
  /** Events to write (from the CQ writer, the page-fault unit and the QP error path). */
  readonly req: Fifo<EqeJob>;
  /** EQ doorbells (UAR 0x40 / 0x48), by MMIO. */
  readonly doorbell: Fifo<EqDoorbell>;
  private readonly port: DmaPort;
  private readonly eqs: EqTable;
  private readonly eqState = new Map<number, EqState>();
  /** The driver's interrupt handlers, by EQ (request_irq on the EQ's MSI-X vector). */
  private readonly handlers = new Map<number, () => void>();
  private readonly fsm: Signal;
  private readonly rValid: Reg;
  private readonly rEqn: Reg;
  private readonly rType: Reg;
  private readonly rSubType: Reg;
  private readonly rIrq: Reg;
  private readonly rIrqEqn: Reg;
  private readonly rOverrun: Reg;
  private readonly sEqes;
  private readonly sInterrupts;
  private readonly sCmdInterrupts;
  private readonly sOverruns;
  private readonly sUnrouted;
  private irqPulse = false;
  private readonly posted: EqeJob[] = [];
  /** The driver's catastrophic-error handlers (Msix.onFatal). */
  private readonly fatalHandlers: ((what: string) => void)[] = [];

  constructor(parent: Module, name: string, opts: EqWriterOptions) {
    super(parent.sim, parent, name);
    this.eqs = opts.deps.eqs;
    this.fsm = this.signal('state', EqWriterState.width, { enum: EqWriterState });
    this.rValid = this.probe('eqe_valid', 1);
    this.rEqn = this.probe('eqn', 8);
    this.rType = this.probe('type', EventTypeEnum.width, { enum: EventTypeEnum });
    this.rSubType = this.probe('sub_type', 8, { enum: EventSubTypeEnum });
    this.rIrq = this.probe('msix_irq', 1);
    this.rIrqEqn = this.probe('msix_vector', 8);
    this.rOverrun = this.reg('overrun', 1);
    this.req = new Fifo<EqeJob>(this, 'req', { capacity: 8 });
    this.req.consumer = this;
    this.doorbell = new Fifo<EqDoorbell>(this, 'doorbell', { capacity: 16 });
    this.doorbell.consumer = this;
    this.port = opts.ports.dma;
    this.port.req.producer = this;
    this.sEqes = this.stats.counter('eqes');
    this.sInterrupts = this.stats.counter('interrupts');
    // of them, the command EQ's (command completions and page requests): the firmware's own chatter,
    // which a user counting the data path's events leaves out
    this.sCmdInterrupts = this.stats.counter('cmd_interrupts');
    this.sOverruns = this.stats.counter('overruns');
    this.sUnrouted = this.stats.counter('unrouted');
    this.clockedBy(opts.clock);
  }

  /**
   * An event from a unit without a FIFO of its own into the writer (the QP table's error
   * events, the page-fault unit): queued in arrival order, written before the FIFO's.
   */
  post(job: EqeJob): void {
    this.posted.push(job);
    this.wake();
  }

  /** Registers the driver's handler for the EQ's interrupt (its MSI-X vector). */
  requestIrq(eqn: number, handler: () => void): void {
    this.handlers.set(eqn, handler);
  }

  /** Registers a handler told when an EQ overruns (the device's health report). */
  onFatal(handler: (what: string) => void): void {
    this.fatalHandlers.push(handler);
  }

  /** EQEs written to `eqn` so far (its producer index). */
  produced(eqn: number): number {
    return this.eqState.get(eqn)?.pi ?? 0;
  }

  /** True once the EQ overran (a fatal EQ error). */
  overran(eqn: number): boolean {
    return this.eqState.get(eqn)?.overrun ?? false;
  }

  override hasWork(): boolean {
    return this.posted.length > 0 || this.req.canPop() || this.doorbell.canPop();
  }

  override tick(): void {
    if (this.irqPulse) {
      this.irqPulse = false;
      this.rIrq.set(0);
    }
    while (this.doorbell.canPop()) this.onDoorbell(this.doorbell.pop());
    const any = this.posted.length > 0 || this.req.canPop();
    if (!any || !this.port.req.canPush()) {
      this.rValid.set(0);
      this.fsm.setNow(EQW.IDLE);
      if (!any && !this.doorbell.canPop()) this.sleep();
      return;
    }
    const j = this.posted.length > 0 ? this.posted.shift()! : this.req.pop();
    const eq = j.eqn >= 0 ? this.eqs.getEq(j.eqn) : this.route(j.type);
    // the waves' view, only when traced: untraced, each probe is one more object touched per EQE
    if (this.traced) {
      this.rValid.set(1);
      this.rType.set(j.type);
      this.rSubType.set(j.subType);
    }
    if (eq === undefined) {
      this.sUnrouted.inc(); // no EQ takes this event type: the hardware has nowhere to write it
      this.fsm.setNow(EQW.UNROUTED);
      return;
    }
    if (this.traced) this.rEqn.set(eq.eqn);
    const s = this.stateOf(eq.eqn);
    if (s.overrun || s.pi - s.ci >= eq.size) {
      if (!s.overrun) {
        const what = `EQ ${eq.eqn} (${eq.size} entries) overran: its ${eq.size} EQEs were not consumed when a ${EventTypeEnum.nameOf(j.type)} event came; it takes no more events`;
        for (const h of this.fatalHandlers) h(what);
      }
      s.overrun = true;
      this.sOverruns.inc();
      this.rOverrun.set(1);
      this.fsm.setNow(EQW.OVERRUN);
      return;
    }
    this.fsm.setNow(EQW.WRITE);
    const n = s.pi++;
    // an EQE's bytes stay PCIe's until the write lands (owned): a pool of them, given back as they land
    const bytes = this.freeBufs.pop() ?? new Uint8Array(EQE_SIZE);
    this.inFlightBufs.push(bytes);
    encodeEqe(this.viewOf(bytes), 0, {
      type: j.type,
      subType: j.subType,
      data: j.data ?? ZERO_DATA,
      signature: 0,
      owner: Math.floor(n / eq.size) & 1,
    });
    this.port.req.push(dmaWrite(eq.bufAddr + (n & (eq.size - 1)) * EQE_SIZE, bytes, eq.eqn, this, true)); // bytes: EQE_SIZE of them
    this.sEqes.inc();
  }

  /** @internal An EQE write landed in host memory (tag = eqn): an armed EQ interrupts. */
  fire(eqn: number): void {
    // writes land in the order they were pushed (one latency for all): this is the oldest
    const landed = this.inFlightBufs.shift();
    if (landed !== undefined) this.freeBufs.push(landed);
    const s = this.eqState.get(eqn);
    if (s !== undefined && s.armed) this.interrupt(eqn, s);
  }

  private interrupt(eqn: number, s: EqState): void {
    s.armed = false;
    this.sInterrupts.inc();
    const eqs = this.eqs.eqList();
    for (let i = 0; i < eqs.length; i++) {
      if (eqs[i].eqn === eqn && ((eqs[i].eventMask >>> EventType.CMD) & 1) !== 0) {
        this.sCmdInterrupts.inc();
        break;
      }
    }
    this.rIrq.setNow(1);
    this.rIrqEqn.setNow(eqn);
    this.irqPulse = true;
    this.wake();
    this.handlers.get(eqn)?.();
  }

  private onDoorbell(d: EqDoorbell): void {
    const eq = this.eqs.getEq(d.eqn);
    if (eq === undefined) return; // a doorbell for an EQ that does not exist is ignored
    const s = this.stateOf(d.eqn);
    // the doorbell carries 24 bits of the consumer counter: extend it to the full counter
    const ci = s.pi - ((s.pi - d.ci) & 0xffffff);
    if (ci > s.ci) s.ci = ci;
    if (d.arm) {
      s.armed = true;
      // EQEs already past the consumer index: interrupt now, or the driver would wait forever
      if (s.pi > s.ci) this.interrupt(d.eqn, s);
    }
  }

  /** EQE buffers free for the next write, and those PCIe holds until they land (oldest first). */
  private readonly freeBufs: Uint8Array[] = [];
  private readonly inFlightBufs: Uint8Array[] = [];
  private readonly views = new WeakMap<Uint8Array, DataView>();

  /** The DataView of a pooled EQE buffer (made once per buffer). */
  private viewOf(b: Uint8Array): DataView {
    let v = this.views.get(b);
    if (v === undefined) {
      v = new DataView(b.buffer, b.byteOffset, b.byteLength);
      this.views.set(b, v);
    }
    return v;
  }

  private route(type: number): EqPlace | undefined {
    for (const eq of this.eqs.eqList()) if (((eq.eventMask >>> type) & 1) !== 0) return eq;
    return undefined;
  }

  private stateOf(eqn: number): EqState {
    let s = this.eqState.get(eqn);
    if (s === undefined) {
      s = { pi: 0, ci: 0, armed: false, overrun: false };
      this.eqState.set(eqn, s);
    }
    return s;
  }

  /** DESTROY_EQ executed (or the EQ number is reused): forget its counters. */
  forgetEq(eqn: number): void {
    this.eqState.delete(eqn);
    this.handlers.delete(eqn);
  }
}

const ZERO_DATA = new Uint8Array(EQE_DATA_SIZE);
