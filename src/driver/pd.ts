/** A protection domain (ibv_pd): registers memory, allocates windows and creates QPs. */
import type { Context, UObject } from './context.ts';
import { VerbsError, checkObject, checkU32, checkU53, shown } from './verbs_error.ts';
import { HostError } from '../rtl/memory/host_space.ts';
import { Cq } from './cq.ts';
import { Mr, SG_GAPS_KLMS_PER_ELEMENT } from './mr.ts';
import { Mw } from './mw.ts';
import { Qp, type QpInitAttr } from './qp.ts';
import { IbAccess } from './types.ts';
import { MkcAccessMode } from '../rtl/formats/constants.ts';
import { MKEY_KIND_MW1, MKEY_KIND_MW2 } from '../rtl/memory/icm_mkey.ts';
import { NULL_MKEY } from '../rtl/formats/constants.ts';
import { IMPLICIT_ENTRIES, ImplicitOdp, OdpMr, SIZE_MAX } from './odp.ts';

const PAGE = 4096;
/** MEM_REG MTTs per descriptor: 8192 / 4096, the largest pageSize whose 4 KiB fallback always fits. */
const MTT_FALLBACK_FACTOR = 2;
/** The most MTTs one UMR WQE carries: xlt_octowords (u16) in 64-byte steps, 2 MTTs per octoword. */
const MAX_UMR_MTTS = 2 * (0xffff - (0xffff % 4));

export class Pd {
  private dmaLkey = -1;
  /** Set by dealloc: every later call is EINVAL. */
  destroyed = false;
  /** MRs, windows and QPs made in this PD (the kernel's pd->usecnt; pruned as they go). */
  private readonly users = new Set<{ readonly destroyed: boolean }>();
  /**
   * The PD's MRs, apart from `users` (its windows and QPs): a list each MR knows its place in
   * (`Mr.pdSlot`), removed by swapping the last in. A Set took some 33 bytes per MR of a million.
   */
  private readonly mrs: Mr[] = [];

  /** @internal The PD's live MRs (the device's removal destroys them with the other objects). */
  get liveMrs(): readonly Mr[] {
    return this.mrs;
  }

  constructor(
    readonly ctx: Context,
    readonly pdn: number,
  ) {
    ctx.uobjects.set(this, ctx.nextUseq++);
  }

  /**
   * ibv_reg_mr: pins the pages (their cost in simulated time) and creates an MTT mkey over
   * them, VALID at once, lkey == rkey. Checks (spec/semantics.md "Verbs calls"): length 0,
   * remote write/atomic without local write, a range not mapped in the host, ODP unsupported.
   */
  async regMr(addr: number, length: number, access: number): Promise<Mr> {
    this.checkAlive('regMr');
    this.ctx.tb.checkInRun('regMr');
    checkAccess(access, 'regMr');
    if (!(Number.isSafeInteger(length) && length > 0)) throw new VerbsError('EINVAL', `regMr: length must be > 0, got ${shown(length)}`);
    if (!Number.isSafeInteger(addr) || addr < 0) throw new VerbsError('EINVAL', `regMr: bad address ${addr}`);
    // ZERO_BASED is hca_va 0 (ibv_reg_mr(3)); the kernel refuses an iova whose offset in its page
    // differs from the address's (Linux 6.12 drivers/infiniband/core/uverbs_cmd.c:710
    // `(cmd.start & ~PAGE_MASK) != (cmd.hca_va & ~PAGE_MASK)`: -EINVAL): an mlx5 mkey's
    // start_addr is both its iova and its first byte's page offset (mlx5_ib.h:1720-1723)
    if ((access & IbAccess.ZERO_BASED) !== 0 && addr % PAGE !== 0) {
      throw new VerbsError(
        'EINVAL',
        `regMr: ZERO_BASED at 0x${addr.toString(16)}: the iova (0) and the address must have the same offset in their page (uverbs_cmd.c:710)`,
      );
    }
    const host = this.ctx.hca.host;
    const odp = (access & IbAccess.ON_DEMAND) !== 0;
    if (odp && !(await this.ctx.queryDevice()).deviceCapFlags.has('ON_DEMAND_PAGING')) {
      throw new VerbsError('EOPNOTSUPP', 'regMr: ON_DEMAND on a device without ON_DEMAND_PAGING');
    }
    if (addr === 0 && length === SIZE_MAX) return this.regImplicit(access, odp);
    if (!host.inVma(addr, length)) throw new VerbsError('EFAULT', `regMr: [0x${addr.toString(16)}, +${length}) is not mapped in the host`);
    // get_user_pages faults in what madvise dropped or was never touched (an ODP MR pins and
    // touches nothing); a host out of frames is ENOMEM, as pinning would report
    let pins: Float64Array | null = null;
    if (!odp) {
      try {
        host.faultIn(addr, length);
      } catch (e) {
        if (e instanceof HostError && e.errno === 'ENOMEM') throw new VerbsError('ENOMEM', `regMr: pinning [0x${addr.toString(16)}, +${length}): ${e.message}`);
        throw e;
      }
      // pin_user_pages (ib_umem_get): the frames stay the registration's until dereg, whatever
      // the process does with its mapping
      pins = host.pin(addr, length);
    }
    try {
      const mr = await this.regPinned(addr, length, access, odp);
      mr.pins = pins;
      return mr;
    } catch (e) {
      if (pins !== null) host.unpin(pins);
      throw e;
    }
  }

