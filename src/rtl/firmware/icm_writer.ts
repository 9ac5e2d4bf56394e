/**
 * What firmware does to ICM when it creates, changes or destroys an mkey: the functional effect
 * of CREATE_MKEY / DESTROY_MKEY (and of UMR on the context), kept apart from command timing so
 * `cmdif` and `umr_engine` share it. Every change keeps the on-chip caches coherent: the mkey
 * cache is updated (or invalidated, per `destroyInvalidates`) and cached translation lines of
 * a rewritten table are dropped, before any later access can see them.
 */
import type { Hca } from '../hca.ts';
import { encodeIcmMkey, decodeIcmMkey, readIcmPrivate, writeIcmPrivate, type IcmPrivate, type MkeyEntry } from '../memory/icm_mkey.ts';
import { decodeMkeyContext, type MkeyContext } from '../formats/mkey_context.ts';
import { MkcAccessMode, MKEY_QPN_NONE } from '../formats/constants.ts';
import { decodeKlm, encodeKlm, type Klm } from '../formats/klm.ts';

/** An mkey as firmware writes it. Access is ib_access_flags bits (local read always granted). */
export interface MkeyDesc {
  index: number;
  tag: number;
  free: boolean;
  /** MkcAccessMode: PA, MTT or KLMS. */
  accessMode: number;
  access: number;
  umrEn: boolean;
  remoteInval: boolean;
  pd: number;
  qpn: number;
  start: number;
  length: number;
  len64: boolean;
  logPageSize: number;
  pgAccess: boolean;
  /** MTT mode: raw 8-byte entries (page address | RD 1 | WR 2). */
  mtt?: readonly number[];
  /** KLMS mode: the list. */
  klm?: readonly Klm[];
  /** Translation entries to reserve (default: the list given); UMR may fill them later. */
  xltCapacity?: number;
  /** IB_ACCESS_MW_BIND (see icm_mkey.ts). */
  mwBind?: boolean;
  /** MKEY_KIND_MR (default), MKEY_KIND_MW1 or MKEY_KIND_MW2. */
  kind?: number;
  /** A zero-based registration (model-private ICM_ZERO_BASED, see icm_mkey.ts). */
  zeroBased?: boolean;
  /** MTT mode: the first byte offset (model-private ICM_FBO, see icm_mkey.ts); default 0. */
  fbo?: number;
}

/** Writes a new mkey (CREATE_MKEY's effect): its translation table and its context. */
export function writeMkey(hca: Hca, d: MkeyDesc): MkeyEntry {
  const isMtt = d.accessMode === MkcAccessMode.MTT;
  const isKlm = d.accessMode === MkcAccessMode.KLMS;
  const given = isMtt ? (d.mtt?.length ?? 0) : isKlm ? (d.klm?.length ?? 0) : 0;
  const count = Math.max(given, d.xltCapacity ?? 0);
  const entryBytes = isMtt ? 8 : 16;
  let xltAddr = 0;
  if (isMtt || isKlm) {
    xltAddr = hca.icm.allocXlt(Math.max(64, count * entryBytes));
    writeTranslations(hca, xltAddr, d);
  }
  const ctxAddr = hca.icm.mkeyContextAddr(d.index);
  const buf = new Uint8Array(64);
  const view = new DataView(buf.buffer);
  encodeIcmMkey(
    view,
    0,
    {
      free: d.free,
      pcieControl: 0,
      umrEn: d.umrEn,
      atomic: (d.access & 8) !== 0,
      remoteWrite: (d.access & 2) !== 0,
      remoteRead: (d.access & 4) !== 0,
      localWrite: (d.access & 1) !== 0,
      localRead: true,
      accessMode: d.accessMode,
      qpn: d.qpn,
      tag: d.tag,
      len64: d.len64,
      bsfEn: false,
      syncUmr: false,
      remoteInval: d.remoteInval,
      pd: d.pd,
      startAddr: d.start,
      len: d.length,
      bsfOctwordSize: 0,
      translationsOctwordSize: isMtt ? Math.ceil(count / 2) : isKlm ? count : 0,
      logPageSize: d.logPageSize,
    },
    {
      allocated: true, pgAccess: d.pgAccess, xltCount: given, xltAddr, mwBind: d.mwBind ?? false, kind: d.kind ?? 0, mwCount: 0,
      zeroBased: d.zeroBased ?? false, fbo: d.fbo ?? 0,
    },
  );
  hca.mem.write(ctxAddr, buf);
  hca.mkeyCache.invalidate(d.index); // no older cached copy of the index survives a create
  return decodeIcmMkey(view, 0, d.index);
}

