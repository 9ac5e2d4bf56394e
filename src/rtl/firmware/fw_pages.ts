/**
 * The firmware's ICM pages (`tb.hcaN.pages`): the 4 KiB host pages the driver gave with
 * MANAGE_PAGES, from which ICM (the mkey context table, translation tables: memory/icm.ts)
 * takes every page it uses once the driver has started the adapter (mlx5_core pagealloc.c).
 *
 * When ICM needs more pages than the pool holds, the command that needs them waits: the
 * firmware raises one PAGE_REQUEST EQE (type 0x0b, mlx5_eqe_page_req: func_id at data byte 2,
 * num_pages a signed 32-bit at byte 4, include/linux/mlx5/device.h) for at least the shortfall,
 * rounded up to PAGE_REQUEST_BATCH pages (a model choice: real firmware asks in batches of its
 * own), and retries when the next MANAGE_PAGES arrives; an ALLOCATION_FAIL (the host had no
 * memory, pagealloc.c page_notify_fail) fails every waiting command with NO_RESOURCES.
 *
 * Pages freed by ICM (a destroyed mkey's translation table) go back to this pool, not to the
 * host: the firmware never asks to return pages here (no negative num_pages, no reclaim), so
 * `returned` stays 0 until that is modelled.
 *
 * Before the driver's first MANAGE_PAGES (a testbench driving the firmware without the driver's
 * start-up), ICM takes host frames itself, as it did before the driver gave pages.
 */
import { EQE_DATA_SIZE } from '../formats/eqe.ts';
import { Module, type Counter } from '../../sim/index.ts';
import type { IcmPageSource } from '../memory/icm.ts';

/** Pages a PAGE_REQUEST asks for at least (256 KiB; see the file comment). */
export const PAGE_REQUEST_BATCH = 64;
/** Pages the firmware asks at QUERY_PAGES boot: the zero page unwritten mkey contexts read as (model choice). */
export const BOOT_PAGES = 1;
/** Pages the firmware asks at QUERY_PAGES init: the mkey table's first 1,024 contexts (model choice). */
export const INIT_PAGES = 16;

/** Where a PAGE_REQUEST goes (the EQ writer, routed by event mask); false when no EQ takes it. */
export type PageRequestSink = (data: Uint8Array) => boolean;

export class FwPages extends Module implements IcmPageSource {
  /** Given pages ICM does not use now (their DMA addresses), lowest-first use order: last given first. */
  private readonly free: number[] = [];
  private readonly held = new Set<number>();
  private active = false;
  private inUse = 0;
  private waiters: ((ok: boolean) => void)[] = [];
  private requesting = false;
  /** Raises a PAGE_REQUEST EQE (hca.ts routes it to the EQ writer). */
  raise: PageRequestSink | null = null;
  private readonly sGiven: Counter;
  private readonly sRequested: Counter;
  private readonly sRequests: Counter;
  private readonly sFailed: Counter;

  constructor(parent: Module, name: string) {
    super(parent.sim, parent, name);
    this.sGiven = this.stats.counter('given');
    this.sRequested = this.stats.counter('requested');
    this.sRequests = this.stats.counter('page_requests');
    this.sFailed = this.stats.counter('alloc_fail');
    this.stats.gauge('returned', () => 0);
    this.stats.gauge('in_use', () => this.inUse);
    this.stats.gauge('held', () => this.inUse + this.free.length);
  }

  /** True once the driver has given pages: ICM takes its pages from here. */
  get enabled(): boolean {
    return this.active;
  }

  /** Pages given and not used by ICM. */
  get available(): number {
    return this.free.length;
  }

  /** True when page `pa` was given and is held. */
  holds(pa: number): boolean {
    return this.held.has(pa);
  }

  /** Every page held (given, used or not), ascending: what a test checks the DMA checker against. */
  heldPages(): number[] {
    return [...this.held].sort((a, b) => a - b);
  }

  /** Pages ICM uses now. */
  get used(): number {
    return this.inUse;
  }

  /** MANAGE_PAGES ALLOCATION_SUCCESS: the pages are the firmware's; waiting commands retry. */
  give(pas: readonly number[]): void {
    this.active = true;
    for (let i = pas.length - 1; i >= 0; i--) {
      this.free.push(pas[i]);
      this.held.add(pas[i]);
    }
    this.sGiven.inc(pas.length);
    this.settle(true);
  }

  /** MANAGE_PAGES ALLOCATION_FAIL: the driver has none; waiting commands fail. */
  allocationFailed(): void {
    this.sFailed.inc();
    this.settle(false);
  }

  private settle(ok: boolean): void {
    this.requesting = false;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f(ok);
  }

  /** `n` pages for ICM, or null (nothing taken) when the pool holds fewer. */
  take(n: number): number[] | null {
    if (this.free.length < n) return null;
    this.inUse += n;
    return this.free.splice(this.free.length - n, n).reverse();
  }

  /** Pages ICM no longer uses: back to the pool. */
  release(pas: readonly number[]): void {
    this.inUse -= pas.length;
    for (const pa of pas) this.free.push(pa);
  }

  /**
   * A command needs `n` pages more than the pool has: one PAGE_REQUEST (unless one is
   * outstanding), resolved true when pages arrive (retry), false when the driver failed or no EQ
   * takes the request.
   */
  request(n: number): Promise<boolean> {
    const p = new Promise<boolean>((resolve) => this.waiters.push(resolve));
    if (!this.requesting) {
      const ask = Math.ceil(n / PAGE_REQUEST_BATCH) * PAGE_REQUEST_BATCH;
      const data = new Uint8Array(EQE_DATA_SIZE);
      const v = new DataView(data.buffer);
      v.setUint16(2, 0); // func_id: the PF itself
      v.setInt32(4, ask);
      if (this.raise?.(data) === true) {
        this.requesting = true;
        this.sRequests.inc();
        this.sRequested.inc(ask);
      } else this.settle(false);
    }
    return p;
  }
}
