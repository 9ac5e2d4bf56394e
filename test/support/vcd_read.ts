/**
 * Reads a VCD back with vcd-stream (the parser users' tools use; its wasm build, so no native
 * addon is needed) and checks it strictly, because viewers silently accept broken files:
 * timestamps strictly increase, every value change uses a declared id, values fit their width.
 */
import { readFileSync } from 'node:fs';
import createVCD from 'vcd-stream/out/vcd.js';
import webVcdParser, { type VcdScope, type VcdVar } from 'vcd-stream/lib/web-vcd-parser.js';

/** A declared variable: full dotted path (without `[msb:lsb]`), width, id. */
export interface VcdDecl {
  path: string;
  width: number;
  id: string;
}

/** A parsed VCD: declarations, scopes, and every value change in file order. */
export interface ParsedVcd {
  decls: VcdDecl[];
  scopes: string[];
  timescale: string;
  /** [time, path, value]; x/z values are reported as null. */
  changes: [number, string, number | null][];
  /** The `#` timestamps in file order. */
  times: number[];
}

let wasm: Promise<unknown> | null = null;
/** Bytes handed to the parser at a time. */
const VCD_CHUNK = 16 * 1024;

// vcd-stream command codes for value changes (from its parser): 14 '0', 15 '1', 16 'x', 17 'z', 30 'b'.
const CMD_0 = 14;
const CMD_1 = 15;

/** Parses VCD text with vcd-stream, then applies the strict checks; throws on the first problem. */
export async function readVcd(text: string): Promise<ParsedVcd> {
  wasm ??= createVCD();
  const p = await webVcdParser(await wasm);
  const raw: [bigint, string, number, bigint | undefined, bigint | undefined][] = [];
  p.change.any((id, time, cmd, value, mask) => raw.push([time, id, cmd, value, mask]));
  await new Promise<void>((resolve, reject) => {
    p.on('error', reject);
    p.on('finish', () => resolve());
    // in pieces: the parser's binding copies each chunk onto the wasm stack (ccall 'array'),
    // which a VCD of more than ~128 KiB overflows, corrupting the values it reports. The header
    // goes whole (a declaration split between chunks comes out twice), the changes in pieces
    // ending at a line's end
    const buf = Buffer.from(text);
    const endDefs = buf.indexOf('$enddefinitions');
    let at = endDefs < 0 ? buf.length : buf.indexOf('\n', endDefs) + 1 || buf.length;
    p.write(buf.subarray(0, at));
    while (at < buf.length) {
      let end = Math.min(buf.length, at + VCD_CHUNK);
      if (end < buf.length) end = buf.indexOf('\n', end) + 1 || buf.length;
      p.write(buf.subarray(at, end));
      at = end;
    }
    p.end();
  });
  const decls: VcdDecl[] = [];
  const scopes: string[] = [];
  const walk = (node: VcdScope, prefix: string): void => {
    for (const b of node.body) {
      if (b.kind === 'scope') {
        const path = prefix ? `${prefix}.${b.name}` : b.name;
        scopes.push(path);
        walk(b, path);
      } else {
        const v = b as VcdVar;
        decls.push({ path: `${prefix}.${v.name}`, width: v.size, id: v.link });
      }
    }
  };
  walk(p.info.wires, '');
  const byId = new Map<string, VcdDecl>();
  for (const d of decls) {
    if (byId.has(d.id)) throw new Error(`VCD declares id ${d.id} twice`);
    byId.set(d.id, d);
  }
  const changes: [number, string, number | null][] = [];
  let last = -1;
  // vcd-stream's times stop at 2^32 - 1 ps (4.3 ms): take each change's time from the text's
  // own timestamps, which hold it exactly (the changes come in the text's order)
  const valueTimes: number[] = [];
  const times = strictTimes(text, byId, valueTimes);
  if (valueTimes.length !== raw.length) throw new Error(`VCD: vcd-stream saw ${raw.length} value changes, the text has ${valueTimes.length}`);
  for (let i = 0; i < raw.length; i++) {
    const [t, id, cmd, value, mask] = raw[i];
    const time = valueTimes[i];
    if (Number(t) !== time && Number(t) < 2 ** 32 - 1) throw new Error(`VCD: vcd-stream's time ${String(t)} differs from the text's #${time}`);
    if (time < last) throw new Error(`VCD time goes backwards: ${time} after ${last}`);
    last = time;
    const d = byId.get(id);
    if (!d) throw new Error(`VCD value change at ${time} uses undeclared id '${id}'`);
    let v: number | null;
    if (cmd === CMD_0 || cmd === CMD_1) {
      if (d.width !== 1) throw new Error(`VCD scalar change for ${d.path} of width ${d.width}`);
      v = cmd - CMD_0;
    } else if (value !== undefined) {
      if (mask !== undefined && mask !== 0n) v = null;
      else {
        if (value >= 1n << BigInt(d.width)) throw new Error(`VCD value ${value} of ${d.path} exceeds ${d.width} bits`);
        v = Number(value);
      }
    } else v = null;
    changes.push([time, d.path, v]);
  }
  return { decls, scopes, timescale: (p.info.timescale ?? '').trim(), changes, times };
}

/**
 * The checks vcd-stream does not do, on the text itself: `#` timestamps strictly increase, and
 * every value line's id is declared (vcd-stream drops changes of unknown ids silently).
 */
function strictTimes(text: string, byId: Map<string, VcdDecl>, valueTimes: number[] = []): number[] {
  const body = text.slice(text.indexOf('$enddefinitions'));
  const times: number[] = [];
  for (const line of body.split('\n').slice(1)) {
    if (line === '' || line.startsWith('$')) continue;
    if (line[0] === '#') {
      const t = Number(line.slice(1));
      if (!Number.isSafeInteger(t)) throw new Error(`VCD bad timestamp '${line}'`);
      if (times.length && t <= times[times.length - 1]) {
        throw new Error(`VCD timestamps do not strictly increase: #${t} after #${times[times.length - 1]}`);
      }
      times.push(t);
      continue;
    }
    let id: string;
    let bits: string;
    if (line[0] === 'b' || line[0] === 'B') {
      const sp = line.indexOf(' ');
      bits = line.slice(1, sp);
      id = line.slice(sp + 1);
    } else {
      bits = line[0];
      id = line.slice(1);
    }
    const d = byId.get(id);
    if (!d) throw new Error(`VCD value change '${line}' uses undeclared id '${id}'`);
    if (bits.length > d.width) throw new Error(`VCD value '${bits}' of ${d.path} is wider than ${d.width} bits`);
    valueTimes.push(times.length > 0 ? times[times.length - 1] : 0);
  }
  return times;
}

/** readVcd on a file. */
export function readVcdFile(path: string): Promise<ParsedVcd> {
  return readVcd(readFileSync(path, 'utf8'));
}

/** The value of every signal after each timestamp, as a map time -> path -> value (last wins). */
export function valuesByTime(v: ParsedVcd): Map<number, Map<string, number | null>> {
  const out = new Map<number, Map<string, number | null>>();
  for (const [t, p, x] of v.changes) {
    let m = out.get(t);
    if (!m) out.set(t, (m = new Map()));
    m.set(p, x);
  }
  return out;
}
