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
 * The pages are pinned for the device's life: the DMA-ownership checker counts them as the
 * device's. The firmware never asks for pages back here (fw_pages.ts), so none is returned.
 */
import type { Hca } from '../../rtl/hca.ts';
import type { Sim } from '../../sim/index.ts';
import type { CmdName, CmdOf, CmdOutputs } from '../../rtl/firmware/cmd_types.ts';
import { ManagePagesOpMod, QueryPagesOpMod } from '../../rtl/formats/constants.ts';
import { HostError } from '../../rtl/memory/host_space.ts';
import { VerbsError } from '../verbs_error.ts';
import { DMA_PAGE, driverAlloc } from './dma_pool.ts';

/** The command senders pagealloc uses: the ordinary lane, and the page entry for MANAGE_PAGES (cmd.c pages_queue). */
export interface PageCmds {
  exec<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]>;
  execPages<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]>;
}

export class PageAlloc {
  /** Pages given to the firmware, asked for by PAGE_REQUEST, and given back (none: no reclaim). */
  given = 0;
  requested = 0;
  returned = 0;
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
    if (npages <= 0) return; // a reclaim request: not modelled (the firmware never sends one)
    this.requested += npages;
    void this.sim.spawn(async () => {
      await this.givePages(npages, true);
    });
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
    host.pin(va, n * DMA_PAGE); // the device's for good (the DMA checker's "ICM page")
    const pas: number[] = [];
    for (let i = 0; i < n; i++) pas.push(host.dmaAddress(va + i * DMA_PAGE));
    await this.cmds.execPages({ op: 'MANAGE_PAGES', opMod: ManagePagesOpMod.ALLOCATION_SUCCESS, pas });
    this.given += n;
    return true;
  }
}
