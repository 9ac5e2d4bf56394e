/** The built-in experiments of `mlx5sim sweep`, one file each, in the order of spec/timing.md's shapes. */
import type { Experiment } from '../src/experiment.ts';
import mttCliff from './mtt_cliff.ts';
import mrCount from './mr_count.ts';
import deregStorm from './dereg_storm.ts';
import odpLatency from './odp_latency.ts';
import odpPrefetch from './odp_prefetch.ts';
import sgeVsKlm from './sge_vs_klm.ts';
import indirection from './indirection.ts';

export const experiments: readonly Experiment[] = [mttCliff, mrCount, deregStorm, odpLatency, odpPrefetch, sgeVsKlm, indirection];
