/**
 * An experiment of one's own, to copy and change: the latency of one signaled RDMA WRITE between
 * two adapters against its size, each point on a fresh testbed. Any configuration field can be
 * an axis too: a grid block `{ size: [...], mttCacheLines: [64, 4096] }` hands the point's
 * mttCacheLines to `run` in `config`.
 *
 * Run its small grid here:   npx tsx examples/my_experiment.ts            (--full: the default grid)
 * An Experiment is plain data plus three functions: `run` measures one point, `checks` judges the
 * shape over all points, `plot` says how to draw them. This file runs its own grid in one thread
 * and prints the points and checks; to get `mlx5sim sweep` (every core, shards, points.jsonl,
 * the plot) for it, add it to experiments/index.ts as the built-in experiments are.
 */
import { pathToFileURL } from 'node:url';
import { Access, Testbed, US, type Experiment, type Params, type PointContext, type PointFigures, type PointLine, type ShapeCheck } from '../src/index.ts';

const KiB = 1024;
const TIMEOUT_PS = 1_000_000_000;

/** One point: a warm-up WRITE (caches filled), then the measured one, on a fresh testbed. */
async function run(p: Params, { seed, config }: PointContext): Promise<PointFigures> {
  const size = p.size as number;
  // `config` holds the point's parameters that are configuration fields (none in this grid)
  const tb = new Testbed({ seed, hcas: 2, config });
  let latencyUs = 0;
  await tb.run(async () => {
    const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
    const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
    const [cq0, cq1] = [await c0.createCq(16), await c1.createCq(16)];
    const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
    const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
    await qp0.connect(qp1);
    const a = tb.host(0).alloc(size, { align: 4096 });
    const b = tb.host(1).alloc(size, { align: 4096 });
    const mr0 = await pd0.regMr(a.addr, size, Access.LOCAL_WRITE);
    const mr1 = await pd1.regMr(b.addr, size, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    const write = async (): Promise<number> => {
      const t0 = tb.now; // simulated picoseconds: the same on every machine
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: size, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await cq0.wait(1, { timeout: TIMEOUT_PS });
      if (wc.status !== 'SUCCESS') throw new Error(`RDMA_WRITE of ${size} B: ${wc.status}`);
      return tb.now - t0;
    };
    await write();
    latencyUs = (await write()) / US;
  });
  await tb.close();
  const stats = tb.stats();
  return {
    figures: { latencyUs: +latencyUs.toFixed(3), gbps: +((size * 8) / (latencyUs * 1e3)).toFixed(2) },
    // the counters that explain the figure (numbers only: histograms stay out of points)
    stats: { 'tb.hca0.mtt': numbers(stats['tb.hca0.mtt']), 'tb.hca0.pcie': numbers(stats['tb.hca0.pcie']) },
  };
}

function numbers(s: Record<string, unknown> | undefined): Record<string, number> {
  return Object.fromEntries(Object.entries(s ?? {}).filter((e): e is [string, number] => typeof e[1] === 'number'));
}

const experiment: Experiment = {
  name: 'write-latency',
  summary: 'an example to copy: one RDMA WRITE latency against its size',
  shape: 'latency grows with size: flat while the round trip dominates, then linear at the link rate',
  axes: {
    size: { what: 'bytes of the RDMA WRITE', check: (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 2 ** 24 ? null : 'must be a size in 1 B..16 MiB'), format: 'bytes' },
  },
  grid: {
    full: [{ size: [64, 512, 4 * KiB, 32 * KiB, 256 * KiB, 1024 * KiB] }],
    quick: [{ size: [64, 64 * KiB] }],
  },
  run,
  plot: {
    title: 'One RDMA WRITE: latency against size',
    x: { field: 'size', title: 'RDMA WRITE size', log: true, bytes: true },
    y: { field: 'latencyUs', title: 'post to completion (us, simulated)' },
  },
  checks(points: readonly PointLine[]): ShapeCheck[] {
    const sorted = [...points].sort((x, y) => (x.params.size as number) - (y.params.size as number));
    const grows = sorted.every((p, i) => i === 0 || p.figures.latencyUs >= sorted[i - 1].figures.latencyUs);
    return [{ what: 'latency never falls as the size grows', ok: grows, detail: sorted.map((p) => `${p.figures.latencyUs} us`).join(', ') }];
  },
};
export default experiment;

/** Every point of a grid: each block's cartesian product, the first axis varying slowest. */
function points(blocks: Experiment['grid']['quick']): Params[] {
  return blocks.flatMap((block) =>
    Object.entries(block).reduce<Params[]>((acc, [k, vs]) => acc.flatMap((p) => vs.map((v) => ({ ...p, [k]: v }))), [{}]),
  );
}

// run directly (not imported): the grid, one point after another, then the shape's checks
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const grid = process.argv.includes('--full') ? experiment.grid.full : experiment.grid.quick;
  const lines: PointLine[] = [];
  for (const [index, params] of points(grid).entries()) {
    // the parameters that are not the experiment's own axes are configuration fields
    const config = Object.fromEntries(Object.entries(params).filter(([k]) => !(k in experiment.axes)));
    const r = await run(params, { seed: 1, config });
    lines.push({ experiment: experiment.name, index, params, seed: 1, ...r, wallSeconds: 0 });
    console.log(JSON.stringify({ params, figures: r.figures }));
  }
  const checks = experiment.checks(lines);
  for (const c of checks) console.log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.what}${c.detail ? `: ${c.detail}` : ''}`);
  process.exitCode = checks.every((c) => c.ok) ? 0 : 1;
}
