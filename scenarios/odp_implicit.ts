/**
 * Implicit ODP (spec/mlx5.md "Implicit ODP"): regMr(0, SIZE_MAX, ON_DEMAND) gives one key for the
 * whole address space, a KSM parent whose entries name the null mkey. The first access in a GiB
 * faults on the parent: the driver makes the GiB's child (an MTT ODP mkey), writes its KSM entry by
 * UMR, maps the page and resumes; a later access in the same GiB only maps its page. In the waves:
 * the ATU's MTT reads of the KSM entry, the FAULT, the pagefault unit, the UMRs, the resume.
 */
import { Access, SIZE_MAX } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, runScenario, through } from './support/two_adapters.ts';

const US = 1_000_000;

const scenario: Scenario = {
  name: 'odp-implicit',
  summary: 'implicit ODP: one key for the address space; the first fault in a GiB makes its child mkey, later faults only map pages',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { ctx0, pd0, pd1, cq0, pair } = await twoAdapters(tb);
      const [qp0] = await pair(pd0, pd1);
      c.check((await ctx0.queryDevice()).odpCaps.generalCaps.has('IMPLICIT'), 'the device claims implicit ODP');
      const imr = await pd0.regMr(0, SIZE_MAX, Access.ON_DEMAND | Access.LOCAL_WRITE);
      c.equal([imr.iova, imr.length], [0, SIZE_MAX], 'the implicit MR covers the address space');
      const h0 = tb.host(0);
      const src = h0.alloc(4 * PAGE);
      h0.write(src.addr, Uint8Array.of(1, 2, 3, 4));
      h0.write(src.addr + 2 * PAGE, Uint8Array.of(5, 6, 7, 8));
      const dst = tb.host(1).alloc(PAGE);
      const mr1 = await pd1.regMr(dst.addr, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      // each write is a phase named as its marker; the implicit key's children are KLM entries
      const write = (off: number, what: string): Promise<number> =>
        tb.phase(what, [...through.faultingWrite(0, 1), 'hca0.klm_walker', 'hca0.mkey_cache'], async () => {
          const t0 = tb.now;
          qp0.postSend({ wrId: off, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr + off, length: 4, lkey: imr.lkey }], remoteAddr: dst.addr, rkey: mr1.rkey, signaled: true });
          const [w] = await wait(cq0, 1, what);
          c.equal(w?.status, 'SUCCESS', `${what}: SUCCESS`);
          return (tb.now - t0) / US;
        });
      tb.mark('first_in_gib');
      const first = await write(0, 'child_made');
      c.equal([...tb.host(1).read(dst.addr, 4)], [1, 2, 3, 4], 'the bytes land');
      tb.mark('same_gib');
      const second = await write(2 * PAGE, 'page_mapped');
      c.equal([...tb.host(1).read(dst.addr, 4)], [5, 6, 7, 8], 'the bytes of the second page land');
      const warm = await write(2 * PAGE, 'warm');
      c.check(first > second + 200 && second > 150 && warm < 10, 'the first fault also makes the child (CREATE_MKEY ~230 us); the second only maps; then warm', `${first.toFixed(0)} us, ${second.toFixed(0)} us, ${warm.toFixed(1)} us`);
      c.equal(imr.odpStats().pageFaults, 2, 'two faults on the implicit MR');
    }),
};

export default scenario;
