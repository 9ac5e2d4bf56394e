/**
 * An mkey context as the HCA keeps it in ICM: the 64 bytes of spec/mlx5.md plus bookkeeping the
 * real device keeps privately, which this model stores in reserved bits of the same entry so
 * one 64-byte PCIe read brings everything the ATU needs (a modelling choice, documented here).
 * Every private bit lies where Linux 6.12's `struct mlx5_ifc_mkc_bits`
 * (include/linux/mlx5/mlx5_ifc.h:4299) has a reserved field, never on a named one
 * (test/rtl/formats/header_conformance.test.ts checks it against the header):
 * - byte 3 bit 7 (mkc reserved_at_18, bit 0x18): ALLOCATED: the index was created and not
 *   destroyed. An index never created reads as not allocated: its key is invalid (not merely free).
 * - byte 3 bit 6 (reserved_at_18, bit 0x19): ZERO_BASED: the registration was zero-based, i.e.
 *   its start_addr is 0 (the firmware's CREATE_MKEY and a UMR's START_ADDR set it from that, as
 *   mlx5 has no other zero-based state); the UMR engine refuses to bind a window to such an MR
 *   (MW_BIND_ERR for both window types, rxe's rule, as the reference model). Bits 5:4 of the
 *   byte are ma_translation_mode and stay zero.
 * - byte 3 bits 3:0 (reserved_at_1c): the object kind (bits 3:2) and PG_ACCESS (bit 0):
 *   CREATE_MKEY's pg_access (the per-page RD/WR bits of MTT entries are honoured, so a
 *   not-present page faults; spec/mlx5.md "mkey context"). Bit 1 is unused.
 * - bytes 36..39 (reserved_at_120): the exact number of translation entries (MTTs or KLMs): the
 *   octoword size rounds MTT counts up to even.
 * - bytes 40..47 (reserved_at_120): the physical address of the mkey's translation table in ICM.
 * - bytes 60..63 (reserved_at_1e0): MW_COUNT, see below.
 * None of these travel in a WQE: a UMR's mkey segment carries only mlx5's fields, and the UMR
 * engine derives ZERO_BASED from them (a start_addr of 0, as mlx5 makes a zero-based MR).
 * There is no MW_BIND bit (IB_ACCESS_MW_BIND never reaches an mlx5 mkey: Linux 6.12
 * drivers/infiniband/hw/mlx5/wr.c:180 get_umr_flags, umr.c:443 mlx5r_umr_set_access_flags) and
 * no first byte offset (an mkey's start_addr is both its iova and its page offset,
 * mlx5_ib.h:1720-1723; the kernel refuses an MR whose iova and address differ in page offset,
 * drivers/infiniband/core/uverbs_cmd.c:710).
 */
import { decodeMkeyContext, encodeMkeyContext, type MkeyContext } from '../formats/mkey_context.ts';
import { MKEY_QPN_NONE, MkcAccessMode } from '../formats/constants.ts';


export const ICM_BYTE3 = 3;
export const ICM_ALLOCATED = 0x80;
export const ICM_PG_ACCESS = 0x01;
export const ICM_ZERO_BASED = 0x40;
export const ICM_XLT_COUNT = 36;
export const ICM_XLT_ADDR = 40;

/** ib_access_flags bits (API.md `Access`) the ATU checks against. */
export const IB_LOCAL_WRITE = 1;
export const IB_REMOTE_WRITE = 2;
export const IB_REMOTE_READ = 4;
export const IB_REMOTE_ATOMIC = 8;

/** The decoded form the mkey cache holds and the ATU checks. */
export interface MkeyEntry {
  index: number;
  allocated: boolean;
  free: boolean;
  tag: number;
  /** MkcAccessMode value. */
  accessMode: number;
  /** Granted access as ib_access_flags bits (local read is always granted). */
  access: number;
  umrEn: boolean;
  remoteInval: boolean;
  pd: number;
  qpn: number;
  start: number;
  len: number;
  len64: boolean;
  logPageSize: number;
  pgAccess: boolean;
  xltCount: number;
  xltAddr: number;
  /** MKEY_KIND_MR, MKEY_KIND_MW1 or MKEY_KIND_MW2. */
  kind: number;
  /** Windows bound to this MR. */
  mwCount: number;
  /** The registration was zero-based (ICM_ZERO_BASED). */
  zeroBased: boolean;
}

/** ib_access bits of an mkey context's permission flags. */
export function accessOfContext(c: MkeyContext): number {
  return (
    (c.localWrite ? IB_LOCAL_WRITE : 0) |
    (c.remoteWrite ? IB_REMOTE_WRITE : 0) |
    (c.remoteRead ? IB_REMOTE_READ : 0) |
    (c.atomic ? IB_REMOTE_ATOMIC : 0)
  );
}

