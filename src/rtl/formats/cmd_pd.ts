/** Protection domains: ALLOC_PD and DEALLOC_PD (mlx5_ifc.h alloc_pd_in/out, dealloc_pd_in/out). */
import { inLayout, outLayout } from './cmd_hdr.ts';

export const ALLOC_PD_IN = inLayout('alloc_pd_in', 16, {});
export const ALLOC_PD_OUT = outLayout('alloc_pd_out', 16, { pd: [0x48, 0x18] });
export const DEALLOC_PD_IN = inLayout('dealloc_pd_in', 16, { pd: [0x48, 0x18] });
export const DEALLOC_PD_OUT = outLayout('dealloc_pd_out', 16, {});
