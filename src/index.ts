/**
 * mlx5sim's public API (../shared/API.md). Nothing else is public.
 */
export { Testbed, type TestbedOptions } from './driver/testbed.ts';
export { VerbsError, type Errno } from './driver/verbs_error.ts';
export { Context } from './driver/context.ts';
export { Pd, bestPageShift } from './driver/pd.ts';
export { POOL_BUCKETS, POOL_LIMIT, POOL_SHRINK_DELAY_PS, POOL_FILL_DELAY_PS, type MkeyPoolStats } from './driver/mkey_pool.ts';
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
export type { TestbedTraceOptions } from './driver/testbed.ts';
export { DmaChecker, DmaViolationError, describeViolation, type DmaViolation } from './rtl/memory/dma_check.ts';
