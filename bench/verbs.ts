/**
 * Verbs benchmark: operations per wall-clock second through the whole model (driver, WQEs in
 * host memory, doorbells, send queue engine, ATU, PCIe, link, responder, CQEs), one RC QP pair
 * between two adapters, warm. Prints one JSON line per case.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Access, Testbed, type Mr, type Qp, type Cq } from '../src/index.ts';

const BATCH = 32;

interface Setup {
  tb: Testbed;
  qp: Qp;
  cq: Cq;
  src: { addr: number };
  dst: { addr: number };
  mrSrc: Mr;
  mrDst: Mr;
  frmr: Mr | null;
}

async function setup(tb: Testbed, frwr: boolean): Promise<Setup> {
  const c0 = await tb.openDevice(0);
  const c1 = await tb.openDevice(1);
  const pd0 = await c0.allocPd();
  const pd1 = await c1.allocPd();
  const cq = await c0.createCq(256);
  const cq1 = await c1.createCq(256);
  const qp = await pd0.createQp({ sendCq: cq, recvCq: cq, maxSendWr: 128 });
  const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
  await qp.connect(qp1);
  const src = tb.host(0).alloc(4096);
  const dst = tb.host(1).alloc(4096);
  const mrSrc = await pd0.regMr(src.addr, 4096, Access.LOCAL_WRITE);
  const mrDst = await pd1.regMr(dst.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const frmr = frwr ? await pd1.allocMr('MEM_REG', 4) : null;
  return { tb, qp, cq, src, dst, mrSrc, mrDst, frmr };
}

async function writes(s: Setup, ops: number): Promise<void> {
  for (let done = 0; done < ops; ) {
    const n = Math.min(BATCH, ops - done);
    for (let i = 0; i < n; i++) {
      s.qp.postSend({ wrId: done + i, opcode: 'RDMA_WRITE', sgList: [{ addr: s.src.addr, length: 4096, lkey: s.mrSrc.lkey }], remoteAddr: s.dst.addr, rkey: s.mrDst.rkey, signaled: i === n - 1 });
    }
    const [wc] = await s.cq.wait(1);
    if (wc.status !== 'SUCCESS') throw new Error(`rdma-write-4k: ${wc.status}`);
    done += n;
  }
}

/** REG_MR on the responder's side is not possible from the requester's QP: register locally. */
async function frwrCycles(s: Setup, pd0Mr: Mr, ops: number): Promise<void> {
  const mr = pd0Mr;
  for (let i = 0; i < ops; i++) {
    mr.updateKey((mr.lkey + 1) & 0xff);
    mr.mapSg([{ addr: s.src.addr, length: 4096 }]);
    s.qp.postSend([
      { wrId: 1, opcode: 'REG_MR', mr, key: mr.lkey, access: Access.LOCAL_WRITE },
      { wrId: 2, opcode: 'RDMA_WRITE', sgList: [{ addr: s.src.addr, length: 4096, lkey: mr.lkey }], remoteAddr: s.dst.addr, rkey: s.mrDst.rkey },
      { wrId: 3, opcode: 'LOCAL_INV', invalidateRkey: mr.lkey, signaled: true },
    ]);
    const [wc] = await s.cq.wait(1);
    if (wc.status !== 'SUCCESS') throw new Error(`frwr-cycle: ${wc.status} (${wc.opcode})`);
  }
}

export async function runCase(c: 'rdma-write-4k' | 'frwr-cycle', ops: number, vcd?: string): Promise<Record<string, unknown>> {
  const tb = new Testbed({ hcas: 2, ...(vcd ? { trace: { vcd, gtkw: false } } : {}) });
  let seconds = 0;
  await tb.run(async () => {
    const s = await setup(tb, false);
    const pd0Mr = c === 'frwr-cycle' ? await s.mrSrc.pd.allocMr('MEM_REG', 4) : null;
    // warm up before timing: the HCA's caches, and the JIT (a steady-state rate, as benchmarks report)
    if (c === 'rdma-write-4k') await writes(s, 20_000);
    else await frwrCycles(s, pd0Mr!, 1000);
    const t0 = process.hrtime.bigint();
    if (c === 'rdma-write-4k') await writes(s, ops);
    else await frwrCycles(s, pd0Mr!, ops);
    seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  });
  await tb.close();
  return { bench: 'verbs', case: c, tracing: vcd !== undefined, ops, opsPerSec: Math.round(ops / seconds), peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024) };
}

export async function benchVerbs(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-verbs-'));
  try {
    for (const tracing of [false, true]) {
      console.log(JSON.stringify(await runCase('rdma-write-4k', 100_000, tracing ? join(dir, 'w.vcd') : undefined)));
      console.log(JSON.stringify(await runCase('frwr-cycle', 5_000, tracing ? join(dir, 'f.vcd') : undefined)));
    }
    console.log(JSON.stringify(await runCase('rdma-write-4k', 1_000_000)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
