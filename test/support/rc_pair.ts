/** The usual start of an end-to-end test: two adapters, a PD and a CQ on each, a connected RC pair. */
import type { Context, Cq, Pd, Qp, Testbed } from '../../src/index.ts';

export interface RcPair {
  c0: Context;
  c1: Context;
  pd0: Pd;
  pd1: Pd;
  cq0: Cq;
  cq1: Cq;
  /** On hca0, connected to qp1 on hca1; each QP's send and receive CQ is its adapter's CQ. */
  qp0: Qp;
  qp1: Qp;
}

/** Opens hca0 and hca1 of `tb` and connects a QP pair (call inside `tb.run`). */
export async function rcPair(tb: Testbed, opts: { cqe?: number; maxSendWr?: number } = {}): Promise<RcPair> {
  return rcPairOn(await tb.openDevice(0), await tb.openDevice(1), opts);
}

/** The same pair on contexts already open (a context's second pair, or after an error). */
export async function rcPairOn(c0: Context, c1: Context, opts: { cqe?: number; maxSendWr?: number } = {}): Promise<RcPair> {
  const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
  const [cq0, cq1] = [await c0.createCq(opts.cqe ?? 64), await c1.createCq(opts.cqe ?? 64)];
  const sendWr = opts.maxSendWr !== undefined ? { maxSendWr: opts.maxSendWr } : {};
  const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0, ...sendWr });
  const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
  await qp0.connect(qp1);
  return { c0, c1, pd0, pd1, cq0, cq1, qp0, qp1 };
}
