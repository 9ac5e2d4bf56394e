/**
 * Conformance of src/rtl/formats against the real headers: Linux's include/linux/mlx5
 * (mlx5_ifc.h, device.h, qp.h, cq.h, driver.h from Debian's linux-headers-6.12.*-common, the
 * newest installed; its version is in the describe's title) and rdma-core's mlx5dv.h, compiled
 * with gcc (test/support/mlx5_headers.ts).
 *
 * Fields: every field of every layout below is found by encoding it alone, one value bit at a
 * time, and seeing which bit of the bytes changes; that place must be the header field's. A
 * layout's `fields` table is typed over the layout's own interface, so a field added to a
 * formats/ interface does not compile until it is mapped here (or marked model-private with a
 * reason); an encoder that writes a field somewhere new fails here.
 * Constants: every number exported by formats/ (each key of each table of numbers too) must be
 * mapped to a header expression, whose value must be the model's, or be model-private with a
 * reason; an unmapped one fails as "not mapped to a header constant".
 * A mapping marked `differs` is checked too, and must still differ (the reason cites the header
 * line): if the header comes to agree, the note goes.
 */
import { describe, expect, it } from 'vitest';
import { CQC_ICM_BYTES, EQC_ICM_BYTES, QPC_ICM_BYTES } from '../../../src/rtl/memory/icm.ts';
import { OPTIMAL_RECLAIMED_PAGES } from '../../../src/driver/core/pagealloc.ts';
import * as formats from '../../../src/rtl/formats/index.ts';
import {
  encodeCqe,
  encodeCtrlSeg,
  encodeDataSeg,
  encodeEqe,
  encodeEqeCompletion,
  encodeEqePageFault,
  encodeKlm,
  encodeMkeyContext,
  encodeMtt,
  encodePageFaultResumeIn,
  encodeRaddrSeg,
  encodeAtomicSeg,
  encodeIfc,
  encodeUmrCtrlSeg,
  zeroMkeyContext,
  type AtomicSeg,
  type Cqe,
  type CtrlSeg,
  type DataSeg,
  type Eqe,
  type EqeCompletion,
  type EqePageFaultRdma,
  type EqePageFaultWqe,
  type IfcLayout,
  type Klm,
  type MkeyContext,
  type Mtt,
  type PageFaultResumeIn,
  type RaddrSeg,
  type UmrCtrlSeg,
} from '../../../src/rtl/formats/index.ts';
import { writeIcmPrivate, type IcmPrivate } from '../../../src/rtl/memory/icm_mkey.ts';
import { askHeaders, ifcLeaves, ifcMembers, kernelHeaders, MLX5DV_H, type Answers, type Place, type Side } from '../../support/mlx5_headers.ts';

// ---------------------------------------------------------------------------------------------
// The tables
// ---------------------------------------------------------------------------------------------

/**
 * How the headers name a model field, per side: a list of header fields whose bits, concatenated
 * (first = most significant), are the field's value bits. A header field is `struct.member`
 * (for ifc, the struct is mlx5_ifc_<s>_bits), optionally `& MASK` (the member's bits under a C
 * mask, shifted down as FIELD_GET does) or `&= MASK` (under the mask, not shifted: the value is
 * the masked member, as an MTT's page address).
 */
interface FieldMap {
  k?: string[];
  ifc?: string[];
  dv?: string[];
  /** The model's own field, in bytes no header names: why. */
  private?: string;
  /** These sides name the bits otherwise: why the model differs (the header line). Checked to differ. */
  differs?: Partial<Record<Side, string>>;
  /** Where the place agrees but a header says more (a field of another meaning, a name it lacks). */
  note?: string;
  /** Every bit of the field must lie in a reserved member of this ifc struct (model-private state). */
  reservedIn?: string;
}

interface Layout<T extends object> {
  name: string;
  zero: T;
  encode(v: DataView, off: number, f: T): void;
  fields: { [K in keyof T]-?: FieldMap };
  /** Fields not probed, with why (a variant's selector: its values are checked as constants). */
  fixed?: Partial<Record<keyof T, string>>;
  /** Bytes to encode into. */
  size: number;
}

const ctrlK = (f: string): string[] => [`mlx5_wqe_ctrl_seg.${f}`];

const MKEY_CONTEXT: Layout<MkeyContext> = {
  name: 'mkey context (mkc / mlx5_mkey_seg)',
  zero: zeroMkeyContext(),
  encode: encodeMkeyContext,
  size: 64,
  fields: {
    free: { ifc: ['mkc.free'], k: ['mlx5_mkey_seg.status & MLX5_MKEY_STATUS_FREE'] },
    pcieControl: {
      k: ['mlx5_mkey_seg.pcie_control'],
      note: 'no ifc field: mlx5_ifc.h:4304-4307 splits byte 1 into reserved_at_6, relaxed_ordering_write, reserved_at_e and small_fence_on_rdma_read_response; the model keeps device.h pcie_control, one byte, stored and not modelled',
    },
    umrEn: { ifc: ['mkc.umr_en'], k: ['mlx5_mkey_seg.flags & MLX5_PERM_UMR_EN'] },
    atomic: { ifc: ['mkc.a'], k: ['mlx5_mkey_seg.flags & MLX5_PERM_ATOMIC'] },
    remoteWrite: { ifc: ['mkc.rw'], k: ['mlx5_mkey_seg.flags & MLX5_PERM_REMOTE_WRITE'] },
    remoteRead: { ifc: ['mkc.rr'], k: ['mlx5_mkey_seg.flags & MLX5_PERM_REMOTE_READ'] },
    localWrite: { ifc: ['mkc.lw'], k: ['mlx5_mkey_seg.flags & MLX5_PERM_LOCAL_WRITE'] },
    localRead: { ifc: ['mkc.lr'], k: ['mlx5_mkey_seg.flags & MLX5_PERM_LOCAL_READ'] },
    accessMode: { ifc: ['mkc.access_mode_4_2', 'mkc.access_mode_1_0'], k: ['mlx5_mkey_seg.status & 0x1c', 'mlx5_mkey_seg.flags & 0x3'] },
    qpn: { ifc: ['mkc.qpn'], k: ['mlx5_mkey_seg.qpn_mkey7_0 & 0xffffff00'] },
    tag: { ifc: ['mkc.mkey_7_0'], k: ['mlx5_mkey_seg.qpn_mkey7_0 & 0xff'] },
    len64: { ifc: ['mkc.length64'], k: ['mlx5_mkey_seg.flags_pd & 0x80000000'] },
    bsfEn: { ifc: ['mkc.bsf_en'], k: ['mlx5_mkey_seg.flags_pd & MLX5_MKEY_BSF_EN'] },
    syncUmr: { ifc: ['mkc.sync_umr'], k: ['mlx5_mkey_seg.flags_pd & MLX5_MKEY_FLAG_SYNC_UMR'] },
    remoteInval: { ifc: ['mkc.en_rinval'], k: ['mlx5_mkey_seg.flags_pd & MLX5_MKEY_REMOTE_INVAL'] },
    pd: { ifc: ['mkc.pd'], k: ['mlx5_mkey_seg.flags_pd & 0xffffff'] },
    startAddr: { ifc: ['mkc.start_addr'], k: ['mlx5_mkey_seg.start_addr'] },
    len: { ifc: ['mkc.len'], k: ['mlx5_mkey_seg.len'] },
    bsfOctwordSize: { ifc: ['mkc.bsf_octword_size'], k: ['mlx5_mkey_seg.bsfs_octo_size'] },
    translationsOctwordSize: { ifc: ['mkc.translations_octword_size'], k: ['mlx5_mkey_seg.xlt_oct_size'] },
    logPageSize: { ifc: ['mkc.log_page_size'], k: ['mlx5_mkey_seg.log2_page_size & 0x3f'] },
  },
};

