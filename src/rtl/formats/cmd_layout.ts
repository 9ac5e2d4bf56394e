/**
 * The command queue's own bytes (not the commands' payloads, which firmware/cmd_codec.ts lays
 * out): the 64-byte command entry `mlx5_cmd_layout`, the 576-byte mailbox block
 * `mlx5_cmd_prot_block`, their XOR signatures, the delivery statuses, the command-queue fields of
 * the initialization segment `mlx5_init_seg`, and the command-completion EQE's data.
 *
 * Sources (Linux 6.12): include/linux/mlx5/device.h:526 (mlx5_cmd_layout), :795
 * (mlx5_cmd_prot_block), :569 (mlx5_init_seg), :173 (MLX5_MAX_COMMANDS, MLX5_CMD_DATA_BLOCK_SIZE,
 * MLX5_PCI_CMD_XPORT), :640 (mlx5_eqe_cmd); drivers/net/ethernet/mellanox/mlx5/core/cmd.c:79
 * (MLX5_CMD_DELIVERY_STAT_*), :219-269 (xor8_buf, calc_block_sig, set_signature), :2359-2397
 * (cmdq_addr_l_sz: log_sz, log_stride, 4 KiB-aligned queue), include/linux/mlx5/driver.h:74
 * (CMD_OWNER_HW).
 */
import { U64_HI_LIMIT, getBe32, setBe32 } from './field.ts';

// ---------------------------------------------------------------------------------------------
// Command entry (mlx5_cmd_layout)
// ---------------------------------------------------------------------------------------------

/** Bytes of a command entry. */
export const CMD_ENTRY_BYTES = 64;
/** Input and output bytes carried inline in the entry (`in[4]`, `out[4]`). */
export const CMD_INLINE_BYTES = 16;
/** Entry field offsets. */
export const CmdEntryOff = {
  TYPE: 0,
  INLEN: 4,
  IN_PTR: 8,
  IN: 16,
  OUT: 32,
  OUT_PTR: 48,
  OUTLEN: 56,
  TOKEN: 60,
  SIG: 61,
  RSVD1: 62,
  STATUS_OWN: 63,
} as const;
/** `type` of a PCI command (MLX5_PCI_CMD_XPORT). */
export const MLX5_PCI_CMD_XPORT = 7;
/** Ownership bit of status_own: the entry is the hardware's (CMD_OWNER_HW). */
export const CMD_OWNER_HW = 0x1;
/** Most entries a queue may have (MLX5_MAX_COMMANDS). */
export const MLX5_MAX_COMMANDS = 32;

/** Delivery statuses: `status_own >> 1` (MLX5_CMD_DELIVERY_STAT_*). */
export const CmdDeliveryStatus = {
  OK: 0x0,
  SIGNAT_ERR: 0x1,
  TOK_ERR: 0x2,
  BAD_BLK_NUM_ERR: 0x3,
  OUT_PTR_ALIGN_ERR: 0x4,
  IN_PTR_ALIGN_ERR: 0x5,
  FW_ERR: 0x6,
  IN_LENGTH_ERR: 0x7,
  OUT_LENGTH_ERR: 0x8,
  RES_FLD_NOT_CLR_ERR: 0x9,
  CMD_DESCR_ERR: 0x10,
} as const;
/** The name of a delivery status. */
export type CmdDeliveryStatusName = keyof typeof CmdDeliveryStatus;

/** A command entry's fields. */
export interface CmdEntry {
  type: number;
  inlen: number;
  /** DMA address of the first input mailbox block (0: none). */
  inPtr: number;
  /** The first 16 bytes of the input. */
  in: Uint8Array;
  /** The first 16 bytes of the output. */
  out: Uint8Array;
  outPtr: number;
  outlen: number;
  token: number;
  sig: number;
  /** The reserved bytes 1..3 and 62 (must be zero). */
  rsvd: number;
  /** Delivery status (bits 7:1) and ownership (bit 0). */
  statusOwn: number;
}

/** A word view of each buffer xor8 has read (scratch entries and blocks, read again and again: made once). */
const WORDS = new WeakMap<ArrayBufferLike, Int32Array>();

