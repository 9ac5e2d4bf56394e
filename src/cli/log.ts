/**
 * `mlx5sim log <file> --wr <id> [--qp <n>]`: one work request's life from a transaction log
 * (`run --txlog`), as a table of its stages with the time of each and the time since the
 * previous one. Exit 1 when no work request matches.
 */
import { readFileSync } from 'node:fs';
import { formatPs } from '../sim/time.ts';
import { WR_STAGES, type TxLine, type WrLine, type WrStage } from '../driver/trace/txlog.ts';
import { UsageError, type LogArgs } from './args.ts';

const STAGE_TEXT: Record<WrStage, string> = {
  posted: 'posted (WQE written)',
  doorbell: 'doorbell (send queue engine)',
  fetched: 'fetched (WQE read, parsed)',
  started: 'started (to its engine)',
  translated: 'translated (lkeys)',
  firstPacket: 'first packet on the wire',
  lastPacket: 'last packet on the wire',
  acknowledged: 'acknowledged (answer in)',
  cqeWritten: 'CQE written',
  polled: 'polled',
};

const hex = (n: number): string => `0x${n.toString(16)}`;
/** An absolute simulated time, to the picosecond, in microseconds. */
const at = (ps: number): string => `${(ps / 1e6).toFixed(6)} us`;

/** The lines of a transaction log. */
export function readTxLog(file: string): TxLine[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  const out: TxLine[] = [];
  text.split('\n').forEach((l, i) => {
    if (l.trim() === '') return;
    try {
      out.push(JSON.parse(l) as TxLine);
    } catch {
      throw new UsageError(`${file}: line ${i + 1} is not JSON (is it a transaction log, x.txlog.jsonl?)`);
    }
  });
  return out;
}

/** One work request's life as a table (the rows `mlx5sim log` prints). */
export function wrTable(w: WrLine): string[] {
  const head = [
    `WR ${w.wrId}: ${w.opcode} on adapter ${w.hca}, QP ${hex(w.qp)} (${w.queue} queue, WQE ${w.wqeIndex}), ${w.length} bytes` +
      `${w.lkeys.length ? `, lkey ${w.lkeys.map(hex).join(' ')}` : ''}${w.rkey !== undefined ? `, rkey ${hex(w.rkey)}` : ''}` +
      `${w.invalidateRkey !== undefined ? `, invalidates ${hex(w.invalidateRkey)}` : ''}` +
      `${w.remoteAddr !== undefined ? `, remote ${hex(w.remoteAddr)}` : ''}${w.signaled ? '' : ', unsignaled'}`,
  ];
  const rows: string[][] = [['stage', 'time', 'since previous', 'since posted', 'detail']];
  const t0 = w.stages.posted ?? 0;
  let prev = t0;
  for (const s of WR_STAGES) {
    const t = w.stages[s];
    if (t === undefined) continue;
    let note = '';
    if (s === 'translated' && w.translation) {
      const tr = w.translation;
      note = `mkey ${tr.mkeyMisses ? `miss x${tr.mkeyMisses}` : 'hit'}, MTT ${tr.mttMisses ? `miss x${tr.mttMisses}` : 'hit'}${tr.faults ? `, ${tr.faults} page fault(s)` : ''}${tr.outcome !== 'ok' ? `, ${tr.outcome}` : ''}`;
    }
    if (s === 'lastPacket' && w.packets !== undefined) note = `${w.packets} packet(s)${(w.tries ?? 1) > 1 ? `, sent ${w.tries} times` : ''}`;
    if (s === 'acknowledged' && w.answer) note = w.answer;
    if (s === 'cqeWritten' && w.status) note = w.status;
    rows.push([STAGE_TEXT[s], at(t), s === 'posted' ? '' : `+${formatPs(t - prev)}`, s === 'posted' ? '' : `+${formatPs(t - t0)}`, note]);
    prev = t;
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const body = rows.map((r) => r.map((c, i) => (i === 2 || i === 3 || i === 1 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd());
  body.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  return [...head, ...body];
}

export function logCommand(a: LogArgs): number {
  const lines = readTxLog(a.file);
  const wrs = lines.filter((l): l is WrLine => l.type === 'wr' && String(l.wrId) === a.wr && (a.qp === undefined || l.qp === a.qp));
  if (wrs.length === 0) {
    const n = lines.filter((l) => l.type === 'wr').length;
    console.log(`no work request with id ${a.wr}${a.qp !== undefined ? ` on QP ${hex(a.qp)}` : ''} in ${a.file} (${n} work requests)`);
    return 1;
  }
  wrs.forEach((w, i) => {
    if (i > 0) console.log('');
    for (const l of wrTable(w)) console.log(l);
  });
  if (wrs.length > 1 && a.qp === undefined) console.log(`\n${wrs.length} work requests have id ${a.wr}: --qp <n> picks one QP's`);
  return 0;
}