const ICM_PRIVATE_WHY = 'ICM bookkeeping of this model (src/rtl/memory/icm_mkey.ts), never in a WQE';
const ICM_PRIVATE: Layout<IcmPrivate> = {
  name: 'ICM mkey entry: the private state',
  zero: { allocated: false, pgAccess: false, xltCount: 0, xltAddr: 0, kind: 0, mwCount: 0, zeroBased: false },
  encode: (v, off, p) => {
    new Uint8Array(v.buffer, v.byteOffset + off, 64).fill(0);
    writeIcmPrivate(v, off, p);
  },
  size: 64,
  fields: {
    allocated: { private: ICM_PRIVATE_WHY, reservedIn: 'mkc' },
    pgAccess: { private: ICM_PRIVATE_WHY, reservedIn: 'mkc' },
    xltCount: { private: ICM_PRIVATE_WHY, reservedIn: 'mkc' },
    xltAddr: { private: ICM_PRIVATE_WHY, reservedIn: 'mkc' },
    kind: { private: ICM_PRIVATE_WHY, reservedIn: 'mkc' },
    mwCount: { private: ICM_PRIVATE_WHY, reservedIn: 'mkc' },
    zeroBased: { private: ICM_PRIVATE_WHY, reservedIn: 'mkc' },
  },
};

const CTRL_SEG: Layout<CtrlSeg> = {
  name: 'control segment (mlx5_wqe_ctrl_seg)',
  zero: { opmod: 0, wqeIndex: 0, opcode: 0, qpn: 0, ds: 0, signature: 0, fence: 0, ce: 0, se: false, imm: 0 },
  encode: encodeCtrlSeg,
  size: 16,
  fields: {
    opmod: { k: ['mlx5_wqe_ctrl_seg.opmod_idx_opcode & 0xff000000'], dv: ['mlx5_wqe_ctrl_seg.opmod_idx_opcode & 0xff000000'] },
    wqeIndex: {
      k: ['mlx5_wqe_ctrl_seg.opmod_idx_opcode & MLX5_WQE_CTRL_WQE_INDEX_MASK'],
      dv: ['mlx5_wqe_ctrl_seg.opmod_idx_opcode & 0x00ffff00'],
    },
    opcode: { k: ['mlx5_wqe_ctrl_seg.opmod_idx_opcode & MLX5_WQE_CTRL_OPCODE_MASK'], dv: ['mlx5_wqe_ctrl_seg.opmod_idx_opcode & 0xff'] },
    qpn: { k: ['mlx5_wqe_ctrl_seg.qpn_ds & MLX5_WQE_CTRL_QPN_MASK'], dv: ['mlx5_wqe_ctrl_seg.qpn_ds & 0xffffff00'] },
    ds: { k: ['mlx5_wqe_ctrl_seg.qpn_ds & MLX5_WQE_CTRL_DS_MASK'], dv: ['mlx5_wqe_ctrl_seg.qpn_ds & 0x3f'] },
    signature: { k: ctrlK('signature'), dv: ['mlx5_wqe_ctrl_seg.signature'] },
    // the fence modes are 3 bits at 7:5 (qp.h:177-181 MLX5_FENCE_MODE_* = n << 5)
    fence: { k: ['mlx5_wqe_ctrl_seg.fm_ce_se & (7 << 5)'], dv: ['mlx5_wqe_ctrl_seg.fm_ce_se & (7 << 5)'] },
    ce: { k: ['mlx5_wqe_ctrl_seg.fm_ce_se & MLX5_WQE_CTRL_CQ_UPDATE_AND_EQE'], dv: ['mlx5_wqe_ctrl_seg.fm_ce_se & (3 << 2)'] },
    se: { k: ['mlx5_wqe_ctrl_seg.fm_ce_se & MLX5_WQE_CTRL_SOLICITED'], dv: ['mlx5_wqe_ctrl_seg.fm_ce_se & MLX5_WQE_CTRL_SOLICITED'] },
    imm: { k: ctrlK('imm'), dv: ['mlx5_wqe_ctrl_seg.imm'] },
  },
};

const UMR_CTRL_SEG: Layout<UmrCtrlSeg> = {
  name: 'UMR control segment (mlx5_wqe_umr_ctrl_seg)',
  zero: { flags: 0, xltOctowords: 0, xltOffset: 0, mkeyMask: 0 },
  encode: encodeUmrCtrlSeg,
  size: 48,
  fields: {
    flags: { k: ['mlx5_wqe_umr_ctrl_seg.flags'], dv: ['mlx5_wqe_umr_ctrl_seg.flags'] },
    xltOctowords: { k: ['mlx5_wqe_umr_ctrl_seg.xlt_octowords'], dv: ['mlx5_wqe_umr_ctrl_seg.klm_octowords'] },
    xltOffset: {
      k: ['mlx5_wqe_umr_ctrl_seg.xlt_offset_47_16', 'mlx5_wqe_umr_ctrl_seg.xlt_offset'],
      dv: ['mlx5_wqe_umr_ctrl_seg.translation_offset'],
      differs: {
        dv: 'mlx5dv.h:1355 has no xlt_offset_47_16: bytes 16..47 are rsvd1[32]; the kernel (qp.h:380) names bits 47:16 of the offset there, which the model follows',
      },
    },
    mkeyMask: { k: ['mlx5_wqe_umr_ctrl_seg.mkey_mask'], dv: ['mlx5_wqe_umr_ctrl_seg.mkey_mask'] },
  },
};

const DATA_SEG: Layout<DataSeg> = {
  name: 'data segment (mlx5_wqe_data_seg)',
  zero: { byteCount: 0, inline: false, lkey: 0, addr: 0 },
  encode: encodeDataSeg,
  size: 16,
  fields: {
    byteCount: { k: ['mlx5_wqe_data_seg.byte_count & 0x7fffffff'], dv: ['mlx5_wqe_data_seg.byte_count & 0x7fffffff'] },
    inline: { k: ['mlx5_wqe_data_seg.byte_count & MLX5_INLINE_SEG'], dv: ['mlx5_wqe_data_seg.byte_count & MLX5_INLINE_SEG'] },
    lkey: { k: ['mlx5_wqe_data_seg.lkey'], dv: ['mlx5_wqe_data_seg.lkey'] },
    addr: { k: ['mlx5_wqe_data_seg.addr'], dv: ['mlx5_wqe_data_seg.addr'] },
  },
};

const RADDR_SEG: Layout<RaddrSeg> = {
  name: 'remote address segment (mlx5_wqe_raddr_seg)',
  zero: { raddr: 0, rkey: 0 },
  encode: encodeRaddrSeg,
  size: 16,
  fields: {
    raddr: { k: ['mlx5_wqe_raddr_seg.raddr'], dv: ['mlx5_wqe_raddr_seg.raddr'] },
    rkey: { k: ['mlx5_wqe_raddr_seg.rkey'], dv: ['mlx5_wqe_raddr_seg.rkey'] },
  },
};

const ATOMIC_SEG: Layout<AtomicSeg> = {
  name: 'atomic segment (mlx5_wqe_atomic_seg)',
  zero: { swapAdd: 0, compare: 0 },
  encode: encodeAtomicSeg,
  size: 16,
  fields: {
    swapAdd: { k: ['mlx5_wqe_atomic_seg.swap_add'], dv: ['mlx5_wqe_atomic_seg.swap_add'] },
    compare: { k: ['mlx5_wqe_atomic_seg.compare'], dv: ['mlx5_wqe_atomic_seg.compare'] },
  },
};

