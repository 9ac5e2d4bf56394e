/**
 * Moves bytes between host memory and an engine over its PCIe port: gathers a list of physical
 * segments into one buffer (reads of at most 4 KiB, the largest PCIe max read request, with up
 * to 16 in flight, landing straight in the buffer), or scatters a buffer over segments (posted
 * writes of the caller's buffer, which must not change afterwards). Driven from its owner's
 * tick: `step()` issues what it can; the owner routes read completions to `complete()`.
 * Gathered bytes land in a pooled buffer (payload_pool.ts): the owner takes it (`takeBuf`) to
 * send it on, or the next gather returns it to the pool.
 */
import type { DmaPort, DmaReq } from './pcie.ts';
import { ReuseRing } from '../../sim/reuse_ring.ts';
import type { EventTarget } from '../../sim/event_queue.ts';
import { PayloadPool, type PooledBuf } from './payload_pool.ts';

/** A physically contiguous piece of host memory (what translation yields and DMA moves). */
export interface PhysSegment {
  pa: number;
  length: number;
}

const MAX_READ = 4096;
/** Movers sharing a port: at most this many, told apart by `tag % MOVER_TAG_SPAN`. */
export const MOVER_TAG_SPAN = 256;
const MAX_INFLIGHT = 16;

export class DmaMover {
  private segs: PhysSegment[] = [];
  private seg = 0;
  private off = 0; // offset in the current segment
  private bufOff = 0; // bytes issued so far
  private buf: Uint8Array = new Uint8Array(0);
  private inflight = 0;
  private reading = false;
  private readonly chunkAt: number[] = []; // buffer offset of each tag: the first nChunks
  private nChunks = 0;
  /**
   * Requests, reused (PCIe copies what it needs when it pops one: pcie.ts acceptRead/acceptWrite):
   * one ring for every mover of the port (ringOf), so each request is filled whole, `landed` too.
   */
  private readonly reqs: ReuseRing<DmaReq>;
  private held: PooledBuf | null = null; // the gather buffer, until taken
  private writeBuf: PooledBuf | null = null; // what a scatter writes from, if pooled
  /** Bytes moved by reads and writes. */
  bytes = 0;
  /** The QP and WQE index its transfers work for (-1: unknown), passed on to PCIe for the DMA checker. */
  qpn = -1;
  wqe = -1;
  /** Posted writes not yet landed, and the pooled buffer each holds (null: none), oldest first. */
  private writesOut = 0;
  private readonly landBufs: (PooledBuf | null)[] = [];
  private landHead = 0;
  private landTail = 0;
  /** DMA fence holds to release once the writes in flight have landed (the first nAfterLanded). */
  private readonly afterLanded: number[] = [];
  private nAfterLanded = 0;
  private fence: { release(token: number): void } | null = null;
  private readonly landTarget: EventTarget = { fire: (): void => this.landedOne() };

  /**
   * `ctx`: when several movers share one port, each tags its reads `chunk * MOVER_TAG_SPAN + ctx`
   * (ctx < MOVER_TAG_SPAN), so the owner routes a completion by `tag % MOVER_TAG_SPAN`.
   */
  constructor(
    private readonly port: DmaPort,
    private readonly pool: PayloadPool = new PayloadPool(),
    private readonly ctx = 0,
  ) {
    this.reqs = ringOf(port);
  }

  /** Starts gathering `segs` into a buffer of their total length. */
  gather(segs: PhysSegment[]): void {
    if (this.held !== null) this.held.release(); // the last gather's bytes were not taken
    this.held = this.pool.take(total(segs));
    this.writeBuf = null;
    this.start(segs, true, this.held.bytes);
  }

  /**
   * Starts scattering `data` over `segs` (their total length must be data.length or more). When
   * `data` is a pooled buffer's bytes, pass the buffer: each write holds it until it lands.
   */
  scatter(segs: PhysSegment[], data: Uint8Array, buf: PooledBuf | null = null): void {
    this.writeBuf = buf;
    this.start(segs, false, data);
  }

  /** The gathered bytes' buffer (after done), with its reference: the caller releases it. */
  takeBuf(): PooledBuf | null {
    const b = this.held;
    this.held = null;
    return b;
  }

  private start(segs: PhysSegment[], reading: boolean, buf: Uint8Array): void {
    this.segs = segs;
    this.seg = 0;
    this.off = 0;
    this.bufOff = 0;
    this.buf = buf;
    this.inflight = 0;
    this.reading = reading;
    this.nChunks = 0; // the last transfer's reads have all completed
  }

