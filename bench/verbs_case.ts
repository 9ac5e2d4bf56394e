/**
 * One case of the verbs benchmark in a process of its own (bench/verbs.ts runs each case this
 * way: cases sharing a process slow each other through the JIT's feedback and the heap of
 * earlier testbeds). Usage: verbs_case.ts <case> <ops> [vcd]; prints the case's JSON line.
 */
import { odpFault, readDeep, runCase } from './verbs.ts';

const [name, opsText, vcd] = process.argv.slice(2);
const ops = Number(opsText);
if (name === 'read-64b-deep') console.log(JSON.stringify((await readDeep(8, 16, ops, Math.min(20_000, ops))).json));
else if (name === 'odp-fault-4k') console.log(JSON.stringify(await odpFault(ops, vcd)));
else if (name === 'rdma-write-4k' || name === 'frwr-cycle') console.log(JSON.stringify(await runCase(name, ops, vcd)));
else {
  console.error(`verbs_case: unknown case '${name}'`);
  process.exit(2);
}
