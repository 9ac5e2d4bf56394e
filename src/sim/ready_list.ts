/**
 * The order an engine's arbiter serves its ready entries in (QPs of the send queue engine,
 * contexts of the responder), kept so that entries waiting for a full resource cost nothing.
 *
 * An engine serves its ready entries each edge in a stable order: an entry keeps its place while
 * it stays ready, and one that becomes ready joins at the end. That order is a key per entry,
 * given when it becomes ready (`enter`) and kept until it is not (`leave`). An entry that can do
 * nothing but wait for a resource (a free WQE slot, room in an engine's queue) is parked in that
 * resource's wait set instead of being served: the engine serves, in key order, its other ready
 * entries and, where the resource is free at a parked entry's turn, that entry; a parked entry
 * whose turn passes with its resource full is what the old scan would have found stalled, and
 * the engine counts it so. An input for a parked entry (`wake`) puts it in the woken set,
 * served at its turn whatever the resources. Each change costs O(log32 n); keys are renumbered,
 * in order, when they run out (amortized O(1)).
 *
 * A run (`KeyRun`) is many entries made ready at once, in order, that take consecutive keys
 * without being written one by one: the engine keeps its members and serves them at their keys;
 * the list only counts them when it renumbers, so keys are what one `enter` each would have given.
 */
import { KeySet } from './key_set.ts';

/** What an arbitrated entry carries: its key (-1: not ready) and the wait sets it is in. */
export interface Arbitrated {
  arbKey: number;
  /** Bit i: parked in wait set i; WOKEN: parked and woken; 0: not parked. */
  arbWait: number;
}

/** `arbWait` of a parked entry an input woke. */
export const WOKEN = 1 << 30;

const MIN_KEYS = 1024;

/** Entries that took the keys base .. base + m - 1 at once (`addRun`); member g (g >= next, not served yet) holds base + g. */
export interface KeyRun {
  base: number;
  readonly m: number;
  next: number;
  /** base + next: the key of the member served next. */
  arbKey: number;
}

export class ReadyList<T extends Arbitrated> {
  /** The entry of each key in use. */
  private byKey: (T | undefined)[];
  private nextKey = 0;
  private keys: number;
  /** Wait set i: parked entries waiting for resource i. */
  waits: KeySet[];
  /** Parked entries an input woke. */
  woken: KeySet;
  private nParked = 0;
  /**
   * The entries given keys since the last renumbering and before it, with those keys (an entry
   * that left, or took another key, is there too: it is live while it holds that key), in key
   * order; and apart, the run members `place` gave a key (below the last, in any order).
   */
  private ordX: T[] = [];
  private ordK: number[] = [];
  private plX: T[] = [];
  private plK: number[] = [];
  /** The live entries of a renumbering, in key order (kept between renumberings, emptied). */
  private scratch: T[] = [];
  /** Runs with members not served yet, in key order (from runHead; earlier ones are served). */
  runs: KeyRun[] = [];
  /** Runs 0 .. nRuns - 1 of the array are in use (it keeps its length: emptying an array frees its store). */
  nRuns = 0;
  runHead = 0;

  constructor(private readonly nWaits: number) {
    this.keys = MIN_KEYS;
    this.byKey = new Array<T | undefined>(this.keys).fill(undefined);
    this.waits = [];
    for (let i = 0; i < nWaits; i++) this.waits.push(new KeySet(this.keys));
    this.woken = new KeySet(this.keys);
  }

  /** Entries parked (woken ones included). */
  get parked(): number {
    return this.nParked;
  }

  /** The entry holding key `k`. */
  item(k: number): T {
    return this.byKey[k]!;
  }

  /** `x` becomes ready: it takes the last place. */
  enter(x: T): void {
    if (this.nextKey === this.keys) this.renumber();
    const k = this.nextKey++;
    x.arbKey = k;
    x.arbWait = 0;
    this.byKey[k] = x;
    this.ordX.push(x);
    this.ordK.push(k);
  }

  /** Keys left before a renumbering (renumbers first when none is: as `enter` would). */
  room(): number {
    if (this.nextKey === this.keys) this.renumber();
    return this.keys - this.nextKey;
  }

  /** A run of `r.m` (at most `room()`) entries becomes ready: it takes the next keys. */
  addRun(r: KeyRun): void {
    r.base = this.nextKey;
    r.arbKey = r.base + r.next;
    this.nextKey += r.m;
    this.runs[this.nRuns++] = r;
  }

  /** A member of a run, at its key (served now: it holds its key as an entry). */
  place(x: T, k: number): void {
    x.arbKey = k;
    x.arbWait = 0;
    this.byKey[k] = x;
    this.plX.push(x);
    this.plK.push(k);
  }

  /** Runs whose members are all served are forgotten (they are served in key order). */
  dropServedRuns(): void {
    const rs = this.runs;
    while (this.runHead < this.nRuns && rs[this.runHead].next >= rs[this.runHead].m) this.runHead++;
    if (this.runHead === this.nRuns) {
      this.nRuns = 0;
      this.runHead = 0;
    } else if (this.runHead > 64) {
      for (let i = this.runHead; i < this.nRuns; i++) rs[i - this.runHead] = rs[i];
      this.nRuns -= this.runHead;
      this.runHead = 0;
    }
  }

