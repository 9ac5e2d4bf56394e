/** The ATU's request and result: what data-path modules ask of address translation. */
import type { PhysSegment } from '../memory/dma_mover.ts';

/** Translate `[va, va + length)` of `key` for `access` (ib_access_flags bits) on behalf of a QP. */
export interface AtuRequest {
  key: number;
  va: number;
  length: number;
  access: number;
  pd: number;
  qpn: number;
  /** The client's own tag, returned with the result. */
  tag: number;
  /** A local SGE's lkey: only an MR's key is an lkey (windows give remote access only). */
  local?: boolean;
  /**
   * Where the ATU writes the answer instead of building a new one (a hot-path saving): the
   * client's, reused for its next request, so the client sends the next request with it only
   * when nothing reads this answer any more. Errors and faults still come in new results.
   */
  answer?: AtuAnswer;
}

/** A client-owned answer (see AtuRequest.answer): the response, and the ok result with its segments. */
export class AtuAnswer {
  readonly ok: { kind: 'ok'; segments: PhysSegment[] } = { kind: 'ok', segments: [] };
  readonly resp: AtuResponse = { tag: 0, result: this.ok, mkeyMisses: 0, mttMisses: 0, fenceKey: 0, fenceInd: 0, partial: null };
}

/** Why a translation failed (the order of checks follows spec/semantics.md "Data path"). */
export type AtuError = 'INVALID_KEY' | 'FREE' | 'PD' | 'QPN' | 'ACCESS' | 'BOUNDS' | 'INDIRECTION';

/** A physically contiguous piece of the translated range (declared in memory/: DMA moves it). */
export type { PhysSegment };

/**
 * The outcome: physical segments in va order (adjacent ones merged), an error with the key
 * where it was found (outer or nested), or a page fault (ODP) at the outer va of the first byte
 * not present, with the bytes translated before it.
 */
export type AtuResult =
  | { kind: 'ok'; segments: PhysSegment[] }
  | { kind: 'error'; error: AtuError; key: number }
  | { kind: 'fault'; va: number; bytesCommitted: number; write: boolean };

export interface AtuResponse {
  tag: number;
  result: AtuResult;
  /** Lookups of this translation that missed the mkey cache and the MTT cache (the transaction log). */
  mkeyMisses?: number;
  mttMisses?: number;
  /**
   * DMA fence holds the answer carries (translation/dma_fence.ts), on a fenced port: the mkey's
   * and, if the walk entered a KLM or KSM mkey, the INDIRECT slot's; 0 for none. The client
   * releases them when the DMA through the answer is over (an error answer carries none).
   */
  fenceKey?: number;
  fenceInd?: number;
  /**
   * A fault's answer: the physical segments of the `bytesCommitted` bytes translated before the
   * page not present (a responder places the packets before it: bytes_committed), else null.
   */
  partial?: PhysSegment[] | null;
}
