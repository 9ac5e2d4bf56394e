/**
 * The page-fault unit (`tb.hcaN.pagefault`): on-demand paging's meeting point between the data
 * path and the driver (spec/semantics.md "On-demand paging").
 *
 * An engine whose translation came back FAULT (an ODP MR's page not present) reports it here.
 * The unit stalls the QP (the send queue engine dispatches nothing more of it), writes the
 * PAGE_FAULT EQE through the EQ writer (spec/mlx5.md "Page-fault EQE data": subtype WQE with
 * REQUESTOR for the requester's own SGE, + WRITE when the HCA writes the page; subtype RDMA for a
 * responder's rkey; subtype WQE without REQUESTOR for a receive buffer), and waits for the
 * driver's PAGE_FAULT_RESUME (command 0x204, flags_qpn). Resume lets the QP go on from where it
 * stopped; resume with ERROR ends the faulting work in error (the engine decides the status).
 *
 * One fault is in flight per QP and side (requester or responder): a second fault of the same
 * QP and side waits for the first's resume, then retries its translation (the first fault's
 * mapping may have brought its pages in too). Other QPs keep running.
 */
import { Module, enumType, flagsType, type Signal } from '../../sim/index.ts';
import { EQE_DATA_SIZE, encodeEqePageFault, EQE_DATA_OFFSET, type EqePageFault } from '../formats/eqe.ts';
import { EventType, PageFaultFlag } from '../formats/constants.ts';

/** The engine that reported a fault, told when the driver resumed it. */
export interface FaultClient {
  /** `ok` false: the driver resumed with ERROR (the range cannot be mapped). */
  faultResumed(token: number, ok: boolean): void;
}

/** Where the unit stalls and resumes a QP's send queue (the send queue engine). */
export interface QpStaller {
  stallQp(qpn: number): void;
  resumeQp(qpn: number): void;
}

/** Where the unit writes its EQE (the EQ writer; routed by the EQs' event masks). */
export interface EventSink {
  post(job: { eqn: number; type: number; subType: number; data: Uint8Array | null }): void;
}

/** A fault as an engine reports it: the page-fault EQE's fields. */
export type FaultReport = EqePageFault;

export const [PagefaultState, PF] = enumType('pagefault_state', ['IDLE', 'FAULT', 'RESUME', 'ERROR']);

/** The page-fault flags (REQUESTOR, WRITE, RDMA; ERROR on resume) by the bits set. */
export const PageFaultFlags = flagsType('pagefault_flags', PageFaultFlag, 8);

interface Pending {
  report: FaultReport;
  client: FaultClient;
  token: number;
}

interface Side {
  inFlight: Pending | null;
  waiting: Pending[];
}

/** Sees every page fault and its resume (the transaction log); null when untraced. */
export interface FaultTap {
  /** A fault raised (its EQE posted), or queued behind the QP's fault in flight. */
  reported(r: FaultReport, queued: boolean): void;
  /** PAGE_FAULT_RESUME of the QP's fault on that side; `ok` false: resumed with ERROR. */
  resumed(qpn: number, flags: number, ok: boolean): void;
}

export class Pagefault extends Module {
  /** The transaction log's tap; null when untraced. */
  tap: FaultTap | null = null;
  private readonly sides = new Map<number, Side>();
  private readonly staller: QpStaller;
  private readonly sink: EventSink;
  private readonly fsm: Signal;
  private readonly sQpn: Signal;
  private readonly sFlags: Signal;
  private readonly sVa: Signal;
  private readonly sOutstanding: Signal;
  private readonly cFaults;
  private readonly cResumes;
  private readonly cErrors;
  private readonly cQueued;
  private outstanding = 0;

