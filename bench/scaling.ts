/**
 * Scaling (issue 22): the simulator's cost per READ against the number of QPs, their depth and
 * the number of live MRs. Warm 64 B RDMA READs from adapter 0 to adapter 1 (bench/verbs.ts's
 * read-64b-deep) over 8, 64, 512 and 4,096 QPs, each kept 1 or 16 deep, and over 1,000 QPs x 16
 * reading 1,000,000 live one-page MRs at random. Each case runs in a process of its own and
 * prints one JSON line: qps, depth, mrs, simulated READs/s, wall and CPU READs/s
 * (`cpuOpsPerSec`, from process.cpuUsage: steadier on a shared machine) and peak RSS.
 * `npm run bench -- scaling`; `SCALING_CASES=8x16,4096x16,1000x16x1000000` runs some.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** qps x depth [x mrs]. */
const CASES = ['8x1', '64x1', '512x1', '4096x1', '8x16', '64x16', '512x16', '4096x16', '1000x16x1000000'];

/** READs measured, and of warm-up: every QP's window is filled and turned over before timing. */
export function caseOps(qps: number, depth: number): { ops: number; warm: number } {
  return { ops: Math.max(50_000, 2 * qps * depth), warm: Math.max(20_000, qps * depth) };
}

export async function benchScaling(): Promise<void> {
  const cases = process.env.SCALING_CASES?.split(',') ?? CASES;
  for (const c of cases) {
    const [qps, depth, mrs = 1] = c.split('x').map(Number);
    const args = [...process.execArgv, fileURLToPath(new URL('./scaling_case.ts', import.meta.url)), String(qps), String(depth), String(mrs)];
    process.stdout.write(execFileSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 20 }));
  }
}
