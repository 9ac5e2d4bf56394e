import type { ModelMkey } from './types.ts';

/** The model's mkey context table: mkeys by 24-bit index. */
export class MkeyTable {
  private readonly byIndex = new Map<number, ModelMkey>();

  /** A table holding `mkeys`; a later mkey with the same index replaces an earlier one. */
  static from(mkeys: Iterable<ModelMkey>): MkeyTable {
    const table = new MkeyTable();
    for (const mkey of mkeys) table.set(mkey);
    return table;
  }

  /** Stores `mkey` at its index, replacing whatever was there. */
  set(mkey: ModelMkey): void {
    this.byIndex.set(mkey.index, mkey);
  }

  /** The mkey at `index`, or undefined when the index holds none. */
  get(index: number): ModelMkey | undefined {
    return this.byIndex.get(index);
  }

  /** Whether `index` holds an mkey. */
  has(index: number): boolean {
    return this.byIndex.has(index);
  }

  /** Removes the mkey at `index`; true if there was one. */
  delete(index: number): boolean {
    return this.byIndex.delete(index);
  }

  /** Number of mkeys. */
  get size(): number {
    return this.byIndex.size;
  }

  /** Every mkey by increasing index, so listings never depend on insertion order. */
  list(): ModelMkey[] {
    return [...this.byIndex.values()].sort((a, b) => a.index - b.index);
  }
}
