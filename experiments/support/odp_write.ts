/**
 * The workload of the ODP experiments: an RDMA WRITE from an ODP MR on adapter 0 whose pages are
 * not resident (4 KiB pages the process never touched: nothing for the registration's snapshot,
 * mlx5_ib_init_odp_mr, to map), to a pinned MR on adapter 1; its latency cold (the first touch
 * faults the pages in, one fault for the whole SGE), then warm.
 */
import { Access, Testbed, type HcaConfig } from '../../src/index.ts';
import { counters, delta, type Counters } from './stats.ts';

const US = 1e6;
const SCOPES = ['tb.hca0.pagefault', 'tb.hca0.eq_writer', 'tb.hca0.umr_engine', 'tb.hca0.mtt', 'tb.hca0.mkey_cache', 'tb.hca0.pcie'];

export interface OdpWriteResult {
  /** First WRITE, posted to completion, us. */
  firstUs: number;
  /** The same WRITE again (pages mapped), us. */
  warmUs: number;
  /** adviseMr(PREFETCH, flush) before the first WRITE, us (0 without). */
  prefetchUs: number;
  /** Pages the faults mapped (mlx5's page_faults). */
  pageFaults: number;
  pagePrefetch: number;
  /** PAGE_FAULT EQEs the first WRITE raised (the page-fault unit's `faults`). */
  faults: number;
  stats: Counters;
}

export async function odpWrite(o: { seed: number; config: Partial<HcaConfig>; size: number; prefetch: boolean }): Promise<OdpWriteResult> {
  const tb = new Testbed({ hcas: 2, seed: o.seed, config: o.config });
  const r: OdpWriteResult = { firstUs: 0, warmUs: 0, prefetchUs: 0, pageFaults: 0, pagePrefetch: 0, faults: 0, stats: {} };
  await tb.run(async () => {
    const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
    const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
    const [cq0, cq1] = [await c0.createCq(64), await c1.createCq(64)];
    const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
    const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
    await qp0.connect(qp1);
    // the source in 4 KiB pages never touched: a huge-page buffer is resident from its
    // allocation, and a filled one resident from the fill, so the snapshot would map either
    const a = tb.host(0).alloc(o.size);
    const b = tb.host(1).alloc(o.size, { hugePages: o.size >= 2 * 1024 * 1024 });
    const omr = await pd0.regMr(a.addr, o.size, Access.ON_DEMAND | Access.LOCAL_WRITE);
    const mr1 = await pd1.regMr(b.addr, o.size, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    await tb.quiesce();
    const write = async (id: number): Promise<number> => {
      const t0 = tb.now;
      qp0.postSend({ wrId: id, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: o.size, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await cq0.wait(1);
      if (wc.status !== 'SUCCESS') throw new Error(`ODP WRITE of ${o.size} bytes: ${wc.status}`);
      return tb.now - t0;
    };
    const s0 = counters(tb.stats(), SCOPES);
    if (o.prefetch) {
      const t0 = tb.now;
      await pd0.adviseMr('PREFETCH', [{ addr: a.addr, length: o.size, lkey: omr.lkey }], { flush: true });
      r.prefetchUs = (tb.now - t0) / US;
    }
    const faultsNow = (): number => Number(tb.stats()['tb.hca0.pagefault']?.faults ?? 0);
    const f0 = faultsNow();
    r.firstUs = (await write(1)) / US;
    r.faults = faultsNow() - f0;
    r.stats = delta(counters(tb.stats(), SCOPES), s0);
    r.warmUs = (await write(2)) / US;
    const st = omr.odpStats();
    r.pageFaults = st.pageFaults;
    r.pagePrefetch = st.pagePrefetch;
  });
  await tb.close();
  return r;
}
