/**
 * The `--config cfg.json` path of the command line (API.md "Command line"): the file is read as
 * a JSON object, and the scenario's Testbed validates it with resolveConfig, whose error names
 * the field (the CLI prints it and exits 1).
 */
import { describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readConfigFile } from '../../src/cli/config_file.ts';
import { resolveConfig, type HcaConfig } from '../../src/rtl/config.ts';
import { scenarios } from '../../scenarios/index.ts';
import { tempDir } from '../support/tmp.ts';

function cfgFile(text: string): string {
  const p = join(tempDir('mlx5sim-cfg-'), 'cfg.json');
  writeFileSync(p, text);
  return p;
}

describe('--config cfg.json', () => {
  it('readWithInvalidate: a boolean is taken, anything else names the field', async () => {
    const ok = readConfigFile(cfgFile('{"readWithInvalidate": true}'));
    expect(resolveConfig(ok as Partial<HcaConfig>).readWithInvalidate).toBe(true);
    // the file is checked as it is read (`mlx5sim run --config bad.json` exits 2 naming the field)
    expect(() => readConfigFile(cfgFile('{"readWithInvalidate": "yes"}'))).toThrow('config.readWithInvalidate: must be a boolean, got "yes"');
    // and a configuration given to a scenario directly is refused by its run
    const s = scenarios.find((x) => x.name === 'send-with-inv')!;
    await expect(s.run({ seed: 1, config: { readWithInvalidate: 'yes' } as unknown as Partial<HcaConfig> })).rejects.toThrow(/config\.readWithInvalidate: must be a boolean/);
  });
});