  /** regMr after pinning: the mkey over the pinned (or, ODP, not present) pages. */
  private async regPinned(addr: number, length: number, access: number, odp: boolean): Promise<Mr> {
    const host = this.ctx.hca.host;
    const first = addr - (addr % PAGE);
    const pages = Math.ceil((addr + length - first) / PAGE);
    // get_user_pages: pinning costs time per page (spec/timing.md "pinning host pages")
    if (!odp) await this.ctx.tb.delay(pages * this.ctx.hca.cfg.pinPagePs);
    // zero-based: the iova, and so the mkey's start_addr, is 0 (regMr checked that the address
    // is page aligned, so the first byte is byte 0 of the first MTT page)
    const zeroBased = (access & IbAccess.ZERO_BASED) !== 0;
    const start = zeroBased ? 0 : addr;
    // the MTT page size as mlx5 picks it (mlx5_umem_find_best_pgsz, over the iova): the largest
    // the mapping allows, so an MR over huge pages has one MTT per 2 MiB page; an ODP MR maps
    // 4 KiB pages
    const logPageSize = odp ? 12 : bestPageShift(host, addr, length, start);
    const P = 2 ** logPageSize;
    // the first byte lies start % P into the first MTT page (start_addr is also the page offset)
    const off = start % P;
    const entries = Math.ceil((off + length) / P);
    const mtt: number[] = [];
    if (odp) for (let i = 0; i < entries; i++) mtt.push(0);
    else {
      // entry 0 from the first byte's address (its page start may lie before the range)
      mtt.push(host.dmaAddress(addr) - off + 3);
      for (let i = 1; i < entries; i++) mtt.push(host.dmaAddress(addr - off + i * P) + 3);
    }
    // create_real_mr (mr.c:1426-1469) with UMR-loadable translations of any size (the device
    // has umr_extended_translation_offset, so mlx5r_umr_can_load_pas is true, umr.h:22-44;
    // over MAX_UMR_CHUNK / 8 entries the enabling UMR goes in chunks, umr.ts enableKey, an ODP
    // MR's not-present entries too), and
    // create_user_odp_mr for an ODP MR (mr.c:1471-1528): alloc_cacheable_mr (mr.c:1121-1168)
    // takes an mkey of the MR cache (a hit, or a miss that makes a cache mkey); where no bucket
    // fits, reg_create makes a disabled mkey of its own (CREATE_MKEY, not populated:
    // mr.c:1148), cacheable too. Either way a UMR enables it (mlx5r_umr_update_mr_pas with
    // MLX5_IB_UPD_XLT_ENABLE; for ODP mlx5_ib_init_odp_mr's snapshot, odp.c:904-912), and
    // deregistration revokes it and stores it in the cache (mkey_pool.ts)
    const cached = await this.ctx.pool.alloc(entries);
    let key: number;
    let bucket: number;
    if (cached !== null) {
      key = cached.key;
      bucket = cached.bucket;
    } else {
      const r = await this.ctx.cmd(
        this.ctx.cmdq.exec({
          op: 'CREATE_MKEY', tag: this.ctx.nextTag(), free: true, accessMode: MkcAccessMode.MTT, access: access & 15, umrEn: true,
          remoteInval: false, pd: this.pdn, start, length, logPageSize, xltCapacity: entries, ...(odp ? { pgAccess: true } : {}),
        }),
        'regMr',
      );
      key = r.mkey;
      bucket = entries;
    }
    const o = { iova: zeroBased ? 0 : addr, length, access, maxNumSg: 0, poolBucket: bucket };
    if (!odp) {
      key = await this.ctx.umr.enableKey(key, this, access, start, length, mtt, logPageSize);
      return this.track(new Mr(this, key, 'USER', o));
    }
    // nothing pinned: the fault handler maps pages on first touch (odp.ts); the MR is the
    // handler's before its enabling UMR (mlx5r_store_odp_mkey, then mlx5_ib_init_odp_mr)
    const mr = this.track(new Mr(this, key, 'USER', o));
    const state = new OdpMr(mr, addr, entries);
    mr.odp = state;
    this.ctx.odp.register(state);
    try {
      await this.ctx.odp.enable(state, this, access, start, length);
    } catch (e) {
      await mr.dereg().catch(() => undefined); // create_user_odp_mr's err_dereg_mr (mr.c:1525-1527)
      throw e;
    }
    return mr;
  }