const KLM: Layout<Klm> = {
  name: 'KLM (mlx5_klm)',
  zero: { bcount: 0, key: 0, va: 0 },
  encode: encodeKlm,
  size: 16,
  fields: {
    bcount: { k: ['mlx5_klm.bcount'] },
    key: { k: ['mlx5_klm.key'] },
    va: { k: ['mlx5_klm.va'] },
  },
};

const MTT: Layout<Mtt> = {
  name: 'MTT entry (mlx5_mtt)',
  zero: { addr: 0, read: false, write: false },
  encode: encodeMtt,
  size: 8,
  fields: {
    // the page address is the entry with its low 12 bits masked (device.h:242 MLX5_EN_RD/WR there)
    addr: { k: ['mlx5_mtt.ptag &= ~0xfffULL'] },
    read: { k: ['mlx5_mtt.ptag & MLX5_EN_RD'] },
    write: { k: ['mlx5_mtt.ptag & MLX5_EN_WR'] },
  },
};

const CQE: Layout<Cqe> = {
  name: 'CQE (mlx5_cqe64, mlx5_err_cqe)',
  zero: { immInvalPkey: 0, byteCnt: 0, vendorErrSynd: 0, syndrome: 0, wqeOpcode: 0, qpn: 0, wqeCounter: 0, signature: 0, opcode: 0, format: 0, se: false, owner: 0 },
  encode: encodeCqe,
  size: 64,
  fields: {
    immInvalPkey: { k: ['mlx5_cqe64.immediate'], dv: ['mlx5_cqe64.imm_inval_pkey'] },
    byteCnt: { k: ['mlx5_cqe64.byte_cnt'], dv: ['mlx5_cqe64.byte_cnt'] },
    vendorErrSynd: { k: ['mlx5_err_cqe.vendor_err_synd'], dv: ['mlx5_err_cqe.vendor_err_synd'] },
    syndrome: { k: ['mlx5_err_cqe.syndrome'], dv: ['mlx5_err_cqe.syndrome'] },
    wqeOpcode: { k: ['mlx5_cqe64.sop_drop_qpn & 0xff000000'], dv: ['mlx5_cqe64.sop_drop_qpn & 0xff000000'] },
    qpn: { k: ['mlx5_cqe64.sop_drop_qpn & 0xffffff'], dv: ['mlx5_cqe64.sop_drop_qpn & 0xffffff'] },
    wqeCounter: { k: ['mlx5_cqe64.wqe_counter'], dv: ['mlx5_cqe64.wqe_counter'] },
    signature: { k: ['mlx5_cqe64.signature'], dv: ['mlx5_cqe64.signature'] },
    opcode: { k: ['mlx5_cqe64.op_own & 0xf0'], dv: ['mlx5_cqe64.op_own & 0xf0'] },
    format: { k: ['mlx5_cqe64.op_own & 0x0c'], dv: ['mlx5_cqe64.op_own & 0x0c'] },
    se: { k: ['mlx5_cqe64.op_own & 0x02'], dv: ['mlx5_cqe64.op_own & 0x02'] },
    owner: { k: ['mlx5_cqe64.op_own & MLX5_CQE_OWNER_MASK'], dv: ['mlx5_cqe64.op_own & MLX5_CQE_OWNER_MASK'] },
  },
};

const EQE: Layout<Eqe> = {
  name: 'EQE (mlx5_eqe)',
  zero: { type: 0, subType: 0, data: new Uint8Array(28), signature: 0, owner: 0 },
  encode: encodeEqe,
  size: 64,
  fields: {
    type: { k: ['mlx5_eqe.type'] },
    subType: { k: ['mlx5_eqe.sub_type'] },
    data: { k: ['mlx5_eqe.data'] },
    signature: { k: ['mlx5_eqe.signature'] },
    owner: { k: ['mlx5_eqe.owner'] },
  },
};

const EQE_COMP: Layout<EqeCompletion> = {
  name: 'EQE completion data (mlx5_eqe_comp)',
  zero: { cqn: 0 },
  encode: encodeEqeCompletion,
  size: 64,
  fields: { cqn: { k: ['mlx5_eqe.data.comp.cqn & 0xffffff'] } },
};

const PF = 'mlx5_eqe.data.page_fault';
/** Seed 004's page-fault EQE (the Linux 4.x layout) stands where 6.12 differs. */
const SEED_QPN_RDMA =
  'the place agrees, the meaning does not: device.h:672 (6.12) calls the RDMA fault\'s dword at data+24 pftype_token, bits 23:0 a token; the model keeps seed 004\'s flags_qpn, the faulting QP\'s number';
const EQE_PF_WQE: Layout<EqePageFaultWqe> = {
  name: 'page-fault EQE, WQE subtype (mlx5_eqe_page_fault.wqe)',
  zero: { subType: 0, bytesCommitted: 0, flags: 0, qpn: 0, wqeIndex: 0, packetLength: 0 },
  encode: encodeEqePageFault,
  size: 64,
  fixed: { subType: 'selects the variant; MLX5_PFAULT_SUBTYPE_* are checked as constants, its place in the EQE layout' },
  fields: {
    subType: { k: ['mlx5_eqe.sub_type'] },
    bytesCommitted: { k: [`${PF}.wqe.bytes_committed`] },
    flags: { k: [`${PF}.wqe.pftype_wq & 0xff000000`] },
    qpn: { k: [`${PF}.wqe.pftype_wq & 0xffffff`] },
    wqeIndex: { k: [`${PF}.wqe.wqe_index`] },
    packetLength: { k: [`${PF}.wqe.packet_length`] },
  },
};
const EQE_PF_RDMA: Layout<EqePageFaultRdma> = {
  name: 'page-fault EQE, RDMA subtype (mlx5_eqe_page_fault.rdma)',
  zero: { subType: 1, bytesCommitted: 0, flags: 0, qpn: 0, rKey: 0, packetLength: 0, rdmaOpLen: 0, rdmaVa: 0 },
  encode: encodeEqePageFault,
  size: 64,
  fixed: { subType: 'selects the variant; MLX5_PFAULT_SUBTYPE_* are checked as constants, its place in the EQE layout' },
  fields: {
    subType: { k: ['mlx5_eqe.sub_type'] },
    bytesCommitted: { k: [`${PF}.rdma.bytes_committed`] },
    flags: { k: [`${PF}.rdma.pftype_token & 0xff000000`] },
    qpn: { k: [`${PF}.rdma.pftype_token & 0xffffff`], note: SEED_QPN_RDMA },
    rKey: { k: [`${PF}.rdma.r_key`] },
    packetLength: { k: [`${PF}.rdma.packet_length`] },
    rdmaOpLen: { k: [`${PF}.rdma.rdma_op_len`] },
    rdmaVa: { k: [`${PF}.rdma.rdma_va`] },
  },
};

const PFR = 'page_fault_resume_in.page_fault_info.trans_page_fault_info';
const PAGE_FAULT_RESUME: Layout<PageFaultResumeIn> = {
  name: 'PAGE_FAULT_RESUME input (mlx5_ifc_page_fault_resume_in_bits)',
  zero: { opcode: 0, opMod: 0, flags: 0, qpn: 0 },
  encode: encodePageFaultResumeIn,
  size: 16,
  fields: {
    opcode: { ifc: ['page_fault_resume_in.opcode'] },
    opMod: { ifc: ['page_fault_resume_in.op_mod'] },
    // seed 004's flags byte is 6.12's error bit, 4 reserved bits and page_fault_type (mlx5_ifc.h:7420-7422)
    flags: { ifc: [`${PFR}.error`, `${PFR}.reserved_at_1`, `${PFR}.page_fault_type`] },
    qpn: { ifc: [`${PFR}.wq_number`] },
  },
};

