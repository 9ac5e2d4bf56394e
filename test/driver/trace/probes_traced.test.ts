/**
 * The UMR engine, the CQ writer and the EQ writer write their waves-only probes (key, kind, qpn,
 * busy, syndrome; cqe_valid, cqn, opcode; eqe_valid, type, eqn) only when they are traced (a
 * probe untraced holds nothing): traced, a registration's enabling UMR, its CQE and its command's
 * EQE all show in the waves.
 */
import { describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Access, Testbed } from '../../../src/index.ts';
import { UMR_KIND } from '../../../src/rtl/umr/umr_ops.ts';
import { EventType } from '../../../src/rtl/formats/constants.ts';
import { readVcdFile } from '../../support/vcd_read.ts';
import { tempDir } from '../../support/tmp.ts';

describe('waves-only probes of the UMR engine, CQ writer and EQ writer', () => {
  it('show a registration: its UMR (key, REG_MR, busy), its UMR CQE and its command EQE', async () => {
    const vcd = join(tempDir('mlx5sim-probes-'), 'probes.vcd');
    const tb = new Testbed({ hcas: 1, seed: 5, config: { mrCacheLimit: 0 }, trace: { vcd, gtkw: false } });
    let rkey = 0;
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      const pd = await ctx.allocPd();
      const buf = tb.host(0).alloc(4096);
      rkey = (await pd.regMr(buf.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_READ)).rkey;
    });
    await tb.close();
    const v = await readVcdFile(vcd);
    const of = (path: string): number[] => v.changes.filter(([, p, x]) => p === `tb.hca0.${path}` && x !== null).map(([, , x]) => x as number);
    expect(of('umr_engine.key')).toContain(rkey);
    expect(of('umr_engine.kind')).toContain(UMR_KIND.REG_MR);
    expect(of('umr_engine.busy')).toEqual(expect.arrayContaining([1, 0]));
    expect(of('cq_writer.cqe_valid')).toEqual(expect.arrayContaining([1, 0]));
    expect(of('cq_writer.cqn').length).toBeGreaterThan(0);
    expect(of('eq_writer.eqe_valid')).toEqual(expect.arrayContaining([1, 0]));
    expect(of('eq_writer.type')).toContain(EventType.CMD);
    expect(of('eq_writer.eqn').length).toBeGreaterThan(0);
  });
});
