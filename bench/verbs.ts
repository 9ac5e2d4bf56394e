/**
 * Verbs benchmark: operations per wall-clock second through the whole model (driver, WQEs in
 * host memory, doorbells, send queue engine, ATU, PCIe, link, responder, CQEs), one RC QP pair
 * between two adapters, warm. Prints one JSON line per case.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Access, Testbed, type Mr, type Qp, type Cq, type TestbedOptions } from '../src/index.ts';
import { openReadPair } from '../experiments/support/read_pair.ts';
import { xorshift } from '../experiments/support/random_reads.ts';

const BATCH = 32;

/** CPU seconds (user + system) of this process since `from` (process.cpuUsage). */
export function cpuSince(from: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(from);
  return (d.user + d.system) / 1e6;
}

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
  // the driver's load is over before anything is timed: the MR cache's pre-fill (6,120 mkeys
  // per adapter, ~230 ms simulated) runs in the firmware's background lane meanwhile
  await tb.quiesce();
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
  let cpuSeconds = 0;
  await tb.run(async () => {
    const s = await setup(tb, false);
    const pd0Mr = c === 'frwr-cycle' ? await s.mrSrc.pd.allocMr('MEM_REG', 4) : null;
    // warm up before timing: the HCA's caches, and the JIT (a steady-state rate, as benchmarks report)
    if (c === 'rdma-write-4k') await writes(s, 20_000);
    else await frwrCycles(s, pd0Mr!, 1000);
    const t0 = process.hrtime.bigint();
    const cpu0 = process.cpuUsage();
    if (c === 'rdma-write-4k') await writes(s, ops);
    else await frwrCycles(s, pd0Mr!, ops);
    seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    cpuSeconds = cpuSince(cpu0);
  });
  await tb.close();
  return { bench: 'verbs', case: c, tracing: vcd !== undefined, ops, opsPerSec: Math.round(ops / seconds), cpuOpsPerSec: Math.round(ops / cpuSeconds), peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024) };
}

/**
 * One adapter issuing warm 64 B RDMA READs to another over `qps` RC QPs, each kept `depth` deep
 * (completions moderated as perftest does: one READ in 4 signaled, reaped in batches, each
 * answered by 4 new READs on the same QP). Returns the
 * simulated and wall-clock rates over `ops` READs after `warm` READs of warm-up, and the stats
 * of the run (for the limiting resource).
 */
export async function readDeep(qps: number, depth: number, ops: number, warm: number, vcd?: string, mrs = 1, config: TestbedOptions['config'] = {}): Promise<{ json: Record<string, unknown>; stats: Record<string, Record<string, unknown>> }> {
  const tb = new Testbed({ hcas: 2, config, ...(vcd ? { trace: { vcd, gtkw: false } } : {}) });
  let seconds = 0;
  let cpuSeconds = 0;
  let simPs = 0;
  let cpu0 = process.cpuUsage();
  await tb.run(async () => {
    const { pd1, cq, dst, mr0, qps: list } = await openReadPair(tb, { qps, dstBytes: 4096, maxSendWr: Math.max(64, depth * 2) });
    // one source MR, or `mrs` one-page MRs each READ picks at random (xorshift, seed 1)
    const src = tb.host(1).alloc(4096 * mrs);
    const targets: Mr[] = [];
    for (let i = 0; i < mrs; i++) targets.push(await pd1.regMr(src.addr + i * 4096, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ));
    // as in setup: the driver's load is over before anything is timed: the MR cache's pre-fill (6,120 mkeys
    // per adapter, ~230 ms simulated) runs in the firmware's background lane meanwhile
    await tb.quiesce();
    const rnd = xorshift(1);
    const target = (): Mr => (mrs === 1 ? targets[0] : targets[Math.floor(rnd() * mrs)]);
    const byQpn = new Map(list.map((q) => [q.qpNum, q]));
    // completions are moderated as perftest's ib_read_bw does (--cq-mod): one READ in MOD is
    // signaled, so each QP keeps between depth - MOD + 1 and depth READs outstanding
    const MOD = Math.min(4, depth);
    const postBatch = (q: Qp): void => {
      const wrs = [];
      for (let k = 0; k < MOD; k++, posted++) {
        const mr1 = target();
        wrs.push({ wrId: posted, opcode: 'RDMA_READ' as const, sgList: [{ addr: dst.addr + (posted % 64) * 64, length: 64, lkey: mr0.lkey }], remoteAddr: mr1.iova + (posted % 64) * 64, rkey: mr1.rkey, signaled: k === MOD - 1 });
      }
      q.postSend(wrs);
    };
    let posted = 0;
    for (const q of list) for (let d = 0; d < depth; d += MOD) postBatch(q);
    let done = 0;
    let t0 = 0n;
    let s0 = 0;
    while (done < warm + ops) {
      if (done >= warm && t0 === 0n) {
        t0 = process.hrtime.bigint();
        cpu0 = process.cpuUsage();
        s0 = tb.now;
      }
      // at most a quarter of the CQ (4,096 CQEs) is left unpolled, whatever the QP count
      const wcs = await cq.wait(Math.max(1, Math.min((warm + ops - done) / MOD, (qps * depth) / MOD / 4, 1024)));
      for (const wc of wcs.concat(cq.poll(4096))) {
        if (wc.status !== 'SUCCESS') throw new Error(`read-64b-deep: ${wc.status}`);
        done += MOD;
        if (posted < warm + ops + qps * depth) postBatch(byQpn.get(wc.qpNum)!);
      }
    }
    seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    cpuSeconds = cpuSince(cpu0);
    simPs = tb.now - s0;
    ops = done - warm;
  });
  await tb.close();
  const stats = tb.stats();
  return {
    json: { bench: 'verbs', case: 'read-64b-deep', qps, depth, mrs, tracing: vcd !== undefined, ops, simOpsPerSec: Math.round(ops / (simPs / 1e12)), opsPerSec: Math.round(ops / seconds), cpuOpsPerSec: Math.round(ops / cpuSeconds), peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024) },
    stats,
  };
}