  constructor(parent: Module, name: string, opts: { deps: { staller: QpStaller; events: EventSink } }) {
    super(parent.sim, parent, name);
    this.staller = opts.deps.staller;
    this.sink = opts.deps.events;
    this.fsm = this.signal('state', PagefaultState.width, { enum: PagefaultState });
    this.sQpn = this.signal('qpn', 24);
    this.sFlags = this.signal('flags', 8, { enum: PageFaultFlags });
    this.sVa = this.signal('fault_va', 64);
    this.sOutstanding = this.signal('outstanding', 16);
    this.cFaults = this.stats.counter('faults');
    this.cResumes = this.stats.counter('resumes');
    this.cErrors = this.stats.counter('resume_errors');
    this.cQueued = this.stats.counter('queued_behind');
  }

  /** Faults written and not yet resumed. */
  override hasWork(): boolean {
    return this.outstanding > 0;
  }

  /** A faulting access: stalls its QP and raises the EQE, or queues behind the QP's fault in flight. */
  report(report: FaultReport, client: FaultClient, token: number): void {
    const key = sideKey(report.qpn, report.flags);
    let s = this.sides.get(key);
    if (s === undefined) {
      s = { inFlight: null, waiting: [] };
      this.sides.set(key, s);
    }
    const p: Pending = { report, client, token };
    if (this.tap !== null) this.tap.reported(report, s.inFlight !== null);
    if (s.inFlight !== null) {
      s.waiting.push(p);
      this.cQueued.inc();
      return;
    }
    s.inFlight = p;
    if ((report.flags & PageFaultFlag.REQUESTOR) !== 0) this.staller.stallQp(report.qpn);
    const eqe = new Uint8Array(64);
    const view = new DataView(eqe.buffer);
    encodeEqePageFault(view, 0, report);
    this.sink.post({ eqn: -1, type: EventType.PAGE_FAULT, subType: report.subType, data: eqe.slice(EQE_DATA_OFFSET, EQE_DATA_OFFSET + EQE_DATA_SIZE) });
    this.cFaults.inc();
    this.outstanding++;
    this.fsm.setNow(PF.FAULT);
    this.sQpn.setNow(report.qpn);
    this.sFlags.setNow(report.flags);
    this.sVa.setNow(report.subType === 1 ? report.rdmaVa : 0);
    this.sOutstanding.setNow(this.outstanding);
  }

  /**
   * PAGE_FAULT_RESUME executed (cmdif): resumes the QP's fault of that side (flags REQUESTOR),
   * with ERROR in error. The faults queued behind it retry. A resume with no fault is ignored
   * (the firmware accepts it; nothing waits).
   */
  resume(qpn: number, flags: number): void {
    const s = this.sides.get(sideKey(qpn, flags));
    if (s === undefined || s.inFlight === null) return;
    const p = s.inFlight;
    s.inFlight = null;
    this.outstanding--;
    const ok = (flags & PageFaultFlag.ERROR) === 0;
    if (this.tap !== null) this.tap.resumed(qpn, flags, ok);
    if (ok) this.cResumes.inc();
    else this.cErrors.inc();
    this.fsm.setNow(ok ? PF.RESUME : PF.ERROR);
    this.sQpn.setNow(qpn);
    this.sOutstanding.setNow(this.outstanding);
    if ((p.report.flags & PageFaultFlag.REQUESTOR) !== 0) this.staller.resumeQp(qpn);
    p.client.faultResumed(p.token, ok);
    const waiting = s.waiting;
    s.waiting = [];
    this.sides.delete(sideKey(qpn, flags));
    for (const w of waiting) w.client.faultResumed(w.token, true); // they translate again
    if (this.outstanding === 0) this.fsm.setNow(PF.IDLE);
  }

  /** DESTROY_QP: its faults are forgotten (the engines flush the QP's work). */
  forgetQp(qpn: number): void {
    for (const key of [sideKey(qpn, PageFaultFlag.REQUESTOR), sideKey(qpn, 0)]) {
      const s = this.sides.get(key);
      if (s?.inFlight) this.outstanding--;
      this.sides.delete(key);
    }
    this.sOutstanding.setNow(this.outstanding);
  }
}

function sideKey(qpn: number, flags: number): number {
  return qpn * 2 + ((flags & PageFaultFlag.REQUESTOR) !== 0 ? 1 : 0);
}
