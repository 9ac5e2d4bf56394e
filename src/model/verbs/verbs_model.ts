/**
 * The untimed verbs-level reference model: the oracle of the model-based test of the cycle model.
 * It holds one or more HCAs (host memory, PDs, MRs, MWs, RC QPs, CQs) and applies verbs calls and
 * work requests with the outcomes of spec/semantics.md (every section but "On-demand paging").
 *
 * ## Execution order and time
 * There is no time. `postSend`, `postRecv` and `bindMw` make their synchronous checks and queue;
 * they never complete anything. `step()` executes one queued item and `runToCompletion()` steps
 * until nothing can run. Each step takes, among the runnable items, the one posted first (one
 * global post counter over all QPs and HCAs):
 * - the head of a send queue: runnable unless it waits for a receive WR (below);
 * - the head of the receive queue of a QP in ERR: it is flushed (WR_FLUSH_ERR).
 * A step runs one work request to its end at once: the requester's checks, the message, the
 * responder's checks and memory effects, the response, and the completions on both sides.
 * So within a send queue work requests run strictly in order (semantics.md "Ordering": a REG_MR,
 * LOCAL_INV or BIND_MW is complete before any later one of the same QP), and across QPs in post
 * order. A SEND*, or RDMA_WRITE_WITH_IMM, whose responder has no receive WR posted waits (an RNR
 * NAK retried forever, rnr_retry = 7; the responder looks for a receive WR before it checks the
 * rkey): it stays queued, later items run (but not the later ones of its own send queue), and it
 * runs in a later step once a receive is posted (or the responder becomes unreachable). It does
 * not wait when its own SGEs fail (LOC_PROT_ERR comes first).
 *
 * ## Choices where semantics.md is silent
 * QPs and queues
 * - States: RESET -> INIT -> RTR (learns its peer) -> RTS; any -> ERR; any -> RESET (drops both
 *   queues without completions, forgets the peer). `connect(a, b)` moves both to RTS. postSend
 *   (and bindMw) need RTS or ERR, postRecv anything but RESET, else EINVAL (as rxe).
 * - A request whose responder is unreachable (destroyed, not in RTR/RTS, e.g. in ERR, or not
 *   connected back to the requester) completes RETRY_EXC_ERR (transport retries exhausted); the
 *   requester goes to ERR, the responder is not touched.
 * - Posting to a QP in ERR is accepted; the request is flushed when it runs. destroyQp drops its
 *   queued requests without completions. CQs never overflow (`cqe` is only recorded).
 * - postSend/postRecv of a list stops at the first bad work request; those before it stay posted;
 *   the error's `badWrIndex` names it. `fence` and `solicited` have no effect. `inline` copies the
 *   bytes at post time (EFAULT if not mapped in the host), with no lkey check and no size limit.
 * Completions
 * - For one message the responder's completion is written before the requester's.
 * - Error completions have byteLen 0, no flags, and the opcode the work request would have
 *   completed with (RECV for receives). Success byteLen: the message length (SEND, RDMA WRITE,
 *   RDMA READ, and the receive; RECV_RDMA_WITH_IMM: the write's length), 8 for atomics, 0 for
 *   REG_MR / LOCAL_INV / BIND_MW.
 * Data path
 * - The requester checks all of its own SGEs (gathered, or LOCAL_WRITE for an RDMA READ's or an
 *   atomic's destination) before the request leaves: a LOC_PROT_ERR never reaches the responder,
 *   and a work request that completes in error has written no memory anywhere (the one exception
 *   is the rule of semantics.md itself: a failed remote invalidation leaves the placed data).
 * - Only an MR's key is an lkey: a window's key as lkey is LOC_PROT_ERR (windows give remote
 *   access only). A zero-length SGE checks nothing (the mlx5 driver skips it).
 * - Receive SGEs are filled in order and each is checked only for the bytes it takes; a bad SGE
 *   met before the message ends is LOC_PROT_ERR, SGEs exhausted first is LOC_LEN_ERR.
 * - Every responder-detected error (remote access, misaligned atomic, receive LOC_PROT_ERR /
 *   LOC_LEN_ERR / REM_INV_REQ_ERR) moves the responder to ERR. A RDMA_WRITE_WITH_IMM refused by the
 *   remote checks consumes no receive WR (it is flushed with the responder's ERR).
 * - Atomics: the 8-byte operand is little-endian in memory (x86 host byte order; mlx5 offers
 *   atomics only in host-endianness mode). The local SGL must total exactly 8 bytes (EINVAL at
 *   post); it receives the original value. CMP_AND_SWP writes only when the compare matches.
 * Keys, MRs and windows
 * - Fresh indices start at 2 per HCA and are never reused (0 is the model's internal host mkey,
 *   index 1 holds the reserved lkey 0x100); one rolling tag per HCA, from 1, over MRs and windows.
 * - The handle's fields are the software view: `mr.lkey/rkey` change only by updateKey (so post
 *   REG_MR with `key: mr.lkey` after updateKey, as kernel consumers do), `mr.iova/length` by mapSg;
 *   `mw.rkey` by bindMw and by posting BIND_MW (set to `wr.rkey` at once, as bindMw does for type
 *   1). The device's key and range (keyState) change when REG_MR / BIND_MW executes. A bind names
 *   its window by handle (the window's current tag is not compared); the MR key it carries (the
 *   handle's lkey at post time) must be the MR's current key.
 * - REG_MR: only fast-registration MRs (a user MR has no page list: EINVAL at post), no PD check
 *   between the QP and the MR (the mlx5 UMR mask leaves the PD alone), the mapped list, iova and
 *   length are those of mapSg at post time, a deregistered MR is LOC_QP_OP_ERR. ZERO_BASED in the
 *   access makes the registered range start at 0; over MEM_REG its first byte must then be
 *   aligned to mapSg's page size (EINVAL at post), as regMr's ZERO_BASED address must be page
 *   aligned (an mlx5 mkey has no page offset apart from its start: uverbs_cmd.c:710). The
 *   MR's MW_BIND access is never checked (mlx5 has no mkey bit for it). The "page list" is the pages (of mapSg's page
 *   size) under the mapped elements for MEM_REG, the mapped elements for SG_GAPS.
 * - mapSg: fast-registration MRs only (EINVAL), pageSize a power of two (EINVAL), an element of
 *   the mapped prefix not mapped in the host: EFAULT; the MEM_REG rule exactly as written (no
 *   coalescing of contiguous unaligned elements); an empty list maps 0 (iova 0, length 0).
 * - Windows are created FREE (as mlx5 creates them); a type-1 bind of length 0 leaves it FREE
 *   (unbound) with the new key. BIND_MW posted on a type-1 window is EINVAL (type 1 binds through
 *   bindMw). Asynchronously, for both types: an MR in another PD than the window, or a zero-based
 *   MR, is MW_BIND_ERR. Window access bits other than REMOTE_* and ZERO_BASED are ignored.
 * - The bindMw verb's synchronous "MR zero-based: EINVAL" looks at the software view of the
 *   MR's access (`mr.regAccess`): regMr's access, or that of the last REG_MR *posted* for a
 *   fast-registration MR (whether it executes or not), since a real driver cannot know the
 *   device's state synchronously. The device's view (`dev.access`) decides the asynchronous
 *   MW_BIND_ERR above.
 * - Remote invalidation: a target already FREE (key matching) succeeds, as LOCAL_INV; a type-2
 *   window needs the PD only (not its QP). LOCAL_INV checks no PD. RDMA_READ_WITH_INV (with
 *   `readWithInvalidate`): after the data is placed, the LOCAL_INV rules; failure LOC_QP_OP_ERR.
 * - ON_DEMAND MRs (with `onDemandPaging`, the default) behave as pinned ones, EFAULT included.
 * - deallocMw always succeeds (its MR counts one window less); deallocPd and destroyCq are EBUSY
 *   while objects use them. Objects of different HCAs cannot be mixed (EINVAL). Addresses and
 *   lengths must be non-negative safe integers, keys 32-bit (EINVAL). Message lengths are not
 *   limited (only BIND_MW's 2 GiB rule is checked).
 */
