/**
 * The PCIe link between the HCA and host memory (`tb.hcaN.pcie`): DMA reads and posted writes
 * from the HCA's clients, and doorbell (MMIO) writes from the driver.
 */
import { Module, type Nothing, type WireOptions } from '../../sim/module.ts';
import { Fifo } from '../../sim/fifo.ts';
import { ReuseRing } from '../../sim/reuse_ring.ts';
import { enumType } from '../../sim/enum_type.ts';
import type { Reg } from '../../sim/signal.ts';
import type { EventTarget } from '../../sim/event_queue.ts';
import type { Counter, Histogram } from '../../sim/stats.ts';
import type { HcaConfig } from '../config.ts';
import type { DeviceMemory } from './icm.ts';
import type { DmaChecker } from './dma_check.ts';

/** A DMA request from an HCA client. Addresses are physical. */
export interface DmaReq {
  kind: 'read' | 'write';
  /** Physical address in host memory. */
  addr: number;
  /** Bytes, 1..2^32-1. */
  length: number;
  /** The client's tag (a u32), returned in the read's response. */
  tag: number;
  /** Write payload of `length` bytes; copied when the request is accepted. */
  data?: Uint8Array;
  /** Writes: told (`fire(tag)`) when the data has landed in host memory. */
  landed?: EventTarget;
  /** Writes: the caller will not change `data` again, so it is not copied (a hot-path saving). */
  owned?: boolean;
  /** Reads: the data goes into `dst` at `dstOff` (no allocation) and the response carries `dst`. */
  dst?: Uint8Array;
  dstOff?: number;
  /** The QP and WQE index the DMA works for, when the engine knows them (the DMA checker names them). */
  qpn?: number;
  wqe?: number;
}

/*
 * Every request object has all of DmaReq's fields, in one order (the DMA mover's): the link reads
 * them from a dozen clients, and objects of one shape keep those reads monomorphic (a literal per
 * client with its own fields made each read a megamorphic lookup, ~3% of a registration's CPU).
 */

/** A read request (into `dst` from `dstOff` when given), every field present. */
export function dmaRead(addr: number, length: number, tag: number, dst?: Uint8Array, dstOff?: number): DmaReq {
  return { kind: 'read', addr, length, tag, data: undefined, landed: undefined, owned: undefined, dst, dstOff, qpn: -1, wqe: -1 };
}

/** A posted write of `data` (`owned`: not copied; `landed` told when it lands), every field present. */
export function dmaWrite(addr: number, data: Uint8Array, tag: number, landed: EventTarget | undefined, owned: boolean | undefined): DmaReq {
  return { kind: 'write', addr, length: data.length, tag, data, landed, owned, dst: undefined, dstOff: undefined, qpn: -1, wqe: -1 };
}

/** The completion of a DMA read (posted writes have none). */
export interface DmaResp {
  tag: number;
  /** The bytes read (null is reserved for write acknowledgements, which this link never sends). */
  data: Uint8Array | null;
}

/**
 * A client's connection to the PCIe block: the client pushes `req` (and may set itself as
 * `req.producer` to be woken when space frees), and pops `resp` (setting itself as
 * `resp.consumer` to be woken by completions). The block is `resp.producer` only while it holds
 * completions back, so a pop wakes it just when it has something to deliver.
 */
export interface DmaPort {
  readonly name: string;
  readonly req: Fifo<DmaReq>;
  readonly resp: Fifo<DmaResp>;
}

/** FIFO sizes of a DMA port. */
export interface DmaPortOptions {
  /** Requests the client may queue (default 4). */
  reqCapacity?: number;
  /** Completions waiting for the client (default 4); a full one holds completions back. */
  respCapacity?: number;
  /** The client reads or writes the device's translation tables in ICM (default false). */
  tables?: boolean;
  /**
   * The client reads a completion's fields when it pops it and keeps nothing of the object (it
   * may keep its data): the port's completions are then reused round robin, one more than its
   * resp FIFO holds, so the one reused was popped already (a hot-path saving; default false).
   */
  reuseResponses?: boolean;
}

/** The configuration fields the PCIe block uses. */
export type PcieConfig = Pick<
  HcaConfig,
  'pcieReadBasePs' | 'pcieReadBytesPerPs' | 'pcieMaxOutstandingReads' | 'pcieWritePs' | 'doorbellPs'
>;

