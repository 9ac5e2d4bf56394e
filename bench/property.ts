/**
 * The property tests at bench size (`npm run bench -- property`): the ATU against the
 * translation model (10,000 runs) and the verbs model-based test (2,000 sequences), each in its
 * own vitest process. Prints one JSON line per test with its size, outcome and wall time.
 */
import { spawnSync } from 'node:child_process';

const cases = [
  { name: 'atu-vs-model', file: 'test/rtl/translation/atu.test.ts', env: { ATU_RUNS: '10000' }, runs: 10000 },
  { name: 'verbs-model-based', file: 'test/driver/model_based.test.ts', env: { MB_RUNS: '2000' }, runs: 2000 },
];

export function benchProperty(): void {
  for (const c of cases) {
    const t0 = process.hrtime.bigint();
    const r = spawnSync('npx', ['vitest', 'run', c.file], { env: { ...process.env, ...c.env }, encoding: 'utf8' });
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(JSON.stringify({ bench: 'property', case: c.name, runs: c.runs, passed: r.status === 0, seconds: +seconds.toFixed(1) }));
    if (r.status !== 0) process.stderr.write(r.stdout + r.stderr);
  }
}
