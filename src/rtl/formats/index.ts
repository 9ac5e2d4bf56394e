/**
 * mlx5 byte formats (spec/mlx5.md): pure encode/decode over DataView, big-endian, shared by the
 * hardware model (src/rtl) and the driver (src/driver).
 */

export * from './constants.ts';
export * from './mkey_context.ts';
export * from './ctrl_seg.ts';
export * from './umr_ctrl_seg.ts';
export * from './data_seg.ts';
export * from './raddr_seg.ts';
export * from './atomic_seg.ts';
export * from './klm.ts';
export * from './mtt.ts';
export * from './cqe.ts';
export * from './eqe.ts';
export * from './page_fault_resume.ts';
export * from './wqe_parse.ts';
export * from './cmd_hdr.ts';
export * from './cmd_init.ts';
export * from './cmd_pages.ts';
export * from './cmd_hca_cap.ts';
export * from './cmd_pd.ts';
export * from './cmd_mkey.ts';
export * from './cmd_eq.ts';
export * from './cmd_cq.ts';
export * from './cmd_qp.ts';
export * from './cmd_layout.ts';