  /**
   * ibv_advise_mr: maps pages of ODP MRs of this PD ahead of use (PREFETCH readable,
   * PREFETCH_WRITE writable, PREFETCH_NO_FAULT only pages already present in the process), as a
   * fault would but with no EQE and no QP stalled. With `flush` (IBV_ADVISE_MR_FLAG_FLUSH) it
   * resolves once they are mapped; without, it returns at once and the work runs behind. Errnos
   * as mlx5 (mr.c:1383 mlx5_ib_advise_mr, odp.c:1926 get_prefetchable_mr): EOPNOTSUPP an unknown
   * advice; ENOENT a key that names no ODP MR; EINVAL one that names a window; EPERM an MR of
   * another PD, or PREFETCH_WRITE of an MR that is not writable; with `flush`, EFAULT a range
   * that cannot be mapped (outside its MR, or over pages the process unmapped: odp.c:2001-2005).
   */
  async adviseMr(
    advice: 'PREFETCH' | 'PREFETCH_WRITE' | 'PREFETCH_NO_FAULT',
    sgList: readonly { addr: number; length: number; lkey: number }[],
    opts: { flush?: boolean } = {},
  ): Promise<void> {
    this.checkAlive('adviseMr');
    this.ctx.tb.checkInRun('adviseMr');
    if (advice !== 'PREFETCH' && advice !== 'PREFETCH_WRITE' && advice !== 'PREFETCH_NO_FAULT') {
      throw new VerbsError('EOPNOTSUPP', `adviseMr: advice must be PREFETCH, PREFETCH_WRITE or PREFETCH_NO_FAULT, got ${shown(advice)}`);
    }
    if (!Array.isArray(sgList) || sgList.length === 0) throw new VerbsError('EINVAL', 'adviseMr: sgList must be a non-empty array');
    if (opts === null || typeof opts !== 'object') throw new VerbsError('EINVAL', 'adviseMr: options must be an object');
    const list = sgList.map((e, i) => {
      checkObject(`adviseMr: sgList[${i}]`, e);
      const addr = checkU53(`adviseMr: sgList[${i}].addr`, e.addr);
      const length = checkU53(`adviseMr: sgList[${i}].length`, e.length);
      const lkey = checkU32(`adviseMr: sgList[${i}].lkey`, e.lkey);
      const bad = this.ctx.odp.prefetchable(this, lkey, advice === 'PREFETCH_WRITE');
      if (bad !== null) throw new VerbsError(bad.errno, `adviseMr: sgList[${i}].lkey 0x${lkey.toString(16)} ${bad.why}`);
      return { addr, length, lkey };
    });
    const work = this.ctx.tb.spawn(() => this.ctx.odp.prefetch(advice, list));
    if (opts.flush === true && (await work) === 'EFAULT') {
      throw new VerbsError('EFAULT', 'adviseMr: a range could not be mapped (outside its MR, or over pages the process unmapped)');
    }
  }