import { incRkey, keyIndex } from '../keys.ts';
import { checkLocalList, checkRemote, planScatter } from './data_path.ts';
import { HcaState, type DmaWriteObserver } from './hca.ts';
import { bindWindow, fastRegister, localInvalidate, releaseWindow, remoteInvalidate } from './key_ops.ts';
import {
  ModelCq,
  ModelMr,
  ModelMw,
  ModelPd,
  ModelQp,
  type BindRequest,
  type HostExtent,
  type PostedRecv,
  type PostedSend,
  type QpCaps,
  type RegSnapshot,
} from './objects.ts';
import {
  VerbsAccess,
  VerbsModelError,
  WR_OPCODES,
  type KeyState,
  type ModelBindInfo,
  type ModelRecvWr,
  type ModelSendWr,
  type ModelSge,
  type ModelWc,
  type MwType,
  type QpState,
  type VerbsErrno,
  type WcFlag,
  type WcOpcode,
  type WcStatus,
  type WrOpcode,
} from './types.ts';

/** Options of a VerbsModel. */
export interface VerbsModelOptions {
  /** Number of HCAs, each with its own host memory (default 1). */
  hcas?: number;
  /** Accept RDMA_READ_WITH_INV (API.md `config.readWithInvalidate`; default false: EOPNOTSUPP). */
  readWithInvalidate?: boolean;
  /** The device has ON_DEMAND_PAGING (default true); without it regMr ON_DEMAND is EOPNOTSUPP. */
  onDemandPaging?: boolean;
  /** max_fast_reg_page_list_len, allocMr's bound on maxNumSg (default 2^16, spec/mlx5.md). */
  maxFastRegPageListLen?: number;
  /** Called for every host range an HCA writes (RDMA WRITE, receive, READ response, atomic). */
  onDmaWrite?: DmaWriteObserver;
}

/** Options of createQp (ibv_qp_init_attr); caps default to 64 WRs and 16 SGEs. */
export interface CreateQpOptions {
  sendCq: ModelCq;
  recvCq: ModelCq;
  maxSendWr?: number;
  maxRecvWr?: number;
  maxSendSge?: number;
  maxRecvSge?: number;
}

/** The completion opcode of each send opcode. */
const REQUESTER_WC_OPCODE: Record<WrOpcode, WcOpcode> = {
  SEND: 'SEND',
  SEND_WITH_IMM: 'SEND',
  SEND_WITH_INV: 'SEND',
  RDMA_WRITE: 'RDMA_WRITE',
  RDMA_WRITE_WITH_IMM: 'RDMA_WRITE',
  RDMA_READ: 'RDMA_READ',
  RDMA_READ_WITH_INV: 'RDMA_READ',
  ATOMIC_CMP_AND_SWP: 'COMP_SWAP',
  ATOMIC_FETCH_AND_ADD: 'FETCH_ADD',
  LOCAL_INV: 'LOCAL_INV',
  REG_MR: 'REG_MR',
  BIND_MW: 'BIND_MW',
};

/** KLM and window lengths reach 2 GiB (spec/mlx5.md "Device capabilities"). */
const MAX_BIND_LENGTH = 2 ** 31;
const NO_FLAGS: ReadonlySet<WcFlag> = new Set();

/** Extra fields of a successful receive completion. */
interface RecvExtra {
  flags?: WcFlag[];
  immData?: number;
  invalidatedRkey?: number;
}

/** The untimed verbs-level reference model (see the file comment for order and choices). */
export class VerbsModel {
  private readonly hcas: HcaState[];
  /** Live QPs in creation order (the scheduler's scan order; ties never happen: seqs differ). */
  private readonly qps: ModelQp[] = [];
  private seq = 0;
  private readonly readWithInvalidate: boolean;
  private readonly onDemandPaging: boolean;
  /** allocMr's bound on maxNumSg. */
  readonly maxFastRegPageListLen: number;

  constructor(opts: VerbsModelOptions = {}) {
    const n = opts.hcas ?? 1;
    this.hcas = Array.from({ length: n }, (_, i) => new HcaState(i, opts.onDmaWrite));
    this.readWithInvalidate = opts.readWithInvalidate ?? false;
    this.onDemandPaging = opts.onDemandPaging ?? true;
    this.maxFastRegPageListLen = opts.maxFastRegPageListLen ?? 2 ** 16;
  }

  /** Number of HCAs. */
  get hcaCount(): number {
    return this.hcas.length;
  }

  // ------------------------------------------------------------------------------------------
  // Host memory
  // ------------------------------------------------------------------------------------------

  /** Maps `length` zeroed bytes in HCA `hca`'s host at an `align`-aligned address; returns it. */
  alloc(hca: number, length: number, align = 4096): number {
    requireAddr(length, 'alloc length');
    return this.hca(hca).host.alloc(length, align);
  }

  /** Maps `[addr, addr + length)` in HCA `hca`'s host (to mirror another host's layout). */
  /** The process unmaps `[addr, addr + length)` of HCA `hca`'s host (munmap): an ODP access there fails. */
  unmapHost(hca: number, addr: number, length: number): void {
    this.hca(hca).host.unmap(addr, length);
  }

  /** The process drops `[addr, addr + length)` (madvise DONTNEED): the next touch sees zeroed pages. */
  dropHost(hca: number, addr: number, length: number): void {
    // every page of the range: the mapped ones come back zeroed, unmapped ones hold nothing
    this.hca(hca).host.zero(addr, length);
  }

  /**
   * ibv_advise_mr's checks, as mlx5's (the pages themselves are not modelled: an ODP MR behaves
   * as a pinned one; Linux 6.12 odp.c get_prefetchable_mr, mlx5_ib_prefetch_sg_list): ENOENT a
   * key that names no live ODP MR, EINVAL one that names a window, EPERM an MR of another PD or
   * PREFETCH_WRITE of an MR that is not writable (ib_access_writable: LOCAL_WRITE, REMOTE_WRITE,
   * REMOTE_ATOMIC or MW_BIND); flushed, EFAULT a range outside the MR or (but for
   * PREFETCH_NO_FAULT, a snapshot) over pages the process unmapped.
   */
  adviseMr(pd: ModelPd, key: number, addr: number, length: number, advice: 'PREFETCH' | 'PREFETCH_WRITE' | 'PREFETCH_NO_FAULT' = 'PREFETCH', flush = true): void {
    alive(pd, 'PD');
    const h = this.hca(pd.hca);
    const mr = h.objects.get(keyIndex(key));
    if (mr instanceof ModelMw && !mr.destroyed && mr.rkey === key >>> 0) throw err('EINVAL', 'adviseMr: the key names a memory window');
    if (!(mr instanceof ModelMr) || mr.destroyed || (mr.dev.access & VerbsAccess.ON_DEMAND) === 0 || mr.dev.key !== key >>> 0) {
      throw err('ENOENT', 'adviseMr: the key names no ODP MR');
    }
    if (mr.pd !== pd) throw err('EPERM', 'adviseMr: the MR is of another PD');
    const writable = VerbsAccess.LOCAL_WRITE | VerbsAccess.REMOTE_WRITE | VerbsAccess.REMOTE_ATOMIC | VerbsAccess.MW_BIND;
    if (advice === 'PREFETCH_WRITE' && (mr.dev.access & writable) === 0) throw err('EPERM', 'adviseMr: PREFETCH_WRITE of an MR that is not writable');
    if (!flush || length === 0) return;
    if (!(addr >= mr.dev.iova && addr + length <= mr.dev.iova + mr.dev.length)) throw err('EFAULT', 'adviseMr: the range is outside the MR');
    if (advice !== 'PREFETCH_NO_FAULT' && !h.host.isMapped(addr, length)) throw err('EFAULT', 'adviseMr: the range has pages the process unmapped');
  }

