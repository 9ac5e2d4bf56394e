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
