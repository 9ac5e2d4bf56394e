/**
 * The 64-byte mkey context (spec/mlx5.md "mkey context"; kernel struct mlx5_mkey_seg). The same
 * bytes are the UMR "mkey segment" of a UMR WQE and an entry of the ICM mkey table.
 *
 * | off | field |
 * |---|---|
 * | 0 | status: bit6 free; bits 4:2 access_mode[4:2]; other bits reserved |
 * | 1 | pcie_control |
 * | 2 | flags: UMR_EN, A, RW, RR, LW, LR (bits 7:2), access_mode[1:0] (bits 1:0) |
 * | 3 | reserved ("version"): written 0, ignored on decode |
 * | 4 | qpn_mkey7_0: qpn[31:8], tag[7:0] |
 * | 12 | flags_pd: LEN64 31, BSF_EN 30, SYNC_UMR 29, REMOTE_INVAL 24, pd[23:0] |
 * | 16 | start_addr u64 |
 * | 24 | len u64 |
 * | 32 | bsf_octword_size u32 |
 * | 52 | translations_octword_size u32 |
 * | 59 | log2_page_size: low 6 bits |
 *
 * All other bytes are reserved: written as zero, ignored on decode.
 */

import { MKEY_CONTEXT_SIZE, MKEY_STATUS_FREE, MkeyFlagsPd, MkeyPerm } from './constants.ts';
import { checkU64, checkUint, getU64, setU64, zero } from './field.ts';

export { MKEY_CONTEXT_SIZE } from './constants.ts';

/** Offset of translations_octword_size. */
const XLT_OCTWORD_SIZE = 52;

/** The fields of an mkey context / UMR mkey segment. */
export interface MkeyContext {
  /** status bit6: the mkey is disabled (free). */
  free: boolean;
  /** pcie_control byte (fence / relaxed ordering bits); stored, not modelled. */
  pcieControl: number;
  /** UMR may modify this mkey. */
  umrEn: boolean;
  /** Remote atomic allowed. */
  atomic: boolean;
  /** Remote write allowed. */
  remoteWrite: boolean;
  /** Remote read allowed. */
  remoteRead: boolean;
  /** Local write allowed. */
  localWrite: boolean;
  /** Local read allowed. */
  localRead: boolean;
  /** Access mode (MkcAccessMode), 5 bits split over byte 2 bits 1:0 and byte 0 bits 4:2. */
  accessMode: number;
  /** QP the mkey is bound to, 24 bits; 0xffffff (MKEY_QPN_NONE) = none. */
  qpn: number;
  /** The key's variant, bits 7:0 of the key. */
  tag: number;
  /** The mkey covers the whole 2^64 address space. */
  len64: boolean;
  /** A BSF (signature) is attached. */
  bsfEn: boolean;
  /** SYNC_UMR. */
  syncUmr: boolean;
  /** en_rinval: may be invalidated by a remote SEND_INVAL. */
  remoteInval: boolean;
  /** Protection domain, 24 bits. */
  pd: number;
  /** First virtual address (0 for zero-based). */
  startAddr: number;
  /** Length in bytes. */
  len: number;
  /** bsf_octword_size. */
  bsfOctwordSize: number;
  /** translations_octword_size (xlt_oct_size), in 16-byte units. */
  translationsOctwordSize: number;
  /** log2 of the page size, 6 bits. */
  logPageSize: number;
}

