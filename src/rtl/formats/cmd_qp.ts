/**
 * Queue pairs: CREATE_QP with its context `qpc` at byte 24 and the page list `pas[]` at byte
 * 272, the transitions RST2INIT, INIT2RTR, RTR2RTS (opt_param_mask and qpc), 2ERR, 2RST,
 * QUERY_QP and DESTROY_QP (mlx5_ifc.h; mlx5_ib qp.c create_kernel_qp and __mlx5_ib_modify_qp
 * fill them). The primary address path `ads` lies inside the qpc at bit 0xc0.
 *
 * Model-private bits of the qpc (reserved fields only; spec/commands.md "Model-private bits" lists them):
 * - 0x3a0-0x3bf (reserved_at_3a0): model_page_fault_resumes, PAGE_FAULT_RESUMEs for this QP.
 * - 0x420-0x43f (reserved_at_420): model_max_send_sge, model_max_recv_sge (16 bits each).
 * - 0x600-0x61f (reserved_at_600): model_sq_offset, the send queue's byte offset in a paged buffer.
 * - 0x6a0-0x6b0 (reserved_at_684): model_remote_hca (the peer adapter), model_last_resume_flags,
 *   model_local_write (IB_ACCESS_LOCAL_WRITE of the QP's access flags: the qpc has only rre/rwe/rae).
 * - 0x6c0-0x73f (reserved_at_684): model_sq_buf_addr and model_rq_buf_addr, the rings'
 *   contiguous host addresses when no page list is given.
 * Of query_qp_out: bits 0x40-0x5f (reserved_at_40) model_pas_count, the length of the page list
 * that follows (the firmware writes as many entries as the output has room for).
 */
import { ifcLayout, inLayout, outLayout } from './cmd_hdr.ts';

/** Byte offset of the qpc in create_qp_in, the modify inputs and query_qp_out. */
const QPC_AT = 24;
/** Primary address path (ads) inside the qpc. */
const PAP = 0xc0;

/** qpc.state (mlx5_ifc.h MLX5_QPC_STATE_*). */
export const QpcState = { RST: 0x0, INIT: 0x1, RTR: 0x2, RTS: 0x3, ERR: 0x6 } as const;
/** qpc.st, the transport service (MLX5_QPC_ST_*); REG_UMR is the driver's UMR QP. */
export const QpcSt = { RC: 0x0, UC: 0x1, UD: 0x2, REG_UMR: 0xc } as const;
/** qpc.mtu (MLX5_QPC_MTU_*): the IB path MTU; 0 is no MTU (INIT2RTR: keep the QP's). */
export const QpcMtu = { '256_BYTES': 0x1, '512_BYTES': 0x2, '1K_BYTES': 0x3, '2K_BYTES': 0x4, '4K_BYTES': 0x5 } as const;
/** qpc.rq_type (qp.h): a receive queue, or none (MLX5_ZERO_LEN_RQ). */
export const QpRqType = { NON_ZERO_RQ: 0x0, ZERO_LEN_RQ: 0x3 } as const;
/**
 * opt_param_mask bits (qp.h MLX5_QP_OPTPAR_*): an optional attribute the command sets. RTR2RTS
 * without one keeps the QP's value (the model's defaults come from the QP, as `ibv_modify_qp`
 * without the attribute's mask bit).
 */
export const QpOptPar = { SRA_MAX: 1 << 8, RETRY_COUNT: 1 << 12, RNR_RETRY: 1 << 13, ACK_TIMEOUT: 1 << 14 } as const;

const WHY_QP = 'QP bookkeeping of this model that mlx5\'s qpc has no field for (the command carries it to the firmware, QUERY_QP back)';

