/**
 * RC messages between a requester and the responder of the peer adapter (whole messages: the
 * link accounts for their packets), and the responder's answers.
 */
import type { PooledBuf } from '../memory/payload_pool.ts';

/** Request operations on the wire. */
export type RcOp = 'SEND' | 'SEND_IMM' | 'SEND_INV' | 'WRITE' | 'WRITE_IMM' | 'READ' | 'CMP_SWAP' | 'FETCH_ADD';

export interface RcRequest {
  op: RcOp;
  srcHca: number;
  srcQpn: number;
  dstQpn: number;
  /** Matches the answer to the request. */
  seq: number;
  /** The WQE it carries out (its index in the send queue): for the transaction log. */
  wqeIndex?: number;
  raddr: number;
  rkey: number;
  length: number;
  /**
   * Bytes of the message the responder placed before an RNR NAK of a page fault (its
   * bytes_committed): this try carries the rest, from `raddr` (already advanced) on, as the
   * requester resends from the NAK'd packet. 0 for a whole message.
   */
  offset: number;
  /** SEND and WRITE data. */
  payload: Uint8Array | null;
  /** The pooled buffer behind `payload`, if any: the requester holds it until the ACK. */
  payloadBuf?: PooledBuf | null;
  imm: number;
  invRkey: number;
  /**
   * Solicited event (the BTH SE bit of the message's last packet), from the WQE's fm_ce_se SE
   * bit. Meaningful for SEND* and RDMA WRITE with immediate (man ibv_post_send,
   * IBV_SEND_SOLICITED: "valid only for Send and RDMA Write with immediate").
   */
  se: boolean;
  /** Atomics: compare (CMP_SWAP) and swap-or-add operands, as 8-byte little-endian host words. */
  compare: Uint8Array | null;
  swapAdd: Uint8Array | null;
}

/** NAK kinds: remote access error, invalid request, remote operational error, receiver not ready. */
export type RcNak = 'ACCESS' | 'INV_REQ' | 'REM_OP' | 'RNR';

export interface RcResponse {
  dstHca: number;
  dstQpn: number;
  seq: number;
  kind: 'ACK' | 'NAK' | 'READ_DATA' | 'ATOMIC_DATA';
  nak?: RcNak;
  /** An RNR NAK after the message's first bytes were placed: bytes of it placed (a packet boundary). */
  committed?: number;
  data?: Uint8Array;
  /** The pooled buffer behind READ `data`, carrying the responder's reference to the requester. */
  dataBuf?: PooledBuf | null;
}