  /**
   * Implicit ODP (ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND | ...)): one key for every address of
   * the process. The mkey is a KSM parent over the 47-bit user address space, 1 GiB an entry
   * (log_page_size 30), every entry the null mkey (QUERY_SPECIAL_CONTEXTS) until a fault or a
   * prefetch in its GiB makes the child (driver/odp.ts ImplicitOdp). Needs odpCaps IMPLICIT.
   */
  private async regImplicit(access: number, odp: boolean): Promise<Mr> {
    const attr = await this.ctx.queryDevice();
    if (!odp || !attr.odpCaps.generalCaps.has('IMPLICIT')) {
      throw new VerbsError('EOPNOTSUPP', `regMr(0, SIZE_MAX): implicit ODP needs ON_DEMAND and odpCaps.generalCaps IMPLICIT`);
    }
    if ((access & IbAccess.ZERO_BASED) !== 0) throw new VerbsError('EINVAL', 'regMr(0, SIZE_MAX): an implicit ODP MR cannot be zero-based');
    // the null mkey every entry of a new KSM table names (this firmware's zero-filled table: key 0)
    const { nullMkey } = await this.ctx.cmd(this.ctx.cmdq.exec({ op: 'QUERY_SPECIAL_CONTEXTS' }), 'regMr');
    if (nullMkey !== NULL_MKEY) throw new Error(`internal: the null mkey is 0x${nullMkey.toString(16)}, not the zero a new KSM table holds`);
    await this.ctx.umr.ready();
    const r = await this.ctx.cmd(
      this.ctx.cmdq.exec({
        op: 'CREATE_MKEY', tag: this.ctx.nextTag(), free: false, accessMode: MkcAccessMode.KSM, access: access & 15, umrEn: true,
        remoteInval: false, pd: this.pdn, start: 0, length: 0, len64: true, logPageSize: 30, pgAccess: true, xltCapacity: IMPLICIT_ENTRIES,
      }),
      'regMr',
    );
    const mr = this.track(new Mr(this, r.mkey, 'USER', { iova: 0, length: SIZE_MAX, access, maxNumSg: 0 }));
    const imp = new ImplicitOdp(mr);
    mr.odp = imp;
    this.ctx.odp.registerImplicit(imp);
    return mr;
  }

  /** ibv_alloc_mr: a fast-registration MR, FREE until a REG_MR work request registers it. */
  async allocMr(type: 'MEM_REG' | 'SG_GAPS', maxNumSg: number): Promise<Mr> {
    this.checkAlive('allocMr');
    this.ctx.tb.checkInRun('allocMr');
    const attr = await this.ctx.queryDevice();
    if (type !== 'MEM_REG' && type !== 'SG_GAPS') throw new VerbsError('EINVAL', `allocMr: type must be MEM_REG or SG_GAPS, got ${shown(type)}`);
    if (!(Number.isInteger(maxNumSg) && maxNumSg >= 1 && maxNumSg <= attr.maxFastRegPageListLen)) {
      throw new VerbsError('EINVAL', `allocMr: maxNumSg must be in 1..${attr.maxFastRegPageListLen} (max_fast_reg_page_list_len), got ${shown(maxNumSg)}`);
    }
    if (type === 'SG_GAPS') await this.localDmaLkey();
    // mlx5: ndescs = ALIGN(max_num_sg, 4) (spec/mlx5.md "FRWR MR allocation"). MEM_REG reserves
    // twice that many MTTs (a documented choice): room for the 4 KiB fallback of a mapSg with
    // pageSize 8192 over scattered frames (Mr.mapSg)
    const ndescs = Math.ceil(maxNumSg / 4) * 4;
    // (capped so one UMR still carries the whole list: xlt_octowords is a u16 counting 16-byte
    // units, in 64-byte steps: at most 65532 octowords, 131064 MTTs)
    const mttCapacity = Math.min(MTT_FALLBACK_FACTOR * ndescs, MAX_UMR_MTTS);
    const tag = this.ctx.nextTag();
    const r = await this.ctx.cmd(
      this.ctx.cmdq.exec({
        op: 'CREATE_MKEY', tag, free: true, accessMode: type === 'MEM_REG' ? MkcAccessMode.MTT : MkcAccessMode.KLMS,
        access: 0, umrEn: true, remoteInval: true, pd: this.pdn, start: 0, length: 0, logPageSize: 12,
        xltCapacity: type === 'MEM_REG' ? mttCapacity : Math.min(ndescs * SG_GAPS_KLMS_PER_ELEMENT, attr.maxFastRegPageListLen),
      }),
      'allocMr',
    );
    return this.track(new Mr(this, r.mkey, type, { iova: 0, length: 0, access: 0, maxNumSg, ...(type === 'MEM_REG' ? { mttCapacity } : {}) }));
  }

