/**
 * Engines that sleep while every step they have is refused by a full FIFO (untraced runs only:
 * src/sim/blocked_sleep.ts): the send queue engine with QPs parked for a full requester, the ATU
 * with every context waiting for room. Sleeping must not move anything: completions, their
 * times and every statistic (the stalls of the edges slept included) equal those of a traced
 * run, whose engines tick on every edge. A consumer that pops the head of a FIFO with latency
 * and sleeps in the same edge is woken when the next item is due (src/sim/fifo.ts, armWake), and
 * the ATU still counts the stall of the edge after, where it used to tick (BlockedStalls.oweNext).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Access, Testbed, type Mr } from '../../../src/index.ts';
import { BlockedStalls } from '../../../src/sim/blocked_sleep.ts';
import { openReadPair } from '../../../experiments/support/read_pair.ts';
import { tempDir } from '../../support/tmp.ts';

const QPS = 64;
const DEPTH = 8;
const MRS = 1024;

async function run(vcd?: string): Promise<{ log: string[]; stats: Record<string, Record<string, number>>; ticks: number }> {
  // 512 READs at once, each through one of 1,024 MRs at random: the ATUs miss, every context
  // busy, and the engines before them find their FIFOs full
  const tb = new Testbed({ hcas: 2, ...(vcd ? { trace: { vcd, gtkw: false } } : {}) });
  let ticks = 0;
  for (const m of tb.sim.top.walk()) {
    if (!/\.(sq|atu)$/.test(m.path)) continue;
    const tick = m.tick.bind(m);
    m.tick = () => {
      ticks++;
      tick();
    };
  }
  const log: string[] = [];
  await tb.run(async () => {
    const { pd1, cq, dst, mr0, qps } = await openReadPair(tb, { qps: QPS, dstBytes: 4096 });
    const src = tb.host(1).alloc(4096 * MRS);
    const mrs: Mr[] = [];
    for (let i = 0; i < MRS; i++) mrs.push(await pd1.regMr(src.addr + i * 4096, 4096, Access.REMOTE_READ));
    let x = 12345;
    qps.forEach((q, n) => {
      for (let k = 0; k < DEPTH; k++) {
        x = (x * 1103515245 + 12345) >>> 0;
        const mr = mrs[x % MRS];
        q.postSend({ wrId: n * DEPTH + k, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr + k * 64, length: 64, lkey: mr0.lkey }], remoteAddr: mr.iova + (x % 64) * 64, rkey: mr.rkey, signaled: true });
      }
    });
    for (const w of await cq.wait(QPS * DEPTH)) log.push(`${tb.now} ${w.qpNum} ${String(w.wrId)} ${w.status}`);
  });
  const stats = tb.stats() as Record<string, Record<string, number>>;
  await tb.close();
  return { log, stats, ticks };
}

describe('engines asleep while their FIFOs are full', () => {
  it('count the stalls of the edges slept and change nothing a traced run shows', async () => {
    const plain = await run();
    const traced = await run(join(tempDir('mlx5sim-blocked-'), 'run.vcd'));
    expect(plain.log.length).toBe(QPS * DEPTH);
    expect(plain.log.every((l) => l.endsWith('SUCCESS'))).toBe(true);
    expect(plain.stats['tb.hca0.sq'].engine_full_stalls).toBeGreaterThan(1000);
    expect(plain.stats['tb.hca1.atu'].contexts_full_stalls).toBeGreaterThan(100);
    expect(plain.log).toEqual(traced.log);
    expect(JSON.stringify(plain.stats)).toBe(JSON.stringify(traced.stats));
    // the untraced engines slept through edges the traced ones ticked
    expect(plain.ticks).toBeLessThan(traced.ticks);
  });

  it('reads a sleep under way as the edges up to now', () => {
    const s = new BlockedStalls(10);
    s.counter.inc(2);
    s.begin(1000, 3);
    expect(s.read(1000)).toBe(2);
    expect(s.read(1035)).toBe(2 + 3 * 3);
    s.end(1040); // ticks at 1040: edges 1010, 1020 and 1030 slept
    expect(s.counter.value).toBe(2 + 3 * 3);
    expect(s.sleeping).toBe(false);
    expect(s.read(5000)).toBe(11);
  });

  it('counts a stall owed for the next edge once, unless the module ticks at that edge', () => {
    const s = new BlockedStalls(10);
    s.oweNext(1000); // the edge at 1010
    expect(s.read(1005)).toBe(0);
    expect(s.read(1010)).toBe(1);
    s.ticks(1050); // slept through 1010: its stall counted
    expect(s.counter.value).toBe(1);
    s.oweNext(2000);
    s.ticks(2010); // ticks at that very edge: its own tick counts it
    expect(s.counter.value).toBe(1);
    expect(s.read(9000)).toBe(1);
  });
});
