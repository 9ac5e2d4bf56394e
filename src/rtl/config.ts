/**
 * The configuration of one HCA: clocks, latencies, cache geometries and policies. Every timing
 * value is a field with a default; each default names its row of spec/timing.md ("Suggested
 * defaults" / "Published anchors") or says "assumed".
 */
import { MS, NS, US } from '../sim/time.ts';

/** How DESTROY_MKEY / dereg affects the on-chip caches: drop that entry, or flush everything. */
export type DestroyInvalidates = 'entry' | 'all';

/**
 * The `umr_fence` capability (mlx5_ifc.h MLX5_CAP_UMR_FENCE_STRONG 0 / SMALL 1 / NONE 2): the
 * fence the driver puts on a REG_MR (mlx5 main.c mlx5_get_umr_fence: STRONG_ORDERING,
 * INITIATOR_SMALL, NONE).
 */
export type UmrFence = 'STRONG' | 'SMALL' | 'NONE';

/** The IB path MTUs (bytes). */
export type Mtu = 256 | 512 | 1024 | 2048 | 4096;

/** Timing, sizes and policies of one HCA. Times are whole picoseconds. */
export interface HcaConfig {
  /** Core clock of the HCA pipeline, MHz. */
  coreClockMHz: number;
  /** PCIe DMA read: fixed round trip, ps (before the size term). */
  pcieReadBasePs: number;
  /** PCIe DMA read completion bandwidth, bytes per ps (12 GB/s = 0.012). */
  pcieReadBytesPerPs: number;
  /** PCIe DMA reads in flight at most (tags); more wait (back-pressure). */
  pcieMaxOutstandingReads: number;
  /** PCIe posted write: acceptance to visible in host memory, ps. */
  pcieWritePs: number;
  /** Doorbell (MMIO write) from the driver to the HCA, ps. */
  doorbellPs: number;
  /** mkey cache entries. */
  mkeyCacheEntries: number;
  /** mkey cache associativity; divides mkeyCacheEntries. */
  mkeyCacheWays: number;
  /** mkey cache hit latency, core cycles. */
  mkeyCacheHitCycles: number;
  /** MTT cache line size, bytes (a power of two, at least one 8-byte MTT). */
  mttCacheLineBytes: number;
  /** MTT cache lines. */
  mttCacheLines: number;
  /** MTT cache associativity; divides mttCacheLines. */
  mttCacheWays: number;
  /** MTT cache hit latency, core cycles. */
  mttCacheHitCycles: number;
  /** KLM entries fetched per host read (one 64-byte line holds 4 KLMs). */
  klmEntriesPerRead: number;
  /** KLM walker cycles per entry scanned. */
  klmCyclesPerEntry: number;
  /** Deepest KLM indirection (nested indirect mkeys) before the walk fails. */
  klmMaxIndirection: number;
  /** One-way latency of the link between HCAs (cable + switch), ps. */
  linkLatencyPs: number;
  /** Link bandwidth, Gb/s. */
  linkGbps: number;
  /** Default path MTU, bytes. */
  mtu: Mtu;
  /** Firmware latency of CREATE_MKEY, ps. */
  fwCreateMkeyPs: number;
  /** Firmware latency of every other command, ps. */
  fwCommandPs: number;
  /** Interrupt (EQE written) to handler running, ps. */
  interruptPs: number;
  /** ODP fault handling in software: fixed part per fault, ps. */
  odpFaultFixedPs: number;
  /** ODP fault handling in software: per extra 4 KiB page, ps. */
  odpFaultPerPagePs: number;
  /** Page faults the driver handles at once (mlx5's page-fault work queue's max_active); the rest wait in order. */
  odpFaultWorkers: number;
  /** Pinning one 4 KiB host page (reg_mr, get_user_pages), ps. */
  pinPagePs: number;
  /** Default RNR timer, IB encoding 0..31 (12 = 0.64 ms). */
  rnrTimerCode: number;
  /** Default local ACK timeout exponent, 0..31: 4.096 us x 2^ackTimeout (0 = infinite). */
  ackTimeout: number;
  /** Default transport retry count, 0..7. */
  retryCount: number;
  /** What deregistering / destroying an mkey invalidates in the on-chip caches. */
  destroyInvalidates: DestroyInvalidates;
  /** Accept RDMA_READ_WITH_INV (iWARP only; mlx5 rejects it with EOPNOTSUPP when false). */
  readWithInvalidate: boolean;
  /** Host physical memory size, bytes (a multiple of 2 MiB). */
  hostMemBytes: number;
  /** mkey indices reachable in the ICM mkey context table (the index field is 24 bits). */
  icmMkeyEntries: number;
  /** Send queue engine: WQEs in flight at most (fetched, executing or awaiting their CQE), all QPs. */
  sqWqeSlots: number;
  /**
   * The driver's event EQ (async events, page faults, completion vector 0), entries: mlx5's
   * devlink event_eq_size, default MLX5_NUM_ASYNC_EQE 4096 (include/linux/mlx5/eq.h:8).
   */
  eventEqSize: number;
  /**
   * A completion vector's EQ (vectors 1 and up), entries: mlx5's devlink io_eq_size, default
   * MLX5_COMP_EQ_SIZE 1024 (include/linux/mlx5/driver.h:853).
   */
  ioEqSize: number;
  /** Requester: messages in flight at most (contexts), all QPs. */
  requesterContexts: number;
  /** Responder: messages served at once at most (contexts), all QPs. */
  responderContexts: number;
  /**
   * The driver's MR cache (mlx5_ib's mkey cache, driver/mkey_pool.ts): the limit of its buckets
   * of 4..8,192 MTT entries (each fills to twice this); the larger buckets keep the profile's own
   * smaller limits (32, 16, 8, 4 for 16 Ki..128 Ki entries) when this is larger, and 0 above.
   */
  mrCacheLimit: number;
  /** The MR cache's largest bucket is 4 x 2^mrCacheLastOrder MTT entries. */
  mrCacheLastOrder: number;
  /** MR cache: free mkeys above twice a bucket's limit are destroyed once no mkey was added for this long, ps. */
  mrCacheShrinkDelayPs: number;
  /** MR cache: a temporary entry's mkeys are destroyed this long after the first is stored, ps. */
  mrCacheTmpDelayPs: number;
  /** MR cache: after the firmware refuses a fill, no fill for this long, ps. */
  mrCacheFillDelayPs: number;
  /** The `umr_fence` capability QUERY_HCA_CAP reports: the fence mode mlx5 writes on a REG_MR. */
  umrFence: UmrFence;
  /** The `max_sgl_for_optimized_performance` capability (ib_device_attr.max_sgl_rd), SGEs; 0: none reported. */
  maxSglForOptimizedPerformance: number;
  /** Requester's gather/scatter engine: core cycles per local SGE of a message (0: no cost beyond its translation and DMA). */
  requesterSgeCycles: number;
  /**
   * The driver's UMR QP: UMR work requests in flight at most, all its users together (the MR
   * cache, ODP faults, MMU-notifier zaps). mlx5_ib's MAX_UMR_WR = 128 (Linux 6.12
   * drivers/infiniband/hw/mlx5/umr.c:101): the UMR QP's send queue size (umr.c:168) and the
   * semaphore each mlx5r_umr_post_send_wait takes a slot of (umr.c:185, :365).
   */
  umrMaxInFlight: number;
}

