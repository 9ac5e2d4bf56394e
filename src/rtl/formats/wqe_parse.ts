/**
 * Decodes a send WQE (spec/mlx5.md "Send WQE") into its segments, by opcode: what the send queue
 * engine does with the bytes it fetched. A WQE whose opcode is unknown or whose ds is too small
 * for its segments comes back as `kind: 'invalid'` with the reason (the hardware completes it in
 * error). The driver's builders (src/driver/wqe_builder.ts) write exactly what this reads.
 */
import { DS_SIZE, MKEY_CONTEXT_SIZE, UmrCtrlFlag, WqeOpcode } from './constants.ts';
import { CTRL_SEG_SIZE, decodeCtrlSegInto, type CtrlSeg } from './ctrl_seg.ts';
import { MLX5_INLINE_SEG, decodeDataSeg, decodeDataSegInto, decodeInlineSeg, inlineSegDs, type DataSeg } from './data_seg.ts';
import { RADDR_SEG_SIZE, decodeRaddrSegInto, type RaddrSeg } from './raddr_seg.ts';
import { decodeAtomicOperands, type AtomicOperands } from './atomic_seg.ts';
import { UMR_CTRL_SEG_SIZE, decodeUmrCtrlSeg, type UmrCtrlSeg } from './umr_ctrl_seg.ts';
import { decodeMkeyContext, type MkeyContext } from './mkey_context.ts';

/** Offsets within a UMR WQE: control, UMR control, mkey segment, then the translations. */
const UMR_CTRL_OFF = CTRL_SEG_SIZE;
const UMR_MKEY_OFF = UMR_CTRL_OFF + UMR_CTRL_SEG_SIZE;
const UMR_XLT_OFF = UMR_MKEY_OFF + MKEY_CONTEXT_SIZE;
const UMR_HEADER_DS = UMR_XLT_OFF / DS_SIZE;

/** One local data segment of a parsed WQE: a pointer, or data carried inline. */
export type WqeData = { kind: 'ptr'; seg: DataSeg } | { kind: 'inline'; data: Uint8Array };

/** Where a UMR's translations are: none, inline in the WQE (byte offset in the view), or in host memory. */
export type UmrXlt =
  | { kind: 'none' }
  | { kind: 'inline'; off: number; bytes: number }
  | { kind: 'pointer'; seg: DataSeg };

/** A decoded send WQE, by shape. */
export type ParsedWqe =
  | { kind: 'nop'; ctrl: CtrlSeg }
  | { kind: 'send'; ctrl: CtrlSeg; data: WqeData[] }
  | { kind: 'rdma'; ctrl: CtrlSeg; raddr: RaddrSeg; data: WqeData[] }
  | { kind: 'atomic'; ctrl: CtrlSeg; raddr: RaddrSeg; atomic: AtomicOperands; data: WqeData[] }
  | { kind: 'umr'; ctrl: CtrlSeg; umrCtrl: UmrCtrlSeg; mkeySeg: MkeyContext; xlt: UmrXlt }
  | { kind: 'invalid'; ctrl: CtrlSeg; reason: string };

/** A pointer data segment as parsed: its segment object is the store's, reused. */
type PtrData = { kind: 'ptr'; seg: DataSeg };

/**
 * Where WQEs are parsed into: the control, remote address and data segments and the result of
 * each common shape, reused by every parse (the send queue engine keeps one per WQE slot, so a
 * WQE costs no objects on the hot path). What a parse returns stays valid until the next parse
 * into the same store: a consumer that keeps it longer copies it. Rare shapes (inline data,
 * atomic operands, UMR, invalid) are still built fresh.
 */
export class WqeParseStore {
  readonly ctrl: CtrlSeg = { opmod: 0, wqeIndex: 0, opcode: 0, qpn: 0, ds: 0, signature: 0, fence: 0, ce: 0, se: false, imm: 0 };
  readonly raddr: RaddrSeg = { raddr: 0, rkey: 0 };
  /** The data segments of the last parse (its length is theirs), and the pointer entries it reuses. */
  readonly data: WqeData[] = [];
  private readonly ptrs: PtrData[] = [];
  readonly nop: Extract<ParsedWqe, { kind: 'nop' }> = { kind: 'nop', ctrl: this.ctrl };
  readonly send: Extract<ParsedWqe, { kind: 'send' }> = { kind: 'send', ctrl: this.ctrl, data: this.data };
  readonly rdma: Extract<ParsedWqe, { kind: 'rdma' }> = { kind: 'rdma', ctrl: this.ctrl, raddr: this.raddr, data: this.data };
  readonly atomic: Extract<ParsedWqe, { kind: 'atomic' }> = { kind: 'atomic', ctrl: this.ctrl, raddr: this.raddr, atomic: { swapAdd: 0n, compare: 0n }, data: this.data };

  /** The reused pointer entry for data segment `n` of a WQE. */
  ptr(n: number): PtrData {
    while (this.ptrs.length <= n) this.ptrs.push({ kind: 'ptr', seg: { byteCount: 0, inline: false, lkey: 0, addr: 0 } });
    return this.ptrs[n];
  }
}

