/**
 * The package as a user gets it: `npm pack` (whose `prepack` builds dist/ and the API reference),
 * quiet (no file list), the tarball installed into a plain JavaScript project with no network and
 * no warning, then a verbs script importing 'mlx5sim' and `npx mlx5sim list` and a quick sweep
 * (worker threads running dist/'s JavaScript) run there with plain Node: no tsx, no TypeScript
 * loader. Offline works because the runtime dependencies (commander, piscina, vega, vega-lite)
 * travel inside the tarball (bundleDependencies): npm installs it from a fresh, empty cache with
 * `--offline`, fetching nothing. Then, in this checkout, `npx mlx5sim` after the pack's build, which
 * is `npm run build` (a build that recreated dist/src/cli/main.js without its execute
 * bit left `npx mlx5sim` at "Permission denied"; installing a tarball sets the bit, so only this
 * checks it).
 */
import { describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../support/tmp.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The environment without npm's lifecycle variables or a Node loader inherited from the test run. */
function plainEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k) && k !== 'NODE_OPTIONS') env[k] = v;
  return env;
}

const VERBS = `
import { Testbed, Access } from 'mlx5sim';
const tb = new Testbed({ hcas: 2, trace: { vcd: 'waves/run.vcd' } });
let wc;
await tb.run(async () => {
  const [c0, c1] = [await tb.openDevice(0), await tb.openDevice(1)];
  const [pd0, pd1] = [await c0.allocPd(), await c1.allocPd()];
  const [cq0, cq1] = [await c0.createCq(64), await c1.createCq(64)];
  const qp0 = await pd0.createQp({ sendCq: cq0, recvCq: cq0 });
  const qp1 = await pd1.createQp({ sendCq: cq1, recvCq: cq1 });
  await qp0.connect(qp1);
  const a = tb.host(0).alloc(4096), b = tb.host(1).alloc(4096);
  tb.host(0).fill(a.addr, 4096, 0x5a);
  const mr0 = await pd0.regMr(a.addr, 4096, Access.LOCAL_WRITE);
  const mr1 = await pd1.regMr(b.addr, 4096, Access.LOCAL_WRITE | Access.REMOTE_WRITE);
  qp0.postSend({ wrId: 7, opcode: 'RDMA_WRITE', sgList: [{ addr: a.addr, length: 4096, lkey: mr0.lkey }],
                 remoteAddr: b.addr, rkey: mr1.rkey, signaled: true });
  [wc] = await cq0.wait(1);
  globalThis.landed = tb.host(1).read(b.addr, 4096).every((x) => x === 0x5a);
});
await tb.close();
console.log(JSON.stringify({ wrId: wc.wrId, status: wc.status, byteLen: wc.byteLen, landed: globalThis.landed }));
`;

/** A TypeScript user's check of the shipped declarations: real types, not `any`. */
const TYPES = `
import { Testbed, Access, type WorkCompletion } from 'mlx5sim';
const tb: Testbed = new Testbed({ hcas: 1 });
const flags: number = Access.REMOTE_WRITE;
const status: WorkCompletion['status'] = 'SUCCESS';
// @ts-expect-error: the declarations are real types, so an unknown method is an error
tb.noSuchMethod();
export { flags, status };
`;

