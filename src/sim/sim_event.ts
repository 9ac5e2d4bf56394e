import type { Sim } from './sim.ts';

/**
 * Something software processes wait for (an sc_event): `await ev.wait()` suspends the process
 * until `notify()`; the waiters resume at the simulated time of the notify, in the order they
 * began to wait. Hardware notifies; only the scheduler resumes processes.
 */
export class SimEvent {
  private waiters: (() => void)[] = [];

  constructor(readonly sim: Sim) {}

  /** True when a process is waiting, so hardware can skip notifying on its hot path. */
  get hasWaiters(): boolean {
    return this.waiters.length > 0;
  }

  /** Processes waiting now. */
  get waiterCount(): number {
    return this.waiters.length;
  }

  /** Suspends the calling process until the next notify. */
  wait(): Promise<void> {
    this.sim.checkInProcess('wait for an event');
    return new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** Resumes every waiting process (at the current simulated time). */
  notify(): void {
    if (this.waiters.length === 0) return;
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
    this.sim.noteResume();
  }
}
