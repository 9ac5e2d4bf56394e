/**
 * Completion channels and asynchronous events (API.md "Completion channels and asynchronous
 * events"): an armed CQ raises one COMP event (the CQ writer's event, the EQ writer's EQE and
 * MSI-X interrupt, the driver's handler 5 us later), then must be armed again; a remote access
 * violation raises QP_ACCESS_ERR at the responder.
 */
import { Access } from '../src/index.ts';
import type { Scenario } from '../src/scenario.ts';
import { PAGE, twoAdapters, runScenario } from './support/two_adapters.ts';

/** A SEND into the armed CQ of adapter 1: the event writers first (the subject), then the SEND's way. */
const EVENT = ['hca1.cq_writer', 'hca1.eq_writer', 'hca0.sq', 'hca0.requester', 'link_req', 'hca1.responder', 'link_resp', 'hca0.cq_writer'];

const scenario: Scenario = {
  name: 'cq-events',
  summary: 'completion events: reqNotify, the COMP EQE and interrupt, getCqEvent, re-arm; an access error raises QP_ACCESS_ERR',
  run: (opts) =>
    runScenario(opts, async (tb, c, wait) => {
      const { ctx1, pd0, pd1, cq0, pair } = await twoAdapters(tb);
      const [qp0, qp1] = await pair(pd0, pd1);
      const ch = ctx1.createCompChannel();
      const ecq = await ctx1.createCq(16, { channel: ch });
      const qp1b = await pd1.createQp({ sendCq: ecq, recvCq: ecq });
      const qp0b = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      await qp0b.connect(qp1b);
      const a = tb.host(0).alloc(PAGE);
      const b = tb.host(1).alloc(PAGE);
      const mr0 = await pd0.regMr(a.addr, PAGE, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, PAGE, Access.LOCAL_WRITE);
      for (let i = 1; i <= 2; i++) qp1b.postRecv({ wrId: i, sgList: [{ addr: b.addr, length: 64, lkey: mr1.lkey }] });
      const send = (id: number): void => qp0b.postSend({ wrId: id, opcode: 'SEND', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], signaled: true });

      await tb.phase('cq_event', EVENT, async () => {
        tb.mark('arm');
        ecq.reqNotify();
        send(1);
        const got = await ch.getCqEvent({ timeout: 1e9 });
        tb.mark('cq_event');
        c.check(got === ecq, 'getCqEvent returns the armed CQ after its next CQE');
        c.equal(ecq.poll(4).map((w) => w.wrId), [1], 'the CQE is there to poll');
      });
      await tb.phase('rearm', EVENT, async () => {
        ecq.ackEvents(1);
        ecq.reqNotify();
        send(2);
        c.check((await ch.getCqEvent({ timeout: 1e9 })) === ecq, 're-armed: the next CQE raises the next event');
        tb.mark('cq_event_2');
        ecq.ackEvents(1);
        await wait(cq0, 2, 'sends_done');
      });

      // the refused WRITE moves the responder's QP to ERR: a QP event, EQE and interrupt on adapter 1
      const ev = await tb.phase('access_error', ['hca1.eq_writer', 'hca1.responder', 'hca0.sq', 'hca0.requester', 'link_req', 'link_resp', 'hca0.cq_writer'], async () => {
        tb.mark('access_error');
        qp0.postSend({ wrId: 9, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
        const [e] = await wait(cq0, 1, 'write_refused');
        c.equal(e?.status, 'REM_ACCESS_ERR', 'an RDMA WRITE without REMOTE_WRITE is refused');
        const got = await ctx1.getAsyncEvent({ timeout: 1e9 });
        tb.mark('async_event');
        return got;
      });
      c.equal(ev, { type: 'QP_ACCESS_ERR', qpNum: qp1.qpNum }, 'the responder QP raises QP_ACCESS_ERR');
      const st = tb.stats();
      // beside the command EQ's interrupts (firmware commands, the MR cache's fills among them)
      const irqs = (st['tb.hca1.eq_writer']?.interrupts as number) - (st['tb.hca1.eq_writer']?.cmd_interrupts as number);
      c.equal(irqs, 3, 'three interrupts on hca1 beside the command completions: two completion events and the QP event');
    }),
};

export default scenario;
