/**
 * The driver's command interface (mlx5_core's cmd.c): every firmware command the driver sends
 * goes through here, as bytes, so the verbs part (`src/driver/*.ts`, mlx5_ib's job) never
 * touches the adapter's command engine itself.
 *
 * One queue per adapter (mlx5_core's per device, shared by every context), set up on first use
 * as mlx5_cmd_enable does: a 4 KiB page of 64-byte entries whose address goes to the
 * initialization segment, the log size and stride read back from it. A command is encoded with
 * the mlx5_ifc layouts (rtl/firmware/cmd_codec.ts), its first 16 bytes inline in the entry and
 * the rest in a chain of 512-byte-data mailbox blocks (1 KiB-aligned, pinned, reused), with an
 * output chain of the length the command's output needs; the entry is signed, handed to the
 * hardware, and its doorbell bit rung (cmd_work_handler). Until the command EQ exists the driver
 * polls the entry's ownership (CMD_MODE_POLLING); then the command-completion EQE wakes it
 * (mlx5_cmd_use_events). The output's status and syndrome decide; a failure's rule is read from
 * the firmware tracer record of its entry (a simplified fw_tracer, rtl/firmware/cmd_queue.ts).
 *
 * `exec` is the ordinary path; `execBackground` is the lane the MR cache fills and empties itself
 * through (mlx5's `mlx5_cmd_exec_cb`, asynchronous commands): entries of their own
 * (formats/cmd_layout.ts CMD_BG_FIRST), so they never wait behind the caller's commands.
 *
 * `close` is mlx5_core's unload of the device (main.c:1538-1567 mlx5_uninit_one), after the
 * verbs part destroyed its objects and EQs (tb.closeDevice): the command EQ given up for polling
 * and destroyed (eq.c:719-732 destroy_async_eqs, after every command in flight has finished),
 * TEARDOWN_HCA (main.c:1281 mlx5_function_close), every page reclaimed, DISABLE_HCA
 * (main.c:1233 mlx5_function_disable), and the queue closed: a later command is VerbsError EIO.
 */
import type { Hca } from '../../rtl/hca.ts';
import type { EventTarget, Sim } from '../../sim/index.ts';
import { CmdError, CmdStatus, type Cmd, type CmdName, type CmdOf, type CmdOutputs, type CmdStatusName } from '../../rtl/firmware/cmd_types.ts';
import { cmdOutputLength, decodeCmdOutput, encodeCmdInput } from '../../rtl/firmware/cmd_codec.ts';
import {
  CMD_BG_ENTRIES,
  CMD_BG_FIRST,
  CMD_BLOCK_ALIGN,
  CMD_BLOCK_BYTES,
  CMD_BLOCK_DATA,
  CMD_ENTRY_BYTES,
  CMD_IF_REV,
  CMD_INLINE_BYTES,
  CMD_OWNER_HW,
  CMD_PAGE_ENTRY,
  CmdDeliveryStatus,
  CmdEntryOff,
  EQE_CMD_VECTOR_OFF,
  IsegOff,
  MLX5_MAX_COMMANDS,
  MLX5_PCI_CMD_XPORT,
  TRACER_PAGES,
  TRACER_RECORDS_PER_PAGE,
  TRACER_RECORD_BYTES,
  TRACER_TEXT_OFF,
  cmdBlockSigOk,
  cmdBlocksFor,
  cmdEntrySigOk,
  encodeCmdBlockCtrl,
  encodeCmdEntry,
  signCmdEntry,
} from '../../rtl/formats/cmd_layout.ts';
import { CmdOpcode, EventType } from '../../rtl/formats/constants.ts';
import { hex } from '../../rtl/formats/field.ts';
import { driverAlloc } from './dma_pool.ts';
import { HostError } from '../../rtl/memory/host_space.ts';
import { VerbsError, removing } from '../verbs_error.ts';
import { DriverEq } from './eq.ts';
import { PageAlloc } from './pagealloc.ts';
import type { Eqe } from '../../rtl/formats/eqe.ts';

/** How often the driver reads an entry's ownership before the command EQ exists (assumed: mlx5 spins with cond_resched). */
export const CMD_POLL_PS = 100_000;
/** EQEs of the command EQ (mlx5 eq.c MLX5_NUM_CMD_EQE). */
export const CMD_EQ_SIZE = 32;