/** Writes `f` as a 64-byte mkey context at `off`; throws RangeError for a field that does not fit. */
export function encodeMkeyContext(view: DataView, off: number, f: MkeyContext): void {
  checkUint('pcieControl', f.pcieControl, 8);
  checkUint('accessMode', f.accessMode, 5);
  checkUint('qpn', f.qpn, 24);
  checkUint('tag', f.tag, 8);
  checkUint('pd', f.pd, 24);
  checkU64('startAddr', f.startAddr);
  checkU64('len', f.len);
  checkUint('bsfOctwordSize', f.bsfOctwordSize, 32);
  checkUint('translationsOctwordSize', f.translationsOctwordSize, 32);
  checkUint('logPageSize', f.logPageSize, 6);

  zero(view, off, MKEY_CONTEXT_SIZE);
  view.setUint8(off + 0, (f.free ? MKEY_STATUS_FREE : 0) | ((f.accessMode >>> 2) << 2));
  view.setUint8(off + 1, f.pcieControl);
  view.setUint8(
    off + 2,
    (f.umrEn ? MkeyPerm.UMR_EN : 0) |
      (f.atomic ? MkeyPerm.ATOMIC : 0) |
      (f.remoteWrite ? MkeyPerm.REMOTE_WRITE : 0) |
      (f.remoteRead ? MkeyPerm.REMOTE_READ : 0) |
      (f.localWrite ? MkeyPerm.LOCAL_WRITE : 0) |
      (f.localRead ? MkeyPerm.LOCAL_READ : 0) |
      (f.accessMode & 3),
  );
  view.setUint32(off + 4, ((f.qpn << 8) | f.tag) >>> 0);
  view.setUint32(
    off + 12,
    ((f.len64 ? MkeyFlagsPd.LEN64 : 0) |
      (f.bsfEn ? MkeyFlagsPd.BSF_EN : 0) |
      (f.syncUmr ? MkeyFlagsPd.SYNC_UMR : 0) |
      (f.remoteInval ? MkeyFlagsPd.REMOTE_INVAL : 0) |
      f.pd) >>>
      0,
  );
  setU64(view, off + 16, f.startAddr);
  setU64(view, off + 24, f.len);
  view.setUint32(off + 32, f.bsfOctwordSize);
  view.setUint32(off + XLT_OCTWORD_SIZE, f.translationsOctwordSize);
  view.setUint8(off + 59, f.logPageSize);
}

/** Reads the 64-byte mkey context at `off`. */
export function decodeMkeyContext(view: DataView, off: number): MkeyContext {
  const status = view.getUint8(off + 0);
  const flags = view.getUint8(off + 2);
  const qpnMkey = view.getUint32(off + 4);
  const flagsPd = view.getUint32(off + 12);
  return {
    free: (status & MKEY_STATUS_FREE) !== 0,
    pcieControl: view.getUint8(off + 1),
    umrEn: (flags & MkeyPerm.UMR_EN) !== 0,
    atomic: (flags & MkeyPerm.ATOMIC) !== 0,
    remoteWrite: (flags & MkeyPerm.REMOTE_WRITE) !== 0,
    remoteRead: (flags & MkeyPerm.REMOTE_READ) !== 0,
    localWrite: (flags & MkeyPerm.LOCAL_WRITE) !== 0,
    localRead: (flags & MkeyPerm.LOCAL_READ) !== 0,
    accessMode: (((status >>> 2) & 7) << 2) | (flags & 3),
    qpn: qpnMkey >>> 8,
    tag: qpnMkey & 0xff,
    len64: (flagsPd & MkeyFlagsPd.LEN64) !== 0,
    bsfEn: (flagsPd & MkeyFlagsPd.BSF_EN) !== 0,
    syncUmr: (flagsPd & MkeyFlagsPd.SYNC_UMR) !== 0,
    remoteInval: (flagsPd & MkeyFlagsPd.REMOTE_INVAL) !== 0,
    pd: flagsPd & 0xffffff,
    startAddr: getU64(view, off + 16, 'startAddr'),
    len: getU64(view, off + 24, 'len'),
    bsfOctwordSize: view.getUint32(off + 32),
    translationsOctwordSize: view.getUint32(off + XLT_OCTWORD_SIZE),
    logPageSize: view.getUint8(off + 59) & 0x3f,
  };
}

/** An mkey context with every field zero / false (what a zeroed 64-byte buffer decodes to). */
export function zeroMkeyContext(): MkeyContext {
  return {
    free: false,
    pcieControl: 0,
    umrEn: false,
    atomic: false,
    remoteWrite: false,
    remoteRead: false,
    localWrite: false,
    localRead: false,
    accessMode: 0,
    qpn: 0,
    tag: 0,
    len64: false,
    bsfEn: false,
    syncUmr: false,
    remoteInval: false,
    pd: 0,
    startAddr: 0,
    len: 0,
    bsfOctwordSize: 0,
    translationsOctwordSize: 0,
    logPageSize: 0,
  };
}

/** translations_octword_size (u32 @52) of the context at `off`, read in place. */
export function mkcTranslationsOctwordSize(view: DataView, off: number): number {
  return view.getUint32(off + XLT_OCTWORD_SIZE);
}
