/**
 * Field helpers shared by the byte layouts: range checks that name the field, and u64 fields
 * stored as two big-endian u32 halves (spec/mlx5.md: all multi-byte fields are big-endian).
 *
 * u64 fields are JS numbers below 2^53 (DESIGN.md "numbers not bigint"), so a u64 that does not
 * fit 53 bits is rejected on encode and on decode rather than rounded.
 */

const TWO_32 = 2 ** 32;
/** A u64's high half at or above this does not fit 53 bits (2^21). */
export const U64_HI_LIMIT = 2 ** 21;

/** Largest bit width a number field may have; wider fields (u64) are limited to this. */
export const SAFE_BITS = 53;

/** `0x` and the value in lower-case hex: how messages and traces show addresses, keys and numbers. */
export function hex(v: number): string {
  return `0x${v.toString(16)}`;
}

function show(v: number): string {
  return Number.isInteger(v) && v >= 0 ? hex(v) : String(v);
}

/** Throws a RangeError naming `field` unless `v` is an integer in [0, 2^bits). */
/** 2^bits for bits 0..64. */
const UINT_LIMIT: readonly number[] = Array.from({ length: 65 }, (_, b) => 2 ** b);

export function checkUint(field: string, v: number, bits: number): void {
  // (v >= 0 && v < limit) is false for NaN; the table spares a power per field on the hot path
  if (!(v >= 0 && v < UINT_LIMIT[bits]) || !Number.isInteger(v)) {
    throw new RangeError(`${field} ${show(v)} does not fit ${bits} bits`);
  }
}

/** Throws a RangeError naming `field` unless `v` is a u64 representable as a JS number (< 2^53). */
export function checkU64(field: string, v: number): void {
  if (!Number.isSafeInteger(v) || v < 0) {
    throw new RangeError(`${field} ${show(v)} does not fit ${SAFE_BITS} bits (u64 fields are numbers below 2^53)`);
  }
}

/** Writes u64 `v` (already checked) big-endian at `off` as hi/lo u32 halves. */
export function setU64(view: DataView, off: number, v: number): void {
  view.setUint32(off, Math.floor(v / TWO_32));
  view.setUint32(off + 4, v >>> 0);
}

/** Big-endian u32 at `b[i]`, read from bytes (no DataView: hot paths over small or foreign buffers). */
export function getBe32(b: Uint8Array, i: number): number {
  return ((b[i] << 24) | (b[i + 1] << 16) | (b[i + 2] << 8) | b[i + 3]) >>> 0;
}

/** Writes `w`, already a u32, big-endian at `b[i]` (each store keeps the low byte, as setUint32 would). */
export function setBe32(b: Uint8Array, i: number, w: number): void {
  b[i] = w >>> 24;
  b[i + 1] = w >>> 16;
  b[i + 2] = w >>> 8;
  b[i + 3] = w;
}

/** Reads a big-endian u64 at `off`; throws a RangeError naming `field` if it is 2^53 or more. */
export function getU64(view: DataView, off: number, field: string): number {
  const hi = view.getUint32(off);
  if (hi >= U64_HI_LIMIT) {
    throw new RangeError(`${field} 0x${hi.toString(16)}_${view.getUint32(off + 4).toString(16).padStart(8, '0')} does not fit ${SAFE_BITS} bits`);
  }
  return hi * TWO_32 + view.getUint32(off + 4);
}

/** A byte view of each buffer `zero` has cleared (made once per buffer: encoders reuse their scratch). */
const BYTES = new WeakMap<ArrayBufferLike, Uint8Array>();

/** Zeroes `len` bytes at `off` (reserved bytes are written as zero, never left stale). */
export function zero(view: DataView, off: number, len: number): void {
  // Checked here because a Uint8Array over the buffer could reach past the view's window.
  if (off < 0 || off + len > view.byteLength) {
    throw new RangeError(`bytes ${off}..${off + len} lie outside the view (${view.byteLength} bytes)`);
  }
  let i = off;
  const end = off + len;
  if (len >= 32) {
    // a structure (a command's 272 bytes, an mkey context's 64): one fill through a byte view of
    // the buffer, kept per buffer (a view per call would be an object each time); a store per
    // word through the DataView was ~30% of encoding a CREATE_MKEY
    const buf = view.buffer;
    let b = BYTES.get(buf);
    if (b === undefined) {
      b = new Uint8Array(buf);
      BYTES.set(buf, b);
    }
    const at = view.byteOffset + off;
    b.fill(0, at, at + len);
    return;
  }
  for (; i + 4 <= end; i += 4) view.setUint32(i, 0);
  for (; i < end; i++) view.setUint8(i, 0);
}

/**
 * Writes `v` into the field of `width` bits at bit `bit` of the structure at byte `off`, bits
 * numbered as mlx5_ifc.h numbers them (bit 0 = the most significant bit of byte 0). A field lies
 * within one big-endian dword, or is a dword-aligned u64 (mlx5_ifc.h's u64 fields are). Throws a
 * RangeError naming `field` unless `v` fits.
 */
export function setBits(view: DataView, off: number, bit: number, width: number, v: number, field: string): void {
  if (width === 64) {
    checkU64(field, v);
    setU64(view, off + (bit >>> 3), v);
    return;
  }
  checkUint(field, v, width);
  const at = off + ((bit >>> 5) << 2);
  const shift = 32 - (bit & 31) - width;
  const mask = width === 32 ? 0xffffffff : ((1 << width) - 1) << shift;
  // (2^shift from the table: a power per field written cost more than the rest of the write)
  view.setUint32(at, ((view.getUint32(at) & ~mask) | (v * (UINT_LIMIT[shift] ?? 2 ** shift))) >>> 0);
}

/** Reads the field `setBits` writes; a u64 of 2^53 or more throws a RangeError naming `field`. */
export function getBits(view: DataView, off: number, bit: number, width: number, field: string): number {
  if (width === 64) return getU64(view, off + (bit >>> 3), field);
  const w = view.getUint32(off + ((bit >>> 5) << 2));
  const shift = 32 - (bit & 31) - width;
  return width === 32 ? w : (w >>> shift) & ((1 << width) - 1);
}
