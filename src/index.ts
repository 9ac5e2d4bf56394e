/**
 * mlx5sim's public API (docs/guide/ and the reference `npm run docs` builds). Nothing else is public.
 */
export { Testbed, type TestbedOptions } from './driver/testbed.ts';
export { VerbsError, type Errno } from './driver/verbs_error.ts';
export { Context } from './driver/context.ts';
export { Pd, bestPageShift } from './driver/pd.ts';
export { POOL_BUCKETS, POOL_LIMIT, POOL_SHRINK_DELAY_PS, POOL_FILL_DELAY_PS, type MkeyPoolStats } from './driver/mkey_pool.ts';
export { MKEY_CACHE_MIN_DESCS, MKEY_CACHE_LAST_STD_ENTRY, MAX_PENDING_REG_MR, mkeyCacheLimit, type MkeyCacheBucketStats } from './driver/mkey_pool.ts';
export type { DeviceMemory } from './rtl/memory/icm.ts';
export { Cq } from './driver/cq.ts';
export { CompChannel, type AsyncEvent } from './driver/comp_channel.ts';
export { SIZE_MAX, type OdpStats } from './driver/odp.ts';
export { Qp, type QpInitAttr } from './driver/qp.ts';
export { Mr } from './driver/mr.ts';
export { Mw } from './driver/mw.ts';
export type { SendWr, RecvWr, WorkCompletion, WrOpcode, WcOpcode, WcStatus, Sge, BindInfo } from './driver/types.ts';
export type { DeviceAttr } from './rtl/firmware/hca_caps.ts';
export { incRkey } from './driver/keys.ts';
export type { HcaConfig } from './rtl/config.ts';
export { DEFAULT_HCA_CONFIG } from './rtl/config.ts';
export type { TraceOptions, Ps, Waiter } from './sim/index.ts';
export { PS, NS, US, MS } from './sim/index.ts';
export type { Scenario, ScenarioOptions, ScenarioResult } from './scenario.ts';
export { Checks } from './scenario.ts';
export type { Experiment, AxisDef, GridBlock, Params, ParamValue, PointContext, PointFigures, PointLine, PlotDef, Reference, ShapeCheck } from './experiment.ts';
export { formatBytes } from './experiment.ts';

/** ib_access_flags bits (API.md "Constants and errors"). */
export { IbAccess as Access } from './driver/types.ts';

/** What a run traces besides the waves: the pcap of the wire and the transaction log (docs/guide/packets-and-logs.md). */
export type { TestbedTrace } from './driver/testbed.ts';
export { WR_STAGES, traceJsonPath, type TxLine, type WrLine, type CmdLine, type FaultLine, type WrStage } from './driver/trace/txlog.ts';
export { adapterMac, adapterIp } from './driver/trace/wire_pcap.ts';
export { defineScenario } from './scenario.ts';
// the types the exports above name (so the reference documents them; no new behaviour)
export type { HostSpace, HostBuffer, HostAllocOptions } from './rtl/memory/host_space.ts';
export type { QpState } from './rtl/firmware/cmd_types.ts';
export type { MrType } from './driver/mr.ts';
export type { Mtu, DestroyInvalidates, UmrFence } from './rtl/config.ts';
export type { StatsJson, HistogramJson } from './sim/stats.ts';
export type { DeviceCap, HcaOdpCaps, HcaCapsOverride, OdpGeneralCap, OdpTransportCap } from './rtl/firmware/hca_caps.ts';
export type { TestbedTraceOptions } from './driver/testbed.ts';
export { DmaChecker, DmaViolationError, describeViolation, type DmaViolation } from './rtl/memory/dma_check.ts';
