/**
 * How GTKWave 3.3 finds the files a .gtkw names (savefile.c: `find_dumpfile`,
 * `get_relative_adjusted_name`): a path is first re-anchored, i.e. taken relative to the folder
 * of the save file as written (`[savefile]`) and joined to the folder the .gtkw is opened from
 * now; only when that file is missing is the path as written tried. So a folder of waves may be
 * moved as long as what it names moves with it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** The file GTKWave would open for `written`, named in the .gtkw now at `gtkwNow`; null if none. */
export function gtkwaveResolve(gtkwNow: string, savedAs: string, written: string): string | null {
  const moved = join(dirname(resolve(gtkwNow)), relative(dirname(savedAs), written));
  if (existsSync(moved)) return moved;
  return existsSync(written) ? written : null;
}

/** The dump file and the translate filter files a .gtkw names, as written. */
export function gtkwReferences(gtkw: string): { savefile: string; dumpfile: string; filters: string[] } {
  const text = readFileSync(gtkw, 'utf8');
  const quoted = (key: string): string => new RegExp(`^\\[${key}\\] "(.*)"$`, 'm').exec(text)![1];
  const filters = [...text.matchAll(/^\^\d+ (.*)$/gm)].map((m) => m[1]);
  return { savefile: quoted('savefile'), dumpfile: quoted('dumpfile'), filters: [...new Set(filters)] };
}
