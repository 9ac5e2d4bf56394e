/**
 * The transaction log against the waves: frwr traced both ways, each work request's stages are
 * in order and each stage's time is the edge of the signal that marks it in the VCD; firmware
 * commands start where cmdif's opcode does; odp-fault's page faults are logged and the faulting
 * WR translates again after the resume. The Perfetto file has a track per QP and per engine,
 * and `mlx5sim log` prints a WR's life.
 */
import { describe, expect, it, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { scenarios } from '../../../scenarios/index.ts';
import { readVcdFile } from '../../support/vcd_read.ts';
import { tempDir } from '../../support/tmp.ts';
import { readTxLog } from '../../../src/cli/log.ts';
import { runCli } from '../../../src/cli/cli.ts';
import { WR_STAGES, traceJsonPath, type CmdLine, type FaultLine, type WrLine } from '../../../src/driver/trace/txlog.ts';

/** Each signal's changes in time order, and its value at a time (the last change at or before it). */
function signals(changes: [number, string, number | null][]): {
  at: (path: string, t: number) => number | null;
  edgeAt: (path: string, t: number) => number[];
  rises: (path: string) => number[];
} {
  const by = new Map<string, [number, number | null][]>();
  for (const [t, p, v] of changes) {
    let l = by.get(p);
    if (l === undefined) by.set(p, (l = []));
    l.push([t, v]);
  }
  const list = (p: string): [number, number | null][] => {
    const l = by.get(p);
    if (l === undefined) throw new Error(`no signal ${p} in the VCD`);
    return l;
  };
  return {
    at: (p, t) => {
      let v: number | null = null;
      for (const [ct, cv] of list(p)) if (ct <= t) v = cv;
      return v;
    },
    edgeAt: (p, t) => list(p).filter(([ct]) => ct === t).map(([, v]) => v ?? -1),
    rises: (p) => list(p).filter(([, v], i, l) => i > 0 && (v ?? 0) > (l[i - 1][1] ?? 0)).map(([t]) => t),
  };
}

const byName = (n: string) => scenarios.find((s) => s.name === n)!;

describe('transaction log', () => {
  it('frwr: stages in order, at the edges of the signals that mark them in the waves', async () => {
    const dir = tempDir('mlx5sim-txlog-');
    const vcd = join(dir, 'frwr.vcd');
    const txlog = join(dir, 'frwr.txlog.jsonl');
    const r = await byName('frwr').run({ seed: 1, trace: { vcd, txlog } });
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    const lines = readTxLog(txlog);
    const wrs = lines.filter((l): l is WrLine => l.type === 'wr');
    const cmds = lines.filter((l): l is CmdLine => l.type === 'cmd');
    expect(wrs.length).toBeGreaterThanOrEqual(6);
    expect(wrs.some((w) => w.opcode === 'REG_MR') && wrs.some((w) => w.opcode === 'LOCAL_INV') && wrs.some((w) => w.opcode === 'RDMA_WRITE')).toBe(true);
    const s = signals((await readVcdFile(vcd)).changes);
    let wire = 0;
    for (const w of wrs) {
      const what = `WR ${w.wrId} (${w.opcode}, adapter ${w.hca} QP ${w.qp})`;
      const times = WR_STAGES.filter((k) => w.stages[k] !== undefined).map((k) => w.stages[k]!);
      expect(times, `${what}: stages in order`).toEqual([...times].sort((a, b) => a - b));
      expect(w.stages.posted, what).toBeDefined();
      const h = `tb.hca${w.hca}`;
      const st = w.stages;
      if (w.queue === 'recv') continue;
      // the send queue engine pops the doorbell FIFO (its count falls), then hands the WQE on
      expect(s.edgeAt(`${h}.sq.doorbell_count`, st.doorbell!).length, `${what}: doorbell`).toBeGreaterThan(0);
      if (st.started !== undefined) {
        expect(s.at(`${h}.sq.wqe_index`, st.started), `${what}: started`).toBe(w.wqeIndex);
        expect(s.at(`${h}.sq.qpn`, st.started), `${what}: started`).toBe(w.qp);
      }
      // the CQ writer's valid strobe is high in that cycle (back-to-back CQEs keep it high)
      if (st.cqeWritten !== undefined) expect(s.at(`${h}.cq_writer.cqe_valid`, st.cqeWritten), `${what}: CQE`).toBe(1);
      if (st.firstPacket !== undefined && w.tries === 1) {
        // the request link's packets in flight go up when the requester hands it the message;
        // its first packet leaves then, or once the link has sent the messages queued before it
        const handed = s.rises('tb.link_req.packets_in_flight').filter((t) => t <= st.firstPacket! && t >= st.translated!);
        expect(handed.length, `${what}: first packet`).toBeGreaterThan(0);
        if (handed.includes(st.firstPacket)) wire++;
      }
      if (st.acknowledged !== undefined) {
        const [before, after] = [s.at('tb.link_resp.packets_in_flight', st.acknowledged - 1)!, s.at('tb.link_resp.packets_in_flight', st.acknowledged)!];
        expect(after, `${what}: answer in`).toBeLessThan(before);
      }
    }
    // on an idle link the first packet leaves as the message is handed over
    expect(wire).toBeGreaterThanOrEqual(2);
    // a firmware command executes from `start`: cmdif's opcode shows it then
    // (MANAGE_PAGES runs in the firmware's page lane, which the cmdif signals do not show)
    const user = cmds.filter((c) => !c.background && c.op !== 'MANAGE_PAGES');
    expect(user.length).toBeGreaterThan(10);
    for (const c of user) {
      expect(c.posted <= c.start && c.start < c.end).toBe(true);
      expect(s.at(`tb.hca${c.hca}.cmdif.opcode`, c.start), `${c.op} at ${c.start}`).toBe(c.opcode);
    }

    // Perfetto: a process per adapter, a track per QP and per engine; stages nest in their WR
    const trace = JSON.parse(readFileSync(traceJsonPath(txlog), 'utf8')) as { traceEvents: { ph: string; name: string; pid: number; tid: number; ts: number; dur: number; args: { name?: string } }[] };
    const meta = trace.traceEvents.filter((e) => e.ph === 'M');
    expect(meta.filter((e) => e.name === 'process_name').map((e) => e.args.name).sort()).toEqual(['adapter 0', 'adapter 1']);
    const tracks = meta.filter((e) => e.name === 'thread_name').map((e) => e.args.name!);
    expect(tracks).toContain('firmware');
    expect(tracks).toContain('QP 0x100');
    expect(tracks).toContain('wire to adapter 0');
    const slices = trace.traceEvents.filter((e) => e.ph === 'X');
    expect(slices.filter((e) => e.name.startsWith('RDMA_WRITE wr')).length).toBe(wrs.filter((w) => w.opcode === 'RDMA_WRITE').length);
    for (const e of slices) expect(e.dur).toBeGreaterThanOrEqual(0);
    // on one track, slices either nest or follow each other
    const perTrack = new Map<string, typeof slices>();
    for (const e of slices) perTrack.set(`${e.pid}/${e.tid}`, [...(perTrack.get(`${e.pid}/${e.tid}`) ?? []), e]);
    for (const list of perTrack.values()) {
      // in whole ps (ts and dur are microseconds: a slice ending where the next begins is no overlap)
      const ps = list.map((e) => ({ name: e.name, t0: Math.round(e.ts * 1e6), t1: Math.round(e.ts * 1e6) + Math.round(e.dur * 1e6) }));
      for (const a of ps) for (const b of ps) {
        if (a === b) continue;
        const overlap = a.t0 < b.t1 && b.t0 < a.t1;
        const nests = (a.t0 >= b.t0 && a.t1 <= b.t1) || (b.t0 >= a.t0 && b.t1 <= a.t1);
        if (overlap) expect(nests, `${a.name} / ${b.name}`).toBe(true);
      }
    }

    // mlx5sim log: the table of one WR, every stage it passed
    const w = wrs.find((x) => x.opcode === 'RDMA_WRITE' && x.stages.polled !== undefined)!;
    const out: string[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((m: string) => void out.push(m));
    try {
      expect(await runCli(['log', txlog, '--wr', String(w.wrId), '--qp', `0x${w.qp.toString(16)}`])).toBe(0);
      expect(await runCli(['log', txlog, '--wr', '424242'])).toBe(1);
    } finally {
      spy.mockRestore();
    }
    const text = out.join('\n');
    expect(text).toContain(`WR ${w.wrId}: RDMA_WRITE on adapter ${w.hca}, QP 0x${w.qp.toString(16)}`);
    for (const stage of ['posted', 'doorbell', 'fetched', 'translated', 'first packet on the wire', 'acknowledged', 'CQE written', 'polled']) expect(text).toContain(stage);
    expect(text).toContain(`${(w.stages.polled! / 1e6).toFixed(6)} us`);
    expect(text).toMatch(/no work request with id 424242/);
  });

  it('odp-fault: page faults are logged; a faulting WR translates again after the resume, or ends in error with an ERROR resume', async () => {
    const dir = tempDir('mlx5sim-txlog-odp-');
    const txlog = join(dir, 'odp.txlog.jsonl');
    const r = await byName('odp-fault').run({ seed: 1, trace: { txlog } });
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    const lines = readTxLog(txlog);
    const faults = lines.filter((l): l is FaultLine => l.type === 'fault');
    expect(faults.length).toBeGreaterThan(0);
    for (const f of faults) expect(f.resumed !== undefined && f.resumed >= f.reported).toBe(true);
    const faulted = lines.filter((l): l is WrLine => l.type === 'wr' && (l.translation?.faults ?? 0) > 0);
    expect(faulted.length).toBeGreaterThan(0);
    for (const w of faulted) {
      const f = faults.find((x) => x.hca === w.hca && x.qp === w.qp && x.side === 'requestor' && x.wqeIndex === w.wqeIndex);
      expect(f, `the fault of WR ${w.wrId}`).toBeDefined();
      if (w.translation!.outcome === 'ok') {
        expect(f!.ok).toBe(true);
        expect(w.stages.translated!).toBeGreaterThanOrEqual(f!.resumed!);
        expect(w.status).toBe('SUCCESS');
      } else {
        expect(f!.ok).toBe(false);
        expect(w.stages.cqeWritten!).toBeGreaterThanOrEqual(f!.resumed!);
        expect(w.status).toBe('LOCAL_ACCESS_ERR');
      }
    }
    expect(faulted.some((w) => w.translation!.outcome === 'ok')).toBe(true);
    expect(faults.some((f) => f.side === 'responder' && f.va !== undefined)).toBe(true);
  });
});