/**
 * The command structures (formats/cmd_*.ts): every IfcLayout formats/ exports. Their field names
 * are mlx5_ifc.h's member paths, so each maps to `<struct>.<name>` with no table; a model-private
 * field (IfcLayout.private) must lie in reserved bits of the structure.
 */
const IFC_LAYOUTS: IfcLayout[] = (Object.values(formats) as unknown[]).filter(
  (x): x is IfcLayout => x !== null && typeof x === 'object' && typeof (x as IfcLayout).ifc === 'string' && typeof (x as IfcLayout).fields === 'object',
);
const CMD_LAYOUTS: Layout<Record<string, number>>[] = IFC_LAYOUTS.map((l) => ({
  name: `${l.ifc} (mlx5_ifc_${l.ifc}_bits)`,
  zero: Object.fromEntries(Object.keys(l.fields).map((k) => [k, 0])),
  encode: (v: DataView, off: number, f: Record<string, number>) => encodeIfc(v, off, l, f),
  size: l.bytes,
  fields: Object.fromEntries(
    Object.keys(l.fields).map((k): [string, FieldMap] => {
      const why = l.private[k];
      return [k, why !== undefined ? { private: why, reservedIn: l.ifc } : { ifc: [`${l.ifc}.${k}`] }];
    }),
  ),
}));

// a heterogeneous list: each layout's own field type is checked where it is written
const LAYOUTS: Layout<any>[] = [
  MKEY_CONTEXT, ICM_PRIVATE, CTRL_SEG, UMR_CTRL_SEG, DATA_SEG, RADDR_SEG, ATOMIC_SEG, KLM, MTT, CQE, EQE, EQE_COMP, EQE_PF_WQE, EQE_PF_RDMA,
  PAGE_FAULT_RESUME, ...CMD_LAYOUTS,
];

/** A header value per side (a C expression), or why the model's own. */
interface ConstMap {
  k?: string;
  dv?: string;
  private?: string;
}

const sh = (name: string, by: number): string => `(${name}) >> ${by}`;
const both = (e: string): ConstMap => ({ k: e, dv: e });
const ctz = (name: string): string => `__builtin_ctzll(${name})`;

/**
 * The ICM page lane's facts outside formats/ (firmware/fw_pages.ts, driver/core/pagealloc.ts,
 * memory/icm.ts, firmware/cmdif.ts), each against its header expression: [name, model value, C].
 */
const PAGE_FACTS: readonly (readonly [string, number, string])[] = [
  ['PAGE_REQUEST EQE func_id byte (fw_pages.ts, pagealloc.ts)', 2, 'offsetof(struct mlx5_eqe_page_req, func_id)'],
  ['PAGE_REQUEST EQE num_pages byte (fw_pages.ts, pagealloc.ts)', 4, 'offsetof(struct mlx5_eqe_page_req, num_pages)'],
  ['teardown_hca_in.profile byte (cmd_codec.ts)', 10, 'offsetof(struct mlx5_ifc_teardown_hca_in_bits, profile) / 8'],
  ['TEARDOWN_HCA graceful profile (cmdif.ts)', 0, 'MLX5_TEARDOWN_HCA_IN_PROFILE_GRACEFUL_CLOSE'],
  ['CQC_ICM_BYTES: cqc', CQC_ICM_BYTES, 'sizeof(struct mlx5_ifc_cqc_bits) / 8'],
  ['EQC_ICM_BYTES: eqc', EQC_ICM_BYTES, 'sizeof(struct mlx5_ifc_eqc_bits) / 8'],
  ['QPC_ICM_BYTES: qpc rounded up to a power of two', QPC_ICM_BYTES, '(1 << (64 - __builtin_clzll(sizeof(struct mlx5_ifc_qpc_bits) / 8 - 1)))'],
  [
    'OPTIMAL_RECLAIMED_PAGES (pagealloc.c:686-700: 12 blocks)',
    OPTIMAL_RECLAIMED_PAGES,
    '(sizeof(((struct mlx5_cmd_layout *)0)->out) + 12 * sizeof(((struct mlx5_cmd_prot_block *)0)->data) - sizeof(struct mlx5_ifc_manage_pages_out_bits) / 8) / (sizeof(((struct mlx5_ifc_manage_pages_out_bits *)0)->pas[0]) / 8)',
  ],
];

