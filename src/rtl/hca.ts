/**
 * One simulated adapter (`tb.hcaN`) with its host: host physical memory and a process address
 * space, PCIe, ICM, and the translation pipeline (mkey cache, MTT, KLM walker, ATU), all on the
 * core clock. Modules are created in data-flow order, which is the order of the .gtkw groups.
 */
import { PayloadPool } from './memory/payload_pool.ts';
import { Clock, Module, type Sim } from '../sim/index.ts';
import { corePeriodPs, type HcaConfig } from './config.ts';
import { FRAME_SIZE, HostMem } from './memory/host_mem.ts';
import { HostSpace } from './memory/host_space.ts';
import { Pcie } from './memory/pcie.ts';
import { Icm } from './memory/icm.ts';
import { FwPages } from './firmware/fw_pages.ts';
import { MkeyCache } from './translation/mkey_cache.ts';
import { Mtt } from './translation/mtt_cache.ts';
import { KlmWalker } from './translation/klm_walker.ts';
import { Atu } from './translation/atu.ts';
import { Pagefault } from './translation/pagefault.ts';
import { DmaFence } from './translation/dma_fence.ts';
import { DmaChecker } from './memory/dma_check.ts';
import { Cmdif, type CmdifOptions } from './firmware/cmdif.ts';
import { IcmWriter } from './firmware/icm_writer.ts';
import { CqWriter, decodeCqArmDoorbell } from './completion/cq_writer.ts';
import { EqWriter } from './completion/eq_writer.ts';
import { EQE_DATA_SIZE } from './formats/eqe.ts';
import { EventType } from './formats/constants.ts';
import { CMD_IF_REV, IsegOff, TRACER_PAGES } from './formats/cmd_layout.ts';
import { Sq } from './transport/sq.ts';
import { Requester } from './transport/requester.ts';
import { Responder } from './transport/responder.ts';
import { UmrEngine, type UmrEngineOptions } from './umr/umr_engine.ts';
import type { QpTable } from './transport/qp_table.ts';

/** Options of an adapter beyond its configuration: firmware (cmdif) and UMR engine choices. */
export interface HcaOptions extends CmdifOptions {
  umr?: UmrEngineOptions;
}

/** The UAR page's doorbells: a send queue's producer counter (WQEBBs), a receive queue's (WQEs). */
export interface Uar {
  ringSq(qpn: number, pi: number): void;
  ringRq(qpn: number, pi: number): void;
  /** The 64-bit CQ doorbell at offset 0x20 (spec/mlx5.md "CQ arm"), as its high and low words. */
  ringCq(hi: number, lo: number): void;
  /** The EQ doorbell: offset 0x40 (update and arm) or 0x48 (update), value `(ci & 0xffffff) | eqn << 24`. */
  ringEq(offset: number, value: number): void;
}

/** The initialization segment's registers (32-bit MMIO, big-endian values; offsets of formats/cmd_layout.ts IsegOff). */
export interface InitSeg {
  read32(offset: number): number;
  write32(offset: number, value: number): void;
}

/** The interrupt controller as the driver sees it: one MSI-X vector per EQ. */
export interface Msix {
  /** request_irq: `handler` runs (in interrupt context, no simulated time) when the EQ's vector fires. */
  requestIrq(eqn: number, handler: () => void): void;
  /**
   * The device's catastrophic-error report (mlx5: a fatal syndrome in the initialization
   * segment's health buffer, which mlx5_core's health poll reads and answers with
   * mlx5_enter_error_state): `handler` runs when an EQ of this adapter overran.
   */
  onFatal(handler: (what: string) => void): void;
}

/** UAR offsets of the EQ doorbell (mlx5 MLX5_EQ_DOORBEL_OFFSET and the no-arm variant). */
export const UAR_EQ_ARM = 0x40;
export const UAR_EQ_UPDATE = 0x48;

/** Translation contexts of the ATU and outstanding misses per cache (assumed; no public figure). */
export const ATU_CONTEXTS = 8;
export const CACHE_MSHRS = 8;

