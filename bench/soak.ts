/**
 * Soak (issue 17): SOAK_OPS operations (default 10,000,000) over SOAK_QPS QP pairs (default
 * 1,000), the DMA checker on. 64 B RDMA READs and WRITEs from adapter 0 to adapter 1, each QP
 * with 8 outstanding (completions moderated, one signaled in four); one QP in 100
 * (SOAK_ODP_EVERY) works on an ODP MR of adapter 1, whose pages are dropped (madviseDontNeed: a
 * zap UMR and the DMA fence) every 10,000 operations under the traffic and faulted back by the
 * next access (responder faults, RNR-NAK and retry); churn: a pooled MR registered and
 * deregistered on each adapter every 10,000 operations and a QP pair destroyed and made again
 * every 100,000 (a shorter run scales these: one in 1,000 and one in 100 of its operations). Prints one JSON line:
 * operations, DMA checks and violations (0), faults, invalidations, churn, wall seconds, and RSS
 * and heap after warm-up (the first 5%) against the end (after a collection with --expose-gc:
 * `node --expose-gc --import tsx bench/run.ts soak`), with the peak RSS. Never part of npm test.
 */
import { Access, Testbed, type Mr, type Pd, type Qp } from '../src/index.ts';

const MOD = 4;
const DEPTH = 8; // outstanding per QP
const ODP_PAGES = 64;
/** One QP in this many works on the ODP MR. */
const ODP_EVERY = Number(process.env.SOAK_ODP_EVERY ?? 100);

interface Pair {
  q0: Qp;
  q1: Qp;
  odp: boolean;
  /** Signaled batches outstanding. */
  out: number;
  /** Draining for churn: post nothing more. */
  retiring: boolean;
}

