/**
 * Firmware command structures as mlx5_ifc.h lays them out (include/linux/mlx5/mlx5_ifc.h, Linux
 * 6.12): a structure is a table of fields, each at its bit offset and width in the header's own
 * numbering (bit 0 = the most significant bit of byte 0; `reserved_at_<bit>` names give the
 * offsets), and one encoder and decoder serve every table. The field names are mlx5_ifc.h's
 * member names (a nested member by its path, `primary_address_path.pkey_index`), so the
 * conformance test (test/rtl/formats/header_conformance.test.ts) finds each in the compiled
 * header without a mapping. A model-private field lies in reserved bits only (the test checks
 * it) and is listed with the reason.
 *
 * Every command input starts with opcode (bits 0x00-0x0f) and op_mod (0x30-0x3f); every output
 * with status (0x00-0x07) and syndrome (0x20-0x3f). The 16 bytes of `*_in`/`*_out` before the
 * body are the header the command queue carries inline (mlx5_cmd_layout in[]/out[]).
 */
import { getBits, setBits, zero } from './field.ts';

/** A field: bit offset and width in bits (mlx5_ifc.h `u8 name[width]` at `reserved_at_<bit>`'s numbering). */
export interface IfcField {
  readonly bit: number;
  readonly width: number;
  /** `<struct>.<field>`, for messages (made once: a decode allocates no names). */
  readonly name: string;
}

/** One mlx5_ifc.h structure (`struct mlx5_ifc_<ifc>_bits`). */
export interface IfcLayout<K extends string = string> {
  /** The structure's name in mlx5_ifc.h without `mlx5_ifc_` and `_bits`. */
  readonly ifc: string;
  /** Its size in bytes (the fixed part, before a trailing list such as `pas[]`). */
  readonly bytes: number;
  readonly fields: Readonly<Record<K, IfcField>>;
  /** The field names, in order (walked by the encoder and decoder). */
  readonly keys: readonly K[];
  /** Model-private fields (their bits are reserved in the header) and why each exists. */
  readonly private: Readonly<Record<string, string>>;
  /** Byte offsets of nested structures and trailing lists, by member name (checked against offsetof). */
  readonly at: Readonly<Record<string, number>>;
}

/** Model-private fields with why, and nested offsets (IfcLayout.private, .at). */
export interface LayoutExtra {
  private?: Readonly<Record<string, string>>;
  at?: Readonly<Record<string, number>>;
}

/** The values of a structure's fields, all numbers (a one-bit flag is 0 or 1). */
export type IfcValues<K extends string> = Record<K, number>;

/** Defines a structure from `[bit, width]` pairs. */
export function ifcLayout<K extends string>(
  ifc: string,
  bytes: number,
  fields: Readonly<Record<K, readonly [number, number]>>,
  extra: LayoutExtra = {},
): IfcLayout<K> {
  const entries: [K, IfcField][] = [];
  for (const k of Object.keys(fields) as K[]) {
    const [bit, width] = fields[k];
    const inDword = width <= 32 && (bit & 31) + width <= 32;
    if (!inDword && !(width === 64 && (bit & 31) === 0)) throw new Error(`${ifc}.${k}: a field crosses a dword`);
    if (bit + width > bytes * 8) throw new Error(`${ifc}.${k}: past the structure's ${bytes} bytes`);
    entries.push([k, Object.freeze({ bit, width, name: `${ifc}.${k}` })]);
  }
  // whole by fromEntries, as decodeIfc's blank object (planOf): a fast object, not a dictionary
  const f = Object.fromEntries(entries) as Record<K, IfcField>;
  return Object.freeze({ ifc, bytes, fields: Object.freeze(f), keys: Object.freeze(Object.keys(f) as K[]), private: Object.freeze({ ...extra.private }), at: Object.freeze({ ...extra.at }) });
}

/**
 * Writes the structure at byte `off`: every byte of it zero first (reserved bits are written 0),
 * then each field given (an absent one stays 0). A value that does not fit throws a RangeError
 * naming the structure and the field.
 */
export function encodeIfc<K extends string>(view: DataView, off: number, l: IfcLayout<K>, v: Partial<IfcValues<K>>): void {
  zero(view, off, l.bytes);
  setIfc(view, off, l, v);
}