/** The defaults: spec/timing.md "Suggested defaults", with the anchors they reproduce. */
export const DEFAULT_HCA_CONFIG: Readonly<HcaConfig> = Object.freeze({
  coreClockMHz: 500, // timing.md "core clock" 500 MHz (assumed)
  pcieReadBasePs: 520 * NS, // timing.md "PCIe read" 520 ns + size / 12 GB/s (SIGCOMM'18 anchor: 64 B ~550 ns, 8 B ~520 ns)
  pcieReadBytesPerPs: 0.012, // timing.md "PCIe read": 12 GB/s
  pcieMaxOutstandingReads: 64, // timing.md "PCIe read": at most 64 outstanding reads
  pcieWritePs: 250 * NS, // timing.md "PCIe posted write visible to host" 250 ns (assumed, as csRNA)
  doorbellPs: 200 * NS, // timing.md "doorbell (MMIO) to HCA" 200 ns (assumed)
  mkeyCacheEntries: 512, // timing.md "mkey cache" 512 entries (assumed)
  mkeyCacheWays: 4, // timing.md "mkey cache" 4-way (assumed)
  mkeyCacheHitCycles: 2, // timing.md "mkey cache" hit 2 cycles (assumed)
  mttCacheLineBytes: 64, // timing.md "MTT cache" 64-byte lines = 8 MTTs (assumed)
  mttCacheLines: 4096, // timing.md "MTT cache" 4096 lines (assumed)
  mttCacheWays: 8, // timing.md "MTT cache" 8-way (assumed)
  mttCacheHitCycles: 2, // timing.md "MTT cache" hit 2 cycles (assumed)
  klmEntriesPerRead: 4, // timing.md "KLM walk" one 64-byte line (4 KLMs) per read (assumed)
  klmCyclesPerEntry: 1, // timing.md "KLM walk" 1 cycle per entry scanned (assumed)
  klmMaxIndirection: 4, // timing.md "KLM walk" max indirection 4 (assumed)
  linkLatencyPs: 300 * NS, // timing.md "link between HCAs" 300 ns (assumed: cable + switch)
  linkGbps: 100, // timing.md "link between HCAs" 100 Gb/s (assumed)
  mtu: 4096, // timing.md "MTU" 4096
  fwCreateMkeyPs: 230 * US, // timing.md "firmware command" CREATE_MKEY 230 us (anchor: ~230 us per MR without the mkey cache)
  fwCommandPs: 50 * US, // timing.md "firmware command" others 50 us (assumed)
  interruptPs: 5 * US, // timing.md "interrupt to handler" 5 us (assumed)
  // timing.md "ODP fault handling in software": fitted so a 4 KB fault totals ~220 us (ASPLOS'17):
  // 220 us - interrupt 5 us - PAGE_FAULT_RESUME 50 us - ~5 us of hardware and UMR work = 160 us.
  odpFaultFixedPs: 160 * US,
  // timing.md gives ~0.13 us per extra 4 KB page as the slope of the whole fault (4 MB: ~350 us).
  // Here most of that slope comes from the hardware: after the resume the ATU walks the newly
  // written MTT lines from host memory (measured: 0.133 us per page for a 4 MB message, the walk
  // is one line at a time). What is left to software is get_user_pages on present pages and
  // building the MTT list: 20 ns per page (assumed), which puts the 4 MB fault at ~375 us.
  odpFaultPerPagePs: 20 * NS,
  // mlx5 runs page faults on its "mlx5_ib_page_fault" work queue, max_active MLX5_NUM_CMD_EQE = 32
  // (odp.c:1800-1802 mlx5_ib_odp_create_eq; include/linux/mlx5/eq.h:7)
  odpFaultWorkers: 32,
  // timing.md has two anchors that cannot both hold: "pinning host pages" 0.25-0.6 us per page
  // (UCX's cost model, an estimate) and "registration from the mkey cache (UMR), 64 pages ~14 us
  // per MR". The second is a measurement of the whole operation: the mlx5 patch "Avoid taking MRs
  // from larger MR cache pools" (linux-rdma, 2021-09-26) times a user-space application
  // registering 1,000 MRs of 2^6 pages in 14 ms (one thread, Xeon E5-2699 v4), pinning included.
  // So pinning there is at most ~0.18 us per page; with the UMR's ~2.6 us a pooled 64-page regMr
  // takes ~14.2 us (test/driver/timing_anchors.test.ts).
  pinPagePs: 180 * NS,
  rnrTimerCode: 12, // timing.md "RNR timer": IB code 12 = 0.64 ms (IBTA)
  ackTimeout: 14, // timing.md "ACK timeout": 4.096 us x 2^14 (IBTA default used here)
  retryCount: 7, // timing.md "ACK timeout": retry count 7
  destroyInvalidates: 'entry', // timing.md shape 3: configurable; per-entry is what a careful design does (assumed)
  readWithInvalidate: false, // API.md: mlx5 rejects RDMA_READ_WITH_INV unless this is on
  hostMemBytes: 64 * 2 ** 30, // 64 GiB of host physical memory (assumed)
  // every index the 24-bit field names (log_max_mkey 24, spec/mlx5.md "Keys"), so the advertised
  // maxMr (2^24 less the 2 reserved indices) is what the device holds; the table's pages are
  // taken from host memory only as contexts are written (memory/icm.ts)
  icmMkeyEntries: 2 ** 24,
  // No public figure for these on-chip tables: assumed, sized so that the initiator depth of 16
  // QPs x 16 READs fits and PCIe's 64 outstanding reads, not a table, limit a deep READ workload.
  sqWqeSlots: 512,
  eventEqSize: 4096,
  ioEqSize: 1024,
  requesterContexts: 256,
  responderContexts: 128,
  // mlx5_core's default profile (prof_sel 2, drivers/net/ethernet/mellanox/mlx5/core/main.c:112-180):
  // mr_cache[0..11].limit 250, [12..15] 32, 16, 8, 4; the rest 0
  mrCacheLimit: 250,
  // mkey_cache_max_order (mr.c:1092-1097): MKEY_CACHE_LAST_STD_ENTRY 20 (include/linux/mlx5/driver.h:753)
  // with umr_extended_translation_offset, which the modelled device reports
  mrCacheLastOrder: 20,
  mrCacheShrinkDelayPs: 300_000 * MS, // mr.c:597-603: last_add + 300 * HZ, requeued in 300 * HZ
  mrCacheTmpDelayPs: 30_000 * MS, // mr.c:2106-2107: msecs_to_jiffies(30 * 1000)
  mrCacheFillDelayPs: 1_000 * MS, // mr.c:207 mod_timer(&dev->delay_timer, jiffies + HZ)
  // No public figure for a ConnectX: model's choice. The kernel added the capability so newer
  // devices need not fence a registration behind every earlier WQE ("IB/mlx5: Add support for
  // UMR fence"); the small fence (wait for earlier UMRs only) is what it lets them report.
  // STRONG is the conservative setting (the capability's 0) and reproduces the old drain.
  umrFence: 'SMALL',
  // No public value (assumed): 8 SGEs, so rdma_rw registers a READ's destination past 8 pages.
  maxSglForOptimizedPerformance: 8,
  // No public per-SGE figure: 0 keeps the calibrated anchors; the sge-vs-klm experiment sweeps it
  // (README "Experiments" 6 gives the cost at which the published KLM gain appears).
  requesterSgeCycles: 0,
  umrMaxInFlight: 128, // mlx5_ib MAX_UMR_WR (umr.c:101)
} satisfies HcaConfig);