  /** Every run is forgotten (their members were entered one by one, `place`). */
  dropRuns(): void {
    this.nRuns = 0;
    this.runHead = 0;
  }


  /** `x` is not ready any more (served with nothing left to do, or gone). */
  leave(x: T): void {
    if (x.arbKey < 0) return;
    this.unpark(x);
    this.byKey[x.arbKey] = undefined;
    x.arbKey = -1;
  }

  /** Parks a ready entry in the wait sets of `mask` (bit i: set i). */
  park(x: T, mask: number): void {
    this.unpark(x);
    for (let i = 0; i < this.nWaits; i++) if ((mask & (1 << i)) !== 0) this.waits[i].add(x.arbKey);
    x.arbWait = mask;
    this.nParked++;
  }

  /** An input for a parked entry: it is served at its next turn. */
  wake(x: T): void {
    if (x.arbWait === 0 || x.arbWait === WOKEN) return;
    this.dropWaits(x);
    this.woken.add(x.arbKey);
    x.arbWait = WOKEN;
  }

  /** A parked entry is served now: out of every wait set. */
  unpark(x: T): void {
    if (x.arbWait === 0) return;
    if (x.arbWait === WOKEN) this.woken.delete(x.arbKey);
    else this.dropWaits(x);
    x.arbWait = 0;
    this.nParked--;
  }

  private dropWaits(x: T): void {
    for (let i = 0; i < this.nWaits; i++) if ((x.arbWait & (1 << i)) !== 0) this.waits[i].delete(x.arbKey);
  }

  /**
   * Keys ran out: the entries and the runs' members not served yet take keys 0.. in their order,
   * in a key space at least 64x their number. A wake of the send queue's slot waiters takes a
   * key for each of them (some 3,000 at 4,096 QPs x 16), so the space runs out often: at 4x the
   * renumbering visited 86 entries per READ there, at 16x 20, at 64x 6 (the order, so what is
   * simulated, is the same; the key space is 262,144 there, 2 MB of entries).
   */
  private renumber(): void {
    const live = this.scratch;
    let nLive = 0;
    const ox = this.ordX;
    const ok = this.ordK;
    // the placed ones (few) in key order, merged into the entered ones
    const pl: T[] = [];
    for (let i = 0; i < this.plX.length; i++) {
      const x = this.plX[i];
      if (x.arbKey === this.plK[i] && this.byKey[this.plK[i]] === x) pl.push(x);
    }
    if (pl.length > 1) pl.sort((a, b) => a.arbKey - b.arbKey);
    let j = 0;
    for (let i = 0; i < ox.length; i++) {
      const x = ox[i];
      if (x.arbKey !== ok[i] || this.byKey[ok[i]] !== x) continue;
      while (j < pl.length && pl[j].arbKey < ok[i]) live[nLive++] = pl[j++];
      live[nLive++] = x;
    }
    while (j < pl.length) live[nLive++] = pl[j++];
    if (this.plX.length > 0) {
      this.plX = [];
      this.plK = [];
    }
    this.dropServedRuns();
    const rs = this.runs;
    let members = 0;
    for (let r = this.runHead; r < this.nRuns; r++) members += rs[r].m - rs[r].next;
    const total = nLive + members;
    let keys = this.keys;
    while (keys < 64 * total) keys *= 2;
    // every parked entry is live, so the wait sets hold live keys only: emptied at once
    for (let i = 0; i < nLive; i++) this.byKey[live[i].arbKey] = undefined;
    if (keys !== this.keys) {
      this.keys = keys;
      this.waits = this.waits.map(() => new KeySet(keys));
      this.woken = new KeySet(keys);
      this.byKey = new Array<T | undefined>(keys).fill(undefined);
    } else {
      for (let w = 0; w < this.nWaits; w++) if (this.waits[w].size > 0) this.waits[w].clear();
      if (this.woken.size > 0) this.woken.clear();
    }
    // the list of keys given starts again from the live entries, in their new order (the arrays
    // are written over in place: no new backing store)
    let no = 0;
    // entries and runs merged in key order
    let nk = 0;
    let r = this.runHead;
    for (let i = 0; i <= nLive; i++) {
      const x = i < nLive ? live[i] : undefined;
      while (r < this.nRuns && (x === undefined || rs[r].base + rs[r].next < x.arbKey)) {
        const run = rs[r++];
        run.base = nk - run.next;
        run.arbKey = nk;
        nk += run.m - run.next;
      }
      if (x === undefined) break;
      x.arbKey = nk;
      this.byKey[nk] = x;
      live[i] = undefined as unknown as T;
      ox[no] = x;
      ok[no++] = nk;
      if (x.arbWait === WOKEN) this.woken.add(nk);
      else for (let w = 0; w < this.nWaits; w++) if ((x.arbWait & (1 << w)) !== 0) this.waits[w].add(nk);
      nk++;
    }
    ox.length = no;
    ok.length = no;
    this.nextKey = nk;
  }

}
