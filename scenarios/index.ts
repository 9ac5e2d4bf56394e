/** The built-in scenarios, in the order `npm run demo` runs them. */
import type { Scenario } from '../src/scenario.ts';
import kernelPipeline from './kernel_pipeline.ts';
import translation from './translation.ts';
import frwr from './frwr.ts';
import sendWithInv from './send_with_inv.ts';
import mwType1 from './mw_type1.ts';
import mwType2 from './mw_type2.ts';
import sgGaps from './sg_gaps.ts';
import badKeys from './bad_keys.ts';
import readWithInv from './read_with_inv.ts';
import odpFault from './odp_fault.ts';
import odpInvalidate from './odp_invalidate.ts';
import odpPrefetch from './odp_prefetch.ts';
import odpImplicit from './odp_implicit.ts';
import cqEvents from './cq_events.ts';

export const scenarios: readonly Scenario[] = [kernelPipeline, translation, frwr, sendWithInv, mwType1, mwType2, sgGaps, badKeys, readWithInv, odpFault, odpInvalidate, odpPrefetch, odpImplicit, cqEvents];