describe('npm package', () => {
  // two builds (the pack's and its API reference) on a loaded 2-core machine
  it('packs dist/, docs/, README and LICENSE quietly (no tests, no sources); installs offline into a plain JS project without a warning; runs verbs and the CLI without tsx; the command runs after a build', { timeout: 420_000 }, () => {
    const tmp = tempDir('mlx5sim-pack-');
    const env = plainEnv();
    const pack = spawnSync('npm', ['pack', '--json', '--pack-destination', tmp], { cwd: root, env, encoding: 'utf8' });
    expect(pack.status).toBe(0);
    // quiet: no list of the packed files (npm notice), no warning; the scripts' banners only
    expect(pack.stderr).not.toMatch(/npm (notice|warn)/);
    const packed = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
    const files = packed[0].files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining([
        'LICENSE', 'README.md', 'package.json', 'dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/cli/main.js',
        'docs/README.md', 'docs/api/index.html', 'docs/api/classes/Testbed.html', 'docs/guide/index.md', 'docs/spec/timing.md',
      ]),
    );
    // besides dist/ and docs/, only the bundled runtime dependencies
    const shipped = /^(dist|docs|node_modules)\//;
    expect(files.filter((f) => !shipped.test(f) && !['LICENSE', 'README.md', 'package.json'].includes(f))).toEqual([]);
    expect(files.filter((f) => !f.startsWith('node_modules/') && /\.ts$/.test(f) && !f.endsWith('.d.ts'))).toEqual([]);
    expect(files.some((f) => f.startsWith('node_modules/tsx/') || f.startsWith('node_modules/vitest/'))).toBe(false);
    expect(files.some((f) => f.startsWith('dist/test/'))).toBe(false);

    const app = join(tmp, 'app');
    mkdirSync(join(app, 'waves'), { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    const install = spawnSync('npm', ['install', join(tmp, packed[0].filename), '--offline', '--no-audit', '--no-fund', '--cache', join(tmp, 'cache')], { cwd: app, env, encoding: 'utf8' });
    expect(install.status).toBe(0);
    // no install-scripts warning: the package has no script that runs on install (prepack, not prepare)
    expect(install.stderr).toBe('');
    const pkg = JSON.parse(readFileSync(join(app, 'node_modules/mlx5sim/package.json'), 'utf8')) as Record<string, Record<string, string>>;
    expect(Object.keys(pkg.dependencies).sort()).toEqual(['commander', 'piscina', 'vega', 'vega-lite']);
    for (const d of Object.keys(pkg.dependencies)) expect(existsSync(join(app, 'node_modules/mlx5sim/node_modules', d, 'package.json'))).toBe(true);
    expect(existsSync(join(app, 'node_modules/tsx'))).toBe(false);
    // TSDoc travels with the declarations
    expect(readFileSync(join(app, 'node_modules/mlx5sim/dist/src/driver/testbed.d.ts'), 'utf8')).toMatch(/\/\*\*[\s\S]*export declare class Testbed/);

    writeFileSync(join(app, 'verbs.mjs'), VERBS);
    const out = execFileSync(process.execPath, ['verbs.mjs'], { cwd: app, env, encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({ wrId: 7, status: 'SUCCESS', byteLen: 4096, landed: true });
    expect(existsSync(join(app, 'waves/run.vcd'))).toBe(true);

    const list = execFileSync('npx', ['--offline', 'mlx5sim', 'list'], { cwd: app, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    expect(list).toMatch(/^frwr\s+fast registration/m);
    expect(list).toMatch(/^mtt-cliff\s+random 64 B READs/m);
    // a quick sweep on two worker threads, from the compiled experiments (without the MR
    // cache's pre-fill, which its figures do not need: seconds of CPU per point)
    const sweep = spawnSync('npx', ['--offline', 'mlx5sim', 'sweep', 'mtt-cliff', '--quick', '--jobs', '2', '--set', 'mrCacheLimit=0'], { cwd: app, env, encoding: 'utf8' });
    expect(sweep.stderr).not.toMatch(/Error/);
    expect(sweep.status).toBe(0);
    expect(sweep.stdout).toMatch(/^mtt-cliff: 6 points in [0-9.]+ s with 2 jobs/m);
    expect(readFileSync(join(app, 'results/mtt-cliff/points.jsonl'), 'utf8').trim().split('\n')).toHaveLength(6);
    expect(readFileSync(join(app, 'results/mtt-cliff/plot.svg'), 'utf8')).toMatch(/^<svg /);
    const meta = JSON.parse(readFileSync(join(app, 'results/mtt-cliff/meta.json'), 'utf8')) as { gitCommit: unknown; version: string };
    expect(meta).toMatchObject({ gitCommit: null, version: '0.1.0' }); // an installed copy is no checkout
    // a TypeScript scenario without tsx installed: a clear usage error, exit 2
    writeFileSync(join(app, 'mine.ts'), 'export default {};\n');
    const ts = spawnSync('npx', ['--offline', 'mlx5sim', 'run', 'mine.ts', '--no-vcd'], { cwd: app, env, encoding: 'utf8' });
    expect(ts.status).toBe(2);
    expect(ts.stderr).toMatch(/mine\.ts is TypeScript: running it needs tsx/);

    // the shipped declarations type-check a TypeScript user's code (the repository's tsc)
    writeFileSync(join(app, 'check.ts'), TYPES);
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, types: [] }, files: ['check.ts'] }),
    );
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: app, env, encoding: 'utf8' });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);

    // this checkout: the pack's prepack ran `npm run build`, which deletes dist/ and compiles it
    // anew (another build would take the same path again: a minute of a loaded machine for
    // nothing more): the command it left runs
    expect(statSync(join(root, 'dist/src/cli/main.js')).mode & 0o111).toBe(0o111);
    expect(execFileSync('npx', ['--offline', 'mlx5sim', 'list'], { cwd: root, env, encoding: 'utf8' })).toMatch(/^frwr\s+fast registration/m);
  });
});
