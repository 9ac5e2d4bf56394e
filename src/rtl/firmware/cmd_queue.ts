/**
 * The firmware side of the command queue (mlx5_core cmd.c drives it; layouts in
 * formats/cmd_layout.ts): the driver writes a queue of 64-byte entries in host memory and tells
 * the adapter its address in the initialization segment; a write of the command doorbell hands
 * the entries of its set bits to the firmware. For each, the firmware
 *
 * 1. reads the entry, then the input mailbox chain block by block (each `next` is in the block
 *    before), by DMA over the adapter's PCIe port `cmd` (PCIe time, the DMA-ownership checker);
 * 2. checks the delivery: ownership, signatures, type, reserved bytes, lengths, block numbers,
 *    tokens, pointer alignment; a failure is the entry's delivery status (MLX5_CMD_DELIVERY_STAT_*),
 *    nothing executes, and the queue goes on;
 * 3. decodes the input with cmd_codec and hands it to its lane of the firmware (cmdif.ts: the
 *    firmware's own time per command, in doorbell order);
 * 4. writes the output (16 bytes inline, the rest into the output chain, whose blocks it reads
 *    the control part of as far as the output reaches), the status and the ownership back, then
 *    the command-completion EQE (type CMD, the entry's bit in its vector) if an EQ takes CMD
 *    events; before that the driver polls the ownership bit.
 *
 * A failed command's output carries its status and syndrome only; the firmware writes the rule
 * that failed, as text, in the tracer record of the entry (when the driver gave a tracer buffer):
 * a simplified fw_tracer (mlx5 fw_tracer.c hands firmware strings to the driver through host
 * memory; here one 512-byte record per entry: syndrome, status, token, text).
 *
 * Doorbell rung for an entry the firmware still holds: ignored and counted (`doorbell_busy`), the
 * entry completes once. Entries from CMD_BG_FIRST up run in the background lane (cmdif.ts).
 */
import { Module, type Sim } from '../../sim/index.ts';
import { TagTable } from '../../sim/tag_table.ts';
import type { Counter, Signal } from '../../sim/index.ts';
import type { EventTarget } from '../../sim/event_queue.ts';
import { dmaRead, dmaWrite, type DmaPort, type DmaReq } from '../memory/pcie.ts';
import {
  CMD_BLOCK_ALIGN,
  CMD_BLOCK_BYTES,
  CMD_BLOCK_DATA,
  CMD_ENTRY_BYTES,
  CMD_INLINE_BYTES,
  CMD_OWNER_HW,
  CmdBlockOff,
  CmdDeliveryStatus,
  CmdEntryOff,
  CMD_BG_FIRST,
  CMD_PAGE_ENTRY,
  CMDQ_LOG_STRIDE,
  CMDQ_LOG_SZ,
  EQE_CMD_VECTOR_OFF,
  MLX5_PCI_CMD_XPORT,
  TRACER_PAGES,
  TRACER_RECORDS_PER_PAGE,
  TRACER_RECORD_BYTES,
  TRACER_TEXT_OFF,
  cmdBlockSigOk,
  cmdBlocksFor,
  cmdEntrySigOk,
  decodeCmdBlockCtrl,
  decodeCmdEntryInto,
  signCmdBlock,
  signCmdEntry,
  type CmdDeliveryStatusName,
  type CmdEntry,
} from '../formats/cmd_layout.ts';
import { CMD_HDR_BYTES, decodeCmdInput, encodeCmdError, encodeCmdOutput } from './cmd_codec.ts';
import { CmdError, type Cmd, type CmdName } from './cmd_types.ts';
import { CmdOpcode, ManagePagesOpMod } from '../formats/constants.ts';
import { EQE_DATA_SIZE } from '../formats/eqe.ts';
import { MANAGE_PAGES_OUT } from '../formats/cmd_pages.ts';
import { PAS_ENTRY_BYTES } from '../formats/cmd_hdr.ts';

/**
 * The consumer of a DMA port's responses: its FIFO wakes it in the commit that makes a response
 * visible, and it hands the responses over there (no process polls the FIFO, which would also
 * wake at every other commit of it, its own pops included).
 */
class DmaResponses extends Module {
  constructor(
    parent: Module,
    private readonly take: () => void,
  ) {
    super(parent.sim, parent, 'dma_resp');
  }

