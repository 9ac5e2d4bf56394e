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

/** One direction's delivery queue: messages land in `inbox[to]` at their arrival time. */
export class Link<T> extends Module implements EventTarget {
  private readonly busyUntil: number[];
  private readonly pending: { at: number; w: Wire<T> }[] = [];
  private readonly rPackets: Reg;
  private readonly sPackets;
  private readonly sBytes;
  private readonly sMessages;

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
    this.rPackets = this.reg('packets_in_flight', 16);
    this.sPackets = this.stats.counter('packets');
    this.sBytes = this.stats.counter('bytes');
    this.sMessages = this.stats.counter('messages');
  }

  /** Packets of a message of `payload` bytes at `mtu` (a zero-length message is one packet). */
  static packets(payload: number, mtu: number): number {
    return Math.max(1, Math.ceil(payload / mtu));
  }

  /** Sends `w`: it lands in `inbox[w.to]` after serialization and latency; returns the arrival time. */
  send(w: Wire<T>): number {
    const pk = Link.packets(w.payloadBytes, w.mtu);
    const bytes = w.payloadBytes + pk * PACKET_HEADER_BYTES;
    const xfer = Math.ceil((bytes * 8 * 1000) / this.gbps); // ps at gbps Gb/s
    const start = Math.max(this.sim.now, this.busyUntil[w.to]);
    this.busyUntil[w.to] = start + xfer;
    const at = start + xfer + this.latencyPs;
    this.pending.push({ at, w });
    this.sim.at(at, this);
    this.sPackets.inc(pk);
    this.sBytes.inc(bytes);
    this.sMessages.inc();
    this.rPackets.set(Math.min(0xffff, this.rPackets.q + pk));
    return at;
  }

  /** @internal Deliveries due now, in send order. */
  fire(): void {
    const now = this.sim.now;
    for (let i = 0; i < this.pending.length; ) {
      const p = this.pending[i];
      if (p.at !== now) {
        i++;
        continue;
      }
      const inbox = this.inbox[p.w.to];
      if (!inbox.canPush()) {
        // a full inbox: retry on the next picosecond (the responder drains it every cycle)
        p.at = now + 1;
        this.sim.at(p.at, this);
        i++;
        continue;
      }
      inbox.push(p.w.body);
      this.rPackets.set(Math.max(0, this.rPackets.q - Link.packets(p.w.payloadBytes, p.w.mtu)));
      this.pending.splice(i, 1);
    }
  }
}