  mapHost(hca: number, addr: number, length: number): void {
    requireAddr(addr, 'address');
    requireAddr(length, 'length');
    this.hca(hca).host.map(addr, length);
  }

  /** Reads host bytes (EFAULT when not mapped). */
  memRead(hca: number, addr: number, length: number): Uint8Array {
    const host = this.hca(hca).host;
    if (!host.isMapped(addr, length)) throw err('EFAULT', 'memRead: range not mapped in the host');
    return host.read(addr, length);
  }

  /** Writes host bytes as the application does (EFAULT when not mapped). */
  memWrite(hca: number, addr: number, bytes: Uint8Array): void {
    const host = this.hca(hca).host;
    if (!host.isMapped(addr, bytes.length)) throw err('EFAULT', 'memWrite: range not mapped in the host');
    host.write(addr, bytes);
  }

  // ------------------------------------------------------------------------------------------
  // PDs, CQs, QPs
  // ------------------------------------------------------------------------------------------

  /** Allocates a protection domain on HCA `hca`. */
  allocPd(hca = 0): ModelPd {
    return new ModelPd(hca, this.hca(hca).nextPdn());
  }

  /** Deallocates a PD: EBUSY while an MR, window or QP uses it. */
  deallocPd(pd: ModelPd): void {
    alive(pd, 'PD');
    const h = this.hca(pd.hca);
    const used = [...h.objects.values()].some((o) => o.pd === pd) || this.qps.some((q) => q.pd === pd);
    if (used) throw err('EBUSY', 'deallocPd: MRs, windows or QPs still use the PD');
    pd.destroyed = true;
  }

  /** Creates a completion queue on HCA `hca`. */
  createCq(hca = 0, cqe = 256): ModelCq {
    return new ModelCq(hca, this.hca(hca).nextCqn(), cqe);
  }

  /** Destroys a CQ: EBUSY while a QP uses it. */
  destroyCq(cq: ModelCq): void {
    alive(cq, 'CQ');
    if (this.qps.some((q) => q.sendCq === cq || q.recvCq === cq)) throw err('EBUSY', 'destroyCq: QPs still use the CQ');
    cq.destroyed = true;
  }

  /** Creates an RC QP in RESET. */
  createQp(pd: ModelPd, opts: CreateQpOptions): ModelQp {
    alive(pd, 'PD');
    alive(opts.sendCq, 'CQ');
    alive(opts.recvCq, 'CQ');
    sameHca(pd.hca, opts.sendCq.hca);
    sameHca(pd.hca, opts.recvCq.hca);
    const caps: QpCaps = {
      maxSendWr: opts.maxSendWr ?? 64,
      maxRecvWr: opts.maxRecvWr ?? 64,
      maxSendSge: opts.maxSendSge ?? 16,
      maxRecvSge: opts.maxRecvSge ?? 16,
    };
    const qp = new ModelQp(pd.hca, pd, this.hca(pd.hca).nextQpn(), opts.sendCq, opts.recvCq, caps);
    this.qps.push(qp);
    return qp;
  }

  /** Destroys a QP; its queued work requests are dropped without completions. */
  destroyQp(qp: ModelQp): void {
    alive(qp, 'QP');
    qp.destroyed = true;
    qp.sq.length = 0;
    qp.rq.length = 0;
    this.qps.splice(this.qps.indexOf(qp), 1);
  }

  /**
   * Moves a QP to `state`: RESET -> INIT -> RTR (with `peer`, the remote QP) -> RTS, any -> ERR,
   * any -> RESET. Other moves are EINVAL.
   */
  modifyQp(qp: ModelQp, state: QpState, peer?: ModelQp): void {
    alive(qp, 'QP');
    const from = qp.state;
    switch (state) {
      case 'RESET':
        qp.sq.length = 0;
        qp.unreaped = [];
        qp.rq.length = 0;
        qp.peer = undefined;
        break;
      case 'INIT':
        if (from !== 'RESET') throw err('EINVAL', `modifyQp: ${from} -> INIT is not a valid move`);
        break;
      case 'RTR':
        if (from !== 'INIT') throw err('EINVAL', `modifyQp: ${from} -> RTR is not a valid move`);
        if (peer === undefined) throw err('EINVAL', 'modifyQp: RTR needs the remote QP');
        alive(peer, 'QP');
        qp.peer = peer;
        break;
      case 'RTS':
        if (from !== 'RTR') throw err('EINVAL', `modifyQp: ${from} -> RTS is not a valid move`);
        break;
      case 'ERR':
        break;
      default:
        throw err('EINVAL', 'modifyQp: unknown state');
    }
    qp.state = state;
  }

  /** Connects two RC QPs in RESET (possibly on different HCAs): both end in RTS. */
  connect(a: ModelQp, b: ModelQp): void {
    alive(a, 'QP');
    alive(b, 'QP');
    if (a === b) throw err('EINVAL', 'connect: a QP cannot be its own peer');
    if (a.state !== 'RESET' || b.state !== 'RESET') throw err('EINVAL', 'connect: both QPs must be in RESET');
    for (const [qp, peer] of [[a, b], [b, a]] as const) {
      this.modifyQp(qp, 'INIT');
      this.modifyQp(qp, 'RTR', peer);
      this.modifyQp(qp, 'RTS');
    }
  }

  // ------------------------------------------------------------------------------------------
  // MRs
  // ------------------------------------------------------------------------------------------

  /**
   * Registers a user MR over `[addr, addr + length)` of the PD's host: VALID at once, lkey == rkey,
   * iova = addr (0 when ZERO_BASED).
   */
  regMr(pd: ModelPd, addr: number, length: number, access: number): ModelMr {
    alive(pd, 'PD');
    requireAddr(addr, 'address');
    requireAddr(length, 'length');
    const h = this.hca(pd.hca);
    // regMr access: REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE.
    requireLocalWriteFor(access, 'regMr');
    // regMr ZERO_BASED (hca_va 0): the address must be page aligned (Linux 6.12
    // drivers/infiniband/core/uverbs_cmd.c:710, iova and address in the same page offset).
    if ((access & VerbsAccess.ZERO_BASED) !== 0 && addr % 4096 !== 0) {
      throw err('EINVAL', 'regMr: ZERO_BASED needs a page-aligned address (uverbs_cmd.c:710)');
    }
    // regMr ON_DEMAND: device without ON_DEMAND_PAGING.
    if ((access & VerbsAccess.ON_DEMAND) !== 0 && !this.onDemandPaging) {
      throw err('EOPNOTSUPP', 'regMr: ON_DEMAND needs a device with ON_DEMAND_PAGING');
    }
    // regMr(0, SIZE_MAX): implicit ODP, the whole address space (needs ON_DEMAND; not zero-based).
    const implicit = addr === 0 && length === Number.MAX_SAFE_INTEGER;
    if (implicit && (access & VerbsAccess.ON_DEMAND) === 0) throw err('EOPNOTSUPP', 'regMr(0, SIZE_MAX): implicit ODP needs ON_DEMAND');
    if (implicit && (access & VerbsAccess.ZERO_BASED) !== 0) throw err('EINVAL', 'regMr(0, SIZE_MAX): an implicit ODP MR cannot be zero-based');
    // regMr: length 0 (EINVAL), or range not mapped in the host (EFAULT).
    if (length === 0) throw err('EINVAL', 'regMr: length 0');
    if (!implicit && !h.host.isMapped(addr, length)) throw err('EFAULT', 'regMr: range not mapped in the host');
    const zeroBased = (access & VerbsAccess.ZERO_BASED) !== 0;
    const key = h.freshKey();
    const mr = new ModelMr(pd.hca, pd, 'USER', keyIndex(key), 0, {
      key,
      state: 'VALID',
      iova: zeroBased ? 0 : addr,
      length,
      access,
      extents: [{ addr, length }],
    });
    h.add(mr);
    return mr;
  }

