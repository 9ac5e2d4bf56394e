/**
 * isMapped and isResident over a range look at each region's page table a chunk at a time
 * (host_space.ts PageTable.firstAtMost), not page by page: they must answer what asking page by
 * page answers, for ranges over several allocations (4 KiB and 2 MiB pages) with pages touched,
 * dropped, unmapped and never touched, across page-table chunks (512 pages) and past the end of
 * an allocation; and a terabyte of untouched memory is answered by its chunks.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { HUGE_PAGE_SIZE, HostError, HostSpace, PAGE_SIZE, PAGE_STATE, PageTable } from '../../../src/rtl/memory/host_space.ts';
import { Rng } from '../../../src/sim/rng.ts';

type Act = { kind: 'touch' | 'drop' | 'unmap'; at: number; pages: number };

const act = fc.record({
  kind: fc.constantFrom<Act['kind']>('touch', 'drop', 'unmap'),
  at: fc.integer({ min: 0, max: 1499 }),
  pages: fc.integer({ min: 1, max: 600 }),
});

describe('host range queries', () => {
  it('a page table finds the first page at most a state as a walk over every page does', () => {
    const state = fc.constantFrom(PAGE_STATE.LAZY, PAGE_STATE.DROPPED, PAGE_STATE.UNMAPPED, 0x5000, 0x7000);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.array(fc.tuple(fc.nat(), state), { maxLength: 40 }),
        fc.tuple(fc.nat(), fc.nat()),
        fc.constantFrom(PAGE_STATE.LAZY, PAGE_STATE.DROPPED, PAGE_STATE.UNMAPPED),
        (n, sets, [x, y], worst) => {
          const t = new PageTable(n);
          for (const [i, v] of sets) t.set(i % n, v);
          const from = Math.min(x % (n + 1), y % (n + 1));
          const to = Math.max(x % (n + 1), y % (n + 1));
          let want = -1;
          for (let i = from; i < to; i++) {
            if (t.get(i) <= worst) {
              want = i;
              break;
            }
          }
          expect(t.firstAtMost(from, to, worst)).toBe(want);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('isMapped and isResident of a range answer as every page of it asked alone', () => {
    fc.assert(
      fc.property(fc.array(act, { maxLength: 12 }), fc.array(fc.tuple(fc.integer({ min: 0, max: 1600 * PAGE_SIZE }), fc.integer({ min: 1, max: 1600 * PAGE_SIZE })), { minLength: 1, maxLength: 8 }), (acts, queries) => {
        const h = new HostSpace(new HostMem(2 ** 34, new Rng(3)));
        const a = h.alloc(1500 * PAGE_SIZE); // three page-table chunks, the last one short
        const huge = h.alloc(2 * HUGE_PAGE_SIZE, { hugePages: true }); // right after a, another region
        for (const x of acts) {
          const n = Math.min(x.pages, 1500 - x.at);
          if (x.kind === 'touch') {
            try {
              h.faultIn(a.addr + x.at * PAGE_SIZE, n * PAGE_SIZE);
            } catch (e) {
              if (!(e instanceof HostError && e.errno === 'EFAULT')) throw e; // an unmapped page in it
            }
          }
          else if (x.kind === 'drop') void h.madviseDontNeed(a.addr + x.at * PAGE_SIZE, n * PAGE_SIZE);
          else void h.munmap(a.addr + x.at * PAGE_SIZE, n * PAGE_SIZE);
        }
        h.faultIn(huge.addr, PAGE_SIZE); // its first huge page resident, the second not
        const pageOf = (va: number): number => (va >= huge.addr ? HUGE_PAGE_SIZE : PAGE_SIZE);
        for (const [off, len] of queries) {
          const lo = a.addr + off;
          const hi = Math.min(lo + len, huge.addr + huge.length + PAGE_SIZE); // may run past both
          let mapped = true;
          let resident = true;
          for (let va = lo; va < hi; va = Math.floor(va / pageOf(va)) * pageOf(va) + pageOf(va)) {
            mapped &&= h.isMapped(va, 1);
            resident &&= h.isResident(va, 1);
          }
          expect(h.isMapped(lo, hi - lo)).toBe(mapped);
          expect(h.isResident(lo, hi - lo)).toBe(resident);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('a terabyte never touched is mapped and not resident (asked chunk by chunk: 268 M pages one by one took seconds)', () => {
    const TiB = 2 ** 40;
    const h = new HostSpace(new HostMem(2 * TiB, new Rng(5)));
    const buf = h.alloc(TiB);
    h.faultIn(buf.addr + TiB - PAGE_SIZE, PAGE_SIZE);
    expect(h.isMapped(buf.addr, TiB)).toBe(true);
    expect(h.isResident(buf.addr + TiB - PAGE_SIZE, PAGE_SIZE)).toBe(true);
    expect(h.isResident(buf.addr, TiB)).toBe(false);
    void h.munmap(buf.addr + TiB / 2, PAGE_SIZE);
    expect(h.isMapped(buf.addr, TiB)).toBe(false);
    expect(h.isMapped(buf.addr, TiB / 2)).toBe(true);
  });
});
