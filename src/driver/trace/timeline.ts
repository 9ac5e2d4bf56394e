/**
 * A Chrome trace-event file (the JSON Perfetto and chrome://tracing open): slices on named
 * tracks of a process per adapter. Slices of one track that overlap (work requests of a QP in
 * flight together) go on lanes, `QP 0x12`, `QP 0x12 #2`, ..., so each lane nests properly.
 */
import { writeFileSync } from 'node:fs';

interface Slice {
  pid: number;
  track: string;
  name: string;
  start: number;
  end: number;
  args: Record<string, unknown>;
  children: readonly { name: string; start: number; end: number }[];
  order: number;
}

/** ps to the format's microseconds (fractions carry the nanoseconds and below). */
const us = (ps: number): number => ps / 1e6;

export class Timeline {
  private readonly slices: Slice[] = [];

  slice(pid: number, track: string, name: string, start: number, end: number, args: Record<string, unknown> = {}, children: Slice['children'] = []): void {
    this.slices.push({ pid, track, name, start, end, args, children, order: this.slices.length });
  }

  /** The trace-event JSON: metadata naming processes and tracks, then complete ('X') events. */
  toJson(): string {
    const sorted = [...this.slices].sort((a, b) => a.start - b.start || a.order - b.order);
    // lanes per (pid, track): the first whose last slice has ended
    const lanes = new Map<string, number[]>();
    const tids = new Map<string, number>();
    const events: unknown[] = [];
    const pids = new Set<number>();
    const meta: unknown[] = [];
    const tidOf = (pid: number, name: string): number => {
      const k = `${pid}/${name}`;
      let t = tids.get(k);
      if (t === undefined) {
        t = tids.size + 1;
        tids.set(k, t);
        meta.push({ ph: 'M', name: 'thread_name', pid, tid: t, args: { name } });
        meta.push({ ph: 'M', name: 'thread_sort_index', pid, tid: t, args: { sort_index: t } });
      }
      return t;
    };
    for (const s of sorted) {
      if (!pids.has(s.pid)) {
        pids.add(s.pid);
        meta.push({ ph: 'M', name: 'process_name', pid: s.pid, args: { name: `adapter ${s.pid}` } });
      }
      const k = `${s.pid}/${s.track}`;
      let ends = lanes.get(k);
      if (ends === undefined) lanes.set(k, (ends = []));
      let lane = ends.findIndex((e) => e <= s.start);
      if (lane < 0) lane = ends.push(s.end) - 1;
      else ends[lane] = s.end;
      const tid = tidOf(s.pid, lane === 0 ? s.track : `${s.track} #${lane + 1}`);
      events.push({ ph: 'X', name: s.name, cat: s.track.split(' ')[0], pid: s.pid, tid, ts: us(s.start), dur: us(s.end - s.start), args: s.args });
      for (const c of s.children) events.push({ ph: 'X', name: c.name, cat: 'stage', pid: s.pid, tid, ts: us(c.start), dur: us(c.end - c.start) });
    }
    return `{"displayTimeUnit":"ns","traceEvents":[\n${[...meta, ...events].map((e) => JSON.stringify(e)).join(',\n')}\n]}\n`;
  }

  write(path: string): void {
    writeFileSync(path, this.toJson());
  }
}
