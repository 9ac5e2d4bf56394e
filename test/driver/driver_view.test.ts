/**
 * The driver sees only what mlx5_ib sees: host memory, doorbells (the UAR), the initialization
 * segment (the command queue's registers and doorbell; commands are bytes in host memory),
 * interrupts (an MSI-X vector per EQ) and the adapter's configuration it was built with. It never reads an engine's state: a
 * CQE is found by its owner bit in host memory, queue room by its own counters, a QP's state
 * by its commands, its error completions and QUERY_QP.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Access, Testbed } from '../../src/index.ts';
import { rcPair } from '../support/rc_pair.ts';

const DRIVER = join(import.meta.dirname, '../../src/driver');
// (no dmaFence: an invalidating UMR's completion, and DESTROY_MKEY's, wait for the DMA
// translated through the old entries in the adapter itself, issue 18 item 5; no cmdif: commands
// are bytes in the command queue, rung through the initialization segment, iseg)
const ALLOWED = new Set(['host', 'mem', 'uar', 'iseg', 'cfg', 'msix']);

describe('the driver sees only what mlx5_ib sees', () => {
  it('touches the adapter only through host memory, the UAR doorbells, the initialization segment, interrupts (MSI-X) and its configuration', () => {
    const seen: string[] = [];
    // trace/ is the user's instruments (pcap, txlog): taps on the engines, not the driver
    const files = readdirSync(DRIVER, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.ts') && !n.startsWith('trace/')).sort();
    expect(files).toContain('core/cmd.ts');
    for (const f of files) {
      const text = readFileSync(join(DRIVER, f), 'utf8');
      // (`rtl/hca.ts` in an import path is not a member)
      for (const m of text.matchAll(/\bhca\.([A-Za-z_]+)\b(?!')/g)) if (!ALLOWED.has(m[1]) && m[1] !== 'ts') seen.push(`${f}: hca.${m[1]}`);
      // no cmdif method at all: commands are entries and mailboxes in host memory (core/cmd.ts)
      for (const m of text.matchAll(/\bcmdif\.([A-Za-z_]+)/g)) seen.push(`${f}: cmdif.${m[1]}`);
    }
    expect(seen).toEqual([]);
  });

  it('sends firmware commands only through the core part (core/cmd.ts, mlx5_core cmd.c), and only as bytes', () => {
    const seen: string[] = [];
    for (const f of readdirSync(DRIVER, { recursive: true, encoding: 'utf8' }).filter((n) => n.endsWith('.ts')).sort()) {
      const text0 = readFileSync(join(DRIVER, f), 'utf8');
      // the queue's doorbell and the payload encoders belong to core/cmd.ts alone
      if (f !== 'core/cmd.ts' && /\bCMD_DBELL\b|\bencodeCmdInput\b|\bdecodeCmdOutput\b/.test(text0)) seen.push(`${f}: posts commands itself`);
      if (f === 'core/cmd.ts') {
        expect(text0).toMatch(/\bencodeCmdInput\(/);
        expect(text0).toMatch(/IsegOff\.CMD_DBELL/);
        if (/\bcmdif\b/.test(text0.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ''))) seen.push(`${f}: names cmdif`);
        continue;
      }
      // the command tap of the transaction log (trace/) observes, it sends nothing
      const text = readFileSync(join(DRIVER, f), 'utf8').replace(/\bh\.cmdif\.tap\b/g, '');
      for (const m of text.matchAll(/\bcmdif\.(exec|execBackground)\b/g)) seen.push(`${f}: cmdif.${m[1]}`);
    }
    expect(seen).toEqual([]);
  });

  it("a responder moved to ERR by a remote access error: its driver learns it from QUERY_QP, the requester's from its error completion", async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const { pd0, pd1, cq0, qp0, qp1 } = await rcPair(tb);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE); // no REMOTE_WRITE
      qp0.postSend({ wrId: 1, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 8, lkey: mr0.lkey }], remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
      await tb.quiesce();
      expect(qp0.state).toBe('RTS'); // the error completion is in host memory, not polled yet
      expect((await cq0.wait(1)).map((w) => w.status)).toEqual(['REM_ACCESS_ERR']);
      expect(qp0.state).toBe('ERR');
      expect(qp1.state).toBe('RTS'); // nothing told qp1's driver
      const q = await qp1.query();
      expect(q.state).toBe('ERR');
      expect(q.remoteQpn).toBe(qp0.qpNum);
      expect(qp1.state).toBe('ERR');
    });
  });

  it('receive queue room comes back when receive completions are polled', async () => {
    const tb = new Testbed({ hcas: 2, config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
      const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
      const [cq0, cq1] = [await c0.createCq(16), await c1.createCq(16)];
      const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
      const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1, maxRecvWr: 2 });
      await qp0.connect(qp1);
      const a = tb.host(0).alloc(4096);
      const b = tb.host(1).alloc(4096);
      const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
      const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE);
      const recv = (id: number): void => qp1.postRecv({ wrId: id, sgList: [{ addr: b.addr, length: 64, lkey: mr1.lkey }] });
      recv(1);
      recv(2);
      expect(() => recv(3)).toThrow(/receive queue full/);
      qp0.postSend({ wrId: 9, opcode: 'SEND', sgList: [{ addr: a.addr, length: 16, lkey: mr0.lkey }], signaled: true });
      await tb.quiesce();
      expect(() => recv(3)).toThrow(/receive queue full/); // consumed, but not polled
      expect((await cq1.wait(1)).map((w) => w.wrId)).toEqual([1]);
      expect(() => recv(3)).not.toThrow();
    });
  });
});