/** What the PCIe block did on an edge: accepted a read, a write, nothing, or waits for a read tag. */
export const [PcieState, PCIE] = enumType('pcie_state', ['IDLE', 'READ', 'WRITE', 'TAG_STALL']);

/** How hca.ts wires the block: on the core clock, over the device's memory (host memory and ICM), with the link's timing. */
export interface PcieOptions extends WireOptions<Nothing, { readonly mem: DeviceMemory }> {
  readonly cfg: PcieConfig;
}

/** Per-port state: the port and the completions held back by its full `resp` FIFO (read slots, in order). */
interface PortState {
  readonly port: DmaPort;
  /** The port may reach ICM table space (DmaPortOptions.tables). */
  readonly tables: boolean;
  readonly held: Int32Array;
  head: number;
  count: number;
  /** Its completions, reused (DmaPortOptions.reuseResponses), or null: a new one each. */
  readonly resps: ReuseRing<DmaResp> | null;
}

const EMPTY_DATA = new Uint8Array(0);

/** A read in flight (one per tag, reused): what its completion needs. */
interface ReadSlot {
  /** Its port's index. */
  port: number;
  tag: number;
  addr: number;
  len: number;
  /** When it was accepted (its latency is counted from there). */
  accept: number;
  /** The bytes read, between completion and delivery. */
  data: Uint8Array | null;
  /** Where the bytes go (the request's `dst`), or null: a new array. */
  dst: Uint8Array | null;
  dstOff: number;
  /** No memory is behind it: it completes with all-ones. */
  ur: boolean;
  qpn: number;
  wqe: number;
}

interface PostedWrite {
  addr: number;
  data: Uint8Array;
  landed: EventTarget | null;
  tag: number;
  /** Memory is behind it (else it is dropped when it lands). */
  backed: boolean;
  /** Its port, QP and WQE (for the DMA checker). */
  port: number;
  qpn: number;
  wqe: number;
}

interface Doorbell {
  fifo: Fifo<unknown>;
  value: unknown;
}

/**
 * The PCIe block. Timing (spec/timing.md "PCIe read", "PCIe posted write", "doorbell"):
 *
 * - Arbitration: one request accepted per core cycle, round-robin over the ports.
 * - Reads: at most `pcieMaxOutstandingReads` in flight (a read at the head of a port waits for a
 *   tag; other ports' requests pass it). A read accepted at t completes at
 *   `max(t + pcieReadBasePs + xfer, previous completion + xfer)`, where
 *   `xfer = ceil(length / pcieReadBytesPerPs)` ps: completions share the link's bandwidth. It also
 *   completes no earlier than every write accepted before it lands (PCIe: a read does not pass a
 *   posted write). Its data is read from host memory at the completion time and pushed into
 *   the port's `resp` at once; the tag is freed when the response enters `resp`.
 * - Writes: posted; they land in host memory `pcieWritePs` after acceptance, in order.
 * - Doorbells: `ringDoorbell(fifo, value)` pushes `value` into a hardware FIFO `doorbellPs`
 *   later. Doorbells are posted MMIO writes, strictly ordered: one whose FIFO is full holds back
 *   the later ones until the FIFO has space.
 *
 * The block sleeps whenever it has no request to accept; completions arrive by kernel events.
 */
export class Pcie extends Module implements EventTarget {
  /** The clock-edge view of the block (enum `pcie_state`). */
  readonly state: Reg;
  readonly rdReqValid: Reg;
  readonly rdAddr: Reg;
  readonly rdLen: Reg;
  readonly rdTag: Reg;
  readonly rdPort: Reg;
  readonly wrValid: Reg;
  readonly wrAddr: Reg;
  readonly wrLen: Reg;
  /** Reads in flight (accepted, response not yet delivered). */
  readonly outstanding: Reg;

  private readonly cReads: Counter;
  private readonly cWrites: Counter;
  private readonly cBytesRead: Counter;
  private readonly cBytesWritten: Counter;
  /** DMAs to addresses with no memory behind them (the root complex's Unsupported Request). */
  private readonly cUnsupported: Counter;
  private readonly hReadLatency: Histogram;
  private readonly cMaxOutstanding: Counter;
  private readonly cTagStalls: Counter;
  private readonly cDoorbells: Counter;

  private readonly ports: PortState[] = [];
  /** Each port's request FIFO, by port index: the tick's scan reads these and nothing else per port. */
  private readonly reqs: Fifo<DmaReq>[] = [];
  private rr = 0;
  private heldTotal = 0;
  private tagStalled = false;

