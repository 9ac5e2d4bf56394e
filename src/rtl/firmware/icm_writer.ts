/**
 * The ICM writer (`tb.hcaN.icm_writer`): the one owner of the mkey contexts and translation
 * tables in ICM. Firmware commands (CREATE_MKEY / DESTROY_MKEY, through cmdif) change them here
 * at the end of their latency; the UMR engine's posted writes change them when they land in host
 * memory, and the writer is told of each landing (it is the write's `landed` target). Either
 * way the on-chip caches follow at that moment, before any later access can see them: the mkey
 * cache takes the new context (or drops it, per `destroyInvalidates`), cached lines of a
 * rewritten table are dropped, and a cache fill in flight for either is marked stale and read
 * again (translation/miss_queue.ts), so no cache keeps a copy older than ICM.
 */
import { Module, type EventTarget, type Nothing, type UnclockedWireOptions } from '../../sim/index.ts';
import type { HcaConfig } from '../config.ts';
import type { DeviceMemory, Icm } from '../memory/icm.ts';
import { encodeIcmMkey, decodeIcmMkey, readIcmPrivate, ICM_ALLOCATED, ICM_BYTE3, type IcmPrivate, type MkeyEntry } from '../memory/icm_mkey.ts';
import { decodeMkeyContext, type MkeyContext } from '../formats/mkey_context.ts';
import { KLM_SIZE, MKEY_CONTEXT_SIZE, MTT_SIZE, MkcAccessMode, mkeyIndex } from '../formats/constants.ts';
import { decodeKlm, encodeKlm, type Klm } from '../formats/klm.ts';
import { writeMttRaw } from '../formats/mtt.ts';
import { hex } from '../formats/field.ts';
import type { MkeyCache } from '../translation/mkey_cache.ts';
import type { Mtt } from '../translation/mtt_cache.ts';

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
  /** MKEY_KIND_MR (default), MKEY_KIND_MW1 or MKEY_KIND_MW2. */
  kind?: number;
  /** A zero-based registration (model-private ICM_ZERO_BASED, see icm_mkey.ts). */
  zeroBased?: boolean;
}

/** What the writer uses: host memory (where ICM lives), the ICM's allocation, and the caches it keeps coherent. */
export interface IcmWriterDeps {
  /** The device's memory (contexts in host memory, tables in ICM space). */
  readonly mem: Pick<DeviceMemory, 'read' | 'readInto' | 'write'>;
  readonly icm: Pick<Icm, 'mkeyContextAddr' | 'mkeyEntries' | 'allocXlt' | 'freeXlt' | 'xltSize'>;
  readonly mkeyCache: Pick<MkeyCache, 'write' | 'invalidate' | 'invalidateAll'>;
  readonly mtt: Pick<Mtt, 'invalidateRange' | 'invalidateAll'>;
}

/** Wiring of the ICM writer (no clock: it acts at command ends and write landings). */
export interface IcmWriterOptions extends UnclockedWireOptions<Nothing, IcmWriterDeps> {
  /** What a deregistration (DESTROY_MKEY, or the driver's pool retiring an MR by UMR) drops from the caches (config.destroyInvalidates). */
  readonly destroyInvalidates: HcaConfig['destroyInvalidates'];
}

/** A posted write announced by the UMR engine, until it lands. */
interface Pending {
  /** The mkey index of a context write, or -1 for translation entries. */
  index: number;
  addr: number;
  length: number;
  then: EventTarget | null;
  thenTag: number;
  /** Announced and not landed yet. */
  busy: boolean;
  /** The context write of a deregistration by UMR (the pool's retire): the destroy policy applies when it lands. */
  dereg: boolean;
}

export class IcmWriter extends Module implements EventTarget {
  private readonly mem: IcmWriterDeps['mem'];
  private readonly icm: IcmWriterDeps['icm'];
  private readonly mkeyCache: IcmWriterDeps['mkeyCache'];
  private readonly mtt: IcmWriterDeps['mtt'];
  private readonly destroyInvalidates: HcaConfig['destroyInvalidates'];
  /** Posted writes announced, by tag; a slot is reused once its write has landed. */
  private readonly slots: Pending[] = [];
  private readonly freeTags: number[] = [];
  private readonly sCreated;
  private readonly sDestroyed;
  private readonly sCtxLanded;
  private readonly sXltLanded;

