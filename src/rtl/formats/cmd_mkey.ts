/**
 * Memory keys: CREATE_MKEY (its mkey context `mkc`, formats/mkey_context.ts, at byte 16 and the
 * translation list `klm_pas_mtt[]` at byte 272), QUERY_MKEY, DESTROY_MKEY, QUERY_SPECIAL_CONTEXTS
 * and PAGE_FAULT_RESUME's output (its input: formats/page_fault_resume.ts), mlx5_ifc.h.
 *
 * Model-private bits of create_mkey_in (all in reserved fields, test/rtl/formats/
 * header_conformance.test.ts checks it; the same list is in spec/commands.md "Model-private bits"):
 * - bits 0x65-0x68 (reserved_at_63): the object kind model_kind (MR, type-1 or type-2 window;
 *   2 bits), and whether an MTT list (model_mtt_given) or a KLM list (model_klm_given) was
 *   given, even an empty one.
 * Nothing else: IB_ACCESS_MW_BIND never reaches an mlx5 mkey (wr.c:180 get_umr_flags), a
 * zero-based MR is one whose start_addr is 0 (the firmware derives it), and an mkey has no first
 * byte offset (start_addr is also the page offset, mlx5_ib.h:1720-1723).
 * - bits 0x280-0x2bf (reserved_at_280): model_xlt_capacity (the entries to reserve, which
 *   translations_octword_size rounds up to an octoword) and model_xlt_count (the exact number of
 *   list entries: an odd MTT list fills half an octoword).
 * Of query_mkey_out: bit 0x40 (reserved_at_40) model_allocated, whether the index is allocated.
 */
import { inLayout, outLayout } from './cmd_hdr.ts';

/** Byte offset of the mkey context in create_mkey_in and query_mkey_out. */
const MKC_AT = 16;

const WHY_ICM = 'model-private registration state the ICM mkey entry keeps (memory/icm_mkey.ts): CREATE_MKEY carries it to the firmware';
const WHY_LIST = 'exactness of the model\'s translation list (an empty list, an odd MTT count, the capacity before rounding to octowords)';

export const CREATE_MKEY_IN = inLayout(
  'create_mkey_in',
  272,
  {
    pg_access: [0x60, 1],
    translations_octword_actual_size: [0x300, 0x20],
    model_kind: [0x65, 2],
    model_mtt_given: [0x67, 1],
    model_klm_given: [0x68, 1],
    model_xlt_capacity: [0x280, 0x20],
    model_xlt_count: [0x2a0, 0x20],
  },
  {
    private: {
      model_kind: WHY_ICM,
      model_mtt_given: WHY_LIST,
      model_klm_given: WHY_LIST,
      model_xlt_capacity: WHY_LIST,
      model_xlt_count: WHY_LIST,
    },
    at: { memory_key_mkey_entry: MKC_AT, klm_pas_mtt: 272 },
  },
);
export const CREATE_MKEY_OUT = outLayout('create_mkey_out', 16, { mkey_index: [0x48, 0x18] });

export const QUERY_MKEY_IN = inLayout('query_mkey_in', 16, { mkey_index: [0x48, 0x18], pg_access: [0x60, 1] });
/** The context at byte 16; the translation entries after it (bsf0_klm0_pas_mtt0_1) are not modelled and read 0. */
export const QUERY_MKEY_OUT = outLayout(
  'query_mkey_out',
  304,
  { model_allocated: [0x40, 1] },
  { private: { model_allocated: 'QUERY_MKEY also answers a destroyed index (post-mortem); this says whether it is allocated' }, at: { memory_key_mkey_entry: MKC_AT } },
);

export const DESTROY_MKEY_IN = inLayout('destroy_mkey_in', 16, { mkey_index: [0x48, 0x18] });
export const DESTROY_MKEY_OUT = outLayout('destroy_mkey_out', 16, {});

export const QUERY_SPECIAL_CONTEXTS_IN = inLayout('query_special_contexts_in', 16, {});
export const QUERY_SPECIAL_CONTEXTS_OUT = outLayout('query_special_contexts_out', 32, { resd_lkey: [0x60, 0x20], null_mkey: [0x80, 0x20] });

export const PAGE_FAULT_RESUME_OUT = outLayout('page_fault_resume_out', 16, {});
