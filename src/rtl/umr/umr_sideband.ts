/**
 * What a registration carries in IB verbs that mlx5's UMR WQE has no field for, passed beside the
 * WQE instead of in it, so every byte the driver writes is one mlx5 defines (the mkey segment is
 * kernel struct mlx5_mkey_seg, include/linux/mlx5/device.h; its reserved bytes stay zero). The
 * driver writes it through a model-private register of the UAR page (Hca.uar.umrExtras) just
 * before it rings the send queue's doorbell, so it is there when the UMR runs (the write takes
 * no simulated time: no figure to give it, and it changes no timing of the real path).
 *
 * - `mwBind`: IB_ACCESS_MW_BIND, which mlx5 never writes to the device (Linux 6.12
 *   drivers/infiniband/hw/mlx5/wr.c:180 get_umr_flags keeps only the A/RW/RR/LW bits); the
 *   model enforces C10-73 in hardware.
 * - `fbo`: the first byte offset of a zero-based MTT registration whose first byte is not page
 *   aligned (the IB spec's Fast Register FBO). mlx5 has none (uverbs refuses such an MR:
 *   drivers/infiniband/core/uverbs_cmd.c:710 `(cmd.start & ~PAGE_MASK) != (cmd.hca_va &
 *   ~PAGE_MASK)` is EINVAL); the model's semantics allow it, so the UMR engine keeps it in ICM.
 *
 * Zero-based needs nothing here: as in mlx5, a zero-based MR is one whose start_addr (the iova)
 * is 0, and the UMR engine takes it from the mkey segment (wr.c:206 set_reg_mkey_seg
 * `seg->start_addr = cpu_to_be64(mr->ibmr.iova)`; umr.c:611 the same for a cache mkey;
 * mr.c:87 set_mkc_access_pd_addr_fields for CREATE_MKEY; rdma-core's ibv_reg_mr(3): "Specifying
 * 0 for hca_va has the same effect as IBV_ACCESS_ZERO_BASED").
 *
 * Keyed by the WQE's place (QP number and wqe_index): the UMR engine takes the entry of the WQE it
 * executes, so a later WQE in the same slot cannot see an earlier one's extras. A WQE with no
 * entry (any UMR the driver did not write for a registration) has none of them.
 */

/** The verbs-only attributes of one REG_MR-like UMR. */
export interface UmrRegExtras {
  mwBind: boolean;
  fbo: number;
}

/** The extras of a UMR the driver recorded nothing for. */
export const NO_REG_EXTRAS: Readonly<UmrRegExtras> = Object.freeze({ mwBind: false, fbo: 0 });

/** wqe_index is 16 bits (ctrl segment); qpn 24 bits, so the key stays below 2^40. */
const WQE_INDEX_SPAN = 0x10000;

/** Per-HCA table of the extras of posted, not yet executed, UMR WQEs. */
export class UmrSideband {
  private readonly byWqe = new Map<number, UmrRegExtras>();

  /** Records the extras of QP `qpn`'s WQE `wqeIndex` (replacing what an earlier WQE in that slot left). */
  set(qpn: number, wqeIndex: number, x: UmrRegExtras): void {
    this.byWqe.set(qpn * WQE_INDEX_SPAN + (wqeIndex & 0xffff), { mwBind: x.mwBind, fbo: x.fbo });
  }

  /** Takes (and forgets) the extras of QP `qpn`'s WQE `wqeIndex`; NO_REG_EXTRAS when none were recorded. */
  take(qpn: number, wqeIndex: number): Readonly<UmrRegExtras> {
    const k = qpn * WQE_INDEX_SPAN + (wqeIndex & 0xffff);
    const x = this.byWqe.get(k);
    if (x === undefined) return NO_REG_EXTRAS;
    this.byWqe.delete(k);
    return x;
  }
}
