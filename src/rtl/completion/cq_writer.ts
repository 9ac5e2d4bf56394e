/**
 * The CQ writer (`tb.hcaN.cq_writer`): turns completions into 64-byte CQEs written by posted
 * PCIe writes into the CQ buffer in host memory, with the owner bit of the CQ's current pass
 * (spec/mlx5.md "CQE": software owns CQE n when (op_own & 1) == ((n & ncqe) != 0)). One CQE per
 * cycle. Software learns of a CQE from host memory only (the owner bit; a polling CPU sees the
 * write land: memory/host_mem.ts MemWatch).
 */
import { EnumType, Fifo, Module, type Reg, type WireOptions } from '../../sim/index.ts';
import { dmaWrite, type DmaPort, type DmaReq } from '../memory/pcie.ts';
import { encodeCqe, type Cqe } from '../formats/cqe.ts';
import { CqeOpcode, CqeSyndrome, EventType, SYNDROME_TO_WC_STATUS } from '../formats/constants.ts';
import type { EqeJob } from './eq_writer.ts';
import { EQE_DATA_SIZE } from '../formats/eqe.ts';
import { ReuseRing } from '../../sim/reuse_ring.ts';
import { queueAddr, type QueuePages } from '../memory/pas.ts';

/** A completion to write. */
export interface CqeJob {
  cqn: number;
  /** CqeOpcode. */
  opcode: number;
  qpn: number;
  /** The WQE's opcode (requester) or 0. */
  wqeOpcode: number;
  wqeCounter: number;
  byteCnt: number;
  immInvalPkey: number;
  /** CqeSyndrome for REQ_ERR / RESP_ERR, else 0. */
  syndrome: number;
  /** Solicited event: op_own bit 1 (a receive completion of a message sent solicited). */
  se: boolean;
}

export const CqeOpcodeEnum = new EnumType('cqe_opcode', {
  [CqeOpcode.REQ]: 'REQ',
  [CqeOpcode.RESP_WR_IMM]: 'RESP_WR_IMM',
  [CqeOpcode.RESP_SEND]: 'RESP_SEND',
  [CqeOpcode.RESP_SEND_IMM]: 'RESP_SEND_IMM',
  [CqeOpcode.RESP_SEND_INV]: 'RESP_SEND_INV',
  [CqeOpcode.REQ_ERR]: 'REQ_ERR',
  [CqeOpcode.RESP_ERR]: 'RESP_ERR',
  [CqeOpcode.INVALID]: 'INVALID',
});

/**
 * Completion syndromes by the work completion status they become (mlx5_handle_error_cqe's
 * table, SYNDROME_TO_WC_STATUS), 0 as OK: the send queue, the requester and the CQ writer
 * trace the syndrome a work request ends with.
 */
export const CqeSyndromeEnum = new EnumType('cqe_syndrome', { 0: 'OK', ...SYNDROME_TO_WC_STATUS, [CqeSyndrome.GENERAL_ERR]: 'GENERAL_ERR' });

/** What the writer needs of a CQ: where its buffer is, how many CQEs it holds (a power of two), its EQ. */
export interface CqPlace {
  readonly bufAddr: number;
  readonly size: number;
  readonly eqn: number;
  /** The doorbell record (set_ci at +0, the arm word at +4), or 0: none. */
  readonly dbrAddr: number;
  /** The ring's pages (CREATE_CQ's pas), or contiguous at bufAddr. */
  readonly pages: QueuePages;
}

/** What the writer reads of host memory: the consumer index in a CQ's doorbell record. */
export interface DbrReader {
  readU32BE(pa: number): number;
}

/**
 * The CQ doorbell (ibv_req_notify_cq; spec/mlx5.md "CQ arm"): the 64-bit UAR write at offset
 * 0x20, `(sn << 28 | cmd | ci) << 32 | cqn`, cmd = 1 << 24 for solicited-only.
 */
export interface CqArmDoorbell {
  cqn: number;
  /** arm_sn & 3. */
  sn: number;
  solicitedOnly: boolean;
  /** The consumer index, 24 bits. */
  ci: number;
}

/** Decodes the 64-bit UAR CQ doorbell (high and low 32-bit words) into its fields. */
export function decodeCqArmDoorbell(hi: number, lo: number): CqArmDoorbell {
  return { cqn: lo & 0xffffff, sn: (hi >>> 28) & 3, solicitedOnly: ((hi >>> 24) & 0xf) === 1, ci: hi & 0xffffff };
}

/** Encodes the arm word (doorbell record dbrec[1], and the high word of the UAR doorbell). */
export function cqArmWord(sn: number, solicitedOnly: boolean, ci: number): number {
  return (((sn & 3) << 28) | (solicitedOnly ? 1 << 24 : 0) | (ci & 0xffffff)) >>> 0;
}

/**
 * What the writer keeps of one CQ, in one record (each CQE reads most of it: one lookup, where a
 * Map per field was four lookups into four tables per CQE).
 */
