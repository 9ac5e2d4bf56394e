/**
 * The send queue engine's QPs waiting for a WQE slot, in order, stored so that thousands of them
 * cost O(1) to wake and to find still without a slot (sq.ts). With 4,096 QPs x 16 READs and 512
 * slots, some 3,500 QPs wait; every slot given back wakes them all, and all but one find no slot
 * at their turn and wait again in the same order. Walking them one by one made a READ cost
 * thousands of steps.
 *
 * Waiters are kept as pieces: stretches of cells of arrays. A QP waiting on its own takes a cell
 * of the list's own array (`append`); a stretch of a run whose members all found no slot moves
 * as a piece referencing the run's cells (`appendCells`), so nothing is copied or written per
 * member. A member knows its cell (`wArr`, `wIdx`); its place in a list or run is found from
 * the pieces (few: small stretches are copied, and a list of many pieces is compacted).
 */
import type { KeyRun } from '../../sim/ready_list.ts';

/** What a waiter carries: its cell. */
export interface Waiter {
  wArr: Waiter[];
  wIdx: number;
}

/**
 * Cells a .. b-1 of arr; its index in a list is the length of the pieces before it, so a piece
 * moves from a woken list to the next whole. Only a list's last piece over its own array grows
 * (`b`), while the list takes waiters; once woken, its pieces do not change.
 */
export interface Piece<T extends Waiter> {
  readonly arr: T[];
  readonly a: number;
  b: number;
}

/** Stretches shorter than this are copied into the list's own array rather than referenced. */
const COPY_BELOW = 16;
/** A list of more pieces than this is compacted into one array when it is woken. */
const MAX_PIECES = 32;

/** QPs waiting for a slot, in the order they began to wait. */
export class WaitList<T extends Waiter> {
  pieces: Piece<T>[] = [];
  len = 0;
  /** Waiters to look at one by one when the list is woken (sq.ts: keyed, gone, or with an input). */
  marks: T[];
  /** Marks 0 .. nMarks - 1 are in use (the array keeps its length: it is reused). */
  nMarks = 0;
  private tail: T[] = [];

  /** `marks`: an array to reuse for the marks (a woken list's; its length is kept, `nMarks` counts). */
  constructor(marks: T[] = []) {
    this.marks = marks;
  }

  /** `q` is to be looked at alone when the list is woken. */
  mark(q: T): void {
    this.marks[this.nMarks++] = q;
  }

  /** `q` begins to wait. */
  append(q: T): void {
    const t = this.tail;
    q.wArr = t as Waiter[];
    q.wIdx = t.length;
    t.push(q);
    const last = this.pieces.length > 0 ? this.pieces[this.pieces.length - 1] : undefined;
    if (last !== undefined && last.arr === t && last.b === t.length - 1) last.b = t.length;
    else this.pieces.push({ arr: t, a: t.length - 1, b: t.length });
    this.len++;
  }

  /** Cells a .. b-1 of arr begin to wait, in order (a run's members that found no slot). */
  appendCells(arr: T[], a: number, b: number): void {
    if (b - a < COPY_BELOW) {
      for (let c = a; c < b; c++) this.append(arr[c]);
      return;
    }
    this.pieces.push({ arr, a, b });
    this.len += b - a;
  }

  /** A woken list's whole piece begins to wait again (its cells in order; the piece is shared). */
  appendPiece(p: Piece<T>): void {
    if (p.b - p.a < COPY_BELOW) return this.appendCells(p.arr, p.a, p.b);
    this.pieces.push(p);
    this.len += p.b - p.a;
  }

  /** Index of waiter `q` in the list, or -1. */
  indexOf(q: T): number {
    return pieceIndex(this.pieces, q, 0);
  }

  /** The waiters in one array (each told its new cell) when they lie in too many pieces. */
  compact(): void {
    if (this.pieces.length <= MAX_PIECES) return;
    const arr: T[] = [];
    for (const p of this.pieces)
      for (let c = p.a; c < p.b; c++) {
        const q = p.arr[c];
        q.wArr = arr as Waiter[];
        q.wIdx = arr.length;
        arr.push(q);
      }
    this.pieces = [{ arr, a: 0, b: arr.length }];
    this.tail = [];
  }

  /** Empties the list (its waiters were woken); pieces handed out stay valid. */
  reset(): void {
    this.pieces = [];
    this.len = 0;
    this.marks = [];
    this.nMarks = 0;
    this.tail = [];
  }
}

