/**
 * The driver's side of ICM (mlx5_core pagealloc.c): the 4 KiB pages the firmware keeps its
 * context memory in are the host's, given with MANAGE_PAGES.
 *
 * - At start-up (main.c mlx5_function_enable, mlx5_function_open): QUERY_PAGES boot, then the
 *   pages given, and QUERY_PAGES init before INIT_HCA (mlx5_satisfy_startup_pages).
 * - On a PAGE_REQUEST EQE (eq.c / pagealloc.c req_pages_handler, pages_work_handler): as many
 *   pages as num_pages asks, given in one MANAGE_PAGES (give_pages), in a process of its own as
 *   mlx5's page workqueue.
 * - When the host has no memory for them (give_pages: alloc_4k fails), the pages taken so far
 *   go back and the firmware is told with MANAGE_PAGES ALLOCATION_FAIL (page_notify_fail).
 *
 * - On a PAGE_REQUEST with a negative num_pages (pagealloc.c:651-659, at most 50,000): the
 *   firmware gives pages back; the driver asks for them with MANAGE_PAGES HCA_RETURN_PAGES
 *   (reclaim_pages, op_mod MLX5_PAGES_TAKE), whose output lists the pages returned, and frees
 *   each (free_4k: unpinned, unmapped); a failure of an event's reclaim is ignored
 *   (pagealloc.c:555-559).
 * - At close, after TEARDOWN_HCA (mlx5_reclaim_startup_pages, pagealloc.c:703-764): reclaims of
 *   optimal_reclaimed_pages() (768) pages at a time until the driver holds none.
 *
 * A page is pinned while the firmware holds it: the DMA-ownership checker counts it as the
 * device's until it comes back.
 */
import type { Hca } from '../../rtl/hca.ts';
import type { Sim } from '../../sim/index.ts';
import type { CmdName, CmdOf, CmdOutputs } from '../../rtl/firmware/cmd_types.ts';
import { ManagePagesOpMod, QueryPagesOpMod } from '../../rtl/formats/constants.ts';
import { HostError } from '../../rtl/memory/host_space.ts';
import { VerbsError } from '../verbs_error.ts';
import { DMA_PAGE, driverAlloc } from './dma_pool.ts';
import { CmdError } from '../../rtl/firmware/cmd_types.ts';
import { CMD_BLOCK_DATA, CMD_INLINE_BYTES } from '../../rtl/formats/cmd_layout.ts';
import { MANAGE_PAGES_OUT } from '../../rtl/formats/cmd_pages.ts';
import { PAS_ENTRY_BYTES } from '../../rtl/formats/cmd_hdr.ts';

/** The most pages one firmware request may ask back (pagealloc.c:613-617 MAX_RECLAIM_NPAGES). */
export const MAX_RECLAIM_NPAGES = 50_000;
/**
 * Pages one close-time reclaim asks for (pagealloc.c:686-700 optimal_reclaimed_pages): what the
 * entry's 16 output bytes and 12 mailbox blocks hold after manage_pages_out's header, 768.
 */
export const OPTIMAL_RECLAIMED_PAGES = (CMD_INLINE_BYTES + 12 * CMD_BLOCK_DATA - MANAGE_PAGES_OUT.bytes) / PAS_ENTRY_BYTES;

/** The command senders pagealloc uses: the ordinary lane, and the page entry for MANAGE_PAGES (cmd.c pages_queue). */
export interface PageCmds {
  exec<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]>;
  execPages<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]>;
}

export class PageAlloc {
  /** Pages given to the firmware, asked for by PAGE_REQUEST, and given back by it. */
  given = 0;
  requested = 0;
  returned = 0;
  /** Pages the firmware asked to give back (negative PAGE_REQUESTs). */
  reclaimAsked = 0;
  /** Pages the firmware returned that the driver never gave (someone else's MANAGE_PAGES): skipped. */
  unknownReturned = 0;
  /**
   * Each page the firmware holds: its DMA page number (address / DMA_PAGE: a small integer the
   * Map keeps unboxed, where addresses past 2^31 were boxed) to the virtual address the driver
   * frees it by (pagealloc.c's fw_page tree).
   */
  private readonly held = new Map<number, number>();
  /** Pages the driver could not allocate (pagealloc.c fw_pages_alloc_failed). */
  allocFailed = 0;

  constructor(
    private readonly hca: Hca,
    private readonly sim: Sim,
    private readonly cmds: PageCmds,
  ) {}