  /** Allocates a fast-registration MR (MEM_REG: page list, SG_GAPS: KLM list), FREE until REG_MR. */
  allocMr(pd: ModelPd, type: 'MEM_REG' | 'SG_GAPS', maxNumSg: number): ModelMr {
    alive(pd, 'PD');
    // allocMr: type not MEM_REG / SG_GAPS; maxNumSg 0 or above maxFastRegPageListLen.
    if (type !== 'MEM_REG' && type !== 'SG_GAPS') throw err('EINVAL', 'allocMr: type must be MEM_REG or SG_GAPS');
    if (!Number.isInteger(maxNumSg) || maxNumSg <= 0 || maxNumSg > this.maxFastRegPageListLen) {
      throw err('EINVAL', 'allocMr: maxNumSg must be 1..maxFastRegPageListLen');
    }
    const h = this.hca(pd.hca);
    const key = h.freshKey();
    const mr = new ModelMr(pd.hca, pd, type, keyIndex(key), maxNumSg, {
      key,
      state: 'FREE',
      iova: 0,
      length: 0,
      access: 0,
      extents: [],
    });
    h.add(mr);
    return mr;
  }

  /**
   * Maps a scatter list into a fast-registration MR (ib_map_mr_sg) and returns how many elements
   * were mapped; sets `mr.iova` (the first element's addr) and `mr.length` (sum of mapped lengths).
   * MEM_REG: every element but the first starts page-aligned, every element but the last ends
   * page-aligned; the first that breaks this ends the mapping. At most maxNumSg elements.
   */
  mapSg(mr: ModelMr, sgList: ReadonlyArray<{ addr: number; length: number }>, pageSize = 4096): number {
    alive(mr, 'MR');
    if (mr.type === 'USER') throw err('EINVAL', 'mapSg: only fast-registration MRs (allocMr) have a page list');
    // mlx5's smallest page is 4 KiB (MLX5_ADAPTER_PAGE_SHIFT 12, include/linux/mlx5/device.h)
    if (!(Number.isInteger(pageSize) && pageSize >= 4096 && pageSize <= 2 ** 31 && 2 ** Math.round(Math.log2(pageSize)) === pageSize)) {
      throw err('EINVAL', 'mapSg: pageSize must be a power of two in 4 KiB .. 2 GiB (the mkey\'s 5-bit log_page_size)');
    }
    for (const e of sgList) {
      requireAddr(e.addr, 'address');
      requireAddr(e.length, 'length');
    }
    let n = 0;
    // mapSg: more entries than maxNumSg maps the first maxNumSg.
    while (n < sgList.length && n < mr.maxNumSg) {
      if (mr.type === 'MEM_REG' && n > 0) {
        // mapSg (MEM_REG): the previous element must end, and this one start, page-aligned.
        const prev = sgList[n - 1];
        if ((prev.addr + prev.length) % pageSize !== 0 || sgList[n].addr % pageSize !== 0) break;
      }
      n += 1;
    }
    const extents: HostExtent[] = sgList.slice(0, n).map((e) => ({ addr: e.addr, length: e.length }));
    const host = this.hca(mr.hca).host;
    if (extents.some((e) => !host.isMapped(e.addr, e.length))) {
      throw err('EFAULT', 'mapSg: an element is not mapped in the host');
    }
    const pages = extents.reduce(
      (sum, e) => sum + Math.ceil((e.addr + e.length) / pageSize) - Math.floor(e.addr / pageSize),
      0,
    );
    mr.mapped = { extents, entries: mr.type === 'MEM_REG' ? pages : n, pageSize };
    mr.iova = n > 0 ? extents[0].addr : 0;
    mr.length = extents.reduce((sum, e) => sum + e.length, 0);
    return n;
  }

  /** ib_update_fast_reg_key: the handle's lkey and rkey take tag `key8` (the device is untouched). */
  updateKey(mr: ModelMr, key8: number): void {
    alive(mr, 'MR');
    if (!Number.isInteger(key8) || key8 < 0 || key8 > 0xff) throw err('EINVAL', 'updateKey: the key is 8 bits');
    mr.lkey = ((mr.lkey & 0xffffff00) | key8) >>> 0;
    mr.rkey = ((mr.rkey & 0xffffff00) | key8) >>> 0;
  }

  /** Deregisters an MR: EBUSY while memory windows are bound to it. */
  dereg(mr: ModelMr): void {
    alive(mr, 'MR');
    // dereg: memory windows still bound to the MR.
    if (mr.boundWindows > 0) throw err('EBUSY', 'dereg: memory windows are still bound to the MR');
    this.hca(mr.hca).remove(mr);
    mr.destroyed = true;
  }

  // ------------------------------------------------------------------------------------------
  // Memory windows
  // ------------------------------------------------------------------------------------------

  /** Allocates a memory window of type 1 or 2, FREE (unbound). */
  allocMw(pd: ModelPd, type: MwType): ModelMw {
    alive(pd, 'PD');
    // allocMw: type not 1 or 2.
    if (type !== 1 && type !== 2) throw err('EINVAL', 'allocMw: type must be 1 or 2');
    const h = this.hca(pd.hca);
    const key = h.freshKey();
    const mw = new ModelMw(pd.hca, pd, type, keyIndex(key), {
      key,
      state: 'FREE',
      addr: 0,
      length: 0,
      access: 0,
      qp: undefined,
      mr: undefined,
    });
    h.add(mw);
    return mw;
  }

  /** Deallocates a window (bound or not); its MR counts one window less. */
  deallocMw(mw: ModelMw): void {
    alive(mw, 'MW');
    const h = this.hca(mw.hca);
    releaseWindow(h, mw);
    h.remove(mw);
    mw.destroyed = true;
  }

