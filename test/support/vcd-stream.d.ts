// vcd-stream ships no types; these cover the wasm build used by the tests.
declare module 'vcd-stream/out/vcd.js' {
  const createVCD: () => Promise<unknown>;
  export default createVCD;
}
declare module 'vcd-stream/lib/web-vcd-parser.js' {
  import type { Writable } from 'node:stream';
  interface VcdScope { kind: 'scope'; type: string; name: string; body: (VcdScope | VcdVar)[] }
  interface VcdVar { kind: 'var'; type: string; size: number; link: string; name: string }
  interface VcdParser extends Writable {
    info: { wires: VcdScope; timescale?: string; version?: string; date?: string };
    change: { any(fn: (id: string, time: bigint, cmd: number, value?: bigint, mask?: bigint) => void): void };
    getTime(): bigint;
  }
  const webVcdParser: (mod: unknown) => Promise<VcdParser>;
  export default webVcdParser;
  export type { VcdScope, VcdVar, VcdParser };
}