/** XOR of `len` bytes from `off` (cmd.c xor8_buf). */
export function xor8(b: Uint8Array, off: number, len: number): number {
  let s = 0;
  let i = off;
  const end = off + len;
  // the bytes up to a 4-byte boundary of the buffer, then whole words (a mailbox block is 576
  // bytes: a quarter of the steps), folded to a byte, then the tail; XOR does not care about order
  while (i < end && ((b.byteOffset + i) & 3) !== 0) s ^= b[i++];
  const words = (end - i) >>> 2;
  if (words > 0) {
    let w = WORDS.get(b.buffer);
    if (w === undefined) {
      w = new Int32Array(b.buffer, 0, b.buffer.byteLength >>> 2);
      WORDS.set(b.buffer, w);
    }
    const w0 = (b.byteOffset + i) >>> 2;
    let x = 0;
    for (let k = 0; k < words; k++) x ^= w[w0 + k];
    x ^= x >>> 16;
    x ^= x >>> 8;
    s ^= x & 0xff;
    i += words << 2;
  }
  while (i < end) s ^= b[i++];
  return s;
}

/** Writes entry `e` (its sig as given) at `b[off..off+64)`. */
export function encodeCmdEntry(b: Uint8Array, off: number, e: CmdEntry): void {
  // byte stores rather than a DataView and two subarrays per entry (two entries per command):
  // the same bytes, as setUint32's ToUint32 and a Uint8Array's ToUint8 give them
  inBounds(b, off, CMD_ENTRY_BYTES);
  b.fill(0, off, off + CMD_ENTRY_BYTES);
  b[off + CmdEntryOff.TYPE] = e.type;
  setBe32(b, off + CmdEntryOff.INLEN, e.inlen >>> 0);
  setBe64(b, off + CmdEntryOff.IN_PTR, e.inPtr);
  copyInline(e.in, b, off + CmdEntryOff.IN);
  copyInline(e.out, b, off + CmdEntryOff.OUT);
  setBe64(b, off + CmdEntryOff.OUT_PTR, e.outPtr);
  setBe32(b, off + CmdEntryOff.OUTLEN, e.outlen >>> 0);
  b[off + CmdEntryOff.TOKEN] = e.token;
  b[off + CmdEntryOff.SIG] = e.sig;
  b[off + CmdEntryOff.STATUS_OWN] = e.statusOwn;
}

/** The entry at `b[off..off+64)`; pointers at or past 2^53 read as a RangeError's caller's problem (null). */
export function decodeCmdEntry(b: Uint8Array, off: number): CmdEntry | null {
  inBounds(b, off, CMD_ENTRY_BYTES);
  // null for a pointer past the 53 bits of host memory (no host has it)
  const inPtr = getBe64(b, off + CmdEntryOff.IN_PTR);
  if (inPtr < 0) return null;
  const outPtr = getBe64(b, off + CmdEntryOff.OUT_PTR);
  if (outPtr < 0) return null;
  return {
    type: b[off + CmdEntryOff.TYPE],
    inlen: getBe32(b, off + CmdEntryOff.INLEN),
    inPtr,
    in: b.slice(off + CmdEntryOff.IN, off + CmdEntryOff.IN + CMD_INLINE_BYTES),
    out: b.slice(off + CmdEntryOff.OUT, off + CmdEntryOff.OUT + CMD_INLINE_BYTES),
    outPtr,
    outlen: getBe32(b, off + CmdEntryOff.OUTLEN),
    token: b[off + CmdEntryOff.TOKEN],
    sig: b[off + CmdEntryOff.SIG],
    rsvd: b[off + 1] | b[off + 2] | b[off + 3] | b[off + CmdEntryOff.RSVD1],
    statusOwn: b[off + CmdEntryOff.STATUS_OWN],
  };
}

/**
 * `decodeCmdEntry` into `e` (its fields overwritten, its `in` and `out` arrays, of 16 bytes each,
 * filled): for a reader that decodes an entry per command into one record of its own. False
 * (`e` left partly written) where decodeCmdEntry gives null.
 */
export function decodeCmdEntryInto(b: Uint8Array, off: number, e: CmdEntry): boolean {
  inBounds(b, off, CMD_ENTRY_BYTES);
  const inPtr = getBe64(b, off + CmdEntryOff.IN_PTR);
  if (inPtr < 0) return false;
  const outPtr = getBe64(b, off + CmdEntryOff.OUT_PTR);
  if (outPtr < 0) return false;
  if (e.in.length !== CMD_INLINE_BYTES || e.out.length !== CMD_INLINE_BYTES) throw new RangeError('decodeCmdEntryInto: in and out must hold 16 bytes each');
  e.type = b[off + CmdEntryOff.TYPE];
  e.inlen = getBe32(b, off + CmdEntryOff.INLEN);
  e.inPtr = inPtr;
  for (let i = 0; i < CMD_INLINE_BYTES; i++) e.in[i] = b[off + CmdEntryOff.IN + i];
  for (let i = 0; i < CMD_INLINE_BYTES; i++) e.out[i] = b[off + CmdEntryOff.OUT + i];
  e.outPtr = outPtr;
  e.outlen = getBe32(b, off + CmdEntryOff.OUTLEN);
  e.token = b[off + CmdEntryOff.TOKEN];
  e.sig = b[off + CmdEntryOff.SIG];
  e.rsvd = b[off + 1] | b[off + 2] | b[off + 3] | b[off + CmdEntryOff.RSVD1];
  e.statusOwn = b[off + CmdEntryOff.STATUS_OWN];
  return true;
}

