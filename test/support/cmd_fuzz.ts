/**
 * The command fuzzer, on raw bytes (shared by test/rtl/firmware/cmd_fuzz.test.ts and
 * `npm run bench -- fuzz`): random firmware commands (every modelled opcode, reserved ones, and
 * inputs that are no command at all) with fields well-formed or wild, encoded with cmd_codec,
 * then posted in the command queue in host memory as a broken driver might: wrong input or output
 * lengths, mailbox chains cut short or looping, wrong block numbers, tokens and signatures, a
 * wrong entry type, reserved bytes set, a misaligned pointer, an entry not handed to the
 * hardware, the doorbell rung twice. Every entry must come back to software with the delivery
 * status mlx5 defines for its fault (or OK and a command status), never a crash, and the
 * adapter must still move data afterwards. Then the driver closes the adapter (TEARDOWN_HCA, the
 * pages reclaimed, DISABLE_HCA): every page comes back but those a raw HCA_RETURN_PAGES took.
 *
 * A well-formed TEARDOWN_HCA (profile 0) is never posted raw: it ends the adapter's life behind
 * the driver's back, after which no data moves, as on real hardware; its profile is made one
 * that is not modelled (BAD_PARAM) instead, and the close exercises the real one. Likewise a
 * DESTROY_EQ never names the command EQ (eqn 0): without it no command completes, and the driver
 * waits for ever (mlx5 too, until its 60 s command timeout, lib/tout.c:17); the close destroys it.
 */
import fc from 'fast-check';
import { Access, Testbed } from '../../src/index.ts';
import { CmdStatus } from '../../src/rtl/firmware/cmdif.ts';
import { CmdOpcode } from '../../src/rtl/formats/constants.ts';
import { encodeCmdInput, cmdOutputLength } from '../../src/rtl/firmware/cmd_codec.ts';
import type { Cmd } from '../../src/rtl/firmware/cmd_types.ts';
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
  IsegOff,
  MLX5_PCI_CMD_XPORT,
  cmdBlocksFor,
  encodeCmdBlockCtrl,
  encodeCmdEntry,
  signCmdEntry,
  signCmdBlock,
  type CmdDeliveryStatusName,
} from '../../src/rtl/formats/cmd_layout.ts';
import { rcPair } from './rc_pair.ts';
import type { Hca } from '../../src/rtl/hca.ts';

/** One command: its name and the fields of its input. */
export interface FuzzCmd {
  op: string;
  fields: Record<string, unknown>;
}

/** What the poster breaks in the queue. */
export const FAULTS = [
  'none', 'inlen_short', 'inlen_long', 'outlen_short', 'chain_cut', 'chain_loop', 'block_num', 'token', 'entry_sig', 'block_sig',
  'type', 'rsvd', 'in_ptr_align', 'not_owned', 'ring_twice', 'opcode', 'garbage',
] as const;
export type Fault = (typeof FAULTS)[number];

/** One posting: a command, the fault, and a number the fault draws from. */
export interface FuzzPost {
  cmd: FuzzCmd;
  fault: Fault;
  n: number;
}

const OPS = [...Object.keys(CmdOpcode), 'NOT_A_COMMAND', '', 'constructor', '__proto__'];
const FIELDS = [
  'opMod', 'pd', 'tag', 'accessMode', 'access', 'start', 'length', 'free', 'umrEn', 'remoteInval', 'qpn', 'len64', 'logPageSize', 'pgAccess',
  'mtt', 'klm', 'xltCapacity', 'kind', 'index', 'flagsQpn', 'size', 'bufAddr', 'eventMask', 'eqn', 'dbrAddr',
  'cqn', 'sendCqn', 'recvCqn', 'sqSize', 'rqSize', 'transport', 'maxSendSge', 'maxRecvSge', 'sqBufAddr', 'rqBufAddr', 'pas', 'fre',
  'accessFlags', 'port', 'pkeyIndex', 'remoteQpn', 'remoteHca', 'mtu', 'rqPsn', 'sqPsn', 'timeout', 'retryCnt', 'rnrRetry', 'maxRdAtomic',
  'profile', 'numEntries', 'functionId',
];

