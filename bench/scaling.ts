/**
 * Scaling (issue 22): the simulator's cost per READ against the number of QPs, their depth and
 * the number of live MRs. Warm 64 B RDMA READs from adapter 0 to adapter 1 (bench/verbs.ts's
 * read-64b-deep) over 8, 64, 512 and 4,096 QPs, each kept 1 or 16 deep, and over 1,000 QPs x 16
 * reading 1,000,000 live one-page MRs at random. Each case runs in a process of its own and
 * prints one JSON line: qps, depth, mrs, simulated READs/s, wall and CPU READs/s
 * (`cpuOpsPerSec`, from process.cpuUsage: steadier on a shared machine) and peak RSS.
 * `npm run bench -- scaling`; `SCALING_CASES=8x16,4096x16,1000x16x1000000` runs some, and
 * `SCALING_RUNS=5` each five times (below).
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** qps x depth [x mrs]. */
const CASES = ['8x1', '64x1', '512x1', '4096x1', '8x16', '64x16', '512x16', '4096x16', '1000x16x1000000'];

/** READs measured, and of warm-up: every QP's window is filled and turned over before timing. */
export function caseOps(qps: number, depth: number): { ops: number; warm: number } {
  return { ops: Math.max(50_000, 2 * qps * depth), warm: Math.max(20_000, qps * depth) };
}

/** One case's JSON line, as scaling_case.ts prints it. */
interface CaseLine {
  qps: number;
  depth: number;
  cpuOpsPerSec: number;
  [field: string]: unknown;
}

/**
 * `SCALING_RUNS=N` runs the whole list N times, case after case in each round (so a slow stretch
 * of a shared machine falls on several cases, not on every run of one), and prints for each case,
 * during the last round, the run with the median CPU rate, with every run's rate in order
 * (`cpuOpsPerSecRuns`). Each line also gives `cpuCostVs8`: CPU per READ against the 8-QP case of
 * the same depth, when the list has it before. With several rounds it is the median of each
 * round's ratio to that round's own 8-QP run (`cpuCostVs8Runs`): two runs a minute apart share
 * the machine's state far more often than two runs of different rounds, whose speed on a shared
 * host can differ 2x, so the ratio of two medians says less than the median of paired ratios.
 */
export async function benchScaling(): Promise<void> {
  const cases = process.env.SCALING_CASES?.split(',') ?? CASES;
  for (const c of cases) {
    if (!/^\d+x\d+(x\d+)?$/.test(c)) throw new Error(`SCALING_CASES: '${c}' is not QPSxDEPTH or QPSxDEPTHxMRS (e.g. 4096x16, 1000x16x1000000)`);
  }
  const runs = Number(process.env.SCALING_RUNS ?? 1);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`SCALING_RUNS: '${process.env.SCALING_RUNS}' is not a positive integer`);
  const byCase = new Map<string, CaseLine[]>(cases.map((c) => [c, []]));
  // depth -> the 8-QP case's CPU rate in each round so far
  const base = new Map<number, number[]>();
  const ratios = new Map<string, number[]>(cases.map((c) => [c, []]));
  for (let round = 0; round < runs; round++) {
    for (const c of cases) {
      const [qps, depth, mrs = 1] = c.split('x').map(Number);
      const args = [...process.execArgv, fileURLToPath(new URL('./scaling_case.ts', import.meta.url)), String(qps), String(depth), String(mrs)];
      const line = JSON.parse(execFileSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 20 })) as CaseLine;
      const all = byCase.get(c)!;
      all.push(line);
      if (qps === 8 && mrs === 1) (base.get(depth) ?? base.set(depth, []).get(depth)!)[round] = line.cpuOpsPerSec;
      const b = mrs === 1 ? base.get(depth)?.[round] : undefined;
      if (b !== undefined) ratios.get(c)!.push(b / line.cpuOpsPerSec);
      if (round < runs - 1) continue;
      const median = medianOf(all, (l) => l.cpuOpsPerSec);
      const out: Record<string, unknown> = { ...median };
      if (runs > 1) {
        out.runs = runs;
        out.cpuOpsPerSecRuns = all.map((l) => l.cpuOpsPerSec);
      }
      const rs = ratios.get(c)!;
      if (rs.length > 0) {
        out.cpuCostVs8 = +medianOf(rs, (r) => r).toFixed(2);
        if (runs > 1) out.cpuCostVs8Runs = rs.map((r) => +r.toFixed(2));
      }
      console.log(JSON.stringify(out));
    }
  }
}

/** The median element by `key` (the lower of the two middle ones for an even count). */
export function medianOf<T>(xs: readonly T[], key: (x: T) => number): T {
  const sorted = [...xs].sort((a, b) => key(a) - key(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}