  override wake(): void {
    this.take();
  }
}

/** Cells of FwDma's table of waiting readers. */
const PENDING_CELLS = 64;

/** A process's DMA through one PCIe port: reads matched to their responses by tag. */
export class FwDma {
  /** Readers waiting for their data, by tag (tags count up: see TagTable). */
  private readonly pending = new TagTable<(d: Uint8Array) => void>(PENDING_CELLS);
  private nextTag = 0;

  /** `owner`: the module the response consumer sits in. */
  constructor(
    private readonly sim: Sim,
    private readonly port: DmaPort,
    owner: Module,
  ) {
    port.resp.consumer = new DmaResponses(owner, () => this.takeResponses());
  }

  /** The responses visible now go to their readers, who resume before the next event. */
  private takeResponses(): void {
    const resp = this.port.resp;
    let any = false;
    while (resp.canPop()) {
      const r = resp.pop();
      const res = this.pending.take(r.tag);
      res?.(r.data ?? new Uint8Array(0));
      any = true;
    }
    if (any) this.sim.noteResume();
  }

  /** True while a request is queued or a read is outstanding. */
  get busy(): boolean {
    return this.pending.size > 0;
  }

  /**
   * Reads `length` bytes at physical `addr` (into `dst` from `dstOff` when given: no allocation).
   * A request the port has room for is pushed at once (no process hop: the caller waits only for
   * the data), else it waits for room as `pushWait` does.
   */
  read(addr: number, length: number, dst?: Uint8Array, dstOff = 0): Promise<Uint8Array> {
    const tag = this.nextTag;
    this.nextTag = (this.nextTag + 1) >>> 0;
    const done = new Promise<Uint8Array>((resolve) => this.pending.set(tag, resolve));
    const req = dst === undefined ? dmaRead(addr, length, tag) : dmaRead(addr, length, tag, dst, dstOff);
    const f = this.port.req;
    if (!f.canPush()) return this.readWhenRoom(req, done);
    f.push(req);
    return done;
  }

  private async readWhenRoom(req: DmaReq, done: Promise<Uint8Array>): Promise<Uint8Array> {
    await this.port.req.pushWait(req);
    return done;
  }

  /**
   * A posted write of `data` at `addr`; resolves when it has landed in host memory if `waitLanded`
   * is true, else once pushed. An EventTarget `waitLanded` is fired (`fire(0)`) when it lands.
   */
  write(addr: number, data: Uint8Array, waitLanded: boolean | EventTarget = false): Promise<void> {
    let landed: EventTarget | undefined;
    let done: Promise<void> | null = null;
    // the landing is an event: the writer resumes before anything else looks (as sim.delay's resume)
    if (waitLanded === true) {
      done = new Promise<void>((resolve) => (landed = { fire: () => { resolve(); this.sim.noteResume(); } }));
    } else if (waitLanded !== false) landed = waitLanded;
    const req = dmaWrite(addr, data, 0, landed, true);
    const f = this.port.req;
    if (!f.canPush()) return this.writeWhenRoom(req, done);
    f.push(req);
    return done ?? PUSHED;
  }

  private async writeWhenRoom(req: DmaReq, done: Promise<void> | null): Promise<void> {
    await this.port.req.pushWait(req);
    if (done !== null) await done;
  }
}

/** What a posted write the port took at once resolves with. */
const PUSHED: Promise<void> = Promise.resolve();

/**
 * HCA_RETURN_PAGES with too little output for the pages it asks back fails before it runs
 * (BAD_OUTPUT_LEN), so no page leaves the firmware without its address reaching the driver
 * (pagealloc.c reclaim_pages sizes the output for input_num_entries pages).
 */
function returnRoom(cmd: Cmd, outlen: number): Cmd | CmdError {
  if (cmd.op !== 'MANAGE_PAGES' || cmd.opMod !== ManagePagesOpMod.HCA_RETURN_PAGES) return cmd;
  const n = cmd.numEntries ?? 0;
  const need = MANAGE_PAGES_OUT.bytes + n * PAS_ENTRY_BYTES;
  if (outlen >= need) return cmd;
  return new CmdError('MANAGE_PAGES', CmdOpcode.MANAGE_PAGES, cmd.opMod, 'BAD_OUTPUT_LEN', 'output_len', `HCA_RETURN_PAGES of ${n} pages needs ${need} output bytes; outlen is ${outlen}`);
}

