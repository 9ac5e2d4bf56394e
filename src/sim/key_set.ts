/**
 * A set of integers in 0 .. capacity-1 as a tree of 32-bit bitmaps (each word of a level says
 * which words below it are non-empty): add, delete, the first member at or after a key, and the
 * largest member, each in O(log32 capacity) word operations; nothing allocates after construction.
 * The arbitration lists (ready_list.ts) keep their waiting entries in these.
 */
export class KeySet {
  /** levels[0] holds one bit per key; levels[i + 1] one bit per non-empty word of levels[i]. */
  private readonly levels: Uint32Array[];
  readonly capacity: number;
  private count = 0;
  /** Changes with every add, delete and clear: a `next` answer cached at one version holds while it does. */
  version = 0;

  constructor(capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > 2 ** 30) throw new RangeError(`KeySet: capacity ${capacity} must be an integer in 1..2^30`);
    this.capacity = capacity;
    const levels: Uint32Array[] = [];
    let n = capacity;
    do {
      n = Math.ceil(n / 32);
      levels.push(new Uint32Array(n));
    } while (n > 1);
    this.levels = levels;
  }

  /** Members. */
  get size(): number {
    return this.count;
  }

  has(k: number): boolean {
    return (this.levels[0][k >>> 5] & (1 << (k & 31))) !== 0;
  }

  add(k: number): void {
    if (this.has(k)) return;
    this.count++;
    this.version++;
    const ls = this.levels;
    for (let l = 0; l < ls.length; l++) {
      const w = k >>> 5;
      const was = ls[l][w];
      ls[l][w] = was | (1 << (k & 31));
      if (was !== 0) return; // the levels above already mark this word
      k = w;
    }
  }

  delete(k: number): void {
    if (!this.has(k)) return;
    this.count--;
    this.version++;
    const ls = this.levels;
    for (let l = 0; l < ls.length; l++) {
      const w = k >>> 5;
      const now = ls[l][w] & ~(1 << (k & 31));
      ls[l][w] = now;
      if (now !== 0) return; // the word still has members: the levels above stay
      k = w;
    }
  }

  /** The smallest member >= k, or Infinity. */
  next(k: number): number {
    if (this.count === 0 || k >= this.capacity) return Infinity;
    if (k < 0) k = 0;
    const ls = this.levels;
    let idx = k;
    for (let l = 0; l < ls.length; l++) {
      const w = idx >>> 5;
      if (w >= ls[l].length) return Infinity;
      const m = ls[l][w] & (0xffffffff << (idx & 31));
      if (m !== 0) {
        idx = (w << 5) + ctz(m);
        // down to the first member under this bit
        for (let d = l - 1; d >= 0; d--) idx = (idx << 5) + ctz(ls[d][idx]);
        return idx;
      }
      idx = w + 1;
    }
    return Infinity;
  }

  /** The largest member, or -1. */
  max(): number {
    if (this.count === 0) return -1;
    const ls = this.levels;
    let idx = 0;
    for (let l = ls.length - 1; l >= 0; l--) idx = (idx << 5) + (31 - Math.clz32(ls[l][idx]));
    return idx;
  }

  clear(): void {
    this.version++;
    const ls = this.levels;
    if (this.count * 8 < ls[0].length) {
      // few members in a big space (the ready list renumbers a 262,144-key set with a few
      // hundred): zero the words on their paths only, from the top, so the walk still finds them
      this.clearWord(ls.length - 1, 0);
    } else for (const l of ls) l.fill(0);
    this.count = 0;
  }

  /** Zeroes word `w` of level `l` and, below it, every word one of its bits marks. */
  private clearWord(l: number, w: number): void {
    const ls = this.levels;
    let m = ls[l][w];
    if (m === 0) return;
    ls[l][w] = 0;
    if (l === 0) return;
    while (m !== 0) {
      const b = ctz(m);
      m &= m - 1;
      this.clearWord(l - 1, (w << 5) + b);
    }
  }
}

/** Trailing zeros of a non-zero 32-bit word. */
function ctz(x: number): number {
  return 31 - Math.clz32(x & -x);
}

/**
 * The smallest member of a set from a position that only moves forward, looked up again only
 * when the set changed (another set, or its `version`) or the position went past the member
 * found: a pass over keys in order that asks at every step (the send queue engine's) mostly asks
 * for what it already has.
 */
export class NextMember {
  private set: KeySet | null = null;
  private version = -1;
  private key = Infinity;

  /** Forgets the last answer (a new pass). */
  reset(): void {
    this.set = null;
  }

  /** `s.next(from)`, from the last answer while it holds. */
  of(s: KeySet, from: number): number {
    if (s !== this.set || s.version !== this.version || this.key < from) {
      this.key = s.next(from);
      this.set = s;
      this.version = s.version;
    }
    return this.key;
  }
}
