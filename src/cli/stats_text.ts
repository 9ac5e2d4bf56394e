/**
 * `--stats text`: one line per module, as a person reads it. Statistics named `*_ps` are times:
 * shown with a unit (`latency={n=3 mean=361.333 ns p99<=1.076 us}`, `wait=2 us`). `--stats
 * json` keeps every raw picosecond count.
 */
import type { StatsJson } from '../sim/stats.ts';
import { formatPs } from '../sim/time.ts';

export function statsText(stats: Readonly<Record<string, StatsJson>>): string[] {
  return Object.entries(stats).map(([mod, st]) => {
    const parts = Object.entries(st).map(([k, v]) => {
      const time = k.endsWith('_ps');
      const name = time ? k.slice(0, -3) : k;
      const show = (x: number): string => (time ? formatPs(Math.round(x)).replace(' ', '') : String(x));
      if (typeof v === 'number') return `${name}=${show(v)}`;
      return `${name}={n=${v.count} mean=${time ? show(v.mean) : v.mean.toFixed(0)} p99<=${show(v.p99)}}`;
    });
    return `${mod}: ${parts.join(' ')}`;
  });
}
