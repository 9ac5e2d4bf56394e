/**
 * Completion queues: CREATE_CQ with its context `cqc` at byte 16 and the page list `pas[]` at
 * byte 272 (mlx5_ifc.h create_cq_in; mlx5_ib cq.c create_cq_kernel fills them), DESTROY_CQ.
 *
 * Model-private: create_cq_in bits 0x280-0x2bf (reserved_at_280) hold model_buf_addr, the CQE
 * ring's contiguous host address when no page list is given (spec/commands.md "Model-private bits").
 */
import { ifcLayout, inLayout, outLayout } from './cmd_hdr.ts';

/** The CQ context (64 bytes). cqe_sz 0 is 64-byte CQEs, the only size modelled. */
export const CQC = ifcLayout('cqc', 64, {
  cqe_sz: [0x08, 3],
  log_cq_size: [0x63, 5],
  uar_page: [0x68, 0x18],
  c_eqn_or_apu_element: [0xa0, 0x20],
  log_page_size: [0xc3, 5],
  dbr_addr: [0x1c0, 64],
});

export const CREATE_CQ_IN = inLayout(
  'create_cq_in',
  272,
  { model_buf_addr: [0x280, 64] },
  { private: { model_buf_addr: 'a CQE ring given as one contiguous host buffer instead of a page list' }, at: { cq_context: 16, pas: 272 } },
);
export const CREATE_CQ_OUT = outLayout('create_cq_out', 16, { cqn: [0x48, 0x18] });
export const DESTROY_CQ_IN = inLayout('destroy_cq_in', 16, { cqn: [0x48, 0x18] });
export const DESTROY_CQ_OUT = outLayout('destroy_cq_out', 16, {});
