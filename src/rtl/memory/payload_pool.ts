/**
 * Payload buffers that the data-path engines share and reuse, so a message does not allocate
 * (and zero) a new 4 KiB buffer: the model's hot path stays free of allocation.
 *
 * Ownership is a reference count. Whoever takes a buffer holds one reference; every posted
 * write of it holds one until it lands (the buffer is the write's `landed` target); a buffer
 * sent in a message carries its sender's reference to the receiver. The last release puts it
 * back in its pool. A path that drops a buffer without releasing it only costs an allocation
 * later (the garbage collector takes it); releasing too often would hand out live bytes, so
 * every release pairs with exactly one take or retain.
 */
import type { EventTarget } from '../../sim/index.ts';

/** Smallest pooled capacity (2^6 bytes); smaller payloads still share one class. */
const MIN_LOG = 6;
/** Largest pooled capacity (2^20 bytes): bigger messages allocate and are never pooled. */
const MAX_LOG = 20;
/** Free buffers kept per size class: bounds what an idle pool holds. */
const MAX_FREE = 64;

export class PooledBuf implements EventTarget {
  /** References held. 0: free in its pool (or never pooled). */
  refs = 0;
  /** The payload: the first `length` bytes of the capacity. */
  bytes: Uint8Array;

  constructor(
    private readonly pool: PayloadPool | null,
    /** The size class (log2 of the capacity), or -1 when not pooled. */
    readonly cls: number,
    readonly store: Uint8Array,
  ) {
    this.bytes = store;
  }

  retain(): void {
    this.refs++;
  }

  release(): void {
    if (this.refs <= 0) throw new Error('payload buffer released more often than taken');
    if (--this.refs === 0 && this.pool !== null) this.pool.recycle(this);
  }

  /** @internal A posted write of this buffer landed: its reference goes. */
  fire(): void {
    this.release();
  }
}

export class PayloadPool {
  private readonly free: PooledBuf[][] = [];
  /** Buffers allocated (not taken from the free lists): a leak shows as a steady climb. */
  allocated = 0;

  constructor() {
    for (let c = 0; c <= MAX_LOG; c++) this.free.push([]);
  }

  /** A buffer of `length` bytes (contents undefined: the taker writes every byte), 1 reference. */
  take(length: number): PooledBuf {
    const cls = length <= 2 ** MIN_LOG ? MIN_LOG : length > 2 ** 31 ? MAX_LOG + 1 : 32 - Math.clz32(length - 1);
    let b: PooledBuf | undefined;
    if (cls > MAX_LOG) {
      b = new PooledBuf(null, -1, new Uint8Array(length));
      this.allocated++;
    } else {
      b = this.free[cls].pop();
      if (b === undefined) {
        b = new PooledBuf(this, cls, new Uint8Array(2 ** cls));
        this.allocated++;
      }
      // one view per length change: back-to-back messages of one size reuse it
      if (b.bytes.length !== length) b.bytes = b.store.subarray(0, length);
    }
    b.refs = 1;
    return b;
  }

  /** @internal The last reference went. */
  recycle(b: PooledBuf): void {
    const list = this.free[b.cls];
    if (list.length < MAX_FREE) list.push(b);
  }
}
