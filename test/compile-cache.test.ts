import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAst } from 'rolldown/parseAst';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import rolldownConfig from '../rolldown.config.js';
import { cacheFolder, compileCacheDir } from '../src/cli/compile-cache.js';
import { runCli, startServe } from './helpers/cli.js';

/**
 * The command line compiles its bundle's chunks from V8's code cache (src/cli/compile-cache.ts). A probe preloaded
 * into the runs (PROBE) records, for each chunk compiled, whether it was given a cache and whether V8 took it.
 */

const BUNDLE = fileURLToPath(new URL('../dist/bundle', import.meta.url));

// Preloaded with --require: wraps node:vm's Script, which compile-cache.ts looks up at each compile.
const PROBE = `
const vm = require('node:vm');
const { appendFileSync } = require('node:fs');
const { basename } = require('node:path');
const Script = vm.Script;
vm.Script = class extends Script {
  constructor(code, options) {
    super(code, options);
    if (options && typeof options.filename === 'string' && options.filename.endsWith('.cjs'))
      appendFileSync(process.env.AA_PROBE_OUT, JSON.stringify({
        chunk: basename(options.filename), given: options.cachedData !== undefined, rejected: this.cachedDataRejected === true,
      }) + '\\n');
  }
};
`;

let dir: string;
let probe: string;
let n = 0;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-compile-cache-'));
  probe = join(dir, 'probe.cjs');
  await writeFile(probe, PROBE);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A cache home of its own for one test: the environment to run with (probed), the folder of the cache files, and what the probe saw. */
async function cacheHome() {
  const home = join(dir, `home-${++n}`);
  const out = join(dir, `probe-${n}.jsonl`);
  const env = {
    XDG_CACHE_HOME: home,
    NODE_COMPILE_CACHE: '',
    NODE_DISABLE_COMPILE_CACHE: '',
    NODE_OPTIONS: `--require ${probe}`,
    AA_PROBE_OUT: out,
  };
  const compiled = async () => {
    const lines = (await readFile(out, 'utf8').catch(() => '')).split('\n').filter(Boolean);
    await rm(out, { force: true });
    return lines.map((line) => JSON.parse(line) as { chunk: string; given: boolean; rejected: boolean });
  };
  return { home, env, folder: cacheFolder(compileCacheDir(env)!, BUNDLE), compiled };
}

/** Each cache file: its name, mode, inode, time of change and content. */
async function files(folder: string) {
  const names = (await readdir(folder)).filter((name) => name.endsWith('.cjs', name.lastIndexOf('.'))).sort();
  return Promise.all(
    names.map(async (name) => {
      const s = await stat(join(folder, name));
      return { name, mode: s.mode & 0o777, ino: s.ino, ctimeMs: s.ctimeMs, bytes: await readFile(join(folder, name)) };
    }),
  );
}

