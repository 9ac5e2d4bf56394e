import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Sim, Tracer, US } from '../../../src/sim/index.ts';
import { Hca } from '../../../src/rtl/hca.ts';
import { resolveConfig, type HcaConfig } from '../../../src/rtl/config.ts';
import type { AtuPort } from '../../../src/rtl/translation/atu.ts';
import type { AtuRequest, AtuResult } from '../../../src/rtl/translation/atu_types.ts';
import { writeMkey } from '../../../src/rtl/firmware/icm_writer.ts';
import { decodeMkeyContext } from '../../../src/rtl/formats/mkey_context.ts';
import { HcaCapOpMod, MkcAccessMode, PageFaultFlag, makeKey } from '../../../src/rtl/formats/constants.ts';
import {
  Cmdif,
  CmdError,
  CmdifState,
  CmdOpcodeEnum,
  CmdStatus,
  FIRST_MKEY_INDEX,
  FIRST_QPN,
  type Cmd,
  type CmdifOptions,
  type CmdOf,
  type CreateMkeyIn,
} from '../../../src/rtl/firmware/cmdif.ts';
import {
  ODP_CAPS_BLOCK_SIZE,
  decodeOdpCapsBlock,
  decodeOdpTransportCaps,
  deviceAttrOf,
  encodeOdpCapsBlock,
  encodeOdpTransportCaps,
  hcaCaps,
  type OdpTransportCap,
} from '../../../src/rtl/firmware/hca_caps.ts';
import { readVcdFile } from '../../support/vcd_read.ts';
import { tempDir } from '../../support/tmp.ts';

const CREATE_MKEY_PS = 230 * US; // spec/timing.md "firmware command"
const COMMAND_PS = 50 * US;

interface Bench {
  sim: Sim;
  hca: Hca;
  cmdif: Cmdif;
  port: AtuPort;
}

/** An EQ, a CQ on it, a PD and a QP using both: the usual start of a QP command test. */
async function qpOnNewObjects(cmdif: Cmdif): Promise<{ eqn: number; cqn: number; pd: number; qpn: number }> {
  const { eqn } = await cmdif.exec({ op: 'CREATE_EQ', size: 64 });
  const { cqn } = await cmdif.exec({ op: 'CREATE_CQ', size: 64, eqn });
  const { pd } = await cmdif.exec({ op: 'ALLOC_PD' });
  const { qpn } = await cmdif.exec({ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 64, rqSize: 64 });
  return { eqn, cqn, pd, qpn };
}

function bench(config: Partial<HcaConfig> = {}, opts: CmdifOptions = {}): Bench {
  const sim = new Sim();
  const hca = new Hca(sim, sim.top, 'hca0', resolveConfig(config), opts);
  const cmdif = hca.cmdif;
  const port = hca.atu.port('x'); // ports before tracing and before the run
  return { sim, hca, cmdif, port };
}

async function translate(b: Bench, req: Omit<AtuRequest, 'tag'>): Promise<AtuResult> {
  await b.port.req.pushWait({ ...req, tag: 0 });
  return (await b.port.resp.popWait()).result;
}

/** The CmdError a command rejects with (fails the test when it succeeds or throws something else). */
async function rejection(p: Promise<unknown>): Promise<CmdError> {
  const e = await p.then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(CmdError);
  return e as CmdError;
}

/** A two-page MTT mkey over fresh host frames. */
function mttMkey(b: Bench, pd: number, tag = 0x2a): { input: CreateMkeyIn; frames: number[] } {
  const frames = b.hca.mem.allocFrames(2);
  return {
    frames,
    input: {
      tag,
      accessMode: MkcAccessMode.MTT,
      access: 4 | 1, // REMOTE_READ | LOCAL_WRITE
      pd,
      start: 0x10000,
      length: 8192,
      logPageSize: 12,
      umrEn: true,
      mtt: frames.map((pa) => pa + 3), // RD | WR
    },
  };
}

