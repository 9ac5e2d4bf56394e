/**
 * ICM pages: QUERY_PAGES (how many pages the firmware wants, or gives back when negative) and
 * MANAGE_PAGES (pages given, refused, or taken back), mlx5_ifc.h query_pages_in/out and
 * manage_pages_in/out, as mlx5_core pagealloc.c sends them. A page is a 4 KiB host page, its
 * DMA address a u64 entry of `pas[]` after the fixed part.
 */
import { inLayout, outLayout } from './cmd_hdr.ts';

export const QUERY_PAGES_IN = inLayout('query_pages_in', 16, { function_id: [0x50, 0x10] });
/** num_pages is signed (two's complement): negative asks the driver to take pages back. */
export const QUERY_PAGES_OUT = outLayout('query_pages_out', 16, { function_id: [0x50, 0x10], num_pages: [0x60, 0x20] });
/** input_num_entries pages follow at `pas` (ALLOCATION_SUCCESS), or are asked back (HCA_RETURN_PAGES). */
export const MANAGE_PAGES_IN = inLayout('manage_pages_in', 16, { function_id: [0x50, 0x10], input_num_entries: [0x60, 0x20] }, { at: { pas: 16 } });
/** output_num_entries pages given back follow at `pas`. */
export const MANAGE_PAGES_OUT = outLayout('manage_pages_out', 16, { output_num_entries: [0x40, 0x20] }, { at: { pas: 16 } });
