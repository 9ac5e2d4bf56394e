/**
 * Benchmark runner: `npm run bench -- <name>...` (no name: all). Each benchmark prints JSON
 * lines on stdout. Benchmarks are never part of `npm test`.
 */
import { benchKernel } from './kernel.ts';
import { benchAtu } from './atu.ts';
import { benchVerbs } from './verbs.ts';
import { benchProperty } from './property.ts';
import { benchCliffs } from './cliffs.ts';
import { benchChurn } from './churn.ts';
import { benchFuzz } from './fuzz.ts';
import { benchScale } from './scale.ts';
import { benchSoak } from './soak.ts';
import { benchScaling } from './scaling.ts';

const benches: Record<string, () => void | Promise<void>> = {
  kernel: benchKernel,
  atu: benchAtu,
  verbs: benchVerbs,
  property: benchProperty,
  cliffs: benchCliffs,
  churn: benchChurn,
  fuzz: benchFuzz,
  scale: benchScale,
  soak: benchSoak,
  scaling: benchScaling,
};

const names = process.argv.slice(2);
// soak runs 10 M operations (minutes): only when named, like the others it is never in npm test
const ALL = Object.keys(benches).filter((n) => n !== 'soak');
for (const n of names) {
  if (!(n in benches)) {
    console.error(`unknown benchmark '${n}'; known: ${Object.keys(benches).join(', ')}`);
    process.exit(2);
  }
}
for (const n of names.length ? names : ALL) await benches[n]();