export async function benchSoak(): Promise<void> {
  const total = Number(process.env.SOAK_OPS ?? 10_000_000);
  const nQps = Number(process.env.SOAK_QPS ?? 1000);
  const warm = Math.floor(total / 20);
  const gc = (globalThis as { gc?: () => void }).gc;
  const mem = (): { rss: number; heap: number } => {
    gc?.();
    const m = process.memoryUsage();
    return { rss: Math.round(m.rss / 2 ** 20), heap: Math.round((m.heapUsed / 2 ** 20) * 10) / 10 };
  };
  const tb = new Testbed({ hcas: 2, trace: { checkDma: true } });
  const t0 = performance.now();
  let atWarm = { rss: 0, heap: 0 };
  let done = 0;
  let invalidations = 0;
  let mrChurn = 0;
  let qpChurn = 0;
  await tb.run(async () => {
    const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
    const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
    const cq0 = await c0.createCq(16384);
    const cq1 = await c1.createCq(64);
    const dst = tb.host(0).alloc(64 * 4096);
    const mr0 = await pd0.regMr(dst.addr, 64 * 4096, Access.LOCAL_WRITE);
    const src = tb.host(1).alloc(64 * 4096);
    tb.host(1).fill(src.addr, 64 * 4096, 0x5a);
    const acc = Access.LOCAL_WRITE | Access.REMOTE_READ | Access.REMOTE_WRITE;
    const mr1 = await pd1.regMr(src.addr, 64 * 4096, acc);
    const odpBuf = tb.host(1).alloc(ODP_PAGES * 4096);
    const omr = await pd1.regMr(odpBuf.addr, ODP_PAGES * 4096, acc | Access.ON_DEMAND);
    const makePair = async (i: number): Promise<Pair> => {
      const q0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0, maxSendWr: 2 * DEPTH });
      const q1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
      await q0.connect(q1);
      return { q0, q1, odp: i % ODP_EVERY === 0, out: 0, retiring: false };
    };
    const pairs: Pair[] = [];
    for (let i = 0; i < nQps; i++) pairs.push(await makePair(i));
    const byQpn = new Map<number, number>(pairs.map((p, i) => [p.q0.qpNum, i]));
    let posted = 0;
    const post = (i: number): void => {
      const p = pairs[i];
      const wrs = [];
      for (let k = 0; k < MOD; k++, posted++) {
        const slot = (posted * 7 + i) % 64;
        const remote: { base: number; mr: Mr } = p.odp ? { base: odpBuf.addr + (i % ODP_PAGES) * 4096, mr: omr } : { base: src.addr + slot * 4096, mr: mr1 };
        wrs.push({
          wrId: posted, opcode: posted % 3 === 0 ? ('RDMA_WRITE' as const) : ('RDMA_READ' as const), signaled: k === MOD - 1,
          sgList: [{ addr: dst.addr + slot * 4096 + (posted % 64) * 64, length: 64, lkey: mr0.lkey }],
          remoteAddr: remote.base + ((posted >> 2) % 64) * 64, rkey: remote.mr.rkey,
        });
      }
      p.q0.postSend(wrs);
      p.out++;
    };
    process.stderr.write(`soak: ${nQps} QP pairs made in ${Math.round(performance.now() - t0)} ms\n`);
    for (let i = 0; i < nQps; i++) for (let d = 0; d < DEPTH; d += MOD) post(i);
    let nextReport = Math.min(1_000_000, Math.max(10_000, total / 10));
    const churnMr = async (pd: Pd, h: number): Promise<void> => {
      const b = tb.host(h).alloc(4096);
      const m = await pd.regMr(b.addr, 4096, Access.LOCAL_WRITE);
      await m.dereg();
      await tb.host(h).munmap(b.addr, 4096);
      mrChurn++;
    };
    // the mix scales with the run: at 10 M, an invalidation and an MR churn every 10,000
    // operations and a QP pair recycled every 100,000
    const every = Math.max(1_000, Math.floor(total / 1000));
    const everyQp = Math.max(5_000, Math.floor(total / 100));
    let nextInval = every;
    let nextMr = every;
    let nextQp = everyQp;
    let retire = -1;
    const bg: Promise<void>[] = [];
    while (done < total) {
      // a handful of completions a wake-up, as a polling loop would take them
      const wcs = await cq0.wait(Math.max(1, Math.min(64, Math.floor((nQps * DEPTH) / MOD / 8))));
      for (const wc of wcs.concat(cq0.poll(16384))) {
        if (wc.status !== 'SUCCESS') throw new Error(`soak: ${wc.opcode} on QP ${wc.qpNum}: ${wc.status}`);
        done += MOD;
        const i = byQpn.get(wc.qpNum)!;
        const p = pairs[i];
        p.out--;
        if (!p.retiring && posted < total + nQps * DEPTH) post(i);
      }
      if (atWarm.rss === 0 && done >= warm) atWarm = mem();
      if (done >= nextReport) {
        nextReport += Math.min(1_000_000, Math.max(10_000, total / 10));
        process.stderr.write(`soak: ${done} operations, ${Math.round((performance.now() - t0) / 1000)} s\n`);
      }
      if (done >= nextInval) {
        nextInval += every;
        const page = Math.floor(done / every) % ODP_PAGES;
        bg.push(tb.host(1).madviseDontNeed(odpBuf.addr + page * 4096, 4096).then(() => { invalidations++; }));
      }
      if (done >= nextMr) {
        nextMr += every;
        bg.push(tb.spawn(() => churnMr(pd0, 0)), tb.spawn(() => churnMr(pd1, 1)));
      }
      if (done >= nextQp && retire < 0 && done < total - everyQp) {
        nextQp += everyQp;
        retire = (qpChurn * 37 + 1) % nQps;
        pairs[retire].retiring = true;
      }
      if (retire >= 0 && pairs[retire].out === 0) {
        const old = pairs[retire];
        byQpn.delete(old.q0.qpNum);
        await old.q0.destroy();
        await old.q1.destroy();
        const p = await makePair(retire);
        pairs[retire] = p;
        byQpn.set(p.q0.qpNum, retire);
        for (let d = 0; d < DEPTH; d += MOD) post(retire);
        qpChurn++;
        retire = -1;
      }
      if (bg.length > 64) await Promise.all(bg.splice(0));
    }
    await Promise.all(bg.splice(0));
  });
  const end = mem();
  const checked = tb.checkers.reduce((n, c) => n + c.checked, 0);
  const violations = tb.checkers.reduce((n, c) => n + c.violationCount, 0);
  const faults = Number(tb.stats()['tb.hca1.pagefault']?.faults ?? 0);
  console.log(JSON.stringify({
    bench: 'soak', operations: done, qps: nQps, dmaChecked: checked, violations, faults, invalidations, mrChurn, qpChurn,
    seconds: Math.round((performance.now() - t0) / 100) / 10, simSeconds: tb.now / 1e12,
    rssWarmMB: atWarm.rss, rssEndMB: end.rss, peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024),
    heapWarmMB: atWarm.heap, heapEndMB: end.heap, heapAfterGc: gc !== undefined,
    rssGrowth: Math.round((end.rss / atWarm.rss - 1) * 1000) / 1000, heapGrowth: Math.round((end.heap / atWarm.heap - 1) * 1000) / 1000,
  }));
}