describe('cmdif timing', () => {
  it('CREATE_MKEY takes cfg.fwCreateMkeyPs (230 us), other commands cfg.fwCommandPs (50 us); state, opcode and busy follow', async () => {
    const b = bench();
    const { sim, cmdif } = b;
    const seen: [string, string, number][] = [];
    await sim.run(async () => {
      const probe = sim.spawn(async () => {
        for (const t of [25 * US, 100 * US, 300 * US]) {
          await sim.delay(t - sim.now);
          seen.push([CmdifState.nameOf(cmdif.state.q), CmdOpcodeEnum.nameOf(cmdif.opcode.q), cmdif.busy.q]);
        }
      });
      const { pd } = await cmdif.exec({ op: 'ALLOC_PD' });
      expect(sim.now).toBe(COMMAND_PS);
      expect(pd).toBe(1);
      const t0 = sim.now;
      await cmdif.exec({ op: 'CREATE_MKEY', ...mttMkey(b, pd).input });
      expect(sim.now - t0).toBe(CREATE_MKEY_PS);
      await probe;
    });
    expect(seen).toEqual([
      ['EXEC', 'ALLOC_PD', 1],
      ['EXEC', 'CREATE_MKEY', 1],
      ['IDLE', 'NONE', 0],
    ]);
    expect(cmdif.status.q).toBe(CmdStatus.OK);
  });

  it('executes one command at a time in posting order: two posted together finish at 230 and 280 us', async () => {
    const b = bench();
    const { sim, cmdif } = b;
    await sim.run(async () => {
      const { pd } = await cmdif.exec({ op: 'ALLOC_PD' });
      const t0 = sim.now;
      const done: [string, number][] = [];
      const a = cmdif.exec({ op: 'CREATE_MKEY', ...mttMkey(b, pd).input }).then(() => done.push(['CREATE_MKEY', sim.now - t0]));
      const c = cmdif.exec({ op: 'ALLOC_PD' }).then((r) => done.push([`ALLOC_PD ${r.pd}`, sim.now - t0]));
      expect(cmdif.queued.q).toBe(1); // the PD waits for the mkey
      expect(cmdif.outstanding).toBe(2);
      await Promise.all([a, c]);
      expect(done).toEqual([
        ['CREATE_MKEY', CREATE_MKEY_PS],
        ['ALLOC_PD 2', CREATE_MKEY_PS + COMMAND_PS],
      ]);
      expect(cmdif.queued.q).toBe(0);
    });
    const st = sim.stats()['tb.hca0.cmdif'];
    expect(st.cmd_CREATE_MKEY).toBe(1);
    expect(st.cmd_ALLOC_PD).toBe(2);
    expect(st.errors).toBe(0);
    const lat = st.latency_ps as { count: number; max: number };
    const wait = st.queue_wait_ps as { max: number };
    expect(lat.count).toBe(3);
    expect(lat.max).toBe(CREATE_MKEY_PS + COMMAND_PS); // the PD's latency includes its wait
    expect(wait.max).toBe(CREATE_MKEY_PS);
  });

  it('a failed command also takes its latency, and the next one still waits for it', async () => {
    const { sim, cmdif } = bench();
    await sim.run(async () => {
      const bad = rejection(cmdif.exec({ op: 'CREATE_MKEY', tag: 1, accessMode: MkcAccessMode.PA, access: 0, pd: 7, start: 0, length: 64 }));
      const next = cmdif.exec({ op: 'ALLOC_PD' });
      const e = await bad;
      expect(sim.now).toBe(CREATE_MKEY_PS);
      expect(e.statusName).toBe('BAD_RESOURCE');
      await next;
      expect(sim.now).toBe(CREATE_MKEY_PS + COMMAND_PS);
    });
    expect(sim.stats()['tb.hca0.cmdif'].errors).toBe(1);
  });

  it('refuses to post outside run()', () => {
    const { cmdif } = bench();
    expect(() => cmdif.exec({ op: 'ALLOC_PD' })).toThrow(/only passes inside run\(\)/);
  });

  it('traces state, opcode, busy and queue depth into the VCD, with filters naming the opcodes', async () => {
    const b = bench();
    const dir = tempDir('mlx5sim-cmdif-');
    const vcd = join(dir, 'cmdif.vcd');
    const tracer = new Tracer(b.sim, { vcd, scopes: ['tb.hca0.cmdif'] });
    await b.sim.run(async () => {
      const a = b.cmdif.exec({ op: 'ALLOC_PD' });
      const q = b.cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.ODP_CUR });
      await Promise.all([a, q]);
    });
    tracer.close();
    const v = await readVcdFile(vcd);
    /** The value a signal settles to at each time it changes (the initial $dumpvars, then changes). */
    const settled = (path: string): [number, number | null][] => {
      const m = new Map<number, number | null>();
      for (const [t, p, x] of v.changes) if (p === path) m.set(t, x);
      return [...m];
    };
    expect(settled('tb.hca0.cmdif.opcode')).toEqual([
      [0, 0x800],
      [COMMAND_PS, 0x100],
      [2 * COMMAND_PS, 0],
    ]);
    expect(settled('tb.hca0.cmdif.busy')).toEqual([
      [0, 1],
      [2 * COMMAND_PS, 0],
    ]);
    // the query waits (queued 1) until the PD completes
    expect(settled('tb.hca0.cmdif.queued')).toEqual([
      [0, 1],
      [COMMAND_PS, 0],
    ]);
    const filters = readdirSync(join(dir, 'filters')).filter((f) => f.includes('cmd_opcode'));
    expect(filters.length).toBeGreaterThan(0);
    const text = readFileSync(join(dir, 'filters', filters[0]), 'utf8');
    expect(text).toMatch(/^800 ALLOC_PD$/m);
    expect(text).toMatch(/^507 2ERR_QP$/m);
  });
});

