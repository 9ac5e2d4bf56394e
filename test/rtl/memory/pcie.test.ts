import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { join } from 'node:path';
import { Clock, Fifo, Module, Sim, Tracer } from '../../../src/sim/index.ts';
import { readVcdFile } from '../../support/vcd_read.ts';
import { resolveConfig, type HcaConfig } from '../../../src/rtl/config.ts';
import { FRAME_SIZE, HostMem } from '../../../src/rtl/memory/host_mem.ts';
import { Pcie, type DmaPort, type DmaPortOptions, type DmaResp } from '../../../src/rtl/memory/pcie.ts';
import type { HistogramJson } from '../../../src/sim/stats.ts';
import { tempDir } from '../../support/tmp.ts';

const MiB = 2 ** 20;
const PERIOD = 2000; // 500 MHz core clock

interface Rig {
  sim: Sim;
  clk: Clock;
  mem: HostMem;
  pcie: Pcie;
}

function rig(cfg: Partial<HcaConfig> = {}): Rig {
  const sim = new Sim({ seed: 1 });
  const hca = new Module(sim, sim.top, 'hca0');
  const clk = new Clock(hca, 'core_clk', PERIOD);
  const mem = new HostMem(16 * MiB, sim.rng.fork());
  // the device's view of a host without ICM: host memory only
  const view = {
    read: (a: number, n: number) => mem.read(a, n),
    readInto: (a: number, d: Uint8Array, o: number, n: number) => mem.readInto(a, d, o, n),
    write: (a: number, b: Uint8Array) => (mem.write(a, b), true),
    covers: (a: number, n: number) => mem.covers(a, n),
  };
  const pcie = new Pcie(hca, 'pcie', { clock: clk, ports: {}, deps: { mem: view }, cfg: resolveConfig(cfg) });
  return { sim, clk, mem, pcie };
}

function pattern(n: number, seed: number): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (i * 7 + seed * 13 + (i >> 8)) & 0xff);
}

function latencyStats(r: Rig): HistogramJson {
  return r.sim.stats()['tb.hca0.pcie'].read_latency_ps as HistogramJson;
}

/** One read from a software process: returns [time from push to data, data]. */
async function readOnce(r: Rig, port: DmaPort, addr: number, length: number, tag: number): Promise<[number, DmaResp]> {
  const t0 = r.sim.now;
  await port.req.pushWait({ kind: 'read', addr, length, tag });
  const resp = await port.resp.popWait();
  return [r.sim.now - t0, resp];
}