  constructor(parent: Module, name: string, opts: IcmWriterOptions) {
    super(parent.sim, parent, name);
    this.mem = opts.deps.mem;
    this.icm = opts.deps.icm;
    this.mkeyCache = opts.deps.mkeyCache;
    this.mtt = opts.deps.mtt;
    this.destroyInvalidates = opts.destroyInvalidates;
    this.sCreated = this.stats.counter('mkeys_created');
    this.sDestroyed = this.stats.counter('mkeys_destroyed');
    this.sCtxLanded = this.stats.counter('umr_context_writes');
    this.sXltLanded = this.stats.counter('umr_xlt_writes');
  }

  // --- firmware: effects at the end of a command's latency ---

  /** Writes a new mkey (CREATE_MKEY's effect): its translation table and its context; the entry as written. */
  createMkey(d: MkeyDesc): MkeyEntry {
    this.writeNewMkey(d);
    return decodeIcmMkey(this.ctxView, 0, d.index);
  }

  /** The context bytes CREATE_MKEY writes (ICM copies them: one buffer serves every command). */
  private readonly ctxBuf = new Uint8Array(MKEY_CONTEXT_SIZE);
  private readonly ctxView = new DataView(this.ctxBuf.buffer);
  /**
   * A landed context's bytes, read to be decoded (decodeIcmMkey keeps none of them): a copy per
   * landing with a DataView over it gave V8's on-heap 64 bytes a backing store of their own each time.
   */
  private readonly landedBuf = new Uint8Array(MKEY_CONTEXT_SIZE);
  private readonly landedView = new DataView(this.landedBuf.buffer);

