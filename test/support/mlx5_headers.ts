/**
 * Compiles the real mlx5 headers with the system C compiler and answers questions about them:
 * the bit offset and width of a field, a constant's value. Two sides, two programs (they define
 * the same struct names):
 * - `k`, Linux's include/linux/mlx5 from Debian's linux-headers-<version>-common (the newest
 *   installed): mlx5_ifc.h and device.h are compiled whole, with a little user-space
 *   scaffolding (stub linux/types.h etc.); qp.h, cq.h and driver.h need the kernel proper, so the
 *   struct and enum blocks asked for are copied from them verbatim into the program.
 *   `ifc` is the same program asked about `struct mlx5_ifc_<name>_bits`, whose members are arrays
 *   of one-bit u8s: offsetof is the bit offset, sizeof the width in bits.
 * - `dv`, rdma-core's infiniband/mlx5dv.h (libibverbs-dev), included as is.
 *
 * A query is `side:struct.member.path` (a member's place; for ifc the struct is `mlx5_ifc_<s>_bits`),
 * or a C expression over the header's names with `const:` (`k:const:MLX5_OPCODE_UMR`).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from './tmp.ts';

/** Where Debian puts the kernel headers, and rdma-core's mlx5dv.h. */
const USR_SRC = '/usr/src';
export const MLX5DV_H = '/usr/include/infiniband/mlx5dv.h';

/** The newest installed linux-headers-6.12.*-common: its folder and version (e.g. `6.12.117+deb12`). */
export function kernelHeaders(): { dir: string; version: string } | null {
  const found = existsSync(USR_SRC)
    ? readdirSync(USR_SRC).map((d) => /^linux-headers-(6\.12\.(\d+)\+\w+)-common$/.exec(d)).filter((m) => m !== null)
    : [];
  if (found.length === 0) return null;
  found.sort((a, b) => Number(b![2]) - Number(a![2]));
  return { dir: join(USR_SRC, found[0]![0]), version: found[0]![1] };
}

export type Side = 'k' | 'ifc' | 'dv';

/** A member's place: bit offset from the struct's start and width in bits; `at` is file:line. */
export interface Place {
  off: number;
  width: number;
  at: string;
}

/** What the compiled program printed for each query, and where each name is declared. */
export interface Answers {
  places: Map<string, Place>;
  values: Map<string, bigint>;
}

/** The kernel headers compiled whole (the rest are copied from by block). */
const WHOLE = ['mlx5_ifc.h', 'mlx5_ifc_fpga.h', 'device.h'];
/** The headers blocks are copied from, in the order they are pasted. */
const BY_BLOCK = ['qp.h', 'cq.h', 'driver.h'];

/** User-space stand-ins for what device.h and mlx5_ifc.h take from the kernel. */
const TYPES_H = `#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;
typedef int8_t s8; typedef int16_t s16; typedef int32_t s32; typedef int64_t s64;
typedef uint16_t __be16; typedef uint32_t __be32; typedef uint64_t __be64;
typedef uint16_t __le16; typedef uint32_t __le32; typedef uint64_t __le64;
#define __packed __attribute__((packed))
#define __aligned(x) __attribute__((aligned(x)))
#define __LITTLE_ENDIAN 1234
#define PAGE_SHIFT 12
#define PAGE_SIZE (1UL << PAGE_SHIFT)
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#define GENMASK(h, l) (((~0UL) << (l)) & (~0UL >> (64 - 1 - (h))))
#define GENMASK_ULL(h, l) (((~0ULL) << (l)) & (~0ULL >> (64 - 1 - (h))))
#define DECLARE_FLEX_ARRAY(T, N) struct { struct { } __empty_##N; T N[]; }
#define struct_group(NAME, ...) union { struct { __VA_ARGS__ }; struct { __VA_ARGS__ } NAME; }
`;

interface HeaderText {
  file: string;
  lines: string[];
}

function load(dir: string, names: readonly string[]): HeaderText[] {
  return names.map((n) => ({ file: join(dir, n), lines: readFileSync(join(dir, n), 'utf8').split('\n') }));
}

/** The line range [from, to] of the top-level block starting at line `i` (ends at a line `};`). */
function blockAt(h: HeaderText, i: number): [number, number] {
  let j = i;
  while (j < h.lines.length && !/^\};/.test(h.lines[j]!)) j++;
  return [i, j];
}

/** Where `struct name {` (or `union name {`) opens, as [header, line index]. */
function findStruct(hs: readonly HeaderText[], name: string): [HeaderText, number] | null {
  const re = new RegExp(`^(struct|union) ${name} \\{`);
  for (const h of hs) {
    const i = h.lines.findIndex((l) => re.test(l));
    if (i >= 0) return [h, i];
  }
  return null;
}