  // read slots (one per tag), recycled through a free stack: no allocation per read but the data
  private readonly maxOut: number;
  /**
   * Each tag's read, one record per slot: a read's state is written at acceptance and read at
   * completion, microseconds of other work apart, and one record is a cache line or two where a
   * typed array per field was eleven arrays (each its object and its store) to touch each time.
   */
  private readonly slots: ReadSlot[];
  /**
   * The DMA-ownership checker (dma_check.ts), or null: every read and write that touches host
   * memory is checked at that instant. Set by the testbed (`trace.checkDma`).
   */
  checker: DmaChecker | null = null;
  private readonly freeSlots: Int32Array;
  private nFree: number;
  private lastFinish = 0;
  private lastWriteDue = 0;

  private readonly writes = new Ring<PostedWrite>();
  /** Records of landed writes, reused by the next ones (the first nFreeWrites). */
  private readonly freeWrites: PostedWrite[] = [];
  private nFreeWrites = 0;
  private readonly doorbells = new Ring<Doorbell>();
  private doorbellsDue = 0;
  private doorbellBlocked = false;
  private readonly writeLand: EventTarget;
  private readonly doorbellArrive: EventTarget;

  /** Host physical memory behind the link. */
  private readonly mem: DeviceMemory;
  private readonly cfg: PcieConfig;

  constructor(parent: Module, name: string, opts: PcieOptions) {
    super(parent.sim, parent, name);
    this.mem = opts.deps.mem;
    this.cfg = opts.cfg;
    this.clockedBy(opts.clock);
    this.maxOut = opts.cfg.pcieMaxOutstandingReads;
    if (!(Number.isInteger(this.maxOut) && this.maxOut >= 1)) {
      throw new RangeError(`${this.path}: pcieMaxOutstandingReads must be a positive integer, got ${this.maxOut}`);
    }
    // what the waves show of the link: nothing reads these back, so they cost nothing untraced
    this.state = this.probe('state', PcieState.width, { enum: PcieState });
    this.rdReqValid = this.probe('rd_req_valid', 1);
    this.rdAddr = this.probe('rd_addr', 64);
    this.rdLen = this.probe('rd_len', 32);
    this.rdTag = this.probe('rd_tag', 32);
    this.rdPort = this.probe('rd_port', 8);
    this.wrValid = this.probe('wr_valid', 1);
    this.wrAddr = this.probe('wr_addr', 64);
    this.wrLen = this.probe('wr_len', 32);
    this.outstanding = this.probe('outstanding', Math.max(1, Math.ceil(Math.log2(this.maxOut + 1))));

    this.cReads = this.stats.counter('reads');
    this.cWrites = this.stats.counter('writes');
    this.cBytesRead = this.stats.counter('bytes_read');
    this.cBytesWritten = this.stats.counter('bytes_written');
    this.hReadLatency = this.stats.histogram('read_latency_ps');
    this.cMaxOutstanding = this.stats.counter('max_outstanding');
    this.cTagStalls = this.stats.counter('tag_stalls');
    this.cUnsupported = this.stats.counter('unsupported_requests');
    this.cDoorbells = this.stats.counter('doorbells');

    const n = this.maxOut;
    this.slots = [];
    for (let i = 0; i < n; i++) {
      this.slots.push({ port: 0, tag: 0, addr: 0, len: 0, accept: 0, data: null, dst: null, dstOff: 0, ur: false, qpn: -1, wqe: -1 });
    }
    this.freeSlots = new Int32Array(n);
    for (let i = 0; i < n; i++) this.freeSlots[i] = n - 1 - i;
    this.nFree = n;

    // two fixed event targets: no closure per event
    this.writeLand = { fire: (): void => this.landWrite() };
    this.doorbellArrive = { fire: (): void => { this.doorbellsDue++; this.deliverDoorbells(); } };
  }