/** A field's value: small and in range, at the edges of widths, or not a number at all. */
const wild: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 8 }), weight: 4 },
  { arbitrary: fc.constantFrom(0, 1, 12, 64, 256, 4096, 0x100, 0xff, 0xffff, 0xffffff, 2 ** 24, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 64, -1, -0, 0.5, NaN, Infinity, -Infinity), weight: 3 },
  { arbitrary: fc.constantFrom('RC', 'UD', 'XX', '', '7', 'x'), weight: 1 },
  { arbitrary: fc.constantFrom(null, true, false, {}, [], [null], [1, 2, 3], ['a'], [{ bcount: 1, key: 2, va: 3 }], [{}], [0x10000, 0x20000]), weight: 2 },
  { arbitrary: fc.array(fc.oneof(fc.integer({ min: 0, max: 2 ** 20 }).map((v) => v * 4096), fc.constant(-1)), { maxLength: 80 }), weight: 1 },
);

/** A well-formed command of each opcode over the objects that exist (pd 1, eqn 1, cqn 1, qpn 0x100). */
const BASE: Record<string, Record<string, unknown>> = {
  QUERY_HCA_CAP: { opMod: 1 },
  CREATE_MKEY: { tag: 1, accessMode: 1, access: 1, pd: 1, start: 0x1000, length: 4096, mtt: [0x10003], umrEn: true },
  QUERY_MKEY: { index: 2 },
  DESTROY_MKEY: { index: 2 },
  PAGE_FAULT_RESUME: { flagsQpn: 0x100 },
  CREATE_EQ: { size: 8, bufAddr: 0x10000, eventMask: 1 },
  CREATE_CQ: { size: 8, eqn: 1, pas: [0x10000] },
  DESTROY_CQ: { cqn: 1 },
  CREATE_QP: { pd: 1, sendCqn: 1, recvCqn: 1, sqSize: 8, rqSize: 8, pas: [0x10000, 0x11000], fre: false },
  DESTROY_QP: { qpn: 0x100 },
  QUERY_QP: { qpn: 0x100 },
  RST2INIT_QP: { qpn: 0x100, accessFlags: 6 },
  INIT2RTR_QP: { qpn: 0x100, remoteQpn: 0x101, mtu: 1024 },
  RTR2RTS_QP: { qpn: 0x100, maxRdAtomic: 4 },
  '2ERR_QP': { qpn: 0x100 },
  DEALLOC_PD: { pd: 1 },
  TEARDOWN_HCA: { profile: 1 },
  DISABLE_HCA: {},
  MANAGE_PAGES: { opMod: 2, numEntries: 4 },
};

/**
 * A TEARDOWN_HCA whose profile would be the graceful close gets a profile not modelled, and a
 * DESTROY_EQ that could name the command EQ (eqn 0) names an EQ that does not exist (see the file comment).
 */
function harmless(c: FuzzCmd): FuzzCmd {
  if (c.op === 'DESTROY_EQ') {
    const e = c.fields.eqn;
    return typeof e === 'number' && Number.isInteger(e) && e >= 1 && e <= 0xff ? c : { ...c, fields: { ...c.fields, eqn: 0xff } };
  }
  if (c.op !== 'TEARDOWN_HCA') return c;
  const p = c.fields.profile;
  return p === undefined || p === 0 || p === -0 || p === null || p === false || (typeof p === 'number' && !(p >= 1 && p < 2 ** 16)) ? { ...c, fields: { ...c.fields, profile: 1 } } : c;
}

export const command: fc.Arbitrary<FuzzCmd> = fc
  .record({ op: fc.constantFrom(...OPS), fields: fc.dictionary(fc.constantFrom(...FIELDS), wild, { maxKeys: 4 }), keepBase: fc.boolean() })
  .map(({ op, fields, keepBase }) => harmless({ op, fields: keepBase ? { ...(BASE[op] ?? {}), ...fields } : fields }));

export const post: fc.Arbitrary<FuzzPost> = fc.record({
  cmd: command,
  fault: fc.oneof({ arbitrary: fc.constant<Fault>('none'), weight: 4 }, { arbitrary: fc.constantFrom(...FAULTS), weight: 6 }),
  n: fc.nat({ max: 0xffff }),
});

