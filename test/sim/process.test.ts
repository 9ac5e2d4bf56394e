import { describe, expect, it } from 'vitest';
import { Clock, Fifo, Module, Sim, SimEvent } from '../../src/sim/index.ts';

describe('software processes', () => {
  it('run at the simulated time they resume, interleaved deterministically', async () => {
    const sim = new Sim();
    const log: string[] = [];
    const out = await sim.run(async () => {
      const a = sim.spawn(async () => {
        for (let i = 0; i < 3; i++) { await sim.delay(10); log.push(`a${i}@${sim.now}`); }
        return 'a';
      });
      const b = sim.spawn(async () => {
        for (let i = 0; i < 2; i++) { await sim.delay(15); log.push(`b${i}@${sim.now}`); }
        return 'b';
      });
      return (await a) + (await b);
    });
    expect(out).toBe('ab');
    expect(log).toEqual(['a0@10', 'b0@15', 'a1@20', 'b1@30', 'a2@30']);
    expect(sim.now).toBe(30);
  });

  it('resume through nested async calls before the next event fires', async () => {
    const sim = new Sim();
    const seen: number[] = [];
    const inner = async (): Promise<void> => { await sim.delay(5); };
    const mid = async (): Promise<void> => { await inner(); await inner(); };
    await sim.run(async () => {
      sim.spawn(async () => { await sim.delay(7); seen.push(sim.now); });
      await mid();
      seen.push(sim.now);
    });
    expect(seen).toEqual([7, 10]);
  });

  it('wait for hardware through events and FIFOs', async () => {
    const sim = new Sim();
    const clk = new Clock(sim.top, 'clk', 10);
    class Echo extends Module {
      override tick(): void {
        if (inq.canPop() && outq.canPush()) outq.push(inq.pop() * 2);
        else if (!inq.canPop()) this.sleep();
      }
    }
    const echo = new Echo(sim, sim.top, 'echo').clockedBy(clk);
    const inq: Fifo<number> = new Fifo<number>(echo, 'inq', { capacity: 2 });
    const outq: Fifo<number> = new Fifo<number>(echo, 'outq', { capacity: 2 });
    inq.consumer = echo;
    const got = await sim.run(async () => {
      const r: [number, number][] = [];
      for (const v of [1, 2, 3]) {
        await inq.pushWait(v);
        r.push([await outq.popWait(), sim.now]);
      }
      return r;
    });
    expect(got).toEqual([[2, 10], [4, 20], [6, 30]]);
  });

  it('fails the run with a clear error when main waits for something nothing will bring', async () => {
    const sim = new Sim();
    const ev = new SimEvent(sim);
    await expect(sim.run(async () => { await ev.wait(); })).rejects.toThrow(/stalled at 0 ps: the main process waits/);
  });

  it('ask a module created after a stall check whether it holds work (the list of such modules is made again)', async () => {
    const sim = new Sim();
    const ev = new SimEvent(sim);
    // an idle module's timer, 5 us away, brings what main waits for; a long jump with no clock
    // and only a Module's timer pending is stalled unless some module holds work
    class Timer extends Module {
      fire(): void {
        ev.notify();
      }
    }
    class Busy extends Module {
      override hasWork(): boolean {
        return true;
      }
    }
    const t = new Timer(sim, sim.top, 'timer');
    expect(sim.workModules()).toEqual([]);
    const b = new Busy(sim, sim.top, 'busy');
    expect(sim.workModules()).toEqual([b]);
    sim.at(5_000_000, t);
    await sim.run(async () => { await ev.wait(); });
    expect(sim.now).toBe(5_000_000);
  });

  it('refuse to let time pass outside run()', () => {
    const sim = new Sim();
    expect(() => sim.delay(10)).toThrow(/only passes inside run\(\)/);
  });

  it('propagate the failure of a spawned process', async () => {
    const sim = new Sim();
    await expect(
      sim.run(async () => {
        sim.spawn(async () => { await sim.delay(5); throw new Error('boom in child'); });
        await sim.delay(100);
      }),
    ).rejects.toThrow('boom in child');
  });

  it('run a process spawned from an event (an interrupt handler) at once: its microtask steps do not wait for another process', async () => {
    const sim = new Sim();
    const log: string[] = [];
    const helper = async (): Promise<number> => 7; // resolves in a microtask, no simulated time
    await sim.run(async () => {
      sim.at(100, {
        fire: () => {
          void sim.spawn(async () => {
            const v = await helper();
            await sim.delay(10);
            log.push(`${v} at ${sim.now}`);
          });
        },
      });
      // events keep coming meanwhile (a retry timer), but no other process resumes before 1000
      for (let t = 200; t < 1000; t += 100) sim.at(t, { fire: () => undefined });
      await sim.delay(1000);
    });
    expect(log).toEqual(['7 at 110']);
  });
});