interface CqState {
  /** Producer counter: CQEs written. */
  pi: number;
  /** The consumer counter last read from the doorbell record (set_ci). */
  ciSeen: number;
  /** Overran: the CQ takes no more CQEs (a fatal CQ error). */
  overrun: boolean;
  /** Armed for one completion event (solicited-only: for a solicited or error CQE). */
  armed: boolean;
  solicitedOnly: boolean;
}

/** The CQ table (the firmware's, filled by CREATE_CQ): the CQ of a number, or undefined. */
export interface CqTable {
  getCq(cqn: number): CqPlace | undefined;
}

/** Wiring of the CQ writer: posted writes over its DMA port, CQs looked up in the CQ table. */
export type CqWriterOptions = WireOptions<
  { readonly dma: DmaPort; readonly eq: Fifo<EqeJob> },
  { readonly cqs: CqTable; readonly mem: DbrReader; readonly onOverrun?: (cqn: number) => void }
>;

/** Sees every CQE written (the transaction log); null when untraced. */
export interface CqTap {
  written(j: CqeJob): void;
}

export class CqWriter extends Module {
  /** The transaction log's tap; null (one compare per CQE) when untraced. */
  tap: CqTap | null = null;
  readonly req: Fifo<CqeJob>;
  /** CQ arm doorbells (UAR 0x20), by MMIO. */
  readonly armDoorbell: Fifo<CqArmDoorbell>;
  private readonly port: DmaPort;
  private readonly eq: Fifo<EqeJob>;
  /** Each CQ's counters, arming and overrun, by cqn (made at its first CQE or arm). */
  private readonly cqState = new Map<number, CqState>();
  private readonly rArmed: Reg;
  private readonly sEvents;
  private readonly sOverruns;
  private readonly mem: DbrReader;
  private readonly onOverrun: ((cqn: number) => void) | null;
  /** CQE writes (request, bytes), reused: PCIe copies the data of a write it does not own when it pops it (pcie.ts acceptWrite). */
  private readonly cqeWrites: ReuseRing<{ req: DmaReq; view: DataView }>;
  /** The fields each CQE is encoded from. */
  private readonly cqe: Cqe = { immInvalPkey: 0, byteCnt: 0, vendorErrSynd: 0, syndrome: 0, wqeOpcode: 0, qpn: 0, wqeCounter: 0, signature: 0, opcode: 0, format: 0, se: false, owner: 0 };
  private readonly rValid: Reg;
  private readonly rCqn: Reg;
  private readonly rOpcode: Reg;
  private readonly rSyndrome: Reg;
  private readonly rSe: Reg;
  private readonly sCqes;
  private readonly sErrors;

  private readonly cqs: CqTable;

  constructor(parent: Module, name: string, opts: CqWriterOptions) {
    super(parent.sim, parent, name);
    this.cqs = opts.deps.cqs;
    this.rValid = this.probe('cqe_valid', 1);
    this.rCqn = this.probe('cqn', 24);
    this.rOpcode = this.probe('opcode', CqeOpcodeEnum.width, { enum: CqeOpcodeEnum });
    this.rSyndrome = this.probe('syndrome', 8, { enum: CqeSyndromeEnum });
    this.rSe = this.probe('se', 1);
    this.req = new Fifo<CqeJob>(this, 'req', { capacity: 8 });
    this.req.consumer = this;
    this.armDoorbell = new Fifo<CqArmDoorbell>(this, 'arm_doorbell', { capacity: 16 });
    this.armDoorbell.consumer = this;
    this.rArmed = this.probe('armed_cqn', 24);
    this.eq = opts.ports.eq;
    this.eq.producer = this;
    this.sEvents = this.stats.counter('comp_events');
    this.sOverruns = this.stats.counter('overruns');
    this.mem = opts.deps.mem;
    this.onOverrun = opts.deps.onOverrun ?? null;
    this.port = opts.ports.dma;
    this.port.req.producer = this;
    this.cqeWrites = new ReuseRing(this.port.req, () => {
      const data = new Uint8Array(64);
      return { req: dmaWrite(0, data, 0, undefined, undefined), view: new DataView(data.buffer) };
    });
    this.sCqes = this.stats.counter('cqes');
    this.sErrors = this.stats.counter('error_cqes');
    this.clockedBy(opts.clock);
  }

  /** DESTROY_CQ executed: forget the CQ's producer counter (its number may be handed out again). */
  forgetCq(cqn: number): void {
    this.cqState.delete(cqn);
  }

  /** CQEs written to `cqn` so far. */
  produced(cqn: number): number {
    return this.cqState.get(cqn)?.pi ?? 0;
  }

