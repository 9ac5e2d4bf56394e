/**
 * The slot waiters' list and runs (src/rtl/transport/slot_waiters.ts) against plain arrays: a
 * list built by appends and piece moves holds its waiters in order, its marks are counted in a
 * reused array, and a served run given new members (`reuse`, as the send queue engine does after
 * every wake) behaves exactly as a new one over them.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { SlotRun, WaitList, type Waiter } from '../../../src/rtl/transport/slot_waiters.ts';

interface W extends Waiter {
  id: number;
}

const waiter = (id: number): W => ({ id, wArr: [], wIdx: 0 });

/** A list of `n` waiters: single appends, then stretches of another list's array moved whole or in part. */
function build(n: number, cut: number): { list: WaitList<W>; order: W[] } {
  const list = new WaitList<W>();
  const order: W[] = [];
  // cells of another list's array: each waiter knows its cell there
  const other: W[] = Array.from({ length: n }, (_, i) => waiter(1000 + i));
  other.forEach((q, i) => {
    q.wArr = other;
    q.wIdx = i;
  });
  for (let i = 0; i < n; i++) {
    const q = waiter(i);
    list.append(q);
    order.push(q);
    if (i === cut) {
      // a run's members that found no slot: copied when short, referenced when long
      list.appendCells(other, 0, Math.min(n, 20));
      order.push(...other.slice(0, Math.min(n, 20)));
    }
  }
  return { list, order };
}

describe('slot waiters', () => {
  it('a list keeps its waiters in order through appends, moved stretches and compaction, and counts its marks in a reused array', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 80 }), fc.nat(80), fc.array(fc.nat(200), { maxLength: 6 }), (n, cut, marks) => {
        const { list, order } = build(n, cut % n);
        expect(list.len).toBe(order.length);
        for (let i = 0; i < order.length; i++) expect(list.indexOf(order[i])).toBe(i);
        list.compact();
        for (let i = 0; i < order.length; i++) expect(list.indexOf(order[i])).toBe(i);
        for (const m of marks) list.mark(order[m % order.length]);
        // the next list takes this one's marks array back: only nMarks of it count
        const next = new WaitList<W>(list.marks);
        expect(next.nMarks).toBe(0);
        next.mark(order[0]);
        expect(next.nMarks).toBe(1);
        expect(next.marks[0]).toBe(order[0]);
      }),
    );
  });

  it('a served run given new members behaves as a new run over them', () => {
    const step = fc.oneof(fc.constant<'adv'>('adv'), fc.nat(100));
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 60 }),
        fc.nat(60),
        fc.array(step, { maxLength: 30 }),
        fc.array(fc.nat(100), { maxLength: 4 }),
        (n, cut, steps, firstMarks) => {
          const { list, order } = build(n, cut % n);
          const len = order.length;
          // a run used first over other members, marked and served part way
          // (over three pieces: 0-2, a moved stretch of 20, the rest; served into the third)
          const a = build(40, 2);
          expect(a.list.pieces.length).toBe(3);
          const used = new SlotRun(a.list.pieces, a.order.length, 0);
          for (const m of firstMarks) used.mark(m % a.order.length);
          used.mi = Math.min(1, used.marks.length);
          used.advance(30);
          const shift = Math.min(cut % len, len - 1);
          const m = len - shift;
          const fresh = new SlotRun(list.pieces, m, shift);
          const reused = used.reuse(list.pieces, m, shift);
          for (const r of [fresh, reused]) {
            r.base = 5;
            r.advance(0);
          }
          let g = 0;
          for (const s of steps) {
            if (s === 'adv') {
              if (g >= m) continue;
              expect(reused.current()).toBe(fresh.current());
              expect(fresh.current()).toBe(order[shift + g]);
              g++;
              fresh.advance(g);
              reused.advance(g);
              expect(reused.arbKey).toBe(fresh.arbKey);
            } else {
              const q = order[s % len];
              expect(reused.indexOf(q)).toBe(fresh.indexOf(q));
              expect(reused.memberAt(s % m)).toBe(fresh.memberAt(s % m));
              fresh.mark(s % m);
              reused.mark(s % m);
              expect(reused.marks).toEqual(fresh.marks);
            }
          }
          expect(reused.unserved()).toEqual(fresh.unserved());
        },
      ),
    );
  });

  it('a run\'s members from the next one up to a mark wait again in order at the end of a list (requeueTo), whatever pieces they lie in', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 80 }), fc.nat(80), fc.nat(80), fc.nat(80), fc.nat(80), fc.nat(5), (n, cut, shiftSeed, gSeed, endSeed, before) => {
        const { list, order } = build(n, cut % n);
        const len = order.length;
        const shift = shiftSeed % len;
        const m = len - shift;
        const run = new SlotRun(list.pieces, m, shift);
        const g = gSeed % (m + 1);
        const end = g + (endSeed % (m - g + 1));
        run.advance(g);
        // the next list may hold waiters already (those that found no slot earlier in the edge)
        const next = new WaitList<W>();
        const first: W[] = [];
        for (let i = 0; i < before; i++) {
          const q = waiter(5000 + i);
          next.append(q);
          first.push(q);
        }
        run.requeueTo(next, end);
        const want = [...first, ...order.slice(shift + g, shift + end)];
        expect(next.len).toBe(want.length);
        const got: W[] = [];
        for (const p of next.pieces) for (let c = p.a; c < p.b; c++) got.push(p.arr[c]);
        expect(got).toEqual(want);
        for (let i = 0; i < want.length; i++) expect(next.indexOf(want[i])).toBe(i);
      }),
    );
  });
});