/** A command the hardware did not deliver (its entry's delivery status, cmd.c deliv_status_to_err). */
export class CmdDeliveryError extends Error {
  override readonly name = 'CmdDeliveryError';
  constructor(
    readonly op: string,
    readonly status: number,
    detail: string,
  ) {
    super(`${op}: command delivery failed, ${detail}`);
  }
}

const DELIVERY_NAME: Readonly<Record<number, string>> = Object.fromEntries(Object.entries(CmdDeliveryStatus).map(([k, v]) => [v, k]));
const STATUS_NAME: Readonly<Record<number, CmdStatusName>> = Object.fromEntries(Object.entries(CmdStatus).map(([k, v]) => [v, k as CmdStatusName]));

/** A mailbox block of the driver's pool: its virtual and DMA addresses. */
interface Block {
  va: number;
  pa: number;
}

/** The entries of one lane and the commands waiting for one (cmd.c's semaphore). */
class Lane {
  private readonly free: number[] = [];
  private readonly waiting: ((i: number) => void)[] = [];

  constructor(first: number, count: number) {
    for (let i = first + count - 1; i >= first; i--) this.free.push(i);
  }

  /** The lowest free entry, waiting in order for one when all are taken. */
  take(): Promise<number> | number {
    const i = this.free.pop();
    if (i !== undefined) return i;
    return new Promise<number>((resolve) => this.waiting.push(resolve));
  }

  give(i: number): void {
    const w = this.waiting.shift();
    if (w !== undefined) w(i);
    else {
      // kept highest first (take pops the lowest): inserted in place, not sorted again
      const f = this.free;
      let k = f.length;
      f.push(i);
      while (k > 0 && f[k - 1] < i) {
        f[k] = f[k - 1];
        k--;
      }
      f[k] = i;
    }
  }
}

const QUEUES = new WeakMap<Hca, CmdQueue>();

export class CmdQueue {
  private up: Promise<void> | null = null;
  /** `up` has resolved: the queue, its pages and the command EQ exist. */
  private started = false;
  private queueVa = 0;
  private tracerVa = 0;
  private logStride = 6;
  private events = false;
  private token = 0;
  private readonly lanes = { fg: new Lane(0, CMD_BG_FIRST), bg: new Lane(CMD_BG_FIRST, CMD_BG_ENTRIES), pages: new Lane(CMD_PAGE_ENTRY, 1) };
  /** The ICM pages given to the firmware (pagealloc.ts), made at start-up. */
  private pageAlloc: PageAlloc | null = null;
  private readonly blocks: Block[] = [];
  /** Scratch bytes of one mailbox block and one entry (host.write copies them out). */
  private readonly blockBuf = new Uint8Array(CMD_BLOCK_BYTES);
  private readonly entryBuf = new Uint8Array(CMD_ENTRY_BYTES);
  /** Scratch bytes a command's input is encoded into (a larger input gets bytes of its own). */
  private readonly inputBuf = new Uint8Array(2048);
  /** Scratch bytes of a command's output as `result` gathers it (grown for a larger output). */
  private outBuf = new Uint8Array(CMD_BLOCK_BYTES);
  /** Scratch bytes of a completed entry as `result` reads it. */
  private readonly doneBuf = new Uint8Array(CMD_ENTRY_BYTES);
  private readonly done = new Map<number, () => void>();
  /** Commands posted through the queue, and mailbox blocks the pool holds (for tests and stats). */
  posted = 0;
  poolBlocks = 0;
  /** Commands in post() now. */
  pending = 0;
  /** Set when close begins (mlx5_cmd_disable at its end): no caller's command is sent any more. */
  private closing: Promise<void> | null = null;
  /** Told when pending drops to 0 (close waits for the commands in flight). */
  private idleWaiters: (() => void)[] = [];
  /** The command EQ (null before start-up). */
  private cmdEq: DriverEq | null = null;