/** A RangeError unless `b[off..off+len)` lies in `b` (where a DataView over it would have thrown). */
function inBounds(b: Uint8Array, off: number, len: number): void {
  if (!(off >= 0 && off + len <= b.length)) throw new RangeError(`bytes ${off}..${off + len} lie outside the buffer (${b.length} bytes)`);
}

/** A big-endian u64 at `b[i]`, or -1 when it is 2^53 or more (getU64's RangeError). */
function getBe64(b: Uint8Array, i: number): number {
  const hi = getBe32(b, i);
  return hi >= U64_HI_LIMIT ? -1 : hi * 2 ** 32 + getBe32(b, i + 4);
}

/** setU64's bytes: the high and low halves, each as setUint32 takes it (ToUint32). */
function setBe64(b: Uint8Array, i: number, v: number): void {
  setBe32(b, i, Math.floor(v / 2 ** 32) >>> 0);
  setBe32(b, i + 4, v >>> 0);
}

/** The first 16 bytes of `src` (fewer if it is shorter) into `b` at `at`. */
function copyInline(src: Uint8Array, b: Uint8Array, at: number): void {
  const n = Math.min(src.length, CMD_INLINE_BYTES);
  for (let i = 0; i < n; i++) b[at + i] = src[i];
}

/** Sets the entry's signature so its 64 bytes XOR to 0xff (set_signature). */
export function signCmdEntry(b: Uint8Array, off: number): void {
  b[off + CmdEntryOff.SIG] = 0;
  b[off + CmdEntryOff.SIG] = ~xor8(b, off, CMD_ENTRY_BYTES) & 0xff;
}

/** True when the entry's 64 bytes XOR to 0xff (verify_signature). */
export function cmdEntrySigOk(b: Uint8Array, off: number): boolean {
  return xor8(b, off, CMD_ENTRY_BYTES) === 0xff;
}

// ---------------------------------------------------------------------------------------------
// Mailbox block (mlx5_cmd_prot_block)
// ---------------------------------------------------------------------------------------------

/** Data bytes of a mailbox block (MLX5_CMD_DATA_BLOCK_SIZE). */
export const CMD_BLOCK_DATA = 512;
/** Bytes of a mailbox block: data, 48 reserved, next, block_num, reserved, token, ctrl_sig, sig. */
export const CMD_BLOCK_BYTES = 576;
/**
 * Alignment of a block: mlx5 takes them from a dma_pool aligned to the block size rounded up to
 * a power of two (cmd.c mlx5_cmd_enable: roundup_pow_of_two(576)); the firmware here refuses a
 * pointer off it (IN_PTR_ALIGN_ERR / OUT_PTR_ALIGN_ERR; the PRM's own rule is not public, assumed).
 */
export const CMD_BLOCK_ALIGN = 1024;
/** Block field offsets. */
export const CmdBlockOff = { DATA: 0, RSVD0: 512, NEXT: 560, BLOCK_NUM: 568, RSVD1: 572, TOKEN: 573, CTRL_SIG: 574, SIG: 575 } as const;
/** The control part of a block: from rsvd0 to the end. */
export const CMD_BLOCK_CTRL = CMD_BLOCK_BYTES - CMD_BLOCK_DATA;

/** Mailbox blocks a message of `len` bytes needs past its 16 inline bytes (mlx5_calc_cmd_blocks). */
export function cmdBlocksFor(len: number): number {
  return Math.ceil(Math.max(0, len - CMD_INLINE_BYTES) / CMD_BLOCK_DATA);
}

/** Writes a block's control fields (next, block_num, token) and its two signatures (calc_block_sig). */
export function encodeCmdBlockCtrl(b: Uint8Array, off: number, next: number, blockNum: number, token: number): void {
  inBounds(b, off, CMD_BLOCK_BYTES);
  b.fill(0, off + CmdBlockOff.RSVD0, off + CMD_BLOCK_BYTES);
  setBe64(b, off + CmdBlockOff.NEXT, next);
  setBe32(b, off + CmdBlockOff.BLOCK_NUM, blockNum >>> 0);
  b[off + CmdBlockOff.TOKEN] = token;
  signCmdBlock(b, off);
}