/** Decodes an ICM mkey entry (64 bytes at `off`) of index `index`. */
export function decodeIcmMkey(view: DataView, off: number, index: number): MkeyEntry {
  const b3 = view.getUint8(off + ICM_BYTE3);
  const c = decodeMkeyContext(view, off);
  return {
    index,
    allocated: (b3 & ICM_ALLOCATED) !== 0,
    free: c.free,
    tag: c.tag,
    accessMode: c.accessMode,
    access: accessOfContext(c),
    umrEn: c.umrEn,
    remoteInval: c.remoteInval,
    pd: c.pd,
    qpn: c.qpn,
    start: c.startAddr,
    len: c.len,
    len64: c.len64,
    logPageSize: c.logPageSize,
    pgAccess: (b3 & ICM_PG_ACCESS) !== 0,
    xltCount: view.getUint32(off + ICM_XLT_COUNT),
    xltAddr: view.getUint32(off + ICM_XLT_ADDR) * 2 ** 32 + view.getUint32(off + ICM_XLT_ADDR + 4),
    kind: (b3 & ICM_KIND_MASK) >>> ICM_KIND_SHIFT,
    mwCount: view.getUint32(off + ICM_MW_COUNT),
    zeroBased: (b3 & ICM_ZERO_BASED) !== 0,
  };
}

/** The ICM-private part of an entry. */
export interface IcmPrivate {
  allocated: boolean;
  pgAccess: boolean;
  xltCount: number;
  xltAddr: number;
  kind?: number;
  mwCount?: number;
  zeroBased?: boolean;
}

/** Writes a whole ICM entry: the context bytes, then the private fields into reserved bytes. */
export function encodeIcmMkey(view: DataView, off: number, c: MkeyContext, p: IcmPrivate): void {
  encodeMkeyContext(view, off, c);
  writeIcmPrivate(view, off, p);
}

/** Rewrites only the private fields (a UMR that changes the context keeps them). */
export function writeIcmPrivate(view: DataView, off: number, p: IcmPrivate): void {
  view.setUint8(
    off + ICM_BYTE3,
    (p.allocated ? ICM_ALLOCATED : 0) | (p.pgAccess ? ICM_PG_ACCESS : 0) |
      (p.zeroBased ? ICM_ZERO_BASED : 0) | (((p.kind ?? 0) << ICM_KIND_SHIFT) & ICM_KIND_MASK),
  );
  view.setUint32(off + ICM_MW_COUNT, (p.mwCount ?? 0) >>> 0);
  view.setUint32(off + ICM_XLT_COUNT, p.xltCount >>> 0);
  view.setUint32(off + ICM_XLT_ADDR, Math.floor(p.xltAddr / 2 ** 32));
  view.setUint32(off + ICM_XLT_ADDR + 4, p.xltAddr >>> 0);
}

/**
 * The entry of an index no context exists for (beyond the ICM table): never allocated, free,
 * bound to no QP. What the mkey cache answers for it, and what the UMR engine checks against.
 */
export function unallocatedMkey(index: number): MkeyEntry {
  return {
    index, allocated: false, free: true, tag: 0, accessMode: 0, access: 0, umrEn: false, remoteInval: false, pd: 0,
    qpn: MKEY_QPN_NONE, start: 0, len: 0, len64: false, logPageSize: 0, pgAccess: false, xltCount: 0, xltAddr: 0,
    kind: 0, mwCount: 0, zeroBased: false,
  };
}

/** Reads the private fields of an entry. */
export function readIcmPrivate(view: DataView, off: number): IcmPrivate {
  const b3 = view.getUint8(off + ICM_BYTE3);
  return {
    allocated: (b3 & ICM_ALLOCATED) !== 0,
    pgAccess: (b3 & ICM_PG_ACCESS) !== 0,
    kind: (b3 & ICM_KIND_MASK) >>> ICM_KIND_SHIFT,
    mwCount: view.getUint32(off + ICM_MW_COUNT),
    zeroBased: (b3 & ICM_ZERO_BASED) !== 0,
    xltCount: view.getUint32(off + ICM_XLT_COUNT),
    xltAddr: view.getUint32(off + ICM_XLT_ADDR) * 2 ** 32 + view.getUint32(off + ICM_XLT_ADDR + 4),
  };
}

export { MkcAccessMode };

/**
 * ICM-private bookkeeping of this model beyond icm_mkey.ts (reserved bits of the entry):
 * - byte 3 bits 3:2: object kind: 0 MR, 1 memory window type 1, 2 memory window type 2.
 * - bytes 60..63 (mkc reserved_at_1e0): windows currently bound to this MR (LOCAL_INV, remote
 *   invalidate and dereg fail while it is not 0). Not bytes 48..51: Linux 6.12 names bytes 48..49
 *   crossing_target_vhca_id (mlx5_ifc.h:4341).
 */
export const ICM_KIND_SHIFT = 2;
export const ICM_KIND_MASK = 0x0c;
export const MKEY_KIND_MR = 0;
export const MKEY_KIND_MW1 = 1;
export const MKEY_KIND_MW2 = 2;
export const ICM_MW_COUNT = 60;
