import type { EventTarget } from '../../sim/index.ts';

/**
 * The UMR engine's interface with the send queue engine: a UMR WQE (REG_MR, LOCAL_INV,
 * BIND_MW, unbind) fetched from the send queue, executed against ICM and the caches, and the
 * completion syndrome (0: success; else a CqeSyndrome: LOC_QP_OP_ERR, MW_BIND_ERR, ...).
 */
export interface UmrJob {
  /** Returned with the completion. */
  tag: number;
  /** The posting QP (CHECK_QPN, type-2 windows) and its PD (C10-72). */
  qpn: number;
  pd: number;
  /**
   * The posting QP's qpc.fre (fast registration enabled): without it a UMR may not write an
   * MR's translations (REG_MR, translation updates; umr_ops.ts checkUmr). The hardware's own
   * invalidations (RDMA_READ_WITH_INV, SEND_WITH_INV) carry true.
   */
  fre: boolean;
  /** The WQE's bytes (ds * 16), as fetched from the send queue. */
  wqe: Uint8Array;
}

export interface UmrDone {
  tag: number;
  syndrome: number;
}

/**
 * The ICM writer as the UMR engine sees it (firmware/icm_writer.ts implements it; hca.ts wires
 * it): the engine announces each posted write and makes the writer its `landed` target, so the
 * caches follow the write when it lands in ICM, then the engine is told (`then.fire(thenTag)`).
 */
export interface UmrIcmWriter extends EventTarget {
  /** A write of `length` bytes at `addr`: the context of mkey `index`, or (-1) translation entries. Returns the write's tag. */
  posting(index: number, addr: number, length: number, then: EventTarget | null, thenTag: number, dereg?: boolean): number;
}
