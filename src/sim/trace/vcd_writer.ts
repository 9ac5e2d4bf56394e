import { closeSync, openSync, writeSync } from 'node:fs';

const BUF_SIZE = 1 << 20;
const CH_HASH = 35; // '#'
const CH_NL = 10;
const CH_B = 98; // 'b'
const CH_S = 115; // 's'
const CH_SP = 32;
const CH_0 = 48;

/**
 * The byte-level VCD stream (IEEE 1364-2005 section 18): timestamps and value changes encoded
 * straight into a reusable byte buffer and written to the file when it fills, so memory stays
 * flat on long runs and a value change allocates nothing.
 */
export class VcdWriter {
  private readonly fd: number;
  private readonly buf = new Uint8Array(BUF_SIZE);
  private pos = 0;
  private flushed = 0;
  private closed = false;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'w');
  }

  /** Writes text (header and declarations; not the hot path). */
  text(s: string): void {
    const b = Buffer.from(s, 'utf8');
    if (this.pos + b.length > BUF_SIZE) this.flush();
    if (b.length > BUF_SIZE) {
      writeSync(this.fd, b);
      this.flushed += b.length;
      return;
    }
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /** `#<t>\n` */
  time(t: number): void {
    this.ensure(24);
    this.buf[this.pos++] = CH_HASH;
    this.digits(t);
    this.buf[this.pos++] = CH_NL;
  }

  /** A scalar change: `0!`. */
  scalar(v: number, id: Uint8Array): void {
    this.ensure(2 + id.length);
    const buf = this.buf;
    buf[this.pos++] = CH_0 + (v & 1);
    for (let i = 0; i < id.length; i++) buf[this.pos++] = id[i];
    buf[this.pos++] = CH_NL;
  }

  /** A vector change: `b101 !` (binary without leading zeros). */
  vector(v: number, id: Uint8Array): void {
    this.ensure(68 + id.length);
    const buf = this.buf;
    buf[this.pos++] = CH_B;
    if (v === 0) buf[this.pos++] = CH_0;
    else if (v < 4294967296) {
      for (let bit = 31 - Math.clz32(v); bit >= 0; bit--) buf[this.pos++] = CH_0 + ((v >>> bit) & 1);
    } else {
      const hi = Math.floor(v / 4294967296);
      const lo = v >>> 0;
      for (let bit = 31 - Math.clz32(hi); bit >= 0; bit--) buf[this.pos++] = CH_0 + ((hi >>> bit) & 1);
      for (let bit = 31; bit >= 0; bit--) buf[this.pos++] = CH_0 + ((lo >>> bit) & 1);
    }
    buf[this.pos++] = CH_SP;
    for (let i = 0; i < id.length; i++) buf[this.pos++] = id[i];
    buf[this.pos++] = CH_NL;
  }

  /** A string change (opt-in dialect): `s<text> <id>`; the text has no whitespace. */
  string(text: Uint8Array, id: Uint8Array): void {
    this.ensure(3 + text.length + id.length);
    const buf = this.buf;
    buf[this.pos++] = CH_S;
    buf.set(text, this.pos);
    this.pos += text.length;
    buf[this.pos++] = CH_SP;
    for (let i = 0; i < id.length; i++) buf[this.pos++] = id[i];
    buf[this.pos++] = CH_NL;
  }

  /** Bytes written so far, flushed or still buffered. */
  get bytes(): number {
    return this.flushed + this.pos;
  }

  flush(): void {
    if (this.pos > 0) {
      writeSync(this.fd, this.buf, 0, this.pos);
      this.flushed += this.pos;
      this.pos = 0;
    }
  }

  close(): void {
    if (this.closed) return;
    this.flush();
    closeSync(this.fd);
    this.closed = true;
  }

  private ensure(n: number): void {
    if (this.pos + n > BUF_SIZE) this.flush();
  }

  private digits(t: number): void {
    const buf = this.buf;
    if (t === 0) {
      buf[this.pos++] = CH_0;
      return;
    }
    const start = this.pos;
    let x = t;
    while (x > 0) {
      const q = Math.floor(x / 10);
      buf[this.pos++] = CH_0 + (x - q * 10);
      x = q;
    }
    // reverse in place
    for (let i = start, j = this.pos - 1; i < j; i++, j--) {
      const c = buf[i];
      buf[i] = buf[j];
      buf[j] = c;
    }
  }
}
