/**
 * Queue buffers addressed page by page through a physical address list (PAS), as the device
 * addresses CQ, SQ and RQ rings: CREATE_CQ and CREATE_QP carry the buffer's pages in their input
 * mailbox and the page size in the context, so a ring of any legal size works over scattered
 * pages. Offsets in the mailboxes (Linux include/linux/mlx5/mlx5_ifc.h):
 * - create_cq_in: cq_context (cqc) at byte 0x10, `pas[]` (u64 each) at byte 0x110;
 *   cqc.log_page_size is bits 4:0 of cqc byte 0x18 (create_cq_in byte 0x28);
 * - create_qp_in: qpc at byte 0x18, `pas[]` at byte 0x110; qpc.log_page_size is bits 4:0 of
 *   qpc byte 0x14; the receive queue starts the buffer and the send queue follows it
 *   (drivers/infiniband/hw/mlx5/qp.c: sq.offset = rq.wqe_cnt << rq.wqe_shift).
 * log_page_size counts above 4 KiB (page_shift - MLX5_ADAPTER_PAGE_SHIFT, 12), 5 bits.
 * Here the typed commands carry `pas` and `logPageSize` as those fields.
 */

/** MLX5_ADAPTER_PAGE_SHIFT: log_page_size 0 means 4 KiB pages. */
export const ADAPTER_PAGE_SHIFT = 12;
/** log_page_size is a 5-bit field. */
export const MAX_LOG_PAGE_SIZE = 31;

/** How a queue's buffer is reached: its page list and page size, or one contiguous buffer. */
export interface QueuePages {
  /** Physical address of each page of the buffer; empty: the buffer is contiguous at `base`. */
  readonly pas: readonly number[];
  /** Bytes per page of `pas`: 4 KiB << log_page_size. */
  readonly pageBytes: number;
  /** Physical address of a contiguous buffer (used when `pas` is empty). */
  readonly base: number;
}

/** The physical address of byte `off` of the queue buffer (no allocation: the hot path). */
export function queueAddr(q: QueuePages, off: number): number {
  if (q.pas.length === 0) return q.base + off;
  const p = Math.floor(off / q.pageBytes);
  return q.pas[p] + (off - p * q.pageBytes);
}

/** Bytes from `off` to the end of its page (a DMA must not cross it): Infinity when contiguous. */
export function bytesToPageEnd(q: QueuePages, off: number): number {
  if (q.pas.length === 0) return Infinity;
  return q.pageBytes - (off % q.pageBytes);
}

/** Pages of `pageBytes` a buffer of `bytes` needs. */
export function pasPagesFor(bytes: number, pageBytes: number): number {
  return Math.ceil(bytes / pageBytes);
}
