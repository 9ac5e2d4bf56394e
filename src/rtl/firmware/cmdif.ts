/**
 * The firmware command interface (`tb.hcaN.cmdif`): software posts commands with `exec(cmd)`,
 * the firmware executes them one at a time in posting order, and each completes after the
 * firmware latency of spec/timing.md "firmware command" (CREATE_MKEY `cfg.fwCreateMkeyPs`, every
 * other command `cfg.fwCommandPs`, the DESTROY / DEALLOC commands included). A command's effect (on ICM, on the resource tables) happens
 * at the end of its latency, then its promise resolves; a failed command rejects with a
 * `CmdError` carrying the mlx5 status, after the same latency.
 *
 * It is a process-level queue, not a clocked module: firmware runs on the adapter's embedded
 * cores, not in the pipeline, and costs no simulated cycles of its own while idle. Its traced
 * signals change with `setNow` (src/sim/signal.ts: software / commit-phase values):
 * - `state` (cmdif_state): IDLE, or EXEC while a command is in the firmware;
 * - `opcode` (cmd_opcode): the opcode in execution, NONE when idle;
 * - `busy`: 1 while executing;
 * - `queued`: commands posted and not yet started (saturates at 255);
 * - `status` (cmd_status): the status of the last completed command.
 *
 * Background commands (`execBackground`: the driver's MR cache filling and emptying itself) run
 * in a lane of their own, beside the commands software waits for, so they never delay one: up
 * to BACKGROUND_SLOTS at a time, a round taking the firmware latency of its slowest command
 * (mlx5 keeps at most 8 cache CREATE_MKEYs in flight, asynchronous commands: MAX_PENDING_REG_MR
 * in drivers/infiniband/hw/mlx5/mr.c; that firmware executes them concurrently is assumed).
 * Traced: `bg_busy` while a round executes, `bg_queued` commands waiting for one.
 *
 * The page entry (the driver's MANAGE_PAGES: the pages given at start-up and on PAGE_REQUEST,
 * the pages reclaimed; cmd.c's pages queue) runs in a lane of its own, traced as `pg_busy`,
 * `pg_opcode` (cmd_opcode), `pg_op_mod` (manage_pages_op_mod: ALLOCATION_SUCCESS, _FAIL,
 * HCA_RETURN_PAGES), `pg_pages` (the pages the command gives or takes back) and `pg_status`.
 */
import { MLX5_INVALID_LKEY, NULL_MKEY } from '../formats/constants.ts';
import type { QpErrorEvent } from '../formats/constants.ts';
import { enumType, Module, type Counter, type Histogram, type Signal, type UnclockedWireOptions } from '../../sim/index.ts';
import type { DmaPort } from '../memory/pcie.ts';
import { CmdQueueEngine, FwDma } from './cmd_queue.ts';
import { CmdDeliveryStatus, MLX5_MAX_COMMANDS } from '../formats/cmd_layout.ts';
import { EventType } from '../formats/constants.ts';
import { EnumType } from '../../sim/enum_type.ts';
import type { HcaConfig } from '../config.ts';
import { IcmNeedPages, IcmNoMemory, type Icm } from '../memory/icm.ts';
import { BOOT_PAGES, INIT_PAGES, type FwPages } from './fw_pages.ts';
import { ManagePagesOpMod, QueryPagesOpMod } from '../formats/constants.ts';
import { FRAME_SIZE } from '../memory/host_mem.ts';
import type { IcmWriter } from './icm_writer.ts';
import { ICM_BYTE3, ICM_ALLOCATED, ICM_MW_COUNT, ICM_XLT_ADDR, ICM_XLT_COUNT } from '../memory/icm_mkey.ts';
import { CmdOpcode, MKEY_QPN_NONE, MkcAccessMode, PageFaultFlag, makeKey } from '../formats/constants.ts';
import type { Klm } from '../formats/klm.ts';
import { RESERVED_MKEY_INDICES, hcaCaps, queryHcaCap, type HcaCaps, type HcaCapsOverride } from './hca_caps.ts';
import { IndexAllocator, RoundRobinAllocator } from './index_alloc.ts';
import {
  CmdError,
  CmdOpcodeEnum,
  CmdStatus,
  CmdStatusEnum,
  type Cmd,
  type CmdInputs,
  type CmdName,
  type CmdOf,
  type CmdOutputs,
  type CmdStatusName,
  type CqContext,
  type EqContext,
  type QpContext,
  type QpState,
} from './cmd_types.ts';
import { hex } from '../formats/field.ts';
import { ADAPTER_PAGE_SHIFT, MAX_LOG_PAGE_SIZE, pasPagesFor, type QueuePages } from '../memory/pas.ts';
import { rqStride } from '../formats/rq_wqe.ts';

export * from './cmd_types.ts';

/** Delivery statuses traced as `cmd_deliv_status` (MLX5_CMD_DELIVERY_STAT_*). */
export const CmdDeliveryStatusEnum = new EnumType('cmd_deliv_status', Object.fromEntries(Object.entries(CmdDeliveryStatus).map(([k, v]) => [v, k])));

/** MANAGE_PAGES op_mods traced as `manage_pages_op_mod` (pg_op_mod). */
export const ManagePagesOpModEnum = new EnumType('manage_pages_op_mod', Object.fromEntries(Object.entries(ManagePagesOpMod).map(([k, v]) => [v, k])));

/** The states of the command interface. */
export const [CmdifState, CMDIF] = enumType('cmdif_state', ['IDLE', 'EXEC', 'FETCH']);

/** Options of the command interface. */
export interface CmdifOptions {
  /** Capability overrides (e.g. `{ odp: false }`): what QUERY_HCA_CAP reports. */
  caps?: HcaCapsOverride;
  /** Called when PAGE_FAULT_RESUME executes (the ODP page-fault module resumes the QP). */
  onPageFaultResume?: (qpn: number, flags: number) => void;
}

/** What the firmware uses: the ICM writer (every change of ICM goes through it) and the mkey table's size. */
export interface CmdifDeps {
  readonly writer: Pick<IcmWriter, 'writeNewMkey' | 'readMkey' | 'isAllocated' | 'destroyMkey' | 'contextBytes'>;
  readonly icm: Pick<Icm, 'mkeyEntries' | 'qpc' | 'cqc' | 'eqc' | 'releaseAll'>;
  /** The pages the driver gives (MANAGE_PAGES); absent: no page commands (a lone firmware). */
  readonly pages?: FwPages;
  /** Host memory's size: a given page must lie in it. */
  readonly hostBytes?: number;
  /**
   * True when the device may reach page `pa` (the IOMMU maps it: the driver pinned it). A page
   * given that is not is refused (BAD_PARAM), so a bad MANAGE_PAGES never makes ICM of memory
   * the device does not own (a model check: real firmware trusts the addresses).
   */
  readonly pageOwned?: (pa: number) => boolean;
}

/**
 * The HCA's life as mlx5_core drives it (main.c mlx5_function_enable / mlx5_function_open at
 * start-up, mlx5_function_close / mlx5_function_disable at close, main.c:1158-1316):
 * - READY until the driver sends ENABLE_HCA (a testbench without the driver's start-up finds the
 *   firmware ready, its ICM taken from host memory: a model convenience);
 * - ENABLED from ENABLE_HCA: only the start-up commands run (QUERY_PAGES, MANAGE_PAGES,
 *   QUERY_HCA_CAP, INIT_HCA, and DISABLE_HCA, mlx5_function_enable's error path main.c:1207-1212);
 * - UP from INIT_HCA: every command;
 * - TORN_DOWN from TEARDOWN_HCA: every object is gone and ICM is empty; only QUERY_PAGES,
 *   MANAGE_PAGES (the driver takes its pages back) and DISABLE_HCA run;
 * - DISABLED from DISABLE_HCA: only ENABLE_HCA runs (the function starts again).
 * A command the state does not allow fails BAD_SYS_STATE, naming the state (the PRM is not
 * public: the status is the one mlx5 defines for "bad system state", cmd.c cmd_status_to_err).
 */
export type HcaState = 'READY' | 'ENABLED' | 'UP' | 'TORN_DOWN' | 'DISABLED';
const ALLOWED: Readonly<Partial<Record<HcaState, ReadonlySet<string>>>> = {
  ENABLED: new Set(['QUERY_PAGES', 'MANAGE_PAGES', 'QUERY_HCA_CAP', 'INIT_HCA', 'DISABLE_HCA']),
  TORN_DOWN: new Set(['QUERY_PAGES', 'MANAGE_PAGES', 'DISABLE_HCA']),
  DISABLED: new Set(['ENABLE_HCA']),
};
const STATE_RULE: Readonly<Record<HcaState, string>> = {
  READY: '',
  ENABLED: 'hca_not_initialized',
  UP: '',
  TORN_DOWN: 'hca_torn_down',
  DISABLED: 'hca_disabled',
};
/** TEARDOWN_HCA's profiles (mlx5_ifc.h MLX5_TEARDOWN_HCA_IN_PROFILE_*): only the graceful close mlx5_cmd_teardown_hca sends (fw.c:307) is modelled. */
const TEARDOWN_GRACEFUL = 0;

