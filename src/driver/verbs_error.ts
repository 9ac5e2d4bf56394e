import type { WorkCompletion } from './types.ts';
import { CmdError } from '../rtl/firmware/cmd_types.ts';
/** The errno values a synchronous verbs failure carries (API.md "Constants and errors"). */
export type Errno = 'EINVAL' | 'EBUSY' | 'ENOMEM' | 'EOPNOTSUPP' | 'EPERM' | 'EFAULT' | 'ETIMEDOUT' | 'EIO' | 'ENOENT';

/**
 * A verbs call with bad arguments, or against the rules of spec/semantics.md, throws this: the
 * errno the kernel or libibverbs would return, and a message that names the rule broken.
 * Asynchronous failures are completion statuses, never throws.
 */
export class VerbsError extends Error {
  /** ETIMEDOUT of `cq.wait`: the completions polled before the timeout (they are not lost). */
  partial?: readonly WorkCompletion[];
  constructor(
    readonly errno: Errno,
    message: string,
  ) {
    super(`${errno}: ${message}`);
    this.name = 'VerbsError';
  }
}

/** A bad argument as a message shows it: a string quoted (so '8' is not read as 8), a bigint with its n, objects by kind. */
export function shown(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (v === null) return 'null';
  if (typeof v === 'object') return Array.isArray(v) ? 'an array' : 'an object';
  if (typeof v === 'function') return 'a function';
  return String(v);
}

/** An address or length argument: a safe integer in [0, 2^53) (the model's addresses), else EINVAL naming it. */
export function checkU53(what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw new VerbsError('EINVAL', `${what} must be a non-negative integer below 2^53, got ${shown(v)}`);
  return v;
}

/** A 32-bit key or immediate argument: an integer in [0, 2^32), else EINVAL naming it. */
export function checkU32(what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= 2 ** 32) throw new VerbsError('EINVAL', `${what} must be an integer in 0..2^32-1, got ${shown(v)}`);
  return v;
}

/** An object argument (a work request, an SGE, options): EINVAL when it is missing. */
export function checkObject(what: string, v: unknown): void {
  if (v === null || typeof v !== 'object') throw new VerbsError('EINVAL', `${what} must be an object, got ${v === null ? 'null' : typeof v}`);
}

/**
 * A 64-bit atomic operand: a safe integer (negative in two's complement, so -1 is 2^64 - 1) or a
 * bigint in -2^63 .. 2^64 - 1; anything else (NaN, 1.5, a number past 2^53 that lost its low
 * bits) is EINVAL naming it. Returns the value modulo 2^64.
 */
export function checkOperand64(what: string, v: unknown): bigint {
  if (typeof v === 'bigint') {
    if (v < -(2n ** 63n) || v >= 2n ** 64n) throw new VerbsError('EINVAL', `${what} must fit 64 bits, got ${shown(v)}`);
    return BigInt.asUintN(64, v);
  }
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw new VerbsError('EINVAL', `${what} must be a safe integer (negative: two's complement) or a bigint below 2^64, got ${shown(v)}`);
  }
  return BigInt.asUintN(64, BigInt(v));
}

/** A work request id (wr_id, a u64 cookie): a safe integer >= 0 or a bigint below 2^64, else EINVAL. */
export function checkWrId(what: string, v: unknown): void {
  if (typeof v === 'bigint' ? v < 0n || v >= 2n ** 64n : !(typeof v === 'number' && Number.isSafeInteger(v) && v >= 0)) {
    throw new VerbsError('EINVAL', `${what} must be a non-negative safe integer or a bigint below 2^64, got ${typeof v === 'bigint' ? `${v}n` : String(v)}`);
  }
}

/** An optional boolean option: undefined or a boolean, never a truthy coercion. */
export function checkBool(what: string, v: unknown): void {
  if (v !== undefined && typeof v !== 'boolean') throw new VerbsError('EINVAL', `${what} must be a boolean, got ${shown(v)}`);
}

/**
 * A destroy at the device's removal: a refusal by the firmware (an object made by raw commands
 * behind the driver's back still uses it) is passed over, as mlx5 only warns there
 * (ib_dealloc_pd's WARN_ONCE, include/rdma/ib_verbs.h); TEARDOWN_HCA drops what is left.
 * True when the object went.
 */
export async function removing(p: Promise<boolean | void>): Promise<boolean> {
  try {
    return (await p) !== false;
  } catch (e) {
    if (e instanceof VerbsError || e instanceof CmdError) return true;
    throw e;
  }
}
