/**
 * VCD identifier codes: base-94 over the printable characters 33 (`!`) to 126 (`~`), shortest
 * first (spec/waves.md): 0 -> `!`, 93 -> `~`, 94 -> `!!`, ...
 */
export function vcdId(n: number): string {
  if (!(Number.isInteger(n) && n >= 0)) throw new RangeError(`vcd id index ${n}`);
  let s = '';
  let k = n;
  for (;;) {
    s += String.fromCharCode(33 + (k % 94));
    k = Math.floor(k / 94);
    if (k === 0) break;
    k -= 1; // bijective numbering: all 1-char codes, then all 2-char codes, ...
  }
  return s;
}
