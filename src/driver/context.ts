/**
 * A device context (ibv_context): one adapter seen by the driver. Objects are created through
 * firmware commands (cmdif) and cost their firmware latency in simulated time.
 */
import type { Testbed } from './testbed.ts';
import type { Hca } from '../rtl/hca.ts';
import { HcaCapOpMod } from '../rtl/formats/constants.ts';
import { deviceAttrOf, type DeviceAttr, type HcaGeneralCaps, type HcaOdpCaps } from '../rtl/firmware/hca_caps.ts';
import { VerbsError } from './verbs_error.ts';
import { Pd } from './pd.ts';
import { Cq } from './cq.ts';
import { CmdError } from '../rtl/firmware/cmd_types.ts';
import { MkeyPool } from './mkey_pool.ts';

export class Context {
  /** The driver's rolling 8-bit key tag (mlx5: a per-device counter), shared by MRs and windows. */
  private tag = 0;
  private eqn = -1;
  private attr: DeviceAttr | null = null;
  readonly tb: Testbed;
  /** The driver's MR cache (free mkeys enabled by UMR). */
  readonly pool: MkeyPool;

  constructor(
    tb: Testbed,
    readonly hca: Hca,
    readonly index: number,
  ) {
    this.tb = tb;
    this.pool = new MkeyPool(this);
  }

  /** The next key tag (1, 2, ..., 255, 0, 1, ...). */
  nextTag(): number {
    this.tag = (this.tag + 1) & 0xff;
    return this.tag;
  }

  /** Runs a firmware command, turning its failure into the errno a verbs call reports. */
  async cmd<T>(p: Promise<T>, what: string): Promise<T> {
    try {
      return await p;
    } catch (e) {
      if (e instanceof CmdError) {
        const errno = e.statusName === 'EXCEED_LIM' || e.statusName === 'NO_RESOURCES' ? 'ENOMEM' : 'EINVAL';
        throw new VerbsError(errno, `${what}: ${e.message}`);
      }
      throw e;
    }
  }

  /** ibv_query_device, with the ODP capabilities (QUERY_HCA_CAP general and ODP, current). */
  async queryDevice(): Promise<DeviceAttr> {
    if (this.attr) return this.attr;
    const g = await this.cmd(this.hca.cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.GENERAL_CUR }), 'queryDevice');
    const o = await this.cmd(this.hca.cmdif.exec({ op: 'QUERY_HCA_CAP', opMod: HcaCapOpMod.ODP_CUR }), 'queryDevice');
    this.attr = deviceAttrOf(g.caps as HcaGeneralCaps, o.caps as HcaOdpCaps);
    return this.attr;
  }

  /** The device attributes once queried (the driver queries at open). */
  get deviceAttr(): DeviceAttr {
    if (!this.attr) throw new Error('internal: device attributes not yet queried');
    return this.attr;
  }

  /** ibv_alloc_pd */
  async allocPd(): Promise<Pd> {
    const { pd } = await this.cmd(this.hca.cmdif.exec({ op: 'ALLOC_PD' }), 'allocPd');
    return new Pd(this, pd);
  }

  /** ibv_create_cq: a CQ of at least `cqe` entries (a power of two), its buffer in host memory. */
  async createCq(cqe: number): Promise<Cq> {
    if (!(Number.isInteger(cqe) && cqe >= 1 && cqe <= this.deviceAttr.maxCqe)) {
      throw new VerbsError('EINVAL', `createCq: cqe must be an integer in 1..${this.deviceAttr.maxCqe}, got ${cqe}`);
    }
    if (this.eqn < 0) {
      const { eqn } = await this.cmd(this.hca.cmdif.exec({ op: 'CREATE_EQ', size: 64 }), 'createCq');
      this.eqn = eqn;
    }
    let size = 1;
    while (size < cqe) size *= 2;
    const buf = this.hca.host.alloc(Math.max(4096, size * 64), { hugePages: size * 64 > 4096 });
    // a new CQ buffer is filled with op_own = 0xF0 (opcode INVALID): nothing is owned by software
    for (let i = 0; i < size; i++) this.hca.host.write(buf.addr + i * 64 + 63, new Uint8Array([0xf0]));
    const bufAddr = this.hca.host.dmaAddress(buf.addr);
    const { cqn } = await this.cmd(this.hca.cmdif.exec({ op: 'CREATE_CQ', size, eqn: this.eqn, bufAddr }), 'createCq');
    return new Cq(this, cqn, size, buf.addr);
  }

  /** The 64-byte mkey context of `key` (QUERY_MKEY), for inspection. */
  async queryMkey(key: number): Promise<Uint8Array> {
    const r = await this.cmd(this.hca.cmdif.exec({ op: 'QUERY_MKEY', index: key >>> 8 }), 'queryMkey');
    return r.context;
  }
}
