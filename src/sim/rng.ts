/**
 * The one source of randomness: a seeded xoshiro128** generator. Every random choice in a run
 * derives from the testbed's seed, so the same seed gives the same waves and stats.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    // splitmix32 expands the seed into the four state words (never all zero).
    let x = seed >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) | 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next() | 1;
  }

  /** A uniform 32-bit unsigned integer. */
  nextU32(): number {
    const r = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return r;
  }

  /** A uniform float in [0, 1). */
  next(): number {
    return this.nextU32() / 4294967296;
  }

  /** A uniform integer in [lo, hi] (inclusive). */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** A child generator with its own stream, for a named sub-component. */
  fork(): Rng {
    return new Rng(this.nextU32());
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