/** A delivery failure: the status and why (counted by name). */
class Delivery {
  constructor(
    readonly status: CmdDeliveryStatusName,
    readonly why: string,
  ) {}
}

/** What is wrong with a fetched entry before its input is read (a delivery failure), or null. */
function entryFault(b: Uint8Array, e: CmdEntry): Delivery | null {
  if ((e.statusOwn & CMD_OWNER_HW) === 0) return new Delivery('CMD_DESCR_ERR', 'the doorbell rang for an entry software owns');
  if (!cmdEntrySigOk(b, 0)) return new Delivery('SIGNAT_ERR', 'the entry does not XOR to 0xff');
  if (e.type !== MLX5_PCI_CMD_XPORT) return new Delivery('CMD_DESCR_ERR', `type ${e.type} is not MLX5_PCI_CMD_XPORT`);
  if (e.rsvd !== 0) return new Delivery('RES_FLD_NOT_CLR_ERR', 'a reserved byte of the entry is set');
  if (e.inlen < CMD_HDR_BYTES) return new Delivery('IN_LENGTH_ERR', `inlen ${e.inlen} is shorter than the header`);
  if (e.outlen < CMD_HDR_BYTES) return new Delivery('OUT_LENGTH_ERR', `outlen ${e.outlen} is shorter than the header`);
  if (cmdBlocksFor(e.outlen) > 0 && e.outPtr % CMD_BLOCK_ALIGN !== 0) return new Delivery('OUT_PTR_ALIGN_ERR', 'out_ptr is off a mailbox block');
  return null;
}

/** What is wrong with input block `k` as read (its control part `c`), or null. */
function blockFault(blk: Uint8Array, k: number, c: { blockNum: number; token: number }, token: number): Delivery | null {
  if (!cmdBlockSigOk(blk, 0)) return new Delivery('SIGNAT_ERR', `input block ${k} fails its signatures`);
  if (c.blockNum !== k) return new Delivery('BAD_BLK_NUM_ERR', `input block ${k} says block_num ${c.blockNum}`);
  if (c.token !== token) return new Delivery('TOK_ERR', `input block ${k} has token ${c.token}, the entry ${token}`);
  return null;
}

/** One entry's command in flight (CmdQueueEngine.slots). */
interface EntrySlot {
  readonly i: number;
  base: number;
  /** The entry and one mailbox block as read, and the input gathered (reused: one command per entry at a time). */
  readonly entryBuf: Uint8Array;
  readonly blockBuf: Uint8Array;
  inputBuf: Uint8Array;
  /** The delivery status being written back, and what its landing fires. */
  status: CmdDeliveryStatusName;
  readonly landed: EventTarget;
  entryBytes: Uint8Array | null;
  entry: CmdEntry | null;
  /** The record `entry` points to once decoded (one per entry: decoded into, command after command). */
  readonly entryRec: CmdEntry;
  delivery: Delivery | null;
  /** What the lane settled it with, for the write-back. */
  cmd: Cmd | CmdError | null;
  out: unknown;
  failed: unknown;
  readonly settle: (cmd: Cmd | CmdError, out: unknown, failed: unknown) => void;
  readonly writeBack: () => Promise<void>;
  readonly fetchedThen: () => void;
  readonly deliveryFailed: () => Promise<void>;
}

/** What the queue needs of the firmware's lanes and the adapter. */
export interface CmdQueueHost {
  readonly sim: Sim;
  readonly dma: FwDma;
  /**
   * Hands a fetched command to its lane; `settle` gets its output or failure after execution.
   * `pages`: the page entry (CMD_PAGE_ENTRY), whose MANAGE_PAGES never waits behind a command
   * that waits for pages (cmd.c pages_queue).
   */
  post(background: boolean, fetched: Promise<Cmd | CmdError | null>, settle: (cmd: Cmd | CmdError, out: unknown, failed: unknown) => void, pages: boolean): void;
  /** True when an EQ takes CMD events (the driver switched to events). */
  cmdEqExists(): boolean;
  /** Raises a CMD EQE with these data bytes. */
  raiseCmdEqe(data: Uint8Array): void;
  /** Traced: the entry index of the latest doorbell bit taken, and the last delivery status. */
  readonly entrySig: Signal;
  readonly delivSig: Signal;
  readonly stats: { counter(name: string): Counter };
}

