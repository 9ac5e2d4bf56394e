import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ReadyList, WOKEN, type Arbitrated, type KeyRun } from '../../src/sim/ready_list.ts';

interface Item extends Arbitrated {
  id: number;
}

/** Items in key order, read back through the wait sets and woken set. */
function parkedInOrder(rl: ReadyList<Item>, set: { next(k: number): number }): number[] {
  const out: number[] = [];
  for (let k = set.next(0); k !== Infinity; k = set.next(k + 1)) out.push(rl.item(k).id);
  return out;
}

describe('ReadyList', () => {
  it('keeps entries in the order they became ready, through renumbering, and each parked entry in its wait sets', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('enter', 'leave', 'park', 'wake', 'unpark'), fc.nat(40), fc.integer({ min: 1, max: 3 })), { maxLength: 3000 }),
        (ops) => {
          const rl = new ReadyList<Item>(2);
          const items: Item[] = Array.from({ length: 41 }, (_, id) => ({ id, arbKey: -1, arbWait: 0 }));
          const order: number[] = []; // the model: ids in the order they entered
          for (const [op, id, mask] of ops) {
            const x = items[id];
            const ready = x.arbKey >= 0;
            if (op === 'enter' && !ready) { rl.enter(x); order.push(id); }
            else if (op === 'leave' && ready) { rl.leave(x); order.splice(order.indexOf(id), 1); }
            else if (op === 'park' && ready) rl.park(x, mask);
            else if (op === 'wake' && ready) rl.wake(x);
            else if (op === 'unpark' && ready) rl.unpark(x);
          }
          // keys increase along the model's order
          const keys = order.map((id) => items[id].arbKey);
          for (let i = 1; i < keys.length; i++) expect(keys[i]).toBeGreaterThan(keys[i - 1]);
          for (const id of order) expect(rl.item(items[id].arbKey)).toBe(items[id]);
          // the sets hold exactly the parked entries, in order
          for (let w = 0; w < 2; w++) {
            expect(parkedInOrder(rl, rl.waits[w])).toEqual(order.filter((id) => items[id].arbWait !== WOKEN && (items[id].arbWait & (1 << w)) !== 0));
          }
          expect(parkedInOrder(rl, rl.woken)).toEqual(order.filter((id) => items[id].arbWait === WOKEN));
          expect(rl.parked).toBe(order.filter((id) => items[id].arbWait !== 0).length);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('renumbers without losing the order when keys run out, and grows its key space for many entries', () => {
    const rl = new ReadyList<Item>(1);
    const items: Item[] = Array.from({ length: 600 }, (_, id) => ({ id, arbKey: -1, arbWait: 0 }));
    for (const x of items) rl.enter(x);
    rl.park(items[10], 1);
    // churn the tail: one entry leaves and comes back, many times, past 1,024 keys
    for (let i = 0; i < 5000; i++) {
      const x = items[599 - (i % 100)];
      rl.leave(x);
      rl.enter(x);
    }
    const live = items.slice().sort((a, b) => a.arbKey - b.arbKey);
    expect(live.slice(0, 500).map((x) => x.id)).toEqual(items.slice(0, 500).map((x) => x.id));
    expect(rl.waits[0].next(0)).toBe(items[10].arbKey);
    expect(rl.waits[0].size).toBe(1);
  });

  it('gives a run the keys one enter per member would have, through renumberings, and the same renumberings', () => {
    // the same operations on two lists: A enters each member of a run; B adds the run, its
    // members holding keys only when served (place); keys must agree at every step
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('enter', 'leave', 'park', 'run', 'serve'), fc.nat(60), fc.integer({ min: 1, max: 700 })), { maxLength: 400 }),
        (ops) => {
          const a = new ReadyList<Item>(1);
          const b = new ReadyList<Item>(1);
          const mk = (): Item[] => Array.from({ length: 61 }, (_, id) => ({ id, arbKey: -1, arbWait: 0 }));
          const ia = mk();
          const ib = mk();
          // B's runs: members not served yet; A's members of them are entered
          const runs: { r: KeyRun; members: number[] }[] = [];
          let next = 1000; // run members are items of their own
          const extraA = new Map<number, Item>();
          const extraB = new Map<number, Item>();
          const runKey = (x: { r: KeyRun }): number => x.r.base + x.r.next;
          for (const [op, id, n] of ops) {
            if (op === 'enter' && ia[id].arbKey < 0) {
              a.enter(ia[id]);
              b.enter(ib[id]);
            } else if (op === 'leave' && ia[id].arbKey >= 0) {
              a.leave(ia[id]);
              b.leave(ib[id]);
            } else if (op === 'park' && ia[id].arbKey >= 0 && ia[id].arbWait === 0) {
              a.park(ia[id], 1);
              b.park(ib[id], 1);
            } else if (op === 'run') {
              let left = n;
              while (left > 0) {
                const t = Math.min(left, b.room());
                const r: KeyRun = { base: 0, m: t, next: 0, arbKey: 0 };
                b.addRun(r);
                const members: number[] = [];
                for (let i = 0; i < t; i++) {
                  const xa = { id: next, arbKey: -1, arbWait: 0 };
                  a.enter(xa);
                  extraA.set(next, xa);
                  extraB.set(next, { id: next, arbKey: -1, arbWait: 0 });
                  members.push(next++);
                }
                runs.push({ r, members });
                left -= t;
              }
            } else if (op === 'serve' && runs.length > 0) {
              // the oldest run's next member is served: it holds its key (and keeps it when n is odd)
              const x = runs[0];
              const idB = x.members[x.r.next];
              const k = runKey(x);
              expect(extraA.get(idB)!.arbKey).toBe(k);
              x.r.next++;
              x.r.arbKey = x.r.base + x.r.next;
              b.place(extraB.get(idB)!, k);
              if (n % 2 === 0) {
                a.leave(extraA.get(idB)!);
                b.leave(extraB.get(idB)!);
              }
              if (x.r.next === x.r.m) {
                runs.shift();
                b.dropServedRuns();
              }
            }
            for (let id = 0; id <= 60; id++) expect(ib[id].arbKey).toBe(ia[id].arbKey);
            for (const [id, xb] of extraB) if (xb.arbKey >= 0) expect(xb.arbKey).toBe(extraA.get(id)!.arbKey);
            for (const x of runs) expect(runKey(x)).toBe(extraA.get(x.members[x.r.next])!.arbKey);
          }
        },
      ),
      { numRuns: 40 },
    );
  });
});
