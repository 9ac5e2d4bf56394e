/**
 * What the transport engines know of the firmware's QP table: a QP's context (read-only, a live
 * view) and the one change the hardware makes on its own, moving a QP to ERR. A narrow interface,
 * so the engines depend on these two calls and not on the command interface behind them.
 */

/** The fields of a QP context the send queue engine, requester and responder read. */
export interface QpView {
  readonly qpn: number;
  readonly pd: number;
  readonly sendCqn: number;
  readonly recvCqn: number;
  /** Send queue WQEBBs and receive queue WQEs, powers of two. */
  readonly sqSize: number;
  readonly rqSize: number;
  readonly maxRecvSge: number;
  /** Host physical addresses of the queue buffers (without a page list). */
  readonly sqBufAddr: number;
  readonly rqBufAddr: number;
  /** The rings' pages (memory/pas.ts): the send queue starts `sqOffset` bytes into sqPages. */
  readonly rqPages: QueuePages;
  readonly sqPages: QueuePages;
  readonly sqOffset: number;
  /** qpc.fre: fast registration enabled (UMR WQEs that write translations are allowed). */
  readonly fre: boolean;
  /** The driver's UMR QP: it may take the WQE slots kept for it (transport/sq.ts). */
  readonly umr: boolean;
  readonly state: 'RESET' | 'INIT' | 'RTR' | 'RTS' | 'ERR';
  readonly remoteQpn: number;
  readonly remoteHca: number;
  readonly mtu: number;
  /** ACK timeout exponent (0: the default 14), retry counts. */
  readonly timeout: number;
  readonly retryCnt: number;
  readonly rnrRetry: number;
  /** RDMA READs and atomics outstanding as initiator, at most. */
  readonly maxRdAtomic: number;
}

import type { QpErrorEvent } from '../formats/constants.ts';
import type { QueuePages } from '../memory/pas.ts';
export type { QpErrorEvent };

export interface QpTable {
  /** The QP's context, or undefined once destroyed (DESTROY_QP) or never created. */
  getQp(qpn: number): QpView | undefined;
  /**
   * The hardware moves the QP to ERR (a completion in error, a remote access violation), raising
   * the QP's asynchronous event when one is named (spec/semantics.md "Events").
   */
  hwError(qpn: number, event?: QpErrorEvent): void;
}
