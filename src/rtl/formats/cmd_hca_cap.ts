/**
 * QUERY_HCA_CAP: the input (op_mod = capability type << 1 | cur), and the output whose
 * `capability` (byte 16, 4096 bytes) holds the general caps `cmd_hca_cap` (op_mod 0/1) or the ODP
 * caps `odp_cap` (op_mod 4/5), mlx5_ifc.h. mlx5_ib reads them as main.c mlx5_ib_query_device and
 * odp.c internal_fill_odp_caps do: memory windows, type 2B and SG_GAPS with `imaicl`, fast
 * registration unless `umr_modify_entity_size_disabled`, ODP with `pg`, the per-transport ODP
 * caps in `transport_page_fault_scheme_cap`.
 *
 * Model-private (reserved fields only; spec/commands.md "Model-private bits"):
 * - cmd_hca_cap bits 0x4a0-0x4a2 (reserved_at_4a0): model_mw_type1, model_mw_type2a,
 *   model_sg_gaps: the model reports these apart (mlx5 derives all three from imaicl).
 * - cmd_hca_cap bits 0x500-0x51f (reserved_at_500) model_max_mr and 0x660-0x67f (reserved_at_660)
 *   model_max_mw: the mkeys this HCA's ICM table holds (mlx5 reports 1 << log_max_mkey).
 * - cmd_hca_cap bits 0x4b8-0x4bf (reserved_at_4a0): model_log_max_xlt, log2 of the translation
 *   entries one mkey may reserve (hca_caps.ts logMaxXlt; mlx5_ifc.h has no such field).
 * - odp_cap bits 0x400-0x401 (reserved_at_400): model_odp_support, model_odp_implicit, the general
 *   ODP caps (mlx5 derives them from cmd_hca_cap's pg, fixed_buffer_size, null_mkey and
 *   umr_extended_translation_offset; the ODP answer carries them here).
 */
import { ifcLayout, inLayout, outLayout } from './cmd_hdr.ts';

export const QUERY_HCA_CAP_IN = inLayout('query_hca_cap_in', 16, { function_id: [0x50, 0x10] });
/** status, syndrome, then the 4096-byte capability union at byte 16. */
export const QUERY_HCA_CAP_OUT = outLayout('query_hca_cap_out', 4112, {}, { at: { capability: 16 } });

const WHY_MW = 'the model reports windows of type 1, 2A and SG_GAPS apart; mlx5 derives them from imaicl';
const WHY_XLT = 'the most translation entries one mkey may reserve (no mlx5_ifc field bounds an MTT or KSM table)';
const WHY_MKEYS = 'the mkeys the ICM table of this HCA holds (HcaConfig.icmMkeyEntries less the reserved indices)';

/** The general device capabilities (256 bytes). */
export const CMD_HCA_CAP = ifcLayout(
  'cmd_hca_cap',
  256,
  {
    log_max_qp_sz: [0x88, 8],
    log_max_qp: [0x9b, 5],
    max_sgl_for_optimized_performance: [0xc0, 8],
    log_max_cq_sz: [0xc8, 8],
    log_max_cq: [0xdb, 5],
    log_max_eq_sz: [0xe0, 8],
    log_max_mkey: [0xea, 6],
    log_max_eq: [0xfc, 4],
    max_indirection: [0x100, 8],
    fixed_buffer_size: [0x108, 1],
    umr_extended_translation_offset: [0x118, 1],
    null_mkey: [0x119, 1],
    log_max_klm_list_size: [0x11a, 6],
    umr_modify_entity_size_disabled: [0x207, 1],
    umr_indirect_mkey_disabled: [0x209, 1],
    umr_fence: [0x20a, 2],
    pg: [0x227, 1],
    imaicl: [0x231, 1],
    max_wqe_sz_sq: [0x290, 0x10],
    log_max_pd: [0x32b, 5],
    model_mw_type1: [0x4a0, 1],
    model_mw_type2a: [0x4a1, 1],
    model_sg_gaps: [0x4a2, 1],
    model_log_max_xlt: [0x4b8, 8],
    model_max_mr: [0x500, 0x20],
    model_max_mw: [0x660, 0x20],
  },
  { private: { model_mw_type1: WHY_MW, model_mw_type2a: WHY_MW, model_sg_gaps: WHY_MW, model_log_max_xlt: WHY_XLT, model_max_mr: WHY_MKEYS, model_max_mw: WHY_MKEYS } },
);

/** Bits of odp_per_transport_service_cap (send, receive, write, read, atomic, srq_receive from the MSB). */
const TRANSPORT = (base: number, name: string): Record<string, readonly [number, number]> => ({
  [`${name}.send`]: [base, 1],
  [`${name}.receive`]: [base + 1, 1],
  [`${name}.write`]: [base + 2, 1],
  [`${name}.read`]: [base + 3, 1],
  [`${name}.atomic`]: [base + 4, 1],
  [`${name}.srq_receive`]: [base + 5, 1],
});
const SCHEME = 'transport_page_fault_scheme_cap';
const WHY_ODP = 'the general ODP caps (SUPPORT, IMPLICIT) in the ODP answer; mlx5 derives them from cmd_hca_cap bits';

/** The ODP capabilities (256 bytes): rc, uc and ud caps of the transport page-fault scheme. */
export const ODP_CAP = ifcLayout(
  'odp_cap',
  256,
  {
    ...TRANSPORT(0x80, `${SCHEME}.rc_odp_caps`),
    ...TRANSPORT(0xa0, `${SCHEME}.uc_odp_caps`),
    ...TRANSPORT(0xc0, `${SCHEME}.ud_odp_caps`),
    model_odp_support: [0x400, 1],
    model_odp_implicit: [0x401, 1],
  },
  { private: { model_odp_support: WHY_ODP, model_odp_implicit: WHY_ODP } },
);