/**
 * Waiters woken at once: they took consecutive keys of the ready list (`KeyRun`), as one `enter`
 * each would have given them, and are served at those keys, in order.
 */
export class SlotRun<T extends Waiter> implements KeyRun {
  base = 0;
  next = 0;
  /** The key of the member served next (the arbiter's list reads it as an entry's). */
  arbKey = 0;
  /** Piece of member `next`, and the list index of its first cell. */
  private pi = 0;
  private piOff = 0;
  /** Members that must be served one by one (an input, a state change, the UMR QP), ascending, from `mi`. */
  readonly marks: number[] = [];
  mi = 0;

  /**
   * Members 0 .. m - 1 are waiters `shift` .. `shift` + m - 1 of the woken list's pieces (shared
   * with the list's other runs: nothing is copied per run).
   */
  constructor(
    public pieces: Piece<T>[],
    public m: number,
    public shift = 0,
  ) {}

  /** The run again, as new, over other members (a served run is reused: a wake per slot given back must not allocate). */
  reuse(pieces: Piece<T>[], m: number, shift: number): this {
    this.pieces = pieces;
    this.m = m;
    this.shift = shift;
    this.base = 0;
    this.next = 0;
    this.arbKey = 0;
    this.pi = 0;
    this.piOff = 0;
    if (this.marks.length !== 0) this.marks.length = 0; // (a setter call even on an empty array)
    this.mi = 0;
    return this;
  }

  /** The member served next. */
  current(): T {
    const p = this.pieces[this.pi];
    return p.arr[p.a + this.next + this.shift - this.piOff];
  }

  /** Members before `g` are served. */
  advance(g: number): void {
    this.next = g;
    this.arbKey = this.base + g;
    const ps = this.pieces;
    const x = g + this.shift;
    while (this.pi < ps.length && x >= this.piOff + ps[this.pi].b - ps[this.pi].a) {
      this.piOff += ps[this.pi].b - ps[this.pi].a;
      this.pi++;
    }
  }

  /**
   * Members `next` .. end - 1 wait again, in order, at the end of `list`: whole pieces shared,
   * parts of pieces as cells. The walk starts at the piece of member `next` (kept by `advance`).
   */
  requeueTo(list: WaitList<T>, end: number): void {
    const sh = this.shift;
    const ps = this.pieces;
    const from = this.next + sh;
    const to = end + sh;
    let off = this.piOff;
    for (let i = this.pi; i < ps.length && off < to; i++) {
      const p = ps[i];
      const n = p.b - p.a;
      const lo = Math.max(from, off);
      const hi = Math.min(to, off + n);
      if (lo === off && hi === off + n) list.appendPiece(p);
      else if (lo < hi) list.appendCells(p.arr, p.a + lo - off, p.a + hi - off);
      off += n;
    }
  }

  /** Index of waiter `q` among the members not served yet, or -1. */
  indexOf(q: T): number {
    const g = pieceIndex(this.pieces, q, this.next + this.shift) - this.shift;
    return g >= this.next && g < this.m ? g : -1;
  }

  /** Member `g` (of this run's members), or undefined past the pieces. */
  memberAt(g: number): T | undefined {
    const x = g + this.shift;
    let off = 0;
    for (const p of this.pieces) {
      if (x >= off && x < off + p.b - p.a) return p.arr[p.a + x - off];
      off += p.b - p.a;
    }
    return undefined;
  }

  /** Member `g` is to be served one by one. */
  mark(g: number): void {
    const ms = this.marks;
    let i = ms.length;
    while (i > this.mi && ms[i - 1] > g) i--;
    if (i > this.mi && ms[i - 1] === g) return;
    ms.splice(i, 0, g);
  }

  /** The members not served yet, in order. */
  unserved(): T[] {
    const out: T[] = [];
    for (let g = this.next; g < this.m; g++) {
      this.advance(g);
      out.push(this.current());
    }
    this.advance(this.m);
    return out;
  }
}

/** The index (from `from` on) of waiter `q` in the pieces, or -1. */
function pieceIndex<T extends Waiter>(pieces: readonly Piece<T>[], q: T, from: number): number {
  let off = 0;
  for (const p of pieces) {
    const n = p.b - p.a;
    if (p.arr === q.wArr && q.wIdx >= p.a && q.wIdx < p.b) {
      const g = off + q.wIdx - p.a;
      if (g >= from) return g;
    }
    off += n;
  }
  return -1;
}