/** Every number formats/ exports, by name (`Table.KEY` for a key of a table of numbers). */
const CONSTS: Record<string, ConstMap> = {
  // the command queue's own bytes (formats/cmd_layout.ts): device.h's entry, mailbox block and
  // initialization segment
  CMD_ENTRY_BYTES: { k: 'sizeof(struct mlx5_cmd_layout)' },
  CMD_INLINE_BYTES: { k: 'sizeof(((struct mlx5_cmd_layout *)0)->in)' },
  'CmdEntryOff.TYPE': { k: 'offsetof(struct mlx5_cmd_layout, type)' },
  'CmdEntryOff.INLEN': { k: 'offsetof(struct mlx5_cmd_layout, inlen)' },
  'CmdEntryOff.IN_PTR': { k: 'offsetof(struct mlx5_cmd_layout, in_ptr)' },
  'CmdEntryOff.IN': { k: 'offsetof(struct mlx5_cmd_layout, in)' },
  'CmdEntryOff.OUT': { k: 'offsetof(struct mlx5_cmd_layout, out)' },
  'CmdEntryOff.OUT_PTR': { k: 'offsetof(struct mlx5_cmd_layout, out_ptr)' },
  'CmdEntryOff.OUTLEN': { k: 'offsetof(struct mlx5_cmd_layout, outlen)' },
  'CmdEntryOff.TOKEN': { k: 'offsetof(struct mlx5_cmd_layout, token)' },
  'CmdEntryOff.SIG': { k: 'offsetof(struct mlx5_cmd_layout, sig)' },
  'CmdEntryOff.RSVD1': { k: 'offsetof(struct mlx5_cmd_layout, rsvd1)' },
  'CmdEntryOff.STATUS_OWN': { k: 'offsetof(struct mlx5_cmd_layout, status_own)' },
  MLX5_PCI_CMD_XPORT: { k: 'MLX5_PCI_CMD_XPORT' },
  CMD_OWNER_HW: { private: 'CMD_OWNER_HW is a value of driver.h (the status_own ownership bit), outside the blocks this harness compiles' },
  MLX5_MAX_COMMANDS: { k: 'MLX5_MAX_COMMANDS' },
  'CmdDeliveryStatus.*': { private: 'MLX5_CMD_DELIVERY_STAT_* is an enum of mlx5_core cmd.c, in no header' },
  CMD_BLOCK_DATA: { k: 'MLX5_CMD_DATA_BLOCK_SIZE' },
  CMD_BLOCK_BYTES: { k: 'sizeof(struct mlx5_cmd_prot_block)' },
  CMD_BLOCK_ALIGN: { private: 'the model asks mailbox blocks 1 KiB-aligned (mlx5 allocates them from a dma_pool of that alignment)' },
  'CmdBlockOff.DATA': { k: 'offsetof(struct mlx5_cmd_prot_block, data)' },
  'CmdBlockOff.RSVD0': { k: 'offsetof(struct mlx5_cmd_prot_block, rsvd0)' },
  'CmdBlockOff.NEXT': { k: 'offsetof(struct mlx5_cmd_prot_block, next)' },
  'CmdBlockOff.BLOCK_NUM': { k: 'offsetof(struct mlx5_cmd_prot_block, block_num)' },
  'CmdBlockOff.RSVD1': { k: 'offsetof(struct mlx5_cmd_prot_block, rsvd1)' },
  'CmdBlockOff.TOKEN': { k: 'offsetof(struct mlx5_cmd_prot_block, token)' },
  'CmdBlockOff.CTRL_SIG': { k: 'offsetof(struct mlx5_cmd_prot_block, ctrl_sig)' },
  'CmdBlockOff.SIG': { k: 'offsetof(struct mlx5_cmd_prot_block, sig)' },
  CMD_BLOCK_CTRL: { k: 'sizeof(struct mlx5_cmd_prot_block) - MLX5_CMD_DATA_BLOCK_SIZE' },
  'IsegOff.FW_REV': { k: 'offsetof(struct mlx5_init_seg, fw_rev)' },
  'IsegOff.CMDIF_REV_FW_SUB': { k: 'offsetof(struct mlx5_init_seg, cmdif_rev_fw_sub)' },
  'IsegOff.CMDQ_ADDR_H': { k: 'offsetof(struct mlx5_init_seg, cmdq_addr_h)' },
  'IsegOff.CMDQ_ADDR_L_SZ': { k: 'offsetof(struct mlx5_init_seg, cmdq_addr_l_sz)' },
  'IsegOff.CMD_DBELL': { k: 'offsetof(struct mlx5_init_seg, cmd_dbell)' },
  'IsegOff.INITIALIZING': { k: 'offsetof(struct mlx5_init_seg, initializing)' },
  'IsegOff.TRACER_PAGE': { private: "the model's simplified firmware tracer: its pages' addresses in reserved init-segment words" },
  TRACER_PAGES: { private: "the model's simplified firmware tracer" },
  TRACER_RECORDS_PER_PAGE: { private: "the model's simplified firmware tracer" },
  TRACER_RECORD_BYTES: { private: "the model's simplified firmware tracer" },
  TRACER_TEXT_OFF: { private: "the model's simplified firmware tracer" },
  CMD_IF_REV: { private: 'the command interface revision the model reports (cmd.c checks it against CMD_IF_REV, a define of cmd.c)' },
  CMDQ_LOG_SZ: { private: 'the queue size the model reports in cmdq_addr_l_sz (MLX5_MAX_COMMANDS entries)' },
  CMDQ_LOG_STRIDE: { private: 'the entry stride the model reports in cmdq_addr_l_sz (64-byte entries)' },
  CMD_BG_FIRST: { private: "the model's split of the entries: the MR cache's background lane" },
  CMD_BG_ENTRIES: { private: "the model's split of the entries: the MR cache's background lane" },
  CMD_PAGE_ENTRY: { private: "the model's split of the entries: the page commands' entry (mlx5 keeps the last for them too)" },
  EQE_CMD_VECTOR_OFF: { k: 'offsetof(struct mlx5_eqe_cmd, vector)' },
  CQE_SIZE: both('sizeof(struct mlx5_cqe64)'),
  DS_SIZE: { k: 'MLX5_SEND_WQE_DS' },
  EQE_SIZE: { k: 'sizeof(struct mlx5_eqe)' },
  KLM_SIZE: { k: 'sizeof(struct mlx5_klm)' },
  MTT_SIZE: { k: 'sizeof(struct mlx5_mtt)' },
  MKEY_CONTEXT_SIZE: { k: 'sizeof(struct mlx5_mkey_seg)' },
  OCTOWORD_SIZE: { k: 'MLX5_OCTWORD' },
  MAX_WQEBBS_PER_WQE: { k: 'MLX5_SEND_WQE_MAX_WQEBBS' },
  WQEBB_SIZE: both('MLX5_SEND_WQE_BB'),
  CTRL_SEG_SIZE: both('sizeof(struct mlx5_wqe_ctrl_seg)'),
  UMR_CTRL_SEG_SIZE: both('sizeof(struct mlx5_wqe_umr_ctrl_seg)'),
  DATA_SEG_SIZE: both('sizeof(struct mlx5_wqe_data_seg)'),
  RADDR_SEG_SIZE: both('sizeof(struct mlx5_wqe_raddr_seg)'),
  ATOMIC_SEG_SIZE: both('sizeof(struct mlx5_wqe_atomic_seg)'),
  PAGE_FAULT_RESUME_IN_SIZE: { k: 'sizeof(struct mlx5_ifc_page_fault_resume_in_bits) / 8' },
  // byte_count's 31 bits below MLX5_INLINE_SEG: 0 stands for 2^31 bytes
  DATA_SEG_MAX_LENGTH: { k: '(unsigned long long)(MLX5_INLINE_SEG - 1) + 1' },
  MLX5_INLINE_SEG: both('MLX5_INLINE_SEG'),
  MLX5_INVALID_LKEY: { dv: 'MLX5_INVALID_LKEY' },
  MLX5_EN_RD: { k: 'MLX5_EN_RD' },
  MLX5_EN_WR: { k: 'MLX5_EN_WR' },
  MKEY_STATUS_FREE: { k: 'MLX5_MKEY_STATUS_FREE', dv: 'MLX5_WQE_MKEY_CONTEXT_FREE' },
  MKEY_QPN_NONE: { k: '(1ull << sizeof(((struct mlx5_ifc_mkc_bits *)0)->qpn)) - 1' },
  NULL_MKEY: { private: 'mlx5 reads its null mkey from QUERY_SPECIAL_CONTEXTS at run time (no header value); the model answers 0, an index it never allocates' },
  WQE_OPMOD_READ_WITH_INV: { private: 'mlx5 has no RDMA_READ_WITH_INV (constants.ts): the model marks it by an opmod the kernel never writes for RDMA_READ' },
  CQE_OP_OWN_INIT: both(`MLX5_CQE_INVALID << 4`),
  CQE_OP_OWN_OFFSET: both('offsetof(struct mlx5_cqe64, op_own)'),
  EQE_DATA_OFFSET: { k: 'offsetof(struct mlx5_eqe, data)' },
  EQE_DATA_SIZE: { k: 'sizeof(union ev_data)' },
  EQE_OWNER_INIT: { private: 'MLX5_EQE_OWNER_INIT_VAL = 0x1 lives in drivers/net/ethernet/mellanox/mlx5/core/eq.c:26, not in a header' },
  'CeMode.ERROR_ONLY': { private: 'ce 0 writes no CQE for a good WQE: no header names it (qp.h:149-151 name 2 << 2 and 3 << 2)' },
  'CeMode.CQ_UPDATE': both(sh('MLX5_WQE_CTRL_CQ_UPDATE', 2)),
  'CeMode.CQ_UPDATE_AND_EQE': { k: sh('MLX5_WQE_CTRL_CQ_UPDATE_AND_EQE', 2) },
  'FenceMode.NONE': { k: sh('MLX5_FENCE_MODE_NONE', 5) },
  'FenceMode.INITIATOR_SMALL': { k: sh('MLX5_FENCE_MODE_INITIATOR_SMALL', 5), dv: sh('MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE', 5) },
  'FenceMode.FENCE': { k: sh('MLX5_FENCE_MODE_FENCE', 5) },
  'FenceMode.STRONG_ORDERING': { k: sh('MLX5_FENCE_MODE_STRONG_ORDERING', 5) },
  'FenceMode.SMALL_AND_FENCE': { k: sh('MLX5_FENCE_MODE_SMALL_AND_FENCE', 5), dv: sh('MLX5_WQE_CTRL_FENCE', 5) },
  'MkcAccessMode.PA': { k: 'MLX5_MKC_ACCESS_MODE_PA' },
  'MkcAccessMode.MTT': { k: 'MLX5_MKC_ACCESS_MODE_MTT' },
  'MkcAccessMode.KLMS': { k: 'MLX5_MKC_ACCESS_MODE_KLMS' },
  'MkcAccessMode.KSM': { k: 'MLX5_MKC_ACCESS_MODE_KSM' },
  'MkeyPerm.UMR_EN': { k: 'MLX5_PERM_UMR_EN' },
  'MkeyPerm.ATOMIC': { k: 'MLX5_PERM_ATOMIC', dv: 'MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_ATOMIC' },
  'MkeyPerm.REMOTE_WRITE': { k: 'MLX5_PERM_REMOTE_WRITE', dv: 'MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_WRITE' },
  'MkeyPerm.REMOTE_READ': { k: 'MLX5_PERM_REMOTE_READ', dv: 'MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_REMOTE_READ' },
  'MkeyPerm.LOCAL_WRITE': { k: 'MLX5_PERM_LOCAL_WRITE', dv: 'MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_WRITE' },
  'MkeyPerm.LOCAL_READ': { k: 'MLX5_PERM_LOCAL_READ', dv: 'MLX5_WQE_MKEY_CONTEXT_ACCESS_FLAGS_LOCAL_READ' },
  // 6.12 names no LEN64 bit of flags_pd: mkc.length64's place in the dword at bit 0x60 gives it
  'MkeyFlagsPd.LEN64': { k: '1ull << (0x7f - offsetof(struct mlx5_ifc_mkc_bits, length64))' },
  'MkeyFlagsPd.BSF_EN': { k: 'MLX5_MKEY_BSF_EN' },
  'MkeyFlagsPd.SYNC_UMR': { k: 'MLX5_MKEY_FLAG_SYNC_UMR' },
  'MkeyFlagsPd.REMOTE_INVAL': { k: 'MLX5_MKEY_REMOTE_INVAL' },
  'UmrCtrlFlag.INLINE': { k: 'MLX5_UMR_INLINE', dv: 'MLX5_WQE_UMR_CTRL_FLAG_INLINE' },
  // the naming clash (constants.ts): the kernel's MLX5_UMR_CHECK_FREE is 0x40, rdma-core's CHECK_FREE 0x20
  'UmrCtrlFlag.CHECK_NOT_FREE': { k: 'MLX5_UMR_CHECK_FREE' },
  'UmrCtrlFlag.CHECK_FREE': { k: 'MLX5_UMR_CHECK_NOT_FREE', dv: 'MLX5_WQE_UMR_CTRL_FLAG_CHECK_FREE' },
  'UmrCtrlFlag.TRANSLATION_OFFSET_EN': { k: 'MLX5_UMR_TRANSLATION_OFFSET_EN', dv: 'MLX5_WQE_UMR_CTRL_FLAG_TRNSLATION_OFFSET' },
  'UmrCtrlFlag.CHECK_QPN': { dv: 'MLX5_WQE_UMR_CTRL_FLAG_CHECK_QPN' },
  'PageFaultFlag.REQUESTOR': { k: 'MLX5_PFAULT_REQUESTOR' },
  'PageFaultFlag.WRITE': { k: 'MLX5_PFAULT_WRITE' },
  'PageFaultFlag.RDMA': { k: 'MLX5_PFAULT_RDMA' },
  'PageFaultFlag.ERROR': { k: 'MLX5_PAGE_FAULT_RESUME_ERROR' },
  'PageFaultSubtype.WQE': { k: 'MLX5_PFAULT_SUBTYPE_WQE' },
  'PageFaultSubtype.RDMA': { k: 'MLX5_PFAULT_SUBTYPE_RDMA' },
  'HcaCapOpMod.GENERAL_MAX': { k: '(MLX5_CAP_GENERAL << 1) | HCA_CAP_OPMOD_GET_MAX' },
  'HcaCapOpMod.GENERAL_CUR': { k: '(MLX5_CAP_GENERAL << 1) | HCA_CAP_OPMOD_GET_CUR' },
  'HcaCapOpMod.ODP_MAX': { k: '(MLX5_CAP_ODP << 1) | HCA_CAP_OPMOD_GET_MAX' },
  'HcaCapOpMod.ODP_CUR': { k: '(MLX5_CAP_ODP << 1) | HCA_CAP_OPMOD_GET_CUR' },
  'QueryPagesOpMod.BOOT_PAGES': { k: 'MLX5_QUERY_PAGES_IN_OP_MOD_BOOT_PAGES' },
  'QueryPagesOpMod.INIT_PAGES': { k: 'MLX5_QUERY_PAGES_IN_OP_MOD_INIT_PAGES' },
  'QueryPagesOpMod.REGULAR_PAGES': { k: 'MLX5_QUERY_PAGES_IN_OP_MOD_REGULAR_PAGES' },
  'ManagePagesOpMod.ALLOCATION_FAIL': { k: 'MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_FAIL' },
  'ManagePagesOpMod.ALLOCATION_SUCCESS': { k: 'MLX5_MANAGE_PAGES_IN_OP_MOD_ALLOCATION_SUCCESS' },
  'ManagePagesOpMod.HCA_RETURN_PAGES': { k: 'MLX5_MANAGE_PAGES_IN_OP_MOD_HCA_RETURN_PAGES' },
  PAS_ENTRY_BYTES: { k: 'sizeof(((struct mlx5_ifc_create_cq_in_bits *)0)->pas[0]) / 8' },
  'CqeSyndrome.GENERAL_ERR': { private: 'no mlx5 syndrome means "general error" (cq.c maps every unknown one to IB_WC_GENERAL_ERR); 0xff is this project\'s' },
  'WC_STATUS_TO_SYNDROME.*': { private: 'a lookup table over CqeSyndrome (checked key by key above)' },
};
// tables whose keys are the header's names with a prefix: MLX5_<PREFIX>_<KEY>
const PREFIXED: Record<string, { prefix: string; dv: boolean; shift?: (n: string) => string }> = {
  WqeOpcode: { prefix: 'MLX5_OPCODE_', dv: true },
  CqeOpcode: { prefix: 'MLX5_CQE_', dv: true },
  CqeSyndrome: { prefix: 'MLX5_CQE_SYNDROME_', dv: true },
  EventType: { prefix: 'MLX5_EVENT_TYPE_', dv: false },
  CmdOpcode: { prefix: 'MLX5_CMD_OP_', dv: false },
  MkeyMaskBit: { prefix: 'MLX5_MKEY_MASK_', dv: false, shift: ctz },
  QpcState: { prefix: 'MLX5_QPC_STATE_', dv: false },
  QpcSt: { prefix: 'MLX5_QPC_ST_', dv: false },
  QpcMtu: { prefix: 'MLX5_QPC_MTU_', dv: false },
  QpRqType: { prefix: 'MLX5_', dv: false },
  QpOptPar: { prefix: 'MLX5_QP_OPTPAR_', dv: false },
};
for (const [table, p] of Object.entries(PREFIXED)) {
  for (const key of Object.keys((formats as unknown as Record<string, Record<string, number>>)[table]!)) {
    const name = `${table}.${key}`;
    if (name in CONSTS) continue;
    const e = (p.shift ?? ((n: string) => n))(`${p.prefix}${key}`);
    CONSTS[name] = p.dv ? both(e) : { k: e };
  }
}