  /** ibv_alloc_mw: a window of type 1 or 2, created FREE (UMR-enabled, KLMS with one entry). */
  async allocMw(type: 1 | 2): Promise<Mw> {
    this.checkAlive('allocMw');
    this.ctx.tb.checkInRun('allocMw');
    if (type !== 1 && type !== 2) throw new VerbsError('EINVAL', `allocMw: type must be 1 or 2, got ${shown(type)}`);
    const tag = this.ctx.nextTag();
    const r = await this.ctx.cmd(
      this.ctx.cmdq.exec({
        op: 'CREATE_MKEY', tag, free: true, accessMode: MkcAccessMode.KLMS, access: 0, umrEn: true, remoteInval: type === 2,
        pd: this.pdn, start: 0, length: 0, logPageSize: 12, xltCapacity: 1, kind: type === 1 ? MKEY_KIND_MW1 : MKEY_KIND_MW2,
      }),
      'allocMw',
    );
    return this.track(new Mw(this, r.mkey, type));
  }

  /** ibv_create_qp (RC): send and receive queues in host memory. */
  async createQp(attr: QpInitAttr, /** @internal the driver's UMR QP (mkey_pool.ts) */ umr = false): Promise<Qp> {
    this.checkAlive('createQp');
    this.ctx.tb.checkInRun('createQp');
    if (attr === null || typeof attr !== 'object') throw new VerbsError('EINVAL', `createQp: the attributes must be an object, got ${attr === null ? 'null' : typeof attr}`);
    if (!(attr.sendCq instanceof Cq) || !(attr.recvCq instanceof Cq)) throw new VerbsError('EINVAL', 'createQp: sendCq and recvCq must be CQs (ctx.createCq)');
    attr.sendCq.checkAlive('createQp (sendCq)');
    attr.recvCq.checkAlive('createQp (recvCq)');
    // a CQ of another adapter (or testbed): its number means another CQ here, completions would vanish
    for (const cq of [attr.sendCq, attr.recvCq]) {
      if (cq.ctx.tb !== this.ctx.tb) throw new VerbsError('EINVAL', 'createQp: the send or receive CQ belongs to another Testbed');
      if (cq.ctx !== this.ctx) throw new VerbsError('EINVAL', 'createQp: the send or receive CQ belongs to another device context (adapter)');
    }
    return this.track(await Qp.create(this, attr, umr));
  }

  /** Any call on a destroyed object: EINVAL (spec/semantics.md "Verbs calls"). */
  checkAlive(what: string): void {
    if (this.destroyed) throw new VerbsError('EINVAL', `${what}: the PD was deallocated`);
  }

  private track<T extends { readonly destroyed: boolean }>(o: T): T {
    if (o instanceof Mr) {
      if (o.pdSlot < 0) {
        o.pdSlot = this.mrs.length;
        this.mrs.push(o);
        // its place in the ufile's list (an MR is not in ctx.uobjects: a Map entry per MR is
        // heap a million MRs cannot spare)
        o.useq = this.ctx.nextUseq++;
      }
    } else {
      this.users.add(o);
      this.ctx.uobjects.set(o as T & UObject, this.ctx.nextUseq++);
    }
    return o;
  }

