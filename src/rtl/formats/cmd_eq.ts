/**
 * Event queues: CREATE_EQ with its context `eqc` at byte 16 and the event bitmask (mlx5_ifc.h
 * create_eq_in: four u64 words, event type t is bit t of word 0 as mlx5_core eq.c
 * create_map_eq sets it), DESTROY_EQ.
 *
 * Model-private: create_eq_in bits 0x280-0x2bf (reserved_at_280) hold model_buf_addr, the EQE
 * ring's contiguous host address (mlx5 gives the ring as `pas[]`; this model's EQ writer takes
 * one buffer). spec/commands.md "Model-private bits" lists it.
 */
import { ifcLayout, inLayout, outLayout } from './cmd_hdr.ts';

/** The EQ context (64 bytes): only log_eq_size is modelled; the rest is written 0. */
export const EQC = ifcLayout('eqc', 64, { log_eq_size: [0x63, 5], log_page_size: [0xc3, 5], uar_page: [0x68, 0x18], intr: [0xb4, 0xc] });

export const CREATE_EQ_IN = inLayout(
  'create_eq_in',
  272,
  { 'event_bitmask[0]': [0x2c0, 64], model_buf_addr: [0x280, 64] },
  { private: { model_buf_addr: 'the EQE ring as one contiguous host buffer (the model\'s EQ writer has no page list)' }, at: { eq_context_entry: 16, pas: 272 } },
);
export const CREATE_EQ_OUT = outLayout('create_eq_out', 16, { eq_number: [0x58, 8] });
export const DESTROY_EQ_IN = inLayout('destroy_eq_in', 16, { eq_number: [0x58, 8] });
export const DESTROY_EQ_OUT = outLayout('destroy_eq_out', 16, {});
