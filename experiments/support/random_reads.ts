/**
 * The workload of the throughput experiments (the one bench/cliffs.ts measures with): random
 * small RDMA READs from adapter 0 to adapter 1 over 8 QPs x 16 outstanding, against one MR of a
 * working set (4 KiB or 2 MiB pages) or against many one-page MRs; READs per simulated second
 * after a warm-up, and the responder's cache statistics over the measured window. A co-tenant
 * process on the responder's host may run beside it (dereg-storm).
 */
import { Access, Testbed, type Context, type HcaConfig, type Mr, type Pd, type Qp } from '../../src/index.ts';
import { counters, delta, missRate, type Counters } from './stats.ts';
import { openReadPair } from './read_pair.ts';

export const PAGE_4K = 4096;
export const PAGE_2M = 2 * 1024 * 1024;
const QPS = 8;
const DEPTH = 16;

/** The responder's modules whose counters explain a throughput. */
const SCOPES = ['tb.hca1.mkey_cache', 'tb.hca1.mtt', 'tb.hca1.atu', 'tb.hca1.pcie', 'tb.hca1.responder'];

/** A small deterministic generator (xorshift32). */
export function xorshift(seed: number): () => number {
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

/** FNV-1a of a text: mixes a point's parameters into its workload's seed. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

export interface ReadsOptions {
  seed: number;
  config: Partial<HcaConfig>;
  /** Bytes per READ. */
  readBytes: number;
  /** One MR over a working set of this many bytes ... */
  workingSet?: number;
  /** ... in pages of this size (2 MiB: huge-page memory, registered with 2 MiB MTT entries) ... */
  pageSize?: number;
  /** ... or this many one-page (4 KiB) MRs, each READ to a random one. */
  mrs?: number;
  warm: number;
  reads: number;
  /**
   * A process on the responder's host, started before the READs: they start once it calls
   * `ready()` (its steady state); it stops when `running()` turns false and returns its figures.
   */
  cotenant?(tb: Testbed, ctx: Context, running: () => boolean, ready: () => void): Promise<Record<string, number>>;
}

export interface ReadsResult {
  /** Completions in the measured window over its length (not `reads`: batches overshoot it). */
  readsPerSec: number;
  /** Completions polled in the measured window: `reads`, give or take a batch at each end. */
  measured: number;
  /** The window's length, simulated ps. */
  windowPs: number;
  gbps: number;
  mkeyMissRate: number;
  mttMissRate: number;
  atuContextStalls: number;
  stats: Counters;
  cotenant: Record<string, number>;
}

/**
 * The target MR of `bytes` over `pageSize` pages on the responder, by regMr as a user registers
 * it: over huge-page memory for 2 MiB pages, where regMr picks 2 MiB MTT entries (as mlx5's
 * mlx5_umem_find_best_pgsz does).
 */
async function targetMr(tb: Testbed, pd: Pd, bytes: number, pageSize: number): Promise<Mr> {
  const src = pageSize === PAGE_4K ? tb.host(1).alloc(bytes) : tb.host(1).alloc(bytes, { hugePages: true, align: pageSize });
  return pd.regMr(src.addr, bytes, Access.LOCAL_WRITE | Access.REMOTE_READ);
}

export async function randomReads(o: ReadsOptions): Promise<ReadsResult> {
  const tb = new Testbed({ hcas: 2, seed: o.seed, config: o.config });
  let simPs = 0;
  let measured = 0;
  let d: Counters = {};
  let co: Record<string, number> = {};
  await tb.run(async () => {
    const { c1, pd1, cq, dst, mr0, qps } = await openReadPair(tb, { qps: QPS, dstBytes: 64 * 1024 });
    const targets: Mr[] = [];
    if (o.mrs === undefined) {
      targets.push(await targetMr(tb, pd1, o.workingSet ?? PAGE_4K, o.pageSize ?? PAGE_4K));
    } else {
      const src = tb.host(1).alloc(o.mrs * PAGE_4K);
      for (let i = 0; i < o.mrs; i++) targets.push(await pd1.regMr(src.addr + i * PAGE_4K, PAGE_4K, Access.LOCAL_WRITE | Access.REMOTE_READ));
    }
    const byQpn = new Map(qps.map((q) => [q.qpNum, q]));
    const rnd = xorshift(o.seed ^ hash32(JSON.stringify([o.workingSet, o.pageSize, o.mrs, o.readBytes])));
    // whole READ-sized slots of the destination and of the MR: a size that divides neither
    // (3000 B) leaves a tail unused rather than a READ running past the end
    const slots = Math.floor(dst.length / o.readBytes);
    const post = (q: Qp, id: number): void => {
      const mr = targets[Math.floor(rnd() * targets.length)];
      const off = Math.floor(rnd() * Math.floor(mr.length / o.readBytes)) * o.readBytes;
      q.postSend({ wrId: id, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr + (id % slots) * o.readBytes, length: o.readBytes, lkey: mr0.lkey }], remoteAddr: mr.iova + off, rkey: mr.rkey, signaled: true });
    };
    let running = true;
    let cotenant: Promise<Record<string, number>> | null = null;
    if (o.cotenant) {
      let go = (): void => {};
      const ready = new Promise<void>((r) => { go = r; });
      cotenant = tb.spawn(() => o.cotenant!(tb, c1, () => running, go));
      await ready;
    }
    let posted = 0;
    for (const q of qps) for (let k = 0; k < DEPTH; k++) post(q, posted++);
    let done = 0;
    let s0 = -1;
    // completions are polled in batches: the window starts and ends past o.warm and
    // o.warm + o.reads, so it holds what `done` says at its ends, not exactly o.reads
    let doneAtS0 = 0;
    let before: Counters = {};
    const total = o.warm + o.reads;
    while (done < total) {
      if (done >= o.warm && s0 < 0) {
        s0 = tb.now;
        doneAtS0 = done;
        before = counters(tb.stats(), SCOPES);
      }
      const wcs = await cq.wait(Math.max(1, Math.min(total - done, (QPS * DEPTH) >> 3)));
      for (const wc of wcs.concat(cq.poll(4096))) {
        if (wc.status !== 'SUCCESS') throw new Error(`random READs: ${wc.status}`);
        done++;
        if (posted < total + QPS * DEPTH) post(byQpn.get(wc.qpNum)!, posted++);
      }
    }
    simPs = tb.now - s0;
    measured = done - doneAtS0;
    d = delta(counters(tb.stats(), SCOPES), before);
    running = false;
    if (cotenant) co = await cotenant;
    await tb.quiesce();
  });
  await tb.close();
  return {
    readsPerSec: Math.round(measured / (simPs / 1e12)),
    measured,
    windowPs: simPs,
    gbps: +((measured * o.readBytes * 8) / (simPs / 1e12) / 1e9).toFixed(3),
    mkeyMissRate: missRate(d['tb.hca1.mkey_cache']),
    mttMissRate: missRate(d['tb.hca1.mtt']),
    atuContextStalls: d['tb.hca1.atu']?.contexts_full_stalls ?? 0,
    stats: d,
    cotenant: co,
  };
}
