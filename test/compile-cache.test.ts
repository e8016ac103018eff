import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAst } from 'rolldown/parseAst';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheFolder, compileCacheDir } from '../src/cli/compile-cache.js';
import { runCli, startServe } from './helpers/cli.js';

/**
 * The command line compiles its bundle's chunks from V8's code cache (src/cli/compile-cache.ts). A run writes the
 * cache of a chunk only when it had none or V8 refused it, so a cache file left as it was by a second run is one V8
 * took.
 */

const BUNDLE = fileURLToPath(new URL('../dist/bundle', import.meta.url));

let dir: string;
let n = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-compile-cache-'));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A cache home of its own for one test: the environment to run with, and the folder of this Node's cache files. */
async function cacheHome() {
  const home = join(dir, `home-${++n}`);
  const env = { XDG_CACHE_HOME: home, NODE_COMPILE_CACHE: '', NODE_DISABLE_COMPILE_CACHE: '' };
  return { env, folder: cacheFolder(compileCacheDir(env)!, BUNDLE) };
}

/** Each cache file: its name, mode, inode, time of change and content. */
async function files(folder: string) {
  const names = (await readdir(folder)).sort();
  return Promise.all(
    names.map(async (name) => {
      const s = await stat(join(folder, name));
      return { name, mode: s.mode & 0o777, ino: s.ino, ctimeMs: s.ctimeMs, bytes: await readFile(join(folder, name)) };
    }),
  );
}

describe("the command line's compile cache", () => {
  it('a run leaves the cache of the chunks it ran (0600 files, 0700 folders), and the next run takes it as it is', async () => {
    const { env, folder } = await cacheHome();
    expect((await runCli(['--version'], { env })).code).toBe(0);
    const first = await files(folder);
    expect(first.map((f) => f.name).some((name) => /^program-[\w-]+\.cjs\.[0-9a-f]{32}$/.test(name))).toBe(true);
    for (const f of first) expect(f.mode, f.name).toBe(0o600);
    for (const folderOf of [folder, join(folder, '..'), join(folder, '../..'), join(folder, '../../..')])
      expect((await stat(folderOf)).mode & 0o777).toBe(0o700);

    expect((await runCli(['--version'], { env })).code).toBe(0);
    expect(await files(folder)).toEqual(first);
  });

  it("serve, which sets V8's heap flags as it starts, leaves a cache that the next serve takes", async () => {
    const { env, folder } = await cacheHome();
    const first = await startServe(['--in-memory', '--quiet'], { env });
    expect(await first.stop()).toBe(0);
    const cached = await files(folder);
    // The server's chunk, the largest, is among them.
    expect(cached.some((f) => f.name.startsWith('serve-') && f.bytes.length > 100_000)).toBe(true);

    const second = await startServe(['--in-memory', '--quiet'], { env });
    expect(await second.stop()).toBe(0);
    expect(await files(folder)).toEqual(cached);
  });

  it('a cache V8 refuses (a file that is no cache) is made again, and the command works all the same', async () => {
    const { env, folder } = await cacheHome();
    expect((await runCli(['--version'], { env })).code).toBe(0);
    const [program] = (await readdir(folder)).filter((name) => name.startsWith('program-'));
    const file = join(folder, program!);
    await writeFile(file, 'not a code cache');

    const res = await runCli(['--version'], { env });
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    const remade = await files(folder);
    expect(remade.find((f) => f.name === program)!.bytes.toString('latin1')).not.toBe('not a code cache');
    // and taken by the run after
    expect((await runCli(['--version'], { env })).code).toBe(0);
    expect(await files(folder)).toEqual(remade);
  });

  it('NODE_DISABLE_COMPILE_CACHE writes none; NODE_COMPILE_CACHE puts it under the folder it names', async () => {
    const { env } = await cacheHome();
    expect((await runCli(['--version'], { env: { ...env, NODE_DISABLE_COMPILE_CACHE: '1' } })).code).toBe(0);
    await expect(stat(env.XDG_CACHE_HOME)).rejects.toMatchObject({ code: 'ENOENT' });

    const node = join(dir, 'node-cache');
    expect((await runCli(['--version'], { env: { ...env, NODE_COMPILE_CACHE: node } })).code).toBe(0);
    expect((await readdir(cacheFolder(compileCacheDir({ NODE_COMPILE_CACHE: node })!, BUNDLE))).length).toBeGreaterThan(0);
    await expect(stat(env.XDG_CACHE_HOME)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('a cache folder that cannot be made: the command works, with nothing said', async () => {
    const blocked = join(dir, 'a-file');
    await writeFile(blocked, '');
    const res = await runCli(['--version'], { env: { XDG_CACHE_HOME: blocked, NODE_COMPILE_CACHE: '', NODE_DISABLE_COMPILE_CACHE: '' } });
    expect(res).toMatchObject({ code: 0, stderr: '' });
  });

  it("a run that saves removes the caches of chunks this copy of the bundle no longer has, and of a chunk's earlier contents", async () => {
    const { env, folder } = await cacheHome();
    expect((await runCli(['--version'], { env })).code).toBe(0);
    const program = (await readdir(folder)).find((name) => name.startsWith('program-'))!;
    const earlier = `${program.slice(0, program.lastIndexOf('.'))}.${'0'.repeat(32)}`;
    const gone = `gone-Ab12Cd34.cjs.${'1'.repeat(32)}`;
    for (const name of [earlier, gone]) await writeFile(join(folder, name), 'a cache of another build');
    // Nothing to save: nothing removed.
    expect((await runCli(['--version'], { env })).code).toBe(0);
    expect(await readdir(folder)).toEqual(expect.arrayContaining([earlier, gone]));
    // A run that saves (its program chunk's cache is gone) tidies up.
    await rm(join(folder, program));
    expect((await runCli(['--version'], { env })).code).toBe(0);
    const left = await readdir(folder);
    expect(left).toContain(program);
    expect(left).not.toContain(earlier);
    expect(left).not.toContain(gone);
  });

  it('no chunk calls import() itself (V8 gives code compiled from a cache no loader for it): each goes through esm/import.cjs', async () => {
    const importCalls = (node: unknown): number =>
      Array.isArray(node)
        ? node.reduce((sum: number, child) => sum + importCalls(child), 0)
        : node && typeof node === 'object'
          ? ((node as { type?: string }).type === 'ImportExpression' ? 1 : 0) +
            Object.values(node).reduce((sum: number, child) => sum + importCalls(child), 0)
          : 0;
    const chunks = (await readdir(BUNDLE)).filter((name) => name.endsWith('.cjs'));
    let routed = 0;
    for (const chunk of chunks) {
      const code = await readFile(join(BUNDLE, chunk), 'utf8');
      expect(importCalls(parseAst(code)), chunk).toBe(0);
      routed += code.split('require("./esm/import.cjs")(').length - 1;
    }
    // The dashboard (twice), open and child_process.
    expect(routed).toBeGreaterThanOrEqual(4);
  });
});