describe('cmdif mkey commands', () => {
  it('CREATE_MKEY makes a key the ATU translates; index from 2 (index 1 is the reserved lkey 0x100), tag from the caller', async () => {
    const b = bench();
    await b.sim.run(async () => {
      const { pd } = await b.cmdif.exec({ op: 'ALLOC_PD' });
      const { input, frames } = mttMkey(b, pd, 0x2a);
      const { mkey, index } = await b.cmdif.exec({ op: 'CREATE_MKEY', ...input });
      expect(index).toBe(FIRST_MKEY_INDEX);
      expect(mkey).toBe(makeKey(FIRST_MKEY_INDEX, 0x2a));
      const ok = await translate(b, { key: mkey, va: 0x10000 + 4096 + 16, length: 32, access: 4, pd, qpn: FIRST_QPN });
      expect(ok).toEqual({ kind: 'ok', segments: [{ pa: frames[1] + 16, length: 32 }] });
      const wrongPd = await translate(b, { key: mkey, va: 0x10000, length: 8, access: 0, pd: pd + 1, qpn: FIRST_QPN });
      expect(wrongPd).toEqual({ kind: 'error', error: 'PD', key: mkey });
      const wrongTag = await translate(b, { key: makeKey(index, 0x2b), va: 0x10000, length: 8, access: 0, pd, qpn: FIRST_QPN });
      expect(wrongTag).toEqual({ kind: 'error', error: 'INVALID_KEY', key: makeKey(index, 0x2b) });
    });
  });

  it('QUERY_MKEY returns the 64 context bytes, which decode to what was created (reserved bytes zero)', async () => {
    const b = bench();
    await b.sim.run(async () => {
      const { pd } = await b.cmdif.exec({ op: 'ALLOC_PD' });
      const { input } = mttMkey(b, pd, 0x77);
      const { index } = await b.cmdif.exec({ op: 'CREATE_MKEY', ...input, remoteInval: true, pgAccess: true });
      const q = await b.cmdif.exec({ op: 'QUERY_MKEY', index });
      expect(q.allocated).toBe(true);
      expect(q.context.length).toBe(64);
      expect(decodeMkeyContext(new DataView(q.context.buffer, q.context.byteOffset, 64), 0)).toEqual({
        free: false,
        pcieControl: 0,
        umrEn: true,
        atomic: false,
        remoteWrite: false,
        remoteRead: true,
        localWrite: true,
        localRead: true,
        accessMode: MkcAccessMode.MTT,
        qpn: 0xffffff,
        tag: 0x77,
        len64: false,
        bsfEn: false,
        syncUmr: false,
        remoteInval: true,
        pd,
        startAddr: 0x10000,
        len: 8192,
        bsfOctwordSize: 0,
        translationsOctwordSize: 1, // two MTTs = one octoword
        logPageSize: 12,
      });
      expect(q.context[3]).toBe(0);
      expect([...q.context.subarray(36, 48)].every((x) => x === 0)).toBe(true);
      // after DESTROY the context is still readable: free, and not allocated
      await b.cmdif.exec({ op: 'DESTROY_MKEY', index });
      const after = await b.cmdif.exec({ op: 'QUERY_MKEY', index });
      expect(after.allocated).toBe(false);
      expect(decodeMkeyContext(new DataView(after.context.buffer, after.context.byteOffset, 64), 0).free).toBe(true);
    });
  });

  it('DESTROY_MKEY makes the key invalid to the ATU, frees the index for reuse, and fails on an index not allocated', async () => {
    const b = bench();
    await b.sim.run(async () => {
      const { pd } = await b.cmdif.exec({ op: 'ALLOC_PD' });
      const { mkey, index } = await b.cmdif.exec({ op: 'CREATE_MKEY', ...mttMkey(b, pd).input });
      const req = { key: mkey, va: 0x10000, length: 8, access: 0, pd, qpn: FIRST_QPN };
      expect((await translate(b, req)).kind).toBe('ok'); // now cached
      const t0 = b.sim.now;
      await b.cmdif.exec({ op: 'DESTROY_MKEY', index });
      expect(b.sim.now - t0).toBe(COMMAND_PS);
      expect(await translate(b, req)).toEqual({ kind: 'error', error: 'INVALID_KEY', key: mkey });
      const e = await rejection(b.cmdif.exec({ op: 'DESTROY_MKEY', index }));
      expect(e.status).toBe(0x5);
      expect(e.statusName).toBe('BAD_RESOURCE');
      expect(e.message).toMatch(/^DESTROY_MKEY\(0x202\) op_mod\(0x0\) failed, status BAD_RESOURCE\(0x5\), syndrome \(0x[0-9a-f]+\): mkey index 0x2 is not allocated$/);
      const again = await b.cmdif.exec({ op: 'CREATE_MKEY', ...mttMkey(b, pd, 0x2b).input });
      expect(again.index).toBe(index); // lowest free index again
      expect(again.mkey).toBe(makeKey(index, 0x2b));
    });
  });

  it('hands out the lowest free index and skips one written into ICM behind its back', async () => {
    const b = bench();
    await b.sim.run(async () => {
      const { pd } = await b.cmdif.exec({ op: 'ALLOC_PD' });
      writeMkey(b.hca, {
        index: 4, tag: 9, free: false, accessMode: MkcAccessMode.PA, access: 0, umrEn: false, remoteInval: false,
        pd, qpn: 0xffffff, start: 0, length: 4096, len64: false, logPageSize: 12, pgAccess: false,
      });
      const got: number[] = [];
      for (let i = 0; i < 4; i++) {
        got.push((await b.cmdif.exec({ op: 'CREATE_MKEY', tag: i, accessMode: MkcAccessMode.PA, access: 0, pd, start: 0, length: 64 })).index);
      }
      expect(got).toEqual([2, 3, 5, 6]);
      await b.cmdif.exec({ op: 'DESTROY_MKEY', index: 3 });
      await b.cmdif.exec({ op: 'DESTROY_MKEY', index: 2 });
      const next = await b.cmdif.exec({ op: 'CREATE_MKEY', tag: 0, accessMode: MkcAccessMode.PA, access: 0, pd, start: 0, length: 64 });
      expect(next.index).toBe(2);
    });
  });

  it('checks CREATE_MKEY inputs: status, rule and a stable syndrome per rule', async () => {
    const b = bench();
    await b.sim.run(async () => {
      const { pd } = await b.cmdif.exec({ op: 'ALLOC_PD' });
      const base: CmdOf<'CREATE_MKEY'> = { op: 'CREATE_MKEY', tag: 1, accessMode: MkcAccessMode.PA, access: 0, pd, start: 0, length: 64 };
      const cases: [Partial<CreateMkeyIn>, string, string, RegExp][] = [
        [{ pd: 7 }, 'BAD_RESOURCE', 'pd_not_allocated', /pd 0x7 is not allocated/],
        [{ pd: 9 }, 'BAD_RESOURCE', 'pd_not_allocated', /pd 0x9 is not allocated/],
        [{ tag: 256 }, 'BAD_PARAM', 'tag_range', /tag 256 is not an unsigned integer of 8 bits/],
        [{ accessMode: 4 as typeof MkcAccessMode.KSM }, 'BAD_PARAM', 'access_mode', /access mode 4 is not modelled/],
        [{ accessMode: MkcAccessMode.KSM, klm: [] }, 'BAD_PARAM', 'translations_mode', /a KSM mkey starts with every entry null/],
        [{ access: 0x10 }, 'BAD_PARAM', 'access_flags', /access 0x10 has bits other than/],
        [{ mtt: [0x1003] }, 'BAD_PARAM', 'translations_mode', /an MTT list needs access mode MTT/],
        [{ accessMode: MkcAccessMode.MTT, logPageSize: 11 }, 'BAD_PARAM', 'log_page_size_min', /below 4 KiB pages/],
        [{ accessMode: MkcAccessMode.KLMS, klm: [], xltCapacity: 2 ** 16 + 1 }, 'EXCEED_LIM', 'klm_list_size', /65537 KLMs exceed 2\^log_max_klm_list_size = 65536/],
        [{ accessMode: MkcAccessMode.MTT, xltCapacity: 2 ** 24 + 1 }, 'EXCEED_LIM', 'xlt_capacity', /16777217 translation entries exceed 2\^model_log_max_xlt = 16777216/],
        [{ accessMode: MkcAccessMode.KSM, xltCapacity: 2 ** 32 - 1 }, 'EXCEED_LIM', 'xlt_capacity', /4294967295 translation entries exceed/],
      ];
      const syndromes = new Map<string, number>();
      for (const [patch, status, rule, msg] of cases) {
        const e = await rejection(b.cmdif.exec({ ...base, ...patch }));
        expect(e.statusName, rule).toBe(status);
        expect(e.status, rule).toBe(CmdStatus[status as keyof typeof CmdStatus]);
        expect(e.rule).toBe(rule);
        expect(e.op).toBe('CREATE_MKEY');
        expect(e.opcode).toBe(0x200);
        expect(e.message).toMatch(msg);
        const s = syndromes.get(rule);
        if (s === undefined) syndromes.set(rule, e.syndrome);
        else expect(e.syndrome).toBe(s); // same rule, same syndrome, whatever the values
      }
      expect(new Set(syndromes.values()).size).toBe(syndromes.size); // different rules, different syndromes
      // a KLM list at the limit is accepted
      const klm = await b.cmdif.exec({ ...base, accessMode: MkcAccessMode.KLMS, klm: [{ bcount: 64, key: 0x200, va: 0 }], xltCapacity: 2 ** 16 });
      expect(klm.index).toBe(FIRST_MKEY_INDEX);
      // an MTT table at the entry limit is accepted: 2^24 entries, 128 MiB of ICM
      const reserved = b.hca.icm.xltBytesReserved;
      const big = await b.cmdif.exec({ ...base, accessMode: MkcAccessMode.MTT, xltCapacity: 2 ** 24 });
      expect(big.index).toBe(FIRST_MKEY_INDEX + 1);
      expect(b.hca.icm.xltBytesReserved - reserved).toBeGreaterThanOrEqual(2 ** 24 * 8);
      // QUERY/DESTROY of an index beyond the table
      const far = await rejection(b.cmdif.exec({ op: 'QUERY_MKEY', index: b.hca.icm.mkeyEntries }));
      expect(far.statusName).toBe('BAD_PARAM');
    });
  });
});

