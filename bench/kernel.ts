/**
 * The kernel benchmark: the workload of a SystemC pipeline benchmark (kept outside this repository) on the
 * mlx5sim kernel. K clocked 32-bit registers in a chain, each taking the previous stage's
 * register plus one (stage 0: 0 + 1), one 500 MHz clock, N cycles.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Clock, Module, Sim, Tracer, type Reg } from '../src/sim/index.ts';

class Stage extends Module {
  readonly out: Reg;
  constructor(sim: Sim, parent: Module, name: string, private readonly prev: Reg | null) {
    super(sim, parent, name);
    this.out = this.reg('out', 32);
  }
  override tick(): void {
    this.out.set(((this.prev === null ? 0 : this.prev.q) + 1) >>> 0);
  }
}

/** Builds the pipeline, runs it, and returns the JSON line of the run. */
export function runPipeline(stages: number, cycles: number, vcdPath?: string): Record<string, number | string> {
  const sim = new Sim();
  const clk = new Clock(sim.top, 'clk', 2000);
  let prev: Reg | null = null;
  const all: Stage[] = [];
  for (let i = 0; i < stages; i++) {
    const s: Stage = new Stage(sim, sim.top, `stage${i}`, prev);
    s.clockedBy(clk, true);
    all.push(s);
    prev = s.out;
  }
  const tracer = vcdPath ? new Tracer(sim, { vcd: vcdPath, gtkw: false }) : null;
  const t0 = process.hrtime.bigint();
  const cpu0 = process.cpuUsage();
  sim.runUntil(cycles * clk.period);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  tracer?.close();
  if (clk.cycle !== cycles) throw new Error(`ran ${clk.cycle} cycles, expected ${cycles}`);
  const out: Record<string, number | string> = {
    engine: 'mlx5sim',
    stages,
    cycles,
    seconds: +seconds.toFixed(4),
    stageCyclesPerSec: Math.round((stages * cycles) / seconds),
    // CPU time: steadier than the wall clock on a shared machine
    cpuStageCyclesPerSec: Math.round((stages * cycles) / cpuSeconds),
    last: all[stages - 1].out.q,
  };
  if (tracer) out.vcdBytes = tracer.bytes;
  return out;
}

/**
 * `npm run bench -- kernel`: the two sizes of the SystemC reference, then K=64 traced. Each size
 * is timed warm, as JIT benchmarks are: a run of the same pipeline at a quarter of the cycles
 * first, discarded. Cold, the timed run also pays for V8 compiling the tick loop from its first
 * feedback, and the rate then depended on what the process had run before (one run each,
 * 64 x 2e6: ~70 M stage-cycles/s alone, ~139 M after the verbs cases in the same process;
 * back-to-back runs in one process: the third up to 1.5x the first). The SystemC reference is
 * compiled ahead of time and has nothing to warm.
 */
export function benchKernel(): void {
  runPipeline(64, 500_000); // warm-up
  const a = runPipeline(64, 2_000_000);
  console.log(JSON.stringify(a));
  runPipeline(4, 5_000_000); // warm-up
  const b = runPipeline(4, 20_000_000);
  console.log(JSON.stringify(b));
  const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-bench-'));
  try {
    const c = runPipeline(64, 2_000_000, join(dir, 'pipeline.vcd'));
    c.tracing = 'all';
    c.slowdown = +((c.seconds as number) / (a.seconds as number)).toFixed(2);
    console.log(JSON.stringify(c));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
