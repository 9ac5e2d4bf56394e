/**
 * A long traced run, to size VCD against FST (README "FST for long runs"): 64 B RDMA READs from
 * adapter 0 to adapter 1 over 8 QPs x 16 outstanding, each to a random one of 1,024 one-page
 * MRs (so the mkey cache misses and every module of the path is busy), LONG_READS of them
 * (default 50,000). Run it as a scenario:
 *   npx tsx src/cli/main.ts run bench/long_run.ts --fst
 */
import { Access, Checks, Testbed, defineScenario, type Mr, type Qp, type Scenario } from '../src/index.ts';
import { openReadPair } from '../experiments/support/read_pair.ts';

const QPS = 8;
const DEPTH = 16;
const MRS = 1024;

const scenario: Scenario = {
  name: 'long-run',
  summary: 'many random 64 B RDMA READs over 8 QPs and 1,024 MRs: a long trace',
  async run({ seed, trace, config }) {
    const reads = Number(process.env.LONG_READS ?? 50_000);
    const tb = new Testbed({ seed, hcas: 2, ...(trace ? { trace } : {}), ...(config ? { config } : {}) });
    const c = new Checks();
    let done = 0;
    await tb.run(async () => {
      const { pd1, cq, dst, mr0, qps } = await openReadPair(tb, { qps: QPS, dstBytes: 64 * 1024 });
      const src = tb.host(1).alloc(MRS * 4096, { align: 4096 });
      const mrs: Mr[] = [];
      for (let i = 0; i < MRS; i++) mrs.push(await pd1.regMr(src.addr + i * 4096, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ));
      let x = seed >>> 0 || 1; // xorshift32: the READ targets
      const next = (): number => {
        x ^= x << 13;
        x >>>= 0;
        x ^= x >>> 17;
        x ^= x << 5;
        return (x >>>= 0);
      };
      const post = (qp: Qp, id: number): void => {
        const mr = mrs[next() % MRS];
        qp.postSend({ wrId: id, opcode: 'RDMA_READ', signaled: true, sgList: [{ addr: dst.addr + (id % 1024) * 64, length: 64, lkey: mr0.lkey }], remoteAddr: mr.iova + (next() % 64) * 64, rkey: mr.rkey });
      };
      tb.mark('READs start');
      let posted = 0;
      for (const qp of qps) for (let d = 0; d < DEPTH && posted < reads; d++) post(qp, posted++);
      const byNum = new Map(qps.map((q) => [q.qpNum, q]));
      while (done < reads) {
        for (const wc of [...(await cq.wait(1)), ...cq.poll(64)]) {
          done++;
          if (wc.status !== 'SUCCESS') c.check(false, 'every READ succeeds', `${wc.wrId}: ${wc.status}`);
          if (posted < reads) post(byNum.get(wc.qpNum)!, posted++);
        }
      }
      tb.mark('READs done');
    });
    await tb.close();
    c.equal(done, reads, 'every READ completes');
    return { checks: c.list, simTime: tb.now, stats: tb.stats() };
  },
};

export default defineScenario(scenario);
