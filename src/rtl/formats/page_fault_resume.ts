/**
 * The input of the PAGE_FAULT_RESUME command (opcode 0x204), in the seed's layout (kernel
 * include/linux/mlx5/qp.h, struct mlx5_page_fault_resume_mbox_in; core/qp.c
 * mlx5_core_page_fault_resume):
 *
 * | off | field |
 * |---|---|
 * | 0 | opcode u16 (= CmdOpcode.PAGE_FAULT_RESUME) |
 * | 2 | reserved (uid in later kernels) |
 * | 6 | op_mod u16 |
 * | 8 | flags_qpn u32: flags[31:24] (PageFaultFlag incl. ERROR) \| qpn[23:0] |
 * | 12 | reserved |
 *
 * opcode @0 and op_mod @6 are the generic mlx5 command input header (struct mlx5_inbox_hdr).
 * spec/mlx5.md does not give flags_qpn's offset; it is @8, right after that 8-byte header, as
 * in the seed's mbox struct (later kernels keep the QP number in the same dword of
 * page_fault_resume_in, at bit 0x40).
 */

import { CmdOpcode } from './constants.ts';
import { checkUint, zero } from './field.ts';

/** Bytes of the PAGE_FAULT_RESUME input (8-byte header, flags_qpn, 4 reserved bytes). */
export const PAGE_FAULT_RESUME_IN_SIZE = 16;

/** The fields of the PAGE_FAULT_RESUME input. */
export interface PageFaultResumeIn {
  /** Command opcode, 16 bits; CmdOpcode.PAGE_FAULT_RESUME for a well-formed command. */
  opcode: number;
  /** Opcode modifier, 16 bits (0). */
  opMod: number;
  /** PageFaultFlag bits: the fault's REQUESTOR / WRITE / RDMA bits, plus ERROR to fail it. */
  flags: number;
  /** The QP to resume, 24 bits. */
  qpn: number;
}

/** Writes `f` as the PAGE_FAULT_RESUME input at `off`; throws RangeError for a field that does not fit. */
export function encodePageFaultResumeIn(view: DataView, off: number, f: PageFaultResumeIn): void {
  checkUint('opcode', f.opcode, 16);
  checkUint('opMod', f.opMod, 16);
  checkUint('flags', f.flags, 8);
  checkUint('qpn', f.qpn, 24);
  zero(view, off, PAGE_FAULT_RESUME_IN_SIZE);
  view.setUint16(off + 0, f.opcode);
  view.setUint16(off + 6, f.opMod);
  view.setUint32(off + 8, ((f.flags << 24) | f.qpn) >>> 0);
}

/** Reads the PAGE_FAULT_RESUME input at `off`. */
export function decodePageFaultResumeIn(view: DataView, off: number): PageFaultResumeIn {
  const flagsQpn = view.getUint32(off + 8);
  return {
    opcode: view.getUint16(off + 0),
    opMod: view.getUint16(off + 6),
    flags: flagsQpn >>> 24,
    qpn: flagsQpn & 0xffffff,
  };
}

/** The input of PAGE_FAULT_RESUME for `qpn` with `flags` (opcode filled in, op_mod 0). */
export function pageFaultResumeIn(qpn: number, flags: number): PageFaultResumeIn {
  return { opcode: CmdOpcode.PAGE_FAULT_RESUME, opMod: 0, flags, qpn };
}