  /** A new DMA port named `name` (its FIFOs trace as `<name>_req_*`, `<name>_resp_*`). Call in constructors. */
  port(name: string, opts: DmaPortOptions = {}): DmaPort {
    if (this.ports.some((p) => p.port.name === name)) throw new Error(`${this.path}: port '${name}' declared twice`);
    if (this.ports.length >= 255) throw new Error(`${this.path}: at most 255 ports`);
    for (const f of [`${name}_req`, `${name}_resp`]) {
      const clash = this.signals.find((s) => s.name.startsWith(`${f}_`));
      if (clash !== undefined) throw new Error(`${this.path}: port name '${name}' clashes with signal ${clash.name}`);
    }
    const req = new Fifo<DmaReq>(this, `${name}_req`, { capacity: opts.reqCapacity ?? 4 });
    const resp = new Fifo<DmaResp>(this, `${name}_resp`, { capacity: opts.respCapacity ?? 4 });
    req.consumer = this;
    const port: DmaPort = { name, req, resp };
    const resps = opts.reuseResponses === true ? new ReuseRing(resp, (): DmaResp => ({ tag: 0, data: null })) : null;
    this.reqs.push(req);
    this.ports.push({ port, tables: opts.tables === true, held: new Int32Array(this.maxOut), head: 0, count: 0, resps });
    return port;
  }

  /**
   * Software: an MMIO write that pushes `value` into the hardware FIFO `fifo` `doorbellPs` from
   * now (spec/timing.md "doorbell (MMIO) to HCA"). The FIFO's producer becomes this block (it
   * retries when a full FIFO frees space); a FIFO fed by another module cannot be a doorbell.
   */
  ringDoorbell<T>(fifo: Fifo<T>, value: T): void {
    if (fifo.producer === null) fifo.producer = this;
    else if (fifo.producer !== this) {
      throw new Error(`${this.path}.ringDoorbell: ${fifo.owner.path}.${fifo.name} is fed by ${fifo.producer.path}, not by MMIO`);
    }
    this.doorbells.push({ fifo: fifo as Fifo<unknown>, value });
    this.sim.after(this.cfg.doorbellPs, this.doorbellArrive);
  }

  /** True while requests wait for a free read tag (the waves show it as state TAG_STALL). */
  get stalledOnTags(): boolean {
    return this.tagStalled;
  }

  /** Reads in flight now. */
  get outstandingReads(): number {
    return this.maxOut - this.nFree;
  }

  /** A DMA or doorbell queued or in flight. */
  override hasWork(): boolean {
    return !this.idle;
  }

  /** True when nothing is queued or in flight (as of the last commit): no request waiting, no read, no posted write, no doorbell. */
  get idle(): boolean {
    if (this.nFree !== this.maxOut || this.writes.size !== 0 || this.doorbells.size !== 0) return false;
    for (const ps of this.ports) if (ps.port.req.size !== 0) return false;
    return true;
  }

  override tick(): void {
    if (this.heldTotal > 0) this.deliverHeld();
    if (this.doorbellBlocked) {
      this.doorbellBlocked = false;
      this.deliverDoorbells();
    }
    const reqs = this.reqs;
    const n = reqs.length;
    let stalled = false;
    for (let k = 0; k < n; k++) {
      let pi = this.rr + k;
      if (pi >= n) pi -= n;
      const q = reqs[pi];
      if (!q.canPop()) continue;
      const r = q.peek();
      if (r.kind === 'read') {
        if (this.nFree === 0) {
          stalled = true; // no tag: other ports may still go
          continue;
        }
        q.pop();
        this.acceptRead(pi, r);
      } else {
        q.pop();
        this.acceptWrite(pi, r);
      }
      this.rr = pi + 1 === n ? 0 : pi + 1;
      // one request an edge: stay awake for the next one, or to lower the pulse in traced waves
      if (this.keepsPulse(1)) return;
      for (let j = 0; j < n; j++) if (reqs[j].canPop()) return;
      this.sleep();
      return;
    }
    if (this.traced) {
      this.rdReqValid.set(0);
      this.wrValid.set(0);
      this.state.set(stalled ? PCIE.TAG_STALL : PCIE.IDLE);
    }
    if (stalled && !this.tagStalled) this.cTagStalls.inc();
    this.tagStalled = stalled;
    // woken by a request push, a freed tag, space in a resp FIFO, or a doorbell FIFO pop
    this.sleep();
  }

