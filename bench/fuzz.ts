/**
 * The fuzzers at scale (issue 12), from a fixed seed (FUZZ_SEED):
 * - case "wqe": 100,000 cases (FUZZ_CASES to change) of the generators in
 *   test/support/wqe_fuzz.ts, 100 cases a testbed. Prints
 *   {"bench":"fuzz","case":"wqe","cases","crashes","strayWrites","hangs","seconds", ...} with the
 *   cases whose completions did not account for their WQEs, the cases the reference model
 *   checked and those it disagreed on;
 * - case "cmd": 5,000 sequences (CMD_FUZZ_CASES) of up to 8 raw command-queue postings
 *   (test/support/cmd_fuzz.ts: random commands as bytes, with broken lengths, mailbox chains,
 *   tokens, signatures, types, reserved bytes, ownership, doubled doorbells), each on its own
 *   testbed: postings made, those that did not end with the status mlx5 gives (unclearStatus),
 *   crashes, and sequences after which the adapter no longer worked.
 * The first failures go to stderr with their case, to replay.
 */
import fc from 'fast-check';
import { fuzzCase, openSession, runFuzzCase, type FuzzSession } from '../test/support/wqe_fuzz.ts';
import { post, runCmdCase } from '../test/support/cmd_fuzz.ts';

const PER_SESSION = 100;
const CHUNK = 1000;

export async function benchFuzz(): Promise<void> {
  const total = Number(process.env.FUZZ_CASES ?? 100_000);
  const seed = Number(process.env.FUZZ_SEED ?? 12);
  const t0 = performance.now();
  const r = { bench: 'fuzz', case: 'wqe', cases: 0, crashes: 0, strayWrites: 0, hangs: 0, seconds: 0, incomplete: 0, modelChecked: 0, modelDisagreements: 0, dmaChecked: 0, dmaViolations: 0 };
  let reported = 0;
  let session: FuzzSession | null = null;
  let inSession = 0;
  for (let done = 0; done < total; done += CHUNK) {
    const cases = fc.sample(fuzzCase, { numRuns: Math.min(CHUNK, total - done), seed: seed + done });
    for (const items of cases) {
      if (session === null || inSession >= PER_SESSION) {
        if (session !== null) r.dmaChecked += session.tb.checkers.reduce((n, c) => n + c.checked, 0);
        session = openSession();
        inSession = 0;
      }
      const o = await runFuzzCase(items, session);
      inSession++;
      r.cases++;
      if (o.crash !== null) {
        r.crashes++;
        session = null; // a crashed testbed is not reused
      }
      if (o.hang !== null) r.hangs++;
      r.strayWrites += o.strayWrites;
      r.dmaViolations += o.dmaViolations;
      if (o.completion !== '') r.incomplete++;
      if (o.modelChecked) r.modelChecked++;
      if (o.model !== '') r.modelDisagreements++;
      const bad = o.crash ?? o.hang ?? (o.strayWrites > 0 ? `${o.strayWrites} stray writes` : null) ?? (o.dmaViolation || o.completion || o.model || null);
      if (bad !== null && reported++ < 5) {
        console.error(JSON.stringify({ case: r.cases, failure: bad, items }, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? [...v] : v)));
      }
    }
  }
  if (session !== null) r.dmaChecked += session.tb.checkers.reduce((n, c) => n + c.checked, 0);
  r.seconds = Math.round((performance.now() - t0) / 100) / 10;
  console.log(JSON.stringify(r));
  await benchCmdFuzz(seed);
}

async function benchCmdFuzz(seed: number): Promise<void> {
  const total = Number(process.env.CMD_FUZZ_CASES ?? 5000);
  const t0 = performance.now();
  const r = { bench: 'fuzz', case: 'cmd', cases: 0, commands: 0, crashes: 0, unclearStatus: 0, brokenAfter: 0, closeFailures: 0, seconds: 0 };
  let reported = 0;
  for (let done = 0; done < total; done += CHUNK) {
    for (const cmds of fc.sample(fc.array(post, { minLength: 1, maxLength: 8 }), { numRuns: Math.min(CHUNK, total - done), seed: seed + done })) {
      const bad = await runCmdCase(cmds);
      r.cases++;
      r.commands += cmds.length;
      for (const b of bad) {
        if (b.startsWith('crash')) r.crashes++;
        else if (b.startsWith('the adapter')) r.brokenAfter++;
        else if (b.startsWith('close')) r.closeFailures++; // the driver's close left pages or a live firmware
        else r.unclearStatus++;
      }
      if (bad.length > 0 && reported++ < 5) console.error(JSON.stringify({ case: r.cases, failure: bad, cmds }));
    }
  }
  r.seconds = Math.round((performance.now() - t0) / 100) / 10;
  console.log(JSON.stringify(r));
}
