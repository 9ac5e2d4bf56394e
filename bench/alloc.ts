/**
 * Bytes allocated per READ, by allocating function: `node --import tsx bench/alloc.ts [qps=4096]
 * [depth=16]` prints one JSON line. V8's sampling heap profiler (objects the collector freed
 * included) records two runs of the read-64b case, one three times as long as the other; the
 * difference of the two divided by the difference in READs leaves out setup and warm-up. What the
 * engines allocate per READ is what the scavenger copies when many READs are in flight (4,096 QPs
 * x 16): see docs/performance.md, "Issue 22: less garbage per READ". Not part of `npm run bench`.
 */
import { Session } from 'node:inspector/promises';
import { readDeep } from './verbs.ts';
import { caseOps } from './scaling.ts';

interface Node {
  id: number;
  callFrame: { functionName: string; url: string };
  children: Node[];
}
interface SamplingProfile {
  head: Node;
  samples: { size: number; nodeId: number }[];
}

const qps = Number(process.argv[2] ?? 4096);
const depth = Number(process.argv[3] ?? 16);
const { ops, warm } = caseOps(qps, depth);

/** Bytes sampled per allocating function (a builtin is named with its caller) over one run of `n` READs. */
async function sampled(s: Session, n: number): Promise<Map<string, number>> {
  await s.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await readDeep(qps, depth, n, warm);
  const { profile } = (await s.post('HeapProfiler.stopSampling')) as unknown as { profile: SamplingProfile };
  const size = new Map<number, number>();
  for (const x of profile.samples) size.set(x.nodeId, (size.get(x.nodeId) ?? 0) + x.size);
  const out = new Map<string, number>();
  const walk = (n: Node, parent: string): void => {
    const f = n.callFrame;
    const name = `${f.functionName || '(anon)'} ${f.url.split('/').slice(-2).join('/')}`;
    const key = f.url === '' ? `${name}< ${parent}` : name;
    const b = size.get(n.id) ?? 0;
    if (b > 0) out.set(key, (out.get(key) ?? 0) + b);
    for (const c of n.children) walk(c, name);
  };
  walk(profile.head, '');
  return out;
}

const s = new Session();
s.connect();
await s.post('HeapProfiler.enable');
const a = await sampled(s, ops);
const b = await sampled(s, 3 * ops);
const reads = 2 * ops;
const perRead = [...new Set([...a.keys(), ...b.keys()])].map((k) => [k, ((b.get(k) ?? 0) - (a.get(k) ?? 0)) / reads] as const);
const total = perRead.reduce((t, [, v]) => t + v, 0);
const sites = perRead
  .map(([k, v]) => [k, Math.round(v)] as const)
  .filter(([, v]) => v >= 16)
  .sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1));
console.log(JSON.stringify({ bench: 'alloc', case: 'read-64b', qps, depth, reads, bytesPerRead: Math.round(total), sites: Object.fromEntries(sites.slice(0, 25)) }));