  /** @internal An MR, window or QP of this PD is gone: the PD no longer holds it (usecnt--). */
  untrack(o: { readonly destroyed: boolean }): void {
    if (o instanceof Mr) this.dropMr(o);
    else {
      this.users.delete(o);
      this.ctx.uobjects.delete(o as UObject);
    }
  }

  /** @internal MRs, windows and QPs the PD holds now (its usecnt; destroyed ones left at once). */
  get usersHeld(): number {
    return this.users.size + this.mrs.length;
  }

  private dropMr(mr: Mr): void {
    const i = mr.pdSlot;
    if (i < 0 || this.mrs[i] !== mr) return;
    const last = this.mrs.pop() as Mr;
    if (last !== mr) {
      this.mrs[i] = last;
      last.pdSlot = i;
    }
    mr.pdSlot = -1;
  }

  /**
   * ibv_dealloc_pd: EBUSY while a live MR, memory window or QP belongs to the PD (the kernel's
   * usecnt rule: uverbs_free_pd -> ib_destroy_usecnt, include/rdma/ib_verbs.h, returns -EBUSY
   * while pd->usecnt, raised by every MR, MW and QP of the PD, is non-zero). Then the PD's local
   * DMA lkey, if made, is destroyed (DESTROY_MKEY), and DEALLOC_PD (0x801).
   */
  async dealloc(): Promise<void> {
    this.checkAlive('dealloc');
    this.ctx.tb.checkInRun('dealloc');
    for (const u of this.users) if (u.destroyed) this.users.delete(u);
    for (let i = this.mrs.length - 1; i >= 0; i--) if (i < this.mrs.length && this.mrs[i].destroyed) this.dropMr(this.mrs[i]);
    if (this.users.size > 0 || this.mrs.length > 0) {
      const live = [...this.users];
      const mws = live.filter((u) => u instanceof Mw).length;
      throw new VerbsError('EBUSY', `dealloc: the PD still has ${this.mrs.length} MR(s), ${mws} memory window(s) and ${live.length - mws} QP(s)`);
    }
    await this.removeHw();
  }

  /**
   * @internal DEALLOC_PD (and its DMA lkey first); also the device's removal
   * (Context.disassociate). False (nothing done) while an MR, window or QP of it lives
   * (uverbs_free_pd's usecnt, uverbs_std_types.c:121-131).
   */
  async removeHw(): Promise<boolean> {
    if (this.destroyed) return true;
    for (const u of this.users) if (u.destroyed) this.users.delete(u);
    for (let i = this.mrs.length - 1; i >= 0; i--) if (i < this.mrs.length && this.mrs[i].destroyed) this.dropMr(this.mrs[i]);
    if (this.users.size > 0 || this.mrs.length > 0) return false;
    this.destroyed = true;
    this.ctx.uobjects.delete(this);
    const ctx = this.ctx;
    if (this.dmaLkey >= 0) {
      await ctx.cmd(ctx.cmdq.exec({ op: 'DESTROY_MKEY', index: this.dmaLkey >>> 8 }), 'dealloc');
      this.dmaLkey = -1;
    }
    await ctx.cmd(ctx.cmdq.exec({ op: 'DEALLOC_PD', pd: this.pdn }), 'dealloc');
    return true;
  }

  /** The PD's local DMA lkey: a PA-mode mkey over all memory (the key of SG_GAPS KLMs). */
  async localDmaLkey(): Promise<number> {
    this.checkAlive('localDmaLkey');
    this.ctx.tb.checkInRun('localDmaLkey');
    if (this.dmaLkey < 0) {
      const r = await this.ctx.cmd(
        this.ctx.cmdq.exec({
          op: 'CREATE_MKEY', tag: 0, free: false, accessMode: MkcAccessMode.PA, access: IbAccess.LOCAL_WRITE, umrEn: false,
          remoteInval: false, pd: this.pdn, start: 0, length: 0, len64: true, logPageSize: 12,
        }),
        'localDmaLkey',
      );
      this.dmaLkey = r.mkey;
    }
    return this.dmaLkey;
  }

  /** The local DMA lkey if created (synchronous use at post time). */
  get dmaLkeyNow(): number {
    return this.dmaLkey;
  }
}

