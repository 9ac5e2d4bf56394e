/**
 * Bad keys, each on a fresh pair of QPs (a QP goes to ERR after an error), over two adapters
 * (spec/semantics.md "Data path: remote access", "Data path: local access", "Errors and QP
 * state"). Remote keys checked at the responder: a stale tag, an MR of another PD, a range
 * past the MR's end, a missing REMOTE_WRITE / REMOTE_READ: the requester completes
 * REM_ACCESS_ERR, both QPs go to ERR, nothing is written. Local keys checked at the requester:
 * a stale tag, another PD's lkey, a range past the MR, an RDMA READ into an MR without
 * LOCAL_WRITE: LOC_PROT_ERR, the requester's QP goes to ERR, nothing is sent. A bad receive
 * SGE: LOC_PROT_ERR at the receiver, REM_OP_ERR at the sender. A LOCAL_INV with a stale tag:
 * LOC_QP_OP_ERR.
 */
import { Access, type Mr, type Qp, type SendWr } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, sameBytes, runScenario, through } from './support/two_adapters.ts';

const stale = (k: number): number => ((k & 0xffffff00) | ((k + 1) & 0xff)) >>> 0;

const scenario: Scenario = {
  name: 'bad-keys',
  summary: 'bad keys: stale tag, wrong PD, out of range, missing access; REM_ACCESS_ERR for rkeys, LOC_PROT_ERR for lkeys, fresh QPs per case',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const [ctx0, ctx1] = [await tb.openDevice(0), await tb.openDevice(1)];
      const [pdA, pdB, pd1] = [await ctx0.allocPd(), await ctx0.allocPd(), await ctx1.allocPd()];
      const [cq0, cq1] = [await ctx0.createCq(64), await ctx1.createCq(64)];
      const h0 = tb.host(0);
      const h1 = tb.host(1);

      // adapter 0 (the target, QPs in pdA): MRs with different rights, one in another PD
      const t = h0.alloc(4 * PAGE, { align: PAGE });
      const rw = await pdA.regMr(t.addr, 2 * PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
      const ro = await pdA.regMr(t.addr + 2 * PAGE, PAGE, Access.REMOTE_READ);
      const otherPd = await pdB.regMr(t.addr + 3 * PAGE, PAGE, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ);
      const noWrite = await pdA.regMr(t.addr, PAGE, 0); // local read only: a bad receive buffer
      // adapter 1 (the initiator, QPs in pd1): a local MR, one without LOCAL_WRITE, one in another PD
      const s = h1.alloc(4 * PAGE, { align: PAGE });
      h1.write(s.addr, Uint8Array.from({ length: 4 * PAGE }, (_, i) => (i * 3 + 1) & 0xff));
      const lmr = await pd1.regMr(s.addr, 2 * PAGE, Access.LOCAL_WRITE);
      const lro = await pd1.regMr(s.addr + 2 * PAGE, PAGE, 0);
      const pd1b = await ctx1.allocPd();
      const lOther = await pd1b.regMr(s.addr + 3 * PAGE, PAGE, Access.LOCAL_WRITE);

      const fresh = async (): Promise<[Qp, Qp]> => {
        const q0 = await pdA.createQp({ sendCq: cq0, recvCq: cq0 });
        const q1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
        await q0.connect(q1);
        return [q0, q1];
      };
      const snapshot = (): Uint8Array => h0.read(t.addr, 4 * PAGE);
      const sge = (m: Mr, off = 0, length = 64): { addr: number; length: number; lkey: number } => ({ addr: m.iova + off, length, lkey: m.lkey });

      type Case = { phase: string; what: string; want: string; remote: boolean; wr: SendWr };
      const cases: Case[] = [
        // remote keys (checked by the responder on adapter 0)
        { phase: 'stale_rkey', what: 'WRITE with a stale rkey tag', want: 'REM_ACCESS_ERR', remote: true,
          wr: { wrId: 1, opcode: 'RDMA_WRITE', sgList: [sge(lmr)], remoteAddr: rw.iova, rkey: stale(rw.rkey) } },
        { phase: 'rkey_other_pd', what: "WRITE with an rkey of another PD than the responder QP's", want: 'REM_ACCESS_ERR', remote: true,
          wr: { wrId: 2, opcode: 'RDMA_WRITE', sgList: [sge(lmr)], remoteAddr: otherPd.iova, rkey: otherPd.rkey } },
        { phase: 'write_past_end', what: "WRITE reaching past the MR's end", want: 'REM_ACCESS_ERR', remote: true,
          wr: { wrId: 3, opcode: 'RDMA_WRITE', sgList: [sge(lmr)], remoteAddr: rw.iova + 2 * PAGE - 32, rkey: rw.rkey } },
        { phase: 'read_before_mr', what: 'READ starting before the MR', want: 'REM_ACCESS_ERR', remote: true,
          wr: { wrId: 4, opcode: 'RDMA_READ', sgList: [sge(lmr)], remoteAddr: ro.iova - 8, rkey: ro.rkey } },
        { phase: 'write_no_remote_write', what: 'WRITE to an MR without REMOTE_WRITE', want: 'REM_ACCESS_ERR', remote: true,
          wr: { wrId: 5, opcode: 'RDMA_WRITE', sgList: [sge(lmr)], remoteAddr: ro.iova, rkey: ro.rkey } },
        { phase: 'read_no_remote_read', what: 'READ of an MR without REMOTE_READ', want: 'REM_ACCESS_ERR', remote: true,
          wr: { wrId: 6, opcode: 'RDMA_READ', sgList: [sge(lmr)], remoteAddr: noWrite.iova, rkey: noWrite.rkey } },
        { phase: 'atomic_no_remote_atomic', what: 'fetch-and-add on an MR without REMOTE_ATOMIC', want: 'REM_ACCESS_ERR', remote: true,
          wr: { wrId: 7, opcode: 'ATOMIC_FETCH_AND_ADD', compareAdd: 1, sgList: [sge(lmr, 0, 8)], remoteAddr: rw.iova, rkey: rw.rkey } },
        // local keys (checked by the requester on adapter 1)
        { phase: 'stale_lkey', what: 'WRITE from an SGE with a stale lkey tag', want: 'LOC_PROT_ERR', remote: false,
          wr: { wrId: 11, opcode: 'RDMA_WRITE', sgList: [{ ...sge(lmr), lkey: stale(lmr.lkey) }], remoteAddr: rw.iova, rkey: rw.rkey } },
        { phase: 'lkey_other_pd', what: "WRITE from an SGE whose lkey is of another PD than the QP's", want: 'LOC_PROT_ERR', remote: false,
          wr: { wrId: 12, opcode: 'RDMA_WRITE', sgList: [sge(lOther)], remoteAddr: rw.iova, rkey: rw.rkey } },
        { phase: 'sge_past_end', what: "WRITE from an SGE past the MR's end", want: 'LOC_PROT_ERR', remote: false,
          wr: { wrId: 13, opcode: 'RDMA_WRITE', sgList: [sge(lmr, 2 * PAGE - 10, 64)], remoteAddr: rw.iova, rkey: rw.rkey } },
        { phase: 'read_no_local_write', what: 'READ into an MR without LOCAL_WRITE', want: 'LOC_PROT_ERR', remote: false,
          wr: { wrId: 14, opcode: 'RDMA_READ', sgList: [sge(lro)], remoteAddr: rw.iova, rkey: rw.rkey } },
      ];

      let spare: Qp | null = null; // a responder QP left in RTS by a local-error case
      for (const k of cases) {
        const [q0, q1] = await fresh();
        if (!k.remote) spare = q0;
        const before = snapshot();
        const localBefore = h1.read(s.addr, 4 * PAGE);
        // each case's work requests are a phase; the QPs made and queried around it are not
        const got = await tb.phase(k.phase, k.remote ? through.remote(1, 0) : through.local(1), async () => {
          q1.postSend([{ ...k.wr, signaled: true }, { wrId: 99, opcode: 'RDMA_WRITE', sgList: [sge(lmr, 0, 8)], remoteAddr: rw.iova, rkey: rw.rkey }]);
          return wait(cq1, 2, k.what);
        });
        c.equal(got.map((w) => [w.wrId, w.status]), [[k.wr.wrId, k.want], [99, 'WR_FLUSH_ERR']], `${k.what}: ${k.want}, the next WR flushed`);
        c.equal([(await q1.query()).state, (await q0.query()).state], k.remote ? ['ERR', 'ERR'] : ['ERR', 'RTS'], `${k.what}: QP states ${k.remote ? 'both ERR' : 'requester ERR, responder untouched'}`);
        c.check(sameBytes(snapshot(), before) && sameBytes(h1.read(s.addr, 4 * PAGE), localBefore), `${k.what}: no memory changed on either side`);
      }

      // a bad receive SGE (no LOCAL_WRITE): the receiver LOC_PROT_ERR, the sender REM_OP_ERR
      {
        const [q0, q1] = await fresh();
        const [rv, sd] = await tb.phase('recv_read_only', through.remote(1, 0).concat('hca0.cq_writer'), async () => {
          q0.postRecv({ wrId: 50, sgList: [{ addr: noWrite.iova, length: 256, lkey: noWrite.lkey }] });
          q1.postSend({ wrId: 51, opcode: 'SEND', sgList: [sge(lmr, 0, 100)], signaled: true });
          return [(await wait(cq0, 1, 'receive into a read-only buffer'))[0], (await wait(cq1, 1, 'SEND to a read-only receive buffer'))[0]] as const;
        });
        c.equal([rv?.wrId, rv?.status, sd?.wrId, sd?.status], [50, 'LOC_PROT_ERR', 51, 'REM_OP_ERR'], 'a receive SGE without LOCAL_WRITE: receiver LOC_PROT_ERR, sender REM_OP_ERR');
        c.equal([(await q0.query()).state, (await q1.query()).state], ['ERR', 'ERR'], 'both QPs go to ERR');
      }
      // a LOCAL_INV with a stale tag: LOC_QP_OP_ERR, and the MR stays valid (on a QP still in RTS)
      {
        const q0 = spare ?? (await fresh())[0];
        c.equal((await q0.query()).state, 'RTS', 'the QP for LOCAL_INV is in RTS');
        const [li] = await tb.phase('local_inv_stale', through.umr(0), async () => {
          q0.postSend({ wrId: 60, opcode: 'LOCAL_INV', invalidateRkey: stale(rw.lkey), signaled: true });
          return wait(cq0, 1, 'LOCAL_INV with a stale key');
        });
        c.equal(li && [li.wrId, li.status, li.opcode], [60, 'LOC_QP_OP_ERR', 'LOCAL_INV'], 'LOCAL_INV with a stale tag: LOC_QP_OP_ERR');
        c.check(((await ctx0.queryMkey(rw.lkey))[0] & 0x40) === 0, 'the MR stays VALID');
      }
    }),
};

export default scenario;
