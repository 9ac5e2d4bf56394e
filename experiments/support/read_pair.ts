/**
 * The two-adapter setup every READ-throughput workload starts from (the experiments, bench/verbs
 * read-64b-deep, bench/long_run): adapter 0 reads from adapter 1 over `qps` RC QPs that share
 * one CQ a side, into a destination buffer registered on adapter 0.
 */
import { Access, type Context, type Cq, type Mr, type Pd, type Qp, type Testbed } from '../../src/index.ts';

export interface ReadPair {
  c0: Context;
  c1: Context;
  pd0: Pd;
  pd1: Pd;
  /** The requesters' CQ (adapter 0), deep enough for every READ in flight. */
  cq: Cq;
  /** The destination buffer on adapter 0 and its MR (LOCAL_WRITE). */
  dst: { addr: number; length: number };
  mr0: Mr;
  /** The requesters, each connected to its own responder QP on adapter 1. */
  qps: Qp[];
}

/** Opens both adapters and connects `qps` QP pairs (inside `tb.run`). */
export async function openReadPair(tb: Testbed, o: { qps: number; dstBytes: number; maxSendWr?: number }): Promise<ReadPair> {
  const c0 = await tb.openDevice(0);
  const c1 = await tb.openDevice(1);
  const pd0 = await c0.allocPd();
  const pd1 = await c1.allocPd();
  const cq = await c0.createCq(4096);
  const cq1 = await c1.createCq(256);
  const dst = tb.host(0).alloc(o.dstBytes);
  const mr0 = await pd0.regMr(dst.addr, dst.length, Access.LOCAL_WRITE);
  const qps: Qp[] = [];
  for (let i = 0; i < o.qps; i++) {
    const a = await pd0.createQp({ sendCq: cq, recvCq: cq, maxSendWr: o.maxSendWr ?? 64 });
    const b = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
    await a.connect(b);
    qps.push(a);
  }
  return { c0, c1, pd0, pd1, cq, dst, mr0, qps };
}