/** The command queue engine of one adapter (owned by Cmdif). */
export class CmdQueueEngine {
  private addrH = 0;
  private addrL = 0;
  /** The tracer's page addresses (0: none given). */
  private readonly tracer = new Float64Array(TRACER_PAGES * 2);
  /** Entries the firmware holds (doorbell seen, status not yet written back). */
  private held = 0;
  /** Entries whose completion raises an EQE (the command EQ existed at their doorbell). */
  private eqeWanted = 0;
  private fetching = 0;
  private readonly sDoorbells: Counter;
  private readonly sBusy: Counter;
  private readonly sBlocksIn: Counter;
  private readonly sBlocksOut: Counter;
  private readonly sEqes: Counter;
  private readonly sDelivery = new Map<string, Counter>();
  /** Scratch bytes a command's output is encoded into (`outputOf`). */
  private readonly outScratch = new Uint8Array(CMD_BLOCK_BYTES);

  constructor(private readonly h: CmdQueueHost) {
    this.sDoorbells = h.stats.counter('cmdq_doorbells');
    this.sBusy = h.stats.counter('doorbell_busy');
    this.sBlocksIn = h.stats.counter('mailbox_blocks_read');
    this.sBlocksOut = h.stats.counter('mailbox_blocks_written');
    this.sEqes = h.stats.counter('cmd_eqes');
    for (const name of Object.keys(CmdDeliveryStatus)) if (name !== 'OK') this.sDelivery.set(name, h.stats.counter(`delivery_${name}`));
  }

  /** Entries held now (a command fetched, executing, or being written back). */
  get inFlight(): number {
    let n = 0;
    for (let v = this.held; v !== 0; v &= v - 1) n++;
    return n;
  }

  /** The queue's physical address as the driver wrote it. */
  get queueAddr(): number {
    return this.addrH * 2 ** 32 + ((this.addrL & 0xfffff000) >>> 0);
  }

  /** The physical address of entry `i`'s tracer record (0: the driver gave no page for it). */
  tracerRecord(i: number): number {
    const p = Math.floor(i / TRACER_RECORDS_PER_PAGE);
    if (p >= TRACER_PAGES) return 0;
    const page = this.tracer[2 * p] * 2 ** 32 + this.tracer[2 * p + 1];
    return page === 0 ? 0 : page + (i % TRACER_RECORDS_PER_PAGE) * TRACER_RECORD_BYTES;
  }

  /** Register writes of the initialization segment (offsets of IsegOff). */
  setQueueAddr(which: 'h' | 'l', v: number): void {
    if (which === 'h') this.addrH = v >>> 0;
    else this.addrL = (v & 0xfffff000) >>> 0;
  }

  /** A write of the tracer page registers (word `w`: page w >> 1, high word first). */
  setTracerWord(w: number, v: number): void {
    if (w >= 0 && w < this.tracer.length) this.tracer[w] = v >>> 0;
  }

  /** cmdq_addr_l_sz as read: the address bits and the queue's log size and stride. */
  readAddrLSz(): number {
    return (this.addrL | (CMDQ_LOG_SZ << 4) | CMDQ_LOG_STRIDE) >>> 0;
  }

  /** A command doorbell arrived: every set bit's entry goes to the firmware, lowest first. */
  doorbell(vector: number): void {
    this.sDoorbells.inc();
    // only the set bits, lowest first (vector is a u32: bit 31 too)
    for (let rest = vector >>> 0; rest !== 0; rest = (rest & (rest - 1)) >>> 0) {
      const i = 31 - Math.clz32(rest & -rest);
      if (i >= 1 << CMDQ_LOG_SZ) break;
      if ((this.held & (1 << i)) !== 0) {
        this.sBusy.inc(); // rung twice: the entry is the firmware's already
        continue;
      }
      this.held |= 1 << i;
      // an entry rung before the command EQ existed completes silently (the driver polls it)
      if (this.h.cmdEqExists()) this.eqeWanted |= 1 << i;
      else this.eqeWanted &= ~(1 << i);
      this.h.entrySig.setNow(i);
      this.start(i);
    }
    // the fetches started take their first steps (async, after the DMA engine answers) at once,
    // not whenever some unrelated process happens to resume next
    this.h.sim.noteResume();
  }

