/**
 * An ODP test case: an RC pair, a source buffer in an ODP MR on hca0 (cold: its pattern written
 * after registration, so the pages are resident in the process but not mapped for the device;
 * 4 KiB pages, as a huge-page buffer is resident from its allocation and the registration's
 * snapshot would map it), a pinned target on hca1.
 */
import { expect } from 'vitest';
import { Access, type Testbed } from '../../src/index.ts';
import { rcPair } from './rc_pair.ts';

/** `write(id)` posts a signaled RDMA WRITE of the whole buffer and returns its latency in ps. */
export async function writeCase(tb: Testbed, size: number) {
  const p = await rcPair(tb);
  const a = tb.host(0).alloc(size);
  const b = tb.host(1).alloc(size, { hugePages: size >= 2 * 1024 * 1024 });
  const pattern = new Uint8Array(size).map((_, i) => (i * 7 + 3) & 0xff);
  const omr = await p.pd0.regMr(a.addr, size, Access.ON_DEMAND | Access.LOCAL_WRITE);
  tb.host(0).write(a.addr, pattern);
  const mr1 = await p.pd1.regMr(b.addr, size, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  const write = async (id: number): Promise<number> => {
    const t0 = tb.now;
    p.qp0.postSend({ wrId: id, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: size, lkey: omr.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
    const [wc] = await p.cq0.wait(1);
    expect(wc.status).toBe('SUCCESS');
    return tb.now - t0;
  };
  return { p, a, b, omr, pattern, write };
}