  /** True when every byte was issued and (for reads) every completion has arrived. */
  get done(): boolean {
    return this.bufOff >= this.buf.length && this.inflight === 0;
  }

  /** Every request issued, only read completions outstanding: the owner may sleep. */
  get waiting(): boolean {
    return this.bufOff >= this.buf.length && this.inflight > 0;
  }

  /** The gathered bytes (after done). */
  get data(): Uint8Array {
    return this.buf;
  }

  /** Issues at most one request this cycle. */
  step(): void {
    if (this.bufOff >= this.buf.length || !this.port.req.canPush()) return;
    if (this.reading && this.inflight >= MAX_INFLIGHT) return;
    while (this.seg < this.segs.length && this.off >= this.segs[this.seg].length) {
      this.seg++;
      this.off = 0;
    }
    const s = this.segs[this.seg];
    const n = Math.min(s.length - this.off, this.buf.length - this.bufOff, this.reading ? MAX_READ : 4096);
    const addr = s.pa + this.off;
    const r = this.reqs.next();
    r.addr = addr;
    r.length = n;
    r.qpn = this.qpn;
    r.wqe = this.wqe;
    r.landed = this.landTarget;
    if (this.reading) {
      const k = this.nChunks++;
      this.chunkAt[k] = this.bufOff;
      r.kind = 'read';
      r.tag = k * MOVER_TAG_SPAN + this.ctx;
      r.data = undefined;
      r.dst = this.buf;
      r.dstOff = this.bufOff;
      this.port.req.push(r);
      this.inflight++;
    } else {
      const wb = this.writeBuf;
      if (wb !== null) wb.retain(); // released when the write lands
      this.landBufs[this.landTail++] = wb;
      this.writesOut++;
      r.kind = 'write';
      r.tag = 0;
      r.data = n === this.buf.length ? this.buf : this.buf.subarray(this.bufOff, this.bufOff + n);
      r.dst = undefined;
      r.dstOff = undefined;
      this.port.req.push(r);
    }
    this.off += n;
    this.bufOff += n;
    this.bytes += n;
  }


  /**
   * Releases a DMA fence hold (translation/dma_fence.ts) once every write this mover has issued
   * has landed in host memory (at once when none is in flight): a posted write is not over when
   * it is issued.
   */
  releaseWhenLanded(fence: { release(token: number): void }, token: number): void {
    if (this.writesOut === 0) fence.release(token);
    else {
      this.fence = fence;
      this.afterLanded[this.nAfterLanded++] = token;
    }
  }

  /** A posted write of this mover landed (they land in order). */
  private landedOne(): void {
    const b = this.landBufs[this.landHead];
    this.landBufs[this.landHead++] = null;
    if (b) b.release();
    if (--this.writesOut === 0) {
      // (no shift: a megabyte's 256 writes would cost 256^2 moves; no length 0: it drops the store)
      this.landHead = 0;
      this.landTail = 0;
    }
    if (this.writesOut === 0 && this.nAfterLanded > 0) {
      const held = this.afterLanded;
      const n = this.nAfterLanded;
      for (let i = 0; i < n; i++) this.fence!.release(held[i]);
      this.nAfterLanded = 0; // (release never issues a write of this mover: nothing was added meanwhile)
    }
  }

  /** A read completion of this mover. */
  complete(tag: number, data: Uint8Array): void {
    if (data !== this.buf) this.buf.set(data, this.chunkAt[Math.floor(tag / MOVER_TAG_SPAN)]);
    this.inflight--;
  }
}

/**
 * The request ring of a port's movers. One per port, not one per mover: a ring holds one more
 * request than the port's FIFO, so a reused request has been popped (and copied) whichever
 * mover pushed it, and the port's few requests stay in cache. A ring per mover was the FIFO's
 * depth times the movers (a requester's 256 contexts) in requests taken in turn, each cold:
 * filling one was the DMA mover's costliest line at 4,096 QPs.
 */
const RINGS = new WeakMap<DmaPort, ReuseRing<DmaReq>>();

function ringOf(port: DmaPort): ReuseRing<DmaReq> {
  let r = RINGS.get(port);
  if (r === undefined) {
    // every field a request of either kind sets, so all share one shape
    r = new ReuseRing(port.req, (): DmaReq => ({ kind: 'read', addr: 0, length: 0, tag: 0, data: undefined, landed: undefined, owned: true, dst: undefined, dstOff: undefined, qpn: -1, wqe: -1 }));
    RINGS.set(port, r);
  }
  return r;
}

/** Total bytes of a segment list. */
export function total(segs: readonly PhysSegment[]): number {
  let n = 0;
  for (const s of segs) n += s.length;
  return n;
}