export class Hca extends Module {
  readonly coreClock: Clock;
  readonly mem: HostMem;
  readonly host: HostSpace;
  readonly pcie: Pcie;
  readonly icm: Icm;
  /** The ICM pages the driver gave (MANAGE_PAGES) and the firmware's requests for more. */
  readonly pages: FwPages;
  readonly mkeyCache: MkeyCache;
  readonly mtt: Mtt;
  readonly klmWalker: KlmWalker;
  readonly atu: Atu;
  /** On-demand paging: faults stall their QP and go to the driver as PAGE_FAULT EQEs. */
  readonly pagefault: Pagefault;
  /**
   * The DMA fence: the data path's holds on what it translated; the driver drains it after an
   * invalidating UMR, before it lets the pages go.
   */
  readonly dmaFence: DmaFence;
  readonly cmdif: Cmdif;
  /** The one owner of ICM: commands and UMRs change mkey contexts and translation tables through it. */
  readonly icmWriter: IcmWriter;
  readonly sq: Sq;
  readonly requester: Requester;
  readonly responder: Responder;
  readonly cqWriter: CqWriter;
  readonly eqWriter: EqWriter;
  /**
   * The initialization segment (mlx5_init_seg, BAR 0 offset 0): the command queue's address and
   * size, the command doorbell, and (model-private) the firmware tracer's buffer.
   */
  readonly iseg: InitSeg;
  /** Interrupts: the EQs' MSI-X vectors. */
  readonly msix: Msix;
  readonly umrEngine: UmrEngine;
  /**
   * The doorbells software rings (MMIO writes to the UAR page, `doorbellPs` to arrive): with host
   * memory and firmware commands, all a driver touches of the adapter.
   */
  readonly uar: Uar;
  /** Payload buffers of the data-path engines (recycled, not allocated per message). */
  readonly payloads = new PayloadPool();

  /**
   * Turns the DMA-ownership checker (memory/dma_check.ts) on: every DMA the adapter makes to
   * host memory is checked against the frames' owners from now on. Returns the checker.
   */
  checkDma(): DmaChecker {
    this.pcie.checker ??= new DmaChecker(this.mem, this.path);
    return this.pcie.checker;
  }