/** The bytes of a fuzzed command's input (encodeCmdInput of whatever it is; garbage when it does not encode). */
function inputOf(p: FuzzPost): Uint8Array {
  const cmd = { ...p.cmd.fields, op: p.cmd.op } as unknown as Cmd;
  let b: Uint8Array;
  try {
    b = encodeCmdInput(cmd);
  } catch {
    b = new Uint8Array(16 + (p.n % 40)).map((_, i) => (i * 37 + p.n) & 0xff);
  }
  if (p.fault === 'opcode') new DataView(b.buffer, b.byteOffset).setUint16(0, 0x0c00 + (p.n % 0x2000)); // reserved opcodes (none modelled from 0xc00)
  if (p.fault === 'garbage') b = new Uint8Array(16 + (p.n % 1200)).map((_, i) => (i * 131 + p.n * 7) & 0xff);
  return b;
}

/** The delivery status a fault must end with when it applies (null: any status may follow). */
function expected(f: Fault, inBlocks: number): CmdDeliveryStatusName | null {
  switch (f) {
    case 'inlen_short':
      return 'IN_LENGTH_ERR';
    case 'inlen_long':
      return 'IN_LENGTH_ERR';
    case 'outlen_short':
      return 'OUT_LENGTH_ERR';
    case 'entry_sig':
      return 'SIGNAT_ERR';
    case 'type':
    case 'not_owned':
      return 'CMD_DESCR_ERR';
    case 'rsvd':
      return 'RES_FLD_NOT_CLR_ERR';
    case 'chain_cut':
      return inBlocks > 1 ? 'IN_LENGTH_ERR' : null;
    case 'chain_loop':
    case 'block_num':
      return inBlocks > 1 || (f === 'block_num' && inBlocks > 0) ? 'BAD_BLK_NUM_ERR' : null;
    case 'token':
      return inBlocks > 0 ? 'TOK_ERR' : null;
    case 'block_sig':
      return inBlocks > 0 ? 'SIGNAT_ERR' : null;
    case 'in_ptr_align':
      return inBlocks > 0 ? 'IN_PTR_ALIGN_ERR' : null;
    default:
      return null;
  }
}

const DELIVERY = new Set<number>(Object.values(CmdDeliveryStatus));
const STATUSES = new Set<number>(Object.values(CmdStatus));
const POLL_PS = 1_000_000;
const GIVE_UP_PS = 50_000_000_000; // 50 ms of simulated time: the firmware kept the entry

/** The raw poster: an entry of the ordinary lane the driver keeps out of its own use (CmdQueue.reserveEntry) and a mailbox area of its own. */
class RawPoster {
  private readonly area: { addr: number; length: number };
  private token = 0x80;
  private readonly entryVa: number;
  /** Pages a raw HCA_RETURN_PAGES took from the firmware (the driver still counts them given). */
  taken = 0;

  constructor(
    private readonly tb: Testbed,
    private readonly hca: Hca,
    queueVa: number,
    private readonly entry: number,
    /** Gives the entry back to the driver. */
    readonly release: () => void,
  ) {
    const host = tb.host(0);
    this.area = host.alloc(512 * 1024);
    host.faultIn(this.area.addr, this.area.length);
    host.pin(this.area.addr, this.area.length);
    this.entryVa = queueVa + entry * CMD_ENTRY_BYTES;
  }

