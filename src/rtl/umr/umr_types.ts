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
  /** The WQE's bytes (ds * 16), as fetched from the send queue. */
  wqe: Uint8Array;
}

export interface UmrDone {
  tag: number;
  syndrome: number;
}
