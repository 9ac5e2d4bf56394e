/**
 * The tag store of a set-associative cache with true LRU replacement, over typed arrays so
 * lookups allocate nothing. Keys are non-negative integers below 2^53 (an mkey index, or a
 * 64-byte line address); the caller keeps the data in slot-indexed storage.
 */
export class SetAssoc {
  readonly sets: number;
  /** sets - 1 when sets is a power of two (a mask beats a float modulo), else -1. */
  private readonly mask: number;
  private readonly keys: Float64Array; // -1: invalid
  private readonly stamp: Float64Array; // last use, for LRU
  private clock = 0;
  /** Slot evicted by the last `insert`, or -1 (for stats). */
  evictedKey = -1;

  constructor(
    readonly entries: number,
    readonly ways: number,
  ) {
    if (!(Number.isInteger(entries) && Number.isInteger(ways) && ways >= 1 && entries >= ways && entries % ways === 0)) {
      throw new RangeError(`cache geometry: ${entries} entries is not a whole number of ${ways}-way sets`);
    }
    this.sets = entries / ways;
    this.mask = (this.sets & (this.sets - 1)) === 0 ? this.sets - 1 : -1;
    this.keys = new Float64Array(entries).fill(-1);
    this.stamp = new Float64Array(entries);
  }

  /** The set a key maps to (`setKey` is the key, or the line number for line addresses). */
  private setOf(key: number): number {
    // keys are integers below 2^53: `>>> 0` keeps their low 32 bits exactly
    return this.mask >= 0 ? (key >>> 0) & this.mask : key % this.sets;
  }

  /** Slot holding `key`, marking it most recently used; -1 on a miss. */
  lookup(key: number, setKey: number = key): number {
    const base = this.setOf(setKey) * this.ways;
    for (let w = 0; w < this.ways; w++) {
      const s = base + w;
      if (this.keys[s] === key) {
        this.stamp[s] = ++this.clock;
        return s;
      }
    }
    return -1;
  }

  /** Slot holding `key` without touching LRU; -1 if absent. */
  find(key: number, setKey: number = key): number {
    const base = this.setOf(setKey) * this.ways;
    for (let w = 0; w < this.ways; w++) if (this.keys[base + w] === key) return base + w;
    return -1;
  }

  /** Places `key` (an invalid way, else the least recently used), returning its slot. */
  insert(key: number, setKey: number = key): number {
    const base = this.setOf(setKey) * this.ways;
    let victim = base;
    for (let w = 0; w < this.ways; w++) {
      const s = base + w;
      if (this.keys[s] === key) {
        victim = s;
        break;
      }
      if (this.keys[s] < 0) {
        victim = s;
        break;
      }
      if (this.stamp[s] < this.stamp[victim]) victim = s;
    }
    this.evictedKey = this.keys[victim] >= 0 && this.keys[victim] !== key ? this.keys[victim] : -1;
    this.keys[victim] = key;
    this.stamp[victim] = ++this.clock;
    return victim;
  }

  /** Drops `key` if present; returns whether it was. */
  invalidate(key: number, setKey: number = key): boolean {
    const s = this.find(key, setKey);
    if (s < 0) return false;
    this.keys[s] = -1;
    return true;
  }

  /** Drops every entry. */
  invalidateAll(): number {
    let n = 0;
    for (let s = 0; s < this.entries; s++) {
      if (this.keys[s] >= 0) n++;
      this.keys[s] = -1;
    }
    return n;
  }

  /** The key in a slot (-1 when invalid). */
  keyAt(slot: number): number {
    return this.keys[slot];
  }
}
