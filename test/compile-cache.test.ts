import { mkdtemp, readdir, rm } from 'node:fs/promises';
import Module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe } from './helpers/cli.js';
import { bundleChunks } from './helpers/module-trace.js';

/**
 * bin/agent-access.js turns on Node's own compile cache (module.enableCompileCache, Node >= 22.1) in a folder of the
 * user's; Node 20 has none. NODE_DEBUG_NATIVE=COMPILE_CACHE makes Node say what it read, took and wrote (Node 24 adds
 * the module's kind to those lines), into a file: through a pipe some of those lines went missing (helpers/cli.ts).
 */
const hasCompileCache = typeof (Module as { enableCompileCache?: unknown }).enableCompileCache === 'function';

let dir: string;
let n = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-compile-cache-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/**
 * An environment with a cache home of its own, and Node's report of the compile cache on stderr; `stderrFile(name)`
 * names a file for a run's stderr.
 */
function cacheHome(extra: NodeJS.ProcessEnv = {}) {
  const home = join(dir, `home-${++n}`);
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: home, NODE_DEBUG_NATIVE: 'COMPILE_CACHE', ...extra };
  delete env.NODE_COMPILE_CACHE;
  if (!('NODE_DISABLE_COMPILE_CACHE' in extra)) delete env.NODE_DISABLE_COMPILE_CACHE;
  const stderrFile = (name: string) => join(dir, `stderr-${n}-${name}`);
  return { env, folder: join(home, 'agent-access', 'compile-cache'), stderrFile };
}

const filesUnder = async (folder: string): Promise<string[]> =>
  (await readdir(folder, { recursive: true, withFileTypes: true }).catch(() => [])).filter((e) => e.isFile()).map((e) => e.name);

/** The bundle's chunks Node said it compiled from the cache. */
const accepted = (stderr: string) =>
  [...stderr.matchAll(/cache for (?:CommonJS )?\S+\/dist\/bundle\/(\S+\.cjs) was accepted/g)].map((m) => m[1]!);

describe.skipIf(!hasCompileCache)("Node's compile cache (Node >= 22.1)", () => {
  it('a command leaves the cache in $XDG_CACHE_HOME/agent-access, and the next run compiles its chunks from it', async () => {
    const { env, folder, stderrFile } = cacheHome();
    const first = await runCli(['--version'], { env, stderrFile: stderrFile('first') });
    expect(first.code, first.stderr).toBe(0);
    expect(accepted(first.stderr)).toEqual([]);
    expect((await filesUnder(folder)).length).toBeGreaterThan(0);

    const second = await runCli(['--version'], { env, stderrFile: stderrFile('second') });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    expect(accepted(second.stderr)).toContain('main.cjs');
  });

  it('NODE_DISABLE_COMPILE_CACHE turns it off: nothing is written', async () => {
    const { env, folder, stderrFile } = cacheHome({ NODE_DISABLE_COMPILE_CACHE: '1' });
    const res = await runCli(['--version'], { env, stderrFile: stderrFile('run') });
    expect(res.code, res.stderr).toBe(0);
    expect(await filesUnder(folder)).toEqual([]);
  });

  it('serve writes the cache once started, before what loads after the ready line, so a server stopped by kill -9 leaves it for the next start', async () => {
    const { env, folder, stderrFile } = cacheHome();
    // What loads after the ready line waits for quiet moments, which a busy machine may not give for long: the search
    // index (Orama) must not come before the write.
    const chunks = await bundleChunks();
    const orama = Object.keys(chunks).filter((chunk) => chunks[chunk]!.some((m) => m.includes('node_modules/@orama/')));
    expect(orama.length).toBeGreaterThan(0);
    const first = await startServe(['--in-memory', '--quiet'], { env, stderrFile: stderrFile('first') });
    // The emulator's own chunk is among what the start compiled, and is written by the flush, not at exit.
    const written = /writing cache for (?:CommonJS )?\S+\/dist\/bundle\/emulator-\S+\.cjs/;
    await expect.poll(() => written.test(first.stderr())).toBe(true);
    const lines = first.stderr().split('\n');
    const writtenAt = lines.findIndex((line) => written.test(line));
    const oramaAt = lines.findIndex((line) => orama.some((chunk) => line.includes(`/dist/bundle/${chunk}`)));
    if (oramaAt !== -1) expect(writtenAt).toBeLessThan(oramaAt);
    first.child.kill('SIGKILL');
    await first.exit;
    expect((await filesUnder(folder)).length).toBeGreaterThan(0);

    const second = await startServe(['--in-memory', '--quiet'], { env, stderrFile: stderrFile('second') });
    await expect.poll(() => accepted(second.stderr()).some((chunk) => chunk.startsWith('emulator-'))).toBe(true);
    await second.stop();
  });
});

describe.skipIf(hasCompileCache)('Node 20: no compile cache', () => {
  it('a command runs as before and writes no cache folder', async () => {
    const { env, folder } = cacheHome();
    const res = await runCli(['--version'], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(await filesUnder(folder)).toEqual([]);
  });
});
