/**
 * What each configuration field (HcaConfig) means, in the unit its number is in: the table
 * `mlx5sim config` prints. Kept beside config.ts and typed by its fields, so a field added there
 * does not compile until it is described here (and test/rtl/config_fields.test.ts checks the
 * two lists are the same).
 */
import { DEFAULT_HCA_CONFIG, type HcaConfig } from './config.ts';
import { formatPs } from '../sim/time.ts';

/** One field's unit and one line of meaning. */
export interface ConfigFieldDoc {
  /** The unit of the number: `ps`, `MHz`, `entries`, ...; '' for a choice or a flag. */
  unit: string;
  meaning: string;
}

export const CONFIG_FIELDS: { readonly [K in keyof HcaConfig]: ConfigFieldDoc } = {
  coreClockMHz: { unit: 'MHz', meaning: 'core clock of the HCA pipeline' },
  pcieReadBasePs: { unit: 'ps', meaning: 'PCIe DMA read: fixed round trip, before the size term' },
  pcieReadBytesPerPs: { unit: 'bytes/ps', meaning: 'PCIe DMA read completion bandwidth (0.012 = 12 GB/s)' },
  pcieMaxOutstandingReads: { unit: 'reads', meaning: 'PCIe DMA reads in flight at most (tags); more wait' },
  pcieWritePs: { unit: 'ps', meaning: 'PCIe posted write: acceptance to visible in host memory' },
  doorbellPs: { unit: 'ps', meaning: 'doorbell (MMIO write) from the driver to the HCA' },
  mkeyCacheEntries: { unit: 'entries', meaning: 'mkey cache entries' },
  mkeyCacheWays: { unit: 'ways', meaning: 'mkey cache associativity; divides mkeyCacheEntries' },
  mkeyCacheHitCycles: { unit: 'cycles', meaning: 'mkey cache hit latency, core cycles' },
  mttCacheLineBytes: { unit: 'bytes', meaning: 'MTT cache line size (only 64: 8 MTTs or 4 KLMs)' },
  mttCacheLines: { unit: 'lines', meaning: 'MTT cache lines' },
  mttCacheWays: { unit: 'ways', meaning: 'MTT cache associativity; divides mttCacheLines' },
  mttCacheHitCycles: { unit: 'cycles', meaning: 'MTT cache hit latency, core cycles' },
  klmEntriesPerRead: { unit: 'entries', meaning: 'KLM entries fetched per host read' },
  klmCyclesPerEntry: { unit: 'cycles', meaning: 'KLM walker cycles per entry scanned' },
  klmMaxIndirection: { unit: 'levels', meaning: 'deepest KLM indirection (nested indirect mkeys) before the walk fails' },
  linkLatencyPs: { unit: 'ps', meaning: 'one-way latency of the link between HCAs (cable + switch)' },
  linkGbps: { unit: 'Gb/s', meaning: 'link bandwidth' },
  mtu: { unit: 'bytes', meaning: 'default path MTU (256, 512, 1024, 2048 or 4096)' },
  fwCreateMkeyPs: { unit: 'ps', meaning: 'firmware latency of CREATE_MKEY' },
  fwCommandPs: { unit: 'ps', meaning: 'firmware latency of every other command' },
  interruptPs: { unit: 'ps', meaning: 'interrupt (EQE written) to handler running' },
  odpFaultFixedPs: { unit: 'ps', meaning: 'ODP fault handling in software: fixed part per fault' },
  odpFaultPerPagePs: { unit: 'ps', meaning: 'ODP fault handling in software: per extra 4 KiB page' },
  odpFaultWorkers: { unit: 'faults', meaning: "page faults the driver handles at once (mlx5's page-fault work queue, max_active 32)" },
  pinPagePs: { unit: 'ps', meaning: 'pinning one 4 KiB host page (reg_mr, get_user_pages)' },
  rnrTimerCode: { unit: 'IB code', meaning: 'default RNR timer, IB encoding 0..31 (12 = 0.64 ms)' },
  ackTimeout: { unit: 'exponent', meaning: 'default local ACK timeout: 4.096 us x 2^ackTimeout (0 = infinite)' },
  retryCount: { unit: 'retries', meaning: 'default transport retry count, 0..7' },
  destroyInvalidates: { unit: '', meaning: "what deregistering an mkey invalidates in the caches: 'entry' or 'all'" },
  readWithInvalidate: { unit: '', meaning: 'accept RDMA_READ_WITH_INV (iWARP only; mlx5 refuses it when false)' },
  hostMemBytes: { unit: 'bytes', meaning: 'host physical memory (a multiple of 2 MiB)' },
  icmMkeyEntries: { unit: 'entries', meaning: 'mkey indices reachable in the ICM mkey context table (24-bit index)' },
  sqWqeSlots: { unit: 'WQEs', meaning: 'send queue engine: WQEs in flight at most, all QPs' },
  eventEqSize: { unit: 'EQEs', meaning: 'the event EQ of a context (async events, page faults, vector 0 completions); a power of two' },
  ioEqSize: { unit: 'EQEs', meaning: 'the EQ of each completion vector 1 and up; a power of two' },
  umrMaxInFlight: { unit: 'WRs', meaning: "driver: UMRs in flight at most on its UMR QP, all users (mlx5_ib MAX_UMR_WR)" },
  requesterContexts: { unit: 'messages', meaning: 'requester: messages in flight at most, all QPs' },
  responderContexts: { unit: 'messages', meaning: 'responder: messages served at once at most, all QPs' },
  mrCacheLimit: { unit: 'mkeys', meaning: "driver's MR cache: limit of each bucket up to 8 Ki MTT entries (fills to twice it; larger buckets 32/16/8/4, then 0)" },
  mrCacheLastOrder: { unit: 'order', meaning: "driver's MR cache: its largest bucket holds 4 x 2^order MTT entries" },
  mrCacheShrinkDelayPs: { unit: 'ps', meaning: "driver's MR cache: excess free mkeys go once none was added for this long" },
  mrCacheTmpDelayPs: { unit: 'ps', meaning: "driver's MR cache: a temporary entry's mkeys go this long after its first store" },
  mrCacheFillDelayPs: { unit: 'ps', meaning: "driver's MR cache: no fill for this long after the firmware refused one" },
  umrFence: { unit: '', meaning: "the umr_fence capability: the fence the driver puts on a REG_MR, 'STRONG' (strong ordering), 'SMALL' (initiator small) or 'NONE'" },
  maxSglForOptimizedPerformance: { unit: 'SGEs', meaning: 'the max_sgl_for_optimized_performance capability (max_sgl_rd): rdma_rw registers a READ destination of more SGEs; 0 = none' },
  requesterSgeCycles: { unit: 'cycles', meaning: "requester's gather/scatter engine: core cycles per local SGE of a message, one engine for all QPs" },
};

/** The rows of `mlx5sim config`: field, default (times also with a unit), unit, meaning. */
export function configTable(): string[][] {
  return (Object.keys(CONFIG_FIELDS) as (keyof HcaConfig)[]).map((k) => {
    const v = DEFAULT_HCA_CONFIG[k];
    const d = CONFIG_FIELDS[k];
    const shown = d.unit === 'ps' && typeof v === 'number' && v > 0 ? `${v} (${formatPs(v)})` : JSON.stringify(v);
    return [k, shown, d.unit, d.meaning];
  });
}