  /** Posts `p`, waits for its entry to come back; what went wrong ([] when it held). */
  async post(p: FuzzPost): Promise<string[]> {
    const host = this.tb.host(0);
    const input = inputOf(p);
    const inBlocks = cmdBlocksFor(input.length);
    // room for the command's output when it encodes (HCA_RETURN_PAGES: its pages), else a header's
    let outlen = cmdOutputLength({ op: 'ALLOC_PD' } as Cmd);
    try {
      outlen = Math.max(outlen, cmdOutputLength({ ...p.cmd.fields, op: p.cmd.op } as unknown as Cmd));
    } catch {
      // not a command: the header's room
    }
    const outBlocks = cmdBlocksFor(outlen);
    if ((inBlocks + outBlocks) * CMD_BLOCK_ALIGN > this.area.length) return [];
    this.token = this.token === 0xff ? 1 : this.token + 1;
    const token = this.token;
    const blockVa = (k: number): number => this.area.addr + k * CMD_BLOCK_ALIGN;
    const blockPa = (k: number): number => host.dmaAddress(blockVa(k));
    const buf = new Uint8Array(CMD_BLOCK_BYTES);
    const writeChain = (first: number, n: number, data: Uint8Array | null): void => {
      for (let k = 0; k < n; k++) {
        buf.fill(0);
        if (data !== null) buf.set(data.subarray(CMD_INLINE_BYTES + k * CMD_BLOCK_DATA, CMD_INLINE_BYTES + (k + 1) * CMD_BLOCK_DATA));
        let next = k + 1 < n ? blockPa(first + k + 1) : 0;
        let num = k;
        let tok = token;
        if (data !== null && p.fault === 'chain_cut' && k === n - 2) next = 0;
        if (data !== null && p.fault === 'chain_loop' && k === n - 2) next = blockPa(first); // back to block 0
        if (data !== null && p.fault === 'block_num' && k === p.n % n) num = k + 1 + (p.n % 7);
        if (data !== null && p.fault === 'token' && k === p.n % n) tok = token ^ (1 + (p.n % 254));
        encodeCmdBlockCtrl(buf, 0, next, num, tok);
        if (data !== null && p.fault === 'block_sig' && k === p.n % n) {
          buf[CmdBlockOff.SIG] ^= 1 + (p.n % 255);
        } else signCmdBlock(buf, 0);
        host.write(blockVa(first + k), buf);
      }
    };
    writeChain(0, inBlocks, input);
    writeChain(inBlocks, outBlocks, null);
    const e = new Uint8Array(CMD_ENTRY_BYTES);
    const inline = new Uint8Array(CMD_INLINE_BYTES);
    inline.set(input.subarray(0, CMD_INLINE_BYTES));
    let inPtr = inBlocks > 0 ? blockPa(0) : 0;
    if (p.fault === 'in_ptr_align' && inBlocks > 0) inPtr += 8 * (1 + (p.n % 127));
    const inlen = p.fault === 'inlen_short' ? p.n % CMD_INLINE_BYTES : p.fault === 'inlen_long' ? input.length + CMD_BLOCK_DATA * (1 + inBlocks) + (p.n % 1000) : input.length;
    encodeCmdEntry(e, 0, {
      type: p.fault === 'type' ? (MLX5_PCI_CMD_XPORT + 1 + (p.n % 200)) & 0xff : MLX5_PCI_CMD_XPORT,
      inlen,
      inPtr,
      in: inline,
      out: new Uint8Array(CMD_INLINE_BYTES),
      outPtr: outBlocks > 0 ? blockPa(inBlocks) : 0,
      outlen: p.fault === 'outlen_short' ? p.n % CMD_INLINE_BYTES : outlen,
      token,
      sig: 0,
      rsvd: 0,
      statusOwn: p.fault === 'not_owned' ? 0 : CMD_OWNER_HW,
    });
    if (p.fault === 'rsvd') e[1 + (p.n % 3)] = 1 + (p.n % 255);
    signCmdEntry(e, 0);
    if (p.fault === 'entry_sig') e[CmdEntryOff.SIG] ^= 1 + (p.n % 255);
    host.write(this.entryVa, e);
    const busyBefore = this.stat('doorbell_busy');
    this.hca.iseg.write32(IsegOff.CMD_DBELL, (2 ** this.entry) >>> 0);
    if (p.fault === 'ring_twice') {
      await this.tb.delay(300_000); // the first ring has arrived: the entry is the firmware's
      this.hca.iseg.write32(IsegOff.CMD_DBELL, (2 ** this.entry) >>> 0);
    }
    const t0 = this.tb.now;
    // software never owned it ('not_owned'): the firmware still answers, writing the status back
    while (p.fault !== 'not_owned' && (host.read(this.entryVa + CmdEntryOff.STATUS_OWN, 1)[0] & CMD_OWNER_HW) !== 0) {
      if (this.tb.now - t0 > GIVE_UP_PS) return [`${p.fault}: the firmware kept the entry`];
      await this.tb.delay(POLL_PS);
    }
    if (p.fault === 'not_owned') {
      // wait for the firmware's answer: the status byte changes from 0
      while (host.read(this.entryVa + CmdEntryOff.STATUS_OWN, 1)[0] === 0) {
        if (this.tb.now - t0 > GIVE_UP_PS) return ['not_owned: no delivery status'];
        await this.tb.delay(POLL_PS);
      }
    }
    await this.tb.quiesce(); // the completion EQE and the firmware's bookkeeping
    const bad: string[] = [];
    const so = host.read(this.entryVa + CmdEntryOff.STATUS_OWN, 1)[0];
    const deliv = so >>> 1;
    const what = `${p.fault} ${p.cmd.op}`;
    if (!DELIVERY.has(deliv)) bad.push(`${what}: unknown delivery status ${deliv}`);
    const want = expected(p.fault, inBlocks);
    if (want !== null && deliv !== CmdDeliveryStatus[want]) bad.push(`${what}: delivery status ${deliv}, not ${want}`);
    if (deliv === CmdDeliveryStatus.OK) {
      const status = host.read(this.entryVa + CmdEntryOff.OUT, 1)[0];
      if (!STATUSES.has(status)) bad.push(`${what}: unknown command status ${status}`);
      if (p.fault === 'opcode' && status !== CmdStatus.BAD_OP) bad.push(`${what}: a reserved opcode got status ${status}`);
      // pages the firmware gave back to this poster: output_num_entries at output byte 8 (inline)
      const out = host.read(this.entryVa + CmdEntryOff.OUT, CMD_INLINE_BYTES);
      const ov = new DataView(out.buffer, out.byteOffset);
      if (status === CmdStatus.OK && ov.getUint16(0) === 0 && inOp(input) === CmdOpcode.MANAGE_PAGES && inOpMod(input) === 2) this.taken += ov.getUint32(8);
    }
    if (p.fault === 'ring_twice' && this.stat('doorbell_busy') !== busyBefore + 1) bad.push('ring_twice: the second ring was not refused');
    return bad;
  }

