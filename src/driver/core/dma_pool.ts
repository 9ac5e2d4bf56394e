/**
 * The driver's queue buffers (mlx5_frag_buf: CQ, SQ and RQ rings, doorbell records): virtually
 * contiguous buffers over scattered 4 KiB pages, handed to the device as a page list (the pas of
 * CREATE_CQ / CREATE_QP, rtl/memory/pas.ts), so a ring of any legal size works without
 * physically contiguous memory. A destroyed queue gives its buffer back and the next queue of
 * the same size class takes it, so create/destroy cycles keep host memory bounded by the most
 * ever live at once (the host has no free of its own: HostSpace is a bump allocator).
 */
import { HostError, type HostAllocOptions, type HostBuffer, type HostSpace } from '../../rtl/memory/host_space.ts';
import { VerbsError } from '../verbs_error.ts';

/**
 * Memory the driver takes from the process for a verb (queue rings, doorbell records, EQs, UMR
 * lists): an address space or host memory that is full is the verb's ENOMEM, as the kernel's
 * and libmlx5's allocations fail, never the host's own error.
 */
export function driverAlloc(host: HostSpace, what: string, length: number, opts: HostAllocOptions = {}): HostBuffer {
  try {
    return host.alloc(length, opts);
  } catch (e) {
    if (e instanceof HostError && e.errno === 'ENOMEM') throw new VerbsError('ENOMEM', `${what}: no memory for the driver's ${length}-byte buffer (${e.message})`);
    throw e;
  }
}

/** Bytes of a page of the page lists: 4 KiB (log_page_size 0). */
export const DMA_PAGE = 4096;

/** A queue buffer: its virtual address, its size class, and its pages' DMA addresses. */
export interface DmaBuf {
  readonly addr: number;
  readonly bytes: number;
  readonly pas: readonly number[];
}

export class DmaPool {
  /** Free buffers by size class (a power of two >= 4 KiB): reused last in, first out. */
  private readonly free = new Map<number, DmaBuf[]>();
  private held = 0;
  private inUse = 0;

  constructor(private readonly host: HostSpace) {}

  /** A buffer of at least `bytes` (rounded up to a power of two of at least 4 KiB), zeroed; ENOMEM naming `what`. */
  alloc(bytes: number, what: string): DmaBuf {
    let size = DMA_PAGE;
    while (size < bytes) size *= 2;
    const list = this.free.get(size);
    let buf = list?.pop();
    if (buf === undefined) {
      const b = driverAlloc(this.host, what, size);
      const pas: number[] = [];
      for (let off = 0; off < size; off += DMA_PAGE) pas.push(this.host.dmaAddress(b.addr + off));
      // given to the device for good (kernel memory the driver keeps in this pool): pinned
      this.host.pin(b.addr, size);
      buf = { addr: b.addr, bytes: size, pas };
      this.held += size;
    } else {
      // what the last owner left must not look like live queue entries to the next one
      this.host.fill(buf.addr, size, 0);
    }
    this.inUse += size;
    return buf;
  }

  /** Gives a buffer back (its queue is destroyed: the device no longer reaches it). */
  release(buf: DmaBuf): void {
    let list = this.free.get(buf.bytes);
    if (list === undefined) {
      list = [];
      this.free.set(buf.bytes, list);
    }
    list.push(buf);
    this.inUse -= buf.bytes;
  }

  /** Bytes of host memory the pool took from the host (in use or free for reuse). */
  get bytesHeld(): number {
    return this.held;
  }

  /** Bytes in buffers of live queues. */
  get bytesInUse(): number {
    return this.inUse;
  }
}
