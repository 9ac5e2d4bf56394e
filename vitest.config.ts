import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // every core (vitest leaves one idle by default: on a 2-core machine the files ran one at a
    // time, 180 s against 140 s); the tests are CPU-bound simulations with no timing asserts
    maxWorkers: availableParallelism(),
  },
});
