/**
 * An MR whose translations do not fit one UMR is enabled as mlx5r_umr_update_mr_pas does it
 * (Linux 6.12 drivers/infiniband/hw/mlx5/umr.c:671-750): one UMR per MLX5_MAX_UMR_CHUNK = 1 MiB -
 * 64 B of MTT entries (131,064), each at its translation offset, the chunks before the last
 * writing into the still free mkey ("fail if not free", mask 0) and the last enabling it.
 */
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { buildRegMrWqe, buildXltUpdateWqe } from '../../src/driver/wqe_builder.ts';
import { MAX_UMR_CHUNK } from '../../src/driver/umr.ts';
import { decodeUmrCtrlSeg } from '../../src/rtl/formats/umr_ctrl_seg.ts';
import { UmrCtrlFlag } from '../../src/rtl/formats/constants.ts';
import { rcPair } from '../support/rc_pair.ts';

const PAGE = 4096;
const PER_UMR = MAX_UMR_CHUNK / 8; // 131,064 MTT entries

describe('the enabling UMR of a large MR, in chunks', () => {
  it('a chunk before the last carries "fail if not free" and, past the first, TRANSLATION_OFFSET_EN; the last enables at its offset', () => {
    const buf = new Uint8Array(256);
    const v = new DataView(buf.buffer);
    const common = { wqeIndex: 0, qpn: 0x10 };
    buildXltUpdateWqe(v, 0, { ...common, key: 0x1234, xltOffsetOcto: 0, list: new Uint8Array(MAX_UMR_CHUNK), listAddr: 0x10_0000, listLkey: 0x100, enabling: true });
    let c = decodeUmrCtrlSeg(v, 16);
    expect(c.flags).toBe(UmrCtrlFlag.CHECK_FREE); // umr.c:594-599, no offset on the first (umr.c:695)
    expect([c.xltOctowords, c.mkeyMask]).toEqual([MAX_UMR_CHUNK / 16, 0]);
    buildXltUpdateWqe(v, 0, { ...common, key: 0x1234, xltOffsetOcto: MAX_UMR_CHUNK / 16, list: new Uint8Array(MAX_UMR_CHUNK), listAddr: 0x10_0000, listLkey: 0x100, enabling: true });
    c = decodeUmrCtrlSeg(v, 16);
    expect(c.flags).toBe(UmrCtrlFlag.CHECK_FREE | UmrCtrlFlag.TRANSLATION_OFFSET_EN); // umr.c:721
    expect(c.xltOffset).toBe(MAX_UMR_CHUNK / 16);
    buf.fill(0);
    buildRegMrWqe(v, 0, {
      ...common, key: 0x1234, access: { localWrite: true }, iova: 0, length: (2 * PER_UMR + 8) * PAGE,
      translations: { mode: 'MTT', pages: new Array<number>(2 * PER_UMR + 8).fill(0), logPageSize: 12 },
      listAddr: 0x10_0000, listLkey: 0x100, chunk: { xltOffsetOcto: MAX_UMR_CHUNK / 8, listBytes: 64 },
    });
    c = decodeUmrCtrlSeg(v, 16);
    expect(c.flags).toBe(UmrCtrlFlag.CHECK_FREE | UmrCtrlFlag.TRANSLATION_OFFSET_EN);
    expect([c.xltOffset, c.xltOctowords]).toEqual([MAX_UMR_CHUNK / 8, 4]); // past 16 bits: xlt_offset_47_16
    expect(c.mkeyMask).not.toBe(0);
  });

  it(`registers in ceil(n / ${PER_UMR}) UMRs (boundary ${PER_UMR} / ${PER_UMR + 1}, and 300,000 pages) and reads back first, middle and last pages`, async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      // the large MRs on hca1, read from hca0
      const { pd0, pd1, qp0: qp, cq0: cq } = await rcPair(tb);
      const host = tb.host(1);
      const big = host.alloc(300_000 * PAGE);
      const dst = tb.host(0).alloc(PAGE);
      const dmr = await pd0.regMr(dst.addr, PAGE, Access.LOCAL_WRITE);
      const umrJobs = (): [number, number] => {
        const s = tb.stats()['tb.hca1.umr_engine'];
        return [s.jobs_reg_mr as number, s.jobs_xlt_update as number];
      };
      let wr = 0;
      for (const pages of [PER_UMR, PER_UMR + 1, 300_000]) {
        const [reg0, xlt0] = umrJobs();
        const mr = await pd1.regMr(big.addr, pages * PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ);
        const [reg1, xlt1] = umrJobs();
        // the last chunk enables (REG_MR: FREE in its mask), the ones before only write
        expect([reg1 - reg0, xlt1 - xlt0]).toEqual([1, Math.ceil(pages / PER_UMR) - 1]);
        for (const page of [0, Math.floor(pages / 2), pages - 1, ...(pages > PER_UMR ? [PER_UMR - 1, PER_UMR] : [])]) {
          const pattern = new Uint8Array(8);
          new DataView(pattern.buffer).setUint32(0, (page * 2654435761) >>> 0);
          new DataView(pattern.buffer).setUint32(4, pages);
          host.write(big.addr + page * PAGE + 100, pattern);
          qp.postSend({ wrId: ++wr, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 8, lkey: dmr.lkey }], remoteAddr: big.addr + page * PAGE + 100, rkey: mr.rkey, signaled: true });
          expect((await cq.wait(1))[0].status, `page ${page} of ${pages}`).toBe('SUCCESS');
          expect(tb.host(0).read(dst.addr, 8), `page ${page} of ${pages}`).toEqual(pattern);
        }
        await mr.dereg();
      }
      expect(tb.stats()['tb.hca1.umr_engine'].errors as number).toBe(0);
    });
  }, 60_000);
  it(`an ODP MR of ${PER_UMR + 1} pages takes the cache path too: its enabling UMR in two chunks, then reads back at the chunk boundary`, async () => {
    // create_user_odp_mr (mr.c:1471-1528) has no size limit on alloc_cacheable_mr: mlx5_ib_init_odp_mr
    // loads the snapshot with mlx5r_umr_update_mr_pas's chunks as for a pinned MR
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, qp0: qp, cq0: cq } = await rcPair(tb);
      const host = tb.host(1);
      const pages = PER_UMR + 1;
      const big = host.alloc(pages * PAGE);
      const dst = tb.host(0).alloc(PAGE);
      const dmr = await pd0.regMr(dst.addr, PAGE, Access.LOCAL_WRITE);
      const s0 = tb.stats()['tb.hca1.umr_engine'];
      const mr = await pd1.regMr(big.addr, pages * PAGE, Access.LOCAL_WRITE | Access.REMOTE_READ | Access.ON_DEMAND);
      const s1 = tb.stats()['tb.hca1.umr_engine'];
      expect([(s1.jobs_reg_mr as number) - (s0.jobs_reg_mr as number), (s1.jobs_xlt_update as number) - (s0.jobs_xlt_update as number)]).toEqual([1, 1]);
      expect(mr.odp).not.toBeNull();
      let wr = 0;
      for (const page of [0, PER_UMR - 1, PER_UMR]) {
        const pattern = new Uint8Array([page & 0xff, page >> 8, page >> 16, 7, 7, 7, 7, 7]);
        host.write(big.addr + page * PAGE + 8, pattern);
        qp.postSend({ wrId: ++wr, opcode: 'RDMA_READ', sgList: [{ addr: dst.addr, length: 8, lkey: dmr.lkey }], remoteAddr: big.addr + page * PAGE + 8, rkey: mr.rkey, signaled: true });
        expect((await cq.wait(1))[0].status, `page ${page}`).toBe('SUCCESS');
        expect(tb.host(0).read(dst.addr, 8), `page ${page}`).toEqual(pattern);
      }
      expect(tb.stats()['tb.hca1.umr_engine'].errors as number).toBe(0);
      await mr.dereg();
    });
  }, 60_000);
});