/** Where the enumerator or #define `name` is declared, as [header, line index]. */
function findConst(hs: readonly HeaderText[], name: string): [HeaderText, number] | null {
  const re = new RegExp(`^\\s*(#define\\s+)?${name}\\b(\\s*=|\\s*,|\\s+\\S|$)`);
  for (const h of hs) {
    const i = h.lines.findIndex((l) => re.test(l));
    if (i >= 0) return [h, i];
  }
  return null;
}

/** The top-level block (enum, struct or #define line) around line `i`. */
function enclosing(h: HeaderText, i: number): [number, number] {
  if (/^\s*#define/.test(h.lines[i]!)) {
    let j = i;
    while (h.lines[j]!.endsWith('\\')) j++;
    return [i, j];
  }
  let s = i;
  while (s > 0 && !/^(enum|struct|union)\b.*\{\s*$/.test(h.lines[s]!)) s--;
  return blockAt(h, s);
}

/** The names of the members of `struct mlx5_ifc_<s>_bits`, in order (reserved ones included). */
export function ifcMembers(dir: string, s: string): string[] {
  const [h, i] = findStruct(load(dir, ['mlx5_ifc.h']), `mlx5_ifc_${s}_bits`) ?? [null, -1];
  if (h === null) throw new Error(`mlx5_ifc.h has no struct mlx5_ifc_${s}_bits`);
  const [a, b] = blockAt(h, i);
  return h.lines.slice(a + 1, b).map((l) => /^\s*u8\s+(\w+)\[/.exec(l)?.[1]).filter((n): n is string => n !== undefined);
}

/**
 * The leaf members of `struct mlx5_ifc_<s>_bits` as paths (`qpc.primary_address_path.pkey_index`
 * is `primary_address_path.pkey_index` of qpc): nested structs and unions are entered (every
 * alternative of a union), arrays are leaves, flexible arrays (`pas[][0x40]`, no size) are left out.
 */
export function ifcLeaves(dir: string, s: string): string[] {
  const hs = load(dir, ['mlx5_ifc.h']);
  const walk = (name: string, prefix: string): string[] => {
    const found = findStruct(hs, `mlx5_ifc_${name}_bits`);
    if (found === null) throw new Error(`mlx5_ifc.h has no struct or union mlx5_ifc_${name}_bits`);
    const [a, b] = blockAt(found[0], found[1]);
    // members may span lines (a long union type, then its name): split the body on ';'
    const body = found[0].lines.slice(a + 1, b).join(' ').split(';').map((m) => m.trim()).filter((m) => m !== '');
    const out: string[] = [];
    for (const m of body) {
      if (/\[\s*\]/.test(m)) continue;
      const leaf = /^u8\s+(\w+)\[/.exec(m);
      if (leaf !== null) {
        out.push(prefix + leaf[1]!);
        continue;
      }
      const nested = /^(?:struct|union)\s+mlx5_ifc_(\w+)_bits\s+(\w+)(\[.*\])?$/.exec(m);
      if (nested === null) continue;
      if (nested[3] !== undefined) out.push(prefix + nested[2]!); // an array of structures: one leaf
      else out.push(...walk(nested[1]!, `${prefix}${nested[2]!}.`));
    }
    return out;
  };
  return walk(s, '');
}

const cc = (src: string, out: string, args: readonly string[]): string => {
  try {
    execFileSync('gcc', ['-std=gnu11', '-w', ...args, '-o', out, src], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = (e as { stderr?: Buffer }).stderr?.toString() ?? String(e);
    throw new Error(`gcc could not compile the header probe ${src}:\n${err.split('\n').filter((l) => /error/.test(l)).slice(0, 20).join('\n')}`);
  }
  return execFileSync(out, { encoding: 'utf8' });
};

/** `struct.a.b` -> the C struct and member path for a side. */
function cStruct(side: Side, path: string): { struct: string; member: string } {
  const dot = path.indexOf('.');
  const s = path.slice(0, dot);
  return { struct: side === 'ifc' ? `struct mlx5_ifc_${s}_bits` : `struct ${s}`, member: path.slice(dot + 1) };
}

/**
 * Answers `queries` (`side:struct.member` places and `side:const:EXPR` values) by compiling one
 * program per side. Throws with gcc's errors when a name is not in the headers.
 */
export function askHeaders(dir: string, queries: readonly string[]): Answers {
  const places = new Map<string, Place>();
  const values = new Map<string, bigint>();
  const mlx5 = join(dir, 'include/linux/mlx5');
  const whole = load(mlx5, WHOLE);
  const blocks = load(mlx5, BY_BLOCK);
  const dv: HeaderText[] = [{ file: MLX5DV_H, lines: readFileSync(MLX5DV_H, 'utf8').split('\n') }];
  const work = tempDir('mlx5-headers-');
  // the stub include tree: the real headers by link, the kernel's own headers by stand-ins
  const stub = join(work, 'stub');
  mkdirSync(join(stub, 'linux/mlx5'), { recursive: true });
  mkdirSync(join(stub, 'rdma'), { recursive: true });
  writeFileSync(join(stub, 'linux/types.h'), TYPES_H);
  writeFileSync(join(stub, 'linux/bitfield.h'), '');
  writeFileSync(join(stub, 'rdma/ib_verbs.h'), 'struct ib_grh { uint8_t raw[40]; };\n'); // union mlx5_ext_cqe
  for (const f of WHOLE) symlinkSync(join(mlx5, f), join(stub, 'linux/mlx5', f));

  for (const side of ['k', 'dv'] as const) {
    const mine = queries.filter((q) => (side === 'k' ? q.startsWith('k:') || q.startsWith('ifc:') : q.startsWith('dv:')));
    if (mine.length === 0) continue;
    const pasted = new Map<string, string>(); // file:line -> block text, pasted in header order
    const lines: string[] = [];
    const where = (found: [HeaderText, number] | null): string =>
      found === null ? '?' : `${found[0].file.slice(found[0].file.lastIndexOf('/') + 1)}:${found[1] + 1}`;
    const paste = (h: HeaderText, i: number): void => {
      const [a, b] = enclosing(h, i);
      const key = `${BY_BLOCK.indexOf(h.file.slice(h.file.lastIndexOf('/') + 1))}:${String(a).padStart(6, '0')}`;
      pasted.set(key, h.lines.slice(a, b + 1).join('\n'));
    };
    const hs = side === 'k' ? whole : dv;
    mine.forEach((q, n) => {
      const sideOf = q.slice(0, q.indexOf(':')) as Side;
      const rest = q.slice(q.indexOf(':') + 1);
      if (rest.startsWith('const:')) {
        const expr = rest.slice(6);
        // a name the whole headers lack is copied from qp.h / cq.h / driver.h
        for (const name of expr.match(/\bMLX5_\w+/g) ?? []) {
          if (side === 'k' && findConst(whole, name) === null) {
            const f = findConst(blocks, name);
            if (f !== null) paste(f[0], f[1]);
          }
        }
        lines.push(`  printf("V %d %llu\\n", ${n}, (unsigned long long)(${expr}));`);
        return;
      }
      const { struct, member } = cStruct(sideOf, rest);
      const sname = struct.split(' ')[1]!;
      let at = where(findStruct(hs, sname));
      if (side === 'k' && findStruct(whole, sname) === null) {
        const f = findStruct(blocks, sname);
        if (f !== null) paste(f[0], f[1]);
        at = where(f);
      }
      // the member's own line, for messages: the first line after the struct's that names it
      const last = member.split('.').pop()!;
      const [hh, line] = (side === 'k' ? findStruct(whole, sname) ?? findStruct(blocks, sname) : findStruct(dv, sname)) ?? [null, -1];
      if (hh !== null) {
        const j = hh.lines.findIndex((l, k) => k > line && new RegExp(`\\b${last}\\b`).test(l));
        if (j >= 0) at = `${hh.file.slice(hh.file.lastIndexOf('/') + 1)}:${j + 1}`;
      }
      const scale = sideOf === 'ifc' ? '' : ' * 8';
      lines.push(`  printf("P %d %zu %zu ${at}\\n", ${n}, offsetof(${struct}, ${member})${scale}, sizeof(((${struct} *)0)->${member})${scale});`);
    });
    const head = side === 'k'
      ? ['#include <linux/types.h>', '#include <linux/mlx5/device.h>']
      : ['#include <stddef.h>', '#include <infiniband/mlx5dv.h>'];
    const src = [
      ...head,
      '#include <stdio.h>',
      ...[...pasted.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, t]) => t),
      'int main(void) {',
      ...lines,
      '  return 0;',
      '}',
    ].join('\n');
    const file = join(work, `${side}.c`);
    writeFileSync(file, src);
    const out = cc(file, join(work, side), side === 'k' ? ['-I', stub] : []);
    for (const l of out.trim().split('\n')) {
      const p = l.split(' ');
      const q = mine[Number(p[1])]!;
      if (p[0] === 'P') places.set(q, { off: Number(p[2]), width: Number(p[3]), at: p[4]! });
      else values.set(q, BigInt(p[2]!));
    }
  }
  return { places, values };
}
