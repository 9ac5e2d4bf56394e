/**
 * Commands as bytes: the input a driver writes into the command queue (inline bytes and
 * mailboxes) and the output the firmware writes back, for every command of `CmdInputs`.
 *
 * STUB (to be replaced by the mlx5_ifc.h layouts of src/rtl/formats/cmd/): the 16-byte header is
 * mlx5's (opcode at byte 0, op_mod at byte 6 of the input; status at byte 0 and syndrome at byte
 * 4 of the output), the body is JSON text. The signatures are the contract between the command
 * queue (driver/core/cmd.ts, firmware/cmdif.ts) and the layouts.
 */
import { CmdOpcode } from '../formats/constants.ts';
import { CmdError, CmdStatus, type Cmd, type CmdName, type CmdOf, type CmdOutputs, type CmdStatusName } from './cmd_types.ts';

/** Bytes of the header every command input and output starts with (mlx5_ifc `*_in`/`*_out`). */
export const CMD_HDR_BYTES = 16;

/** A decoded input: the command, or the status the firmware answers a malformed one with. */
export type DecodedCmdInput = { readonly ok: true; readonly cmd: Cmd } | { readonly ok: false; readonly error: CmdError };

const NAME_OF: ReadonlyMap<number, CmdName> = new Map(
  Object.entries(CmdOpcode).map(([k, v]) => [v, k as CmdName]),
);

function toJson(v: unknown): string {
  // the holder's own value: a library may give Set a toJSON that runs before the replacer
  return JSON.stringify(v, function (this: Record<string, unknown>, k: string, x: unknown) {
    const raw = this[k];
    return raw instanceof Set ? { $set: [...(raw as Set<unknown>)] } : x instanceof Uint8Array ? { $u8: Array.from(x) } : x;
  });
}

function fromJson(t: string): unknown {
  return JSON.parse(t, (_k, x: unknown) =>
    x !== null && typeof x === 'object' && '$u8' in x ? Uint8Array.from((x as { $u8: number[] }).$u8) : x !== null && typeof x === 'object' && '$set' in x ? new Set((x as { $set: unknown[] }).$set) : x);
}

function withHeader(hdr: (v: DataView) => void, body: string): Uint8Array {
  const text = new TextEncoder().encode(body);
  const out = new Uint8Array(CMD_HDR_BYTES + text.length);
  hdr(new DataView(out.buffer));
  out.set(text, CMD_HDR_BYTES);
  return out;
}

/** The bytes of a command's input (what the driver posts). */
export function encodeCmdInput(cmd: Cmd): Uint8Array {
  const opcode = CmdOpcode[cmd.op];
  const opMod = 'opMod' in cmd && typeof cmd.opMod === 'number' ? cmd.opMod : 0;
  const { op: _op, ...rest } = cmd;
  return withHeader((v) => {
    v.setUint16(0, opcode);
    v.setUint16(6, opMod & 0xffff);
  }, toJson(rest));
}

/** The command in `bytes` (what the firmware reads), or the status a malformed input gets. */
export function decodeCmdInput(bytes: Uint8Array): DecodedCmdInput {
  if (bytes.length < CMD_HDR_BYTES) {
    return { ok: false, error: new CmdError('UNKNOWN', 0, 0, 'BAD_INPUT_LEN', 'input_len', `input of ${bytes.length} bytes is shorter than the ${CMD_HDR_BYTES}-byte header`) };
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const opcode = v.getUint16(0);
  const opMod = v.getUint16(6);
  const op = NAME_OF.get(opcode);
  if (op === undefined) return { ok: false, error: new CmdError('UNKNOWN', opcode, opMod, 'BAD_OP', 'opcode', `unknown opcode 0x${opcode.toString(16)}`) };
  let body: unknown;
  try {
    body = fromJson(new TextDecoder().decode(bytes.subarray(CMD_HDR_BYTES)));
  } catch {
    return { ok: false, error: new CmdError(op, opcode, opMod, 'BAD_PARAM', 'body', 'the input body does not parse') };
  }
  return { ok: true, cmd: { ...(body as object), op } as Cmd };
}

/** The bytes of a successful command's output (status OK). */
export function encodeCmdOutput<K extends CmdName>(op: K, out: CmdOutputs[K]): Uint8Array {
  void op;
  return withHeader(() => undefined, out === undefined ? '' : toJson(out));
}

/** The bytes of a failed command's output: its status and syndrome, nothing else. */
export function encodeCmdError(err: CmdError): Uint8Array {
  return withHeader((v) => {
    v.setUint8(0, err.status);
    v.setUint32(4, err.syndrome);
  }, toJson({ statusName: err.statusName, rule: err.rule, detail: err.detail }));
}

/**
 * The output of `cmd` from its bytes; a status other than OK throws the CmdError it stands for.
 */
export function decodeCmdOutput<K extends CmdName>(cmd: CmdOf<K>, bytes: Uint8Array): CmdOutputs[K] {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const status = v.getUint8(0);
  const body = new TextDecoder().decode(bytes.subarray(CMD_HDR_BYTES));
  if (status !== CmdStatus.OK) {
    const e = fromJson(body) as { statusName: CmdStatusName; rule: string; detail: string };
    const opMod = 'opMod' in cmd && typeof cmd.opMod === 'number' ? cmd.opMod : 0;
    throw new CmdError(cmd.op, CmdOpcode[cmd.op], opMod, e.statusName, e.rule, e.detail);
  }
  return (body === '' ? undefined : fromJson(body)) as CmdOutputs[K];
}

/** Bytes the driver leaves for the output of `cmd` (out_length of the command entry). */
export function cmdOutputLength(cmd: Cmd): number {
  void cmd;
  return 4096; // stub: JSON has no fixed size
}
