/**
 * A scenario of one's own, to copy and change: two adapters, a buffer on each, an RDMA WRITE from
 * adapter 1 into adapter 0's memory and an RDMA READ back, each checked; then the same WRITE
 * with a stale rkey (the window closes with dereg), which the responder refuses.
 *
 * Run it:   npx mlx5sim run examples/my_scenario.ts            (waves in waves/my-scenario/)
 *           npx mlx5sim run examples/my_scenario.ts --stats text --no-vcd
 * A scenario file's default export is defineScenario({ name, summary, run(opts) }); `run` builds its
 * own Testbed from the options the command line hands it (seed, waves, --config) and returns its
 * checks: the command exits 1 if one fails. Outside this repository import from 'mlx5sim'.
 */
import { Access, Checks, Testbed, defineScenario, type ScenarioOptions, type ScenarioResult } from '../src/index.ts';

const PAGE = 4096;
/** A bound on every wait (1 ms of simulated time): a completion that never comes is a failed check, not a hang. */
const TIMEOUT_PS = 1_000_000_000;

async function run(opts: ScenarioOptions): Promise<ScenarioResult> {
  const c = new Checks();
  // everything the command line chose goes to the testbed: the seed, the waves (absent with
  // --no-vcd: no tracing, no cost) and a partial configuration (--config cfg.json)
  const tb = new Testbed({ seed: opts.seed, hcas: 2, ...(opts.trace ? { trace: opts.trace } : {}), ...(opts.config ? { config: opts.config } : {}) });

  // verbs calls take simulated time, so they happen inside tb.run(), the main process
  await tb.run(async () => {
    const [ctx0, ctx1] = [await tb.openDevice(0), await tb.openDevice(1)];
    const [pd0, pd1] = [await ctx0.allocPd(), await ctx1.allocPd()];
    const [cq0, cq1] = [await ctx0.createCq(16), await ctx1.createCq(16)];
    const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
    const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
    await qp0.connect(qp1); // RESET -> INIT -> RTR -> RTS on both sides

    // adapter 0 exposes two pages for remote writes and reads; adapter 1 has its source buffer
    const target = tb.host(0).alloc(2 * PAGE, { align: PAGE });
    const mr0 = await pd0.regMr(target.addr, 2 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
    const src = tb.host(1).alloc(2 * PAGE, { align: PAGE });
    const mr1 = await pd1.regMr(src.addr, 2 * PAGE, Access.LOCAL_WRITE);
    tb.host(1).fill(src.addr, PAGE, 0xab);

    // one page written across the page boundary of the target (the second half of each page)
    const at = target.addr + PAGE / 2;
    qp1.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: PAGE, lkey: mr1.lkey }], remoteAddr: at, rkey: mr0.rkey, signaled: true });
    const [w] = await cq1.wait(1, { timeout: TIMEOUT_PS });
    c.equal(w.status, 'SUCCESS', 'the RDMA WRITE completes SUCCESS');
    c.check(tb.host(0).read(at, PAGE).every((b) => b === 0xab), 'its bytes land at the remote address, across the page boundary');
    c.check(tb.host(0).read(target.addr, PAGE / 2).every((b) => b === 0), 'nothing lands before it');

    // and read back into the second page of the source buffer
    qp1.postSend({ wrId: 2, opcode: 'RDMA_READ', sgList: [{ addr: src.addr + PAGE, length: PAGE, lkey: mr1.lkey }], remoteAddr: at, rkey: mr0.rkey, signaled: true });
    const [r] = await cq1.wait(1, { timeout: TIMEOUT_PS });
    c.equal([r.status, r.byteLen], ['SUCCESS', PAGE], 'the RDMA READ completes SUCCESS with the page');
    c.check(tb.host(1).read(src.addr + PAGE, PAGE).every((b) => b === 0xab), 'the bytes read are the bytes written');

    // a deregistered MR's rkey names nothing: the responder refuses the WRITE (remote access
    // error), the requester completes REM_ACCESS_ERR, and no byte reaches adapter 0's memory
    const stale = mr0.rkey;
    await mr0.dereg();
    tb.host(1).fill(src.addr, PAGE, 0xcd);
    qp1.postSend({ wrId: 3, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: PAGE, lkey: mr1.lkey }], remoteAddr: at, rkey: stale, signaled: true });
    const [bad] = await cq1.wait(1, { timeout: TIMEOUT_PS });
    c.equal(bad.status, 'REM_ACCESS_ERR', 'a WRITE through a deregistered rkey completes REM_ACCESS_ERR');
    c.check(tb.host(0).read(at, PAGE).every((b) => b === 0xab), 'and writes nothing');
  });
  await tb.close(); // flushes the waves
  return { checks: c.list, simTime: tb.now, stats: tb.stats() };
}

// `mlx5sim run` reads this line before it loads the file: a file without it is refused, unrun
export default defineScenario({
  name: 'my-scenario',
  summary: 'an example to copy: RDMA WRITE and READ between two adapters, then a WRITE through a deregistered rkey',
  run,
});