  private start(i: number): void {
    const base = this.queueAddr + (i << CMDQ_LOG_STRIDE);
    const st = this.slots[i];
    st.base = base;
    st.entryBytes = null;
    st.entry = null;
    st.delivery = null;
    const fetched = this.fetch(st);
    this.h.post(i >= CMD_BG_FIRST && i !== CMD_PAGE_ENTRY, fetched, st.settle, i === CMD_PAGE_ENTRY);
    // a delivery failure settles without the lane
    void fetched.then(st.fetchedThen);
  }

  /** Reads entry `st.i` and its input: the command, a decode failure, or null (a delivery failure, in `st.delivery`). */
  private async fetch(st: EntrySlot): Promise<Cmd | CmdError | null> {
    this.fetchStarted();
    try {
      const entryBytes = await this.h.dma.read(st.base, CMD_ENTRY_BYTES, st.entryBuf);
      st.entryBytes = entryBytes;
      const e = decodeCmdEntryInto(entryBytes, 0, st.entryRec) ? st.entryRec : null;
      st.entry = e;
      const bad = e === null ? new Delivery('IN_PTR_ALIGN_ERR', 'a mailbox pointer past host memory') : entryFault(entryBytes, e);
      if (bad !== null) {
        st.delivery = bad;
        return null;
      }
      const entry = e as CmdEntry;
      // the input chain, block by block (in this function: one process step per block read)
      const need = cmdBlocksFor(entry.inlen);
      // the input is gathered in the entry's own buffer, grown as blocks arrive (an inlen no chain
      // backs allocates nothing); the decoded command keeps none of its bytes
      let input = st.inputBuf;
      // (a byte loop: a subarray per command cost more than the 16 bytes' copy)
      for (let j = 0, n = Math.min(CMD_INLINE_BYTES, entry.inlen); j < n; j++) input[j] = entry.in[j];
      let addr = entry.inPtr;
      for (let k = 0; k < need; k++) {
        let fault: Delivery | null = null;
        if (addr === 0) fault = new Delivery('IN_LENGTH_ERR', `the input chain ends after ${k} blocks; inlen ${entry.inlen} needs ${need}`);
        else if (addr < 0 || addr % CMD_BLOCK_ALIGN !== 0) fault = new Delivery('IN_PTR_ALIGN_ERR', 'an input block pointer is off a mailbox block');
        if (fault !== null) {
          st.delivery = fault;
          return null;
        }
        const blk = await this.h.dma.read(addr, CMD_BLOCK_BYTES, st.blockBuf);
        this.sBlocksIn.inc();
        const c = decodeCmdBlockCtrl(blk, 0);
        fault = blockFault(blk, k, c, entry.token);
        if (fault !== null) {
          st.delivery = fault;
          return null;
        }
        const at = CMD_INLINE_BYTES + k * CMD_BLOCK_DATA;
        const n = Math.min(CMD_BLOCK_DATA, entry.inlen - at);
        if (input.length < at + n) {
          const grown = new Uint8Array(Math.max(at + n, 2 * input.length));
          grown.set(input.subarray(0, at), 0);
          input = grown;
          st.inputBuf = grown;
        }
        input.set(blk.subarray(0, n), at);
        addr = c.next;
      }
      const d = decodeCmdInput(input.subarray(0, entry.inlen));
      return d.ok ? returnRoom(d.cmd, entry.outlen) : d.error;
    } finally {
      this.fetchEnded();
    }
  }