// ---------------------------------------------------------------------------------------------
// Probing the encoders
// ---------------------------------------------------------------------------------------------

/** Big-endian bit positions (0 = the MSB of byte 0) that differ between two buffers. */
function diffBits(a: Uint8Array, b: Uint8Array): number[] {
  const out: number[] = [];
  for (let i = 0; i < a.length; i++) {
    const x = a[i]! ^ b[i]!;
    for (let bit = 7; bit >= 0; bit--) if ((x >> bit) & 1) out.push(i * 8 + (7 - bit));
  }
  return out;
}

/** value bit -> position, for one field encoded alone; a failure message instead where the encoder misbehaves. */
function probe<T extends object>(l: Layout<T>, key: keyof T): Map<number, number> | string {
  const enc = (f: T): Uint8Array => {
    const b = new Uint8Array(l.size);
    l.encode(new DataView(b.buffer), 0, f);
    return b;
  };
  const base = enc(l.zero);
  const z = l.zero[key];
  const bits = new Map<number, number>();
  if (typeof z === 'boolean') {
    const d = diffBits(base, enc({ ...l.zero, [key]: true }));
    if (d.length !== 1) return `true sets ${d.length} bits`;
    bits.set(0, d[0]!);
  } else if (z instanceof Uint8Array) {
    const d = diffBits(base, enc({ ...l.zero, [key]: new Uint8Array(z.length).fill(0xff) }));
    d.forEach((p, i) => bits.set(d.length - 1 - i, p));
  } else if (typeof z === 'number') {
    for (let i = 0; i < 64 && 2 ** i <= Number.MAX_SAFE_INTEGER; i++) {
      let d: number[];
      try {
        d = diffBits(base, enc({ ...l.zero, [key]: 2 ** i }));
      } catch {
        continue; // a value the field cannot take (past its width, or an MTT address below 4 KiB)
      }
      if (d.length === 0) continue; // a bit the encoder drops (past the field's width)
      if (d.length !== 1) return `value 2^${i} sets ${d.length} bits`;
      bits.set(i, d[0]!);
    }
  } else {
    return `a ${typeof z} field cannot be probed`;
  }
  return bits;
}