describe("the command line's compile cache", () => {
  it('a run leaves the cache of the chunks it compiled (0600 files, 0700 folders); the next compiles each from it, and V8 takes it', async () => {
    const { env, folder, compiled } = await cacheHome();
    expect((await runCli(['--version'], { env })).code).toBe(0);
    const first = await compiled();
    expect(first.map((c) => c.chunk)).toContainEqual(expect.stringMatching(/^program-[\w-]+\.cjs$/));
    expect(first.every((c) => !c.given)).toBe(true);
    const made = await files(folder);
    expect(made.map((f) => f.name.slice(0, f.name.lastIndexOf('.'))).sort()).toEqual(first.map((c) => c.chunk).sort());
    for (const f of made) expect(f.mode, f.name).toBe(0o600);
    for (const folderOf of [folder, join(folder, '..'), join(folder, '../..'), join(folder, '../../..')])
      expect((await stat(folderOf)).mode & 0o777).toBe(0o700);

    expect((await runCli(['--version'], { env })).code).toBe(0);
    const second = await compiled();
    expect(second.map((c) => c.chunk).sort()).toEqual(first.map((c) => c.chunk).sort());
    expect(second.filter((c) => !c.given || c.rejected)).toEqual([]);
    expect(await files(folder)).toEqual(made);
  });

  it("serve, which sets V8's heap flags as it starts, saves its cache once started (before any exit), and the next serve's V8 takes it", async () => {
    const { env, folder, compiled } = await cacheHome();
    const first = await startServe(['--in-memory', '--quiet'], { env });
    // Saved in a quiet moment after the ready line: there while the server runs, and after a kill -9. The save writes
    // the folder's bundle-path last, after every cache file: a serve- name alone may be the first of several, or a
    // temp file still being written.
    await expect
      .poll(async () => (await readdir(folder).catch((): string[] => [])).includes('bundle-path'), { timeout: 10_000 })
      .toBe(true);
    first.child.kill('SIGKILL');
    await first.exit;
    const saved = await compiled();
    // serve's own chunks, and the emulator's, which serve shares with `conformance client`.
    const serverChunk = /^(serve|emulator)-/;
    const serveChunks = saved.filter((c) => serverChunk.test(c.chunk)).map((c) => c.chunk);
    expect(serveChunks.length).toBeGreaterThan(0);
    const made = await files(folder);
    // The server's chunk, the largest, is among them.
    expect(made.some((f) => serverChunk.test(f.name) && f.bytes.length > 100_000)).toBe(true);

    const second = await startServe(['--in-memory', '--quiet'], { env });
    expect(await second.stop()).toBe(0);
    const again = await compiled();
    expect(again.filter((c) => serveChunks.includes(c.chunk) && (!c.given || c.rejected))).toEqual([]);
    // What the first saved, the second left as it was (it may add chunks the first never loaded).
    const after = await files(folder);
    for (const f of made) expect(after.find((g) => g.name === f.name)).toEqual(f);
  });

  it('a cache V8 refuses (a file that is no cache) is made again, and the command works all the same', async () => {
    const { env, folder, compiled } = await cacheHome();
    expect((await runCli(['--version'], { env })).code).toBe(0);
    await compiled();
    const [program] = (await readdir(folder)).filter((name) => name.startsWith('program-'));
    const file = join(folder, program!);
    await writeFile(file, 'not a code cache');

    const res = await runCli(['--version'], { env });
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect(res.stdout).toMatch(/^\d+\.\d+\.\d+\n$/);
    expect((await compiled()).find((c) => program!.startsWith(`${c.chunk}.`))).toMatchObject({ given: true, rejected: true });
    const remade = await files(folder);
    expect(remade.find((f) => f.name === program)!.bytes.toString('latin1')).not.toBe('not a code cache');
    // and taken by the run after
    expect((await runCli(['--version'], { env })).code).toBe(0);
    expect((await compiled()).filter((c) => !c.given || c.rejected)).toEqual([]);
  });

  it('a cache folder others may write is neither read nor written; nor one that is not a folder', async () => {
    const { env, folder, compiled } = await cacheHome();
    expect((await runCli(['--version'], { env })).code).toBe(0);
    await compiled();
    const made = await files(folder);
    await chmod(folder, 0o777);
    await writeFile(join(folder, made[0]!.name), 'planted');
    const res = await runCli(['--version'], { env });
    expect(res).toMatchObject({ code: 0, stderr: '' });
    expect((await compiled()).filter((c) => c.given)).toEqual([]);
    expect((await readFile(join(folder, made[0]!.name), 'utf8')).toString()).toBe('planted');

    const blocked = join(dir, 'a-file');
    await writeFile(blocked, '');
    expect(await runCli(['--version'], { env: { ...env, XDG_CACHE_HOME: blocked } })).toMatchObject({ code: 0, stderr: '' });
  });

  it('NODE_DISABLE_COMPILE_CACHE writes none; NODE_COMPILE_CACHE puts it under the folder it names, and a relative one is not taken', async () => {
    const { home, env } = await cacheHome();
    expect((await runCli(['--version'], { env: { ...env, NODE_DISABLE_COMPILE_CACHE: '1' } })).code).toBe(0);
    await expect(stat(home)).rejects.toMatchObject({ code: 'ENOENT' });

    const node = join(dir, 'node-cache');
    expect((await runCli(['--version'], { env: { ...env, NODE_COMPILE_CACHE: node } })).code).toBe(0);
    expect((await readdir(cacheFolder(compileCacheDir({ NODE_COMPILE_CACHE: node })!, BUNDLE))).length).toBeGreaterThan(0);
    await expect(stat(home)).rejects.toMatchObject({ code: 'ENOENT' });

    expect(compileCacheDir({ NODE_COMPILE_CACHE: 'relative/cache' })).toBeUndefined();
    expect(compileCacheDir({ XDG_CACHE_HOME: 'relative', HOME: '/home/someone' })).not.toContain('relative');
  });

  it("a run that saves removes the caches of chunks the bundle no longer has, of a chunk's earlier contents, old temp files, and the folders of bundles that are gone", async () => {
    const { env, folder, compiled } = await cacheHome();
    expect((await runCli(['--version'], { env })).code).toBe(0);
    await compiled();
    const program = (await readdir(folder)).find((name) => name.startsWith('program-'))!;
    const earlier = `${program.slice(0, program.lastIndexOf('.'))}.${'0'.repeat(32)}`;
    const gone = `gone-Ab12Cd34.cjs.${'1'.repeat(32)}`;
    const oldTemp = `${program}.0a1b2c3d4e5f.tmp`;
    const newTemp = `${program}.5f4e3d2c1b0a.tmp`;
    for (const name of [earlier, gone, oldTemp, newTemp]) await writeFile(join(folder, name), 'left by another run', { mode: 0o600 });
    const twoHoursAgo = new Date(Date.now() - 7_200_000);
    await utimes(join(folder, oldTemp), twoHoursAgo, twoHoursAgo);
    const versionFolder = join(folder, '..');
    const goneCopy = join(versionFolder, 'aaaaaaaaaaaaaaaa');
    const liveCopy = join(versionFolder, 'bbbbbbbbbbbbbbbb');
    for (const [copy, bundle] of [
      [goneCopy, join(dir, 'no-such-bundle')],
      [liveCopy, dir],
    ] as const) {
      await mkdir(copy, { mode: 0o700 });
      await writeFile(join(copy, 'bundle-path'), bundle, { mode: 0o600 });
    }
    // Nothing to save: nothing removed.
    expect((await runCli(['--version'], { env })).code).toBe(0);
    expect(await readdir(folder)).toEqual(expect.arrayContaining([earlier, gone, oldTemp, newTemp]));
    // A run that saves (its program chunk's cache is gone) tidies up.
    await rm(join(folder, program));
    expect((await runCli(['--version'], { env })).code).toBe(0);
    const left = await readdir(folder);
    expect(left).toEqual(expect.arrayContaining([program, newTemp, 'bundle-path']));
    for (const name of [earlier, gone, oldTemp]) expect(left).not.toContain(name);
    expect(await readdir(versionFolder)).toEqual(expect.arrayContaining([basename(folder), basename(liveCopy)]));
    expect(await readdir(versionFolder)).not.toContain(basename(goneCopy));
  });

  it('every chunk is strict code, as tsc wrote it, and requires only builtins, other chunks and the packages left out of the bundle', async () => {
    const external = rolldownConfig.external as RegExp;
    const requires = (node: unknown, found: string[] = []): string[] => {
      if (Array.isArray(node)) for (const child of node) requires(child, found);
      else if (node && typeof node === 'object') {
        const call = node as {
          type?: string;
          callee?: { type?: string; name?: string };
          arguments?: Array<{ type?: string; value?: unknown }>;
        };
        if (call.type === 'CallExpression' && call.callee?.name === 'require' && call.arguments?.[0]?.type === 'Literal')
          found.push(String(call.arguments[0].value));
        for (const child of Object.values(node)) if (typeof child === 'object') requires(child, found);
      }
      return found;
    };
    for (const chunk of (await readdir(BUNDLE)).filter((name) => name.endsWith('.cjs'))) {
      const code = await readFile(join(BUNDLE, chunk), 'utf8');
      expect(code.startsWith('"use strict";'), chunk).toBe(true);
      expect(
        // node: names only builtins, some of a later Node (undici's lazy node:sqlite).
        requires(parseAst(code)).filter((id) => !id.startsWith('./') && !id.startsWith('node:') && !isBuiltin(id) && !external.test(id)),
        chunk,
      ).toEqual([]);
    }
  });

  it('no chunk calls import() itself (Node gives code compiled through node:vm no loader for it): each goes through esm/import.cjs', async () => {
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