  /**
   * The type-1 bind verb (ibv_bind_mw): synchronous checks, then a BIND_MW work request is queued
   * on `qp`. Returns the new rkey `incRkey(mw.rkey)` and sets `mw.rkey` to it at once; the bind
   * completes (BIND_MW, or MW_BIND_ERR) when it runs.
   */
  bindMw(
    qp: ModelQp,
    mw: ModelMw,
    info: ModelBindInfo,
    opts: { wrId?: number; signaled?: boolean } = {},
  ): number {
    alive(qp, 'QP');
    alive(mw, 'MW');
    const mr = info.mr ?? undefined;
    if (mr !== undefined) alive(mr, 'MR');
    sameHca(qp.hca, mw.hca);
    if (mr !== undefined) sameHca(qp.hca, mr.hca);
    requireAddr(info.addr, 'bind address');
    requireAddr(info.length, 'bind length');
    // bindMw (type 1 verb), in libibverbs / mlx5 order:
    if (mw.type !== 1) throw err('EINVAL', 'bindMw: the window must be type 1');
    if (mr === undefined && info.length !== 0) throw err('EINVAL', 'bindMw: MR missing but length != 0');
    if (mr !== undefined && mr.pd !== mw.pd) throw err('EPERM', 'bindMw: the window\'s PD differs from the MR\'s');
    if ((info.access & VerbsAccess.ZERO_BASED) !== 0) throw err('EINVAL', 'bindMw: a type-1 window cannot be ZERO_BASED');
    // Choice: "MR zero-based" in the software view (mr.regAccess), as a real driver must decide.
    if (mr !== undefined && (mr.regAccess & VerbsAccess.ZERO_BASED) !== 0) {
      throw err('EINVAL', 'bindMw: the MR is zero-based');
    }
    this.admitSend(qp);
    // postSend BIND_MW: length > 2 GiB.
    if (info.length > MAX_BIND_LENGTH) throw err('EOPNOTSUPP', 'bindMw: length > 2 GiB');
    const newRkey = incRkey(mw.rkey);
    const bind: BindRequest = {
      mw,
      newRkey,
      mr,
      mrKey: mr?.lkey,
      addr: info.addr,
      length: info.length,
      access: info.access,
    };
    const wr: ModelSendWr = {
      wrId: opts.wrId ?? 0,
      opcode: 'BIND_MW',
      signaled: opts.signaled ?? false,
      mw,
      rkey: newRkey,
      bindInfo: { mr: mr ?? null, addr: info.addr, length: info.length, access: info.access },
    };
    qp.sq.push({ seq: this.nextSeq(), wr, sgList: [], inlineData: undefined, reg: undefined, bind });
    mw.rkey = newRkey;
    return newRkey;
  }

  // ------------------------------------------------------------------------------------------
  // Posting
  // ------------------------------------------------------------------------------------------

  /**
   * Posts send work requests (synchronous checks only; they run in runToCompletion / step).
   * A failing element throws (with `badWrIndex`); the elements before it stay posted.
   */
  postSend(qp: ModelQp, wrs: ModelSendWr | readonly ModelSendWr[]): void {
    alive(qp, 'QP');
    const list: readonly ModelSendWr[] = Array.isArray(wrs) ? wrs : [wrs as ModelSendWr];
    list.forEach((wr, i) => {
      let posted: PostedSend;
      try {
        posted = this.prepareSend(qp, wr);
      } catch (e) {
        if (e instanceof VerbsModelError) e.badWrIndex = i;
        throw e;
      }
      qp.sq.push(posted);
      // Choice: a posted type-2 bind sets the handle's rkey at once, as bindMw does for type 1.
      if (posted.bind !== undefined) posted.bind.mw.rkey = posted.bind.newRkey;
      // Choice: the software view of the registration's access is that of the last REG_MR posted.
      if (posted.reg !== undefined && wr.mr !== undefined) wr.mr.regAccess = wr.access ?? 0;
    });
  }

  /** Posts receive work requests (a failing element throws with `badWrIndex`). */
  postRecv(qp: ModelQp, wrs: ModelRecvWr | readonly ModelRecvWr[]): void {
    alive(qp, 'QP');
    const list: readonly ModelRecvWr[] = Array.isArray(wrs) ? wrs : [wrs as ModelRecvWr];
    list.forEach((wr, i) => {
      try {
        if (qp.state === 'RESET') throw err('EINVAL', 'postRecv: the QP is in RESET');
        if (qp.rq.length >= qp.caps.maxRecvWr) throw err('ENOMEM', 'postRecv: receive queue full');
        if (wr.sgList.length > qp.caps.maxRecvSge) throw err('EINVAL', 'postRecv: more SGEs than maxRecvSge');
        const sgList = wr.sgList.map(copySge);
        qp.rq.push({ seq: this.nextSeq(), wr: { wrId: wr.wrId, sgList } });
      } catch (e) {
        if (e instanceof VerbsModelError) e.badWrIndex = i;
        throw e;
      }
    });
  }

  // ------------------------------------------------------------------------------------------
  // Execution
  // ------------------------------------------------------------------------------------------

  /** Runs `step()` until nothing is runnable; returns the number of steps. */
  runToCompletion(): number {
    let steps = 0;
    while (this.step()) steps += 1;
    return steps;
  }

  /**
   * Runs the runnable item posted first (a send queue head that does not wait for a receive, or
   * the receive queue head of a QP in ERR, which is flushed). False when nothing is runnable.
   */
  step(): boolean {
    let best: { qp: ModelQp; item: PostedSend | PostedRecv; recv: boolean } | undefined;
    for (const qp of this.qps) {
      const s = qp.sq[0];
      if (s !== undefined && (best === undefined || s.seq < best.item.seq) && !this.waitsForReceive(qp, s)) {
        best = { qp, item: s, recv: false };
      }
      const r = qp.rq[0];
      if (qp.state === 'ERR' && r !== undefined && (best === undefined || r.seq < best.item.seq)) {
        best = { qp, item: r, recv: true };
      }
    }
    if (best === undefined) return false;
    if (best.recv) {
      const recv = best.qp.rq.shift() as PostedRecv;
      this.completeRecv(best.qp, recv, 'WR_FLUSH_ERR', 'RECV', 0);
    } else {
      this.execute(best.qp, best.qp.sq.shift() as PostedSend);
    }
    return true;
  }

  /** Removes and returns up to `max` completions of `cq`, oldest first (ibv_poll_cq). */
  pollCq(cq: ModelCq, max = Number.POSITIVE_INFINITY): ModelWc[] {
    alive(cq, 'CQ');
    const out = cq.completions.splice(0, Math.min(max, cq.completions.length));
    for (const wc of out) {
      const r = this.reaps.get(wc);
      if (r !== undefined) r.qp.unreaped = r.qp.unreaped.filter((s) => s > r.seq);
    }
    return out;
  }

  /** The send request behind each send completion: polling it reaps the requests up to it. */
  private readonly reaps = new WeakMap<ModelWc, { qp: ModelQp; seq: number }>();

  // ------------------------------------------------------------------------------------------
  // Inspection
  // ------------------------------------------------------------------------------------------

  /** The device's state of the mkey that `key`'s index names on HCA `hca`. */
  keyState(key: number, hca = 0): KeyState {
    const index = keyIndex(key);
    const obj = this.hca(hca).objects.get(index);
    if (obj === undefined) return { kind: 'NONE', index };
    if (obj instanceof ModelMr) {
      return {
        kind: 'MR',
        index,
        type: obj.type,
        key: obj.dev.key,
        keyMatches: obj.dev.key === key,
        state: obj.dev.state,
        pdn: obj.pd.pdn,
        iova: obj.dev.iova,
        length: obj.dev.length,
        access: obj.dev.access,
        boundWindows: obj.boundWindows,
      };
    }
    return {
      kind: 'MW',
      index,
      type: obj.type,
      key: obj.dev.key,
      keyMatches: obj.dev.key === key,
      state: obj.dev.state,
      pdn: obj.pd.pdn,
      addr: obj.dev.addr,
      length: obj.dev.length,
      access: obj.dev.access,
      qpNum: obj.dev.qp?.qpNum,
      mrKey: obj.dev.mr?.dev.key,
    };
  }

  // ------------------------------------------------------------------------------------------
  // Internals: objects and posting
  // ------------------------------------------------------------------------------------------