  /** @internal A read completes: `slot` is its tag slot. */
  fire(slot: number): void {
    const rs = this.slots[slot];
    const dst = rs.dst;
    if (this.checker !== null && !rs.ur) {
      this.checker.check('read', this.ports[rs.port].port.name, rs.addr, rs.len, rs.qpn, rs.wqe, this.sim.now);
    }
    if (rs.ur) {
      // no memory there: the completion carries all-ones (as a root complex answers such a read)
      if (dst !== null) dst.fill(0xff, rs.dstOff, rs.dstOff + rs.len);
      rs.data = dst ?? new Uint8Array(rs.len).fill(0xff);
      rs.dst = null;
    } else if (dst !== null) {
      this.mem.readInto(rs.addr, dst, rs.dstOff, rs.len);
      rs.data = dst;
      rs.dst = null;
    } else rs.data = this.mem.read(rs.addr, rs.len);
    const ps = this.ports[rs.port];
    if (ps.count === 0 && ps.port.resp.canPush()) this.deliver(slot);
    else {
      ps.held[(ps.head + ps.count) % this.maxOut] = slot;
      ps.count++;
      this.heldTotal++;
      ps.port.resp.producer = this; // woken by the client's next pop
    }
  }

  /**
   * Checks a request from a client (its tag and length are the client's own invariants) and
   * says whether memory is behind its address range. A DMA to an address with none (a kernel
   * QP's REG_MR may name any physical page) is the root complex's Unsupported Request: a write is
   * dropped, a read completes with all-ones, both counted (`unsupported_requests`); the device
   * is not told (a modelling choice: the PCIe error reporting is not modelled).
   */
  private check(pi: number, r: DmaReq): boolean {
    // runs for every request: no closure, the message is built only on failure
    if (!(Number.isInteger(r.tag) && r.tag >= 0 && r.tag < 2 ** 32)) throw new RangeError(`${this.where(pi, r)}: tag must be a u32`);
    if (!(Number.isInteger(r.length) && r.length >= 1 && r.length < 2 ** 32)) {
      throw new RangeError(`${this.where(pi, r)}: length must be an integer in 1..2^32-1, got ${r.length}`);
    }
    if (this.mem.covers(r.addr, r.length, this.ports[pi].tables)) return true;
    this.cUnsupported.inc();
    return false;
  }

  private where(pi: number, r: DmaReq): string {
    return `${this.path}: ${this.ports[pi].port.name} ${r.kind} tag ${r.tag}`;
  }

  private acceptRead(pi: number, r: DmaReq): void {
    const backed = this.check(pi, r);
    const now = this.sim.now;
    const s = this.freeSlots[--this.nFree];
    const rs = this.slots[s];
    rs.ur = !backed;
    rs.port = pi;
    rs.tag = r.tag;
    rs.addr = r.addr;
    rs.len = r.length;
    rs.accept = now;
    rs.dst = r.dst ?? null;
    rs.dstOff = r.dstOff ?? 0;
    rs.qpn = r.qpn ?? -1;
    rs.wqe = r.wqe ?? -1;
    // ceil, ignoring float noise below 1e-6 ps (12 B at 0.012 B/ps is 1000 ps, not 1001)
    const xfer = Math.ceil(r.length / this.cfg.pcieReadBytesPerPs - 1e-6);
    let finish = now + this.cfg.pcieReadBasePs + xfer;
    if (this.lastFinish + xfer > finish) finish = this.lastFinish + xfer;
    if (this.lastWriteDue > finish) finish = this.lastWriteDue;
    this.lastFinish = finish;
    this.sim.at(finish, this, s);

    const out = this.maxOut - this.nFree;
    if (out > this.cMaxOutstanding.value) this.cMaxOutstanding.value = out;
    this.cReads.inc();
    this.cBytesRead.inc(r.length);
    // the waves' view, only when traced: untraced, each probe is one more object to touch per request
    if (this.traced) {
      this.outstanding.set(out);
      this.state.set(PCIE.READ);
      this.rdReqValid.set(1);
      this.rdAddr.set(r.addr);
      this.rdLen.set(r.length);
      this.rdTag.set(r.tag);
      this.rdPort.set(pi);
      this.wrValid.set(0);
    }
  }

