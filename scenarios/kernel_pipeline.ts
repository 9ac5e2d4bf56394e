/** The kernel's example scenario: a source, a latency FIFO and a consumer FSM on two clocks. */
import { Sim, Tracer } from '../src/sim/index.ts';
import { Checks, type Scenario } from '../src/scenario.ts';
import { KernelDemo } from './kernel_demo.ts';

const ITEMS = 200;

const scenario: Scenario = {
  name: 'kernel-pipeline',
  summary: 'kernel example: a bursty source, a FIFO with latency and back-pressure, a consumer FSM on a second clock',
  configurable: false,
  async run({ seed, trace }) {
    const sim = new Sim({ seed });
    const demo = new KernelDemo(sim, ITEMS);
    const tracer = trace?.vcd !== undefined ? new Tracer(sim, { ...trace, vcd: trace.vcd }) : null;
    // one phase, the whole stream: its view opens on the source's and the consumer's activity
    const streaming = tracer?.beginPhase('stream', ['demo.source', 'demo.consumer']);
    sim.runUntil(Infinity); // runs until every module sleeps
    if (streaming !== undefined) tracer?.endPhase(streaming);
    tracer?.close();
    const c = new Checks();
    c.equal(demo.consumer.sum.q, KernelDemo.expectedSum(seed, ITEMS), 'consumer checksum equals the sum of the items sent');
    const st = sim.stats();
    c.equal(st['tb.demo.consumer'].items, ITEMS, 'every item was processed');
    c.equal(demo.consumer.state.q, 0, 'consumer ends IDLE');
    return { checks: c.list, simTime: sim.now, stats: st };
  },
};

export default scenario;
