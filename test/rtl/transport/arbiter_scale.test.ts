/**
 * The send queue engine's arbiter with many QPs waiting for few resources (ready_list.ts): QPs
 * parked for a WQE slot, for room in the requester's queue or for a fetch read are served at
 * their turn, every work request completes in its QP's order with its data, the waits are
 * counted as stalls, and a run is repeated exactly.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Access, Testbed, type Qp } from '../../../src/index.ts';
import { openReadPair } from '../../../experiments/support/read_pair.ts';

const QPS = 48;
const DEPTH = 4;

async function run(nQps = QPS, depth = DEPTH, slots = 32): Promise<{ order: string[]; stats: unknown; data: boolean }> {
  // few slots and requester contexts for many QPs: most QPs wait for one or the other
  const tb = new Testbed({ hcas: 2, config: { sqWqeSlots: slots, requesterContexts: 4 } });
  const order: string[] = [];
  let data = true;
  await tb.run(async () => {
    const { pd1, cq, dst, mr0, qps } = await openReadPair(tb, { qps: nQps, dstBytes: nQps * depth * 64 });
    const src = tb.host(1).alloc(nQps * depth * 64);
    for (let i = 0; i < nQps * depth; i++) tb.host(1).fill(src.addr + i * 64, 64, i & 0xff);
    const mr1 = await pd1.regMr(src.addr, nQps * depth * 64, Access.REMOTE_READ);
    qps.forEach((q: Qp, n) => {
      for (let k = 0; k < depth; k++) {
        const i = n * depth + k;
        q.postSend({ wrId: i, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr + i * 64, length: 64, lkey: mr0.lkey }], remoteAddr: src.addr + i * 64, rkey: mr1.rkey, signaled: true });
      }
    });
    const wcs = await cq.wait(nQps * depth);
    for (const w of wcs) {
      expect(w.status).toBe('SUCCESS');
      order.push(`${w.qpNum}:${String(w.wrId)}`);
    }
    const mem = tb.host(0).read(dst.addr, nQps * depth * 64);
    for (let i = 0; i < nQps * depth * 64; i++) if (mem[i] !== ((i >> 6) & 0xff)) data = false;
  });
  await tb.close();
  return { order, stats: tb.stats(), data };
}

describe('send queue arbiter under many QPs', () => {
  it('parks QPs for slots, the requester and fetches, completes every READ in its QP order, and repeats exactly', async () => {
    const a = await run();
    expect(a.data).toBe(true);
    // per QP, completions in posting order
    const byQp = new Map<string, number[]>();
    for (const o of a.order) {
      const [q, id] = o.split(':');
      byQp.set(q, [...(byQp.get(q) ?? []), Number(id)]);
    }
    expect(byQp.size).toBe(QPS);
    for (const ids of byQp.values()) expect(ids).toEqual([...ids].sort((x, y) => x - y));
    const sq = (a.stats as Record<string, Record<string, number>>)['tb.hca0.sq'];
    expect(sq.slots_full_stalls).toBeGreaterThan(0);
    expect(sq.engine_full_stalls).toBeGreaterThan(0);
    expect(sq.slots_peak).toBe(31); // every slot but the one kept for the driver's UMR QP
    const b = await run();
    expect(b.order).toEqual(a.order);
    expect(JSON.stringify(b.stats)).toBe(JSON.stringify(a.stats));
  });

  it('wakes the QPs waiting for a slot as runs with the results of waking them one by one', async () => {
    // 300 QPs x 3 READs for 16 slots: some 280 QPs wait, woken as runs at every slot given back.
    // Digest of the completion order and every statistic, taken from the engine that woke each
    // waiting QP alone (before slot_waiters.ts; equal at 40x8 .. 2048x16), then taken again
    // when the MR cache, the command queue, the fence modes and the UMR's DMA fence changed what
    // a run does, and the driver's start-up gave ICM pages, and again when QP, CQ and EQ contexts
    // took ICM pages (300 QPs raise PAGE_REQUESTs) and the page counters grew, and when the
    // command doorbell started its entry's fetch at once (the completion order the same, only
    // the start-up's PCIe and command statistics moved; the run-waking engine unchanged each time)
    const a = await run(300, 3, 16);
    expect(a.data).toBe(true);
    const sq = (a.stats as Record<string, Record<string, number>>)['tb.hca0.sq'];
    expect(sq.slots_full_stalls).toBeGreaterThan(10_000);
    const digest = createHash('sha1').update(JSON.stringify([a.order, a.stats])).digest('hex');
    expect(digest).toBe('ea3fe3f2ad8be814f246a1c2121a41f9f73e3f18');
  });
});