/** Wiring of the command interface (no clock: firmware runs as a process), its configuration and options. */
export interface CmdifWiring extends UnclockedWireOptions<{ readonly dma: DmaPort }, CmdifDeps>, CmdifOptions {
  /** The adapter's configuration: command latencies, QP defaults, what the capabilities derive from. */
  readonly cfg: HcaConfig;
}

/**
 * The first mkey index CREATE_MKEY hands out. Index 0 is never used, and index 1 stays the
 * firmware's: its key 0x100 with tag 0 is the reserved invalid / terminate-scatter lkey
 * (spec/mlx5.md "Keys"), which a created mkey must never alias.
 */
export const FIRST_MKEY_INDEX = RESERVED_MKEY_INDICES;
/** The first QP number: 0 and 1 are the IB special QPs; mlx5 numbers user QPs well above (assumed 0x100). */
export const FIRST_QPN = 0x100;
/** The first PD and CQ number (0 is kept unused so a zeroed field never names a live object; assumed). */
export const FIRST_PD = 1;
export const FIRST_CQN = 1;
/** EQ numbers start at 0, as mlx5 creates its async EQ first (assumed). */
export const FIRST_EQN = 0;

/** Valid states for each QP transition: the IB state machine (mlx5 qp.c optab). 2ERR is allowed from every state. */
const QP_TRANSITIONS: Readonly<Record<'RST2INIT_QP' | 'INIT2RTR_QP' | 'RTR2RTS_QP' | '2ERR_QP', { from: readonly QpState[]; to: QpState }>> = {
  RST2INIT_QP: { from: ['RESET'], to: 'INIT' },
  INIT2RTR_QP: { from: ['INIT'], to: 'RTR' },
  RTR2RTS_QP: { from: ['RTR'], to: 'RTS' },
  '2ERR_QP': { from: ['RESET', 'INIT', 'RTR', 'RTS', 'ERR'], to: 'ERR' },
};

const MTUS: readonly number[] = [256, 512, 1024, 2048, 4096];
const IB_ACCESS_MASK = 0xf; // LOCAL_WRITE 1 | REMOTE_WRITE 2 | REMOTE_READ 4 | REMOTE_ATOMIC 8 (icm_mkey.ts)
const RESUME_FLAGS = PageFaultFlag.REQUESTOR | PageFaultFlag.WRITE | PageFaultFlag.RDMA | PageFaultFlag.ERROR;
/** Smallest MTT page: 4 KiB (ConnectX page_size_cap 0xfffffffffffff000: pages of 2^12 and up). */
const MIN_LOG_PAGE_SIZE = 12;
const QUEUED_MAX = 255;
/** Background commands executed together in one round (see the file comment). */
export const BACKGROUND_SLOTS = 8;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * A command in a lane: posted by `exec` (an object, known at once) or read from a queue entry
 * (`fetched` resolves when its input has been read: the command, the CmdError a malformed input
 * decodes to, or null after a delivery error, which the lane skips).
 */
interface Posted {
  cmd: Cmd | CmdError | null;
  fetched: Promise<Cmd | CmdError | null> | null;
  posted: number;
  settle: (cmd: Cmd | CmdError, out: unknown, failed: unknown) => void;
}

/** A command's effect: its output, or what it failed with (null: it did not). */
interface Executed {
  out: unknown;
  failed: unknown;
}

/** The command's name, whatever software posted (a mailbox may hold anything). */
function opName(cmd: unknown): string {
  return cmd !== null && typeof cmd === 'object' ? String((cmd as { op?: unknown }).op) : '';
}

function opcodeOf(op: string): number {
  return Object.hasOwn(CmdOpcode, op) ? CmdOpcode[op as keyof typeof CmdOpcode] : 0;
}

/** Sees every firmware command (the transaction log); null when untraced. */
export interface CmdTap {
  /** `op` posted at `posted`, executed from `start` to now; `status` its mlx5 status (0 OK). */
  command(op: string, opcode: number, posted: number, start: number, status: number, background: boolean): void;
}

/** The mlx5 status a command ended with: OK, its CmdError's, or INTERNAL_ERR for any other throw. */
function statusOf(failed: unknown): number {
  return failed === null ? CmdStatus.OK : failed instanceof CmdError ? failed.status : CmdStatus.INTERNAL_ERR;
}

/**
 * The firmware command interface of one HCA. Resource numbers come from deterministic
 * allocators (lowest free first), so a run's numbers depend only on its commands.
 */
export class Cmdif extends Module {
  /** The transaction log's tap; null when untraced. */
  tap: CmdTap | null = null;
  /** What QUERY_HCA_CAP reports. */
  readonly caps: HcaCaps;
  /** Called when PAGE_FAULT_RESUME executes; the ODP module sets it. */
  onPageFaultResume: ((qpn: number, flags: number) => void) | null;
  /** Traced: cmdif_state. */
  readonly state: Signal;
  /** Traced: the opcode in execution (cmd_opcode). */
  readonly opcode: Signal;
  /** Traced: executing. */
  readonly busy: Signal;
  /** Traced: commands waiting for the firmware. */
  readonly queued: Signal;
  /** Traced: status of the last completed command (cmd_status). */
  readonly status: Signal;
  /** Traced: a round of background commands executing. */
  readonly bgBusy: Signal;
  /** Traced: background commands waiting for a round (saturates at 255). */
  readonly bgQueued: Signal;

  /** Traced: the page entry's command executing (MANAGE_PAGES), its opcode, op_mod, pages and last status. */
  readonly pgBusy: Signal;
  readonly pgOpcode: Signal;
  readonly pgOpMod: Signal;
  readonly pgPages: Signal;
  readonly pgStatus: Signal;

  /** Traced: the entry of the latest doorbell bit the queue engine took. */
  readonly entry: Signal;
  /** Traced: the delivery status of the last entry given back (cmd_deliv_status). */
  readonly delivStatus: Signal;
  /** The command queue in host memory (cmd_queue.ts): doorbells, entries, mailboxes, EQEs. */
  readonly cmdq: CmdQueueEngine;
  /** Raises a command-completion EQE (hca.ts routes it to the EQ writer). */
  onCmdEqe: ((data: Uint8Array) => void) | null = null;

  private readonly queue: Posted[] = [];
  private serving = false;
  private readonly pageQueue: Posted[] = [];
  private pageServing = false;
  /** The start-up state (HcaState). */
  hcaState: HcaState = 'READY';
  private readonly pages: FwPages | null;
  private readonly hostBytes: number;
  private readonly pageOwned: (pa: number) => boolean;
  private readonly bgQueue: Posted[] = [];
  private bgServing = false;
  private bgRunning = 0;
  private curOp = '';
  private curOpMod = 0;
  private readonly pds: IndexAllocator;
  private readonly mkeys: IndexAllocator;
  private readonly eqns: IndexAllocator;
  private readonly cqns: IndexAllocator;
  private readonly qpns: RoundRobinAllocator;
  private readonly eqs = new Map<number, EqContext>();
  private readonly cqs = new Map<number, CqContext>();
  private readonly qps = new Map<number, Mutable<QpContext>>();
  /**
   * Told when DESTROY_QP / DESTROY_CQ executes, so the engines forget the object's queue state
   * (its number may be handed out again). The adapter registers its engines here.
   */
  readonly destroyListeners: ((what: 'QP' | 'CQ' | 'EQ', num: number) => void)[] = [];
  private readonly perOp = new Map<string, Counter>();
  private readonly sErrors: Counter;
  private readonly sLatency: Histogram;
  private readonly sWait: Histogram;

  private readonly cfg: HcaConfig;
  private readonly writer: CmdifDeps['writer'];
  private readonly icm: CmdifDeps['icm'];

