/** Shared fixtures of the verbs-model tests: two connected QPs, buffers, small helpers. */
import { expect } from 'vitest';
import {
  VerbsAccess,
  VerbsModel,
  VerbsModelError,
  type ModelCq,
  type ModelMr,
  type ModelPd,
  type ModelQp,
  type ModelSendWr,
  type ModelWc,
  type VerbsErrno,
  type VerbsModelOptions,
} from '../../../src/model/index.ts';

export const A = VerbsAccess;
/** Every data-path right plus MW_BIND. */
export const ALL = A.LOCAL_WRITE | A.REMOTE_WRITE | A.REMOTE_READ | A.REMOTE_ATOMIC | A.MW_BIND;

/** One side of a connection: its HCA, PD, CQ (send and receive), QP and a 4 KiB buffer. */
export interface Side {
  hca: number;
  pd: ModelPd;
  cq: ModelCq;
  qp: ModelQp;
  /** A page-aligned 4 KiB buffer, mapped in the side's host. */
  buf: number;
  /** A user MR over `buf` with every right (LOCAL_WRITE ... MW_BIND). */
  mr: ModelMr;
}

/** A model with requester side `a` and responder side `b`, connected (RTS). */
export interface Env {
  m: VerbsModel;
  a: Side;
  b: Side;
}

/** Two sides on two HCAs (default) or on one HCA (`loopback`), connected. */
export function setup(opts: VerbsModelOptions & { loopback?: boolean; maxSendWr?: number } = {}): Env {
  const m = new VerbsModel({ hcas: opts.loopback === true ? 1 : 2, ...opts });
  const side = (hca: number): Side => {
    const pd = m.allocPd(hca);
    const cq = m.createCq(hca);
    const qp = m.createQp(pd, { sendCq: cq, recvCq: cq, maxSendWr: opts.maxSendWr ?? 64 });
    const buf = m.alloc(hca, 4096);
    const mr = m.regMr(pd, buf, 4096, ALL);
    return { hca, pd, cq, qp, buf, mr };
  };
  const a = side(0);
  const b = side(opts.loopback === true ? 0 : 1);
  m.connect(a.qp, b.qp);
  return { m, a, b };
}

/** `n` bytes 1, 2, 3, ... (mod 256) starting at `first`. */
export function pattern(n: number, first = 1): Uint8Array {
  return Uint8Array.from({ length: n }, (_, i) => (first + i) & 0xff);
}

/** Posts `wr` on `side`'s QP, runs everything, and returns (and removes) `side`'s completions. */
export function run(env: Env, side: Side, wr: ModelSendWr): ModelWc[] {
  env.m.postSend(side.qp, wr);
  env.m.runToCompletion();
  return env.m.pollCq(side.cq);
}

/** Every completion of `cq`, removed. */
export function drain(env: Env, cq: ModelCq): ModelWc[] {
  return env.m.pollCq(cq);
}

/** Statuses of completions, in order. */
export function statuses(wcs: readonly ModelWc[]): string[] {
  return wcs.map((w) => w.status);
}

/** Asserts that `fn` throws a VerbsModelError with `errno`, and returns it. */
export function expectErrno(fn: () => unknown, errno: VerbsErrno): VerbsModelError {
  let caught: unknown;
  try {
    fn();
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(VerbsModelError);
  const e = caught as VerbsModelError;
  expect(e.errno).toBe(errno);
  expect(e.message).toContain(errno);
  return e;
}

/** A receive of `length` bytes at `side.buf + offset` through the side's MR. */
export function postRecvAt(env: Env, side: Side, wrId: number, offset: number, length: number): void {
  env.m.postRecv(side.qp, { wrId, sgList: [{ addr: side.buf + offset, length, lkey: side.mr.lkey }] });
}

/** An RDMA WRITE of `length` bytes from `a.buf` to `remoteAddr` through `rkey`, signaled. */
export function writeWr(env: Env, wrId: number, length: number, rkey: number, remoteAddr: number): ModelSendWr {
  return {
    wrId,
    opcode: 'RDMA_WRITE',
    sgList: [{ addr: env.a.buf, length, lkey: env.a.mr.lkey }],
    remoteAddr,
    rkey,
    signaled: true,
  };
}

/** An RDMA READ of `length` bytes into `a.buf + 2048` from `remoteAddr` through `rkey`, signaled. */
export function readWr(env: Env, wrId: number, length: number, rkey: number, remoteAddr: number): ModelSendWr {
  return {
    wrId,
    opcode: 'RDMA_READ',
    sgList: [{ addr: env.a.buf + 2048, length, lkey: env.a.mr.lkey }],
    remoteAddr,
    rkey,
    signaled: true,
  };
}
