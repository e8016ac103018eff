import { mkdtemp, readdir, rm } from 'node:fs/promises';
import Module from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe } from './helpers/cli.js';

/**
 * bin/agent-access.js turns on Node's own compile cache (module.enableCompileCache, Node >= 22.1) in a folder of the
 * user's; Node 20 has none. NODE_DEBUG_NATIVE=COMPILE_CACHE makes Node say what it read, took and wrote (Node 24 adds
 * the module's kind to those lines).
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

/** An environment with a cache home of its own, and Node's report of the compile cache on stderr. */
function cacheHome(extra: NodeJS.ProcessEnv = {}) {
  const home = join(dir, `home-${++n}`);
  const env: NodeJS.ProcessEnv = { ...process.env, XDG_CACHE_HOME: home, NODE_DEBUG_NATIVE: 'COMPILE_CACHE', ...extra };
  delete env.NODE_COMPILE_CACHE;
  if (!('NODE_DISABLE_COMPILE_CACHE' in extra)) delete env.NODE_DISABLE_COMPILE_CACHE;
  return { env, folder: join(home, 'agent-access', 'compile-cache') };
}

const filesUnder = async (folder: string): Promise<string[]> =>
  (await readdir(folder, { recursive: true, withFileTypes: true }).catch(() => [])).filter((e) => e.isFile()).map((e) => e.name);

/** The bundle's chunks Node said it compiled from the cache. */
const accepted = (stderr: string) =>
  [...stderr.matchAll(/cache for (?:CommonJS )?\S+\/dist\/bundle\/(\S+\.cjs) was accepted/g)].map((m) => m[1]!);

describe.skipIf(!hasCompileCache)("Node's compile cache (Node >= 22.1)", () => {
  it('a command leaves the cache in $XDG_CACHE_HOME/agent-access, and the next run compiles its chunks from it', async () => {
    const { env, folder } = cacheHome();
    const first = await runCli(['--version'], { env });
    expect(first.code, first.stderr).toBe(0);
    expect(accepted(first.stderr)).toEqual([]);
    expect((await filesUnder(folder)).length).toBeGreaterThan(0);

    const second = await runCli(['--version'], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toBe(first.stdout);
    expect(accepted(second.stderr)).toContain('main.cjs');
  });

  it('NODE_DISABLE_COMPILE_CACHE turns it off: nothing is written', async () => {
    const { env, folder } = cacheHome({ NODE_DISABLE_COMPILE_CACHE: '1' });
    const res = await runCli(['--version'], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(await filesUnder(folder)).toEqual([]);
  });

  it('serve writes the cache once started, so a server stopped by kill -9 leaves it for the next start', async () => {
    const { env, folder } = cacheHome();
    const first = await startServe(['--in-memory', '--quiet'], { env });
    // The emulator's own chunk is among what the start compiled, and is written by the flush, not at exit.
    await expect
      .poll(() => /writing cache for (?:CommonJS )?\S+\/dist\/bundle\/emulator-\S+\.cjs/.test(first.stderr()), { timeout: 20_000 })
      .toBe(true);
    first.child.kill('SIGKILL');
    await first.exit;
    expect((await filesUnder(folder)).length).toBeGreaterThan(0);

    const second = await startServe(['--in-memory', '--quiet'], { env });
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
