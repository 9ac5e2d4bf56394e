/**
 * A context table in ICM (the QP, CQ and EQ tables): one fixed-size entry per object number,
 * `FRAME_SIZE / entryBytes` entries to a 4 KiB page, each page taken from the firmware's pages
 * when its first object is created and given back when its last one is destroyed. So the
 * firmware's memory for contexts grows with the objects that exist, as real ICM does (the driver
 * pays for it in pages: many QPs raise PAGE_REQUEST).
 *
 * The entry sizes are the mlx5_ifc context structures rounded up to a power of two (model
 * choice: the firmware's own ICM entries are not public; mlx5_ifc.h qpc 0x480 bits, cqc and eqc
 * 0x200 bits). The table holds the pages; the object's state itself stays in the firmware's
 * records (cmdif.ts), which the engines read.
 *
 * Memory: one map entry per page in use (not per number), so a sparse table of 2^24 numbers
 * costs only what is live.
 */
import { FRAME_SIZE } from './host_mem.ts';

/** One page of a table: its host address and the live entries in it. */
interface TablePage {
  readonly pa: number;
  live: number;
  /** Kept while the HCA is up, live or not (the table's first page, taken at INIT_HCA). */
  keep: boolean;
}

export class IcmContextTable {
  /** Entries per 4 KiB page. */
  readonly perPage: number;
  private readonly pages = new Map<number, TablePage>();

  constructor(
    /** What the table holds ("QP contexts"): named in a shortage. */
    readonly what: string,
    /** Bytes of one entry (a power of two up to 4 KiB). */
    readonly entryBytes: number,
    /** `n` zeroed pages (throws IcmNeedPages / IcmNoMemory, nothing taken, when short). */
    private readonly takePages: (n: number, what: string) => number[],
    /** Pages no entry uses any more. */
    private readonly releasePages: (pas: number[]) => void,
  ) {
    this.perPage = FRAME_SIZE / entryBytes;
  }

  /** Pages the table holds now. */
  get pagesInUse(): number {
    return this.pages.size;
  }

  /** The object `n` exists: its entry's page is taken if it is the page's first. Returns the entry's address. */
  add(n: number): number {
    const key = Math.floor(n / this.perPage);
    let page = this.pages.get(key);
    if (page === undefined) {
      page = { pa: this.takePages(1, this.what)[0], live: 0, keep: false };
      this.pages.set(key, page);
    }
    page.live++;
    return page.pa + (n % this.perPage) * this.entryBytes;
  }

  /** The object `n` is gone: its page goes back when no entry of it is live (and it is not kept). */
  remove(n: number): void {
    const key = Math.floor(n / this.perPage);
    const page = this.pages.get(key);
    if (page === undefined || page.live === 0) return;
    page.live--;
    if (page.live === 0 && !page.keep) {
      this.pages.delete(key);
      this.releasePages([page.pa]);
    }
  }

  /** Takes the page of object `n` now and keeps it while the HCA is up (INIT_HCA: the table's first page). */
  reserve(n: number): void {
    const key = Math.floor(n / this.perPage);
    let page = this.pages.get(key);
    if (page === undefined) {
      page = { pa: this.takePages(1, this.what)[0], live: 0, keep: true };
      this.pages.set(key, page);
    }
    page.keep = true;
  }

  /** TEARDOWN_HCA: every page goes back, in the order they were taken. */
  clear(): void {
    const pas: number[] = [];
    for (const p of this.pages.values()) pas.push(p.pa);
    this.pages.clear();
    if (pas.length > 0) this.releasePages(pas);
  }
}