  private acceptWrite(pi: number, r: DmaReq): void {
    const backed = this.check(pi, r);
    const d = r.data;
    if (d === undefined || d.length !== r.length) {
      throw new Error(`${this.path}: ${this.ports[pi].port.name} write tag ${r.tag}: data must hold length (${r.length}) bytes, got ${d === undefined ? 'none' : d.length}`);
    }
    const due = this.sim.now + this.cfg.pcieWritePs;
    const data = r.owned === true ? d : d.slice();
    let w: PostedWrite;
    if (this.nFreeWrites > 0) {
      w = this.freeWrites[--this.nFreeWrites];
      w.addr = r.addr;
      w.data = data;
      w.landed = r.landed ?? null;
      w.tag = r.tag;
      w.backed = backed;
      w.port = pi;
      w.qpn = r.qpn ?? -1;
      w.wqe = r.wqe ?? -1;
    } else w = { addr: r.addr, data, landed: r.landed ?? null, tag: r.tag, backed, port: pi, qpn: r.qpn ?? -1, wqe: r.wqe ?? -1 };
    this.writes.push(w);
    this.lastWriteDue = due;
    this.sim.at(due, this.writeLand);
    this.cWrites.inc();
    this.cBytesWritten.inc(r.length);
    if (this.traced) {
      this.state.set(PCIE.WRITE);
      this.wrValid.set(1);
      this.wrAddr.set(r.addr);
      this.wrLen.set(r.length);
      this.rdReqValid.set(0);
    }
  }

  /** A posted write lands (all have the same latency, so the oldest is due). */
  private landWrite(): void {
    const w = this.writes.shift();
    if (this.checker !== null && w.backed) this.checker.check('write', this.ports[w.port].port.name, w.addr, w.data.length, w.qpn, w.wqe, this.sim.now);
    // a table page freed while the write was in flight takes nothing: counted as unsupported
    if (w.backed && !this.mem.write(w.addr, w.data)) this.cUnsupported.inc();
    const landed = w.landed;
    const tag = w.tag;
    // the record is free again (nothing keeps it); its data is dropped now, not at its reuse
    w.data = EMPTY_DATA;
    w.landed = null;
    this.freeWrites[this.nFreeWrites++] = w;
    if (landed !== null) landed.fire(tag);
  }

  /** Pushes a completed read into its port's resp FIFO and frees its tag. */
  private deliver(slot: number): void {
    const rs = this.slots[slot];
    const ps = this.ports[rs.port];
    const ring = ps.resps;
    if (ring === null) ps.port.resp.push({ tag: rs.tag, data: rs.data });
    else {
      const r = ring.next();
      r.tag = rs.tag;
      r.data = rs.data;
      ps.port.resp.push(r);
    }
    rs.data = null;
    this.hReadLatency.add(this.sim.now - rs.accept);
    this.freeSlots[this.nFree++] = slot;
    if (this.traced) this.outstanding.set(this.maxOut - this.nFree);
    if (this.tagStalled) {
      this.tagStalled = false;
      this.wake();
    }
  }

  /** Delivers completions held back by full resp FIFOs, in order, as space allows. */
  private deliverHeld(): void {
    for (const ps of this.ports) {
      while (ps.count > 0 && ps.port.resp.canPush()) {
        const slot = ps.held[ps.head];
        ps.head = (ps.head + 1) % this.maxOut;
        ps.count--;
        this.heldTotal--;
        this.deliver(slot);
      }
      if (ps.count === 0) ps.port.resp.producer = null;
    }
  }

  /** Pushes the doorbells that are due, in order, until one finds its FIFO full. */
  private deliverDoorbells(): void {
    while (this.doorbellsDue > 0) {
      const db = this.doorbells.peek();
      if (!db.fifo.canPush()) {
        this.doorbellBlocked = true; // retried on the tick after the FIFO's consumer pops
        return;
      }
      this.doorbells.shift();
      this.doorbellsDue--;
      db.fifo.push(db.value);
      this.cDoorbells.inc();
    }
  }
}

/** A growable ring buffer (FIFO order) that reuses its storage. */
class Ring<T> {
  private buf: (T | undefined)[] = new Array<T | undefined>(16).fill(undefined);
  private head = 0;
  size = 0;

  push(v: T): void {
    if (this.size === this.buf.length) {
      const old = this.buf;
      const next = new Array<T | undefined>(old.length * 2).fill(undefined);
      for (let i = 0; i < this.size; i++) next[i] = old[(this.head + i) % old.length];
      this.buf = next;
      this.head = 0;
    }
    this.buf[(this.head + this.size) % this.buf.length] = v;
    this.size++;
  }

  peek(): T {
    return this.buf[this.head] as T;
  }

  shift(): T {
    const v = this.buf[this.head] as T;
    this.buf[this.head] = undefined;
    this.head = (this.head + 1) % this.buf.length;
    this.size--;
    return v;
  }
}