/** Returns a requirement text when `v` breaks the rule, or null when it is fine. */
type Rule = (v: unknown, c: Readonly<Record<string, unknown>>) => string | null;

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);
const intIn = (lo: number, hi: number, what?: string): Rule => (v) =>
  isInt(v) && v >= lo && v <= hi ? null : (what ?? `must be an integer in ${lo}..${hi}`);
const posInt = (max = 2 ** 32): Rule => intIn(1, max, `must be a positive integer (at most ${max})`);
/**
 * A duration: whole picoseconds, at most 1e13 (10 s). Simulated time is exact below 2^53 ps
 * (2.5 hours): a run of a few hundred such delays still fits, a single delay of 2^53 ps never could.
 */
const ps: Rule = intIn(0, 1e13, 'must be a whole number of picoseconds in 0..1e13 (10 s)');
/** The driver's timers (the MR cache's 300 s): up to 1,000 s. */
const longPs: Rule = intIn(0, 1e15, 'must be a whole number of picoseconds in 0..1e15 (1,000 s)');
const dividing = (other: string): Rule => (v, c) =>
  isInt(v) && v >= 1 && isInt(c[other]) && (c[other] as number) % v === 0
    ? null
    : `must be a positive integer dividing ${other}`;
const oneOf = (values: readonly (string | number | boolean)[]): Rule => (v) =>
  values.includes(v as string | number | boolean) ? null : `must be one of ${values.map((x) => JSON.stringify(x)).join(', ')}`;

