/** A memory region (ibv_mr): a user MR (regMr) or a fast-registration MR (allocMr). */
import type { Pd } from './pd.ts';
import { VerbsError } from './verbs_error.ts';
import { readMkey } from '../rtl/firmware.ts';

const PAGE = 4096;
/**
 * KLMs reserved per SG_GAPS element: an element is a host virtual range, and host pages are
 * scattered, so it becomes one KLM per physically contiguous run (a DMA-mapped element on Linux
 * is contiguous already). 16 covers an element of 60 KiB over scattered pages.
 */
export const SG_GAPS_KLMS_PER_ELEMENT = 16;

/** The physically contiguous runs of `[addr, addr + len)` in host memory, as DMA segments. */
function dmaRuns(host: { dmaAddress(a: number): number }, addr: number, len: number): { dma: number; length: number }[] {
  const out: { dma: number; length: number }[] = [];
  let a = addr;
  while (a < addr + len) {
    const n = Math.min(addr + len - a, PAGE - (a % PAGE));
    const dma = host.dmaAddress(a);
    const last = out[out.length - 1];
    if (last && last.dma + last.length === dma) last.length += n;
    else out.push({ dma, length: n });
    a += n;
  }
  return out;
}

export type MrType = 'USER' | 'MEM_REG' | 'SG_GAPS';

export class Mr {
  lkey: number;
  rkey: number;
  iova: number;
  length: number;
  readonly access: number;
  /** The key the device holds for a pooled user MR (updateKey changes only the handle's). */
  deviceKey: number;
  readonly maxNumSg: number;
  /** Fast registration: the mapped list (mapSg): pages (MEM_REG, DMA addresses) or elements (SG_GAPS). */
  pages: number[] = [];
  elements: { dma: number; length: number }[] = [];
  pageSize = PAGE;
  /** Elements mapped by the last mapSg (SG_GAPS counts these against maxNumSg, not KLMs). */
  mappedCount = 0;
  destroyed = false;
  /**
   * A REG_MR posted for this MR granted REMOTE_ATOMIC (sticky): every later REG_MR puts A in
   * the mkey mask so a registration without it clears the right (RegMrWqeParams.clearAtomic).
   */
  atomicGranted = false;
  /** A user MR from the driver's mkey pool: its bucket (dereg revokes it by UMR), else 0. */
  readonly poolBucket: number;

  constructor(
    readonly pd: Pd,
    key: number,
    readonly type: MrType,
    o: { iova: number; length: number; access: number; maxNumSg: number; poolBucket?: number },
  ) {
    this.poolBucket = o.poolBucket ?? 0;
    this.lkey = key >>> 0;
    this.rkey = key >>> 0;
    this.iova = o.iova;
    this.length = o.length;
    this.access = o.access;
    this.deviceKey = key >>> 0;
    this.maxNumSg = o.maxNumSg;
  }

  /** The mkey index (the 24 high bits of the key). */
  get index(): number {
    return this.lkey >>> 8;
  }

  checkAlive(what: string): void {
    if (this.destroyed) throw new VerbsError('EINVAL', `${what}: the MR was deregistered`);
  }

  /**
   * ib_map_mr_sg: maps host virtual ranges onto the MR's page list (MEM_REG: every element but
   * the first starts page-aligned, every element but the last ends page-aligned; the first that
   * breaks this ends the mapping) or element list (SG_GAPS); at most maxNumSg entries. Sets
   * iova (the first element's address) and length. Returns the number of elements mapped.
   */
  mapSg(sg: readonly { addr: number; length: number }[], pageSize = PAGE): number {
    this.checkAlive('mapSg');
    if (this.type === 'USER') throw new VerbsError('EINVAL', 'mapSg: only fast-registration MRs (allocMr) have a page list');
    if (!(Number.isInteger(pageSize) && pageSize >= PAGE && (pageSize & (pageSize - 1)) === 0)) {
      throw new VerbsError('EINVAL', `mapSg: pageSize must be a power of two >= 4096, got ${pageSize}`);
    }
    const host = this.pd.ctx.hca.host;
    // built aside and committed only when every element checks out (EFAULT leaves the MR as it was)
    const pages: number[] = [];
    const elements: { dma: number; length: number }[] = [];
    let mapped = 0;
    let length = 0;
    for (let i = 0; i < sg.length; i++) {
      const e = sg[i];
      if (this.type === 'MEM_REG') {
        if (i > 0 && e.addr % pageSize !== 0) break;
        if (i > 0 && (sg[i - 1].addr + sg[i - 1].length) % pageSize !== 0) break;
        const first = e.addr - (e.addr % pageSize);
        const n = Math.ceil((e.addr + e.length - first) / pageSize);
        if (pages.length + n > this.maxNumSg) break;
        if (!host.isMapped(e.addr, e.length)) throw new VerbsError('EFAULT', `mapSg: element ${i} [0x${e.addr.toString(16)}, +${e.length}) is not mapped`);
        for (let p = 0; p < n; p++) pages.push(host.dmaAddress(Math.max(e.addr, first + p * pageSize)) - (p === 0 ? e.addr % pageSize : 0));
      } else {
        if (mapped >= this.maxNumSg) break;
        if (!host.isMapped(e.addr, e.length)) throw new VerbsError('EFAULT', `mapSg: element ${i} [0x${e.addr.toString(16)}, +${e.length}) is not mapped`);
        // host pages are scattered: one KLM per physically contiguous run of the element
        const runs = dmaRuns(host, e.addr, e.length);
        if (elements.length + runs.length > this.klmCapacity) break;
        elements.push(...runs);
      }
      length += e.length;
      mapped++;
    }
    this.pages = pages;
    this.elements = elements;
    this.mappedCount = mapped;
    this.pageSize = pageSize;
    this.iova = mapped > 0 ? sg[0].addr : 0;
    this.length = length;
    return mapped;
  }

  /** KLM entries the MR's mkey holds (SG_GAPS: room for elements split at page boundaries). */
  get klmCapacity(): number {
    return Math.min(Math.ceil(this.maxNumSg / 4) * 4 * SG_GAPS_KLMS_PER_ELEMENT, 2 ** 16);
  }

  /** ib_update_fast_reg_key: the next registration uses tag `key8`. */
  updateKey(key8: number): void {
    this.checkAlive('updateKey');
    if (!(Number.isInteger(key8) && key8 >= 0 && key8 <= 0xff)) throw new VerbsError('EINVAL', `updateKey: key must be 8 bits, got ${key8}`);
    this.lkey = ((this.lkey & 0xffffff00) | key8) >>> 0;
    this.rkey = ((this.rkey & 0xffffff00) | key8) >>> 0;
  }

  /** ibv_dereg_mr: EBUSY while windows are bound to it (DESTROY_MKEY otherwise). */
  async dereg(): Promise<void> {
    this.checkAlive('dereg');
    const ctx = this.pd.ctx;
    if (readMkey(ctx.hca, this.index).mwCount > 0) throw new VerbsError('EBUSY', 'dereg: memory windows are still bound to the MR');
    this.destroyed = true;
    if (this.poolBucket > 0) await ctx.pool.revoke(this.deviceKey, this.poolBucket);
    else await ctx.cmd(ctx.hca.cmdif.exec({ op: 'DESTROY_MKEY', index: this.index }), 'dereg');
  }
}
