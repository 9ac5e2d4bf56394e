/**
 * The transaction log (`trace.txlog`, `mlx5sim run --txlog`): the life of every work request,
 * firmware command and page fault, told by taps on the engines (each a nullable field the
 * engine checks once; untraced they cost one compare).
 *
 * `x.txlog.jsonl` holds one JSON object a line (`type` wr, cmd or fault; times in simulated
 * picoseconds), written as each ends (a WR when it is polled, or a later WR of its QP is), the
 * rest at close. `x.trace.json` (beside it: `traceJsonPath`) holds the same as Chrome trace
 * events for ui.perfetto.dev: a process per adapter, a track per QP and per engine.
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import type { LinkTap } from '../../rtl/transport/link.ts';
import { Link, PACKET_HEADER_BYTES } from '../../rtl/transport/link.ts';
import type { RcRequest, RcResponse } from '../../rtl/transport/rc_types.ts';
import type { SqTap } from '../../rtl/transport/sq.ts';
import type { RequesterTap } from '../../rtl/transport/requester.ts';
import type { CqTap, CqeJob } from '../../rtl/completion/cq_writer.ts';
import type { CmdTap } from '../../rtl/firmware/cmdif.ts';
import type { FaultTap } from '../../rtl/translation/pagefault.ts';
import { CmdStatusEnum } from '../../rtl/firmware/cmd_types.ts';
import { CqeOpcode, CqeSyndrome, PageFaultFlag, PageFaultSubtype } from '../../rtl/formats/index.ts';
import type { Hca } from '../../rtl/hca.ts';
import { Timeline } from './timeline.ts';
import type { RecvWr, SendWr, WcOpcode } from '../types.ts';

/** The stages of a work request, in the order it passes them. */
export const WR_STAGES = [
  'posted', 'doorbell', 'fetched', 'started', 'translated', 'firstPacket', 'lastPacket', 'acknowledged', 'cqeWritten', 'polled',
] as const;
export type WrStage = (typeof WR_STAGES)[number];

/** One line of the log for a work request (`type: 'wr'`). */
export interface WrLine {
  type: 'wr';
  hca: number;
  qp: number;
  /** 'send' (postSend, bindMw, the driver's UMRs) or 'recv' (postRecv). */
  queue: 'send' | 'recv';
  /** The application's id (a string when it is a bigint). */
  wrId: number | string;
  opcode: string;
  /** The WQE's index (send queue WQEBB counter, or receive counter), 16 bits. */
  wqeIndex: number;
  length: number;
  lkeys: number[];
  /** The remote key (RDMA, atomics), or the key REG_MR gives the MR. */
  rkey?: number;
  /** The key to invalidate (LOCAL_INV, SEND_WITH_INV, RDMA_READ_WITH_INV). */
  invalidateRkey?: number;
  remoteAddr?: number;
  signaled: boolean;
  /** Simulated ps of each stage passed; absent: not passed. */
  stages: Partial<Record<WrStage, number>>;
  /** The local translation: cache misses and page faults (absent: none was made). */
  translation?: { mkeyMisses: number; mttMisses: number; outcome: 'ok' | 'error' | 'fault'; faults: number };
  /** Packets of the request on the wire (its last try), and how many times it was sent. */
  packets?: number;
  tries?: number;
  /** The answer: ACK, READ_DATA, ATOMIC_DATA, or NAK with its kind. */
  answer?: string;
  /** The completion's status (the CQE's syndrome by name), when one was written. */
  status?: string;
}

/** One line for a firmware command (`type: 'cmd'`). */
export interface CmdLine {
  type: 'cmd';
  hca: number;
  op: string;
  opcode: number;
  posted: number;
  start: number;
  end: number;
  status: string;
  /** The driver's MR-cache lane (execBackground). */
  background: boolean;
}

/** One line for a page fault (`type: 'fault'`). */
export interface FaultLine {
  type: 'fault';
  hca: number;
  qp: number;
  /** requestor / responder, and write when the HCA writes the page. */
  side: 'requestor' | 'responder';
  write: boolean;
  wqeIndex: number;
  va?: number;
  reported: number;
  resumed?: number;
  ok?: boolean;
  /** Queued behind the QP's fault in flight (retried when that one is resumed). */
  queued: boolean;
}