  /**
   * The state of each entry between its doorbell and its completion, with its two callbacks made
   * once (an entry the firmware holds is never started again before it completes).
   */
  private readonly slots: EntrySlot[] = Array.from({ length: 1 << CMDQ_LOG_SZ }, (_, i) => {
    const st: EntrySlot = {
      i, base: 0, entryBuf: new Uint8Array(CMD_ENTRY_BYTES), blockBuf: new Uint8Array(CMD_BLOCK_BYTES), inputBuf: new Uint8Array(CMD_BLOCK_BYTES),
      entryBytes: null, entry: null, status: 'OK',
      entryRec: { type: 0, inlen: 0, inPtr: 0, in: new Uint8Array(CMD_INLINE_BYTES), out: new Uint8Array(CMD_INLINE_BYTES), outPtr: 0, outlen: 0, token: 0, sig: 0, rsvd: 0, statusOwn: 0 }, landed: { fire: () => this.completed(i, st.status) }, delivery: null, cmd: null, out: undefined, failed: null,
      settle: (cmd, out, failed) => {
        st.cmd = cmd;
        st.out = out;
        st.failed = failed;
        void this.h.sim.spawn(st.writeBack);
      },
      writeBack: () => this.writeBack(i, st.base, st.entryBytes as Uint8Array, st.entry as CmdEntry, st.cmd as Cmd | CmdError, st.out, st.failed),
      fetchedThen: () => {
        if (st.delivery !== null) void this.h.sim.spawn(st.deliveryFailed);
      },
      deliveryFailed: () => this.deliveryFailed(i, st.base, st.entryBytes, st.delivery as Delivery),
    };
    return st;
  });

  private fetchStarted(): void {
    this.fetching++;
  }

  private fetchEnded(): void {
    this.fetching--;
  }

  /** The output of an executed command as bytes (a failure: status and syndrome, and its tracer text). */
  private outputOf(cmd: Cmd | CmdError, out: unknown, failed: unknown): { bytes: Uint8Array; err: CmdError | null } {
    const op = cmd.op;
    let err: CmdError | null = null;
    if (failed === null) {
      try {
        // into scratch bytes: the write-back copies them into the entry, or (`writeBackChain`) first of all
        return { bytes: encodeCmdOutput(op as CmdName, out as never, this.outScratch), err: null };
      } catch (e) {
        failed = e;
      }
    }
    err = failed instanceof CmdError ? failed : new CmdError(op, Object.hasOwn(CmdOpcode, op) ? CmdOpcode[op as CmdName] : 0, 0, 'INTERNAL_ERR', 'internal', String(failed));
    return { bytes: encodeCmdError(err), err };
  }

  /** Writes the output, the tracer record, then the entry's status and ownership; then the EQE. */
  private writeBack(i: number, base: number, b: Uint8Array, e: CmdEntry, cmd: Cmd | CmdError, out: unknown, failed: unknown): Promise<void> {
    const { bytes, err } = this.outputOf(cmd, out, failed);
    if (err === null && bytes.length <= CMD_INLINE_BYTES && bytes.length <= e.outlen) {
      // the usual output, inline in the entry: no mailbox, no tracer record, no process step
      b.fill(0, CmdEntryOff.OUT, CmdEntryOff.OUT + CMD_INLINE_BYTES);
      b.set(bytes, CmdEntryOff.OUT);
      return this.complete(i, base, b, 'OK');
    }
    return this.writeBackChain(i, base, b, e, bytes, err);
  }