describe('pcie', () => {
  it('completes a 64 B read 520 ns + 64 B / 12 GB/s after acceptance (~525 ns), 8 B in ~520.7 ns', async () => {
    const r = rig();
    const port = r.pcie.port('client');
    r.mem.write(0x4000 - 20, pattern(64, 1));
    const got = await r.sim.run(async () => {
      await r.sim.delay(1000); // push between edges: accepted on the next one (2000)
      const a = await readOnce(r, port, 0x4000 - 20, 64, 7);
      await r.sim.delay(999);
      const b = await readOnce(r, port, 0x4000, 8, 8);
      const c = await readOnce(r, port, 0x8000, 4096, 9);
      return [a, b, c];
    });
    const [[t64, d64], [t8, d8], [t4k]] = got;
    expect(d64.tag).toBe(7);
    expect(d64.data).toEqual(pattern(64, 1));
    expect(d8.data).toEqual(pattern(64, 1).subarray(20, 28));
    // acceptance -> data: exactly base + ceil(len / bandwidth)
    const lat = latencyStats(r);
    expect(lat.count).toBe(3);
    expect(lat.min).toBe(520_000 + 667); // 8 B: 520.667 ns
    expect(lat.max).toBe(520_000 + 341_334); // 4 KiB: 861.334 ns (grows with size)
    expect(lat.mean * 3).toBeCloseTo(525_334 + 520_667 + 861_334, 3); // 64 B: 525.334 ns
    // push -> data, seen by software: plus the wait for the next edge (at most one cycle)
    expect(t64).toBe(525_334 + 1000);
    expect(t8).toBeGreaterThanOrEqual(520_667);
    expect(t8).toBeLessThanOrEqual(520_667 + PERIOD);
    expect(t4k).toBeLessThanOrEqual(861_334 + PERIOD);
    // idle: the block sleeps, and nothing is left scheduled
    expect(r.pcie.idle).toBe(true);
    r.sim.runUntil(r.sim.now + 10 * PERIOD);
    expect(r.pcie.awake).toBe(false);
    expect(r.sim.pending).toBe(0);
  });

  it('serves a clocked client module: request edge to response edge is ~525 ns + 2 cycles', () => {
    const r = rig();
    class Client extends Module {
      readonly port: DmaPort;
      sentAt = -1;
      gotAt = -1;
      got: DmaResp | null = null;
      constructor(parent: Module) {
        super(parent.sim, parent, 'client');
        this.port = r.pcie.port('client');
        this.port.req.producer = this;
        this.port.resp.consumer = this;
      }
      override tick(): void {
        if (this.sentAt < 0) {
          this.port.req.push({ kind: 'read', addr: 0x1000, length: 64, tag: 1 });
          this.sentAt = this.sim.now;
        } else if (this.port.resp.canPop()) {
          this.got = this.port.resp.pop();
          this.gotAt = this.sim.now;
        } else this.sleep();
      }
    }
    const c = new Client(r.pcie.parent!).clockedBy(r.clk, true);
    r.mem.write(0x1000, pattern(64, 3));
    r.sim.runUntil(2_000_000);
    expect(c.got?.data).toEqual(pattern(64, 3));
    const rt = c.gotAt - c.sentAt;
    expect(rt).toBeGreaterThanOrEqual(525_334 + PERIOD); // accepted one edge after the push
    expect(rt).toBeLessThanOrEqual(525_334 + 3 * PERIOD);
    expect(rt % PERIOD).toBe(0);
  });

  it('keeps at most 64 reads in flight: 100 issued at once all complete, in order, with the right data', async () => {
    const r = rig();
    const a = r.pcie.port('a', { reqCapacity: 128, respCapacity: 128 });
    const b = r.pcie.port('b');
    for (let i = 0; i < 100; i++) r.mem.write(0x10000 + i * 64, pattern(64, i));
    // a probe samples the in-flight count on every edge
    let maxSeen = 0;
    let stallSeen = false;
    class Probe extends Module {
      override tick(): void {
        maxSeen = Math.max(maxSeen, r.pcie.outstandingReads);
        if (r.pcie.stalledOnTags) stallSeen = true;
        if (this.sim.now > 3_000_000) this.sleep();
      }
    }
    new Probe(r.sim, r.sim.top, 'probe').clockedBy(r.clk, true);
    const resps: [number, DmaResp][] = [];
    let writeLanded = -1;
    await r.sim.run(async () => {
      for (let i = 0; i < 100; i++) a.req.push({ kind: 'read', addr: 0x10000 + i * 64, length: 64, tag: i });
      // while port a waits for tags, port b's posted write goes through
      r.sim.spawn(async () => {
        await r.sim.delay(200_000);
        b.req.push({ kind: 'write', addr: 0x100, length: 4, tag: 0, data: Uint8Array.of(1, 2, 3, 4) });
        while (r.mem.readU32BE(0x100) === 0) await r.sim.delay(PERIOD);
        writeLanded = r.sim.now;
      });
      while (resps.length < 100) resps.push([r.sim.now, await a.resp.popWait()]);
    });
    expect(maxSeen).toBe(64);
    expect(stallSeen).toBe(true);
    expect(r.sim.stats()['tb.hca0.pcie'].max_outstanding).toBe(64);
    expect(r.sim.stats()['tb.hca0.pcie'].tag_stalls).toBeGreaterThanOrEqual(1);
    resps.forEach(([, resp], i) => {
      expect(resp.tag).toBe(i);
      expect(resp.data).toEqual(pattern(64, i));
    });
    // completions share the bandwidth: 64 B every 5.334 ns at most
    for (let i = 1; i < 100; i++) expect(resps[i][0] - resps[i - 1][0]).toBeGreaterThanOrEqual(5334);
    // the 65th read could only start once the first one freed its tag
    expect(resps[64][0] - resps[0][0]).toBeGreaterThanOrEqual(525_334);
    expect(writeLanded).toBeGreaterThan(0);
    expect(writeLanded).toBeLessThanOrEqual(200_000 + 250_000 + 3 * PERIOD);
  });

  it('arbitrates round-robin between ports, one request per cycle', async () => {
    const r = rig();
    const a = r.pcie.port('a', { reqCapacity: 16, respCapacity: 16 });
    const b = r.pcie.port('b', { reqCapacity: 16, respCapacity: 16 });
    const order: [number, string, number][] = [];
    await r.sim.run(async () => {
      for (let i = 0; i < 12; i++) a.req.push({ kind: 'read', addr: 64 * i, length: 8, tag: i });
      for (let i = 0; i < 4; i++) b.req.push({ kind: 'read', addr: 64 * i, length: 8, tag: 100 + i });
      const drain = async (p: DmaPort, name: string, n: number): Promise<void> => {
        for (let i = 0; i < n; i++) {
          const x = await p.resp.popWait();
          order.push([r.sim.now, name, x.tag]);
        }
      };
      await Promise.all([r.sim.spawn(() => drain(a, 'a', 12)), r.sim.spawn(() => drain(b, 'b', 4))]);
    });
    order.sort((x, y) => x[0] - y[0]);
    expect(order.map(([, p, t]) => `${p}${t}`)).toEqual([
      'a0', 'b100', 'a1', 'b101', 'a2', 'b102', 'a3', 'b103', 'a4', 'a5', 'a6', 'a7', 'a8', 'a9', 'a10', 'a11',
    ]);
    // accepted on consecutive edges: latencies are the base + transfer, completions 1 cycle apart
    for (let i = 1; i < order.length; i++) expect(order[i][0] - order[i - 1][0]).toBe(PERIOD);
  });

  it('lands posted writes in host memory pcieWritePs after acceptance, in order', async () => {
    const r = rig();
    const p = r.pcie.port('w');
    const seen: number[] = [];
    await r.sim.run(async () => {
      await r.sim.delay(1000);
      const first = Uint8Array.of(0xaa, 0xbb, 0xcc, 0xdd);
      p.req.push({ kind: 'write', addr: FRAME_SIZE - 2, length: 4, tag: 0, data: first });
      p.req.push({ kind: 'write', addr: FRAME_SIZE, length: 1, tag: 1, data: Uint8Array.of(0x11) });
      const accept = r.clk.nextEdgeAfter(1000);
      await r.sim.delay(accept - r.sim.now + 1);
      first.fill(0); // the block copied the payload when it accepted the write
      await r.sim.delay(accept + 250_000 - 1 - r.sim.now);
      seen.push(r.mem.readU32BE(FRAME_SIZE - 2)); // not yet
      await r.sim.delay(2);
      seen.push(r.mem.readU32BE(FRAME_SIZE - 2)); // first landed
      await r.sim.delay(PERIOD);
      seen.push(r.mem.readU32BE(FRAME_SIZE - 2)); // second landed over it
    });
    expect(seen).toEqual([0, 0xaabbccdd, 0xaabb11dd]);
    const st = r.sim.stats()['tb.hca0.pcie'];
    expect([st.writes, st.bytes_written]).toEqual([2, 5]);
  });

  it('does not let a read pass an earlier posted write, even when writes are slow', async () => {
    const r = rig({ pcieWritePs: 700_000 });
    const w = r.pcie.port('w');
    const rd = r.pcie.port('reader');
    const [lat, resp] = await r.sim.run(async () => {
      w.req.push({ kind: 'write', addr: 0x2000, length: 2, tag: 0, data: Uint8Array.of(5, 6) });
      await r.sim.delay(PERIOD);
      return readOnce(r, rd, 0x2000, 2, 1);
    });
    expect(resp.data).toEqual(Uint8Array.of(5, 6));
    expect(lat).toBeGreaterThanOrEqual(700_000 - PERIOD);
  });

  it('holds completions back while a resp FIFO is full, and frees their tags only on delivery', async () => {
    const r = rig({ pcieMaxOutstandingReads: 4 });
    const p = r.pcie.port('p', { reqCapacity: 8, respCapacity: 1 });
    const tags: number[] = [];
    await r.sim.run(async () => {
      for (let i = 0; i < 8; i++) p.req.push({ kind: 'read', addr: i * 8, length: 8, tag: i });
      await r.sim.delay(2_000_000);
      // read 0 was delivered and freed its tag for read 4; reads 1..4 completed but are held,
      // keeping their tags, so reads 5..7 wait
      expect(r.pcie.outstandingReads).toBe(4);
      expect(r.sim.stats()['tb.hca0.pcie'].reads).toBe(5);
      expect(r.pcie.stalledOnTags).toBe(true);
      while (tags.length < 8) tags.push((await p.resp.popWait()).tag);
    });
    expect(tags).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(r.pcie.idle).toBe(true);
  });

  it('delivers doorbells into a hardware FIFO doorbellPs later, in order, waiting for space', async () => {
    const r = rig();
    const sq = new Module(r.sim, r.pcie.parent!, 'sq');
    const db = new Fifo<number>(sq, 'db', { capacity: 1 });
    const got: [number, number][] = [];
    const sizes: number[] = [];
    let firstAt = -1;
    await r.sim.run(async () => {
      r.sim.spawn(async () => {
        while (db.size === 0) await db.changed.wait();
        firstAt = r.sim.now;
      });
      await r.sim.delay(1000);
      r.pcie.ringDoorbell(db, 11);
      r.pcie.ringDoorbell(db, 12);
      r.pcie.ringDoorbell(db, 13);
      await r.sim.delay(210_000); // a slow consumer: 11 arrived at 201 ns, 12 and 13 found the FIFO full
      got.push([r.sim.now, db.pop()]);
      // the pop wakes the block, which pushes 12 on its next edge (212 ns)
      await r.sim.delay(500);
      sizes.push(db.size);
      await r.sim.delay(PERIOD);
      sizes.push(db.size);
      for (let i = 1; i < 3; i++) {
        const v = await db.popWait();
        got.push([r.sim.now, v]);
        await r.sim.delay(10_000);
      }
    });
    expect(got.map(([, v]) => v)).toEqual([11, 12, 13]);
    expect(db.pushes.value).toBe(3);
    expect(firstAt).toBe(1000 + 200_000); // exactly doorbellPs after the ring
    expect(sizes).toEqual([0, 1]);
    expect(r.sim.stats()['tb.hca0.pcie'].doorbells).toBe(3);
    const other = new Fifo<number>(sq, 'other');
    other.producer = sq;
    expect(() => r.pcie.ringDoorbell(other, 1)).toThrow(/fed by tb\.hca0\.sq, not by MMIO/);
    expect(() => r.pcie.port('rd')).toThrow(/port name 'rd' clashes with signal rd_req_valid/);
  });

  it('traces its handshakes, addresses and in-flight count into a VCD that reads back strictly', async () => {
    const r = rig();
    const p = r.pcie.port('client');
    const vcd = join(tempDir('mlx5sim-pcie-'), 'pcie.vcd');
    const tracer = new Tracer(r.sim, { vcd, gtkw: false });
    await r.sim.run(async () => {
      await readOnce(r, p, 0xff_0040, 64, 5);
      p.req.push({ kind: 'write', addr: 0x1234, length: 2, tag: 6, data: Uint8Array.of(1, 2) });
      await r.sim.delay(300_000);
    });
    tracer.close();
    const v = await readVcdFile(vcd);
    const width = (name: string): number | undefined => v.decls.find((d) => d.path === `tb.hca0.pcie.${name}`)?.width;
    expect([width('rd_addr'), width('state'), width('outstanding'), width('client_req_count')]).toEqual([64, 2, 7, 3]);
    const values = (name: string): (number | null)[] => v.changes.filter(([, path]) => path === `tb.hca0.pcie.${name}`).map(([, , x]) => x);
    expect(values('rd_addr')).toContain(0xff_0040);
    expect(values('rd_len')).toContain(64);
    expect(values('outstanding')).toEqual([0, 1, 0]);
    expect(values('state')).toEqual([0, 1, 0, 2, 0]); // IDLE, READ, IDLE, WRITE, IDLE
    expect(values('wr_addr')).toContain(0x1234);
    expect(values('client_req_count')).toEqual([0, 1, 0, 1, 0]);
  });

  it('a request outside host memory is an Unsupported Request: a read completes with all-ones, a write is dropped, both counted', async () => {
    const r = rig();
    const p = r.pcie.port('bad');
    let data: Uint8Array | null = null;
    await r.sim.run(async () => {
      p.req.push({ kind: 'read', addr: 16 * MiB - 4, length: 8, tag: 3 });
      data = (await p.resp.popWait()).data;
      p.req.push({ kind: 'write', addr: 16 * MiB - 4, length: 8, tag: 4, data: new Uint8Array(8).fill(7) });
      await r.sim.delay(1_000_000);
    });
    expect([...data!]).toEqual(new Array(8).fill(0xff));
    expect(r.sim.stats()['tb.hca0.pcie'].unsupported_requests).toBe(2);
  });

  it('equals direct host memory: reads awaited in program order see every earlier write', async () => {
    const WIN = 3 * FRAME_SIZE;
    const opArb = fc.record({
      write: fc.boolean(),
      port: fc.integer({ min: 0, max: 2 }),
      off: fc.integer({ min: 0, max: WIN - 1 }),
      len: fc.integer({ min: 1, max: 300 }),
      seed: fc.integer({ min: 0, max: 255 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { maxLength: 25 }), async (ops) => {
        const r = rig();
        const ports = [0, 1, 2].map((i) => r.pcie.port(`p${i}`));
        const base = 5 * FRAME_SIZE - 100;
        const ref = new Uint8Array(WIN);
        await r.sim.run(async () => {
          let tag = 0;
          let lastWritePort = -1;
          for (const o of ops) {
            const len = Math.min(o.len, WIN - o.off);
            // ports are not ordered with each other: let a write be accepted before another port goes
            if (lastWritePort >= 0 && lastWritePort !== o.port) {
              const q = ports[lastWritePort].req;
              do await r.sim.delay(PERIOD); while (q.size > 0);
            }
            if (lastWritePort !== o.port) lastWritePort = -1;
            if (o.write) {
              const data = pattern(len, o.seed);
              await ports[o.port].req.pushWait({ kind: 'write', addr: base + o.off, length: len, tag: tag++, data });
              ref.set(data, o.off);
              lastWritePort = o.port;
            } else {
              const [, resp] = await readOnce(r, ports[o.port], base + o.off, len, tag++);
              expect(Buffer.from(resp.data!).equals(Buffer.from(ref.subarray(o.off, o.off + len)))).toBe(true);
            }
          }
          await r.sim.delay(300_000); // let the last writes land
        });
        expect(Buffer.from(r.mem.read(base, WIN)).equals(Buffer.from(ref))).toBe(true);
      }),
      { numRuns: 40 },
    );
  });

  it('equals direct host memory with concurrent traffic: reads see old or newly written bytes, final memory is exact', async () => {
    const WIN = 2 * FRAME_SIZE;
    const acc = fc.record({ off: fc.integer({ min: 0, max: WIN - 1 }), len: fc.integer({ min: 1, max: 200 }), seed: fc.integer({ min: 0, max: 255 }) });
    const round = fc.record({ writes: fc.array(acc, { maxLength: 6 }), reads: fc.array(fc.tuple(fc.integer({ min: 1, max: 2 }), acc), { maxLength: 10 }) });
    await fc.assert(
      fc.asyncProperty(fc.array(round, { minLength: 1, maxLength: 4 }), async (rounds) => {
        const r = rig({ pcieMaxOutstandingReads: 4 }); // small, so tags run out too
        const opts: DmaPortOptions = { reqCapacity: 2, respCapacity: 2 };
        const ports = [0, 1, 2].map((i) => r.pcie.port(`p${i}`, opts));
        const base = 9 * FRAME_SIZE - 64;
        const ref = new Uint8Array(WIN);
        await r.sim.run(async () => {
          let tag = 0;
          for (const rd of rounds) {
            const writes = rd.writes.map((w) => ({ ...w, len: Math.min(w.len, WIN - w.off), data: pattern(Math.min(w.len, WIN - w.off), w.seed) }));
            const readers = [1, 2].map((pi) => {
              const mine = rd.reads.filter(([p]) => p === pi).map(([, a]) => ({ ...a, len: Math.min(a.len, WIN - a.off), tag: tag++ }));
              return r.sim.spawn(async () => {
                const out: DmaResp[] = [];
                // pipelined: push as space allows, pop as completions come
                let sent = 0;
                while (out.length < mine.length) {
                  if (sent < mine.length && ports[pi].req.canPush()) {
                    const a = mine[sent++];
                    ports[pi].req.push({ kind: 'read', addr: base + a.off, length: a.len, tag: a.tag });
                  } else if (ports[pi].resp.canPop()) out.push(ports[pi].resp.pop());
                  else await r.sim.delay(PERIOD);
                }
                return { mine, out };
              });
            });
            const writer = r.sim.spawn(async () => {
              for (const w of writes) await ports[0].req.pushWait({ kind: 'write', addr: base + w.off, length: w.len, tag: tag++, data: w.data });
            });
            await writer;
            for (const res of await Promise.all(readers)) {
              res.mine.forEach((a, i) => {
                const resp = res.out[i];
                expect(resp.tag).toBe(a.tag);
                for (let j = 0; j < a.len; j++) {
                  const at = a.off + j;
                  const ok = resp.data![j] === ref[at] || writes.some((w) => at >= w.off && at < w.off + w.len && w.data[at - w.off] === resp.data![j]);
                  if (!ok) expect(`byte ${at} = ${resp.data![j]}`).toBe(`old ${ref[at]} or a value written this round`);
                }
              });
            }
            do await r.sim.delay(10_000); while (!r.pcie.idle);
            for (const w of writes) ref.set(w.data, w.off);
            expect(Buffer.from(r.mem.read(base, WIN)).equals(Buffer.from(ref))).toBe(true);
          }
        });
      }),
      { numRuns: 30 },
    );
  });
});