/** Decodes data segments from DS `from` up to `ds` of the WQE at `off` into the store's `data`; a string says what is wrong. */
function parseData(view: DataView, off: number, from: number, ds: number, st: WqeParseStore): string | undefined {
  const out = st.data;
  let n = 0;
  let i = from;
  while (i < ds) {
    const at = off + i * DS_SIZE;
    if (view.getUint32(at) >= MLX5_INLINE_SEG) {
      const k = inlineSegDs(view.getUint32(at) & 0x7fffffff);
      if (i + k > ds) return `inline segment at DS ${i} runs past ds ${ds}`;
      out[n++] = { kind: 'inline', data: decodeInlineSeg(view, at) };
      i += k;
    } else {
      const p = st.ptr(n);
      decodeDataSegInto(view, at, p.seg);
      out[n++] = p;
      i++;
    }
  }
  // shrink only when the count changes (a length set to what it is allocates nothing)
  if (out.length !== n) out.length = n;
  return undefined;
}

function invalidWqe(ctrl: CtrlSeg, reason: string): ParsedWqe {
  return { kind: 'invalid', ctrl, reason };
}

/** Why the WQE is too short for `n` DS of its opcode, or undefined. */
function need(ctrl: CtrlSeg, n: number): string | undefined {
  return ctrl.ds < n ? `ds ${ctrl.ds} < ${n} for opcode 0x${ctrl.opcode.toString(16)}` : undefined;
}

/**
 * Decodes the send WQE at `off` (laid out contiguously) into its segments, by opcode. A WQE
 * whose opcode is unknown or whose ds is too small for its segments, or reaches past the
 * view, comes back as `kind: 'invalid'` with the reason. The result is a new object graph.
 */
export function parseWqe(view: DataView, off: number): ParsedWqe {
  return parseWqeInto(view, off, new WqeParseStore());
}

/**
 * `parseWqe` into `st`: the result is the store's (valid until its next parse), except for the
 * rare shapes it builds fresh. Throws what the segment decoders throw (RangeError for a 64-bit
 * field beyond 2^53), as `parseWqe` does.
 */
export function parseWqeInto(view: DataView, off: number, st: WqeParseStore): ParsedWqe {
  const ctrl = decodeCtrlSegInto(view, off, st.ctrl);
  const ds = ctrl.ds;
  // runs for every WQE: module-level helpers, no closures
  if (ds < 1) return invalidWqe(ctrl, 'ds 0');
  if (off + ds * DS_SIZE > view.byteLength) return invalidWqe(ctrl, `ds ${ds} reaches past the buffer`);
  switch (ctrl.opcode) {
    case WqeOpcode.NOP:
      return st.nop;
    case WqeOpcode.SEND:
    case WqeOpcode.SEND_IMM:
    case WqeOpcode.SEND_INVAL: {
      const bad = parseData(view, off, 1, ds, st);
      return bad !== undefined ? invalidWqe(ctrl, bad) : st.send;
    }
    case WqeOpcode.RDMA_WRITE:
    case WqeOpcode.RDMA_WRITE_IMM:
    case WqeOpcode.RDMA_READ: {
      const short = need(ctrl, 2);
      if (short) return invalidWqe(ctrl, short);
      decodeRaddrSegInto(view, off + CTRL_SEG_SIZE, st.raddr);
      const bad = parseData(view, off, 2, ds, st);
      return bad !== undefined ? invalidWqe(ctrl, bad) : st.rdma;
    }
    case WqeOpcode.ATOMIC_CS:
    case WqeOpcode.ATOMIC_FA: {
      const short = need(ctrl, 3);
      if (short) return invalidWqe(ctrl, short);
      decodeRaddrSegInto(view, off + CTRL_SEG_SIZE, st.raddr);
      const atomic = decodeAtomicOperands(view, off + CTRL_SEG_SIZE + RADDR_SEG_SIZE);
      const bad = parseData(view, off, 3, ds, st);
      if (bad !== undefined) return invalidWqe(ctrl, bad);
      st.atomic.atomic = atomic;
      return st.atomic;
    }
    case WqeOpcode.UMR: {
      const short = need(ctrl, UMR_HEADER_DS);
      if (short) return invalidWqe(ctrl, short);
      const umrCtrl = decodeUmrCtrlSeg(view, off + UMR_CTRL_OFF);
      const mkeySeg = decodeMkeyContext(view, off + UMR_MKEY_OFF);
      let xlt: UmrXlt;
      if (umrCtrl.xltOctowords === 0) {
        xlt = { kind: 'none' };
      } else if (umrCtrl.flags & UmrCtrlFlag.INLINE) {
        const s = need(ctrl, UMR_HEADER_DS + umrCtrl.xltOctowords);
        if (s) return invalidWqe(ctrl, `inline translations: ${s}`);
        xlt = { kind: 'inline', off: off + UMR_XLT_OFF, bytes: umrCtrl.xltOctowords * DS_SIZE };
      } else {
        const s = need(ctrl, UMR_HEADER_DS + 1);
        if (s) return invalidWqe(ctrl, `translation pointer: ${s}`);
        xlt = { kind: 'pointer', seg: decodeDataSeg(view, off + UMR_XLT_OFF) };
      }
      return { kind: 'umr', ctrl, umrCtrl, mkeySeg, xlt };
    }
    default:
      return invalidWqe(ctrl, `unknown opcode 0x${ctrl.opcode.toString(16)}`);
  }
}
