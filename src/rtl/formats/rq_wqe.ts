/**
 * A receive WQE: data segments (16 B each) of the posted SGEs, ended by one with the invalid
 * lkey when there is room (spec/mlx5.md "Other segments"); its stride is a power of two.
 */

/** Bytes of a receive WQE: 16 per SGE, a power of two (the list ends with the invalid lkey). */
export function rqStride(maxRecvSge: number): number {
  let s = 16;
  while (s < 16 * Math.max(1, maxRecvSge + 1)) s *= 2;
  return s;
}

/**
 * Receive WQEs in a receive queue of `maxRecvWr` requests: a power of two, and at least one send
 * WQEBB (64 B) of them, as mlx5's set_rq_size rounds the queue up (wq_size at least
 * MLX5_SEND_WQE_BB): the send queue after it in the same buffer then starts on a WQEBB.
 */
export function rqWqeCount(maxRecvWr: number, maxRecvSge: number): number {
  let n = 1;
  while (n < maxRecvWr) n *= 2;
  return Math.max(n, 64 / Math.min(64, rqStride(maxRecvSge)));
}