  private hca(i: number): HcaState {
    const h = this.hcas[i];
    if (h === undefined) throw err('EINVAL', `no HCA ${i}`);
    return h;
  }

  private nextSeq(): number {
    this.seq += 1;
    return this.seq;
  }

  /** The checks every posted send work request passes first: QP state, then queue room. */
  private admitSend(qp: ModelQp): void {
    if (qp.state !== 'RTS' && qp.state !== 'ERR') throw err('EINVAL', `postSend: the QP is in ${qp.state}, not RTS`);
    // postSend: send queue full.
    if (qp.sq.length + qp.unreaped.length >= qp.caps.maxSendWr) throw err('ENOMEM', 'postSend: send queue full');
  }

  /** The synchronous checks of one send work request, and what is fixed at post time. */
  private prepareSend(qp: ModelQp, wr: ModelSendWr): PostedSend {
    this.admitSend(qp);
    if (!WR_OPCODES.includes(wr.opcode)) throw err('EINVAL', 'postSend: unknown opcode');
    // postSend RDMA_READ_WITH_INV: mlx5 (no iWARP).
    if (wr.opcode === 'RDMA_READ_WITH_INV' && !this.readWithInvalidate) {
      throw err('EOPNOTSUPP', 'postSend: RDMA_READ_WITH_INV is iWARP-only (mlx5 has no such opcode)');
    }
    const sgList = (wr.sgList ?? []).map(copySge);
    if (sgList.length > qp.caps.maxSendSge) throw err('EINVAL', 'postSend: more SGEs than maxSendSge');
    const posted: PostedSend = {
      seq: 0,
      wr: { ...wr, sgList },
      sgList,
      inlineData: undefined,
      reg: undefined,
      bind: undefined,
    };
    switch (wr.opcode) {
      case 'REG_MR':
        posted.reg = this.checkRegMr(qp, wr);
        break;
      case 'BIND_MW':
        posted.bind = this.checkPostedBind(qp, wr);
        break;
      case 'LOCAL_INV':
      case 'SEND_WITH_INV':
        requireKey(wr.invalidateRkey, 'invalidateRkey');
        break;
      case 'RDMA_READ_WITH_INV':
        requireKey(wr.invalidateRkey, 'invalidateRkey');
        requireRemote(wr);
        break;
      case 'RDMA_WRITE':
      case 'RDMA_WRITE_WITH_IMM':
      case 'RDMA_READ':
        requireRemote(wr);
        break;
      case 'ATOMIC_CMP_AND_SWP':
      case 'ATOMIC_FETCH_AND_ADD':
        requireRemote(wr);
        // Choice: the local buffer of an atomic is exactly its 8-byte result.
        if (sumLengths(sgList) !== 8) throw err('EINVAL', 'postSend: an atomic\'s sgList must total 8 bytes');
        requireU64(wr.compareAdd, 'compareAdd');
        if (wr.opcode === 'ATOMIC_CMP_AND_SWP') requireU64(wr.swap, 'swap');
        break;
      case 'SEND':
      case 'SEND_WITH_IMM':
        break;
    }
    if (wr.immData !== undefined) requireKey(wr.immData, 'immData');
    if (wr.inline === true && carriesPayload(wr.opcode)) {
      const host = this.hca(qp.hca).host;
      if (sgList.some((s) => !host.isMapped(s.addr, s.length))) {
        throw err('EFAULT', 'postSend: inline data not mapped in the host');
      }
      posted.inlineData = concat(sgList.map((s) => host.read(s.addr, s.length)));
    }
    posted.seq = this.nextSeq();
    return posted;
  }

  /** postSend REG_MR: the synchronous rules, and the MR's mapped list at post time. */
  private checkRegMr(qp: ModelQp, wr: ModelSendWr): RegSnapshot {
    const mr = wr.mr;
    if (mr === undefined) throw err('EINVAL', 'postSend REG_MR: wr.mr is required');
    alive(mr, 'MR');
    sameHca(qp.hca, mr.hca);
    if (mr.type === 'USER') throw err('EINVAL', 'postSend REG_MR: the MR must be a fast-registration MR (allocMr)');
    requireKey(wr.key, 'key');
    const key = wr.key as number;
    // postSend REG_MR: key index differs from the MR's index.
    if (keyIndex(key) !== mr.index) throw err('EINVAL', 'postSend REG_MR: the key\'s index differs from the MR\'s index');
    // postSend REG_MR: page list longer than maxNumSg.
    if (mr.mapped.entries > mr.maxNumSg) throw err('EINVAL', 'postSend REG_MR: page list longer than maxNumSg');
    // REG_MR access: REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE.
    requireLocalWriteFor(wr.access ?? 0, 'postSend REG_MR');
    // postSend REG_MR ZERO_BASED (MEM_REG): the first byte must be page aligned, as mlx5's
    // start_addr is both the iova and the page offset (the rule of uverbs_cmd.c:710)
    if (((wr.access ?? 0) & VerbsAccess.ZERO_BASED) !== 0 && mr.type === 'MEM_REG' && mr.iova % mr.mapped.pageSize !== 0) {
      throw err('EINVAL', 'postSend REG_MR: ZERO_BASED needs a page list whose first byte is page aligned (uverbs_cmd.c:710)');
    }
    return { iova: mr.iova, length: mr.length, extents: mr.mapped.extents.map((e) => ({ ...e })) };
  }

  /** postSend BIND_MW (type 2): the synchronous rules, and the bind as posted. */
  private checkPostedBind(qp: ModelQp, wr: ModelSendWr): BindRequest {
    const mw = wr.mw;
    if (mw === undefined) throw err('EINVAL', 'postSend BIND_MW: wr.mw is required');
    alive(mw, 'MW');
    sameHca(qp.hca, mw.hca);
    if (mw.type !== 2) throw err('EINVAL', 'postSend BIND_MW: binds type-2 windows (type 1: bindMw)');
    const info = wr.bindInfo;
    if (info === undefined) throw err('EINVAL', 'postSend BIND_MW: wr.bindInfo is required');
    const mr = info.mr ?? undefined;
    if (mr !== undefined) {
      alive(mr, 'MR');
      sameHca(qp.hca, mr.hca);
    }
    requireAddr(info.addr, 'bind address');
    requireAddr(info.length, 'bind length');
    requireKey(wr.rkey, 'rkey');
    const newRkey = wr.rkey as number;
    // postSend BIND_MW: new rkey index differs from the window's (EINVAL); length > 2 GiB (EOPNOTSUPP).
    if (keyIndex(newRkey) !== mw.index) throw err('EINVAL', 'postSend BIND_MW: the new rkey\'s index differs from the window\'s');
    if (info.length > MAX_BIND_LENGTH) throw err('EOPNOTSUPP', 'postSend BIND_MW: length > 2 GiB');
    return { mw, newRkey, mr, mrKey: mr?.lkey, addr: info.addr, length: info.length, access: info.access };
  }

  // ------------------------------------------------------------------------------------------
  // Internals: execution
  // ------------------------------------------------------------------------------------------

  /**
   * The responder of `qp`'s requests, or undefined when unreachable (destroyed, not in RTR/RTS,
   * or not connected back): then the requester exhausts its retries (RETRY_EXC_ERR).
   */
  private responderOf(qp: ModelQp): ModelQp | undefined {
    const peer = qp.peer;
    if (peer === undefined || peer.destroyed || peer.peer !== qp) return undefined;
    if (peer.state !== 'RTR' && peer.state !== 'RTS') return undefined;
    return peer;
  }

