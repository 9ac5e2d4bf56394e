/** What the verbs scenarios share: a two-adapter testbed, connected QP pairs, bounded waits. */
import { Testbed, type Context, type Cq, type Pd, type Qp, type WorkCompletion } from '../../src/index.ts';
import { Checks, type ScenarioOptions, type ScenarioResult } from '../../src/scenario.ts';

export const PAGE = 4096;
/** Long enough for any completion in the scenarios (a few us), short of the 67 ms ACK timeout. */
export const WAIT = 1_000_000_000;

/**
 * What every verbs scenario does around its own steps: a two-adapter testbed with the
 * scenario's options, its checks and bounded waits, the body run in simulated time, then a tail
 * (posted writes land; the waves, which open on the work from the first work request on, show the
 * last marks clear of the pane's edge), then the waves closed and the result made.
 */
export async function runScenario(
  opts: ScenarioOptions,
  body: (tb: Testbed, c: Checks, wait: Waiter) => Promise<void>,
  c: Checks = new Checks(),
): Promise<ScenarioResult> {
  const tb = testbedFor(opts);
  const wait = waiter(c, tb);
  await tb.run(async () => {
    await body(tb, c, wait);
    await tb.delay(tailAfter(tb));
  });
  await tb.close();
  return { checks: c.list, simTime: tb.now, stats: tb.stats() };
}

/**
 * Idle time after a scenario's last step: at least 20 ns for posted writes to land, and a tenth
 * of the work since the first work request, so the waves' opening view (which holds back 3% at
 * its end, `TAIL_SLACK`) shows the last mark with room for its label.
 */
export function tailAfter(tb: Testbed): number {
  const first = tb.firstWorkAt;
  return Math.max(20_000, first === null ? 0 : Math.round((tb.now - first) / 10));
}

/** A two-adapter testbed with the scenario's seed, trace and configuration. */
export function testbedFor({ seed, trace, config }: ScenarioOptions): Testbed {
  return new Testbed({ seed, hcas: 2, ...(trace ? { trace } : {}), ...(config ? { config } : {}) });
}

/** `wait(cq, n, what, { view })`: see `waiter`. */
export type Waiter = (cq: Cq, n: number, what: string, opts?: { view?: 'start' | 'end' }) => Promise<WorkCompletion[]>;

/**
 * `wait(cq, n, what)`: n completions, or a failed check (and none) when they do not come. With a
 * testbed, each arrival is also a named marker in the waves (`what`, at the completion's time);
 * `{ view: 'end' }` also ends the view the waves open on there (`tb.mark`).
 */
export function waiter(c: Checks, tb?: Testbed): Waiter {
  return async (cq, n, what, opts = {}) => {
    try {
      const got = await cq.wait(n, { timeout: WAIT });
      tb?.mark(what, opts);
      return got;
    } catch (e) {
      c.check(false, `${what}: ${n} completion(s) arrive`, String(e));
      return [];
    }
  };
}

/** Both adapters opened, a PD and a CQ on each, and `pair(a, b)` to connect a QP of `a` to one of `b`. */
export async function twoAdapters(tb: Testbed): Promise<{
  ctx0: Context;
  ctx1: Context;
  pd0: Pd;
  pd1: Pd;
  cq0: Cq;
  cq1: Cq;
  pair: (a: Pd, b: Pd) => Promise<[Qp, Qp]>;
}> {
  const [ctx0, ctx1] = [await tb.openDevice(0), await tb.openDevice(1)];
  const [pd0, pd1] = [await ctx0.allocPd(), await ctx1.allocPd()];
  const [cq0, cq1] = [await ctx0.createCq(64), await ctx1.createCq(64)];
  const pair = async (a: Pd, b: Pd): Promise<[Qp, Qp]> => {
    const q0 = await a.createQp({ sendCq: a.ctx === ctx0 ? cq0 : cq1, recvCq: a.ctx === ctx0 ? cq0 : cq1 });
    const q1 = await b.createQp({ sendCq: b.ctx === ctx0 ? cq0 : cq1, recvCq: b.ctx === ctx0 ? cq0 : cq1 });
    await q0.connect(q1);
    return [q0, q1];
  };
  return { ctx0, ctx1, pd0, pd1, cq0, cq1, pair };
}

const faultModules = (a: number): string[] => [`hca${a}.pagefault`, `hca${a}.eq_writer`, `hca${a}.cmdif`, `hca${a}.umr_engine`, `hca${a}.mtt`];

/**
 * The modules a phase of a scenario is about (`tb.phase`), by the way its work request goes, in
 * the order a reader follows it.
 */
export const through = {
  /** A UMR work request (REG_MR, LOCAL_INV, BIND_MW) on adapter `a`: its send queue, the UMR engine, the caches it keeps coherent, the CQE. */
  umr: (a: number): string[] => [`hca${a}.sq`, `hca${a}.umr_engine`, `hca${a}.mkey_cache`, `hca${a}.mtt`, `hca${a}.cq_writer`],
  /** An RDMA operation from adapter `a` to `b`: the requester's side, the wire, the responder and its translation, the CQE. */
  remote: (a: number, b: number): string[] => [
    `hca${a}.sq`, `hca${a}.requester`, `hca${a}.atu`, 'link_req', `hca${b}.responder`, `hca${b}.atu`, `hca${b}.mkey_cache`, `hca${b}.mtt`, 'link_resp', `hca${a}.cq_writer`,
  ],
  /** A work request adapter `a` fails by itself (a bad lkey): its send queue, requester, translation, CQE. */
  local: (a: number): string[] => [`hca${a}.sq`, `hca${a}.requester`, `hca${a}.atu`, `hca${a}.mkey_cache`, `hca${a}.mtt`, `hca${a}.cq_writer`],
  /** An on-demand-paging fault on adapter `a`: the page-fault unit, its EQE, the driver's commands and UMRs. */
  fault: (a: number): string[] => faultModules(a),
  /** An RDMA WRITE from adapter `a`'s on-demand MR to `b`: the requester and its fault first, then the send queue, the wire, the CQE. */
  faultingWrite: (a: number, b: number): string[] => [
    `hca${a}.requester`, `hca${a}.atu`, ...faultModules(a), `hca${a}.sq`, 'link_req', `hca${b}.responder`, 'link_resp', `hca${a}.cq_writer`,
  ],
};

/**
 * `write(id, page, what)`: a 256-byte RDMA WRITE from page `page` of an on-demand MR (`src`) to
 * `dst`, as the phase `what` (also its completion's marker), checked SUCCESS; resolves to the
 * microseconds it took from post to completion.
 */
export function odpWrites(o: { tb: Testbed; c: Checks; wait: Waiter; qp: Qp; cq: Cq; src: { addr: number; lkey: number }; dst: { addr: number; rkey: number } }): (id: number, page: number, what: string) => Promise<number> {
  const { tb, c, wait, qp, cq, src, dst } = o;
  return (id, page, what) =>
    tb.phase(what, through.faultingWrite(0, 1), async () => {
      const t0 = tb.now;
      qp.postSend({ wrId: id, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr + page * PAGE, length: 256, lkey: src.lkey }], remoteAddr: dst.addr, rkey: dst.rkey, signaled: true });
      const [w] = await wait(cq, 1, what);
      c.equal(w?.status, 'SUCCESS', `${what}: SUCCESS`);
      return (tb.now - t0) / 1e6;
    });
}

/** Byte-for-byte equality of two buffers. */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
