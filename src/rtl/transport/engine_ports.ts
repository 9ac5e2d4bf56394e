/**
 * The memory-side connections of a data-path engine (requester, responder): its own ATU port
 * and PCIe port, with the engine woken by their answers and by room in their request queues,
 * and a DmaMover over the PCIe port.
 */
import type { Module } from '../../sim/index.ts';
import type { Hca } from '../hca.ts';
import type { AtuPort } from '../translation/atu.ts';
import type { DmaPort } from '../memory/pcie.ts';
import { DmaMover } from '../memory/dma_mover.ts';

export interface EnginePorts {
  atu: AtuPort;
  port: DmaPort;
  mover: DmaMover;
}

/** Opens `name`'s ports on the adapter's ATU and PCIe for `engine`. */
export function enginePorts(engine: Module, hca: Hca, name: string): EnginePorts {
  const atu = hca.atu.port(name, 8);
  atu.resp.consumer = engine;
  const port = hca.pcie.port(name, { reqCapacity: 8, respCapacity: 16 });
  port.resp.consumer = engine;
  port.req.producer = engine;
  return { atu, port, mover: new DmaMover(port, hca.payloads) };
}