  /**
   * A SEND* or RDMA_WRITE_WITH_IMM waits (RNR) while its reachable responder has no receive WR
   * posted. It does not wait when it would fail before reaching the responder.
   */
  private waitsForReceive(qp: ModelQp, item: PostedSend): boolean {
    if (qp.state === 'ERR' || !consumesReceive(item.wr.opcode)) return false;
    const peer = this.responderOf(qp);
    if (peer === undefined || peer.rq.length > 0) return false;
    return this.payloadOf(qp, item) !== undefined;
  }

  /** Runs one send work request of `qp`. */
  private execute(qp: ModelQp, item: PostedSend): void {
    // Errors and QP state: every outstanding and later request of a QP in ERR is flushed.
    if (qp.state === 'ERR') {
      this.completeSend(qp, item, 'WR_FLUSH_ERR');
      return;
    }
    const h = this.hcas[qp.hca];
    switch (item.wr.opcode) {
      case 'SEND':
      case 'SEND_WITH_IMM':
      case 'SEND_WITH_INV':
        this.execSend(qp, item);
        return;
      case 'RDMA_WRITE':
      case 'RDMA_WRITE_WITH_IMM':
        this.execWrite(qp, item);
        return;
      case 'RDMA_READ':
      case 'RDMA_READ_WITH_INV':
        this.execRead(qp, item);
        return;
      case 'ATOMIC_CMP_AND_SWP':
      case 'ATOMIC_FETCH_AND_ADD':
        this.execAtomic(qp, item);
        return;
      case 'LOCAL_INV': {
        const r = localInvalidate(h, item.wr.invalidateRkey as number);
        this.completeSend(qp, item, r.ok ? 'SUCCESS' : r.status);
        return;
      }
      case 'REG_MR': {
        const wr = item.wr;
        const r = fastRegister(h, wr.mr as ModelMr, wr.key as number, wr.access ?? 0, item.reg as RegSnapshot);
        this.completeSend(qp, item, r.ok ? 'SUCCESS' : r.status);
        return;
      }
      case 'BIND_MW': {
        const r = bindWindow(h, qp, item.bind as BindRequest);
        this.completeSend(qp, item, r.ok ? 'SUCCESS' : r.status);
        return;
      }
    }
  }

  /**
   * The bytes a SEND / RDMA WRITE carries: inline, or gathered through its SGEs; or the status
   * of the local failure (LOC_PROT_ERR; LOC_ACCESS_ERR for an ODP page the process unmapped).
   */
  private payloadOf(qp: ModelQp, item: PostedSend): Uint8Array | WcStatus {
    if (item.inlineData !== undefined) return item.inlineData;
    const h = this.hcas[qp.hca];
    const local = checkLocalList(h, qp, item.sgList, false);
    return local.ok ? h.dmaRead(local.segments) : localStatus(local);
  }

  /** SEND, SEND_WITH_IMM, SEND_WITH_INV. */
  private execSend(qp: ModelQp, item: PostedSend): void {
    const wr = item.wr;
    // Local access: a failure on the requester's own SGE is LOC_PROT_ERR.
    const payload = this.payloadOf(qp, item);
    if (typeof payload === 'string') return this.completeSend(qp, item, payload);
    const peer = this.responderOf(qp);
    if (peer === undefined) return this.completeSend(qp, item, 'RETRY_EXC_ERR');
    const ph = this.hcas[peer.hca];
    const recv = peer.rq.shift();
    if (recv === undefined) throw new Error('VerbsModel: a SEND ran without a receive WR (scheduler bug)');
    const plan = planScatter(ph, peer, recv.wr.sgList, payload.length);
    if (plan.kind === 'prot' || plan.kind === 'odp') {
      // Local access, responder's receive SGE: receive LOC_PROT_ERR (an unmapped ODP page:
      // LOC_ACCESS_ERR), requester REM_OP_ERR.
      this.completeRecv(peer, recv, plan.kind === 'odp' ? 'LOC_ACCESS_ERR' : 'LOC_PROT_ERR', 'RECV', 0);
      return this.completeSend(qp, item, 'REM_OP_ERR');
    }
    if (plan.kind === 'len') {
      // Receive buffer too small: responder LOC_LEN_ERR, requester REM_INV_REQ_ERR.
      this.completeRecv(peer, recv, 'LOC_LEN_ERR', 'RECV', 0);
      return this.completeSend(qp, item, 'REM_INV_REQ_ERR');
    }
    ph.dmaWrite(plan.segments, payload);
    const extra: RecvExtra = {};
    if (wr.opcode === 'SEND_WITH_IMM') {
      extra.flags = ['WITH_IMM'];
      extra.immData = wr.immData ?? 0;
    }
    if (wr.opcode === 'SEND_WITH_INV') {
      // Remote invalidate: after the data is placed. Failure: receive REM_INV_REQ_ERR, responder
      // ERR, key still valid; the requester's completion is SEND all the same.
      const key = wr.invalidateRkey as number;
      const inv = remoteInvalidate(ph, peer, key);
      if (!inv.ok) {
        this.completeRecv(peer, recv, inv.status, 'RECV', 0);
        return this.completeSend(qp, item, 'SUCCESS', payload.length);
      }
      extra.flags = ['WITH_INV'];
      extra.invalidatedRkey = key;
    }
    this.completeRecv(peer, recv, 'SUCCESS', 'RECV', payload.length, extra);
    this.completeSend(qp, item, 'SUCCESS', payload.length);
  }

  /** RDMA_WRITE, RDMA_WRITE_WITH_IMM. */
  private execWrite(qp: ModelQp, item: PostedSend): void {
    const wr = item.wr;
    const payload = this.payloadOf(qp, item);
    if (typeof payload === 'string') return this.completeSend(qp, item, payload);
    const peer = this.responderOf(qp);
    if (peer === undefined) return this.completeSend(qp, item, 'RETRY_EXC_ERR');
    const ph = this.hcas[peer.hca];
    // Remote access 1-5, WRITE needs REMOTE_WRITE.
    const r = checkRemote(ph, peer, wr.rkey as number, wr.remoteAddr as number, payload.length, VerbsAccess.REMOTE_WRITE);
    if (!r.ok) return this.remoteError(qp, peer, item, 'REM_ACCESS_ERR');
    ph.dmaWrite(r.segments, payload);
    if (wr.opcode === 'RDMA_WRITE_WITH_IMM') {
      const recv = peer.rq.shift();
      if (recv === undefined) throw new Error('VerbsModel: a WRITE_WITH_IMM ran without a receive WR (scheduler bug)');
      this.completeRecv(peer, recv, 'SUCCESS', 'RECV_RDMA_WITH_IMM', payload.length, {
        flags: ['WITH_IMM'],
        immData: wr.immData ?? 0,
      });
    }
    this.completeSend(qp, item, 'SUCCESS', payload.length);
  }

  /** RDMA_READ, RDMA_READ_WITH_INV. */
  private execRead(qp: ModelQp, item: PostedSend): void {
    const wr = item.wr;
    const h = this.hcas[qp.hca];
    const length = sumLengths(item.sgList);
    // Local access: the HCA writes the destination, so LOCAL_WRITE.
    const local = checkLocalList(h, qp, item.sgList, true);
    if (!local.ok) return this.completeSend(qp, item, localStatus(local));
    const peer = this.responderOf(qp);
    if (peer === undefined) return this.completeSend(qp, item, 'RETRY_EXC_ERR');
    const ph = this.hcas[peer.hca];
    // Remote access 1-5, READ needs REMOTE_READ.
    const r = checkRemote(ph, peer, wr.rkey as number, wr.remoteAddr as number, length, VerbsAccess.REMOTE_READ);
    if (!r.ok) return this.remoteError(qp, peer, item, 'REM_ACCESS_ERR');
    h.dmaWrite(local.segments, ph.dmaRead(r.segments));
    if (wr.opcode === 'RDMA_READ_WITH_INV') {
      // With readWithInvalidate: the local key is invalidated when the read completes.
      const inv = localInvalidate(h, wr.invalidateRkey as number);
      if (!inv.ok) return this.completeSend(qp, item, inv.status);
    }
    this.completeSend(qp, item, 'SUCCESS', length);
  }

