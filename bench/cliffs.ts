/**
 * The two cache cliffs of the data path, measured in simulated time: random 64 B RDMA READs
 * from adapter 0 to adapter 1 over 8 QPs x 16 outstanding, against
 * - the working set (one MR of 64 KiB .. 1 GiB, 4 KiB pages): the MTT cache's reach is
 *   4096 lines x 8 MTTs x 4 KiB = 128 MiB;
 * - the number of MRs (16 .. 16,384 one-page MRs, each READ to a random one): the mkey cache
 *   holds 512 contexts.
 * Prints one JSON line per point: READs per simulated second and the responder's cache stats.
 * `npm run bench -- cliffs` (a few minutes); the README's tables come from it.
 */
import { Access, Testbed, type Mr, type Qp } from '../src/index.ts';

interface Point {
  mrs: number;
  bytesPerMr: number;
}

const QPS = 8;
const DEPTH = 16;

/** A small deterministic generator (xorshift32) for the READ targets. */
function xorshift(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 2 ** 32;
  };
}

export async function randomReads(p: Point, warm: number, reads: number): Promise<Record<string, unknown>> {
  const tb = new Testbed({ hcas: 2 });
  let simPs = 0;
  let stats: Record<string, Record<string, unknown>> = {};
  let before: Record<string, Record<string, unknown>> = {};
  await tb.run(async () => {
    const c0 = await tb.openDevice(0);
    const c1 = await tb.openDevice(1);
    const pd0 = await c0.allocPd();
    const pd1 = await c1.allocPd();
    const cq = await c0.createCq(4096);
    const cq1 = await c1.createCq(256);
    const dst = tb.host(0).alloc(64 * 1024);
    const mr0 = await pd0.regMr(dst.addr, dst.length, Access.LOCAL_WRITE);
    // the QPs first: their queue buffers need 2 MiB of contiguous frames, which a large
    // scattered allocation may leave none of
    const qps: Qp[] = [];
    for (let i = 0; i < QPS; i++) {
      const a = await pd0.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 64 });
      const b = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await a.connect(b);
      qps.push(a);
    }
    const targets: Mr[] = [];
    if (p.mrs === 1) {
      const src = tb.host(1).alloc(p.bytesPerMr);
      targets.push(await pd1.regMr(src.addr, p.bytesPerMr, Access.LOCAL_WRITE | Access.REMOTE_READ));
    } else {
      const src = tb.host(1).alloc(p.mrs * 4096);
      for (let i = 0; i < p.mrs; i++) targets.push(await pd1.regMr(src.addr + i * 4096, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ));
    }
    const byQpn = new Map(qps.map((q) => [q.qpNum, q]));
    const rnd = xorshift(0x5eed + p.mrs * 31 + p.bytesPerMr);
    const post = (q: Qp, id: number): void => {
      const mr = targets[Math.floor(rnd() * targets.length)];
      const off = Math.floor(rnd() * (mr.length / 64)) * 64;
      q.postSend({ wrId: id, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr + (id % 1024) * 64, length: 64, lkey: mr0.lkey }], remoteAddr: mr.iova + off, rkey: mr.rkey, signaled: true });
    };
    let posted = 0;
    for (const q of qps) for (let d = 0; d < DEPTH; d++) post(q, posted++);
    let done = 0;
    let s0 = -1;
    const total = warm + reads;
    while (done < total) {
      if (done >= warm && s0 < 0) {
        s0 = tb.now;
        before = tb.stats();
      }
      const wcs = await cq.wait(Math.max(1, Math.min(total - done, (QPS * DEPTH) >> 3)));
      for (const wc of wcs.concat(cq.poll(4096))) {
        if (wc.status !== 'SUCCESS') throw new Error(`cliffs: ${wc.status}`);
        done++;
        if (posted < total + QPS * DEPTH) post(byQpn.get(wc.qpNum)!, posted++);
      }
    }
    simPs = tb.now - s0;
    stats = tb.stats();
  });
  await tb.close();
  const d = (scope: string, k: string): number => (stats[scope][k] as number) - (before[scope][k] as number);
  return {
    bench: 'cliffs',
    mrs: p.mrs,
    bytesPerMr: p.bytesPerMr,
    workingSetBytes: p.mrs * p.bytesPerMr,
    reads,
    simReadsPerSec: Math.round(reads / (simPs / 1e12)),
    mkeyMissRate: +(d('tb.hca1.mkey_cache', 'misses') / (d('tb.hca1.mkey_cache', 'hits') + d('tb.hca1.mkey_cache', 'misses'))).toFixed(3),
    mttMissRate: +(d('tb.hca1.mtt', 'misses') / (d('tb.hca1.mtt', 'hits') + d('tb.hca1.mtt', 'misses'))).toFixed(3),
    atuContextsPeak: stats['tb.hca1.atu'].contexts_peak,
    atuContextStalls: d('tb.hca1.atu', 'contexts_full_stalls'),
    mttMshrStalls: d('tb.hca1.mtt', 'mshrs_full_stalls'),
    mkeyMshrStalls: d('tb.hca1.mkey_cache', 'mshrs_full_stalls'),
    pcieMaxOutstanding: stats['tb.hca1.pcie'].max_outstanding,
    pcieTagStalls: d('tb.hca1.pcie', 'tag_stalls'),
    responderContextsPeak: stats['tb.hca1.responder'].contexts_peak,
  };
}

export async function benchCliffs(): Promise<void> {
  for (let w = 64 * 1024; w <= 2 ** 30; w *= 4) console.log(JSON.stringify(await randomReads({ mrs: 1, bytesPerMr: w }, 20_000, 20_000)));
  for (let n = 16; n <= 16384; n *= 4) console.log(JSON.stringify(await randomReads({ mrs: n, bytesPerMr: 4096 }, 20_000, 20_000)));
}