/**
 * A fault per operation: the source page of a 4 KB RDMA WRITE is dropped (madviseDontNeed, which
 * zaps its MTT by UMR) before every write, so each write takes a full ODP fault: the ATU's FAULT,
 * the PAGE_FAULT EQE, the interrupt, the driver's handler, the MTT UMR, PAGE_FAULT_RESUME.
 */
export async function odpFault(ops: number, vcd?: string): Promise<Record<string, unknown>> {
  const tb = new Testbed({ hcas: 2, ...(vcd ? { trace: { vcd, gtkw: false } } : {}) });
  let seconds = 0;
  let simPs = 0;
  await tb.run(async () => {
    const c0 = await tb.openDevice(0);
    const c1 = await tb.openDevice(1);
    const pd0 = await c0.allocPd();
    const pd1 = await c1.allocPd();
    const cq = await c0.createCq(64);
    const cq1 = await c1.createCq(64);
    const qp = await pd0.createQp({ sendCq: cq, recvCq: cq });
    const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
    await qp.connect(qp1);
    const src = tb.host(0).alloc(4096);
    const dst = tb.host(1).alloc(4096);
    const omr = await pd0.regMr(src.addr, 4096, Access.ON_DEMAND | Access.LOCAL_WRITE);
    const mr1 = await pd1.regMr(dst.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
    await tb.quiesce(); // the MR cache's pre-fill is over (see setup)
    const one = async (i: number): Promise<void> => {
      await tb.host(0).madviseDontNeed(src.addr, 4096);
      qp.postSend({ wrId: i, opcode: 'RDMA_WRITE', sgList: [{ addr: src.addr, length: 4096, lkey: omr.lkey }], remoteAddr: dst.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await cq.wait(1);
      if (wc.status !== 'SUCCESS') throw new Error(`odp-fault-4k: ${wc.status}`);
    };
    for (let i = 0; i < 50; i++) await one(i); // warm-up (JIT)
    const t0 = process.hrtime.bigint();
    const s0 = tb.now;
    for (let i = 0; i < ops; i++) await one(i);
    seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    simPs = tb.now - s0;
    if (omr.odpStats().pageFaults !== ops + 50) throw new Error(`odp-fault-4k: ${omr.odpStats().pageFaults} faults for ${ops + 50} writes`);
  });
  await tb.close();
  return { bench: 'verbs', case: 'odp-fault-4k', tracing: vcd !== undefined, ops, simUsPerOp: Math.round(simPs / ops / 1e4) / 100, opsPerSec: Math.round(ops / seconds), peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024) };
}

export async function benchVerbs(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-verbs-'));
  // each case in a fresh process (same node and loader flags), so no case slows another
  const one = (name: string, ops: number, vcd?: string): void => {
    const args = [...process.execArgv, fileURLToPath(new URL('./verbs_case.ts', import.meta.url)), name, String(ops), ...(vcd ? [vcd] : [])];
    process.stdout.write(execFileSync(process.execPath, args, { encoding: 'utf8' }));
  };
  try {
    for (const tracing of [false, true]) {
      one('rdma-write-4k', 100_000, tracing ? join(dir, 'w.vcd') : undefined);
      one('frwr-cycle', 5_000, tracing ? join(dir, 'f.vcd') : undefined);
      one('odp-fault-4k', 2_000, tracing ? join(dir, 'o.vcd') : undefined);
    }
    one('rdma-write-4k', 1_000_000);
    one('read-64b-deep', 200_000);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