  /** ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD on 8 little-endian bytes. */
  private execAtomic(qp: ModelQp, item: PostedSend): void {
    const wr = item.wr;
    const h = this.hcas[qp.hca];
    const local = checkLocalList(h, qp, item.sgList, true);
    if (!local.ok) return this.completeSend(qp, item, localStatus(local));
    const peer = this.responderOf(qp);
    if (peer === undefined) return this.completeSend(qp, item, 'RETRY_EXC_ERR');
    const ph = this.hcas[peer.hca];
    const va = wr.remoteAddr as number;
    // Remote access 1-5, atomics need REMOTE_ATOMIC.
    const r = checkRemote(ph, peer, wr.rkey as number, va, 8, VerbsAccess.REMOTE_ATOMIC);
    if (!r.ok) return this.remoteError(qp, peer, item, 'REM_ACCESS_ERR');
    // 6. atomics: 8-byte aligned, else the requester gets REM_INV_REQ_ERR.
    if (va % 8 !== 0) return this.remoteError(qp, peer, item, 'REM_INV_REQ_ERR');
    const original = ph.dmaRead(r.segments);
    const old = new DataView(original.buffer).getBigUint64(0, true);
    const operand = BigInt.asUintN(64, BigInt(wr.compareAdd ?? 0));
    let next: bigint | undefined;
    if (wr.opcode === 'ATOMIC_FETCH_AND_ADD') {
      next = BigInt.asUintN(64, old + operand);
    } else if (old === operand) {
      next = BigInt.asUintN(64, BigInt(wr.swap ?? 0));
    }
    if (next !== undefined) {
      const bytes = new Uint8Array(8);
      new DataView(bytes.buffer).setBigUint64(0, next, true);
      ph.dmaWrite(r.segments, bytes);
    }
    h.dmaWrite(local.segments, original);
    this.completeSend(qp, item, 'SUCCESS', 8);
  }

  /**
   * A responder-detected error of an RDMA or atomic request: the responder NAKs and goes to ERR
   * (no completion of its own: no receive WR is involved), the requester completes `status`.
   */
  private remoteError(qp: ModelQp, peer: ModelQp, item: PostedSend, status: WcStatus): void {
    peer.state = 'ERR';
    this.completeSend(qp, item, status);
  }

  /** A requester completion: none for an unsignaled success; an error moves the QP to ERR. */
  private completeSend(qp: ModelQp, item: PostedSend, status: WcStatus, byteLen = 0): void {
    if (status !== 'SUCCESS') qp.state = 'ERR';
    qp.unreaped.push(item.seq);
    if (status === 'SUCCESS' && item.wr.signaled !== true) return;
    const wc: ModelWc = {
      wrId: item.wr.wrId,
      status,
      opcode: REQUESTER_WC_OPCODE[item.wr.opcode],
      byteLen: status === 'SUCCESS' ? byteLen : 0,
      qpNum: qp.qpNum,
      wcFlags: NO_FLAGS,
    };
    this.reaps.set(wc, { qp, seq: item.seq });
    qp.sendCq.completions.push(wc);
  }

  /** A receive completion (receives are always signaled); an error moves the QP to ERR. */
  private completeRecv(
    qp: ModelQp,
    recv: PostedRecv,
    status: WcStatus,
    opcode: WcOpcode,
    byteLen: number,
    extra: RecvExtra = {},
  ): void {
    if (status !== 'SUCCESS') qp.state = 'ERR';
    const wc: ModelWc = {
      wrId: recv.wr.wrId,
      status,
      opcode,
      byteLen: status === 'SUCCESS' ? byteLen : 0,
      qpNum: qp.qpNum,
      wcFlags: extra.flags === undefined ? NO_FLAGS : new Set(extra.flags),
    };
    if (extra.immData !== undefined) wc.immData = extra.immData;
    if (extra.invalidatedRkey !== undefined) wc.invalidatedRkey = extra.invalidatedRkey;
    qp.recvCq.completions.push(wc);
  }
}

// --------------------------------------------------------------------------------------------
// Helpers
// --------------------------------------------------------------------------------------------

function err(errno: VerbsErrno, rule: string): VerbsModelError {
  return new VerbsModelError(errno, rule);
}

/** Any call on a destroyed object: EINVAL. */
function alive(obj: { destroyed: boolean }, what: string): void {
  if (obj.destroyed) throw err('EINVAL', `${what} was destroyed`);
}

/** Objects of one call must belong to one HCA. */
function sameHca(a: number, b: number): void {
  if (a !== b) throw err('EINVAL', 'objects of different HCAs cannot be used together');
}

/** regMr / REG_MR access: REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE. */
function requireLocalWriteFor(access: number, call: string): void {
  const remoteWrites = VerbsAccess.REMOTE_WRITE | VerbsAccess.REMOTE_ATOMIC;
  if ((access & remoteWrites) !== 0 && (access & VerbsAccess.LOCAL_WRITE) === 0) {
    throw err('EINVAL', `${call}: REMOTE_WRITE or REMOTE_ATOMIC requires LOCAL_WRITE`);
  }
}

function requireAddr(x: unknown, what: string): void {
  if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 0) {
    throw err('EINVAL', `${what} must be a non-negative safe integer`);
  }
}

function requireKey(x: unknown, what: string): void {
  if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff) {
    throw err('EINVAL', `${what} must be a 32-bit value`);
  }
}

function requireU64(x: unknown, what: string): void {
  if (typeof x === 'bigint') return;
  if (typeof x !== 'number' || !Number.isSafeInteger(x)) throw err('EINVAL', `${what} must be a 64-bit integer`);
}

function requireRemote(wr: ModelSendWr): void {
  requireAddr(wr.remoteAddr, 'remoteAddr');
  requireKey(wr.rkey, 'rkey');
}

function copySge(s: ModelSge): ModelSge {
  requireAddr(s.addr, 'SGE address');
  requireAddr(s.length, 'SGE length');
  requireKey(s.lkey, 'SGE lkey');
  return { addr: s.addr, length: s.length, lkey: s.lkey };
}

function sumLengths(list: ReadonlyArray<{ length: number }>): number {
  return list.reduce((n, s) => n + s.length, 0);
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(sumLengths(parts));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The opcodes that take a receive WR at the responder. */
function consumesReceive(op: WrOpcode): boolean {
  return op === 'SEND' || op === 'SEND_WITH_IMM' || op === 'SEND_WITH_INV' || op === 'RDMA_WRITE_WITH_IMM';
}

/** The opcodes whose sgList is sent (may be inline). */
function carriesPayload(op: WrOpcode): boolean {
  return consumesReceive(op) || op === 'RDMA_WRITE';
}

/** A requester's own SGE refused: LOC_PROT_ERR, or LOC_ACCESS_ERR for an ODP page that is unmapped. */
function localStatus(r: { odp?: boolean }): WcStatus {
  return r.odp === true ? 'LOC_ACCESS_ERR' : 'LOC_PROT_ERR';
}