  override tick(): void {
    while (this.armDoorbell.canPop() && this.eq.canPush()) this.onArm(this.armDoorbell.pop());
    if (!this.req.canPop() || !this.port.req.canPush() || !this.eq.canPush()) {
      this.rValid.set(0);
      if (!this.req.canPop() && !this.armDoorbell.canPop()) this.sleep();
      return;
    }
    const j = this.req.pop();
    const cq = this.cqs.getCq(j.cqn);
    if (!cq) throw new Error(`${this.path}: completion for CQ ${j.cqn}, which does not exist`);
    const s = this.stateOf(j.cqn);
    const n = s.pi;
    // overrun: the ring is full up to the consumer index the driver last wrote to the doorbell
    // record (set_ci; read here at once where hardware keeps a copy): a fatal CQ error, CQ_ERROR
    // (syndrome 1) and the CQ's QPs to ERR; the CQE is not written (mlx5 PRM "CQ overrun")
    if (s.overrun || (cq.dbrAddr !== 0 && n - s.ciSeen >= cq.size && n - this.consumed(s, cq, n) >= cq.size)) {
      if (!s.overrun) {
        s.overrun = true;
        this.sOverruns.inc();
        const data = new Uint8Array(EQE_DATA_SIZE);
        const v = new DataView(data.buffer);
        v.setUint32(0, j.cqn & 0xffffff); // CQ_ERROR: cqn @0, syndrome @11 (1 overrun): spec/mlx5.md
        data[11] = 1;
        this.eq.push({ eqn: -1, type: EventType.CQ_ERROR, subType: 0, data });
        this.onOverrun?.(j.cqn);
      }
      this.rValid.set(0);
      return;
    }
    s.pi = n + 1;
    const w = this.cqeWrites.next();
    const f = this.cqe;
    f.immInvalPkey = j.immInvalPkey >>> 0;
    f.byteCnt = j.byteCnt >>> 0;
    f.syndrome = j.syndrome;
    f.wqeOpcode = j.wqeOpcode;
    f.qpn = j.qpn;
    f.wqeCounter = j.wqeCounter & 0xffff;
    f.opcode = j.opcode;
    f.se = j.se;
    // the owner bit of pass n / size: software compares it with (n & size) != 0
    f.owner = (n & cq.size) !== 0 ? 1 : 0;
    encodeCqe(w.view, 0, f); // every byte (reserved ones zeroed)
    // a CQE never crosses a page (64 B at a 64 B offset): addressed through the page list
    w.req.addr = queueAddr(cq.pages, (n & (cq.size - 1)) * 64);
    w.req.tag = j.cqn;
    this.port.req.push(w.req);
    // an armed CQ raises one completion event (solicited-only: for a solicited or error CQE)
    if (s.armed && (!s.solicitedOnly || j.se || j.syndrome !== 0)) this.event(j.cqn, cq.eqn, s);
    // the waves' view, only when traced: untraced, each probe is one more object touched per CQE
    if (this.traced) {
      this.rValid.set(1);
      this.rCqn.set(j.cqn);
      this.rOpcode.set(j.opcode);
      this.rSyndrome.set(j.syndrome);
      this.rSe.set(j.se ? 1 : 0);
    }
    this.sCqes.inc();
    if (j.syndrome !== 0) this.sErrors.inc();
    if (this.tap !== null) this.tap.written(j);
  }

  /**
   * The full consumer counter of `cq` from the 24 bits of set_ci, given the producer counter `n`
   * (read only when the last one seen leaves no room: the counter only grows).
   */
  private consumed(s: CqState, cq: CqPlace, n: number): number {
    const ci24 = this.mem.readU32BE(cq.dbrAddr) & 0xffffff;
    const ci = n - ((n - ci24) & 0xffffff);
    s.ciSeen = ci;
    return ci;
  }

  /** The writer's record of CQ `cqn`, made at its first use. */
  private stateOf(cqn: number): CqState {
    let s = this.cqState.get(cqn);
    if (s === undefined) {
      s = { pi: 0, ciSeen: 0, overrun: false, armed: false, solicitedOnly: false };
      this.cqState.set(cqn, s);
    }
    return s;
  }

  /** Applies an arm doorbell (the caller made sure the EQ FIFO takes the event it may raise). */
  private onArm(d: CqArmDoorbell): void {
    const cq = this.cqs.getCq(d.cqn);
    if (cq === undefined) return; // an arm for a CQ that does not exist is ignored
    const a = this.stateOf(d.cqn);
    a.armed = true;
    a.solicitedOnly = d.solicitedOnly;
    this.rArmed.set(d.cqn);
    // CQEs already written past the consumer index: the event is due now (no lost wake-up)
    const n = a.pi;
    const ci = n - ((n - d.ci) & 0xffffff);
    if (n > ci && !d.solicitedOnly) this.event(d.cqn, cq.eqn, a);
  }

  private event(cqn: number, eqn: number, a: CqState): void {
    a.armed = false;
    const data = new Uint8Array(EQE_DATA_SIZE);
    new DataView(data.buffer).setUint32(24, cqn & 0xffffff); // COMP: cqn at data+24 (spec/mlx5.md)
    this.eq.push({ eqn, type: EventType.COMP, subType: 0, data });
    this.sEvents.inc();
  }
}