  constructor(parent: Module, name: string, opts: CmdifWiring) {
    super(parent.sim, parent, name);
    this.cfg = opts.cfg;
    this.writer = opts.deps.writer;
    this.icm = opts.deps.icm;
    this.pages = opts.deps.pages ?? null;
    this.hostBytes = opts.deps.hostBytes ?? 0;
    this.pageOwned = opts.deps.pageOwned ?? (() => true);
    this.caps = hcaCaps(opts.cfg, opts.caps);
    this.onPageFaultResume = opts.onPageFaultResume ?? null;
    this.state = this.signal('state', CmdifState.width, { enum: CmdifState });
    this.opcode = this.signal('opcode', CmdOpcodeEnum.width, { enum: CmdOpcodeEnum });
    this.busy = this.signal('busy', 1);
    this.queued = this.signal('queued', 8);
    this.status = this.signal('status', CmdStatusEnum.width, { enum: CmdStatusEnum });
    this.bgBusy = this.signal('bg_busy', 1);
    this.bgQueued = this.signal('bg_queued', 8);
    this.pgBusy = this.signal('pg_busy', 1);
    this.pgOpcode = this.signal('pg_opcode', CmdOpcodeEnum.width, { enum: CmdOpcodeEnum });
    this.pgOpMod = this.signal('pg_op_mod', ManagePagesOpModEnum.width, { enum: ManagePagesOpModEnum });
    this.pgPages = this.signal('pg_pages', 32);
    this.pgStatus = this.signal('pg_status', CmdStatusEnum.width, { enum: CmdStatusEnum });
    this.entry = this.signal('entry', Math.log2(MLX5_MAX_COMMANDS));
    this.delivStatus = this.signal('deliv_status', CmdDeliveryStatusEnum.width, { enum: CmdDeliveryStatusEnum });
    this.cmdq = new CmdQueueEngine({
      sim: this.sim,
      dma: new FwDma(this.sim, opts.ports.dma, this),
      post: (bg, fetched, settle, pages) => this.postEntry(bg, fetched, settle, pages),
      cmdEqExists: () => this.cmdEqExists(),
      raiseCmdEqe: (data) => this.onCmdEqe?.(data),
      entrySig: this.entry,
      delivSig: this.delivStatus,
      stats: this.stats,
    });
    const g = this.caps.general.max;
    this.pds = new IndexAllocator(FIRST_PD, FIRST_PD + g.maxPd);
    // every index of the ICM table past the reserved ones (maxMr advertises exactly this many)
    this.mkeys = new IndexAllocator(FIRST_MKEY_INDEX, Math.max(FIRST_MKEY_INDEX, this.icm.mkeyEntries));
    this.eqns = new IndexAllocator(FIRST_EQN, FIRST_EQN + g.maxEq);
    this.cqns = new IndexAllocator(FIRST_CQN, Math.min(2 ** 24, FIRST_CQN + g.maxCq)); // cqn is 24 bits
    this.qpns = new RoundRobinAllocator(FIRST_QPN, FIRST_QPN + g.maxQp);
    for (const name of Object.keys(CmdOpcode)) this.perOp.set(name, this.stats.counter(`cmd_${name}`));
    this.sErrors = this.stats.counter('errors');
    this.sLatency = this.stats.histogram('latency_ps');
    this.sWait = this.stats.histogram('queue_wait_ps');
  }

  /** A command posted and not completed. */
  override hasWork(): boolean {
    return this.outstanding > 0;
  }

  /** Commands posted and not completed (waiting or executing), background ones included. */
  get outstanding(): number {
    return this.queue.length + (this.busy.q === 1 ? 1 : 0) + this.bgQueue.length + this.bgRunning + this.pageQueue.length + this.cmdq.inFlight;
  }