export type TxLine = WrLine | CmdLine | FaultLine;

/** The Perfetto file beside a transaction log: `x.txlog.jsonl` -> `x.trace.json`. */
export function traceJsonPath(txlog: string): string {
  return txlog.replace(/(\.txlog)?\.jsonl?$/, '') + '.trace.json';
}

interface Wr {
  line: WrLine;
  open: boolean;
}

/** What the log keeps of a posted work request. */
export interface PostInfo {
  wrId: number | bigint;
  opcode: string;
  length: number;
  lkeys: number[];
  rkey?: number;
  invalidateRkey?: number;
  remoteAddr?: number;
  signaled: boolean;
}

/** A send WR's fields for the log (`w` null: the driver's own UMR work, posted signaled). */
export function sendPostInfo(w: SendWr | null, wrId: number | bigint, opcode: WcOpcode): PostInfo {
  if (w === null) return { wrId, opcode, length: 0, lkeys: [], signaled: true };
  const sg = w.sgList ?? [];
  const p: PostInfo = { wrId, opcode: w.opcode, length: sg.reduce((a, s) => a + s.length, 0), lkeys: sg.map((s) => s.lkey), signaled: w.signaled ?? false };
  const rkey = w.opcode === 'REG_MR' ? w.key : w.rkey;
  if (rkey !== undefined) p.rkey = rkey >>> 0;
  if (w.invalidateRkey !== undefined) p.invalidateRkey = w.invalidateRkey >>> 0;
  if (w.remoteAddr !== undefined) p.remoteAddr = w.remoteAddr;
  return p;
}

/** A receive WR's fields for the log. */
export function recvPostInfo(w: RecvWr): PostInfo {
  return { wrId: w.wrId, opcode: 'RECV', length: w.sgList.reduce((a, s) => a + s.length, 0), lkeys: w.sgList.map((s) => s.lkey), signaled: true };
}

const syndromeName = new Map<number, string>(Object.entries(CqeSyndrome).map(([k, v]) => [v as number, k]));
const qpKey = (hca: number, qpn: number): number => hca * 2 ** 24 + qpn;

export class TxLog {
  private readonly fd: number;
  /** Open send WRs per QP, in posting order; receive WRs by counter. */
  private readonly sendQ = new Map<number, Wr[]>();
  private readonly recvQ = new Map<string, Wr>();
  /** Messages on the wire: (hca, qpn, seq) -> the WR and the adapter it went to. */
  private readonly bySeq = new Map<string, { w: Wr; to: number }>();
  private readonly faults = new Map<string, FaultLine[]>();
  private readonly timeline = new Timeline();
  private closed = false;
  readonly jsonPath: string;
  /** The taps on the link: requests and answers. */
  readonly requests: LinkTap<RcRequest>;
  readonly responses: LinkTap<RcResponse>;

  constructor(
    readonly path: string,
    private readonly now: () => number,
  ) {
    mkdirSync(dirname(path), { recursive: true });
    this.fd = openSync(path, 'w');
    this.jsonPath = traceJsonPath(path);
    this.requests = { sent: (to, m, bytes, mtu, start, _at, ppb) => this.onRequest(to, m, bytes, mtu, start, ppb) };
    this.responses = { sent: (_to, a, bytes, mtu, start, at, ppb) => this.onAnswer(a, bytes, mtu, start, at, ppb) };
  }

