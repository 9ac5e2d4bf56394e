/**
 * The state of one HCA in the verbs model: its host memory, its mkey index space (the MRs and
 * windows by index) and the mirror of that space as an MkeyTable, through which every data-path
 * access is translated by the untimed `translate` (src/model/translate.ts).
 *
 * How objects map onto mkeys (functionally; the real access modes are the cycle model's business):
 * - a host mkey (index 0, PA mode, LEN64, PD 0 which no user PD has) stands for "host virtual
 *   memory", so a translation ends in host virtual addresses;
 * - an MR is a KLMS mkey over the host mkey: one KLM per host extent, walked from `iova` (0 when
 *   zero-based), which expresses user MRs, MEM_REG page lists and SG_GAPS lists alike;
 * - a window is a KLMS mkey with one KLM `{ length, mr key, addr }` (as the mlx5 bind WQE writes
 *   it), starting at `addr` (0 when zero-based), bound to a QP for type 2.
 */
import { keyTag, makeKey } from '../keys.ts';
import { MkeyTable } from '../mkey_table.ts';
import { ALL_ACCESS, NOT_BOUND_QPN, type ModelMkey, type Segment } from '../types.ts';
import { HostMemory } from './host_memory.ts';
import { ModelMr, type MkeyObject, type ModelMw } from './objects.ts';
import { VerbsAccess } from './types.ts';

/** The host mkey's index: never handed out (index 1 is never handed out either: 0x100 is the
 * reserved invalid lkey, spec/mlx5.md "Keys"). */
export const HOST_MKEY_INDEX = 0;
/** The first index the model hands out. */
export const FIRST_MKEY_INDEX = 2;
/** The first QP number per HCA (0 and 1 are the special QPs on real HCAs). */
export const FIRST_QPN = 0x10;
/** The PD of the host mkey: user PDs are numbered from 1. */
const HOST_PD = 0;
/** The remote access bits a window can grant. */
const WINDOW_ACCESS = VerbsAccess.REMOTE_READ | VerbsAccess.REMOTE_WRITE | VerbsAccess.REMOTE_ATOMIC;

/** Observer of every byte range the HCA itself writes (DMA), for property tests. */
export type DmaWriteObserver = (hca: number, addr: number, length: number) => void;

/** One HCA: host memory, mkeys, counters of fresh numbers. */
export class HcaState {
  readonly host: HostMemory;
  /** The mirror of the objects below, in the form `translate` reads. */
  readonly table = new MkeyTable();
  /** Live MRs and windows by mkey index (one index space for both, as on mlx5). */
  readonly objects = new Map<number, MkeyObject>();
  private nextIndex = FIRST_MKEY_INDEX;
  /** The driver's rolling u8 tag ("variant") counter. */
  private nextTag = 1;
  private nextPdnValue = 1;
  private nextQpnValue = FIRST_QPN;
  private nextCqnValue = 1;

  constructor(
    readonly index: number,
    private readonly onDmaWrite: DmaWriteObserver | undefined,
  ) {
    this.host = new HostMemory(0x10_0000 + index * 0x1000_0000);
    this.table.set({
      index: HOST_MKEY_INDEX,
      tag: 0,
      free: false,
      accessMode: 'PA',
      access: ALL_ACCESS,
      pd: HOST_PD,
      qpn: NOT_BOUND_QPN,
      start: 0,
      length: 0,
      len64: true,
      logPageSize: 12,
      pgAccess: false,
      mtt: [],
      klm: [],
    });
  }

  /** A key for a fresh object: a new index (never reused) and the next rolling tag. */
  freshKey(): number {
    const key = makeKey(this.nextIndex, this.nextTag);
    this.nextIndex += 1;
    this.nextTag = (this.nextTag + 1) & 0xff;
    return key;
  }

  /** The next PD number. */
  nextPdn(): number {
    return this.nextPdnValue++;
  }

  /** The next QP number. */
  nextQpn(): number {
    return this.nextQpnValue++;
  }

  /** The next CQ number. */
  nextCqn(): number {
    return this.nextCqnValue++;
  }

  /** Registers a new object at its index and mirrors it. */
  add(obj: MkeyObject): void {
    this.objects.set(obj.index, obj);
    this.sync(obj);
  }

  /** Removes a destroyed object: its index then names nothing. */
  remove(obj: MkeyObject): void {
    this.objects.delete(obj.index);
    this.table.delete(obj.index);
  }

  /** Rewrites the mirror of `obj` after a change of its device state. */
  sync(obj: MkeyObject): void {
    this.table.set(obj instanceof ModelMr ? mrMkey(obj) : mwMkey(obj));
  }

  /** The HCA reads host memory along `segments` (host virtual addresses). */
  dmaRead(segments: readonly Segment[]): Uint8Array {
    const total = segments.reduce((n, s) => n + s.length, 0);
    const out = new Uint8Array(total);
    let done = 0;
    for (const s of segments) {
      out.set(this.host.read(s.pa, s.length), done);
      done += s.length;
    }
    return out;
  }

  /** The HCA writes `bytes` along `segments` (as many bytes as the segments hold). */
  dmaWrite(segments: readonly Segment[], bytes: Uint8Array): void {
    let done = 0;
    for (const s of segments) {
      if (s.length === 0) continue;
      this.onDmaWrite?.(this.index, s.pa, s.length);
      this.host.write(s.pa, bytes.subarray(done, done + s.length));
      done += s.length;
    }
  }
}

/** The mkey of an MR: KLMS over the host mkey, one KLM per extent. */
function mrMkey(mr: ModelMr): ModelMkey {
  const d = mr.dev;
  return {
    index: mr.index,
    tag: keyTag(d.key),
    free: d.state === 'FREE',
    accessMode: 'KLMS',
    access: d.access & ALL_ACCESS,
    pd: mr.pd.pdn,
    qpn: NOT_BOUND_QPN,
    start: d.iova,
    length: d.length,
    len64: false,
    logPageSize: 12,
    pgAccess: false,
    mtt: [],
    klm: d.extents.map((e) => ({ bcount: e.length, key: makeKey(HOST_MKEY_INDEX, 0), va: e.addr })),
  };
}

/** The mkey of a window: KLMS with one KLM into its MR at `addr`; type 2 bound to its QP. */
function mwMkey(mw: ModelMw): ModelMkey {
  const d = mw.dev;
  const zeroBased = (d.access & VerbsAccess.ZERO_BASED) !== 0;
  return {
    index: mw.index,
    tag: keyTag(d.key),
    free: d.state === 'FREE',
    accessMode: 'KLMS',
    access: d.access & WINDOW_ACCESS,
    pd: mw.pd.pdn,
    qpn: mw.type === 2 && d.qp !== undefined ? d.qp.qpNum : NOT_BOUND_QPN,
    start: zeroBased ? 0 : d.addr,
    length: d.length,
    len64: false,
    logPageSize: 12,
    pgAccess: false,
    mtt: [],
    klm: d.mr === undefined ? [] : [{ bcount: d.length, key: d.mr.dev.key, va: d.addr }],
  };
}