  /** @internal Resolves once no command is in flight (every lane). */
  async drain(): Promise<void> {
    while (this.pending > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * @internal An entry of the ordinary lane kept out of the driver's use until `releaseEntry`:
   * the raw-bytes fuzzer posts in it beside the driver.
   */
  reserveEntry(): Promise<number> | number {
    return this.lanes.fg.take();
  }

  /** @internal Gives back an entry `reserveEntry` kept. */
  releaseEntry(i: number): void {
    this.lanes.fg.give(i);
  }

  /** The driver's ICM page accounting (null before start-up). */
  get pages(): PageAlloc | null {
    return this.pageAlloc;
  }

  private constructor(
    private readonly hca: Hca,
    private readonly sim: Sim,
  ) {}

  /** @internal The queue page's virtual address (0 before start-up): the raw-bytes fuzzer posts beside the driver. */
  get queueAddress(): number {
    return this.queueVa;
  }

  /** Commands posted on adapter `hca`'s queue and not yet returned (tb.quiesce waits for them). */
  static pendingOn(hca: Hca): number {
    return QUEUES.get(hca)?.pending ?? 0;
  }

  /** The command queue of adapter `hca` (one per adapter, made on first use). */
  static of(hca: Hca, sim: Sim): CmdQueue {
    let q = QUEUES.get(hca);
    if (q === undefined) {
      q = new CmdQueue(hca, sim);
      QUEUES.set(hca, q);
    }
    return q;
  }

  /** Runs one command and resolves with its output (rejects with CmdError on a bad status). */
  exec<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    // once the queue is up and open, straight to the post (no process hop)
    return this.started && this.closing === null ? this.post(cmd, 'fg') : this.startThenPost(cmd, 'fg');
  }

  /** As `exec`, in the background lane (never ahead of or in the way of `exec`'s commands). */
  execBackground<K extends CmdName>(cmd: CmdOf<K>): Promise<CmdOutputs[K]> {
    return this.started && this.closing === null ? this.post(cmd, 'bg') : this.startThenPost(cmd, 'bg');
  }

  /** `exec` before the queue is up (or after close: EIO). */
  private async startThenPost<K extends CmdName>(cmd: CmdOf<K>, lane: 'fg' | 'bg'): Promise<CmdOutputs[K]> {
    this.checkUp(cmd.op);
    await this.start();
    return this.post(cmd, lane);
  }

  /** True once `close` began: the adapter is being (or was) let go. */
  get closed(): boolean {
    return this.closing !== null;
  }

  /** A command after close: EIO, as every access to a removed device (uverbs_main.c:1261-1263). */
  private checkUp(op: string): void {
    if (this.closing !== null) throw new VerbsError('EIO', `${op}: the device was closed (tb.closeDevice): its driver let the adapter go`);
  }

  /**
   * mlx5_core's unload: waits for the commands in flight, leaves events for polling, then
   * TEARDOWN_HCA, reclaims every page the firmware holds, DISABLE_HCA. Returns the pages the
   * firmware did not give back (0). A queue never started has nothing to close.
   */
  close(): Promise<number> {
    const run = async (): Promise<number> => {
      if (this.up === null) return 0;
      await this.up;
      // mlx5_cmd_use_polling takes every entry (cmd.c mlx5_cmd_change_mod): the commands in flight end first
      await this.drain();
      // destroy_async_eqs (eq.c:719-732): polling, then the command EQ (it also takes the
      // PAGE_REQUESTs here, mlx5's pages EQ: one EQ)
      this.events = false;
      if (this.cmdEq !== null) await removing(this.cmdEq.destroy());
      await this.post({ op: 'TEARDOWN_HCA' }, 'fg');
      const left = (await this.pageAlloc?.reclaimStartupPages()) ?? 0;
      await this.post({ op: 'DISABLE_HCA' }, 'fg');
      return left;
    };
    const p = this.closing === null ? run() : this.closing.then(() => this.pageAlloc?.holding ?? 0);
    this.closing ??= p.then(
      () => undefined,
      () => undefined, // the caller of the first close gets its failure; later ones are not left with an unhandled one
    );
    return p;
  }

  /** mlx5_cmd_enable, then the command EQ (polled until it exists) and mlx5_cmd_use_events. */
  private start(): Promise<void> {
    this.up ??= (async () => {
      const host = this.hca.host;
      const iseg = this.hca.iseg;
      const rev = iseg.read32(IsegOff.CMDIF_REV_FW_SUB) >>> 16;
      if (rev !== CMD_IF_REV) throw new Error(`cmd: driver command interface revision ${CMD_IF_REV} differs from firmware's ${rev}`);
      const l = iseg.read32(IsegOff.CMDQ_ADDR_L_SZ) & 0xff;
      const logSz = (l >>> 4) & 0xf;
      this.logStride = l & 0xf;
      if (2 ** logSz < MLX5_MAX_COMMANDS) throw new Error(`cmd: the firmware offers ${2 ** logSz} command entries; this driver uses ${MLX5_MAX_COMMANDS}`);
      const q = driverAlloc(host, 'command queue', 4096, { align: 4096 });
      host.faultIn(q.addr, 4096); // then pinned for the device's life
      host.pin(q.addr, 4096);
      this.queueVa = q.addr;
      const pa = host.dmaAddress(q.addr);
      iseg.write32(IsegOff.CMDQ_ADDR_H, Math.floor(pa / 2 ** 32));
      iseg.write32(IsegOff.CMDQ_ADDR_L_SZ, pa >>> 0);
      // the firmware tracer's pages (scattered: one address register pair per page)
      const t = driverAlloc(host, 'firmware tracer', TRACER_PAGES * 4096, { align: 4096 });
      host.faultIn(t.addr, t.length);
      host.pin(t.addr, t.length);
      this.tracerVa = t.addr;
      for (let p = 0; p < TRACER_PAGES; p++) {
        const tpa = host.dmaAddress(t.addr + p * 4096);
        iseg.write32(IsegOff.TRACER_PAGE + 8 * p, Math.floor(tpa / 2 ** 32));
        iseg.write32(IsegOff.TRACER_PAGE + 8 * p + 4, tpa >>> 0);
      }
      // main.c mlx5_function_enable / mlx5_function_open: ENABLE_HCA, the boot pages, the init
      // pages, INIT_HCA (QUERY_HCA_CAP comes later, when a context opens the device)
      const exec = <K extends CmdName>(c: CmdOf<K>): Promise<CmdOutputs[K]> => this.post(c, 'fg');
      const pages = new PageAlloc(this.hca, this.sim, { exec, execPages: (c) => this.post(c, 'pages') });
      this.pageAlloc = pages;
      await exec({ op: 'ENABLE_HCA' });
      await pages.satisfyStartupPages(true);
      await pages.satisfyStartupPages(false);
      await exec({ op: 'INIT_HCA' });
      // eq.c create_async_eqs: the command EQ first, created in polling mode; it also takes the
      // PAGE_REQUEST events (mlx5 puts them on the async EQ, created next: one EQ here)
      const dev = { hca: this.hca, tb: { sim: this.sim }, cmdq: { exec }, cmd: <T>(p: Promise<T>) => p };
      this.cmdEq = await DriverEq.create(dev, CMD_EQ_SIZE, (1 << EventType.CMD) | (1 << EventType.PAGE_REQUEST), (e) => this.onEqe(e));
      this.events = true;
      this.started = true;
    })();
    return this.up;
  }

  /** The command EQ's handler: every entry of the vector completed (mlx5_cmd_comp_handler). */
  private onEqe(e: Eqe): void {
    if (e.type === EventType.PAGE_REQUEST) {
      this.pageAlloc?.onPageRequest(e.data);
      return;
    }
    if (e.type !== EventType.CMD) return;
    const b = e.data;
    const o = EQE_CMD_VECTOR_OFF;
    const vector = ((b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3]) >>> 0;
    for (let i = 0; i < MLX5_MAX_COMMANDS; i++) {
      if (((vector >>> i) & 1) === 0) continue;
      const d = this.done.get(i);
      this.done.delete(i);
      d?.();
    }
    this.sim.noteResume(); // the waiting commands go on before the next event
  }

  /** A mailbox block from the pool (1 KiB-aligned blocks carved from pinned pages); host ENOMEM is VerbsError ENOMEM naming `op`. */
  private block(op: string): Block {
    const b = this.blocks.pop();
    if (b !== undefined) return b;
    const host = this.hca.host;
    const what = `${op}: command mailbox`;
    const page = driverAlloc(host, what, 4096, { align: 4096 });
    try {
      host.faultIn(page.addr, 4096);
    } catch (e) {
      if (e instanceof HostError && e.errno === 'ENOMEM') throw new VerbsError('ENOMEM', `${what}: no memory for a mailbox page (${e.message})`);
      throw e;
    }
    host.pin(page.addr, 4096);
    for (let off = 4096 - CMD_BLOCK_ALIGN; off >= 0; off -= CMD_BLOCK_ALIGN) {
      this.blocks.push({ va: page.addr + off, pa: host.dmaAddress(page.addr + off) });
    }
    this.poolBlocks += 4096 / CMD_BLOCK_ALIGN;
    return this.blocks.pop() as Block;
  }

  /** A chain of `n` blocks carrying `data` (from byte 16 on), numbered and signed (mlx5_alloc_cmd_msg, calc_chain_sig). */
  private chain(op: string, n: number, data: Uint8Array | null, token: number): Block[] {
    const list: Block[] = [];
    try {
      for (let k = 0; k < n; k++) list.push(this.block(op));
    } catch (e) {
      for (const b of list) this.blocks.push(b);
      throw e;
    }
    const buf = this.blockBuf;
    for (let k = n - 1; k >= 0; k--) {
      buf.fill(0);
      if (data !== null) buf.set(data.subarray(CMD_INLINE_BYTES + k * CMD_BLOCK_DATA, CMD_INLINE_BYTES + (k + 1) * CMD_BLOCK_DATA), 0);
      encodeCmdBlockCtrl(buf, 0, k + 1 < n ? list[k + 1].pa : 0, k, token);
      this.hca.host.write(list[k].va, buf);
    }
    return list;
  }

  /** cmd.c alloc_token: 1..255, never 0. */
  private nextToken(): number {
    this.token = (this.token + 1) & 0xff;
    if (this.token === 0) this.token = 1;
    return this.token;
  }

  /** Posts `cmd` in an entry of its lane, rings, waits, and decodes the output. */
  private async post<K extends CmdName>(cmd: CmdOf<K>, laneName: 'fg' | 'bg' | 'pages'): Promise<CmdOutputs[K]> {
    if (!this.sim.inRun) this.sim.checkInProcess(`cmd.exec(${String(cmd.op)})`); // (its message made only when it fails)
    this.pending++;
    try {
      const host = this.hca.host;
      // the input in the queue's scratch bytes: copied into the entry and mailboxes before any wait
      let input = encodeCmdInput(cmd as unknown as Cmd, this.inputBuf);
      const outlen = cmdOutputLength(cmd as unknown as Cmd);
      const lane = this.lanes[laneName];
      const taken = lane.take();
      let idx: number;
      if (typeof taken === 'number') idx = taken;
      else {
        input = input.slice(); // another command may use the scratch while this one waits for an entry
        idx = await taken;
      }
      const token = this.nextToken();
      let ins: Block[];
      let outs: Block[];
      try {
        ins = this.chain(String(cmd.op), cmdBlocksFor(input.length), input, token);
        try {
          outs = this.chain(String(cmd.op), cmdBlocksFor(outlen), null, token);
        } catch (e) {
          for (const b of ins) this.blocks.push(b);
          throw e;
        }
      } catch (e) {
        lane.give(idx);
        throw e;
      }
      const entryVa = this.queueVa + idx * (1 << this.logStride); // (log_stride is 4 bits)
      const e = this.entryBuf;
      // (the entry is zeroed first: an input shorter than 16 bytes leaves the rest of in[] 0)
      encodeCmdEntry(e, 0, {
        type: MLX5_PCI_CMD_XPORT,
        inlen: input.length,
        inPtr: ins.length > 0 ? ins[0].pa : 0,
        in: input,
        out: ZERO_INLINE,
        outPtr: outs.length > 0 ? outs[0].pa : 0,
        outlen,
        token,
        sig: 0,
        rsvd: 0,
        statusOwn: CMD_OWNER_HW,
      });
      signCmdEntry(e, 0);
      host.write(entryVa, e);
      this.posted++;
      const completed = this.events ? new Promise<void>((resolve) => this.done.set(idx, resolve)) : null;
      this.hca.iseg.write32(IsegOff.CMD_DBELL, (1 << idx) >>> 0);
      if (completed !== null) await completed;
      else if ((host.read(entryVa + CmdEntryOff.STATUS_OWN, 1)[0] & CMD_OWNER_HW) !== 0) await this.poll(entryVa);
      try {
        return this.result(cmd, entryVa, idx, outlen, outs);
      } finally {
        for (const b of ins) this.blocks.push(b);
        for (const b of outs) this.blocks.push(b);
        lane.give(idx);
      }
    } finally {
      this.pending--;
      if (this.pending === 0 && this.idleWaiters.length > 0) {
        const w = this.idleWaiters;
        this.idleWaiters = [];
        for (const f of w) f();
      }
    }
  }

  /**
   * Polling mode (no command EQ yet, or no more: cmd.c poll_timeout, a busy loop on the entry's
   * ownership bit): the bit read every 100 ns, or every 1/1024 of the time waited so far (a command
   * of seconds, with slow firmware or PCIe, costs thousands of reads, not millions). Each read is
   * an event of its own, at the times and in the order the process's delays made them; the
   * process resumes only at the read that finds the entry given back (resumed at every read, a
   * start-up of two adapters took some 7,600 drains of the process queue).
   */
  private poll(entryVa: number): Promise<void> {
    const host = this.hca.host;
    const sim = this.sim;
    const t0 = sim.now;
    return new Promise<void>((resolve) => {
      const reader: EventTarget = {
        fire: (): void => {
          if ((host.read(entryVa + CmdEntryOff.STATUS_OWN, 1)[0] & CMD_OWNER_HW) === 0) {
            resolve();
            sim.noteResume();
          } else sim.at(sim.now + Math.max(CMD_POLL_PS, Math.floor((sim.now - t0) / 1024)), reader);
        },
      };
      sim.at(t0 + CMD_POLL_PS, reader);
    });
  }

  /** The output of a completed entry (mlx5_cmd_comp_handler, mlx5_copy_from_msg, cmd_status_err). */
  private result<K extends CmdName>(cmd: CmdOf<K>, entryVa: number, idx: number, outlen: number, outs: readonly Block[]): CmdOutputs[K] {
    const host = this.hca.host;
    // the completed entry into scratch bytes (read before the entry is given back: no other command reads it meanwhile)
    const e = this.doneBuf;
    host.readInto(entryVa, e, 0, CMD_ENTRY_BYTES);
    const op = String(cmd.op);
    if (!cmdEntrySigOk(e, 0)) throw new CmdDeliveryError(op, -1, 'the completed entry fails its signature');
    const deliv = e[CmdEntryOff.STATUS_OWN] >>> 1;
    if (deliv !== CmdDeliveryStatus.OK) throw new CmdDeliveryError(op, deliv, `delivery status ${DELIVERY_NAME[deliv] ?? 'UNKNOWN'}(${hex(deliv)})`);
    // every byte of the output is written below: scratch bytes serve (the decoded output keeps none of them)
    if (this.outBuf.length < outlen) this.outBuf = new Uint8Array(outlen);
    const out = this.outBuf.subarray(0, outlen);
    const inl = Math.min(CMD_INLINE_BYTES, outlen);
    for (let j = 0; j < inl; j++) out[j] = e[CmdEntryOff.OUT + j];
    const need = cmdBlocksFor(outlen);
    for (let k = 0; k < need; k++) {
      const blk = this.blockBuf;
      host.readInto(outs[k].va, blk, 0, CMD_BLOCK_BYTES);
      if (!cmdBlockSigOk(blk, 0)) throw new CmdDeliveryError(op, -1, `output block ${k} fails its signatures`);
      const at = CMD_INLINE_BYTES + k * CMD_BLOCK_DATA;
      out.set(blk.subarray(0, Math.min(CMD_BLOCK_DATA, outlen - at)), at);
    }
    const status = out[0];
    if (status !== CmdStatus.OK) throw this.failure(cmd, idx, status, new DataView(out.buffer).getUint32(4));
    return decodeCmdOutput(cmd, out);
  }

  /** The CmdError a failed output stands for, its rule read from the firmware tracer record of the entry. */
  private failure(cmd: { readonly op: string }, idx: number, status: number, syndrome: number): CmdError {
    const rec = this.hca.host.read(this.tracerVa + Math.floor(idx / TRACER_RECORDS_PER_PAGE) * 4096 + (idx % TRACER_RECORDS_PER_PAGE) * TRACER_RECORD_BYTES, TRACER_RECORD_BYTES);
    const v = new DataView(rec.buffer, rec.byteOffset, rec.byteLength);
    const statusName = STATUS_NAME[status] ?? 'INTERNAL_ERR';
    const opMod = 'opMod' in cmd && typeof cmd.opMod === 'number' ? cmd.opMod : 0;
    if (v.getUint32(0) === syndrome && v.getUint8(4) === status) {
      const text = new TextDecoder().decode(rec.subarray(TRACER_TEXT_OFF, TRACER_TEXT_OFF + v.getUint16(6)));
      const [op, opcode, mod, rule, ...detail] = text.split('\t');
      return new CmdError(op, Number(opcode), Number(mod), statusName, rule, detail.join('\t'));
    }
    const opcode = Object.hasOwn(CmdOpcode, cmd.op) ? CmdOpcode[cmd.op as CmdName] : 0;
    return new CmdError(cmd.op, opcode, opMod, statusName, `syndrome_${hex(syndrome)}`, `syndrome ${hex(syndrome)} (no firmware trace of it)`);
  }
}

/** The entry's out[] as the driver posts it (read-only). */
const ZERO_INLINE = new Uint8Array(CMD_INLINE_BYTES);

