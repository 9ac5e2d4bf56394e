/** The built-in scenarios, in the order `npm run demo` runs them. */
import type { Scenario } from '../src/scenario.ts';
import kernelPipeline from './kernel_pipeline.ts';
import translation from './translation.ts';

export const scenarios: readonly Scenario[] = [kernelPipeline, translation];