  /** Attaches the engines' taps of adapter `i`. */
  attach(h: Hca, i: number): void {
    const sq: SqTap = {
      doorbell: (qpn, pi) => this.doorbell(i, qpn, pi),
      fetched: (qpn, idx) => this.stage(i, qpn, idx, 'fetched'),
      started: (qpn, idx) => this.stage(i, qpn, idx, 'started'),
    };
    const req: RequesterTap = { translated: (qpn, idx, outcome, mk, mtt) => this.translated(i, qpn, idx, outcome, mk, mtt) };
    const cq: CqTap = { written: (j) => this.cqe(i, j) };
    const cmd: CmdTap = { command: (op, opcode, posted, start, status, bg) => this.command(i, op, opcode, posted, start, status, bg) };
    const pf: FaultTap = { reported: (r, queued) => this.faultReported(i, r, queued), resumed: (qpn, flags, ok) => this.faultResumed(i, qpn, flags, ok) };
    h.sq.tap = sq;
    h.requester.tap = req;
    h.cqWriter.tap = cq;
    h.cmdif.tap = cmd;
    h.pagefault.tap = pf;
  }

  /** @internal The driver wrote a send WQE at `wqeIndex` (before its doorbell). */
  postedSend(hca: number, qpn: number, wqeIndex: number, p: PostInfo): void {
    const w: Wr = { line: this.wrLine(hca, qpn, 'send', wqeIndex, p), open: true };
    const k = qpKey(hca, qpn);
    let q = this.sendQ.get(k);
    if (q === undefined) this.sendQ.set(k, (q = []));
    q.push(w);
  }

  /** @internal The driver posted a receive WQE at counter `index`. */
  postedRecv(hca: number, qpn: number, index: number, p: PostInfo): void {
    this.recvQ.set(`${hca}.${qpn}.${index & 0xffff}`, { line: this.wrLine(hca, qpn, 'recv', index & 0xffff, p), open: true });
  }

  private wrLine(hca: number, qp: number, queue: 'send' | 'recv', wqeIndex: number, p: PostInfo): WrLine {
    return {
      type: 'wr', hca, qp, queue, wrId: typeof p.wrId === 'bigint' ? p.wrId.toString() : p.wrId, opcode: p.opcode, wqeIndex,
      length: p.length, lkeys: p.lkeys, ...(p.rkey !== undefined ? { rkey: p.rkey } : {}),
      ...(p.invalidateRkey !== undefined ? { invalidateRkey: p.invalidateRkey } : {}),
      ...(p.remoteAddr !== undefined ? { remoteAddr: p.remoteAddr } : {}), signaled: p.signaled, stages: { posted: this.now() },
    };
  }

  /** @internal The application polled the completion of WQE `counter` (send or receive). */
  polled(hca: number, qpn: number, send: boolean, counter: number): void {
    if (!send) {
      const k = `${hca}.${qpn}.${counter & 0xffff}`;
      const w = this.recvQ.get(k);
      if (w === undefined) return;
      w.line.stages.polled = this.now();
      this.recvQ.delete(k);
      this.finish(w);
      return;
    }
    // a CQE completes its WQE and every unsignaled one before it
    const q = this.sendQ.get(qpKey(hca, qpn));
    if (q === undefined) return;
    const i = q.findIndex((w) => w.line.wqeIndex === (counter & 0xffff));
    if (i < 0) return;
    q[i].line.stages.polled = this.now();
    for (const w of q.splice(0, i + 1)) this.finish(w);
  }

  private sendWr(hca: number, qpn: number, idx: number, missing: WrStage): Wr | undefined {
    const q = this.sendQ.get(qpKey(hca, qpn));
    if (q === undefined) return undefined;
    for (const w of q) if (w.line.wqeIndex === idx && w.line.stages[missing] === undefined) return w;
    return undefined;
  }

  private doorbell(hca: number, qpn: number, pi: number): void {
    const q = this.sendQ.get(qpKey(hca, qpn));
    if (q === undefined) return;
    const t = this.now();
    for (const w of q) {
      // posted below the producer counter (16-bit counters: the distance is under half the ring)
      const d = (pi - w.line.wqeIndex) & 0xffff;
      if (w.line.stages.doorbell === undefined && d > 0 && d < 0x8000) w.line.stages.doorbell = t;
    }
  }

  private stage(hca: number, qpn: number, idx: number, s: WrStage): void {
    const w = this.sendWr(hca, qpn, idx, s);
    if (w !== undefined) w.line.stages[s] = this.now();
  }

