/**
 * The firmware's ICM pages (`tb.hcaN.pages`): the 4 KiB host pages the driver gave with
 * MANAGE_PAGES, from which ICM (the mkey context table, the QP/CQ/EQ context tables, translation
 * tables: memory/icm.ts) takes every page it uses once the driver has started the adapter
 * (mlx5_core pagealloc.c).
 *
 * When ICM needs more pages than the pool holds, the command that needs them waits: the
 * firmware raises one PAGE_REQUEST EQE (type 0x0b, mlx5_eqe_page_req: func_id at data byte 2,
 * num_pages a signed 32-bit at byte 4, include/linux/mlx5/device.h) for at least the shortfall,
 * rounded up to PAGE_REQUEST_BATCH pages (a model choice: real firmware asks in batches of its
 * own), and retries when the next MANAGE_PAGES arrives; an ALLOCATION_FAIL (the host had no
 * memory, pagealloc.c page_notify_fail) fails every waiting command with NO_RESOURCES.
 *
 * Pages freed by ICM (a destroyed mkey's translation table, a QP table page whose QPs are all
 * gone) go back to this pool. The firmware gives pages back to the host two ways, both through
 * MANAGE_PAGES HCA_RETURN_PAGES (pagealloc.c reclaim_pages: op_mod MLX5_PAGES_TAKE, the output
 * lists the pages returned, at most input_num_entries):
 * - asked by the firmware (a PAGE_REQUEST with a negative num_pages, pagealloc.c:651-659): when
 *   more than RECLAIM_ABOVE pages lie unused and ICM has taken none for RECLAIM_IDLE_PS, it asks
 *   the driver to take back all but PAGE_REQUEST_BATCH of them (a model choice, README "Where
 *   the hardware has no answer");
 * - asked by the driver at close, after TEARDOWN_HCA has emptied ICM (main.c:1233
 *   mlx5_function_disable, pagealloc.c:735 mlx5_reclaim_startup_pages), until none is left.
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
/**
 * Pages the firmware asks at QUERY_PAGES init (model choice): the mkey table's first 1,024
 * contexts (16 pages, taken as mkeys are made), and the first page of each context table (QP,
 * CQ, EQ: icm.ts), which INIT_HCA takes at once.
 */
export const INIT_PAGES = 16 + 3;
/** Unused pages the firmware keeps before it asks the driver to take some back (1 MiB; model choice). */
export const RECLAIM_ABOVE = 4 * PAGE_REQUEST_BATCH;
/** How long ICM must take no page before the firmware asks for pages back (1 ms; model choice). */
export const RECLAIM_IDLE_PS = 1_000_000_000;

/** Where a PAGE_REQUEST goes (the EQ writer, routed by event mask); false when no EQ takes it. */
/** Bytes of a page given (MANAGE_PAGES gives 4 KiB pages). */
const PAGE_BYTES = 4096;

export type PageRequestSink = (data: Uint8Array) => boolean;

export class FwPages extends Module implements IcmPageSource {
  /** Given pages ICM does not use now (their DMA addresses), lowest-first use order: last given first. */
  private readonly free: number[] = [];
  /**
   * Given pages, by page number (address / PAGE_BYTES): small integers the Set keeps unboxed,
   * where addresses past 2^31 were a boxed number per page (~24,000 pages per adapter at open).
   */
  private readonly held = new Set<number>();
  private active = false;
  private inUse = 0;
  private waiters: ((ok: boolean) => void)[] = [];
  private requesting = false;
  /** A negative PAGE_REQUEST is out and no HCA_RETURN_PAGES has come since. */
  private reclaimAsked = false;
  /** The idle check is scheduled (at most one at a time). */
  private reclaimTimer = false;
  /** When ICM last took a page. */
  private lastTake = 0;
  /** False after TEARDOWN_HCA: the firmware asks for nothing (pages only go back). */
  private asking = true;
  /** Raises a PAGE_REQUEST EQE (hca.ts routes it to the EQ writer). */
  raise: PageRequestSink | null = null;
  private readonly sGiven: Counter;
  private readonly sRequested: Counter;
  private readonly sRequests: Counter;
  private readonly sFailed: Counter;
  private readonly sReturned: Counter;
  private readonly sReturnAsked: Counter;
  private readonly sReturnRequests: Counter;
  private readonly idle = { fire: (): void => this.idleCheck() };

  constructor(parent: Module, name: string) {
    super(parent.sim, parent, name);
    this.sGiven = this.stats.counter('given');
    this.sRequested = this.stats.counter('requested');
    this.sRequests = this.stats.counter('page_requests');
    this.sFailed = this.stats.counter('alloc_fail');
    this.sReturned = this.stats.counter('returned');
    this.sReturnAsked = this.stats.counter('return_asked');
    this.sReturnRequests = this.stats.counter('return_requests');
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
    return this.held.has(pa / PAGE_BYTES);
  }