/** ib_access_flags bits (an integer in 0..127), else EINVAL naming them: a window's access. */
export function checkAccessBits(access: unknown, what: string): void {
  if (typeof access !== 'number' || !Number.isInteger(access) || access < 0 || access > 127) {
    throw new VerbsError('EINVAL', `${what}: access flags ${typeof access === 'number' && Number.isInteger(access) && access >= 0 ? `0x${access.toString(16)}` : shown(access)} are not ib_access_flags bits`);
  }
}

/** An MR's access: the bits, and the IB rule that remote write or atomic requires local write (spec/semantics.md). */
export function checkAccess(access: number, what: string): void {
  checkAccessBits(access, what);
  if ((access & (IbAccess.REMOTE_WRITE | IbAccess.REMOTE_ATOMIC)) !== 0 && (access & IbAccess.LOCAL_WRITE) === 0) {
    throw new VerbsError('EINVAL', `${what}: REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE`);
  }
}

/** Largest MTT page: 2^31 (the 5-bit log_page_size of mapSg's rule, Mr.mapSg). */
const MAX_LOG_PAGE_SIZE = 31;

/** Trailing zero bits of a non-negative integer below 2^53 (64 for 0: no limit). */
function trailingZeros(x: number): number {
  if (x === 0) return 64;
  let n = 0;
  while (x % 2 === 0) {
    x /= 2;
    n++;
  }
  return n;
}

/** Bits needed to write a non-negative integer below 2^53. */
function bitLength(x: number): number {
  let n = 0;
  while (x >= 1) {
    x = Math.floor(x / 2);
    n++;
  }
  return n;
}

/**
 * log2 of the MTT page size for a pinned range, as mlx5 picks it (mlx5_umem_find_best_pgsz over
 * ib_umem_find_best_pgsz, drivers/infiniband/core/umem.c): the largest page size P (4 KiB ..
 * 2^31) such that every physically contiguous run of the range starts at the same offset modulo
 * P in virtual and DMA addresses (the address bits below P pass through), every run but the last
 * ends on a P boundary of the virtual range, and P is no larger than one page spanning the whole
 * range needs (the VA bits that change from its first to its last byte). The "virtual" addresses
 * are the MR's iova (`iova`, default `addr`; 0 for a zero-based MR), as the kernel's `virt`
 * (umem.c:94-129): a zero-based MR gets pages no larger than its first byte's DMA alignment.
 */
export function bestPageShift(
  host: { dmaAddress(a: number): number; pageSizeAt?(a: number): number },
  addr: number,
  length: number,
  iova = addr,
): number {
  const last = addr + length - 1;
  const ivLast = iova + length - 1;
  // the iova bits that change between the first and the last byte: a page of 2^k covers them
  const hi = Math.floor(iova / 2 ** 32) === Math.floor(ivLast / 2 ** 32)
    ? bitLength(((iova >>> 0) ^ (ivLast >>> 0)) >>> 0)
    : 32 + bitLength((Math.floor(iova / 2 ** 32) ^ Math.floor(ivLast / 2 ** 32)) >>> 0);
  const shift = iova - addr;
  let k = Math.min(MAX_LOG_PAGE_SIZE, Math.max(hi, 12));
  // walk the pages as runs of physically contiguous memory (a huge page is one step: a 512 GiB
  // MR over 2 MiB pages is 262,144 steps, not 2^27)
  let va = addr;
  let runVa = addr;
  let runDma = host.dmaAddress(addr);
  let next = runDma;
  while (va <= last && k > 12) {
    const ps = host.pageSizeAt?.(va) ?? PAGE;
    const n = Math.min(last + 1 - va, ps - (va % ps));
    const dma = host.dmaAddress(va);
    if (dma !== next) {
      // a run ended at va: its end must be P-aligned, the new run's offset must pass through
      k = Math.min(k, trailingZeros(va + shift), trailingZeros(Math.abs(runDma - runVa - shift)));
      runVa = va;
      runDma = dma;
    }
    next = dma + n;
    va += n;
  }
  k = Math.min(k, trailingZeros(Math.abs(runDma - runVa - shift)));
  return Math.max(12, k);
}