/** Writes the fields given, leaving the other bytes as they are (a nested structure already written). */
export function setIfc<K extends string>(view: DataView, off: number, l: IfcLayout<K>, v: Partial<IfcValues<K>>): void {
  // for-in over a plain object: its own keys, without the array Object.keys makes
  for (const k in v) {
    const x = v[k];
    if (x === undefined) continue;
    const f = l.fields[k];
    if (f === undefined) throw new RangeError(`${l.ifc} has no field ${k}`);
    setBits(view, off, f.bit, f.width, x, f.name);
  }
}

/** How decodeIfc reads a layout: its fields in key order, and an object of its keys (all 0) to copy. */
interface DecodePlan {
  readonly keys: readonly string[];
  readonly fields: readonly IfcField[];
  readonly blank: Readonly<Record<string, number>>;
}

/** Each layout's plan, made at its first decode (a layout is read thousands of times). */
const PLANS = new WeakMap<IfcLayout, DecodePlan>();

function planOf(l: IfcLayout): DecodePlan {
  let p = PLANS.get(l);
  if (p === undefined) {
    // made whole by fromEntries: an object grown key by key past a few dozen keys turns into a
    // dictionary, whose copy costs ~100x a fast object's (~15 us per decode of the 33-field qpc)
    const blank: Record<string, number> = Object.fromEntries(l.keys.map((k) => [k, 0]));
    p = { keys: l.keys, fields: l.keys.map((k) => l.fields[k]), blank };
    PLANS.set(l, p);
  }
  return p;
}

/** Reads every field of the structure at byte `off`; a u64 of 2^53 or more throws a RangeError. */
export function decodeIfc<K extends string>(view: DataView, off: number, l: IfcLayout<K>): IfcValues<K> {
  // a copy of the layout's blank object (every key already in place, in order: no new property
  // per field) and its fields as an array (no lookup by name): ~40% of a decode's cost before
  const p = planOf(l as IfcLayout);
  const out = { ...p.blank };
  const keys = p.keys;
  const fields = p.fields;
  for (let i = 0; i < keys.length; i++) {
    const f = fields[i];
    out[keys[i]] = getBits(view, off, f.bit, f.width, f.name);
  }
  return out as IfcValues<K>;
}

/** The fields every command input starts with. */
export const IN_HDR = { opcode: [0x00, 0x10], op_mod: [0x30, 0x10] } as const;
/** The fields every command output starts with. */
export const OUT_HDR = { status: [0x00, 0x08], syndrome: [0x20, 0x20] } as const;

/** An input structure: the header fields and `fields`. */
export function inLayout<K extends string>(
  ifc: string,
  bytes: number,
  fields: Readonly<Record<K, readonly [number, number]>>,
  extra?: LayoutExtra,
): IfcLayout<K | keyof typeof IN_HDR> {
  return ifcLayout<K | keyof typeof IN_HDR>(ifc, bytes, { ...IN_HDR, ...fields }, extra);
}

/** An output structure: the header fields and `fields`. */
export function outLayout<K extends string>(
  ifc: string,
  bytes: number,
  fields: Readonly<Record<K, readonly [number, number]>>,
  extra?: LayoutExtra,
): IfcLayout<K | keyof typeof OUT_HDR> {
  return ifcLayout<K | keyof typeof OUT_HDR>(ifc, bytes, { ...OUT_HDR, ...fields }, extra);
}

/** Bytes of one `pas[]` entry (a u64 page address) of CREATE_EQ/CQ/QP and MANAGE_PAGES. */
export const PAS_ENTRY_BYTES = 8;

/** Writes `pas` as u64 entries from byte `off`. */
export function writePas(view: DataView, off: number, pas: readonly number[], field: string): void {
  for (let i = 0; i < pas.length; i++) setBits(view, off + i * PAS_ENTRY_BYTES, 0, 64, pas[i]!, `${field}[${i}]`);
}

/** Reads `n` u64 entries from byte `off`. */
export function readPas(view: DataView, off: number, n: number, field: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(getBits(view, off + i * PAS_ENTRY_BYTES, 0, 64, `${field}[${i}]`));
  return out;
}
