/**
 * One case of the scaling benchmark in a process of its own (peak RSS and the JIT are the
 * case's own). Usage: scaling_case.ts <qps> <depth> <mrs>; prints the case's JSON line.
 */
import { readDeep } from './verbs.ts';
import { caseOps } from './scaling.ts';

const [qps, depth, mrs] = process.argv.slice(2).map(Number);
const { ops, warm } = caseOps(qps, depth);
const { json } = await readDeep(qps, depth, ops, warm, undefined, mrs);
console.log(JSON.stringify({ ...json, bench: 'scaling', case: 'read-64b' }));
