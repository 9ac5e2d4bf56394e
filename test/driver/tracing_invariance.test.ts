/**
 * Tracing must not change what the model does: modules that pulse a traced handshake stay awake
 * one more edge to lower it, untraced they sleep at once, and producers are woken only when they
 * found a FIFO full. Neither may move a single event: the completions, their times, the memory
 * and the statistics of a traced run (waves, pcap and transaction log) equal those of the untraced one.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Access, Testbed, type Mr, type WorkCompletion } from '../../src/index.ts';
import { tempDir } from '../support/tmp.ts';
import { rcPair } from '../support/rc_pair.ts';
import { openReadPair } from '../../experiments/support/read_pair.ts';

/**
 * READs spread over many one-page MRs: every READ misses the responder's mkey cache, its ATU's
 * contexts fill, and the responder's contexts park for the ATU port (untraced, it sleeps then).
 */
async function atuBound(vcd?: string): Promise<{ log: string[]; now: number; stats: Record<string, Record<string, number>> }> {
  const tb = new Testbed({ hcas: 2, seed: 3, config: { mrCacheLimit: 0 }, ...(vcd ? { trace: { vcd, gtkw: false } } : {}) });
  const log: string[] = [];
  await tb.run(async () => {
    const { pd1, cq, dst, mr0, qps } = await openReadPair(tb, { qps: 12, dstBytes: 4096 }); // 192 READs in flight: more than the 128 responder contexts
    const src = tb.host(1).alloc(300 * 4096);
    const mrs: Mr[] = [];
    for (let i = 0; i < 300; i++) mrs.push(await pd1.regMr(src.addr + i * 4096, 4096, Access.REMOTE_READ));
    let posted = 0;
    const post = (k: number): void => {
      const mr = mrs[(posted * 7919) % mrs.length];
      qps[k].postSend({ wrId: posted, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr + (posted % 64) * 64, length: 64, lkey: mr0.lkey }], remoteAddr: mr.iova + (posted % 64) * 64, rkey: mr.rkey, signaled: true });
      posted++;
    };
    for (let k = 0; k < qps.length; k++) for (let d = 0; d < 16; d++) post(k);
    let done = 0;
    while (done < 1500) {
      for (const wc of await cq.wait(8)) {
        log.push(`${tb.now} ${String(wc.wrId)} ${wc.status}`);
        done++;
        post(qps.findIndex((q) => q.qpNum === wc.qpNum));
      }
    }
  });
  const out = { log, now: tb.now, stats: tb.stats() as Record<string, Record<string, number>> };
  await tb.close();
  return out;
}

async function workload(vcd?: string): Promise<{ log: string[]; mem: Uint8Array; now: number; stats: unknown }> {
  // traced: the waves, the pcap of the wire and the transaction log, all at once
  const tb = new Testbed({ hcas: 2, seed: 7, ...(vcd ? { trace: { vcd, gtkw: false, pcap: vcd.replace(/\.vcd$/, '.pcap'), txlog: vcd.replace(/\.vcd$/, '.txlog.jsonl') } } : {}) });
  const log: string[] = [];
  const note = (wcs: WorkCompletion[]): void => {
    for (const w of wcs) log.push(`${tb.now} ${String(w.wrId)} ${w.status} ${w.opcode} ${w.byteLen}`);
  };
  let mem: Uint8Array = new Uint8Array(0);
  await tb.run(async () => {
    const { pd0, pd1, cq0, qp0 } = await rcPair(tb, { maxSendWr: 32 });
    const a = tb.host(0).alloc(16384);
    const b = tb.host(1).alloc(16384);
    for (let i = 0; i < 16384; i += 4096) tb.host(0).fill(a.addr + i, 4096, i / 4096 + 1);
    const mr0 = await pd0.regMr(a.addr, 16384, Access.LOCAL_WRITE);
    const mr1 = await pd1.regMr(b.addr, 16384, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ | Access.REMOTE_ATOMIC);
    const fmr = await pd0.allocMr('MEM_REG', 4);
    for (let round = 0; round < 3; round++) {
      // a burst of writes (FIFOs fill up, producers block), a read, an atomic, and a fast registration
      for (let i = 0; i < 8; i++) {
        qp0.postSend({ wrId: round * 100 + i, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + (i % 4) * 4096, length: 1000 + i * 300, lkey: mr0.lkey }], remoteAddr: b.addr + (i % 4) * 4096, rkey: mr1.rkey, signaled: i % 3 === 0 });
      }
      qp0.postSend({ wrId: round * 100 + 50, opcode: 'RDMA_READ', sgList: [{ addr: a.addr + 12288, length: 2048, lkey: mr0.lkey }], remoteAddr: b.addr + 100, rkey: mr1.rkey, signaled: true });
      qp0.postSend({ wrId: round * 100 + 60, opcode: 'ATOMIC_FETCH_AND_ADD', sgList: [{ addr: a.addr + 8, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr + 8, rkey: mr1.rkey, compareAdd: round + 1, signaled: true });
      fmr.updateKey((fmr.lkey + 1) & 0xff);
      fmr.mapSg([{ addr: a.addr, length: 8192 }]);
      qp0.postSend([
        { wrId: round * 100 + 70, opcode: 'REG_MR', mr: fmr, key: fmr.lkey, access: Access.LOCAL_WRITE, signaled: true },
        { wrId: round * 100 + 71, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr + 100, length: 5000, lkey: fmr.lkey }], remoteAddr: b.addr + 4000, rkey: mr1.rkey, signaled: true },
      ]);
      note(await cq0.wait(7));
      // invalidated once the WRITE through it is done: no fence orders a kernel LOCAL_INV after
      // a WRITE (mlx5 wr.c), so a ULP invalidates after the completion
      qp0.postSend({ wrId: round * 100 + 72, opcode: 'LOCAL_INV', invalidateRkey: fmr.lkey, signaled: true });
      note(await cq0.wait(1));
    }
    mem = tb.host(1).read(b.addr, 16384);
  });
  const out = { log, mem, now: tb.now, stats: tb.stats() };
  await tb.close();
  return out;
}

describe('tracing does not change the simulation', () => {
  it('a traced run has the same completions, times, memory and statistics as an untraced one', async () => {
    const plain = await workload();
    const traced = await workload(join(tempDir('mlx5sim-trace-inv-'), 'run.vcd'));
    expect(plain.log.length).toBe(24);
    expect(plain.log.every((l) => l.includes('SUCCESS'))).toBe(true);
    expect(traced.log).toEqual(plain.log);
    expect(traced.now).toBe(plain.now);
    expect(traced.mem).toEqual(plain.mem);
    expect(traced.stats).toEqual(plain.stats);
  });

  it('so does a run bound by the ATU, where the untraced responder sleeps with its contexts parked', async () => {
    const plain = await atuBound();
    const traced = await atuBound(join(tempDir('mlx5sim-trace-inv-'), 'atu.vcd'));
    expect(plain.log.length).toBeGreaterThanOrEqual(1500);
    expect(plain.log.every((l) => l.endsWith('SUCCESS'))).toBe(true);
    // the regime the case is for: the ATU's contexts full, messages waiting for a responder context
    expect(plain.stats['tb.hca1.atu'].contexts_full_stalls).toBeGreaterThan(0);
    expect(plain.stats['tb.hca1.responder'].contexts_full_stalls).toBeGreaterThan(0);
    expect(traced.log).toEqual(plain.log);
    expect(traced.now).toBe(plain.now);
    expect(traced.stats).toEqual(plain.stats);
  });
});
