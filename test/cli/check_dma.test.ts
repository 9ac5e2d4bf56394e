/** `mlx5sim run --check-dma`: the DMA-ownership checker on for the run's testbeds (issue 17). */
import { describe, expect, it } from 'vitest';
import { parseArgs } from '../../src/cli/args.ts';

describe('--check-dma', () => {
  it('is a flag of run (off without it)', () => {
    expect(parseArgs(['run', 'frwr', '--check-dma'])).toMatchObject({ cmd: 'run', target: 'frwr', checkDma: true });
    expect(parseArgs(['run', 'frwr'])).toMatchObject({ cmd: 'run', checkDma: false });
  });
});
