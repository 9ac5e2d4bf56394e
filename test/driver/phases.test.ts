/**
 * tb.phase (the waves' phases): its refusals, the files a traced run writes (one view per phase,
 * stale phase views of an earlier run removed, a user's file kept), and the run's own view that
 * spans the phases, not the firmware before and after them.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Access, Testbed, VerbsError } from '../../src/index.ts';
import { GTKW_HEADER } from '../../src/sim/trace/gtkw.ts';
import { tempDir } from '../support/tmp.ts';
import { readGtkwView } from '../support/gtkw_view.ts';

const einval = (f: () => unknown, what: RegExp): void => {
  let err: unknown = null;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(VerbsError);
  expect((err as VerbsError).errno).toBe('EINVAL');
  expect((err as Error).message).toMatch(what);
};

describe('tb.phase', () => {
  it('refuses a bad name, a name used twice, an unknown module, no modules, and a call outside run()', async () => {
    const tb = new Testbed({ hcas: 2 });
    const body = async (): Promise<number> => 1;
    einval(() => tb.phase('reg_mr', ['hca0.sq'], body), /outside tb\.run/);
    await tb.run(async () => {
      einval(() => tb.phase('a b', ['hca0.sq'], body), /letters, digits/);
      einval(() => tb.phase('x', ['hca2.sq'], body), /no module 'hca2\.sq'/);
      einval(() => tb.phase('x', [], body), /non-empty array/);
      expect(await tb.phase('x', ['hca*.umr_engine', 'link_req'], body)).toBe(1);
      einval(() => tb.phase('x', ['hca0.sq'], body), /already a phase/);
    });
  });

  it('writes one view per phase, removes a stale one of an earlier run, keeps the others; the run view spans the phases only', async () => {
    const dir = tempDir('mlx5sim-phases-');
    const vcd = join(dir, 'run.vcd');
    writeFileSync(join(dir, 'run.old.gtkw'), `${GTKW_HEADER}\n[*] phase old: hca0.sq\n`);
    writeFileSync(join(dir, 'run.mine.gtkw'), '[*] a view of my own\n');
    const tb = new Testbed({ hcas: 1, trace: { vcd } });
    let firstPost = 0;
    let lastDone = 0;
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const cq = await ctx.createCq(16);
      const qp = await pd.createQp({ sendCq: cq, recvCq: cq });
      await qp.connect(await pd.createQp({ sendCq: cq, recvCq: cq }));
      const a = tb.host(0).alloc(8192);
      const mr = await pd.regMr(a.addr, 8192, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      const write = (wrId: number): Promise<unknown> => {
        qp.postSend({ wrId, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr.lkey }], remoteAddr: a.addr + 4096, rkey: mr.rkey, signaled: true });
        return cq.wait(1);
      };
      firstPost = tb.now;
      await tb.phase('first', ['hca0.sq', 'hca0.requester', 'hca0.responder'], () => write(1));
      await tb.delay(50_000_000); // 50 us between the phases, as a check's firmware command takes
      await tb.phase('second', ['hca0.responder', 'hca0.cq_writer'], () => write(2));
      lastDone = tb.now;
      await qp.query(); // a check after the work: outside every view
      await tb.delay(20_000_000);
    });
    await tb.close();
    expect(readdirSync(dir).sort()).toEqual(['filters', 'run.first.gtkw', 'run.mine.gtkw', 'run.second.gtkw', 'run.vcd', 'run.gtkw'].sort());
    const whole = readGtkwView(join(dir, 'run.gtkw'));
    const second = readGtkwView(join(dir, 'run.second.gtkw'));
    expect(whole.start).toBeGreaterThan(firstPost - 3_000_000);
    expect(whole.start).toBeLessThanOrEqual(firstPost + 1_000_000);
    expect(whole.end).toBeLessThan(lastDone + 10_000_000);
    // the phase view: its modules first and open, in the order named, the others collapsed
    expect(second.phase).toBe('second');
    expect(second.groups.filter((g) => g.open && !g.label.startsWith('markers')).map((g) => g.label)).toEqual(['hca0.responder', 'hca0.cq_writer']);
    expect(second.groups.some((g) => !g.open && g.label === 'hca0.sq')).toBe(true);
    expect(second.start).toBeGreaterThan(firstPost + 50_000_000);
    expect(second.end).toBeLessThanOrEqual(lastDone + 1_000_000);
  });
});