/** Sets ctrl_sig (over rsvd0..token) and sig (over everything before it), as calc_block_sig. */
export function signCmdBlock(b: Uint8Array, off: number): void {
  b[off + CmdBlockOff.CTRL_SIG] = ~xor8(b, off + CmdBlockOff.RSVD0, CMD_BLOCK_CTRL - 2) & 0xff;
  b[off + CmdBlockOff.SIG] = ~xor8(b, off, CMD_BLOCK_BYTES - 1) & 0xff;
}

/** True when both signatures of the block hold (verify_block_sig). */
export function cmdBlockSigOk(b: Uint8Array, off: number): boolean {
  return xor8(b, off + CmdBlockOff.RSVD0, CMD_BLOCK_CTRL - 1) === 0xff && xor8(b, off, CMD_BLOCK_BYTES) === 0xff;
}

/** A block's control fields; `next` is -1 when it is past 2^53 (no host memory there). */
export function decodeCmdBlockCtrl(b: Uint8Array, off: number): { next: number; blockNum: number; token: number } {
  inBounds(b, off, CMD_BLOCK_BYTES);
  return { next: getBe64(b, off + CmdBlockOff.NEXT), blockNum: getBe32(b, off + CmdBlockOff.BLOCK_NUM), token: b[off + CmdBlockOff.TOKEN] };
}

// ---------------------------------------------------------------------------------------------
// Initialization segment (mlx5_init_seg), the command queue's registers
// ---------------------------------------------------------------------------------------------

/** Register offsets of the initialization segment the command queue uses. */
export const IsegOff = {
  FW_REV: 0x00,
  /** cmdif_rev_fw_sub: command interface revision in bits 31:16. */
  CMDIF_REV_FW_SUB: 0x04,
  CMDQ_ADDR_H: 0x10,
  /** cmdq_addr_l_sz: address bits 31:12, log_sz in bits 7:4, log_stride in bits 3:0. */
  CMDQ_ADDR_L_SZ: 0x14,
  /** The command doorbell: bit i posts entry i. */
  CMD_DBELL: 0x18,
  /** initializing: bit 31 set while the firmware is not ready (reads 0 here). */
  INITIALIZING: 0x1fc,
  /**
   * Model-private (reserved words of rsvd2): the host addresses of the firmware tracer's pages,
   * page p's high word at TRACER_PAGE + 8p and low word 4 bytes on. mlx5's fw_tracer learns its
   * buffer through MTRC_* access registers and an mkey; plain registers here (firmware/cmd_queue.ts).
   */
  TRACER_PAGE: 0x400,
} as const;
/** Pages of the tracer buffer, and records per page (one record per command entry). */
export const TRACER_PAGES = 4;
export const TRACER_RECORDS_PER_PAGE = 8;
/** Command interface revision the firmware reports (cmd.c CMD_IF_REV). */
export const CMD_IF_REV = 5;
/** log2 of the queue's entries (32: MLX5_MAX_COMMANDS) and of their stride (64 bytes). */
export const CMDQ_LOG_SZ = 5;
export const CMDQ_LOG_STRIDE = 6;

/**
 * How this model's driver and firmware share the 32 entries (a model choice: mlx5 gives any free
 * entry to any command and keeps the last for page commands, cmd.c max_reg_cmds): entries below
 * CMD_BG_FIRST carry the commands a caller waits for, executed one at a time in doorbell order;
 * the CMD_BG_ENTRIES from CMD_BG_FIRST carry the MR cache's asynchronous commands
 * (mlx5_cmd_exec_cb, at most 8 in flight: MAX_PENDING_REG_MR in mlx5_ib mr.c), executed in
 * rounds beside them; the last entry is kept for the page commands (MANAGE_PAGES).
 */
export const CMD_BG_FIRST = 23;
export const CMD_BG_ENTRIES = 8;
export const CMD_PAGE_ENTRY = 31;

// ---------------------------------------------------------------------------------------------
// Firmware tracer record (model-private; see cmdif.ts)
// ---------------------------------------------------------------------------------------------

/** Bytes of a tracer record: one per command entry, the text of the entry's last failure. */
export const TRACER_RECORD_BYTES = 512;
/** Record layout: syndrome u32 @0, status u8 @4, token u8 @5, text length u16 @6, UTF-8 text @8. */
export const TRACER_TEXT_OFF = 8;

/** The command-completion EQE's data: the vector of completed entries, u32 at data+0 (mlx5_eqe_cmd). */
export const EQE_CMD_VECTOR_OFF = 0;
