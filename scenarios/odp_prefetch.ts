/**
 * ODP prefetch (ibv_advise_mr; spec/semantics.md "On-demand paging"): adviseMr PREFETCH with
 * flush maps pages ahead exactly as a fault would (the driver's UMR of the MTTs), with no EQE and
 * no QP stalled, so the first access takes no fault; PREFETCH_NO_FAULT maps only pages the process
 * has present, so a dropped page still faults.
 */
import { Access } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, runScenario, through, odpWrites } from './support/two_adapters.ts';

const scenario: Scenario = {
  name: 'odp-prefetch',
  summary: 'ODP prefetch: adviseMr PREFETCH takes the fault off the first access; PREFETCH_NO_FAULT leaves a dropped page to fault',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { pd0, pd1, cq0, pair } = await twoAdapters(tb);
      const [qp0] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const src = h0.alloc(2 * PAGE);
      const dst = tb.host(1).alloc(PAGE);
      const omr = await pd0.regMr(src.addr, 2 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(dst.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = odpWrites({ tb, c, wait, qp: qp0, cq: cq0, src: { addr: src.addr, lkey: omr.lkey }, dst: { addr: dst.addr, rkey: mr1.rkey } });
      tb.mark('prefetch');
      // the driver maps the pages by UMR on its own QP, as a fault would
      await tb.phase('prefetch', through.umr(0), () => pd0.adviseMr('PREFETCH', [{ addr: src.addr, length: PAGE, lkey: omr.lkey }], { flush: true }));
      tb.mark('prefetched');
      const pre = await write(1, 0, 'prefetched_write');
      c.check(pre < 10, 'a prefetched page takes no fault on its first access', `${pre.toFixed(1)} us`);

      tb.mark('no_fault_prefetch');
      await tb.phase('no_fault_prefetch', through.umr(0), async () => {
        await h0.madviseDontNeed(src.addr + PAGE, PAGE);
        await pd0.adviseMr('PREFETCH_NO_FAULT', [{ addr: src.addr, length: 2 * PAGE, lkey: omr.lkey }], { flush: true });
      });
      const cold = await write(2, 1, 'dropped_write');
      c.check(cold > 150, 'PREFETCH_NO_FAULT did not bring the dropped page back: it faults', `${cold.toFixed(1)} us`);
      c.equal([omr.odpStats().pageFaults, omr.odpStats().pagePrefetch], [1, 3], 'one page faulted; three pages prefetched (the first, then the range of two with NO_FAULT: mlx5 counts the range)');
    }),
};

export default scenario;