/** A header reference parsed: the member's query, and the mask (C expression) if any. */
function parseRef(side: Side, ref: string): { q: string; mask?: string; unshifted: boolean } {
  const m = /^(.*?)\s*(&=?)\s*(.+)$/.exec(ref);
  if (m === null) return { q: `${side}:${ref}`, unshifted: false };
  return { q: `${side}:${m[1]}`, mask: `${side}:const:${m[3]}`, unshifted: m[2] === '&=' };
}

/**
 * The expected position of each value bit under `refs` (concatenated, first most significant),
 * and the bits a value may have: [position of bit i] and `unshifted` ones keep their bit numbers.
 */
function expected(side: Side, refs: readonly string[], a: Answers): { pos: Map<number, number>; at: string[] } {
  const pos = new Map<number, number>();
  const at: string[] = [];
  let next = 0; // value bit of the least significant bit of the current (last-first) segment
  for (const ref of [...refs].reverse()) {
    const r = parseRef(side, ref);
    const p: Place = a.places.get(r.q)!;
    at.unshift(`${ref} @ ${p.at}`);
    const msbOf = (memberBit: number): number => p.off + p.width - 1 - memberBit; // member bit (LSB 0) -> position
    if (r.mask === undefined) {
      for (let b = 0; b < p.width; b++) pos.set(next + b, msbOf(b));
      next += p.width;
      continue;
    }
    const mask = a.values.get(r.mask)! & ((1n << BigInt(p.width)) - 1n);
    const set: number[] = [];
    for (let b = 0; b < p.width; b++) if ((mask >> BigInt(b)) & 1n) set.push(b);
    if (r.unshifted) {
      for (const b of set) pos.set(b, msbOf(b));
    } else {
      set.forEach((b, i) => pos.set(next + i, msbOf(b)));
      next += set.length;
    }
  }
  return { pos, at };
}

/** The mismatches of one field against one side, as messages (empty = agrees). */
function compare(bits: Map<number, number>, exp: Map<number, number>): string[] {
  const bad: string[] = [];
  for (const [i, p] of bits) {
    const e = exp.get(i);
    if (e === undefined) bad.push(`value bit ${i} at bit ${p} (byte ${p >> 3}) is outside the header field`);
    else if (e !== p) bad.push(`value bit ${i} at bit ${p}, the header's at bit ${e}`);
  }
  for (const [i, e] of exp) {
    // bits a JS number cannot carry (u64 fields stop at 2^53) are the one allowed gap
    if (!bits.has(i) && i < 53) bad.push(`the header's bit ${e} (value bit ${i}) is never written`);
  }
  if (bits.size === 0) bad.push('no bit is written');
  return bad;
}

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

const headers = kernelHeaders();
const version = headers?.version ?? 'NOT INSTALLED';

