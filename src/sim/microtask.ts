/**
 * Queues `fn` as a microtask, as `queueMicrotask` does (at the same place in the queue), through
 * a then on a settled promise: Node's queueMicrotask wraps every callback in an async resource
 * and a bound function, which the kernel's drains and the driver's completion handlers pay
 * several times per operation. `fn` must not throw (its error would become an unhandled rejection).
 */
export function microtask(fn: () => void): void {
  void RESOLVED.then(fn);
}

const RESOLVED: Promise<void> = Promise.resolve();