  /**
   * Posts a background command (the driver's own housekeeping, which no caller waits for):
   * executed in the background lane, never ahead of or in the way of `exec`'s commands. Its
   * promise resolves or rejects as exec's.
   */
  execBackground<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    if (!this.sim.inRun) this.sim.checkInProcess(`${this.path}.execBackground(${opName(cmd)})`); // (its message made only when it fails)
    const done = this.post<K>(this.bgQueue, this.bgQueued, cmd);
    if (!this.bgServing) {
      this.bgServing = true;
      void this.sim.spawn(() => this.serveBackground());
    }
    return done;
  }

  /**
   * Posts a command. It waits for the commands posted before it, executes after its firmware
   * latency, and the promise resolves with its output then (or rejects with a CmdError).
   * Call it from a process (inside `sim.run`).
   */
  exec<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    if (!this.sim.inRun) this.sim.checkInProcess(`${this.path}.exec(${opName(cmd)})`); // (its message made only when it fails)
    const done = this.post<K>(this.queue, this.queued, cmd);
    if (!this.serving) {
      this.serving = true;
      void this.sim.spawn(() => this.serve());
    }
    return done;
  }

  /** Queues `cmd` on a lane (its queue and the signal tracing its depth); settled when it executes. */
  private post<K extends CmdName>(queue: Posted[], queued: Signal, cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    return new Promise<CmdOutputs[K]>((resolve, reject) => {
      const settle = (_c: Cmd | CmdError, out: unknown, failed: unknown): void => (failed === null ? resolve(out as CmdOutputs[K]) : reject(failed));
      queue.push({ cmd: cmd as unknown as Cmd, fetched: null, posted: this.sim.now, settle });
      queued.setNow(Math.min(queue.length, QUEUED_MAX));
    });
  }

  /** The command queue engine hands over a queue entry as it starts reading it (doorbell order). */
  private postEntry(background: boolean, fetched: Promise<Cmd | CmdError | null>, settle: Posted['settle'], pages: boolean): void {
    if (pages) {
      this.pageQueue.push({ cmd: null, fetched, posted: this.sim.now, settle });
      if (!this.pageServing) {
        this.pageServing = true;
        void this.sim.spawn(() => this.servePages());
      }
      return;
    }
    const queue = background ? this.bgQueue : this.queue;
    queue.push({ cmd: null, fetched, posted: this.sim.now, settle });
    (background ? this.bgQueued : this.queued).setNow(Math.min(queue.length, QUEUED_MAX));
    if (background && !this.bgServing) {
      this.bgServing = true;
      void this.sim.spawn(() => this.serveBackground());
    } else if (!background && !this.serving) {
      this.serving = true;
      void this.sim.spawn(() => this.serve());
    }
  }

  /** The firmware latency of a command (spec/timing.md "firmware command"). */
  latencyOf(op: string): number {
    return op === 'CREATE_MKEY' ? this.cfg.fwCreateMkeyPs : this.cfg.fwCommandPs;
  }

  /** Objects the firmware holds now (what a churn test keeps bounded). */
  resourcesInUse(): { pds: number; mkeys: number; eqs: number; cqs: number; qps: number } {
    return { pds: this.pds.size, mkeys: this.mkeys.size, eqs: this.eqs.size, cqs: this.cqs.size, qps: this.qps.size };
  }

  /** True when `pd` was allocated by ALLOC_PD. */
  hasPd(pd: number): boolean {
    return this.pds.has(pd);
  }

  /** The EQ `eqn`, or undefined. */
  getEq(eqn: number): Readonly<EqContext> | undefined {
    return this.eqs.get(eqn);
  }

  /** Every EQ, in increasing eqn order (the EQ writer routes events by their event masks). */
  eqList(): readonly Readonly<EqContext>[] {
    // asked per EQE and per command doorbell: made again only when an EQ comes or goes
    this.eqSorted ??= Object.freeze([...this.eqs.values()].sort((a, b) => a.eqn - b.eqn));
    return this.eqSorted;
  }

  /** `eqList`'s answer until an EQ is created or destroyed (null: to be made). */
  private eqSorted: readonly Readonly<EqContext>[] | null = null;

  /** Whether some EQ takes command-completion events. */
  private cmdEqExists(): boolean {
    const l = this.eqList();
    for (let i = 0; i < l.length; i++) if (((l[i].eventMask >>> EventType.CMD) & 1) !== 0) return true;
    return false;
  }

  /** Every CQ, in increasing cqn order. */
  cqList(): readonly Readonly<CqContext>[] {
    return [...this.cqs.values()].sort((a, b) => a.cqn - b.cqn);
  }

  /** The CQ `cqn`, or undefined. */
  getCq(cqn: number): Readonly<CqContext> | undefined {
    return this.cqs.get(cqn);
  }

  /** The QP `qpn` (a live view: its state follows the modify commands), or undefined. */
  getQp(qpn: number): Readonly<QpContext> | undefined {
    return this.qps.get(qpn);
  }

  /** The DMA fence DESTROY_MKEY completes behind (hca.ts sets it; null: none). */
  dmaFence: { drain(index: number): Promise<void> } | null = null;

  /** The firmware: one command at a time, in posting order. */
  private async serve(): Promise<void> {
    while (this.queue.length > 0) {
      const p = this.queue.shift() as Posted;
      this.queued.setNow(Math.min(this.queue.length, QUEUED_MAX));
      if (p.fetched !== null) {
        this.busy.setNow(1);
        this.state.setNow(CMDIF.FETCH);
        p.cmd = await p.fetched;
        if (p.cmd === null) continue; // a delivery error: nothing to execute
      }
      const cmd = p.cmd as Cmd | CmdError;
      const op = opName(cmd);
      this.state.setNow(CMDIF.EXEC);
      this.opcode.setNow(opcodeOf(op));
      this.busy.setNow(1);
      this.sWait.add(this.sim.now - p.posted);
      const start = this.sim.now;
      await this.sim.delay(this.latencyOf(op));
      this.perOp.get(op)?.inc();
      const x = this.executeWithPages(cmd);
      const { out, failed } = x instanceof Promise ? await x : x;
      // DESTROY_MKEY returns once the DMA translated through the mkey has finished, as the
      // invalidating UMR completes (umr/umr_engine.ts): the driver then frees the MR's pages
      if (failed === null && op === 'DESTROY_MKEY' && this.dmaFence !== null && 'index' in cmd) await this.dmaFence.drain(cmd.index);
      this.sLatency.add(this.sim.now - p.posted);
      const status = statusOf(failed);
      if (this.tap !== null) this.tap.command(op, opcodeOf(op), p.posted, start, status, false);
      this.status.setNow(status);
      if (failed !== null) this.sErrors.inc();
      p.settle(cmd, out, failed);
    }
    this.serving = false;
    this.state.setNow(CMDIF.IDLE);
    this.opcode.setNow(0);
    this.busy.setNow(0);
  }

  /** The background lane: rounds of up to BACKGROUND_SLOTS commands, in posting order. */
  private async serveBackground(): Promise<void> {
    while (this.bgQueue.length > 0) {
      const posted = this.bgQueue.splice(0, BACKGROUND_SLOTS);
      this.bgRunning = posted.length;
      this.bgQueued.setNow(Math.min(this.bgQueue.length, QUEUED_MAX));
      this.bgBusy.setNow(1);
      for (const p of posted) if (p.fetched !== null) p.cmd = await p.fetched;
      // a fetched entry that failed delivery has nothing to execute
      const round = posted.filter((p) => p.fetched === null || p.cmd !== null);
      this.bgRunning = round.length;
      let latency = 0;
      for (const p of round) latency = Math.max(latency, this.latencyOf(opName(p.cmd)));
      const start = this.sim.now;
      await this.sim.delay(latency);
      for (const p of round) {
        const cmd = p.cmd as Cmd | CmdError;
        this.perOp.get(opName(cmd))?.inc();
        const x = this.executeWithPages(cmd);
        const { out, failed } = x instanceof Promise ? await x : x;
        this.bgRunning--;
        if (this.tap !== null) {
          const op = opName(cmd);
          this.tap.command(op, opcodeOf(op), p.posted, start, statusOf(failed), true);
        }
        if (failed !== null) this.sErrors.inc();
        p.settle(cmd, out, failed);
      }
    }
    this.bgServing = false;
    this.bgBusy.setNow(0);
  }

  /**
   * The page entry's lane: MANAGE_PAGES executes even while a command of another lane waits for
   * the pages it gives (mlx5's separate pages semaphore, cmd.c).
   */
  private async servePages(): Promise<void> {
    while (this.pageQueue.length > 0) {
      const p = this.pageQueue.shift() as Posted;
      const cmd = await p.fetched;
      if (cmd === null) continue;
      const op = opName(cmd);
      const mod = op === 'MANAGE_PAGES' && !(cmd instanceof CmdError) ? (cmd as CmdInputs['MANAGE_PAGES']).opMod : -1;
      this.pgBusy.setNow(1);
      this.pgOpcode.setNow(opcodeOf(op));
      this.pgOpMod.setNow(mod >= 0 && mod <= ManagePagesOpMod.HCA_RETURN_PAGES ? mod : 0);
      this.pgPages.setNow(0);
      const start = this.sim.now;
      await this.sim.delay(this.latencyOf(op));
      this.perOp.get(op)?.inc();
      const x = this.executeWithPages(cmd);
      const { out, failed } = x instanceof Promise ? await x : x;
      // the pages moved: given (the input's list) or returned (the output's)
      if (failed === null && mod === ManagePagesOpMod.ALLOCATION_SUCCESS) this.pgPages.setNow(Math.min(2 ** 32 - 1, (cmd as CmdInputs['MANAGE_PAGES']).pas?.length ?? 0));
      else if (failed === null && mod === ManagePagesOpMod.HCA_RETURN_PAGES) this.pgPages.setNow((out as CmdOutputs['MANAGE_PAGES']).pas.length);
      const status = statusOf(failed);
      this.pgStatus.setNow(status);
      if (this.tap !== null) this.tap.command(op, opcodeOf(op), p.posted, start, status, false);
      if (failed !== null) this.sErrors.inc();
      p.settle(cmd, out, failed);
    }
    this.pageServing = false;
    this.pgBusy.setNow(0);
    this.pgOpcode.setNow(0);
  }

  /**
   * A command's effect; when ICM needs pages the firmware does not hold, the command waits for
   * the driver's MANAGE_PAGES (a PAGE_REQUEST, fw_pages.ts) and runs again (nothing was changed),
   * or fails NO_RESOURCES when the driver has none.
   */
  private executeWithPages(cmd: Cmd | CmdError): Executed | Promise<Executed> {
    // the usual case, ICM had its pages: no process hop
    try {
      return { out: this.execute(cmd), failed: null };
    } catch (e) {
      if (!(e instanceof IcmNeedPages) || this.pages === null) return { out: undefined, failed: e };
      return this.executeAfterPages(cmd, e);
    }
  }

  /** The rest of `executeWithPages` once ICM asked for `need`'s pages: wait for them, run again. */
  private async executeAfterPages(cmd: Cmd | CmdError, need: IcmNeedPages): Promise<Executed> {
    let e: unknown = need;
    for (;;) {
      if (!(e instanceof IcmNeedPages) || this.pages === null) return { out: undefined, failed: e };
      if (!(await this.pages.request(e.pages))) {
        // the page lane ran meanwhile: name this command again
        const op = opName(cmd);
        const mod = op === 'QUERY_HCA_CAP' ? (cmd as { opMod: number }).opMod & 0xffff : 0;
        const detail = `ICM needs ${e.pages} more pages for ${e.what} and the driver gave none (MANAGE_PAGES ALLOCATION_FAIL, or no EQ takes PAGE_REQUEST)`;
        return { out: undefined, failed: new CmdError(op, opcodeOf(op), mod, 'NO_RESOURCES', 'icm_pages', detail) };
      }
      try {
        return { out: this.execute(cmd), failed: null };
      } catch (x) {
        e = x;
      }
    }
  }

  /** A command's effect, at the end of its latency. */
  private execute(cmd: Cmd | CmdError): unknown {
    // an input that did not decode: the status its decoder gave, after the firmware's time
    if (cmd instanceof CmdError) throw cmd;
    this.curOp = opName(cmd);
    this.curOpMod = 0;
    // a mailbox that holds no command (software posted garbage): the firmware reads no opcode
    if (cmd === null || typeof cmd !== 'object') return this.fail('BAD_OP', 'opcode', `no command in the mailbox (${typeof cmd})`);
    const modded = cmd.op === 'QUERY_HCA_CAP' || cmd.op === 'QUERY_PAGES' || cmd.op === 'MANAGE_PAGES';
    this.curOpMod = modded && Number.isInteger(cmd.opMod) ? cmd.opMod & 0xffff : 0;
    const allowed = ALLOWED[this.hcaState];
    if (allowed !== undefined && !allowed.has(cmd.op)) {
      const why = this.hcaState === 'ENABLED' ? 'before INIT_HCA (only the start-up commands run after ENABLE_HCA)' : this.hcaState === 'TORN_DOWN' ? 'after TEARDOWN_HCA (only QUERY_PAGES, MANAGE_PAGES and DISABLE_HCA run)' : 'after DISABLE_HCA (only ENABLE_HCA runs)';
      this.fail('BAD_SYS_STATE', STATE_RULE[this.hcaState], `${cmd.op} ${why}`);
    }
    switch (cmd.op) {
      case 'ENABLE_HCA':
        if ((this.hcaState !== 'READY' && this.hcaState !== 'DISABLED') || this.pages === null) this.fail('BAD_SYS_STATE', 'hca_enabled', `ENABLE_HCA in state ${this.hcaState}`);
        this.uint('function_id', cmd.functionId ?? 0, 16);
        this.hcaState = 'ENABLED';
        return undefined;
      case 'INIT_HCA':
        if (this.hcaState !== 'ENABLED') this.fail('BAD_SYS_STATE', 'hca_init_state', `INIT_HCA in state ${this.hcaState} (ENABLE_HCA first, once)`);
        // the context tables' first pages, from the init pages (fw_pages.ts INIT_PAGES)
        try {
          this.icm.qpc.reserve(FIRST_QPN);
          this.icm.cqc.reserve(FIRST_CQN);
          this.icm.eqc.reserve(FIRST_EQN);
        } catch (e) {
          if (e instanceof IcmNoMemory) this.fail('NO_RESOURCES', 'icm_pages', e.message);
          throw e;
        }
        this.hcaState = 'UP';
        return undefined;
      case 'TEARDOWN_HCA':
        return this.teardownHca(cmd);
      case 'DISABLE_HCA':
        return this.disableHca(cmd);
      case 'QUERY_PAGES':
        return this.queryPages(cmd);
      case 'MANAGE_PAGES':
        return this.managePages(cmd);
      case 'QUERY_HCA_CAP':
        return this.queryHcaCap(cmd);
      case 'ALLOC_PD':
        return this.allocPd();
      case 'DEALLOC_PD':
        return this.deallocPd(cmd);
      case 'CREATE_MKEY':
        return this.createMkey(cmd);
      case 'QUERY_SPECIAL_CONTEXTS':
        return { resdLkey: MLX5_INVALID_LKEY, nullMkey: NULL_MKEY };
      case 'QUERY_MKEY':
        return this.queryMkey(cmd);
      case 'DESTROY_MKEY':
        return this.destroyMkey(cmd);
      case 'PAGE_FAULT_RESUME':
        return this.pageFaultResume(cmd);
      case 'CREATE_EQ':
        return this.createEq(cmd);
      case 'CREATE_CQ':
        return this.createCq(cmd);
      case 'DESTROY_CQ':
        return this.destroyCq(cmd);
      case 'DESTROY_EQ':
        return this.destroyEq(cmd);
      case 'CREATE_QP':
        return this.createQp(cmd);
      case 'DESTROY_QP':
        return this.destroyQp(cmd);
      case 'QUERY_QP':
        // a snapshot: the QP context as the hardware holds it at the end of the command
        return { ...this.qpOf(cmd.qpn) };
      case 'RST2INIT_QP':
      case 'INIT2RTR_QP':
      case 'RTR2RTS_QP':
      case '2ERR_QP':
        return this.modifyQp(cmd);
      default: {
        const op = String((cmd as { op: unknown }).op);
        return this.fail('BAD_OP', 'opcode', opcodeOf(op) !== 0 ? `${op} is not modelled` : `unknown command '${op}'`);
      }
    }
  }

  /** QUERY_PAGES: the pages the firmware needs now (boot, init; regular: it asks by PAGE_REQUEST). */
  private queryPages(c: CmdInputs['QUERY_PAGES']): CmdOutputs['QUERY_PAGES'] {
    if (this.pages === null) return this.fail('BAD_OP', 'opcode', 'QUERY_PAGES: this firmware has no page pool');
    const mod = c.opMod;
    if (mod !== QueryPagesOpMod.BOOT_PAGES && mod !== QueryPagesOpMod.INIT_PAGES && mod !== QueryPagesOpMod.REGULAR_PAGES) {
      this.fail('BAD_PARAM', 'op_mod', `op_mod ${String(mod)} is not boot (1), init (2) or regular (3) pages`);
    }
    this.uint('function_id', c.functionId ?? 0, 16);
    const numPages = mod === QueryPagesOpMod.BOOT_PAGES ? BOOT_PAGES : mod === QueryPagesOpMod.INIT_PAGES ? INIT_PAGES : 0;
    return { functionId: 0, numPages };
  }

  /** MANAGE_PAGES: pages given (each 4 KiB-aligned host memory, not held already), the driver's "none", or a return (none here). */
  private managePages(c: CmdInputs['MANAGE_PAGES']): CmdOutputs['MANAGE_PAGES'] {
    const pages = this.pages;
    if (pages === null) return this.fail('BAD_OP', 'opcode', 'MANAGE_PAGES: this firmware has no page pool');
    this.uint('function_id', c.functionId ?? 0, 16);
    switch (c.opMod) {
      case ManagePagesOpMod.ALLOCATION_SUCCESS: {
        const pas = this.list('pas', c.pas) ?? [];
        const seen = new Set<number>();
        for (let i = 0; i < pas.length; i++) {
          // (the field's name is made only for a page that fails: thousands are given per run)
          const v = pas[i];
          const pa = isUint(v, 64) ? v : this.uint(`pas[${i}]`, v, 64);
          if (pa % FRAME_SIZE !== 0 || pa === 0 || pa + FRAME_SIZE > this.hostBytes) {
            this.fail('BAD_PARAM', 'page_address', `pas[${i}] ${hex(pa)} is not a 4 KiB page of host memory`);
          }
          if (!this.pageOwned(pa)) this.fail('BAD_PARAM', 'page_not_mapped', `pas[${i}] ${hex(pa)} is not a page the driver mapped for the device (pinned)`);
          if (seen.has(pa) || pages.holds(pa)) this.fail('BAD_PARAM', 'page_twice', `pas[${i}] ${hex(pa)} is given twice`);
          seen.add(pa);
        }
        pages.give(pas as number[]);
        return { pas: [] };
      }
      case ManagePagesOpMod.ALLOCATION_FAIL:
        pages.allocationFailed();
        return { pas: [] };
      case ManagePagesOpMod.HCA_RETURN_PAGES:
        // pagealloc.c reclaim_pages: at most input_num_entries pages come back, listed in the output
        return { pas: pages.giveBack(this.uint('input_num_entries', c.numEntries ?? 0, 32)) };
      default:
        return this.fail('BAD_PARAM', 'op_mod', `op_mod ${String(c.opMod)} is not ALLOCATION_FAIL (0), ALLOCATION_SUCCESS (1) or HCA_RETURN_PAGES (2)`);
    }
  }

  /**
   * TEARDOWN_HCA (graceful close, fw.c:307 mlx5_cmd_teardown_hca): the firmware drops every object
   * the driver left (the driver destroys all of its own first, as mlx5 does; objects made by raw
   * commands behind its back still go here), frees
   * all of ICM into its page pool, and asks for no page from now on: the driver reclaims them.
   */
  private teardownHca(c: CmdInputs['TEARDOWN_HCA']): CmdOutputs['TEARDOWN_HCA'] {
    const profile = this.uint('profile', c.profile ?? 0, 16);
    if (profile !== TEARDOWN_GRACEFUL) this.fail('BAD_PARAM', 'teardown_profile', `profile ${profile} is not modelled (only 0, graceful close)`);
    if (this.hcaState !== 'UP') this.fail('BAD_SYS_STATE', 'hca_teardown_state', `TEARDOWN_HCA in state ${this.hcaState} (INIT_HCA first)`);
    for (const qpn of [...this.qps.keys()]) {
      this.qps.delete(qpn);
      for (const l of this.destroyListeners) l('QP', qpn);
    }
    for (const cqn of [...this.cqs.keys()]) {
      this.cqs.delete(cqn);
      this.cqns.release(cqn);
      for (const l of this.destroyListeners) l('CQ', cqn);
    }
    for (const eqn of [...this.eqs.keys()]) {
      this.eqs.delete(eqn);
      this.eqSorted = null;
      this.eqns.release(eqn);
      for (const l of this.destroyListeners) l('EQ', eqn);
    }
    for (const index of this.mkeys.liveNumbers()) {
      if (this.writer.readMkey(index).allocated) this.writer.destroyMkey(index);
      this.mkeys.release(index);
    }
    for (const pd of this.pds.liveNumbers()) this.pds.release(pd);
    this.icm.releaseAll();
    this.pages?.tornDown();
    this.hcaState = 'TORN_DOWN';
  }

  /**
   * DISABLE_HCA (main.c:842 mlx5_core_disable_hca), after TEARDOWN_HCA and the reclaim of every
   * page (main.c:1233), or in place of INIT_HCA on start-up's error path. Pages the driver did
   * not take back are dropped (fw_pages.ts disabled).
   */
  private disableHca(c: CmdInputs['DISABLE_HCA']): CmdOutputs['DISABLE_HCA'] {
    this.uint('function_id', c.functionId ?? 0, 16);
    if (this.hcaState !== 'TORN_DOWN' && this.hcaState !== 'ENABLED') {
      this.fail('BAD_SYS_STATE', 'hca_disable_state', `DISABLE_HCA in state ${this.hcaState} (TEARDOWN_HCA first)`);
    }
    this.pages?.disabled();
    this.hcaState = 'DISABLED';
  }

  private fail(status: CmdStatusName, rule: string, detail: string): never {
    throw new CmdError(this.curOp, opcodeOf(this.curOp), this.curOpMod, status, rule, detail);
  }

  /** An integer field of `bits` bits, else BAD_PARAM. */
  private uint(name: string, v: unknown, bits: number): number {
    if (!isUint(v, bits)) {
      this.fail('BAD_PARAM', `${name}_range`, `${name} ${String(v)} is not an unsigned integer of ${bits} bits`);
    }
    return v;
  }

  /** A one-bit field (a boolean), `dflt` when absent, else BAD_PARAM. */
  private bit(name: string, v: unknown, dflt: boolean): boolean {
    if (v === undefined) return dflt;
    if (typeof v !== 'boolean') this.fail('BAD_PARAM', `${name}_bit`, `${name} ${String(v)} is not a bit`);
    return v;
  }

  /** A list field (translation entries), else BAD_PARAM. */
  private list(name: string, v: unknown): readonly unknown[] | undefined {
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) this.fail('BAD_PARAM', `${name}_list`, `${name} is not a list`);
    return v;
  }

  /** A queue size: a power of two in 1..max (else BAD_PARAM, or EXCEED_LIM above max). */
  private queueSize(name: string, v: unknown, max: number): number {
    const n = this.uint(name, v, 32);
    if (n === 0 || (n & (n - 1)) !== 0) this.fail('BAD_PARAM', `${name}_pow2`, `${name} ${n} is not a power of two`);
    if (n > max) this.fail('EXCEED_LIM', `${name}_limit`, `${name} ${n} exceeds the device limit ${max}`);
    return n;
  }

  private pdOf(v: unknown): number {
    const pd = this.uint('pd', v, 24);
    if (!this.pds.has(pd)) this.fail('BAD_RESOURCE', 'pd_not_allocated', `pd ${hex(pd)} is not allocated`);
    return pd;
  }

  private qpOf(v: unknown): Mutable<QpContext> {
    const qpn = this.uint('qpn', v, 24);
    const qp = this.qps.get(qpn);
    if (qp === undefined) return this.fail('BAD_RESOURCE', 'qp_not_found', `qpn ${hex(qpn)} does not exist`);
    return qp;
  }

  private queryHcaCap(c: CmdInputs['QUERY_HCA_CAP']): CmdOutputs['QUERY_HCA_CAP'] {
    const r = queryHcaCap(this.caps, c.opMod);
    if (r === null) {
      return this.fail('BAD_PARAM', 'op_mod', `op_mod ${String(c.opMod)} is not a capability this HCA reports (0/1 general max/cur, 4/5 ODP max/cur)`);
    }
    return r;
  }

  private allocPd(): CmdOutputs['ALLOC_PD'] {
    const pd = this.pds.alloc();
    if (pd < 0) this.fail('NO_RESOURCES', 'pd_exhausted', `all ${this.caps.general.cur.maxPd} PDs are allocated`);
    return { pd };
  }

  /**
   * DEALLOC_PD. The firmware refuses a PD a QP still names (RESOURCE_BUSY; assumed: the PRM is
   * not public, and the kernel never gets here, as ib_dealloc_pd runs only at usecnt 0). Mkeys
   * naming the PD are the driver's business (verbs EBUSY), as the firmware keeps no count.
   */
  private deallocPd(c: CmdInputs['DEALLOC_PD']): CmdOutputs['DEALLOC_PD'] {
    const pd = this.pdOf(c.pd);
    for (const qp of this.qps.values()) {
      if (qp.pd === pd) this.fail('RESOURCE_BUSY', 'pd_in_use', `pd ${hex(pd)} is used by qpn ${hex(qp.qpn)}`);
    }
    this.pds.release(pd);
  }

  /** Whether ICM holds mkey `i` already (written behind the allocator's back): one closure, made once. */
  private readonly mkeyAllocated = (i: number): boolean => this.writer.isAllocated(i);

  private createMkey(c: CmdInputs['CREATE_MKEY']): CmdOutputs['CREATE_MKEY'] {
    const g = this.caps.general.cur;
    const tag = this.uint('tag', c.tag, 8);
    const mode = c.accessMode;
    if (mode !== MkcAccessMode.PA && mode !== MkcAccessMode.MTT && mode !== MkcAccessMode.KLMS && mode !== MkcAccessMode.KSM) {
      this.fail('BAD_PARAM', 'access_mode', `access mode ${String(mode)} is not modelled (PA 0, MTT 1, KLMS 2, KSM 3)`);
    }
    const access = this.uint('access', c.access, 32);
    if ((access & ~IB_ACCESS_MASK) !== 0) {
      this.fail('BAD_PARAM', 'access_flags', `access ${hex(access)} has bits other than LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC`);
    }
    const pd = this.pdOf(c.pd);
    const qpn = this.uint('qpn', c.qpn ?? MKEY_QPN_NONE, 24);
    const start = this.uint('start', c.start, 64);
    const length = this.uint('length', c.length, 64);
    const logPageSize = this.uint('log_page_size', c.logPageSize ?? MIN_LOG_PAGE_SIZE, 6);
    if (mode === MkcAccessMode.MTT && logPageSize < MIN_LOG_PAGE_SIZE) {
      this.fail('BAD_PARAM', 'log_page_size_min', `log_page_size ${logPageSize} is below 4 KiB pages (${MIN_LOG_PAGE_SIZE})`);
    }
    if (mode === MkcAccessMode.KSM && (c.mtt !== undefined || c.klm !== undefined)) this.fail('BAD_PARAM', 'translations_mode', 'a KSM mkey starts with every entry null (write them by UMR)');
    if (c.mtt !== undefined && mode !== MkcAccessMode.MTT) this.fail('BAD_PARAM', 'translations_mode', 'an MTT list needs access mode MTT');
    if (c.klm !== undefined && mode !== MkcAccessMode.KLMS) this.fail('BAD_PARAM', 'translations_mode', 'a KLM list needs access mode KLMS');
    const mtt = this.list('mtt', c.mtt)?.map((e, i) => this.uint(`mtt[${i}]`, e, 64));
    const klm: Klm[] | undefined = this.list('klm', c.klm)?.map((k, i) => {
      if (k === null || typeof k !== 'object') return this.fail('BAD_PARAM', 'klm_entry', `klm[${i}] is not an entry`);
      const e = k as Partial<Klm>;
      return { bcount: this.uint(`klm[${i}].bcount`, e.bcount, 32), key: this.uint(`klm[${i}].key`, e.key, 32), va: this.uint(`klm[${i}].va`, e.va, 64) };
    });
    const free = this.bit('free', c.free, false);
    const umrEn = this.bit('umr_en', c.umrEn, false);
    const remoteInval = this.bit('en_rinval', c.remoteInval, false);
    const len64 = this.bit('length64', c.len64, false);
    const pgAccess = this.bit('pg_access', c.pgAccess, false);
    const kind = this.uint('kind', c.kind ?? 0, 2);
    // zero-based is what mlx5 makes of it, an MR whose start_addr (its iova) is 0 (mr.c:87
    // set_mkc_access_pd_addr_fields writes the iova; ibv_reg_mr(3): hca_va 0 "has the same
    // effect as IBV_ACCESS_ZERO_BASED"), as the UMR engine takes it (umr_ops.ts applyMask)
    const zeroBased = start === 0 && !len64;
    const xltCapacity = this.uint('xlt_capacity', c.xltCapacity ?? 0, 32);
    if (mode === MkcAccessMode.KLMS && Math.max(klm?.length ?? 0, xltCapacity) > g.maxFastRegPageListLen) {
      this.fail(
        'EXCEED_LIM',
        'klm_list_size',
        `${Math.max(klm?.length ?? 0, xltCapacity)} KLMs exceed 2^log_max_klm_list_size = ${g.maxFastRegPageListLen}`,
      );
    }
    // the most entries one mkey may reserve (hca_caps.ts logMaxXlt, model-private in QUERY_HCA_CAP):
    // beyond it LIM_ERR ("limits exceeded", device.h:1483; mlx5 makes it ENOMEM, cmd.c:797) before
    // any ICM is asked of the driver
    const entries = Math.max(mtt?.length ?? 0, klm?.length ?? 0, xltCapacity);
    if (entries > g.maxXltEntries) {
      this.fail('EXCEED_LIM', 'xlt_capacity', `${entries} translation entries exceed 2^model_log_max_xlt = ${g.maxXltEntries}`);
    }
    // the firmware's own check of ICM too: an index written behind its back (a bench) is in use
    const index = this.mkeys.alloc(this.mkeyAllocated);
    if (index < 0) this.fail('NO_RESOURCES', 'mkey_exhausted', `no free mkey index below ${hex(this.mkeys.limit)}`);
    const desc = {
      index,
      tag,
      free,
      accessMode: mode,
      access,
      umrEn,
      remoteInval,
      pd,
      qpn,
      start,
      length,
      len64,
      logPageSize,
      pgAccess,
      mtt,
      klm,
      xltCapacity,
      kind,
      zeroBased,
    };
    try {
      this.writer.writeNewMkey(desc);
    } catch (e) {
      this.mkeys.release(index);
      // ICM could not get the host pages for the table (or the context's page): the firmware's
      // answer to a shortage of its memory is NO_RESOURCES (mlx5 maps it to ENOMEM)
      if (e instanceof IcmNoMemory) this.fail('NO_RESOURCES', 'icm_pages', e.message);
      throw e;
    }
    return { mkey: makeKey(index, tag), index };
  }

  /** An mkey index of the ICM table, else BAD_PARAM. */
  private mkeyIndexOf(v: unknown): number {
    const index = this.uint('mkey_index', v, 24);
    if (index >= this.icm.mkeyEntries) {
      this.fail('BAD_PARAM', 'mkey_index_table', `mkey index ${hex(index)} is beyond the mkey table (${this.icm.mkeyEntries} entries)`);
    }
    return index;
  }

  /**
   * The 64-byte context as the hardware defines it. A destroyed or never-created index is
   * answered too (firmware.ts keeps a destroyed context's bytes for post-mortem queries), with
   * `allocated` false. The bytes this model keeps in reserved fields (icm_mkey.ts: byte 3,
   * 36..47, the window count at 60..63) read as zero, as reserved bytes do: a zero-based MR
   * shows what mlx5 shows, start_addr 0.
   */
  private queryMkey(c: CmdInputs['QUERY_MKEY']): CmdOutputs['QUERY_MKEY'] {
    const index = this.mkeyIndexOf(c.index);
    const context = this.writer.contextBytes(index);
    const allocated = (context[ICM_BYTE3] & ICM_ALLOCATED) !== 0;
    context[ICM_BYTE3] = 0;
    context.fill(0, ICM_XLT_COUNT, ICM_XLT_ADDR + 8);
    context.fill(0, ICM_MW_COUNT, ICM_MW_COUNT + 4);
    return { context, allocated };
  }

  private destroyMkey(c: CmdInputs['DESTROY_MKEY']): CmdOutputs['DESTROY_MKEY'] {
    const index = this.mkeyIndexOf(c.index);
    if (!this.writer.readMkey(index).allocated) this.fail('BAD_RESOURCE', 'mkey_not_allocated', `mkey index ${hex(index)} is not allocated`);
    this.writer.destroyMkey(index);
    this.mkeys.release(index);
  }

  private pageFaultResume(c: CmdInputs['PAGE_FAULT_RESUME']): CmdOutputs['PAGE_FAULT_RESUME'] {
    const flagsQpn = this.uint('flags_qpn', c.flagsQpn, 32);
    const flags = flagsQpn >>> 24;
    const qp = this.qpOf(flagsQpn & 0xffffff);
    if ((flags & ~RESUME_FLAGS) !== 0) {
      this.fail('BAD_PARAM', 'resume_flags', `flags ${hex(flags)} has bits other than REQUESTOR, WRITE, RDMA, ERROR`);
    }
    qp.pageFaultResumes++;
    qp.lastResumeFlags = flags;
    this.onPageFaultResume?.(qp.qpn, flags);
  }

  private createEq(c: CmdInputs['CREATE_EQ']): CmdOutputs['CREATE_EQ'] {
    const size = this.queueSize('eq_size', c.size, 2 ** this.caps.general.cur.logMaxEqSz);
    const bufAddr = this.uint('buf_addr', c.bufAddr ?? 0, 64);
    const eventMask = this.uint('event_mask', c.eventMask ?? 0, 32);
    const eqn = this.eqns.alloc();
    if (eqn < 0) this.fail('NO_RESOURCES', 'eq_exhausted', `all ${this.caps.general.cur.maxEq} EQs exist`);
    this.contextIn(this.icm.eqc, eqn, () => this.eqns.release(eqn));
    this.eqs.set(eqn, Object.freeze({ eqn, size, bufAddr, eventMask }));
    this.eqSorted = null;
    return { eqn };
  }

  private createCq(c: CmdInputs['CREATE_CQ']): CmdOutputs['CREATE_CQ'] {
    const size = this.queueSize('cq_size', c.size, 2 ** this.caps.general.cur.logMaxCqSz);
    const eqn = this.uint('eqn', c.eqn, 8);
    if (!this.eqs.has(eqn)) this.fail('BAD_RESOURCE', 'eq_not_found', `eqn ${hex(eqn)} does not exist`);
    const bufAddr = this.uint('buf_addr', c.bufAddr ?? 0, 64);
    const dbrAddr = this.uint('dbr_addr', c.dbrAddr ?? 0, 64);
    const pages = this.pagesOf(c.pas, c.logPageSize, size * 64, bufAddr);
    const cqn = this.cqns.alloc();
    if (cqn < 0) this.fail('NO_RESOURCES', 'cq_exhausted', 'no free CQ number');
    this.contextIn(this.icm.cqc, cqn, () => this.cqns.release(cqn));
    this.cqs.set(cqn, Object.freeze({ cqn, size, eqn, bufAddr, dbrAddr, pages }));
    return { cqn };
  }

  /**
   * DESTROY_CQ. A CQ a QP still names is refused (RESOURCE_BUSY; assumed, as for DEALLOC_PD): a
   * completion must never find its CQ gone. The CQ writer forgets its producer counter.
   */
  private destroyCq(c: CmdInputs['DESTROY_CQ']): CmdOutputs['DESTROY_CQ'] {
    const cqn = this.cqnOf('cqn', c.cqn);
    for (const qp of this.qps.values()) {
      if (qp.sendCqn === cqn || qp.recvCqn === cqn) this.fail('RESOURCE_BUSY', 'cq_in_use', `cqn ${hex(cqn)} is used by qpn ${hex(qp.qpn)}`);
    }
    this.cqs.delete(cqn);
    this.cqns.release(cqn);
    this.icm.cqc.remove(cqn);
    for (const l of this.destroyListeners) l('CQ', cqn);
  }

  /**
   * DESTROY_EQ (eq.c destroy_unmap_eq, sent by mlx5_eq_table_destroy at the device's removal). An
   * EQ a CQ still names is refused (RESOURCE_BUSY; assumed, as for DESTROY_CQ): mlx5 destroys its
   * CQs first. The event engine forgets the EQ (its interrupt too); its context leaves ICM.
   */
  private destroyEq(c: CmdInputs['DESTROY_EQ']): CmdOutputs['DESTROY_EQ'] {
    const eqn = this.uint('eq_number', c.eqn, 8);
    if (!this.eqs.has(eqn)) this.fail('BAD_RESOURCE', 'eq_not_found', `eqn ${hex(eqn)} does not exist`);
    for (const cq of this.cqs.values()) {
      if (cq.eqn === eqn) this.fail('RESOURCE_BUSY', 'eq_in_use', `eqn ${hex(eqn)} is used by cqn ${hex(cq.cqn)}`);
    }
    this.eqs.delete(eqn);
    this.eqSorted = null;
    this.eqns.release(eqn);
    this.icm.eqc.remove(eqn);
    for (const l of this.destroyListeners) l('EQ', eqn);
  }

  /**
   * The object `n`'s context in its ICM table (its page taken from the given pages if it is the
   * page's first); a shortage gives the number back (`undo`) and throws as ICM does
   * (IcmNeedPages: the command waits for a PAGE_REQUEST; IcmNoMemory: NO_RESOURCES).
   */
  private contextIn(table: Icm['qpc'], n: number, undo: () => void): void {
    try {
      table.add(n);
    } catch (e) {
      undo();
      if (e instanceof IcmNoMemory) this.fail('NO_RESOURCES', 'icm_pages', e.message);
      throw e;
    }
  }

  /**
   * DESTROY_QP, from any state (mlx5_ib moves the QP to RESET first; one command here). The
   * hardware forgets the QP at once: its doorbells are ignored, messages to it are dropped (the
   * peer's requester times out), and work in flight completes nothing. Type-2 windows bound to
   * it keep their qpn (IBTA leaves them bound; the driver and the reference model agree).
   */
  private destroyQp(c: CmdInputs['DESTROY_QP']): CmdOutputs['DESTROY_QP'] {
    const qp = this.qpOf(c.qpn);
    this.qps.delete(qp.qpn);
    this.icm.qpc.remove(qp.qpn);
    // the number comes back only after every other QP number had its turn (RoundRobinAllocator):
    // a type-2 window still bound to this QP must not match a new QP soon, as the reference
    // model compares QP objects
    for (const l of this.destroyListeners) l('QP', qp.qpn);
  }

  private cqnOf(name: string, v: unknown): number {
    const cqn = this.uint(name, v, 24);
    if (!this.cqs.has(cqn)) this.fail('BAD_RESOURCE', 'cq_not_found', `${name} ${hex(cqn)} does not exist`);
    return cqn;
  }

  /**
   * A queue's page list (create_cq_in / create_qp_in pas, memory/pas.ts): pages of
   * 4 KiB << log_page_size, each page-aligned and below 2^53, enough of them for `bytes`.
   * Without a list the queue is the contiguous buffer at `base`.
   */
  private pagesOf(pas: unknown, logPageSize: unknown, bytes: number, base: number): QueuePages {
    const log = this.uint('log_page_size', logPageSize ?? 0, 5);
    if (log > MAX_LOG_PAGE_SIZE - ADAPTER_PAGE_SHIFT) this.fail('BAD_PARAM', 'log_page_size', `log_page_size ${log} gives pages past 2^${MAX_LOG_PAGE_SIZE}`);
    const pageBytes = 2 ** (ADAPTER_PAGE_SHIFT + log);
    if (pas === undefined) return Object.freeze({ pas: [], pageBytes, base });
    if (!Array.isArray(pas)) return this.fail('BAD_PARAM', 'pas', 'pas is not a list of page addresses');
    const need = pasPagesFor(bytes, pageBytes);
    if (pas.length < need) this.fail('BAD_PARAM', 'pas_short', `pas has ${pas.length} pages of ${pageBytes} B; the queue's ${bytes} B need ${need}`);
    const list: number[] = [];
    for (let i = 0; i < need; i++) {
      const pa = this.uint(`pas[${i}]`, pas[i], 64);
      if (pa % pageBytes !== 0) this.fail('BAD_PARAM', 'pas_align', `pas[${i}] ${hex(pa)} is not aligned to the ${pageBytes} B page`);
      list.push(pa);
    }
    return Object.freeze({ pas: Object.freeze(list), pageBytes, base: 0 });
  }

  private createQp(c: CmdInputs['CREATE_QP']): CmdOutputs['CREATE_QP'] {
    const g = this.caps.general.cur;
    const transport = c.transport ?? 'RC';
    if (transport !== 'RC' && transport !== 'UC' && transport !== 'UD') {
      this.fail('BAD_PARAM', 'transport', `transport ${String(transport)} is not RC, UC or UD`);
    }
    const pd = this.pdOf(c.pd);
    const sendCqn = this.cqnOf('send_cqn', c.sendCqn);
    const recvCqn = this.cqnOf('recv_cqn', c.recvCqn);
    const sqSize = this.queueSize('sq_size', c.sqSize, g.maxQpWr);
    const rqSize = c.rqSize === 0 ? 0 : this.queueSize('rq_size', c.rqSize, g.maxQpWr);
    const maxSendSge = this.uint('max_send_sge', c.maxSendSge ?? 1, 32);
    const maxRecvSge = this.uint('max_recv_sge', c.maxRecvSge ?? 1, 32);
    if (maxSendSge > g.maxSge || maxRecvSge > g.maxSge) {
      this.fail('EXCEED_LIM', 'max_sge', `max_send_sge ${maxSendSge} / max_recv_sge ${maxRecvSge} exceed max_sge ${g.maxSge}`);
    }
    const sqBufAddr = this.uint('sq_buf_addr', c.sqBufAddr ?? 0, 64);
    const rqBufAddr = this.uint('rq_buf_addr', c.rqBufAddr ?? 0, 64);
    const dbrAddr = this.uint('dbr_addr', c.dbrAddr ?? 0, 64);
    const fre = this.bit('fre', c.fre, false);
    const umr = this.bit('umr', c.umr, false);
    // one buffer, the receive queue first and the send queue after it (mlx5 qp.c sq.offset)
    const rqBytes = rqSize * rqStride(maxRecvSge);
    let rqPages: QueuePages;
    let sqPages: QueuePages;
    let sqOffset = 0;
    if (c.pas !== undefined) {
      rqPages = sqPages = this.pagesOf(c.pas, c.logPageSize, rqBytes + sqSize * 64, 0);
      // the send queue follows the receive queue on a WQEBB boundary (mlx5's set_rq_size makes
      // the receive queue at least 64 bytes); WQE fetches are in whole WQEBBs
      if (rqBytes % 64 !== 0) this.fail('BAD_PARAM', 'rq_size', `a receive queue of ${rqBytes} bytes leaves the send queue off a 64-byte boundary in the shared buffer`);
      sqOffset = rqBytes;
    } else {
      rqPages = this.pagesOf(undefined, c.logPageSize, 0, rqBufAddr);
      sqPages = this.pagesOf(undefined, c.logPageSize, 0, sqBufAddr);
    }
    const qpn = this.qpns.alloc((n) => this.qps.has(n));
    if (qpn < 0) this.fail('NO_RESOURCES', 'qp_exhausted', `all ${g.maxQp} QPs exist`);
    this.contextIn(this.icm.qpc, qpn, () => this.qpns.undo());
    const cfg = this.cfg;
    this.qps.set(qpn, {
      qpn,
      transport,
      pd,
      sendCqn,
      recvCqn,
      sqSize,
      rqSize,
      maxSendSge,
      maxRecvSge,
      sqBufAddr,
      rqBufAddr,
      dbrAddr,
      rqPages,
      sqPages,
      sqOffset,
      fre,
      umr,
      state: 'RESET',
      accessFlags: 0,
      port: 1,
      pkeyIndex: 0,
      remoteQpn: 0,
      mtu: cfg.mtu,
      rqPsn: 0,
      sqPsn: 0,
      timeout: cfg.ackTimeout,
      retryCnt: cfg.retryCount,
      rnrRetry: 7,
      maxRdAtomic: 16,
      pageFaultResumes: 0,
      lastResumeFlags: 0,
      remoteHca: 0,
    });
    return { qpn };
  }

  /**
   * The hardware moved a QP to ERR (a work request completed in error, or a remote access
   * error hit its responder): at once, no command latency (IB: the QP enters the error state).
   */
  hwError(qpn: number, event?: QpErrorEvent): void {
    const qp = this.qps.get(qpn);
    if (!qp || qp.state === 'ERR') return;
    qp.state = 'ERR';
    for (const l of this.qpStateListeners) l(qpn);
    if (event !== undefined) this.onQpEvent?.(qpn, event);
  }

  /** The CQ writer found `cqn` overrun: every QP completing on it goes to ERR (no QP event of its own). */
  cqOverrun(cqn: number): void {
    for (const qp of this.qps.values()) if (qp.sendCqn === cqn || qp.recvCqn === cqn) this.hwError(qp.qpn);
  }

  /** Told of every change of a QP's state (hca.ts: the send queue engine serves a parked QP again). */
  readonly qpStateListeners: ((qpn: number) => void)[] = [];

  /** Hears the QP events of hwError (hca.ts routes them to the EQ writer). */
  onQpEvent: ((qpn: number, event: QpErrorEvent) => void) | null = null;

  private modifyQp(c: CmdOf<'RST2INIT_QP'> | CmdOf<'INIT2RTR_QP'> | CmdOf<'RTR2RTS_QP'> | CmdOf<'2ERR_QP'>): { state: QpState } {
    const qp = this.qpOf(c.qpn);
    const t = QP_TRANSITIONS[c.op];
    if (!t.from.includes(qp.state)) {
      this.fail('BAD_RES_STATE', 'qp_state', `qpn ${hex(qp.qpn)} is in ${qp.state}; ${c.op} needs ${t.from.join(' or ')}`);
    }
    // check every attribute before changing any (a failed command leaves the QP as it was)
    switch (c.op) {
      case 'RST2INIT_QP': {
        const accessFlags = this.uint('access_flags', c.accessFlags ?? 0, 32);
        if ((accessFlags & ~IB_ACCESS_MASK) !== 0) this.fail('BAD_PARAM', 'qp_access_flags', `access flags ${hex(accessFlags)} are not IB access bits`);
        const port = this.uint('port', c.port ?? 1, 8);
        if (port !== 1) this.fail('BAD_PARAM', 'port', `port ${port} does not exist (one port, number 1)`);
        qp.pkeyIndex = this.uint('pkey_index', c.pkeyIndex ?? 0, 16);
        qp.accessFlags = accessFlags;
        qp.port = port;
        break;
      }
      case 'INIT2RTR_QP': {
        const mtu = c.mtu ?? qp.mtu;
        if (!MTUS.includes(mtu)) this.fail('BAD_PARAM', 'mtu', `mtu ${String(mtu)} is not an IB MTU (256..4096)`);
        const remoteQpn = this.uint('remote_qpn', c.remoteQpn ?? 0, 24);
        const rqPsn = this.uint('rq_psn', c.rqPsn ?? 0, 24);
        const remoteHca = this.uint('remote_hca', c.remoteHca ?? 0, 8);
        qp.rqPsn = rqPsn;
        qp.remoteQpn = remoteQpn;
        qp.remoteHca = remoteHca;
        qp.mtu = mtu;
        break;
      }
      case 'RTR2RTS_QP': {
        const sqPsn = this.uint('sq_psn', c.sqPsn ?? 0, 24);
        const timeout = this.uint('timeout', c.timeout ?? qp.timeout, 5);
        const retryCnt = this.uint('retry_cnt', c.retryCnt ?? qp.retryCnt, 3);
        const maxRdAtomic = this.uint('log_sra_max', c.maxRdAtomic ?? qp.maxRdAtomic, 8);
        // log_sra_max is 3 bits (mlx5_ifc.h qpc): a power of two, 1..128
        if ((maxRdAtomic & (maxRdAtomic - 1)) !== 0 || maxRdAtomic < 1 || maxRdAtomic > 128) {
          this.fail('BAD_PARAM', 'log_sra_max', `max_rd_atomic ${maxRdAtomic} is not a power of two in 1..128`);
        }
        qp.rnrRetry = this.uint('rnr_retry', c.rnrRetry ?? qp.rnrRetry, 3);
        qp.maxRdAtomic = maxRdAtomic;
        qp.sqPsn = sqPsn;
        qp.timeout = timeout;
        qp.retryCnt = retryCnt;
        break;
      }
      case '2ERR_QP':
        break;
    }
    qp.state = t.to;
    for (const l of this.qpStateListeners) l(qp.qpn);
    return { state: qp.state };
  }
}

/** 2^min(bits, 53) for bits 0..64 (a power per field checked was ~1% of a CREATE_MKEY's cost). */
const UINT_LIMIT: readonly number[] = Array.from({ length: 65 }, (_, b) => 2 ** Math.min(b, 53));

/** `v` is an unsigned integer of `bits` bits (at most 53: what a number holds exactly). */
function isUint(v: unknown, bits: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 && v < UINT_LIMIT[bits];
}