  private translated(hca: number, qpn: number, idx: number, outcome: 'ok' | 'error' | 'fault', mk: number, mtt: number): void {
    const q = this.sendQ.get(qpKey(hca, qpn));
    const w = q?.find((x) => x.line.wqeIndex === idx && x.line.stages.firstPacket === undefined && x.line.stages.cqeWritten === undefined);
    if (w === undefined) return;
    const t = w.line.translation ?? { mkeyMisses: 0, mttMisses: 0, outcome, faults: 0 };
    t.mkeyMisses += mk;
    t.mttMisses += mtt;
    t.outcome = outcome;
    if (outcome === 'fault') t.faults++;
    w.line.translation = t;
    w.line.stages.translated = this.now();
  }

  /** A message's slice on the sending adapter's wire track: its serialization. */
  private wireSlice(from: number, track: string, name: string, bytes: number, mtu: number, start: number, ppb: number): void {
    const wire = bytes + Link.packets(bytes, mtu) * PACKET_HEADER_BYTES;
    this.timeline.slice(from, track, name, start, start + Math.ceil(wire * ppb));
  }

  private onRequest(to: number, m: RcRequest, bytes: number, mtu: number, start: number, ppb: number): void {
    this.wireSlice(m.srcHca, `wire to adapter ${to}`, `${m.op} QP 0x${m.dstQpn.toString(16)}`, bytes, mtu, start, ppb);
    if (m.wqeIndex === undefined) return;
    const w = this.sendWr(m.srcHca, m.srcQpn, m.wqeIndex, 'cqeWritten');
    if (w === undefined) return;
    const l = w.line;
    const carried = m.op === 'READ' ? 0 : m.op === 'CMP_SWAP' || m.op === 'FETCH_ADD' ? 28 : (m.payload?.length ?? 0);
    const n = m.op === 'READ' || m.op === 'CMP_SWAP' || m.op === 'FETCH_ADD' ? 1 : Link.packets(carried, mtu);
    // the last packet leaves after the ones before it are serialized (as the link charges them)
    const before = (n - 1) * (mtu + PACKET_HEADER_BYTES);
    if (l.stages.firstPacket === undefined) l.stages.firstPacket = start;
    l.stages.lastPacket = start + Math.floor(before * ppb);
    l.packets = n;
    l.tries = (l.tries ?? 0) + 1;
    this.bySeq.set(`${m.srcHca}.${m.srcQpn}.${m.seq}`, { w, to });
  }

  private onAnswer(a: RcResponse, bytes: number, mtu: number, start: number, at: number, ppb: number): void {
    const k = `${a.dstHca}.${a.dstQpn}.${a.seq}`;
    const sent = this.bySeq.get(k);
    if (sent === undefined) return;
    this.bySeq.delete(k);
    const w = sent.w;
    this.wireSlice(sent.to, `wire to adapter ${a.dstHca}`, `${a.kind === 'NAK' ? `NAK ${a.nak ?? ''}` : a.kind} QP 0x${a.dstQpn.toString(16)}`, bytes, mtu, start, ppb);
    w.line.stages.acknowledged = at;
    w.line.answer = a.kind === 'NAK' ? `NAK ${a.nak ?? ''}`.trim() : a.kind;
  }

  private cqe(hca: number, j: CqeJob): void {
    const t = this.now();
    const status = j.syndrome === 0 ? 'SUCCESS' : (syndromeName.get(j.syndrome) ?? `0x${j.syndrome.toString(16)}`);
    if (j.opcode === CqeOpcode.REQ || j.opcode === CqeOpcode.REQ_ERR) {
      const w = this.sendWr(hca, j.qpn, j.wqeCounter & 0xffff, 'cqeWritten');
      if (w === undefined) return;
      w.line.stages.cqeWritten = t;
      w.line.status = status;
      return;
    }
    const w = this.recvQ.get(`${hca}.${j.qpn}.${j.wqeCounter & 0xffff}`);
    if (w === undefined) return;
    w.line.stages.cqeWritten = t;
    w.line.status = status;
    w.line.length = j.byteCnt;
  }