  /** `writeBack` of an output past the entry's 16 bytes, or of a failure. */
  private async writeBackChain(i: number, base: number, b: Uint8Array, e: CmdEntry, out: Uint8Array, error: CmdError | null): Promise<void> {
    let bytes: Uint8Array = out.slice(); // out may be the scratch bytes another write-back takes while this one waits
    let err = error;
    if (bytes.length > e.outlen) {
      // the output does not fit what the driver left: BAD_OUTPUT_LEN, as much as fits
      const op = err?.op ?? 'UNKNOWN';
      err = new CmdError(op, err?.opcode ?? 0, err?.opMod ?? 0, 'BAD_OUTPUT_LEN', 'output_len', `the output of ${bytes.length} bytes exceeds outlen ${e.outlen}`);
      bytes = encodeCmdError(err).subarray(0, e.outlen);
    }
    const need = cmdBlocksFor(bytes.length);
    let addr = e.outPtr;
    for (let k = 0; k < need; k++) {
      if (addr === 0) return this.deliveryFailed(i, base, b, new Delivery('OUT_LENGTH_ERR', `the output chain ends after ${k} blocks`));
      if (addr < 0 || addr % CMD_BLOCK_ALIGN !== 0) return this.deliveryFailed(i, base, b, new Delivery('OUT_PTR_ALIGN_ERR', 'an output block pointer is off a mailbox block'));
      const ctrl = await this.h.dma.read(addr + CmdBlockOff.NEXT, CMD_BLOCK_BYTES - CmdBlockOff.NEXT);
      const blk = new Uint8Array(CMD_BLOCK_BYTES);
      blk.set(ctrl, CmdBlockOff.NEXT);
      const c = decodeCmdBlockCtrl(blk, 0);
      if (c.blockNum !== k) return this.deliveryFailed(i, base, b, new Delivery('BAD_BLK_NUM_ERR', `output block ${k} says block_num ${c.blockNum}`));
      if (c.token !== e.token) return this.deliveryFailed(i, base, b, new Delivery('TOK_ERR', `output block ${k} has token ${c.token}, the entry ${e.token}`));
      const from = CMD_INLINE_BYTES + k * CMD_BLOCK_DATA;
      blk.set(bytes.subarray(from, Math.min(bytes.length, from + CMD_BLOCK_DATA)), 0);
      blk[CmdBlockOff.RSVD1] = 0;
      signCmdBlock(blk, 0);
      await this.h.dma.write(addr, blk);
      this.sBlocksOut.inc();
      addr = c.next;
    }
    if (err !== null) await this.trace(i, e.token, err);
    b.fill(0, CmdEntryOff.OUT, CmdEntryOff.OUT + CMD_INLINE_BYTES);
    b.set(bytes.subarray(0, CMD_INLINE_BYTES), CmdEntryOff.OUT);
    await this.complete(i, base, b, 'OK');
  }

  /** Writes the firmware tracer record of entry `i` (when the driver gave a buffer). */
  private async trace(i: number, token: number, err: CmdError): Promise<void> {
    const at = this.tracerRecord(i);
    if (at === 0) return;
    const rec = new Uint8Array(TRACER_RECORD_BYTES);
    const v = new DataView(rec.buffer);
    v.setUint32(0, err.syndrome);
    v.setUint8(4, err.status);
    v.setUint8(5, token);
    const text = new TextEncoder().encode(`${err.op}\t${err.opcode}\t${err.opMod}\t${err.rule}\t${err.detail}`).subarray(0, TRACER_RECORD_BYTES - TRACER_TEXT_OFF);
    v.setUint16(6, text.length);
    rec.set(text, TRACER_TEXT_OFF);
    await this.h.dma.write(at, rec);
  }

  private async deliveryFailed(i: number, base: number, b: Uint8Array | null, d: Delivery): Promise<void> {
    this.sDelivery.get(d.status)?.inc();
    // an entry that could not be read has nothing to write back into but its status byte
    const bytes = b ?? new Uint8Array(CMD_ENTRY_BYTES);
    await this.complete(i, base, bytes, d.status);
  }

  /** Status and ownership back to software (the entry re-signed), then the completion EQE. */
  private complete(i: number, base: number, b: Uint8Array, status: CmdDeliveryStatusName): Promise<void> {
    b[CmdEntryOff.STATUS_OWN] = (CmdDeliveryStatus[status] << 1) & 0xfe;
    signCmdEntry(b, 0);
    // the rest happens as the write lands, in its event (no process to resume)
    const st = this.slots[i];
    st.status = status;
    return this.h.dma.write(base, b, st.landed);
  }

  /** Entry `i`'s status write landed: the entry is software's, then its EQE. */
  private completed(i: number, status: CmdDeliveryStatusName): void {
    this.held &= ~(1 << i);
    this.h.delivSig.setNow(CmdDeliveryStatus[status]);
    if ((this.eqeWanted & (1 << i)) !== 0) {
      const data = new Uint8Array(EQE_DATA_SIZE);
      const bit = (1 << i) >>> 0; // the vector, a big-endian u32
      data[EQE_CMD_VECTOR_OFF] = bit >>> 24;
      data[EQE_CMD_VECTOR_OFF + 1] = (bit >>> 16) & 0xff;
      data[EQE_CMD_VECTOR_OFF + 2] = (bit >>> 8) & 0xff;
      data[EQE_CMD_VECTOR_OFF + 3] = bit & 0xff;
      this.sEqes.inc();
      this.h.raiseCmdEqe(data);
    }
  }
}