  constructor(sim: Sim, parent: Module, name: string, readonly cfg: HcaConfig, opts: HcaOptions = {}) {
    super(sim, parent, name);
    const period = corePeriodPs(cfg);
    this.coreClock = new Clock(this, 'core_clk', period);
    this.mem = new HostMem(cfg.hostMemBytes, sim.rng.fork());
    this.host = new HostSpace(this.mem);
    this.icm = new Icm(this.mem, { mkeyEntries: cfg.icmMkeyEntries });
    const clock = this.coreClock;
    this.pcie = new Pcie(this, 'pcie', { clock, ports: {}, deps: { mem: this.icm }, cfg }); // host memory and ICM
    this.mkeyCache = new MkeyCache(this, 'mkey_cache', {
      clock,
      ports: { dma: this.pcie.port('mkey_cache', { tables: true }) },
      deps: { icm: this.icm },
      entries: cfg.mkeyCacheEntries,
      ways: cfg.mkeyCacheWays,
      hitCycles: cfg.mkeyCacheHitCycles,
      mshrs: CACHE_MSHRS,
    });
    this.mtt = new Mtt(this, 'mtt', {
      clock,
      ports: { dma: this.pcie.port('mtt', { tables: true }) },
      deps: {},
      lineBytes: cfg.mttCacheLineBytes,
      lines: cfg.mttCacheLines,
      ways: cfg.mttCacheWays,
      hitCycles: cfg.mttCacheHitCycles,
      mshrs: CACHE_MSHRS,
    });
    this.klmWalker = new KlmWalker(this, 'klm_walker', { clock, ports: { lines: { req: this.mtt.lineReq, resp: this.mtt.lineResp } }, deps: {} });
    this.atu = new Atu(this, 'atu', {
      clock,
      ports: { mkey: this.mkeyCache, mtt: this.mtt, klm: this.klmWalker },
      deps: {},
      contexts: ATU_CONTEXTS,
      maxIndirection: cfg.klmMaxIndirection,
    });
    this.icmWriter = new IcmWriter(this, 'icm_writer', {
      ports: {},
      deps: { mem: this.icm, icm: this.icm, mkeyCache: this.mkeyCache, mtt: this.mtt },
      destroyInvalidates: cfg.destroyInvalidates,
    });
    // the pages the driver gives the firmware with MANAGE_PAGES, from which ICM takes its own
    this.pages = new FwPages(this, 'pages');
    this.icm.pages = this.pages;
    this.cmdif = new Cmdif(this, 'cmdif', {
      // the command queue's entries and mailboxes in host memory (cmd_queue.ts)
      ports: { dma: this.pcie.port('cmd', { reqCapacity: 4, respCapacity: 4 }) },
      deps: {
        writer: this.icmWriter,
        icm: this.icm,
        pages: this.pages,
        hostBytes: cfg.hostMemBytes,
        pageOwned: (pa) => this.mem.firstUnowned(pa, FRAME_SIZE) === -1,
      },
      cfg,
      caps: opts.caps,
      onPageFaultResume: (qpn, flags) => {
        this.pagefault.resume(qpn, flags);
        opts.onPageFaultResume?.(qpn, flags);
      },
    });
    this.eqWriter = new EqWriter(this, 'eq_writer', { clock, ports: { dma: this.pcie.port('eq') }, deps: { eqs: this.cmdif } });
    this.cmdif.onCmdEqe = (data) => this.eqWriter.post({ eqn: -1, type: EventType.CMD, subType: 0, data });
    this.pages.raise = (data) => {
      if (!this.cmdif.eqList().some((eq) => ((eq.eventMask >>> EventType.PAGE_REQUEST) & 1) !== 0)) return false;
      this.eqWriter.post({ eqn: -1, type: EventType.PAGE_REQUEST, subType: 0, data });
      return true;
    };
    this.cqWriter = new CqWriter(this, 'cq_writer', {
      clock,
      ports: { dma: this.pcie.port('cq'), eq: this.eqWriter.req },
      // a CQ overrun moves every QP completing on it to ERR
      deps: { cqs: this.cmdif, mem: this.mem, onOverrun: (cqn) => this.cmdif.cqOverrun(cqn) },
    });
    // the QP table's error events: WQ_* EQEs with the QP number at data+24 (spec/mlx5.md "Other event data")
    this.cmdif.onQpEvent = (qpn, event) => {
      const data = new Uint8Array(EQE_DATA_SIZE);
      new DataView(data.buffer).setUint32(24, qpn & 0xffffff);
      this.eqWriter.post({ eqn: -1, type: EventType[event], subType: 0, data });
    };
    this.msix = {
      requestIrq: (eqn, handler) => this.eqWriter.requestIrq(eqn, handler),
      onFatal: (handler) => this.eqWriter.onFatal(handler),
    };
    // REG_MR has no PD check (the mlx5 UMR mask leaves the PD alone); a zero-length type-2 bind
    // is MW_BIND_ERR (o10-37.2.40), as the reference model has it
    this.umrEngine = new UmrEngine(this, 'umr_engine', {
      clock,
      ports: { dma: this.pcie.port('umr', { tables: true }) },
      deps: { icm: this.icm, writer: this.icmWriter, mem: this.mem },
      regMrPdCheck: false,
      type2Unbind: 'bind_error',
      ...opts.umr,
    });
    this.umrEngine.waveRank = 15;
    // the work queues and the RC data path (the link between adapters is the testbed's); each
    // engine gets its ports and the QP table, nothing else of the adapter
    const qps: QpTable = this.cmdif;
    const payloads = this.payloads;
    // the send queue engine is made after the requester it feeds: the staller reaches it late
    this.pagefault = new Pagefault(this, 'pagefault', {
      deps: { staller: { stallQp: (qpn) => this.sq.stallQp(qpn), resumeQp: (qpn) => this.sq.resumeQp(qpn) }, events: this.eqWriter },
    });
    const faults = this.pagefault;
    this.dmaFence = new DmaFence(this, 'dma_fence');
    const fence = this.dmaFence;
    // the data path's translations hold it per mkey (translation/atu.ts); invalidating UMRs
    // complete behind it (umr/umr_engine.ts)
    this.atu.fence = fence;
    this.umrEngine.fence = fence;
    this.cmdif.dmaFence = fence;
    this.requester = new Requester(this, 'requester', {
      clock,
      // the requester and responder take a read completion's data when they pop it
      ports: { atu: this.atu.port('requester', 8, true), dma: this.pcie.port('requester', { reqCapacity: 8, respCapacity: 16, reuseResponses: true }) },
      deps: { qps, payloads, faults, fence },
      contexts: cfg.requesterContexts,
      hcaIndex: Number(name.slice(3)),
      rnrTimerCode: cfg.rnrTimerCode,
      sgeCycles: cfg.requesterSgeCycles,
    });
    this.responder = new Responder(this, 'responder', {
      clock,
      ports: {
        atu: this.atu.port('responder', 8, true),
        dma: this.pcie.port('responder', { reqCapacity: 8, respCapacity: 16, reuseResponses: true }),
        cqWriter: this.cqWriter.req,
        // SEND_WITH_INV invalidates through the UMR engine, timed and cache-coherent like LOCAL_INV
        rinv: this.umrEngine.rinv,
      },
      deps: { qps, payloads, faults, fence },
      contexts: cfg.responderContexts,
    });
    this.sq = new Sq(this, 'sq', {
      clock,
      ports: {
        dma: this.pcie.port('sq', { reqCapacity: 4, respCapacity: 16 }),
        cqWriter: this.cqWriter.req,
        requester: this.requester,
        umr: this.umrEngine,
        flush: this.responder.flushReq,
      },
      deps: { qps },
      slots: cfg.sqWqeSlots,
      readWithInvalidate: cfg.readWithInvalidate,
    });
    const sqDb = this.sq.doorbell;
    const rqDb = this.responder.rqDoorbell;
    this.uar = {
      ringSq: (qpn, pi) => this.pcie.ringDoorbell(sqDb, { qpn, pi }),
      ringRq: (qpn, pi) => this.pcie.ringDoorbell(rqDb, { qpn, pi }),
      ringCq: (hi, lo) => this.pcie.ringDoorbell(this.cqWriter.armDoorbell, decodeCqArmDoorbell(hi >>> 0, lo >>> 0)),
      ringEq: (offset, value) => {
        if (offset !== UAR_EQ_ARM && offset !== UAR_EQ_UPDATE) return; // other offsets hold nothing here
        this.pcie.ringDoorbell(this.eqWriter.doorbell, { eqn: value >>> 24, ci: value & 0xffffff, arm: offset === UAR_EQ_ARM });
      },
    };
    const cmdq = this.cmdif.cmdq;
    this.iseg = {
      read32: (offset) => {
        switch (offset) {
          case IsegOff.CMDIF_REV_FW_SUB:
            return (CMD_IF_REV << 16) >>> 0;
          case IsegOff.CMDQ_ADDR_H:
            return Math.floor(cmdq.queueAddr / 2 ** 32);
          case IsegOff.CMDQ_ADDR_L_SZ:
            return cmdq.readAddrLSz();
          default:
            return 0; // fw_rev, initializing (ready) and the rest read as zero here
        }
      },
      write32: (offset, value) => {
        // posted MMIO: the doorbell reaches the firmware doorbellPs later, after the address writes
        if (offset === IsegOff.CMDQ_ADDR_H) cmdq.setQueueAddr('h', value);
        else if (offset === IsegOff.CMDQ_ADDR_L_SZ) cmdq.setQueueAddr('l', value);
        else if (offset >= IsegOff.TRACER_PAGE && offset < IsegOff.TRACER_PAGE + 8 * TRACER_PAGES) cmdq.setTracerWord((offset - IsegOff.TRACER_PAGE) >>> 2, value);
        else if (offset === IsegOff.CMD_DBELL) {
          const v = value >>> 0;
          sim.after(cfg.doorbellPs, { fire: () => cmdq.doorbell(v) });
        }
      },
    };
    // DESTROY_QP / DESTROY_CQ / DESTROY_EQ: the engines forget the object's queue state at once
    this.cmdif.destroyListeners.push((what, num) => {
      if (what === 'CQ') return this.cqWriter.forgetCq(num);
      if (what === 'EQ') return this.eqWriter.forgetEq(num);
      this.sq.forgetQp(num);
      this.pagefault.forgetQp(num);
      this.requester.forgetQp(num);
      this.responder.forgetQp(num);
    });
    this.cmdif.qpStateListeners.push((qpn) => this.sq.qpStateChanged(qpn));
    this.sq.waveRank = 1;
    this.requester.waveRank = 2;
    this.responder.waveRank = 3;
    this.cqWriter.waveRank = 40;
    this.eqWriter.waveRank = 41;
    // the .gtkw shows the pipeline in data-flow order (DESIGN.md "GTKWave save file")
    this.atu.waveRank = 10;
    this.pagefault.waveRank = 11;
    this.dmaFence.waveRank = 12;
    this.mkeyCache.waveRank = 20;
    this.mtt.waveRank = 30;
    this.klmWalker.waveRank = 31;
    this.pcie.waveRank = 90;
    this.cmdif.waveRank = 5;
  }
}
