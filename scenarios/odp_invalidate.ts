/**
 * ODP invalidation (spec/semantics.md "On-demand paging"): a mapped page dropped by
 * madviseDontNeed is zapped by UMR (the MMU notifier) before its frame is freed, and the next
 * access faults again and sees the new, zeroed page.
 */
import { Access } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, runScenario, through, odpWrites } from './support/two_adapters.ts';

const scenario: Scenario = {
  name: 'odp-invalidate',
  summary: 'ODP invalidation: madviseDontNeed zaps the MTTs by UMR before the frame is freed, the next access faults again',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { pd0, pd1, cq0, pair } = await twoAdapters(tb);
      const [qp0] = await pair(pd0, pd1);
      const h0 = tb.host(0);
      const h1 = tb.host(1);
      const src = h0.alloc(2 * PAGE);
      const dst = h1.alloc(PAGE);
      const omr = await pd0.regMr(src.addr, 2 * PAGE, Access.ON_DEMAND | Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(dst.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = odpWrites({ tb, c, wait, qp: qp0, cq: cq0, src: { addr: src.addr, lkey: omr.lkey }, dst: { addr: dst.addr, rkey: mr1.rkey } });
      tb.mark('first_touch');
      const cold = await write(1, 0, 'cold_write');
      const warm = await write(2, 0, 'warm_write');
      c.check(cold > 150 && warm < 10, 'the first write faults, the second does not', `${cold.toFixed(1)} us, ${warm.toFixed(1)} us`);

      tb.mark('madvise');
      // the MMU notifier's UMR on the driver's own QP zaps the page's MTT entries
      await tb.phase('invalidate', through.umr(0), () => h0.madviseDontNeed(src.addr, PAGE));
      c.equal(omr.odpStats().pageInvalidationsHandled, 1, 'the MMU notifier zapped the page by UMR before madvise returned');
      const again = await write(3, 0, 'refault_write');
      c.check(again > 150, 'after madvise the page faults again', `${again.toFixed(1)} us`);

      // the fault handler counts a fault once its PAGE_FAULT_RESUME has completed (the command's EQE and interrupt)
      for (let i = 0; i < 100 && omr.odpStats().pageFaultsHandled < 2; i++) await tb.delay(1_000_000);
      c.equal(omr.odpStats(), { pageFaults: 2, pageFaultsHandled: 2, pageInvalidations: 1, pageInvalidationsHandled: 1, pagePrefetch: 0 }, 'odpStats counts 2 faults and 1 invalidation');
    }),
};

export default scenario;