  /** mlx5_satisfy_startup_pages: QUERY_PAGES boot or init, then give what it says. */
  async satisfyStartupPages(boot: boolean): Promise<void> {
    const { numPages } = await this.cmds.exec({ op: 'QUERY_PAGES', opMod: boot ? QueryPagesOpMod.BOOT_PAGES : QueryPagesOpMod.INIT_PAGES });
    if (numPages > 0 && !(await this.givePages(numPages, false))) {
      throw new VerbsError('ENOMEM', `start-up: no host memory for the firmware's ${numPages} ${boot ? 'boot' : 'init'} pages`);
    }
  }

  /** A PAGE_REQUEST EQE's data (mlx5_eqe_page_req): func_id at byte 2, num_pages (signed) at byte 4. */
  onPageRequest(data: Uint8Array): void {
    const v = new DataView(data.buffer, data.byteOffset, data.byteLength);
    const npages = v.getInt32(4);
    if (npages === 0) return;
    if (npages < 0) {
      const n = Math.min(-npages, MAX_RECLAIM_NPAGES);
      this.reclaimAsked += n;
      void this.sim.spawn(async () => {
        await this.reclaimPages(n, true);
      });
      return;
    }
    this.requested += npages;
    void this.sim.spawn(async () => {
      await this.givePages(npages, true);
    });
  }

  /** Pages the firmware holds now (given and not returned). */
  get holding(): number {
    return this.held.size;
  }

  /**
   * reclaim_pages: MANAGE_PAGES HCA_RETURN_PAGES for `n` pages on the page entry; each page the
   * output lists is freed to the host. The pages returned (0 when an event's reclaim failed).
   */
  async reclaimPages(n: number, event: boolean): Promise<number> {
    let pas: readonly number[];
    try {
      ({ pas } = await this.cmds.execPages({ op: 'MANAGE_PAGES', opMod: ManagePagesOpMod.HCA_RETURN_PAGES, numEntries: n }));
    } catch (e) {
      if (event && e instanceof CmdError) return 0; // pagealloc.c:555-559: a failed event reclaim is ignored
      throw e;
    }
    // pagealloc.c:566-571: more pages than asked is corruption
    if (pas.length > n) throw new Error(`pagealloc: the firmware returned ${pas.length} pages, the driver asked ${n}`);
    const host = this.hca.host;
    for (const pa of pas) {
      const va = this.held.get(pa / DMA_PAGE);
      if (va === undefined) {
        this.unknownReturned++; // pagealloc.c:277-280 free_4k: "page not found", skipped
        continue;
      }
      this.held.delete(pa / DMA_PAGE);
      // free_4k: the device's no more, then the page goes back to the host
      host.unpin(Float64Array.of(pa));
      await host.munmap(va, DMA_PAGE);
      this.returned++;
    }
    return pas.length;
  }

  /**
   * mlx5_reclaim_startup_pages (after TEARDOWN_HCA): reclaims until the driver holds no page; a
   * reclaim that brings none back ends it (mlx5 retries until its timeout, then gives up with a
   * warning: pagealloc.c:703-733). The pages still held.
   */
  async reclaimStartupPages(): Promise<number> {
    while (this.held.size > 0) {
      if ((await this.reclaimPages(OPTIMAL_RECLAIMED_PAGES, false)) === 0) break;
    }
    return this.held.size;
  }

  /**
   * give_pages: `n` pages of host memory, faulted in and pinned, their DMA addresses in one
   * MANAGE_PAGES. False when the host had no memory (after ALLOCATION_FAIL when `event`).
   */
  private async givePages(n: number, event: boolean): Promise<boolean> {
    const host = this.hca.host;
    let va = 0;
    try {
      va = driverAlloc(host, 'firmware pages', n * DMA_PAGE, { align: DMA_PAGE }).addr;
      host.faultIn(va, n * DMA_PAGE);
    } catch (e) {
      if (!(e instanceof VerbsError || (e instanceof HostError && e.errno === 'ENOMEM'))) throw e;
      if (va !== 0) await host.munmap(va, n * DMA_PAGE); // the pages taken so far go back
      this.allocFailed += n;
      if (event) await this.cmds.execPages({ op: 'MANAGE_PAGES', opMod: ManagePagesOpMod.ALLOCATION_FAIL });
      return false;
    }
    host.pin(va, n * DMA_PAGE); // the device's until it gives the page back (the DMA checker's "ICM page")
    const pas: number[] = [];
    for (let i = 0; i < n; i++) pas.push(host.dmaAddress(va + i * DMA_PAGE));
    await this.cmds.execPages({ op: 'MANAGE_PAGES', opMod: ManagePagesOpMod.ALLOCATION_SUCCESS, pas });
    for (let i = 0; i < n; i++) this.held.set(pas[i] / DMA_PAGE, va + i * DMA_PAGE);
    this.given += n;
    return true;
  }
}
