/**
 * ATU benchmark: translations per wall-clock second through the cycle model, driven by a
 * clocked load generator (no software process on the hot path), for warm and cold MTT and KLM
 * mkeys, tracing off and on. Prints one JSON line per case.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Module, Sim, Tracer, type Fifo } from '../src/sim/index.ts';
import { Hca } from '../src/rtl/hca.ts';
import { resolveConfig } from '../src/rtl/config.ts';
import { writeMkey } from '../src/rtl/firmware/icm_writer.ts';
import { MkcAccessMode } from '../src/rtl/formats/constants.ts';
import type { AtuRequest, AtuResponse } from '../src/rtl/translation/atu_types.ts';

/** Keeps the ATU busy: issues a request whenever the port takes one, counts responses. */
class Load extends Module {
  issued = 0;
  done = 0;
  errors = 0;
  constructor(sim: Sim, private readonly req: Fifo<AtuRequest>, private readonly resp: Fifo<AtuResponse>, private readonly total: number, private readonly next: (i: number) => AtuRequest) {
    super(sim, sim.top, 'load');
    resp.consumer = this;
    req.producer = this;
  }
  override tick(): void {
    while (this.resp.canPop()) {
      if (this.resp.pop().result.kind !== 'ok') this.errors++;
      this.done++;
    }
    if (this.issued < this.total && this.req.canPush()) this.req.push(this.next(this.issued++));
    if (this.issued >= this.total && this.done >= this.total) this.sleep();
  }
}

const PAGE = 4096;
const MR_PAGES = 16;

function setup(kind: string, vcd?: string): { sim: Sim; hca: Hca; load: Load; tracer: Tracer | null; n: number } {
  const sim = new Sim({ seed: 1 });
  const hca = new Hca(sim, sim.top, 'hca0', resolveConfig({}));
  const port = hca.atu.port('load', 16);
  const cold = kind.startsWith('cold');
  const klm = kind.endsWith('klm');
  // cold: far more mkeys than the mkey cache holds, each touched once in turn
  const nKeys = cold ? 4 * hca.cfg.mkeyCacheEntries : 1;
  const base = 0x100;
  for (let i = 0; i < nKeys; i++) {
    const mtt = Array.from({ length: MR_PAGES }, (_, p) => 0x10_0000_0000 + (i * MR_PAGES + p) * 2 * PAGE + 3);
    writeMkey(hca, {
      index: base + i, tag: 1, free: false, accessMode: MkcAccessMode.MTT, access: 15, umrEn: true, remoteInval: false,
      pd: 1, qpn: 0xffffff, start: 0x10000, length: MR_PAGES * PAGE, len64: false, logPageSize: 12, pgAccess: false, mtt,
    });
    if (klm) {
      writeMkey(hca, {
        index: base + nKeys + i, tag: 2, free: false, accessMode: MkcAccessMode.KLMS, access: 15, umrEn: true, remoteInval: false,
        pd: 1, qpn: 0xffffff, start: 0, length: MR_PAGES * PAGE, len64: false, logPageSize: 12, pgAccess: false,
        klm: [
          { bcount: (MR_PAGES / 2) * PAGE, key: ((base + i) << 8) | 1, va: 0x10000 },
          { bcount: (MR_PAGES / 2) * PAGE, key: ((base + i) << 8) | 1, va: 0x10000 + (MR_PAGES / 2) * PAGE },
        ],
      });
    }
  }
  const n = cold ? 20_000 : 1_000_000;
  const next = (i: number): AtuRequest => {
    const k = cold ? i % nKeys : 0;
    // 64-byte accesses stepping through the region with a page-crossing stride (no modulo on the hot path)
    const off = (i * 4160) & (MR_PAGES * PAGE - 1) & ~63;
    return klm
      ? { key: ((base + nKeys + k) << 8) | 2, va: off, length: 64, access: 4, pd: 1, qpn: 1, tag: i }
      : { key: ((base + k) << 8) | 1, va: 0x10000 + off, length: 64, access: 4, pd: 1, qpn: 1, tag: i };
  };
  const load = new Load(sim, port.req, port.resp, n, next).clockedBy(hca.coreClock, true);
  const tracer = vcd ? new Tracer(sim, { vcd, gtkw: false }) : null;
  return { sim, hca, load, tracer, n };
}

/** One case, untraced: for profiling (`tsx bench/atu.ts warm-mtt`). */
export function runAtuCase(c: string): number {
  const { sim, load, n } = setup(c);
  const t0 = process.hrtime.bigint();
  sim.runUntil(Infinity);
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  if (load.done !== n) throw new Error('incomplete');
  return n / s;
}

export function benchAtu(): void {
  const dir = mkdtempSync(join(tmpdir(), 'mlx5sim-atu-'));
  try {
    for (const tracing of [false, true]) {
      for (const c of ['warm-mtt', 'cold-mtt', 'warm-klm', 'cold-klm']) {
        const { sim, load, tracer, n, hca } = setup(c, tracing ? join(dir, `${c}.vcd`) : undefined);
        const t0 = process.hrtime.bigint();
        sim.runUntil(Infinity);
        const s = Number(process.hrtime.bigint() - t0) / 1e9;
        tracer?.close();
        if (load.done !== n || load.errors !== 0) throw new Error(`${c}: ${load.done}/${n} done, ${load.errors} errors`);
        const st = sim.stats();
        console.log(
          JSON.stringify({
            bench: 'atu',
            case: c,
            tracing,
            translations: n,
            translationsPerSec: Math.round(n / s),
            simulatedNsPerTranslation: +(sim.now / n / 1000).toFixed(2),
            mkeyHitRate: +((st['tb.hca0.mkey_cache'].hits as number) / (st['tb.hca0.mkey_cache'].lookups as number)).toFixed(3),
            ...(tracer ? { vcdBytes: tracer.bytes } : {}),
          }),
        );
        void hca;
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
