/**
 * A small example design for the kernel: a packet source on one clock, a bounded FIFO with
 * latency, and a consumer FSM on a second clock that fetches, processes and writes back each
 * item, stalling on back-pressure. It shows what every HCA module will show in GTKWave: an
 * enumerated FSM state, request/response handshakes, a bus in hex, FIFO occupancy, and stats.
 */
import { Clock, EnumType, Fifo, Module, NS, Sim, type Reg } from '../src/sim/index.ts';

/** Consumer FSM states (traced as a vector named through a GTKWave filter). */
export const ConsumerState = new EnumType('consumer_state', ['IDLE', 'FETCH', 'PROCESS', 'WRITEBACK']);

/** Emits pseudo-random 32-bit items from the seeded generator, every few cycles. */
export class Source extends Module {
  readonly valid: Reg;
  readonly data: Reg;
  readonly out: Fifo<number>;
  private left: number;
  private readonly sent;

  constructor(sim: Sim, parent: Module, name: string, readonly count: number) {
    super(sim, parent, name);
    this.valid = this.reg('valid', 1);
    this.data = this.reg('data', 32);
    this.out = new Fifo<number>(this, 'out', { capacity: 4, latency: 3 * NS });
    this.out.producer = this;
    this.left = count;
    this.sent = this.stats.counter('sent');
  }

  override tick(): void {
    if (this.left === 0) {
      this.valid.set(0);
      return this.sleep();
    }
    if (!this.out.canPush()) {
      this.valid.set(0);
      return this.sleep(); // back-pressure: woken when the consumer pops
    }
    // a bursty source: sends on ~60% of the cycles it can
    if (this.sim.rng.next() < 0.6) {
      const v = this.sim.rng.nextU32();
      this.out.push(v);
      this.valid.set(1);
      this.data.set(v);
      this.left--;
      this.sent.inc();
    } else this.valid.set(0);
  }
}

/** Takes items, spends 1..4 cycles processing each, accumulates a checksum. */
export class Consumer extends Module {
  readonly state: Reg;
  readonly item: Reg;
  readonly sum: Reg;
  readonly busy: Reg;
  private wait = 0;
  private readonly latency;
  private readonly done;
  private started = 0;

  constructor(sim: Sim, parent: Module, name: string, readonly input: Fifo<number>) {
    super(sim, parent, name);
    this.state = this.stateReg('state', ConsumerState);
    this.item = this.reg('item', 32);
    this.sum = this.reg('sum', 32);
    this.busy = this.reg('busy', 1);
    input.consumer = this;
    this.latency = this.stats.histogram('process_ps');
    this.done = this.stats.counter('items');
  }

  override tick(): void {
    switch (this.state.q) {
      case 0: // IDLE
        if (this.input.canPop()) {
          this.state.set(1);
          this.busy.set(1);
        } else {
          this.busy.set(0);
          this.sleep();
        }
        break;
      case 1: // FETCH
        {
          const v = this.input.pop();
          this.item.set(v);
          this.wait = 1 + (v & 3);
          this.started = this.sim.now;
          this.state.set(2);
        }
        break;
      case 2: // PROCESS
        if (--this.wait === 0) this.state.set(3);
        break;
      case 3: // WRITEBACK
        this.sum.set((this.sum.q + this.item.q) >>> 0);
        this.latency.add(this.sim.now - this.started);
        this.done.inc();
        this.state.set(this.input.canPop() ? 1 : 0);
        break;
    }
  }
}

/** The example design: `tb.demo.{source, consumer}` on a 500 MHz and a 333 MHz clock. */
export class KernelDemo {
  readonly source: Source;
  readonly consumer: Consumer;
  constructor(readonly sim: Sim, items: number) {
    const top = new Module(sim, sim.top, 'demo');
    const fast = new Clock(top, 'clk_core', 2 * NS);
    const slow = new Clock(top, 'clk_io', 3 * NS);
    this.source = new Source(sim, top, 'source', items).clockedBy(fast, true);
    this.consumer = new Consumer(sim, top, 'consumer', this.source.out).clockedBy(slow);
  }

  /** The checksum a correct run must end with: the sum of the items the source sent. */
  static expectedSum(seed: number, items: number): number {
    // replay the source's random stream: one draw decides, the next is the item
    const sim = new Sim({ seed });
    let sum = 0;
    let left = items;
    while (left > 0) {
      if (sim.rng.next() < 0.6) {
        sum = (sum + sim.rng.nextU32()) >>> 0;
        left--;
      }
    }
    return sum;
  }
}
