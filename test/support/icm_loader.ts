/**
 * Writes a reference-model mkey table into an HCA's ICM through the firmware functions (the
 * effect of CREATE_MKEY), so the cycle model and the model start from the same table.
 */
import type { Hca } from '../../src/rtl/hca.ts';
import type { ModelMkey } from '../../src/model/index.ts';
import { writeMkey } from '../../src/rtl/firmware/icm_writer.ts';
import { MkcAccessMode } from '../../src/rtl/formats/constants.ts';

const MODE = { PA: MkcAccessMode.PA, MTT: MkcAccessMode.MTT, KLMS: MkcAccessMode.KLMS } as const;

/** Loads every mkey of `table` into `hca`'s ICM. */
export function loadMkeys(hca: Hca, table: readonly ModelMkey[]): void {
  for (const m of table) {
    writeMkey(hca, {
      index: m.index,
      tag: m.tag,
      free: m.free,
      accessMode: MODE[m.accessMode],
      access: m.access,
      umrEn: true,
      remoteInval: false,
      pd: m.pd,
      qpn: m.qpn,
      start: m.start,
      length: m.length,
      len64: m.len64,
      logPageSize: m.logPageSize,
      pgAccess: m.pgAccess,
      mtt: m.accessMode === 'MTT' ? m.mtt.map((e) => e.addr + (e.read ? 1 : 0) + (e.write ? 2 : 0)) : undefined,
      klm: m.accessMode === 'KLMS' ? m.klm.map((k) => ({ bcount: k.bcount, key: k.key >>> 0, va: k.va })) : undefined,
    });
  }
}
