/**
 * The DMA-ownership checker (`tb.hcaN.pcie.checker`): an IOMMU-style sanitizer of the model.
 * Every DMA read and write the adapter makes to host memory is checked, at the instant it
 * touches memory (a read when its data is read, a posted write when it lands), against who
 * owns each frame it reaches: a frame is the device's to touch only while something holds a
 * device reference on it (HostMem.pin): a live registration's pin, a page an ODP MR has mapped,
 * a queue, doorbell record or descriptor buffer the driver gave the device, an ICM page. A DMA
 * to any other frame (free, or the process's without a pin) is a violation: the run stops with
 * a DmaViolationError naming the frame, the address, the module (the PCIe port) and the work
 * request (QP, WQE) when the engine knows it. Addresses in ICM table space are the device's own
 * (the ICM checks them); a DMA with no memory behind it is an Unsupported Request (PCIe counts
 * it) and touches nothing.
 */
import type { HostMem } from './host_mem.ts';
import { hex } from '../formats/field.ts';

/** One DMA that reached a frame nobody gave the device. */
export interface DmaViolation {
  kind: 'read' | 'write';
  /** The DMA's first byte and length. */
  addr: number;
  length: number;
  /** The first frame of it without a device reference. */
  frame: number;
  /** What that frame is: `free` (no allocation holds it) or `not pinned` (allocated, not the device's). */
  state: 'free' | 'not pinned';
  /** The module: the PCIe port that made the request (requester, responder, sq, cq, eq, umr, ...). */
  port: string;
  /** The QP and WQE index of the work request, -1 when the engine does not know them. */
  qpn: number;
  wqe: number;
  /** Simulated time (ps). */
  time: number;
}

/** What a violation says: every field, on one line. */
export function describeViolation(v: DmaViolation, where: string): string {
  const wr = v.qpn >= 0 ? `, QP ${hex(v.qpn)}${v.wqe >= 0 ? ` WQE ${v.wqe}` : ''}` : '';
  return `DMA checker: ${where}.${v.port} ${v.kind} of ${v.length} B at ${hex(v.addr)} at ${v.time} ps reached frame ${hex(v.frame)}, ` +
    `which ${v.state === 'free' ? 'is free (no allocation holds it)' : 'is allocated but not given to the device (no pin, ODP mapping, queue or ICM page)'}${wr}`;
}

/** A violation stops the run with this error. */
export class DmaViolationError extends Error {
  constructor(
    readonly violation: DmaViolation,
    where: string,
  ) {
    super(describeViolation(violation, where));
    this.name = 'DmaViolationError';
  }
}

/** Violations kept in `record` mode (later ones are only counted). */
const KEPT = 64;

export class DmaChecker {
  /** `throw`: a violation stops the run (the default); `record`: counted and kept (tools, the fuzzer). */
  mode: 'throw' | 'record' = 'throw';
  /** DMAs checked, and violations found. */
  checked = 0;
  violationCount = 0;
  /** The first violations (record mode). */
  readonly violations: DmaViolation[] = [];

  /** @internal Made by the adapter (`hca.checkDma()`, through the testbed's `trace.checkDma`). */
  constructor(
    private readonly mem: HostMem,
    /** The adapter's scope path, for messages. */
    private readonly where: string,
  ) {}

  /** Checks one DMA touching [addr, addr + len) now (allocation-free unless it finds a violation). */
  check(kind: 'read' | 'write', port: string, addr: number, len: number, qpn: number, wqe: number, now: number): void {
    if (addr >= this.mem.size) return; // ICM table space: the device's own
    this.checked++;
    const f = this.mem.firstUnowned(addr, Math.min(len, this.mem.size - addr));
    if (f < 0) return;
    const v: DmaViolation = {
      kind, addr, length: len, frame: f, state: this.mem.isAllocated(f) ? 'not pinned' : 'free', port, qpn, wqe, time: now,
    };
    this.violationCount++;
    if (this.mode === 'throw') throw new DmaViolationError(v, this.where);
    if (this.violations.length < KEPT) this.violations.push(v);
  }
}