describe('cmdif queues and QPs', () => {
  it('allocates eqn from 0, cqn from 1, qpn from 0x100, and checks the objects they name', async () => {
    const { sim, cmdif } = bench();
    await sim.run(async () => {
      const { eqn } = await cmdif.exec({ op: 'CREATE_EQ', size: 64, bufAddr: 0x1000, eventMask: 1 << 0x0c });
      const { cqn } = await cmdif.exec({ op: 'CREATE_CQ', size: 256, eqn });
      const { pd } = await cmdif.exec({ op: 'ALLOC_PD' });
      const { qpn } = await cmdif.exec({ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 64, rqSize: 64, maxSendSge: 4, maxRecvSge: 4 });
      expect([eqn, cqn, qpn]).toEqual([0, 1, 0x100]);
      expect(cmdif.getEq(eqn)).toEqual({ eqn: 0, size: 64, bufAddr: 0x1000, eventMask: 1 << 0x0c });
      expect(cmdif.getCq(cqn)).toEqual({ cqn: 1, size: 256, eqn: 0, bufAddr: 0, dbrAddr: 0, pages: { pas: [], pageBytes: 4096, base: 0 } });
      expect(cmdif.getQp(qpn)).toMatchObject({ qpn: 0x100, transport: 'RC', pd, sendCqn: cqn, sqSize: 64, state: 'RESET' });
      const second = await cmdif.exec({ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 1, rqSize: 0 });
      expect(second.qpn).toBe(0x101);
      const fails: [Cmd, string, RegExp][] = [
        [{ op: 'CREATE_CQ', size: 256, eqn: 5 }, 'BAD_RESOURCE', /eqn 0x5 does not exist/],
        [{ op: 'CREATE_CQ', size: 100, eqn }, 'BAD_PARAM', /cq_size 100 is not a power of two/],
        [{ op: 'CREATE_CQ', size: 2 ** 23, eqn }, 'EXCEED_LIM', /cq_size 8388608 exceeds the device limit 4194304/],
        [{ op: 'CREATE_QP', pd: 5, sendCqn: cqn, recvCqn: cqn, sqSize: 64, rqSize: 64 }, 'BAD_RESOURCE', /pd 0x5 is not allocated/],
        [{ op: 'CREATE_QP', pd, sendCqn: 9, recvCqn: cqn, sqSize: 64, rqSize: 64 }, 'BAD_RESOURCE', /send_cqn 0x9 does not exist/],
        [{ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 65536, rqSize: 64 }, 'EXCEED_LIM', /sq_size 65536 exceeds the device limit 32768/],
        [{ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 64, rqSize: 64, maxSendSge: 31 }, 'EXCEED_LIM', /exceed max_sge 30/],
      ];
      for (const [cmd, status, msg] of fails) {
        const e = await rejection(cmdif.exec(cmd as CmdOf<'CREATE_QP'>));
        expect(e.statusName, msg.source).toBe(status);
        expect(e.message).toMatch(msg);
      }
    });
  });

  it('DESTROY_EQ (0x302): an EQ a CQ names is RESOURCE_BUSY, an unknown one BAD_RESOURCE; destroyed, the EQ and its ICM context are forgotten and its number reused', async () => {
    const { sim, hca, cmdif } = bench();
    await sim.run(async () => {
      const { eqn } = await cmdif.exec({ op: 'CREATE_EQ', size: 64 });
      const { cqn } = await cmdif.exec({ op: 'CREATE_CQ', size: 64, eqn });
      const busy = await rejection(cmdif.exec({ op: 'DESTROY_EQ', eqn }));
      expect([busy.statusName, busy.opcode, busy.rule]).toEqual(['RESOURCE_BUSY', 0x302, 'eq_in_use']);
      expect(busy.message).toMatch(/eqn 0x0 is used by cqn 0x1/);
      expect((await rejection(cmdif.exec({ op: 'DESTROY_EQ', eqn: 7 }))).rule).toBe('eq_not_found');
      await cmdif.exec({ op: 'DESTROY_CQ', cqn });
      const listened: string[] = [];
      cmdif.destroyListeners.push((what, n) => listened.push(`${what} ${n}`));
      const ctxPages = hca.icm.pagesInUse;
      await cmdif.exec({ op: 'DESTROY_EQ', eqn });
      expect(listened).toEqual(['EQ 0']);
      expect(cmdif.getEq(eqn)).toBeUndefined();
      expect(cmdif.resourcesInUse().eqs).toBe(0);
      expect(hca.icm.pagesInUse).toBeLessThan(ctxPages); // the EQ context's page
      expect((await cmdif.exec({ op: 'CREATE_EQ', size: 64 })).eqn).toBe(eqn);
    });
  });

  it('DESTROY_QP (0x501), DESTROY_CQ (0x401), DEALLOC_PD (0x801): a CQ or PD a QP names is RESOURCE_BUSY; destroyed objects are forgotten; PD and CQ numbers are reused at once, QP numbers after the whole range', async () => {
    const { sim, cmdif } = bench();
    await sim.run(async () => {
      const { eqn, cqn, pd, qpn } = await qpOnNewObjects(cmdif);
      const t0 = sim.now;
      const busyCq = await rejection(cmdif.exec({ op: 'DESTROY_CQ', cqn }));
      expect([busyCq.statusName, busyCq.opcode]).toEqual(['RESOURCE_BUSY', 0x401]);
      expect(busyCq.message).toMatch(/cqn 0x1 is used by qpn 0x100/);
      const busyPd = await rejection(cmdif.exec({ op: 'DEALLOC_PD', pd }));
      expect([busyPd.statusName, busyPd.opcode]).toEqual(['RESOURCE_BUSY', 0x801]);
      expect(sim.now - t0).toBe(2 * COMMAND_PS); // the same firmware latency as every non-CREATE_MKEY command
      const listened: string[] = [];
      cmdif.destroyListeners.push((what, n) => listened.push(`${what} ${n}`));
      await cmdif.exec({ op: 'DESTROY_QP', qpn });
      expect(cmdif.getQp(qpn)).toBeUndefined();
      expect((await rejection(cmdif.exec({ op: 'DESTROY_QP', qpn }))).message).toMatch(/qpn 0x100 does not exist/);
      await cmdif.exec({ op: 'DESTROY_CQ', cqn });
      expect(cmdif.getCq(cqn)).toBeUndefined();
      await cmdif.exec({ op: 'DEALLOC_PD', pd });
      expect(cmdif.hasPd(pd)).toBe(false);
      expect((await rejection(cmdif.exec({ op: 'DEALLOC_PD', pd }))).statusName).toBe('BAD_RESOURCE');
      expect(listened).toEqual(['QP 256', 'CQ 1']);
      // PD and CQ numbers: the lowest free one again; QP numbers move on
      const again = await cmdif.exec({ op: 'ALLOC_PD' });
      const cq2 = await cmdif.exec({ op: 'CREATE_CQ', size: 64, eqn });
      const qp2 = await cmdif.exec({ op: 'CREATE_QP', pd: again.pd, sendCqn: cq2.cqn, recvCqn: cq2.cqn, sqSize: 64, rqSize: 64 });
      expect([again.pd, cq2.cqn]).toEqual([pd, cqn]);
      expect(qp2.qpn).toBe(qpn + 1); // a window still bound to the old QP does not match the new one (numbers come round again only after the whole range)
    });
    // failed commands count too
    expect(sim.stats()['tb.hca0.cmdif']).toMatchObject({ cmd_DESTROY_QP: 2, cmd_DESTROY_CQ: 2, cmd_DEALLOC_PD: 3 });
  });

  it('moves a QP RESET -> INIT -> RTR -> RTS -> ERR; any other transition fails with BAD_RES_STATE and changes nothing', async () => {
    const { sim, cmdif } = bench();
    await sim.run(async () => {
      const { cqn, pd, qpn } = await qpOnNewObjects(cmdif);
      const state = (): string | undefined => cmdif.getQp(qpn)?.state;
      const badState = async (cmd: Cmd, from: string): Promise<void> => {
        const e = await rejection(cmdif.exec(cmd as CmdOf<'2ERR_QP'>));
        expect(e.status).toBe(0x9);
        expect(e.statusName).toBe('BAD_RES_STATE');
        expect(e.message).toContain(`qpn 0x100 is in ${from}; ${cmd.op} needs`);
        expect(state()).toBe(from);
      };
      await badState({ op: 'INIT2RTR_QP', qpn }, 'RESET');
      await badState({ op: 'RTR2RTS_QP', qpn }, 'RESET');
      expect(await cmdif.exec({ op: 'RST2INIT_QP', qpn, accessFlags: 2 | 4 })).toEqual({ state: 'INIT' });
      await badState({ op: 'RST2INIT_QP', qpn }, 'INIT');
      // a bad attribute fails the command and leaves the QP where it was
      const mtu = await rejection(cmdif.exec({ op: 'INIT2RTR_QP', qpn, mtu: 1000 as 1024 }));
      expect(mtu.statusName).toBe('BAD_PARAM');
      expect(state()).toBe('INIT');
      expect(await cmdif.exec({ op: 'INIT2RTR_QP', qpn, remoteQpn: 0x123, mtu: 1024, rqPsn: 7 })).toEqual({ state: 'RTR' });
      await badState({ op: 'RST2INIT_QP', qpn }, 'RTR');
      expect(await cmdif.exec({ op: 'RTR2RTS_QP', qpn, sqPsn: 9, timeout: 10, retryCnt: 3 })).toEqual({ state: 'RTS' });
      await badState({ op: 'RTR2RTS_QP', qpn }, 'RTS');
      expect(cmdif.getQp(qpn)).toMatchObject({ accessFlags: 6, remoteQpn: 0x123, mtu: 1024, rqPsn: 7, sqPsn: 9, timeout: 10, retryCnt: 3 });
      expect(await cmdif.exec({ op: '2ERR_QP', qpn })).toEqual({ state: 'ERR' });
      await badState({ op: 'RTR2RTS_QP', qpn }, 'ERR');
      await badState({ op: 'RST2INIT_QP', qpn }, 'ERR');
      expect(await cmdif.exec({ op: '2ERR_QP', qpn })).toEqual({ state: 'ERR' }); // ERR -> ERR is allowed (mlx5 optab)
      // 2ERR from RESET too
      const other = await cmdif.exec({ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 64, rqSize: 64 });
      expect(await cmdif.exec({ op: '2ERR_QP', qpn: other.qpn })).toEqual({ state: 'ERR' });
      const none = await rejection(cmdif.exec({ op: 'RST2INIT_QP', qpn: 0x999 }));
      expect(none.statusName).toBe('BAD_RESOURCE');
      expect(none.message).toMatch(/RST2INIT_QP\(0x502\).*qpn 0x999 does not exist/);
    });
  });

  it('a refused modify changes no field of the QP: every attribute is checked before any is set', async () => {
    const { sim, cmdif } = bench();
    await sim.run(async () => {
      const { qpn } = await qpOnNewObjects(cmdif);
      const snapshot = (): object => ({ ...cmdif.getQp(qpn)! });
      /** The command fails with BAD_PARAM naming `rule`, and the QP is the same in every field. */
      const refused = async (cmd: Cmd, rule: string): Promise<void> => {
        const before = snapshot();
        const e = await rejection(cmdif.exec(cmd as CmdOf<'2ERR_QP'>));
        expect([e.statusName, e.rule]).toEqual(['BAD_PARAM', rule]);
        expect(snapshot()).toEqual(before);
      };
      await refused({ op: 'RST2INIT_QP', qpn, accessFlags: 6, pkeyIndex: 3, port: 2 }, 'port');
      await refused({ op: 'RST2INIT_QP', qpn, accessFlags: 6, pkeyIndex: 2 ** 16 }, 'pkey_index_range');
      expect(await cmdif.exec({ op: 'RST2INIT_QP', qpn, accessFlags: 6 })).toEqual({ state: 'INIT' });
      // every INIT2RTR attribute but the bad one is valid and differs from the QP's value
      const good = { op: 'INIT2RTR_QP', qpn, mtu: 2048, remoteQpn: 0x321, rqPsn: 0x55, remoteHca: 1 } as const;
      await refused({ ...good, remoteHca: 256 }, 'remote_hca_range'); // validated last: rq_psn and remote_qpn were set before
      await refused({ ...good, rqPsn: 2 ** 24 }, 'rq_psn_range');
      await refused({ ...good, remoteQpn: 2 ** 24 }, 'remote_qpn_range');
      await refused({ ...good, mtu: 1000 as 1024 }, 'mtu');
      expect(await cmdif.exec(good)).toEqual({ state: 'RTR' });
      expect(cmdif.getQp(qpn)).toMatchObject({ mtu: 2048, remoteQpn: 0x321, rqPsn: 0x55, remoteHca: 1 });
      const rts = { op: 'RTR2RTS_QP', qpn, sqPsn: 0x66, timeout: 20, retryCnt: 5, rnrRetry: 3 } as const;
      await refused({ ...rts, rnrRetry: 8 }, 'rnr_retry_range');
      await refused({ ...rts, retryCnt: 8 }, 'retry_cnt_range');
      await refused({ ...rts, timeout: 32 }, 'timeout_range');
      await refused({ ...rts, sqPsn: 2 ** 24 }, 'sq_psn_range');
      expect(await cmdif.exec(rts)).toEqual({ state: 'RTS' });
    });
  });

  it('PAGE_FAULT_RESUME records the resume and calls the hook at the end of its latency', async () => {
    const calls: [number, number, number][] = [];
    const b = bench({}, {});
    const { sim, cmdif } = b;
    cmdif.onPageFaultResume = (qpn, flags) => calls.push([qpn, flags, sim.now]);
    await sim.run(async () => {
      const { qpn } = await qpOnNewObjects(cmdif);
      const t0 = sim.now;
      const flags = PageFaultFlag.REQUESTOR | PageFaultFlag.WRITE;
      await cmdif.exec({ op: 'PAGE_FAULT_RESUME', flagsQpn: ((flags << 24) | qpn) >>> 0 });
      expect(calls).toEqual([[qpn, flags, t0 + COMMAND_PS]]);
      expect(cmdif.getQp(qpn)).toMatchObject({ pageFaultResumes: 1, lastResumeFlags: flags });
      const err = await rejection(cmdif.exec({ op: 'PAGE_FAULT_RESUME', flagsQpn: ((PageFaultFlag.ERROR << 24) | 0x777) >>> 0 }));
      expect(err.statusName).toBe('BAD_RESOURCE');
      const badFlags = await rejection(cmdif.exec({ op: 'PAGE_FAULT_RESUME', flagsQpn: ((0x40 << 24) | qpn) >>> 0 }));
      expect(badFlags.statusName).toBe('BAD_PARAM');
      expect(calls.length).toBe(1);
    });
  });

  it('rejects commands it does not model with BAD_OP; QUERY_SPECIAL_CONTEXTS gives resd_lkey and the null mkey', async () => {
    const { sim, cmdif } = bench();
    await sim.run(async () => {
      expect(await cmdif.exec({ op: 'QUERY_SPECIAL_CONTEXTS' })).toEqual({ resdLkey: 0x100, nullMkey: 0 });
      const unknown = await rejection(cmdif.exec({ op: 'FROB' } as unknown as CmdOf<'ALLOC_PD'>));
      expect(unknown.statusName).toBe('BAD_OP');
      expect(unknown.message).toMatch(/unknown command 'FROB'/);
      expect(sim.now).toBe(2 * COMMAND_PS);
      // the background lane answers the same, never a TypeError (found by a review)
      const none = await rejection(cmdif.execBackground(null as unknown as CmdOf<'ALLOC_PD'>));
      expect(none.statusName).toBe('BAD_OP');
      const frob = await rejection(cmdif.execBackground({ op: 'FROB' } as unknown as CmdOf<'ALLOC_PD'>));
      expect(frob.statusName).toBe('BAD_OP');
    });
  });
});

