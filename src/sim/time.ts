/**
 * Simulated time: an integer number of picoseconds held in a JS number (2^53 ps is about
 * 2.5 hours of simulated time, far beyond any run). The VCD timescale is 1 ps.
 */

/** Picoseconds. Always an integer. */
export type Ps = number;

/** Picoseconds per unit, for readable configuration (`5 * US`). */
export const PS = 1;
export const NS = 1_000;
export const US = 1_000_000;
export const MS = 1_000_000_000;

/** The clock period in picoseconds of a frequency in MHz, rounded to a whole picosecond. */
export function periodOfMHz(mhz: number): Ps {
  if (!(mhz > 0)) throw new RangeError(`clock frequency must be > 0 MHz, got ${mhz}`);
  return Math.round(1e6 / mhz);
}

/** Throws unless `t` is a non-negative integer number of picoseconds below 2^53. */
export function checkPs(t: number, what: string): Ps {
  if (!Number.isSafeInteger(t) || t < 0) {
    throw new RangeError(`${what} must be a whole, non-negative number of picoseconds, got ${t}`);
  }
  return t;
}

/** Human-readable time: `1.25 us`, `640 ns`, `3 ps`. */
export function formatPs(t: Ps): string {
  if (t >= MS) return `${+(t / MS).toFixed(3)} ms`;
  if (t >= US) return `${+(t / US).toFixed(3)} us`;
  if (t >= NS) return `${+(t / NS).toFixed(3)} ns`;
  return `${t} ps`;
}