  /** `createMkey` without decoding the entry back (the firmware's command needs only the index). */
  writeNewMkey(d: MkeyDesc): void {
    this.checkNoUmrWrite(d.index, 'CREATE_MKEY');
    const isMtt = d.accessMode === MkcAccessMode.MTT;
    const isKsm = d.accessMode === MkcAccessMode.KSM;
    const isKlm = d.accessMode === MkcAccessMode.KLMS || isKsm; // a KSM entry has a KLM's 16 bytes
    const count = Math.max(isMtt ? (d.mtt?.length ?? 0) : isKlm && !isKsm ? (d.klm?.length ?? 0) : 0, d.xltCapacity ?? 0);
    // a KSM table (every entry the null mkey) and an ODP MTT table (pg_access: every entry not
    // present) are whole from the start: all of it counts, an entry not yet written faults
    const given = isKsm || (isMtt && d.pgAccess) ? count : isMtt ? (d.mtt?.length ?? 0) : isKlm ? (d.klm?.length ?? 0) : 0;
    const entryBytes = isMtt ? MTT_SIZE : KLM_SIZE;
    // the context's page first: a shortage of ICM pages (IcmNeedPages) then leaves no table behind
    const ctxAddr = this.icm.mkeyContextAddr(d.index, true);
    let xltAddr = 0;
    if (isMtt || isKlm) {
      xltAddr = this.icm.allocXlt(Math.max(64, count * entryBytes));
      this.writeTranslations(xltAddr, d);
    }
    const buf = this.ctxBuf;
    encodeIcmMkey(
      this.ctxView,
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
        allocated: true, pgAccess: d.pgAccess, xltCount: given, xltAddr, kind: d.kind ?? 0, mwCount: 0,
        zeroBased: d.zeroBased ?? false,
      },
    );
    this.mem.write(ctxAddr, buf);
    this.mkeyCache.invalidate(d.index); // no older cached copy of the index survives a create
    this.sCreated.inc();
  }

  /** Rewrites translation entries of an existing table (firmware's own writes; ODP's MTT update). */
  writeTranslations(xltAddr: number, d: Pick<MkeyDesc, 'accessMode' | 'mtt' | 'klm'>, firstEntry = 0): void {
    let buf: Uint8Array;
    let at: number;
    if (d.accessMode === MkcAccessMode.MTT && d.mtt && d.mtt.length > 0) {
      buf = new Uint8Array(d.mtt.length * MTT_SIZE);
      const v = new DataView(buf.buffer);
      d.mtt.forEach((raw, i) => writeMttRaw(v, i * MTT_SIZE, raw));
      at = xltAddr + firstEntry * MTT_SIZE;
    } else if (d.accessMode === MkcAccessMode.KLMS && d.klm && d.klm.length > 0) {
      buf = new Uint8Array(d.klm.length * KLM_SIZE);
      const v = new DataView(buf.buffer);
      d.klm.forEach((k, i) => encodeKlm(v, i * KLM_SIZE, k));
      at = xltAddr + firstEntry * KLM_SIZE;
    } else return;
    this.mem.write(at, buf);
    this.mtt.invalidateRange(at, buf.length);
  }

  /** An mkey's current ICM entry (decoded). */
  /** `readMkey(index).allocated`, reading only the byte that holds it (CREATE_MKEY asks per index). */
  isAllocated(index: number): boolean {
    this.mem.readInto(this.icm.mkeyContextAddr(index) + ICM_BYTE3, this.oneByte, 0, 1); // (no array per ask)
    return (this.oneByte[0] & ICM_ALLOCATED) !== 0;
  }

  /** The byte `isAllocated` reads. */
  private readonly oneByte = new Uint8Array(1);

  readMkey(index: number): MkeyEntry {
    const bytes = this.mem.read(this.icm.mkeyContextAddr(index), MKEY_CONTEXT_SIZE);
    return decodeIcmMkey(new DataView(bytes.buffer, bytes.byteOffset, MKEY_CONTEXT_SIZE), 0, index);
  }

  /** A copy of an mkey's 64 context bytes as ICM holds them (QUERY_MKEY's view before it hides reserved bytes). */
  contextBytes(index: number): Uint8Array {
    return this.mem.read(this.icm.mkeyContextAddr(index), MKEY_CONTEXT_SIZE).slice();
  }

  /** The KLM entries of an indirect mkey (a window's one KLM names its MR). */
  readKlms(entry: MkeyEntry): Klm[] {
    const out: Klm[] = [];
    if (entry.xltAddr === 0) return out;
    const bytes = this.mem.read(entry.xltAddr, entry.xltCount * KLM_SIZE);
    const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
    for (let i = 0; i < entry.xltCount; i++) out.push(decodeKlm(v, i * KLM_SIZE));
    return out;
  }

  /** DESTROY_MKEY's effect: the index is no longer allocated; its table is freed; caches follow the policy. */
  destroyMkey(index: number): void {
    this.checkNoUmrWrite(index, 'DESTROY_MKEY');
    const addr = this.icm.mkeyContextAddr(index);
    const bytes = this.mem.read(addr, MKEY_CONTEXT_SIZE);
    const view = new DataView(bytes.buffer, bytes.byteOffset, MKEY_CONTEXT_SIZE);
    const priv = readIcmPrivate(view, 0);
    if (!priv.allocated) throw new Error(`destroyMkey: index ${hex(index)} is not allocated`);
    // a window destroyed while bound no longer holds its MR
    const entry = decodeIcmMkey(view, 0, index);
    if (entry.kind !== 0 && !entry.free) {
      const mr = this.readKlms(entry)[0];
      if (mr) this.updateMkey(mkeyIndex(mr.key), (_c, p) => { p.mwCount = Math.max(0, (p.mwCount ?? 0) - 1); });
    }
    if (priv.xltAddr !== 0) {
      this.mtt.invalidateRange(priv.xltAddr, this.icm.xltSize(priv.xltAddr));
      this.icm.freeXlt(priv.xltAddr);
    }
    // the context becomes free and unallocated; its other bytes stay for post-mortem QUERY
    const ctx = decodeMkeyContext(view, 0);
    ctx.free = true;
    encodeIcmMkey(view, 0, ctx, { allocated: false, pgAccess: false, xltCount: 0, xltAddr: 0 }); // private fields cleared
    this.mem.write(addr, bytes);
    if (this.destroyInvalidates === 'all') {
      this.mkeyCache.invalidateAll();
      this.mtt.invalidateAll();
    } else this.mkeyCache.invalidate(index);
    this.sDestroyed.inc();
  }

  /** Read-modify-write of an mkey's ICM entry by firmware; the cached copy takes the result. */
  private updateMkey(index: number, edit: (c: MkeyContext, p: IcmPrivate) => void): void {
    this.checkNoUmrWrite(index, 'an update by firmware');
    const addr = this.icm.mkeyContextAddr(index);
    const bytes = this.mem.read(addr, MKEY_CONTEXT_SIZE);
    const view = new DataView(bytes.buffer, bytes.byteOffset, MKEY_CONTEXT_SIZE);
    const c = decodeMkeyContext(view, 0);
    const p = readIcmPrivate(view, 0);
    edit(c, p);
    encodeIcmMkey(view, 0, c, p);
    this.mem.write(addr, bytes);
    this.mkeyCache.write(decodeIcmMkey(view, 0, index));
  }

  /**
   * Firmware must not change a context a UMR's posted write is still carrying: the landing would
   * put back the bytes the UMR computed from the older context. The driver never does it (a
   * command on an mkey waits for the work requests on it); the model says so rather than
   * corrupt ICM silently.
   */
  private checkNoUmrWrite(index: number, what: string): void {
    for (let t = 0; t < this.slots.length; t++) {
      const w = this.slots[t];
      if (w.busy && w.index === index) throw new Error(`${this.path}: ${what} of mkey index ${hex(index)} while a UMR's write of its context is in flight`);
    }
  }

  // --- the UMR engine: effects when its posted writes land ---

  /**
   * The UMR engine is about to post a write of `length` bytes at `addr`: the context of mkey
   * `index`, or (index -1) translation entries. Returns the tag the write must carry, with this
   * writer as its `landed` target; when it lands the caches follow, then `then.fire(thenTag)`.
   * `dereg`: the context write deregisters the MR (the driver's pool retiring it: FREE and a new
   * key), so the caches follow `destroyInvalidates` as for DESTROY_MKEY.
   */
  posting(index: number, addr: number, length: number, then: EventTarget | null, thenTag: number, dereg = false): number {
    const tag = this.freeTags.length > 0 ? this.freeTags.pop()! : this.slots.length;
    let w = this.slots[tag];
    if (w === undefined) this.slots[tag] = w = { index, addr, length, then, thenTag, busy: true, dereg };
    else {
      w.dereg = dereg;
      w.index = index;
      w.addr = addr;
      w.length = length;
      w.then = then;
      w.thenTag = thenTag;
      w.busy = true;
    }
    return tag;
  }

  /** @internal A posted write announced by `posting` has landed in host memory. */
  fire(tag: number): void {
    const w = this.slots[tag];
    if (w === undefined || !w.busy) throw new Error(`${this.path}: a write with tag ${tag} landed that was never announced`);
    const { index, addr, length, then, thenTag, dereg } = w; // the slot may be reused from here on
    w.busy = false;
    this.freeTags.push(tag);
    if (index >= 0) {
      // the landed bytes are the context now: the cached copy takes them, in-flight fills go stale
      this.mem.readInto(addr, this.landedBuf, 0, MKEY_CONTEXT_SIZE);
      this.mkeyCache.write(decodeIcmMkey(this.landedView, 0, index));
      // a deregistration by UMR invalidates what DESTROY_MKEY would: every path out of a
      // registration follows the policy, the pooled one included
      if (dereg && this.destroyInvalidates === 'all') {
        this.mkeyCache.invalidateAll();
        this.mtt.invalidateAll();
      }
      this.sCtxLanded.inc();
    } else {
      this.mtt.invalidateRange(addr, length);
      this.sXltLanded.inc();
    }
    then?.fire(thenTag);
  }

  /** Posted writes announced and not yet landed. */
  get inFlight(): number {
    return this.slots.length - this.freeTags.length;
  }
}

/** The adapter's ICM writer (an `Hca` is one of these). */
export interface HasIcmWriter {
  readonly icmWriter: IcmWriter;
}

/** CREATE_MKEY's effect on `owner`'s ICM (for test benches and scenarios that load ICM directly). */
export function writeMkey(owner: HasIcmWriter, d: MkeyDesc): MkeyEntry {
  return owner.icmWriter.createMkey(d);
}

/** `owner`'s current ICM entry of mkey `index`. */
export function readMkey(owner: HasIcmWriter, index: number): MkeyEntry {
  return owner.icmWriter.readMkey(index);
}

/** DESTROY_MKEY's effect on `owner`'s ICM. */
export function destroyMkey(owner: HasIcmWriter, index: number): void {
  owner.icmWriter.destroyMkey(index);
}
