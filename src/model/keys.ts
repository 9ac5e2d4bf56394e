/** Key arithmetic (spec/mlx5.md "Keys"): index in bits 31:8, tag in bits 7:0. */

/** The 24-bit mkey index of a key. */
export function keyIndex(key: number): number {
  return key >>> 8;
}

/** The 8-bit tag (variant) of a key. */
export function keyTag(key: number): number {
  return key & 0xff;
}

/** The key of mkey `index` with tag `tag`, as an unsigned 32-bit number. */
export function makeKey(index: number, tag: number): number {
  // `>>> 0` keeps indices >= 0x800000 positive (a JS shift is signed 32-bit).
  return (((index & 0xffffff) << 8) | (tag & 0xff)) >>> 0;
}

/** `ib_inc_rkey`: the next tag, wrapping within 8 bits; the index is kept. */
export function incRkey(key: number): number {
  return makeKey(keyIndex(key), keyTag(key) + 1);
}
