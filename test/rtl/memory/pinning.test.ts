import { describe, expect, it } from 'vitest';
import { FRAME_SIZE, HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { HUGE_PAGE_SIZE, HostSpace, PAGE_SIZE } from '../../../src/rtl/memory/host_space.ts';
import { Rng } from '../../../src/sim/rng.ts';

const MiB = 1024 * 1024;

function space(): HostSpace {
  return new HostSpace(new HostMem(64 * MiB, new Rng(3)));
}

describe('pinning (pin_user_pages)', () => {
  it('munmap and madvise of pinned pages free no pinned frame until the last unpin', async () => {
    const h = space();
    const buf = h.alloc(4 * PAGE_SIZE);
    h.fill(buf.addr, 4 * PAGE_SIZE, 0xcd);
    const frames = [0, 1, 2, 3].map((i) => h.dmaAddress(buf.addr + i * PAGE_SIZE));
    const a = h.pin(buf.addr + 100, PAGE_SIZE); // pages 0 and 1
    const b = h.pin(buf.addr + PAGE_SIZE, 1); // page 1 again: two pins on it
    expect([...a]).toEqual(frames.slice(0, 2));
    expect(h.mem.pins(frames[1])).toBe(2);
    const inUse = h.mem.framesInUse;
    await h.munmap(buf.addr, 2 * PAGE_SIZE);
    await h.madviseDontNeed(buf.addr + 2 * PAGE_SIZE, 2 * PAGE_SIZE);
    // the unpinned pages 2 and 3 went back; pages 0 and 1 are the registrations', nobody else's
    expect(h.mem.framesInUse).toBe(inUse - 2);
    expect(h.mem.framesOrphaned).toBe(2);
    expect(h.mem.isAllocated(frames[0]) && h.mem.isAllocated(frames[1])).toBe(true);
    // a new allocation never gets them
    const other = h.alloc(16 * PAGE_SIZE);
    for (let i = 0; i < 16; i++) expect(frames.slice(0, 2)).not.toContain(h.dmaAddress(other.addr + i * PAGE_SIZE));
    // what the device writes there stays there (the process cannot see it: it lost the mapping)
    expect(h.mem.read(frames[0], 4)).toEqual(Uint8Array.of(0xcd, 0xcd, 0xcd, 0xcd));
    expect(() => h.read(buf.addr, 1)).toThrow(/munmap/);
    h.unpin(a);
    expect(h.mem.isAllocated(frames[0])).toBe(false); // its last pin: freed now
    expect(h.mem.isAllocated(frames[1])).toBe(true); // b still pins it
    h.unpin(b);
    expect(h.mem.isAllocated(frames[1])).toBe(false);
    expect(h.mem.framesOrphaned).toBe(0);
    expect(h.mem.framesPinned).toBe(0);
  });

  it('a pin on a 2 MiB huge page holds all its frames, and munmap frees them only at unpin', async () => {
    const h = space();
    const buf = h.alloc(2 * HUGE_PAGE_SIZE, { hugePages: true });
    const base = h.dmaAddress(buf.addr);
    const pins = h.pin(buf.addr + HUGE_PAGE_SIZE - 8, 16); // touches both huge pages
    expect(pins.length).toBe((2 * HUGE_PAGE_SIZE) / FRAME_SIZE);
    const inUse = h.mem.framesInUse;
    await h.munmap(buf.addr, 2 * HUGE_PAGE_SIZE);
    expect(h.mem.framesInUse).toBe(inUse);
    expect(h.mem.framesOrphaned).toBe(1024);
    // no huge page can be carved out of the pinned ones meanwhile
    const other = h.alloc(HUGE_PAGE_SIZE, { hugePages: true });
    const oa = h.dmaAddress(other.addr);
    expect(oa >= base && oa < base + HUGE_PAGE_SIZE).toBe(false);
    h.unpin(pins);
    expect(h.mem.framesInUse).toBe(inUse - 1024 + 512);
    expect(h.mem.framesOrphaned).toBe(0);
  });

  it('pinning needs present pages; firstUnowned finds the first frame without a pin', () => {
    const h = space();
    const buf = h.alloc(2 * PAGE_SIZE);
    expect(() => h.pin(buf.addr, PAGE_SIZE)).toThrow(/not present/);
    h.faultIn(buf.addr, 2 * PAGE_SIZE);
    const p0 = h.dmaAddress(buf.addr);
    const p1 = h.dmaAddress(buf.addr + PAGE_SIZE);
    const pins = h.pin(buf.addr, 1);
    expect(h.mem.firstUnowned(p0 + 5, 100)).toBe(-1);
    expect(h.mem.firstUnowned(p1, 1)).toBe(p1);
    h.unpin(pins);
    expect(h.mem.firstUnowned(p0, 1)).toBe(p0);
    expect(() => h.unpin(pins)).toThrow(/not pinned/);
  });
});
