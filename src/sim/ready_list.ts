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

  /** Keys ran out: the entries take keys 0.. in their order, in a key space at least 4x their number. */
  private renumber(): void {
    const live: T[] = [];
    for (let k = 0; k < this.nextKey; k++) {
      const x = this.byKey[k];
      if (x !== undefined) live.push(x);
    }
    let keys = this.keys;
    while (keys < 4 * live.length) keys *= 2;
    if (keys !== this.keys) {
      this.keys = keys;
      this.waits = this.waits.map(() => new KeySet(keys));
      this.woken = new KeySet(keys);
    } else {
      for (const w of this.waits) w.clear();
      this.woken.clear();
    }
    this.byKey = new Array<T | undefined>(keys).fill(undefined);
    for (let k = 0; k < live.length; k++) {
      const x = live[k];
      x.arbKey = k;
      this.byKey[k] = x;
      if (x.arbWait === WOKEN) this.woken.add(k);
      else for (let i = 0; i < this.nWaits; i++) if ((x.arbWait & (1 << i)) !== 0) this.waits[i].add(k);
    }
    this.nextKey = live.length;
  }
}