/** Rewrites translation entries of an existing table (UMR's XLT update; ODP's MTT update). */
export function writeTranslations(hca: Hca, xltAddr: number, d: Pick<MkeyDesc, 'accessMode' | 'mtt' | 'klm'>, firstEntry = 0): void {
  if (d.accessMode === MkcAccessMode.MTT && d.mtt && d.mtt.length > 0) {
    const buf = new Uint8Array(d.mtt.length * 8);
    const v = new DataView(buf.buffer);
    d.mtt.forEach((val, i) => {
      v.setUint32(i * 8, Math.floor(val / 2 ** 32));
      v.setUint32(i * 8 + 4, val >>> 0);
    });
    const at = xltAddr + firstEntry * 8;
    hca.mem.write(at, buf);
    hca.mtt.invalidateRange(at, buf.length);
  } else if (d.accessMode === MkcAccessMode.KLMS && d.klm && d.klm.length > 0) {
    const buf = new Uint8Array(d.klm.length * 16);
    const v = new DataView(buf.buffer);
    d.klm.forEach((k, i) => encodeKlm(v, i * 16, k));
    const at = xltAddr + firstEntry * 16;
    hca.mem.write(at, buf);
    hca.mtt.invalidateRange(at, buf.length);
  }
}

/** Reads an mkey's current ICM entry (QUERY_MKEY's view, decoded). */
export function readMkey(hca: Hca, index: number): MkeyEntry {
  const bytes = hca.mem.read(hca.icm.mkeyContextAddr(index), 64);
  return decodeIcmMkey(new DataView(bytes.buffer, bytes.byteOffset, 64), 0, index);
}

/**
 * Read-modify-write of an mkey's ICM entry (UMR and remote invalidation): `edit` changes the
 * decoded context and private fields; the entry is written back and the cached copy updated.
 */
export function updateMkey(hca: Hca, index: number, edit: (c: MkeyContext, p: IcmPrivate) => void): MkeyEntry {
  const addr = hca.icm.mkeyContextAddr(index);
  const bytes = hca.mem.read(addr, 64);
  const view = new DataView(bytes.buffer, bytes.byteOffset, 64);
  const c = decodeMkeyContext(view, 0);
  const p = readIcmPrivate(view, 0);
  edit(c, p);
  encodeIcmMkey(view, 0, c, p);
  hca.mem.write(addr, bytes);
  const entry = decodeIcmMkey(view, 0, index);
  hca.mkeyCache.write(entry);
  return entry;
}

/** The KLM entries of an indirect mkey (a window's one KLM names its MR). */
export function readKlms(hca: Hca, entry: MkeyEntry): Klm[] {
  const out: Klm[] = [];
  if (entry.xltAddr === 0) return out;
  const bytes = hca.mem.read(entry.xltAddr, entry.xltCount * 16);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  for (let i = 0; i < entry.xltCount; i++) out.push(decodeKlm(v, i * 16));
  return out;
}

/** DESTROY_MKEY's effect: the index is no longer allocated; its table is freed; caches follow the policy. */
export function destroyMkey(hca: Hca, index: number): void {
  const addr = hca.icm.mkeyContextAddr(index);
  const bytes = hca.mem.read(addr, 64);
  const view = new DataView(bytes.buffer, bytes.byteOffset, 64);
  const priv = readIcmPrivate(view, 0);
  if (!priv.allocated) throw new Error(`destroyMkey: index 0x${index.toString(16)} is not allocated`);
  // a window destroyed while bound no longer holds its MR
  const entry = decodeIcmMkey(view, 0, index);
  if (entry.kind !== 0 && !entry.free) {
    const mr = readKlms(hca, entry)[0];
    if (mr) updateMkey(hca, mr.key >>> 8, (_c, p) => { p.mwCount = Math.max(0, (p.mwCount ?? 0) - 1); });
  }
  if (priv.xltAddr !== 0) {
    hca.mtt.invalidateRange(priv.xltAddr, hca.icm.xltSize(priv.xltAddr));
    hca.icm.freeXlt(priv.xltAddr);
  }
  // the context becomes free and unallocated; its bytes stay for post-mortem QUERY
  view.setUint8(0, view.getUint8(0) | 0x40);
  writeIcmPrivate(view, 0, { allocated: false, pgAccess: false, xltCount: 0, xltAddr: 0 });
  hca.mem.write(addr, bytes);
  if (hca.cfg.destroyInvalidates === 'all') {
    hca.mkeyCache.invalidateAll();
    hca.mtt.invalidateAll();
  } else hca.mkeyCache.invalidate(index);
}

export { MKEY_QPN_NONE };
