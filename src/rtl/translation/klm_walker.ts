/**
 * The KLM walker (`tb.hcaN.klm_walker`): for an indirect (KLMS) mkey, walks its KLM list from
 * a start entry and offset, subtracting each entry's byte count until the offset falls inside
 * an entry (spec/mlx5.md "Translation entries"). It reads the list a 64-byte line (4 KLMs) at a
 * time through the `mtt` line cache and scans one entry per cycle (timing.md defaults). One walk
 * at a time; the ATU recurses into the entry's key and asks again for the rest of the range.
 */
import { enumType, Fifo, Module, type Nothing, type Reg, type ReqResp, type WireOptions } from '../../sim/index.ts';
import type { LineReq, LineResp } from './mtt_cache.ts';
import { KLM_SIZE, klmBcount, klmKey, klmVa } from '../formats/klm.ts';

/** Walk the list at `xltAddr` (`count` entries) from entry `startIdx` at `offset` bytes into it. */
export interface KlmWalkReq {
  ctx: number;
  xltAddr: number;
  count: number;
  startIdx: number;
  offset: number;
}

/** The entry covering the offset: `(key, va)` with `avail` bytes left in it; or not found. */
export interface KlmWalkResp {
  ctx: number;
  found: boolean;
  idx: number;
  key: number;
  va: number;
  avail: number;
}

export const [KlmWalkerState, KLM] = enumType('klm_walker_state', ['IDLE', 'FETCH', 'WAIT_LINE', 'SCAN', 'RESPOND']);

/** Wiring of the walker: it reads KLM lists a line at a time through the MTT cache's line port. */
export type KlmWalkerOptions = WireOptions<{ readonly lines: ReqResp<LineReq, LineResp> }, Nothing>;

export class KlmWalker extends Module {
  readonly req: Fifo<KlmWalkReq>;
  readonly resp: Fifo<KlmWalkResp>;
  private readonly lineReq: Fifo<LineReq>;
  private readonly lineResp: Fifo<LineResp>;
  private readonly state: Reg;
  private readonly rKey: Reg;
  private readonly rIdx: Reg;
  private readonly rOffset: Reg;
  // the walk in progress
  private cur: KlmWalkReq | null = null;
  private idx = 0;
  private offset = 0;
  private line: DataView | null = null;
  private lineAddr = -1;
  private result: KlmWalkResp | null = null;
  private started = 0;
  private readonly sWalks;
  private readonly sScanned;
  private readonly sWalkLen;
  private readonly sWalkTime;

  constructor(parent: Module, name: string, opts: KlmWalkerOptions) {
    super(parent.sim, parent, name);
    this.state = this.stateReg('state', KlmWalkerState);
    this.rKey = this.probe('key', 32);
    this.rIdx = this.probe('entry', 32);
    this.rOffset = this.probe('offset', 32);
    this.req = new Fifo<KlmWalkReq>(this, 'req', { capacity: 4 });
    this.resp = new Fifo<KlmWalkResp>(this, 'resp', { capacity: 4 });
    this.req.consumer = this;
    this.resp.producer = this;
    this.lineReq = opts.ports.lines.req;
    this.lineResp = opts.ports.lines.resp;
    this.lineResp.consumer = this;
    this.lineReq.producer = this;
    this.sWalks = this.stats.counter('walks');
    this.sScanned = this.stats.counter('entries_scanned');
    this.sWalkLen = this.stats.histogram('walk_entries');
    this.sWalkTime = this.stats.histogram('walk_ps');
    this.clockedBy(opts.clock);
  }

  override tick(): void {
    switch (this.state.q) {
      case KLM.IDLE: {
        if (!this.req.canPop()) return this.sleep();
        const q = this.req.pop();
        this.cur = q;
        this.idx = q.startIdx;
        this.offset = q.offset;
        this.started = this.sim.now;
        // the line buffer lives for one walk only, so a UMR between walks cannot leave it stale
        this.lineAddr = -1;
        this.line = null;
        this.rOffset.set(Math.min(q.offset, 0xffffffff));
        this.rIdx.set(q.startIdx);
        this.state.set(this.nextStep());
        return;
      }
      case KLM.FETCH: {
        const la = this.entryAddr() - (this.entryAddr() % 64);
        if (this.lineReq.canPush()) {
          this.lineReq.push({ ctx: 0, lineAddr: la });
          this.state.set(KLM.WAIT_LINE);
        }
        return;
      }
      case KLM.WAIT_LINE: {
        if (!this.lineResp.canPop()) return; // woken by the response
        const r = this.lineResp.pop();
        this.line = new DataView(r.line.buffer, r.line.byteOffset, 64);
        this.lineAddr = r.lineAddr;
        this.state.set(KLM.SCAN);
        return;
      }
      case KLM.SCAN: {
        // one entry per cycle
        const off = this.entryAddr() % 64;
        const v = this.line!;
        const bcount = klmBcount(v, off);
        const key = klmKey(v, off);
        const va = klmVa(v, off);
        this.sScanned.inc();
        this.rIdx.set(this.idx);
        this.rKey.set(key);
        if (this.offset < bcount) {
          this.result = { ctx: this.cur!.ctx, found: true, idx: this.idx, key, va: va + this.offset, avail: bcount - this.offset };
          this.state.set(KLM.RESPOND);
          return;
        }
        // entries wholly before the offset (and empty ones) are skipped
        this.offset -= bcount;
        this.idx++;
        this.state.set(this.nextStep());
        return;
      }
      case KLM.RESPOND: {
        if (!this.resp.canPush()) return;
        this.resp.push(this.result!);
        this.sWalks.inc();
        this.sWalkLen.add(this.idx - this.cur!.startIdx + (this.result!.found ? 1 : 0));
        this.sWalkTime.add(this.sim.now - this.started);
        this.result = null;
        this.cur = null;
        this.state.set(KLM.IDLE);
        return;
      }
    }
  }

  /** After moving to entry `idx`: the end of the list, a line fetch, or a scan of the buffered line. */
  private nextStep(): number {
    if (this.idx >= this.cur!.count) {
      this.result = { ctx: this.cur!.ctx, found: false, idx: this.idx, key: 0, va: 0, avail: 0 };
      return KLM.RESPOND;
    }
    const la = this.entryAddr() - (this.entryAddr() % 64);
    return la === this.lineAddr ? KLM.SCAN : KLM.FETCH;
  }

  private entryAddr(): number {
    return this.cur!.xltAddr + this.idx * KLM_SIZE;
  }
}