  /** Every page held (given, used or not), ascending: what a test checks the DMA checker against. */
  heldPages(): number[] {
    return [...this.held].map((p) => p * PAGE_BYTES).sort((a, b) => a - b);
  }

  /** Pages ICM uses now. */
  get used(): number {
    return this.inUse;
  }

  /** MANAGE_PAGES ALLOCATION_SUCCESS: the pages are the firmware's; waiting commands retry. */
  give(pas: readonly number[]): void {
    this.active = true;
    this.asking = true;
    for (let i = pas.length - 1; i >= 0; i--) {
      this.free.push(pas[i]);
      this.held.add(pas[i] / PAGE_BYTES);
    }
    this.sGiven.inc(pas.length);
    this.settle(true);
  }

  /** MANAGE_PAGES ALLOCATION_FAIL: the driver has none; waiting commands fail. */
  allocationFailed(): void {
    this.sFailed.inc();
    this.settle(false);
  }

  /**
   * MANAGE_PAGES HCA_RETURN_PAGES: up to `n` pages ICM does not use, given back (the output's
   * pas): the pages given last first, so a page freed by ICM goes before the reserve.
   */
  giveBack(n: number): number[] {
    this.reclaimAsked = false;
    const k = Math.min(n, this.free.length);
    const out = this.free.splice(this.free.length - k, k).reverse();
    for (const pa of out) this.held.delete(pa / PAGE_BYTES);
    this.sReturnAsked.inc(n);
    this.sReturned.inc(k);
    return out;
  }

  /** TEARDOWN_HCA: ICM is empty; the firmware asks for no page from now on. */
  tornDown(): void {
    this.asking = false;
    this.settle(false);
  }

  /**
   * DISABLE_HCA: the function is off; pages the driver did not take back are dropped (it still
   * holds them: pagealloc.c gives up after its timeout and frees what it has, main.c:1235).
   */
  disabled(): number[] {
    const left = [...this.free];
    this.free.length = 0;
    this.held.clear();
    this.inUse = 0;
    this.active = false;
    this.reclaimAsked = false;
    return left;
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
    this.lastTake = this.sim.now;
    return this.free.splice(this.free.length - n, n).reverse();
  }

  /** Pages ICM no longer uses: back to the pool (and, when many lie idle, soon to the host). */
  release(pas: readonly number[]): void {
    this.inUse -= pas.length;
    for (const pa of pas) this.free.push(pa);
    if (this.free.length > RECLAIM_ABOVE && !this.reclaimTimer && !this.reclaimAsked) {
      this.reclaimTimer = true;
      this.sim.after(RECLAIM_IDLE_PS, this.idle);
    }
  }

  /** The idle check: ask pages back when ICM took none for RECLAIM_IDLE_PS and still has too many. */
  private idleCheck(): void {
    this.reclaimTimer = false;
    if (!this.asking || this.reclaimAsked || this.requesting || this.waiters.length > 0 || this.free.length <= RECLAIM_ABOVE) return;
    const since = this.sim.now - this.lastTake;
    if (since < RECLAIM_IDLE_PS) {
      this.reclaimTimer = true;
      this.sim.after(RECLAIM_IDLE_PS - since, this.idle);
      return;
    }
    const back = this.free.length - PAGE_REQUEST_BATCH;
    if (this.raise?.(pageRequestData(-back)) === true) {
      this.reclaimAsked = true;
      this.sReturnRequests.inc();
    }
  }

  /**
   * A command needs `n` pages more than the pool has: one PAGE_REQUEST (unless one is
   * outstanding), resolved true when pages arrive (retry), false when the driver failed or no EQ
   * takes the request.
   */
  request(n: number): Promise<boolean> {
    const p = new Promise<boolean>((resolve) => this.waiters.push(resolve));
    if (!this.asking) this.settle(false);
    else if (!this.requesting) {
      const ask = Math.ceil(n / PAGE_REQUEST_BATCH) * PAGE_REQUEST_BATCH;
      if (this.raise?.(pageRequestData(ask)) === true) {
        this.requesting = true;
        this.sRequests.inc();
        this.sRequested.inc(ask);
      } else this.settle(false);
    }
    return p;
  }
}

/** A PAGE_REQUEST EQE's data (mlx5_eqe_page_req, device.h): func_id 0 (the PF itself) at byte 2, num_pages (signed) at byte 4. */
function pageRequestData(numPages: number): Uint8Array {
  const data = new Uint8Array(EQE_DATA_SIZE);
  const v = new DataView(data.buffer);
  v.setUint16(2, 0);
  v.setInt32(4, numPages);
  return data;
}
