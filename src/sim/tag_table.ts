/**
 * Values waiting under a tag that counts up (a DMA read's tag, a work request's id), few at a
 * time: a small table indexed by the tag's low bits, and a Map for a tag whose cell is taken.
 * A Map keyed by ever-growing tags, one insert and one delete per tag, builds its hash table
 * anew every few operations; V8 often keeps those tables long enough to promote them, and they
 * pile up as garbage in the old generation (about 100 bytes per command in the MR cache's
 * pre-fill and per registration). Here nothing is allocated unless cells collide.
 */
export class TagTable<V> {
  private readonly tags: Float64Array;
  private readonly vals: (V | undefined)[];
  private readonly spill = new Map<number, V>();
  private readonly mask: number;
  private n = 0;

  /** `cells`: a power of two, above the number usually waiting. */
  constructor(cells = 64) {
    if (!(cells > 0 && (cells & (cells - 1)) === 0)) throw new RangeError(`TagTable: cells must be a power of two, got ${cells}`);
    this.mask = cells - 1;
    this.tags = new Float64Array(cells).fill(-1);
    this.vals = new Array<V | undefined>(cells).fill(undefined);
  }

  /** Values waiting. */
  get size(): number {
    return this.n;
  }

  /** `v` waits under `tag` (a non-negative integer not waiting already). */
  set(tag: number, v: V): void {
    const i = tag & this.mask;
    if (this.tags[i] < 0) {
      this.tags[i] = tag;
      this.vals[i] = v;
    } else this.spill.set(tag, v);
    this.n++;
  }

  /** The value waiting under `tag`, removed; undefined if none. */
  take(tag: number): V | undefined {
    const i = tag & this.mask;
    if (this.tags[i] === tag) {
      const v = this.vals[i];
      this.tags[i] = -1;
      this.vals[i] = undefined;
      this.n--;
      return v;
    }
    if (this.spill.size === 0) return undefined;
    const v = this.spill.get(tag);
    if (v === undefined) return undefined;
    this.spill.delete(tag);
    this.n--;
    return v;
  }

  /** Every value, removed, in the order of their tags. */
  takeAll(): V[] {
    const all: [number, V][] = [];
    for (let i = 0; i < this.tags.length; i++) if (this.tags[i] >= 0) all.push([this.tags[i], this.vals[i] as V]);
    for (const [t, v] of this.spill) all.push([t, v]);
    all.sort((a, b) => a[0] - b[0]);
    this.tags.fill(-1);
    this.vals.fill(undefined);
    this.spill.clear();
    this.n = 0;
    return all.map((e) => e[1]);
  }
}
