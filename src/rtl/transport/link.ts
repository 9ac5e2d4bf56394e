/**
 * The wire between adapters (`tb.link`): RC messages travel from a requester to the responder
 * of the peer adapter (or back to the same one, loopback). Each direction serializes its
 * traffic at the link rate, then adds the one-way latency (spec/timing.md "link between HCAs":
 * 300 ns, 100 Gb/s, assumed). Packets (one per MTU of payload, at least one) each carry a
 * header; only their count and bytes are modelled, not every packet as an event.
 */
import { Fifo, Module, Sim, type EventTarget, type Reg } from '../../sim/index.ts';

/** Header bytes per packet on the wire (LRH+BTH+RETH+ICRC+VCRC, approximately). */
export const PACKET_HEADER_BYTES = 58;

/** A message or response in flight; `to` is the destination adapter index. */
export interface Wire<T> {
  to: number;
  payloadBytes: number;
  mtu: number;
  body: T;
}

/**
 * Sees every message the link carries (the pcap of the wire, the transaction log): told when a
 * message starts serializing, with its payload and MTU, and when it lands. Null when untraced.
 */
export interface LinkTap<T> {
  /** `body` to adapter `to`: its packets leave from `startPs` at `psPerByte`, the last lands at `arrivePs`. */
  sent(to: number, body: T, payloadBytes: number, mtu: number, startPs: number, arrivePs: number, psPerByte: number): void;
}

/**
 * One direction's delivery queue: messages land in `inbox[to]` at their arrival time. Arrivals
 * at one destination are in send order (serialization then a fixed latency), so each
 * destination keeps a FIFO and only its head is a kernel event: the event queue holds one
 * entry per destination, not one per message in flight.
 */
export class Link<T> extends Module implements EventTarget {
  private readonly busyUntil: number[];
  /** Per destination: messages in flight in arrival order, from `head` (arrival, packets, body). */
  private readonly atQ: number[][];
  private readonly pkQ: number[][];
  private readonly bodyQ: T[][];
  private readonly head: number[];
  private readonly rPackets: Reg;
  private readonly sPackets;
  private readonly sBytes;
  private readonly sMessages;
  /** The tap on the wire; null (one compare per message) when untraced. */
  tap: LinkTap<T> | null = null;

  constructor(
    sim: Sim,
    parent: Module,
    name: string,
    /** Where messages for adapter i land. */
    readonly inbox: readonly Fifo<T>[],
    readonly latencyPs: number,
    readonly gbps: number,
  ) {
    super(sim, parent, name);
    this.busyUntil = inbox.map(() => 0);
    this.atQ = inbox.map(() => []);
    this.pkQ = inbox.map(() => []);
    this.bodyQ = inbox.map(() => []);
    this.head = inbox.map(() => 0);
    this.rPackets = this.reg('packets_in_flight', 16);
    this.sPackets = this.stats.counter('packets');
    this.sBytes = this.stats.counter('bytes');
    this.sMessages = this.stats.counter('messages');
  }

  /** Packets of a message of `payload` bytes at `mtu` (a zero-length message is one packet). */
  static packets(payload: number, mtu: number): number {
    return Math.max(1, Math.ceil(payload / mtu));
  }

  /** Messages on the wire. */
  override hasWork(): boolean {
    for (let i = 0; i < this.atQ.length; i++) if (this.head[i] < this.atQ[i].length) return true;
    return false;
  }

  /** Sends `w`: it lands in `inbox[w.to]` after serialization and latency; returns the arrival time. */
  send(w: Wire<T>): number {
    return this.sendTo(w.to, w.payloadBytes, w.mtu, w.body);
  }

  /** `send` without a Wire object (the engines' hot path). */
  sendTo(to: number, payloadBytes: number, mtu: number, body: T): number {
    const pk = Link.packets(payloadBytes, mtu);
    const bytes = payloadBytes + pk * PACKET_HEADER_BYTES;
    const xfer = Math.ceil((bytes * 8 * 1000) / this.gbps); // ps at gbps Gb/s
    const start = Math.max(this.sim.now, this.busyUntil[to]);
    this.busyUntil[to] = start + xfer;
    const at = start + xfer + this.latencyPs;
    const q = this.atQ[to];
    q.push(at);
    this.pkQ[to].push(pk);
    this.bodyQ[to].push(body);
    if (q.length - this.head[to] === 1) this.sim.at(at, this, to);
    this.sPackets.inc(pk);
    this.sBytes.inc(bytes);
    this.sMessages.inc();
    this.rPackets.set(Math.min(0xffff, this.rPackets.q + pk));
    if (this.tap !== null) this.tap.sent(to, body, payloadBytes, mtu, start, at, 8000 / this.gbps);
    return at;
  }

  /** @internal Deliveries due now at destination `to`, in send order; then the next arrival's event. */
  fire(to: number): void {
    const now = this.sim.now;
    const q = this.atQ[to];
    const pkq = this.pkQ[to];
    const bq = this.bodyQ[to];
    const inbox = this.inbox[to];
    let h = this.head[to];
    while (h < q.length && q[h] <= now) {
      if (!inbox.canPush()) {
        // a full inbox: retry on the next picosecond (the responder drains it every cycle)
        this.head[to] = h;
        this.sim.at(now + 1, this, to);
        return;
      }
      inbox.push(bq[h]);
      this.rPackets.set(Math.max(0, this.rPackets.q - pkq[h]));
      h++;
    }
    if (h === q.length) {
      q.length = 0;
      pkq.length = 0;
      bq.length = 0;
      h = 0;
    } else if (h > 1024) {
      q.splice(0, h);
      pkq.splice(0, h);
      bq.splice(0, h);
      h = 0;
    }
    this.head[to] = h;
    if (h < q.length) this.sim.at(q[h], this, to);
  }
}
