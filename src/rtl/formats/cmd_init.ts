/**
 * The start-up and shut-down commands of mlx5_core main.c (mlx5_function_setup,
 * mlx5_function_teardown): ENABLE_HCA, INIT_HCA, TEARDOWN_HCA, DISABLE_HCA (mlx5_ifc.h
 * enable_hca_in/out, init_hca_in/out, teardown_hca_in/out, disable_hca_in/out).
 */
import { inLayout, outLayout } from './cmd_hdr.ts';

const FUNCTION_ID = { function_id: [0x50, 0x10] } as const;

export const ENABLE_HCA_IN = inLayout('enable_hca_in', 16, FUNCTION_ID);
/** 12 bytes: mlx5_ifc.h's enable_hca_out ends at bit 0x60. */
export const ENABLE_HCA_OUT = outLayout('enable_hca_out', 12, {});
export const DISABLE_HCA_IN = inLayout('disable_hca_in', 16, FUNCTION_ID);
export const DISABLE_HCA_OUT = outLayout('disable_hca_out', 12, {});
/** sw_owner_id and sw_vhca_id stay 0: this model has one software owner. */
export const INIT_HCA_IN = inLayout('init_hca_in', 32, {});
export const INIT_HCA_OUT = outLayout('init_hca_out', 16, {});
/** profile 0: the graceful teardown (MLX5_TEARDOWN_HCA_IN_PROFILE_GRACEFUL_CLOSE). */
export const TEARDOWN_HCA_IN = inLayout('teardown_hca_in', 16, { profile: [0x50, 0x10] });
export const TEARDOWN_HCA_OUT = outLayout('teardown_hca_out', 16, {});
