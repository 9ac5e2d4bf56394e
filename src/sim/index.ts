/** The simulation kernel: time, scheduler, clocks, modules, registers, FIFOs, tracing, stats. */
export { Sim, type TraceSink, type Committable, type Waiter } from './sim.ts';
export { EventQueue, PRIO_CLOCK, PRIO_NORMAL, type EventTarget } from './event_queue.ts';
export { Clock } from './clock.ts';
export { Module, type SignalOptions, type WireOptions, type UnclockedWireOptions, type Nothing, type ReqResp } from './module.ts';
export { Signal, Reg, Probe } from './signal.ts';
export { EnumType, enumType, flagsType } from './enum_type.ts';
export { Fifo, type FifoOptions } from './fifo.ts';
export { SimEvent } from './sim_event.ts';
export { Counter, Histogram, StatSet, type StatsJson, type HistogramJson } from './stats.ts';
export { Rng } from './rng.ts';
export { PS, NS, US, MS, periodOfMHz, formatPs, checkPs, type Ps } from './time.ts';
export { Tracer, type TraceOptions } from './trace/tracer.ts';
export { vcdId } from './trace/vcd_ids.ts';
export { gtkwPath, filterPath, phaseGtkwPath, phaseViews } from './trace/gtkw.ts';
