import type { Ps } from './time.ts';

/** Something the scheduler calls when its event is due. `arg` is the number given at schedule time. */
export interface EventTarget {
  fire(arg: number): void;
}

/** Event priorities at equal time: clock edges first (as in SST), then ordinary events. */
export const PRIO_CLOCK = 0;
export const PRIO_NORMAL = 1;
const MAX_PRIO = 15;
const SEQ_SPAN = 2 ** 48; // insertion sequence numbers below this: plenty for any run

/**
 * A binary min-heap of events ordered by (time, priority, insertion sequence). Ties never
 * depend on hash order or promise timing. Events live in slots of parallel typed arrays
 * recycled through a free list, so the steady state allocates nothing.
 */
export class EventQueue {
  private time = new Float64Array(256);
  private key = new Float64Array(256); // priority * 2^48 + sequence
  private arg = new Float64Array(256);
  private prio = new Uint8Array(256);
  private target: (EventTarget | null)[] = new Array(256).fill(null);
  private heap = new Int32Array(256); // slot ids, heap-ordered
  private free = new Int32Array(256); // free slot ids (a stack)
  private nFree = 256;
  private seq = 0;
  /** Number of pending events. */
  size = 0;

  constructor() {
    for (let i = 0; i < 256; i++) this.free[i] = 255 - i;
  }

  /** Adds an event. Times are checked by the caller (Sim) so this stays branch-light. */
  push(t: Ps, prio: number, target: EventTarget, arg: number): void {
    if (this.nFree === 0) this.grow();
    const s = this.free[--this.nFree];
    this.time[s] = t;
    this.key[s] = prio * SEQ_SPAN + this.seq++;
    this.prio[s] = prio;
    this.arg[s] = arg;
    this.target[s] = target;
    // sift up
    const heap = this.heap;
    let i = this.size++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const ps = heap[p];
      if (!this.less(s, ps)) break;
      heap[i] = ps;
      i = p;
    }
    heap[i] = s;
  }

  /** Calls `fn` with the time and target of every pending event, in no particular order (diagnostics only). */
  forEachPending(fn: (t: Ps, target: EventTarget) => void): void {
    for (let i = 0; i < this.size; i++) {
      const s = this.heap[i];
      fn(this.time[s], this.target[s] as EventTarget);
    }
  }

  /** Time of the earliest event; Infinity when empty. */
  peekTime(): Ps {
    return this.size === 0 ? Infinity : this.time[this.heap[0]];
  }

  /** Ordering key (priority * 2^48 + sequence) of the earliest event (call only when size > 0). */
  peekKey(): number {
    return this.key[this.heap[0]];
  }

  /**
   * Takes the next insertion sequence number for an event kept outside the heap (a clock's
   * next edge, see Sim), so it orders against heap events exactly as if it had been pushed.
   */
  takeKey(prio: number): number {
    return prio * SEQ_SPAN + this.seq++;
  }

  /** Removes the earliest event and returns its slot; read it with slotTime/slotTarget/slotArg before the next push. */
  pop(): number {
    const heap = this.heap;
    const top = heap[0];
    const last = heap[--this.size];
    const n = this.size;
    if (n > 0) {
      // sift down
      let i = 0;
      for (;;) {
        let c = 2 * i + 1;
        if (c >= n) break;
        const r = c + 1;
        if (r < n && this.less(heap[r], heap[c])) c = r;
        if (!this.less(heap[c], last)) break;
        heap[i] = heap[c];
        i = c;
      }
      heap[i] = last;
    }
    this.free[this.nFree++] = top;
    return top;
  }

  slotTime(s: number): Ps {
    return this.time[s];
  }
  slotPrio(s: number): number {
    return this.prio[s];
  }
  slotArg(s: number): number {
    return this.arg[s];
  }
  /** The target of a popped slot; clears the slot's reference so nothing is retained. */
  takeTarget(s: number): EventTarget {
    const t = this.target[s]!;
    this.target[s] = null;
    return t;
  }

  private less(a: number, b: number): boolean {
    const ta = this.time[a];
    const tb = this.time[b];
    return ta < tb || (ta === tb && this.key[a] < this.key[b]);
  }

  private grow(): void {
    const old = this.time.length;
    const cap = old * 2;
    const f64 = (src: Float64Array): Float64Array<ArrayBuffer> => {
      const d = new Float64Array(cap);
      d.set(src);
      return d;
    };
    this.time = f64(this.time);
    this.key = f64(this.key);
    this.arg = f64(this.arg);
    const prio = new Uint8Array(cap);
    prio.set(this.prio);
    this.prio = prio;
    for (let i = old; i < cap; i++) this.target.push(null);
    const heap = new Int32Array(cap);
    heap.set(this.heap);
    this.heap = heap;
    const free = new Int32Array(cap);
    for (let i = 0; i < old; i++) free[i] = cap - 1 - i;
    this.free = free;
    this.nFree = old;
  }
}

export { MAX_PRIO };
