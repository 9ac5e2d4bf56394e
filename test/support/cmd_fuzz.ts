/**
 * The command fuzzer (issue 12), shared by test/rtl/firmware/cmd_fuzz.test.ts and
 * `npm run bench -- fuzz`: random firmware commands (every modelled opcode, unknown ones, and no
 * command at all) with fields that are well-formed or wild (past their widths, negative,
 * fractional, NaN, strings, null, lists, objects), posted to the command interface. Every
 * command must resolve or fail with a CmdError carrying a command status and the rule it broke,
 * never another exception, and the adapter must still move data afterwards.
 */
import fc from 'fast-check';
import { Access, Testbed } from '../../src/index.ts';
import { CmdError, CmdStatus } from '../../src/rtl/firmware/cmdif.ts';
import { CmdOpcode } from '../../src/rtl/formats/constants.ts';
import { rcPair } from './rc_pair.ts';

/** One command: its name and the fields of its mailbox. */
export interface FuzzCmd {
  op: string;
  fields: Record<string, unknown>;
}

const OPS = [...Object.keys(CmdOpcode), 'NOT_A_COMMAND', '', 'constructor', '__proto__'];
const FIELDS = [
  'opMod', 'pd', 'tag', 'accessMode', 'access', 'start', 'length', 'free', 'umrEn', 'remoteInval', 'qpn', 'len64', 'logPageSize', 'pgAccess',
  'mtt', 'klm', 'xltCapacity', 'mwBind', 'kind', 'zeroBased', 'fbo', 'index', 'flagsQpn', 'size', 'bufAddr', 'eventMask', 'eqn', 'dbrAddr',
  'cqn', 'sendCqn', 'recvCqn', 'sqSize', 'rqSize', 'transport', 'maxSendSge', 'maxRecvSge', 'sqBufAddr', 'rqBufAddr', 'pas', 'fre',
  'accessFlags', 'port', 'pkeyIndex', 'remoteQpn', 'remoteHca', 'mtu', 'rqPsn', 'sqPsn', 'timeout', 'retryCnt', 'rnrRetry', 'maxRdAtomic',
];

/** A field's value: small and in range, at the edges of widths, or not a number at all. */
const wild: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 8 }), weight: 4 },
  { arbitrary: fc.constantFrom(0, 1, 12, 64, 256, 4096, 0x100, 0xff, 0xffff, 0xffffff, 2 ** 24, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 1, 2 ** 53, 2 ** 64, -1, -0, 0.5, NaN, Infinity, -Infinity), weight: 3 },
  { arbitrary: fc.constantFrom('RC', 'UD', 'XX', '', '7', 'x'), weight: 1 },
  { arbitrary: fc.constantFrom(null, undefined, true, false, 1n, {}, [], [null], [1, 2, 3], ['a'], [{ bcount: 1, key: 2, va: 3 }], [{}], [0x10000, 0x20000]), weight: 2 },
  { arbitrary: fc.array(fc.oneof(fc.integer({ min: 0, max: 2 ** 20 }).map((v) => v * 4096), fc.constant(NaN), fc.constant(-1)), { maxLength: 4 }), weight: 1 },
);

/** A well-formed command of each opcode over the objects that exist (pd 1, eqn 0, cqn 1, qpn 0x100), to go deep before a field goes wrong. */
const BASE: Record<string, Record<string, unknown>> = {
  QUERY_HCA_CAP: { opMod: 1 },
  CREATE_MKEY: { tag: 1, accessMode: 1, access: 1, pd: 1, start: 0x1000, length: 4096, mtt: [0x10003], umrEn: true },
  QUERY_MKEY: { index: 2 },
  DESTROY_MKEY: { index: 2 },
  PAGE_FAULT_RESUME: { flagsQpn: 0x100 },
  CREATE_EQ: { size: 8, bufAddr: 0x10000, eventMask: 1 },
  CREATE_CQ: { size: 8, eqn: 0, pas: [0x10000] },
  DESTROY_CQ: { cqn: 1 },
  CREATE_QP: { pd: 1, sendCqn: 1, recvCqn: 1, sqSize: 8, rqSize: 8, pas: [0x10000, 0x11000], fre: false },
  DESTROY_QP: { qpn: 0x100 },
  QUERY_QP: { qpn: 0x100 },
  RST2INIT_QP: { qpn: 0x100, accessFlags: 6 },
  INIT2RTR_QP: { qpn: 0x100, remoteQpn: 0x101, mtu: 1024 },
  RTR2RTS_QP: { qpn: 0x100, maxRdAtomic: 4 },
  '2ERR_QP': { qpn: 0x100 },
  DEALLOC_PD: { pd: 1 },
};

export const command: fc.Arbitrary<FuzzCmd> = fc.record({
  op: fc.constantFrom(...OPS),
  fields: fc.dictionary(fc.constantFrom(...FIELDS), wild, { maxKeys: 4 }),
  keepBase: fc.boolean(),
}).map(({ op, fields, keepBase }) => ({ op, fields: keepBase ? { ...(BASE[op] ?? {}), ...fields } : fields }));

/**
 * Runs a sequence of commands on a fresh testbed (after a PD, an EQ, a CQ and a QP exist), then
 * garbage that is no command, then a data transfer: what went wrong ([] when it all held).
 */
export async function runCmdCase(cmds: readonly FuzzCmd[]): Promise<string[]> {
  const bad: string[] = [];
  try {
    const tb = new Testbed({ hcas: 2 });
    await tb.run(async () => {
      const cmdif = tb.hca(0).cmdif;
      // objects to name: a PD, an EQ, a CQ and a QP exist when the commands start
      const { eqn } = await cmdif.exec({ op: 'CREATE_EQ', size: 64 });
      const { pd } = await cmdif.exec({ op: 'ALLOC_PD' });
      const { cqn } = await cmdif.exec({ op: 'CREATE_CQ', size: 64, eqn });
      await cmdif.exec({ op: 'CREATE_QP', pd, sendCqn: cqn, recvCqn: cqn, sqSize: 64, rqSize: 64 });
      for (const c of cmds) {
        try {
          await cmdif.exec({ ...c.fields, op: c.op } as never);
        } catch (e) {
          if (!(e instanceof CmdError)) bad.push(`${c.op} ${JSON.stringify(c.fields, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))}: ${String(e)}`);
          else if (!(Object.values(CmdStatus) as number[]).includes(e.status) || e.status === CmdStatus.OK || e.rule === '') bad.push(`${c.op}: unclear status ${e.message}`);
        }
      }
      // garbage that is not a command at all
      for (const junk of [null, undefined, 42, 'CREATE_QP', {}]) {
        await cmdif.exec(junk as never).then(
          () => bad.push(`${String(junk)} resolved`),
          (e: unknown) => { if (!(e instanceof CmdError)) bad.push(`${String(junk)}: ${String(e)}`); },
        );
      }
      // the adapter still works: a connected pair moves data
      const { pd0, pd1, qp0, cq0 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
      tb.host(0).fill(a.addr, 64, 0x5a);
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 64, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      const [wc] = await cq0.wait(1, { timeout: 1e10 });
      if (wc.status !== 'SUCCESS' || tb.host(1).read(b.addr, 1)[0] !== 0x5a) bad.push(`the adapter no longer works: ${wc.status}`);
    });
  } catch (e) {
    bad.push(`crash: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
  }
  return bad;
}