/** One rule per field, in declaration order (so a field is checked after the fields it refers to). */
const RULES: { readonly [K in keyof HcaConfig]: Rule } = {
  // periods are whole ps of at least 2 (Clock): at most 500 GHz; at least 1 kHz (a period of
  // 1e9 ps: slower clocks' times would leave the exact range of simulated time)
  coreClockMHz: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 0.001 && v <= 500_000 ? null : 'must be a number in 0.001..500000 MHz (a clock period of 1 ms .. 2 ps)'),
  // at most 1 s of simulated time per read, at least 1 MB/s: beyond, times overflow the schedule
  pcieReadBasePs: intIn(0, 1e12, 'must be a whole number of picoseconds in 0..1e12 (1 s)'),
  pcieReadBytesPerPs: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 1e-6 && v <= 1_000 ? null : 'must be a number in 1e-6..1000 bytes per ps (1 MB/s .. 1 PB/s)'),
  // PCIe 10-bit tags give at most 1024 non-posted requests in flight
  pcieMaxOutstandingReads: intIn(1, 1024, 'must be an integer in 1..1024 (PCIe 10-bit tags)'),
  pcieWritePs: ps,
  doorbellPs: ps,
  mkeyCacheEntries: posInt(2 ** 24),
  mkeyCacheWays: dividing('mkeyCacheEntries'),
  mkeyCacheHitCycles: posInt(1_000_000),
  // the MTT cache and the KLM walker model 64-byte lines only (translation/mtt_cache.ts): refuse
  // here what construction would refuse later
  mttCacheLineBytes: (v) => (v === 64 ? null : 'must be 64 (only 64-byte lines, 8 MTTs or 4 KLMs, are modelled)'),
  mttCacheLines: posInt(2 ** 24),
  mttCacheWays: dividing('mttCacheLines'),
  mttCacheHitCycles: posInt(1_000_000),
  klmEntriesPerRead: posInt(256),
  klmCyclesPerEntry: posInt(1_000_000),
  klmMaxIndirection: posInt(64),
  linkLatencyPs: ps,
  linkGbps: (v) => (typeof v === 'number' && Number.isFinite(v) && v >= 0.001 && v <= 1e6 ? null : 'must be a number in 0.001..1e6 Gb/s'),
  mtu: oneOf([256, 512, 1024, 2048, 4096]),
  fwCreateMkeyPs: ps,
  fwCommandPs: ps,
  interruptPs: ps,
  odpFaultFixedPs: ps,
  odpFaultPerPagePs: ps,
  odpFaultWorkers: posInt(4096),
  pinPagePs: ps,
  rnrTimerCode: intIn(0, 31),
  ackTimeout: intIn(0, 31),
  retryCount: intIn(0, 7),
  destroyInvalidates: oneOf(['entry', 'all']),
  readWithInvalidate: (v) => (typeof v === 'boolean' ? null : 'must be a boolean'),
  // 2 MiB multiples so huge pages fit; at most 16 TiB (2^32 frames of 4 KiB); at least 64 MiB,
  // room for the driver's queues (a QP's or a large CQ's buffer is 2 MiB huge pages) besides
  // the application's memory
  hostMemBytes: (v) =>
    isInt(v) && v >= 64 * 2 ** 20 && v <= 2 ** 44 && v % (2 * 2 ** 20) === 0
      ? null
      : 'must be a multiple of 2 MiB in 64 MiB..16 TiB',
  // indices 0 and 1 are never handed out (cmdif FIRST_MKEY_INDEX): at least one more
  icmMkeyEntries: intIn(3, 2 ** 24, 'must be an integer in 3..2^24 (24-bit mkey index; indices 0 and 1 are reserved)'),
  sqWqeSlots: intIn(1, 65536),
  // powers of two the EQ holds (CREATE_EQ log_eq_size); 2 at least, as small as a test forces
  eventEqSize: (v) => (isInt(v) && v >= 2 && v <= 2 ** 22 && (v & (v - 1)) === 0 ? null : 'must be a power of two in 2..2^22'),
  ioEqSize: (v) => (isInt(v) && v >= 2 && v <= 2 ** 22 && (v & (v - 1)) === 0 ? null : 'must be a power of two in 2..2^22'),
  // DMA tags of the engines' movers tell up to 256 contexts apart (memory/dma_mover.ts)
  requesterContexts: intIn(1, 256),
  responderContexts: intIn(1, 256),
  mrCacheLimit: intIn(0, 65536),
  mrCacheLastOrder: intIn(0, 20),
  mrCacheShrinkDelayPs: longPs,
  mrCacheTmpDelayPs: longPs,
  mrCacheFillDelayPs: longPs,
  umrFence: oneOf(['STRONG', 'SMALL', 'NONE']),
  // mlx5_ifc.h: max_sgl_for_optimized_performance is 8 bits
  maxSglForOptimizedPerformance: intIn(0, 255),
  requesterSgeCycles: intIn(0, 1_000_000),
  // the UMR QP's ring holds this many UMR WQEs of 3 WQEBBs (a data segment): within maxQpWr
  umrMaxInFlight: intIn(1, 4096),
};

