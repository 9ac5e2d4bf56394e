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

/**
 * ICM-private bookkeeping of this model beyond icm_mkey.ts (reserved bytes of the entry):
 * - byte 3 bit 1: MW_BIND: an MR whose access includes IB_ACCESS_MW_BIND (mlx5 leaves C10-73 to
 *   software; the model enforces it in hardware). A UMR mkey segment carries it in the same
 *   reserved bit (byte 3 of the segment), set by this project's driver.
 * - byte 3 bits 3:2: object kind: 0 MR, 1 memory window type 1, 2 memory window type 2.
 * - bytes 48..51: windows currently bound to this MR (LOCAL_INV, remote invalidate and dereg
 *   fail while it is not 0).
 */
export const ICM_MW_BIND = 0x02;
export const ICM_KIND_SHIFT = 2;
export const ICM_KIND_MASK = 0x0c;
export const MKEY_KIND_MR = 0;
export const MKEY_KIND_MW1 = 1;
export const MKEY_KIND_MW2 = 2;
export const ICM_MW_COUNT = 48;
