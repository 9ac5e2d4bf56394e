/**
 * A translation testbed: one HCA, a model mkey table loaded into its ICM, and a software
 * process that sends ATU requests on a port and collects the results by tag.
 */
import { Sim, Tracer, type TraceOptions } from '../../src/sim/index.ts';
import { Hca } from '../../src/rtl/hca.ts';
import { resolveConfig, type HcaConfig } from '../../src/rtl/config.ts';
import type { AtuPort } from '../../src/rtl/translation/atu.ts';
import type { AtuResult } from '../../src/rtl/translation/atu_types.ts';
import type { ModelMkey, XlateRequest } from '../../src/model/index.ts';
import { loadMkeys } from './icm_loader.ts';

export interface XlateBench {
  sim: Sim;
  hca: Hca;
  port: AtuPort;
  tracer: Tracer | null;
  /** Sends the requests (all at once: they overlap in the ATU's contexts); results in request order, with their completion times. */
  translate(reqs: readonly XlateRequest[]): Promise<{ results: AtuResult[]; doneAt: number[] }>;
}

export function xlateBench(table: readonly ModelMkey[], config: Partial<HcaConfig> = {}, seed = 1, trace?: TraceOptions): XlateBench {
  const sim = new Sim({ seed });
  // the send queue engine, requester and responder are idle here: few slots and contexts (their
  // defaults are ~1 MB of buffers an adapter, and the property tests make a thousand adapters)
  const idle = { sqWqeSlots: 16, requesterContexts: 4, responderContexts: 4 };
  const hca = new Hca(sim, sim.top, 'hca0', resolveConfig({ icmMkeyEntries: 2 ** 24, hostMemBytes: 2 ** 41, ...idle, ...config }));
  const port = hca.atu.port('test', 8);
  loadMkeys(hca, table);
  const tracer = trace ? new Tracer(sim, trace) : null;
  return {
    sim,
    hca,
    port,
    tracer,
    async translate(reqs) {
      const results: AtuResult[] = new Array(reqs.length);
      const doneAt: number[] = new Array(reqs.length);
      const collector = sim.spawn(async () => {
        for (let n = 0; n < reqs.length; n++) {
          const r = await port.resp.popWait();
          results[r.tag] = r.result;
          doneAt[r.tag] = sim.now;
        }
      });
      for (let i = 0; i < reqs.length; i++) await port.req.pushWait({ ...reqs[i], tag: i });
      await collector;
      return { results, doneAt };
    },
  };
}
