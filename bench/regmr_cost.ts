/**
 * What one `regMr` costs the simulator once the MR cache's pre-fill is used up (live-mrs's
 * steady state: a CREATE_MKEY through the command queue and an enabling UMR per MR): CPU per
 * MR, scheduled events, process resumptions and firmware commands per MR, the MR cache's hits
 * and misses in the timed window, simulated time per MR, and a digest of the statistics and the
 * end time, which a change that must not alter what is simulated keeps.
 * `node --import tsx bench/regmr_cost.ts [N=5000]` prints one JSON line. Also the pre-fill's CPU
 * (two adapters opened and quiesced). Not part of `npm run bench`.
 */
import { createHash } from 'node:crypto';
import { Sim } from '../src/sim/sim.ts';
import { Testbed, Access } from '../src/index.ts';
import { openReadPair } from '../experiments/support/read_pair.ts';

const S = Sim.prototype as unknown as { runEvents(l: number): number };
const runEvents = S.runEvents;
let events = 0;
S.runEvents = function (l) { const n = runEvents.call(this, l); events += n; return n; };

const N = Number(process.argv[2] ?? 5000);
// past the one-page bucket's pre-fill (twice its limit of 250): from here on each MR costs one
// CREATE_MKEY, a background fill or (when the fills fall behind) a miss made at once, and its UMR
const DRAIN = 7000;
const cpuMs = (c: NodeJS.CpuUsage): number => (c.user + c.system) / 1000;
const tb = new Testbed({ hcas: 2, seed: 1 });
let out: Record<string, unknown> = {};
await tb.run(async () => {
  const c0 = process.cpuUsage();
  const { pd1 } = await openReadPair(tb, { qps: 8, dstBytes: 65536 });
  await tb.quiesce();
  const prefillCpuS = cpuMs(process.cpuUsage(c0)) / 1000;
  const prefillEndPs = tb.now;
  const src = tb.host(1).alloc((N + DRAIN) * 4096);
  let i = 0;
  for (; i < DRAIN; i++) await pd1.regMr(src.addr + i * 4096, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ);
  const e0 = events;
  const s0 = tb.sim.drains;
  const cmd0 = pd1.ctx.cmdq.posted;
  const b0 = pd1.ctx.pool.stats().buckets[0]; // the smallest bucket (4 entries): a one-page MR's
  const t0 = tb.now;
  const c1 = process.cpuUsage();
  let last = 0;
  for (let k = 0; k < N; k++, i++) last = (await pd1.regMr(src.addr + i * 4096, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ)).rkey;
  const cpu = cpuMs(process.cpuUsage(c1));
  const b1 = pd1.ctx.pool.stats().buckets[0];
  out = {
    bench: 'regmr-cost', mrs: N, cpuUsPerMr: Math.round((cpu * 1000) / N), eventsPerMr: +((events - e0) / N).toFixed(2),
    resumptionsPerMr: +((tb.sim.drains - s0) / N).toFixed(2), cmdsPerMr: +((pd1.ctx.cmdq.posted - cmd0) / N).toFixed(3),
    cacheHits: b1.hits - b0.hits, cacheMisses: b1.misses - b0.misses, simNsPerMr: Math.round((tb.now - t0) / N / 1000),
    prefillCpuS: +prefillCpuS.toFixed(2), prefillEndPs, endPs: tb.now, lastRkey: last,
    statsDigest: createHash('sha1').update(JSON.stringify(tb.stats())).digest('hex').slice(0, 16),
  };
});
console.log(JSON.stringify(out));
