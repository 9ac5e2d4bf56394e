/**
 * The command queue with several entries in flight (issue 19 item 1; mlx5 uses up to
 * MLX5_MAX_COMMANDS = 32): commands the driver sends together sit in their own entries, each
 * handed to the hardware (the ownership bit) at once, and each gets its own answer.
 */
import { describe, expect, it } from 'vitest';
import { Testbed } from '../../src/index.ts';
import { CMD_BG_FIRST, CMD_ENTRY_BYTES, CMD_OWNER_HW, CmdEntryOff, MLX5_MAX_COMMANDS } from '../../src/rtl/formats/cmd_layout.ts';

describe('command entries in flight', () => {
  it('40 commands at once: more than one entry is the hardware\'s at a time, never more than the ordinary lane holds, and each gets its own PD', async () => {
    const tb = new Testbed({ config: { mrCacheLimit: 0 } });
    await tb.run(async () => {
      const ctx = await tb.openDevice(0);
      await tb.quiesce();
      const host = tb.host(0);
      const ownedNow = (): number => {
        let n = 0;
        for (let i = 0; i < MLX5_MAX_COMMANDS; i++) if ((host.read(ctx.cmdq.queueAddress + i * CMD_ENTRY_BYTES + CmdEntryOff.STATUS_OWN, 1)[0] & CMD_OWNER_HW) !== 0) n++;
        return n;
      };
      expect(ownedNow()).toBe(0);
      const pending = Array.from({ length: 40 }, () => ctx.cmdq.exec({ op: 'ALLOC_PD' }));
      await tb.delay(1_000_000); // 1 us: every doorbell has been rung, no command has finished
      const owned = ownedNow();
      expect(owned).toBeGreaterThan(1);
      expect(owned).toBeLessThanOrEqual(CMD_BG_FIRST); // the ordinary lane's entries (the cache's and the page lane's are apart)
      const pds = (await Promise.all(pending)).map((r) => r.pd);
      expect(new Set(pds).size).toBe(40);
      expect(ownedNow()).toBe(0);
    });
  });
});