function show(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (v === null || typeof v !== 'object') return String(v);
  return Array.isArray(v) ? 'an array' : 'an object';
}

/**
 * The full configuration: the defaults overridden by `partial`, every field checked for type
 * and range. Throws an Error naming the first bad or unknown field, e.g.
 * `config.mkeyCacheWays: must be a positive integer dividing mkeyCacheEntries, got 3`.
 * Fields given as `undefined` keep their default.
 */
export function resolveConfig(partial: Partial<HcaConfig> = {}): HcaConfig {
  if (partial === null || typeof partial !== 'object' || Array.isArray(partial)) {
    throw new TypeError(`config: must be an object of HcaConfig fields, got ${show(partial)}`);
  }
  const given = partial as Readonly<Record<string, unknown>>;
  const unknown = Object.keys(given).filter((k) => !Object.hasOwn(RULES, k)).sort();
  if (unknown.length > 0) {
    throw new Error(`config.${unknown[0]}: unknown field (known: ${Object.keys(RULES).join(', ')})`);
  }
  const c: Record<string, unknown> = { ...DEFAULT_HCA_CONFIG };
  for (const k of Object.keys(given)) if (given[k] !== undefined) c[k] = given[k];
  for (const k of Object.keys(RULES) as (keyof HcaConfig)[]) {
    const bad = RULES[k](c[k], c);
    if (bad !== null) throw new Error(`config.${k}: ${bad}, got ${show(c[k])}`);
  }
  return c as unknown as HcaConfig;
}

/** The core clock period in whole ps (500 MHz: 2000 ps). */
export function corePeriodPs(c: Pick<HcaConfig, 'coreClockMHz'>): number {
  return Math.round(1e6 / c.coreClockMHz);
}

/** The RNR timer of an IB encoding (0..31), ps: IBTA table, code 1 = 0.01 ms ... 31 = 491.52 ms, 0 = 655.36 ms. */
export function rnrTimerPs(code: number): number {
  if (!isInt(code) || code < 0 || code > 31) throw new RangeError(`rnrTimerPs: code must be an integer in 0..31, got ${code}`);
  return RNR_TIMER_10US[code] * 10 * US;
}

/** The local ACK timeout of an IB exponent (1..31), ps: 4.096 us x 2^t (IBTA; 0 means no timeout: Infinity). */
export function ackTimeoutPs(t: number): number {
  if (!isInt(t) || t < 0 || t > 31) throw new RangeError(`ackTimeoutPs: timeout must be an integer in 0..31, got ${t}`);
  return t === 0 ? Infinity : 4096 * NS * 2 ** t;
}

/** IBTA RNR NAK timer field encoding, in units of 10 us (0.01 ms), indexed by code. */
const RNR_TIMER_10US: readonly number[] = [
  65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
  256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
];