describe('QUERY_HCA_CAP', () => {
  it('reports the general caps (max and cur) and the ODP caps', async () => {
    const { sim, cmdif } = bench({ klmMaxIndirection: 3 });
    await sim.run(async () => {
      const gen = await cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.GENERAL_MAX });
      expect(gen.group).toBe('general');
      if (gen.group !== 'general') return;
      expect(gen.caps).toMatchObject({
        logMaxMkey: 24,
        logMaxKlmListSize: 16,
        maxFastRegPageListLen: 2 ** 16,
        logMaxXlt: 24, // model_log_max_xlt: CREATE_MKEY's xlt capacity bound (EXCEED_LIM past it)
        maxXltEntries: 2 ** 24,
        maxMr: 2 ** 24 - 2, // every index but the two reserved ones
        maxMw: 2 ** 24 - 2,
        maxIndirection: 3,
        umr: true,
        memWindowType1: true,
        memWindowType2A: false,
        memWindowType2B: true,
        sgGaps: true,
        pg: true,
        maxQp: 131072,
        maxQpWr: 32768,
        maxCqe: 4194303,
        maxSge: 30,
      });
      const odp = await cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.ODP_CUR });
      if (odp.group !== 'odp') throw new Error('ODP caps expected');
      expect([...odp.caps.generalCaps]).toEqual(['SUPPORT', 'IMPLICIT']);
      expect([...odp.caps.rcOdpCaps].sort()).toEqual(['ATOMIC', 'READ', 'RECV', 'SEND', 'SRQ_RECV', 'WRITE']);
      expect([...odp.caps.ucOdpCaps]).toEqual([]);
      expect([...odp.caps.udOdpCaps]).toEqual(['SEND']);
      const bad = await rejection(cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: 2 }));
      expect(bad.statusName).toBe('BAD_PARAM');
      expect(bad.message).toMatch(/^QUERY_HCA_CAP\(0x100\) op_mod\(0x2\) failed, status BAD_PARAM\(0x3\)/);
    });
    const attr = deviceAttrOf(cmdif.caps.general.cur, cmdif.caps.odp.cur);
    expect([...attr.deviceCapFlags].sort()).toEqual(['MEM_MGT_EXTENSIONS', 'MEM_WINDOW', 'MEM_WINDOW_TYPE_2B', 'ON_DEMAND_PAGING', 'SG_GAPS_REG']);
    expect(attr.maxFastRegPageListLen).toBe(65536);
  });

  it('with ODP turned off, cur reports no ODP while max still does; implicit ODP unless turned off', async () => {
    const { sim, cmdif } = bench({}, { caps: { odp: false } });
    await sim.run(async () => {
      const cur = await cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.ODP_CUR });
      const max = await cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.ODP_MAX });
      const gcur = await cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.GENERAL_CUR });
      if (cur.group !== 'odp' || max.group !== 'odp' || gcur.group !== 'general') throw new Error('wrong groups');
      expect(cur.caps.generalCaps.size + cur.caps.rcOdpCaps.size + cur.caps.udOdpCaps.size).toBe(0);
      expect(max.caps.generalCaps.has('SUPPORT')).toBe(true);
      expect(gcur.caps.pg).toBe(false);
    });
    expect(deviceAttrOf(cmdif.caps.general.cur, cmdif.caps.odp.cur).deviceCapFlags.has('ON_DEMAND_PAGING')).toBe(false);
    expect([...hcaCaps({ klmMaxIndirection: 4 }, { odpImplicit: false }).odp.cur.generalCaps]).toEqual(['SUPPORT']);
  });

  it('encodes the legacy ODP caps word: SEND 31, RECV 30, WRITE 29, READ 28 (+ ATOMIC 27, SRQ_RECV 26)', () => {
    expect(encodeOdpTransportCaps(['SEND'])).toBe(0x8000_0000);
    expect(encodeOdpTransportCaps(['SEND', 'RECV', 'WRITE', 'READ'])).toBe(0xf000_0000);
    expect(encodeOdpTransportCaps(['ATOMIC'])).toBe(0x0800_0000);
    expect(encodeOdpTransportCaps(['SRQ_RECV'])).toBe(0x0400_0000);
    expect([...decodeOdpTransportCaps(0x2000_0001)]).toEqual(['WRITE']); // reserved bits ignored
    const all: OdpTransportCap[] = ['SEND', 'RECV', 'WRITE', 'READ', 'ATOMIC', 'SRQ_RECV'];
    for (let m = 0; m < 64; m++) {
      const caps = all.filter((_, i) => (m >> i) & 1);
      expect([...decodeOdpTransportCaps(encodeOdpTransportCaps(caps))]).toEqual(caps);
    }
    const caps = hcaCaps({ klmMaxIndirection: 4 }).odp.max;
    const buf = new DataView(new ArrayBuffer(ODP_CAPS_BLOCK_SIZE + 8));
    buf.setUint8(4, 0xee);
    encodeOdpCapsBlock(buf, 4, caps);
    expect(buf.getUint8(4)).toBe(0);
    expect(buf.getUint32(4 + 0x10)).toBe(0xfc00_0000); // rc: all six
    expect(buf.getUint32(4 + 0x14)).toBe(0); // uc: none
    expect(buf.getUint32(4 + 0x18)).toBe(0x8000_0000); // ud: SEND
    // the legacy block has no general caps: SUPPORT comes from `pg`, IMPLICIT is not in it
    expect(decodeOdpCapsBlock(buf, 4, true)).toEqual({ ...caps, generalCaps: new Set(['SUPPORT']) });
  });
});