  private command(hca: number, op: string, opcode: number, posted: number, start: number, status: number, background: boolean): void {
    const l: CmdLine = { type: 'cmd', hca, op, opcode, posted, start, end: this.now(), status: CmdStatusEnum.nameOf(status), background };
    this.write(l);
    this.timeline.slice(hca, background ? 'firmware (background)' : 'firmware', op, start, l.end, { status: l.status, waited_ps: start - posted });
  }

  private faultReported(hca: number, r: Parameters<FaultTap['reported']>[0], queued: boolean): void {
    const requestor = (r.flags & PageFaultFlag.REQUESTOR) !== 0;
    const f: FaultLine = {
      type: 'fault', hca, qp: r.qpn, side: requestor ? 'requestor' : 'responder', write: (r.flags & PageFaultFlag.WRITE) !== 0,
      wqeIndex: r.subType === PageFaultSubtype.WQE ? r.wqeIndex : 0, reported: this.now(), queued,
    };
    if (r.subType === PageFaultSubtype.RDMA) f.va = r.rdmaVa;
    const k = `${hca}.${r.qpn}.${requestor ? 1 : 0}`;
    let l = this.faults.get(k);
    if (l === undefined) this.faults.set(k, (l = []));
    l.push(f);
  }

  private faultResumed(hca: number, qpn: number, flags: number, ok: boolean): void {
    const k = `${hca}.${qpn}.${(flags & PageFaultFlag.REQUESTOR) !== 0 ? 1 : 0}`;
    const l = this.faults.get(k);
    if (l === undefined) return;
    this.faults.delete(k);
    const t = this.now();
    // the fault in flight and those queued behind it end together
    for (const f of l) {
      f.resumed = t;
      f.ok = f.queued ? true : ok;
      this.writeFault(f);
    }
  }

  private writeFault(f: FaultLine): void {
    this.write(f);
    this.timeline.slice(f.hca, 'page faults', `fault QP 0x${f.qp.toString(16)} ${f.side}`, f.reported, f.resumed ?? f.reported, { ok: f.ok ?? null, va: f.va ?? null });
  }

  private finish(w: Wr): void {
    if (!w.open) return;
    w.open = false;
    this.write(w.line);
    this.wrSlices(w.line);
  }

  /** The WR as a slice on its QP's track, its stages as slices inside it. */
  private wrSlices(l: WrLine): void {
    const s = l.stages;
    const times = WR_STAGES.map((k) => s[k]).filter((t): t is number => t !== undefined);
    const end = Math.max(...times);
    const track = `QP 0x${l.qp.toString(16)}${l.queue === 'recv' ? ' recv' : ''}`;
    const spans: [string, WrStage, WrStage][] = [
      ['queue', 'posted', 'started'], ['translate', 'started', 'translated'], ['wire', 'firstPacket', 'lastPacket'],
      ['wait answer', 'lastPacket', 'acknowledged'], ['complete', 'acknowledged', 'cqeWritten'], ['poll', 'cqeWritten', 'polled'],
    ];
    const children: { name: string; start: number; end: number }[] = [];
    for (const [name, a, b] of spans) {
      const t0 = s[a];
      const t1 = s[b];
      if (t0 !== undefined && t1 !== undefined && t1 >= t0) children.push({ name, start: t0, end: t1 });
    }
    const args: Record<string, unknown> = { wrId: l.wrId, wqeIndex: l.wqeIndex, length: l.length, status: l.status ?? null };
    if (l.translation) args.translation = l.translation;
    this.timeline.slice(l.hca, track, `${l.opcode} wr ${l.wrId}`, s.posted ?? end, end, args, children);
  }

  private write(l: TxLine): void {
    writeSync(this.fd, JSON.stringify(l) + '\n');
  }

  /** Writes the WRs still open, the faults not resumed, and the Perfetto file; closes the log. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const q of this.sendQ.values()) for (const w of q) this.finish(w);
    for (const w of this.recvQ.values()) this.finish(w);
    for (const l of this.faults.values()) for (const f of l) this.writeFault(f);
    closeSync(this.fd);
    this.timeline.write(this.jsonPath);
  }
}