  private stat(name: string): number {
    return this.tb.stats()['tb.hca0.cmdif'][name] as number;
  }
}

function inOp(b: Uint8Array): number {
  return b.length >= 2 ? (b[0] << 8) | b[1] : -1;
}

function inOpMod(b: Uint8Array): number {
  return b.length >= 8 ? (b[6] << 8) | b[7] : -1;
}

/**
 * Runs a sequence of postings on a fresh testbed (after a PD, an EQ, a CQ and a QP exist), then
 * a data transfer: what went wrong ([] when it all held).
 */
export async function runCmdCase(posts: readonly FuzzPost[]): Promise<string[]> {
  const bad: string[] = [];
  try {
    // no MR-cache pre-fill: its thousands of background CREATE_MKEYs would only slow each case
    // (the raw postings meet the background lane's entries all the same when a registration misses)
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      // the driver brings the queue up (and its command EQ, eqn 0); objects to name exist
      const ctx = await tb.openDevice(0);
      const { eqn } = await ctx.cmdq.exec({ op: 'CREATE_EQ', size: 64 });
      const { pd } = await ctx.cmdq.exec({ op: 'ALLOC_PD' });
      const { cqn } = await ctx.cmdq.exec({ op: 'CREATE_CQ', size: 64, eqn });
      await ctx.cmdq.exec({ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 64, rqSize: 64 });
      const entry = await ctx.cmdq.reserveEntry();
      const raw = new RawPoster(tb, tb.hca(0), ctx.cmdq.queueAddress, entry, () => ctx.cmdq.releaseEntry(entry));
      for (const p of posts) bad.push(...(await raw.post(p)));
      // the adapter still works: a connected pair moves data
      const { pd0, pd1, qp0, cq0 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      tb.host(0).fill(a.addr, 64, 0x5a);
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await cq0.wait(1, { timeout: 1e10 });
      if (wc.status !== 'SUCCESS' || tb.host(1).read(b.addr, 1)[0] !== 0x5a) bad.push(`the adapter no longer works: ${wc.status}`);
      // the driver lets the adapter go: every page it gave comes back, but those the poster took
      raw.release();
      const left = await tb.closeDevice(0);
      if (left > raw.taken) bad.push(`close: ${left} pages not returned; the raw postings took ${raw.taken}`);
      const hca = tb.hca(0);
      if (hca.cmdif.hcaState !== 'DISABLED' || hca.pages.heldPages().length !== 0) bad.push(`close: the firmware is ${hca.cmdif.hcaState} holding ${hca.pages.heldPages().length} pages`);
    });
  } catch (e) {
    bad.push(`crash: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
  return bad;
}