describe(`formats/ against Linux ${version} include/linux/mlx5 and rdma-core mlx5dv.h`, () => {
  it('the headers are installed (.ci/run installs linux-headers-6.12.*-common and libibverbs-dev)', () => {
    expect(headers, 'no /usr/src/linux-headers-6.12.*-common: apt-get install linux-headers-6.12.<n>+deb12-common').not.toBeNull();
    expect(() => askHeaders(headers!.dir, ['dv:const:MLX5_SEND_WQE_BB']), `${MLX5DV_H} (libibverbs-dev)`).not.toThrow();
  });

  // one compile for every question the tables ask
  const queries = new Set<string>();
  for (const l of LAYOUTS) {
    for (const m of Object.values(l.fields) as FieldMap[]) {
      for (const side of ['k', 'ifc', 'dv'] as const) {
        for (const ref of m[side] ?? []) {
          const r = parseRef(side, ref);
          queries.add(r.q);
          if (r.mask !== undefined) queries.add(r.mask);
        }
      }
    }
  }
  const mkc = headers === null ? [] : ifcMembers(headers.dir + '/include/linux/mlx5', 'mkc');
  for (const f of mkc) queries.add(`ifc:mkc.${f}`);
  // the leaves of every structure a private field must be reserved in
  const leaves = new Map<string, string[]>();
  for (const l of LAYOUTS) {
    for (const m of Object.values(l.fields) as FieldMap[]) {
      if (m.reservedIn === undefined || leaves.has(m.reservedIn) || headers === null) continue;
      const ls = ifcLeaves(headers.dir + '/include/linux/mlx5', m.reservedIn);
      leaves.set(m.reservedIn, ls);
      for (const f of ls) queries.add(`ifc:${m.reservedIn}.${f}`);
    }
  }
  for (const l of IFC_LAYOUTS) {
    queries.add(`k:const:sizeof(struct mlx5_ifc_${l.ifc}_bits) / 8`);
    for (const m of Object.keys(l.at)) queries.add(`k:const:offsetof(struct mlx5_ifc_${l.ifc}_bits, ${m}) / 8`);
  }
  /** The leaves of ifc struct `s` that bit `pos` lies in (a union's alternatives: each of them). */
  const leavesAt = (a: Answers, s: string, pos: number): string[] =>
    (leaves.get(s) ?? []).filter((f) => {
      const p = a.places.get(`ifc:${s}.${f}`)!;
      return pos >= p.off && pos < p.off + p.width;
    });
  for (const m of Object.values(CONSTS)) {
    if (m.k !== undefined) queries.add(`k:const:${m.k}`);
    if (m.dv !== undefined) queries.add(`dv:const:${m.dv}`);
  }
  for (const [, , q] of PAGE_FACTS) queries.add(`k:const:${q}`);
  /** The mkc member (mlx5_ifc_mkc_bits) that bit `pos` of a context lies in. */
  const mkcFieldAt = (a: Answers, pos: number): string | undefined =>
    mkc.find((f) => {
      const p = a.places.get(`ifc:mkc.${f}`)!;
      return pos >= p.off && pos < p.off + p.width;
    });
  let answers: Answers | null = null;
  const ask = (): Answers => (answers ??= askHeaders(headers!.dir, [...queries]));

  for (const l of LAYOUTS) {
    it(`${l.name}: every field at the header's offset and width`, () => {
      const a = ask();
      const problems: string[] = [];
      const owner = new Map<number, string>();
      for (const key of Object.keys(l.fields)) {
        const m = (l.fields as Record<string, FieldMap>)[key]!;
        if (l.fixed?.[key as keyof typeof l.zero] !== undefined) continue;
        if (m.k === undefined && m.ifc === undefined && m.dv === undefined && m.private === undefined) {
          problems.push(`${key}: not mapped to a header field`);
          continue;
        }
        const bits = probe(l, key as keyof typeof l.zero);
        if (typeof bits === 'string') {
          problems.push(`${key}: ${bits}`);
          continue;
        }
        for (const p of bits.values()) {
          const o = owner.get(p);
          if (o !== undefined) problems.push(`${key}: bit ${p} is also ${o}'s`);
          owner.set(p, key);
        }
        for (const side of ['k', 'ifc', 'dv'] as const) {
          const refs = m[side];
          if (refs === undefined) continue;
          const { pos, at } = expected(side, refs, a);
          const bad = compare(bits, pos);
          const why = m.differs?.[side];
          if (why === undefined && bad.length > 0) problems.push(`${key} vs ${side} ${at.join(' | ')}: ${bad.join('; ')}`);
          if (why !== undefined && bad.length === 0) problems.push(`${key} vs ${side}: now agrees with ${at.join(' | ')}; drop the note "${why}"`);
        }
        if (m.reservedIn !== undefined) {
          for (const p of bits.values()) {
            const on = leavesAt(a, m.reservedIn, p);
            const named = on.filter((f) => !f.split('.').pop()!.startsWith('reserved'));
            if (on.length === 0 || named.length > 0) {
              problems.push(`${key}: bit ${p} (byte ${p >> 3}) lies on ${m.reservedIn}.${named.join(', ') || '(nothing)'}, a named field`);
            }
          }
        }
      }
      expect(problems, problems.join('\n')).toEqual([]);
    });
  }

  it('every encoder formats/ exports is a layout above, or says which one covers its bytes', () => {
    const covered = new Set<unknown>(LAYOUTS.map((l) => l.encode));
    const others: Record<string, string> = {
      encodeAtomicOperands: 'the atomic segment as bigints: the same bytes as encodeAtomicSeg',
      encodeInlineSeg: 'byte_count with MLX5_INLINE_SEG, then the data: the data segment layout\'s byteCount and inline',
      encodeIfc: 'the encoder of every command structure (IfcLayout): each is a layout above',
      encodeCmdEntry: 'mlx5_cmd_layout: its offsets are CmdEntryOff, each checked against device.h with the constants',
      encodeCmdBlockCtrl: 'mlx5_cmd_prot_block: its offsets are CmdBlockOff, each checked against device.h with the constants',
    };
    const missing = Object.entries(formats)
      .filter(([n, f]) => n.startsWith('encode') && typeof f === 'function' && !covered.has(f) && others[n] === undefined)
      .map(([n]) => `${n}: a layout not checked against the headers`);
    expect(missing).toEqual([]);
  });

  it('every constant formats/ exports has the header\'s value, or is the model\'s own with a reason', () => {
    const a = ask();
    const problems: string[] = [];
    const seen = new Set<string>();
    const check = (name: string, v: number): void => {
      seen.add(name);
      const m = CONSTS[name] ?? CONSTS[`${name.split('.')[0]}.*`];
      if (m === undefined) return void problems.push(`${name} = ${v}: not mapped to a header constant`);
      if (m.private !== undefined) return;
      if (m.k === undefined && m.dv === undefined) return void problems.push(`${name}: an empty mapping`);
      for (const [side, e] of [['k', m.k], ['dv', m.dv]] as const) {
        if (e === undefined) continue;
        const h = a.values.get(`${side}:const:${e}`);
        if (h !== BigInt(v)) problems.push(`${name} = ${v}, ${side} ${e} = ${String(h)}`);
      }
    };
    for (const [name, v] of Object.entries(formats)) {
      if (typeof v === 'number') check(name, v);
      else if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && Object.values(v).every((x) => typeof x === 'number')) {
        for (const [k, x] of Object.entries(v as Record<string, number>)) check(`${name}.${k}`, x);
      }
    }
    for (const name of Object.keys(CONSTS)) {
      if (!name.endsWith('.*') && !seen.has(name)) problems.push(`${name}: mapped here but formats/ exports no such number`);
    }
    expect(problems, problems.join('\n')).toEqual([]);
    expect(seen.size).toBeGreaterThan(150);
  });

  it('the ICM page lane: PAGE_REQUEST EQE bytes, TEARDOWN_HCA\'s profile, the context tables\' entry sizes, the close\'s reclaim batch', () => {
    const a = ask();
    const problems: string[] = [];
    for (const [name, v, q] of PAGE_FACTS) {
      const h = a.values.get(`k:const:${q}`);
      if (h !== BigInt(v)) problems.push(`${name}: ${v}, the header's ${String(h)}`);
    }
    expect(problems, problems.join('\n')).toEqual([]);
  });

  it('every command structure has the header\'s size, and its nested structures and lists the header\'s offsets', () => {
    const a = ask();
    const problems: string[] = [];
    for (const l of IFC_LAYOUTS) {
      const size = a.values.get(`k:const:sizeof(struct mlx5_ifc_${l.ifc}_bits) / 8`);
      if (size !== BigInt(l.bytes)) problems.push(`${l.ifc}: ${l.bytes} bytes, the header's ${String(size)}`);
      for (const [m, at] of Object.entries(l.at)) {
        const h = a.values.get(`k:const:offsetof(struct mlx5_ifc_${l.ifc}_bits, ${m}) / 8`);
        if (h !== BigInt(at)) problems.push(`${l.ifc}.${m} at byte ${at}, the header's ${String(h)}`);
      }
    }
    expect(problems, problems.join('\n')).toEqual([]);
    // one structure per input and output of every command (PAGE_FAULT_RESUME's input is the seed's layout above)
    expect(IFC_LAYOUTS.length).toBeGreaterThanOrEqual(2 * 27 - 1);
  });

  it('the private ICM bits of the past are caught: a bit on mkc.ma_translation_mode or crossing_target_vhca_id fails', () => {
    // the check itself, on the layout before this model moved them (byte 3 bit 4, bytes 48..51)
    const a = ask();
    const lies = (pos: number): string | undefined => mkcFieldAt(a, pos);
    expect(lies(3 * 8 + (7 - 4))).toBe('ma_translation_mode');
    expect(lies(48 * 8)).toBe('crossing_target_vhca_id');
    // and where they are now: byte 3 bit 6, bytes 60..63
    expect(lies(3 * 8 + (7 - 6))).toMatch(/^reserved/);
    expect(lies(60 * 8)).toMatch(/^reserved/);
  });
});