/** The QP context (232 bytes). */
export const QPC = ifcLayout(
  'qpc',
  232,
  {
    state: [0x00, 4],
    st: [0x08, 8],
    pd: [0x28, 0x18],
    mtu: [0x40, 3],
    log_rq_size: [0x49, 4],
    log_sq_size: [0x51, 4],
    log_page_size: [0xa3, 5],
    remote_qpn: [0xa8, 0x18],
    'primary_address_path.pkey_index': [PAP + 0x10, 0x10],
    'primary_address_path.ack_timeout': [PAP + 0x40, 5],
    'primary_address_path.vhca_port_num': [PAP + 0x128, 8],
    log_sra_max: [0x388, 3],
    retry_count: [0x38d, 3],
    rnr_retry: [0x390, 3],
    fre: [0x394, 1],
    next_send_psn: [0x3c8, 0x18],
    cqn_snd: [0x3e8, 0x18],
    rre: [0x490, 1],
    rwe: [0x491, 1],
    rae: [0x492, 1],
    next_rcv_psn: [0x4a8, 0x18],
    cqn_rcv: [0x4e8, 0x18],
    dbr_addr: [0x500, 64],
    rq_type: [0x565, 3],
    model_page_fault_resumes: [0x3a0, 0x20],
    model_max_send_sge: [0x420, 0x10],
    model_max_recv_sge: [0x430, 0x10],
    model_sq_offset: [0x600, 0x20],
    model_remote_hca: [0x6a0, 8],
    model_last_resume_flags: [0x6a8, 8],
    model_local_write: [0x6b0, 1],
    model_sq_buf_addr: [0x6c0, 64],
    model_rq_buf_addr: [0x700, 64],
  },
  {
    private: {
      model_page_fault_resumes: WHY_QP,
      model_max_send_sge: WHY_QP,
      model_max_recv_sge: WHY_QP,
      model_sq_offset: WHY_QP,
      model_remote_hca: 'the peer adapter of a connected RC QP: what an address vector names in this testbed',
      model_last_resume_flags: WHY_QP,
      model_local_write: 'IB_ACCESS_LOCAL_WRITE in the QP\'s access flags (the qpc keeps only the remote ones)',
      model_sq_buf_addr: WHY_QP,
      model_rq_buf_addr: WHY_QP,
    },
    at: { primary_address_path: PAP / 8 },
  },
);

export const CREATE_QP_IN = inLayout('create_qp_in', 272, { opt_param_mask: [0x80, 0x20] }, { at: { qpc: QPC_AT, pas: 272 } });
export const CREATE_QP_OUT = outLayout('create_qp_out', 16, { qpn: [0x48, 0x18] });
export const DESTROY_QP_IN = inLayout('destroy_qp_in', 16, { qpn: [0x48, 0x18] });
export const DESTROY_QP_OUT = outLayout('destroy_qp_out', 16, {});
export const QUERY_QP_IN = inLayout('query_qp_in', 16, { qpn: [0x48, 0x18] });
export const QUERY_QP_OUT = outLayout(
  'query_qp_out',
  464,
  { opt_param_mask: [0x80, 0x20], model_pas_count: [0x40, 0x20] },
  { private: { model_pas_count: 'the length of the QP\'s page list, which the output may cut short' }, at: { qpc: QPC_AT, qp_pas_or_qpc_ext_and_pas: 272 } },
);

const MODIFY = { qpn: [0x48, 0x18], opt_param_mask: [0x80, 0x20] } as const;
const AT_QPC = { at: { qpc: QPC_AT } };
export const RST2INIT_QP_IN = inLayout('rst2init_qp_in', 272, MODIFY, AT_QPC);
export const RST2INIT_QP_OUT = outLayout('rst2init_qp_out', 16, {});
export const INIT2RTR_QP_IN = inLayout('init2rtr_qp_in', 272, MODIFY, AT_QPC);
export const INIT2RTR_QP_OUT = outLayout('init2rtr_qp_out', 16, {});
export const RTR2RTS_QP_IN = inLayout('rtr2rts_qp_in', 272, MODIFY, AT_QPC);
export const RTR2RTS_QP_OUT = outLayout('rtr2rts_qp_out', 16, {});
export const QP_2ERR_IN = inLayout('qp_2err_in', 16, { qpn: [0x48, 0x18] });
export const QP_2ERR_OUT = outLayout('qp_2err_out', 16, {});
export const QP_2RST_IN = inLayout('qp_2rst_in', 16, { qpn: [0x48, 0x18] });
export const QP_2RST_OUT = outLayout('qp_2rst_out', 16, {});
