import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, startServe } from './helpers/cli.js';
import { unbundled, writeResolveHooks } from './helpers/module-trace.js';

/**
 * The client and the dashboard speak only the wire (src/protocol): loading them must not load the server, the
 * store or the core. `npm run lint:deps` checks the imports as written; this checks what Node really loads from
 * the build, dynamic imports at load time and CommonJS requires included. The same for command lines of the built
 * CLI: help, the version and the client commands load none of the server side, and scripts call `token` so often
 * that it loads as little as it can. The command line runs from its bundle: a chunk it loads counts as every module
 * in it.
 */

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));

// Registers the hooks, imports the modules named on the command line, then adds what CommonJS loaded on its own.
const RUNNER = `
import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [hooks, out, ...modules] = process.argv.slice(1);
register(hooks, { data: { out } });
for (const m of modules) await import(m);
for (const file of Object.keys(createRequire(import.meta.url).cache)) appendFileSync(out, pathToFileURL(file).href + '\\n');
`;

// Preloaded into a CLI run (NODE_OPTIONS=--import): registers the hooks and, at exit, adds what CommonJS loaded.
const PRELOAD = `
import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const out = process.env.AA_LOADED_OUT;
register(process.env.AA_LOADED_HOOKS, { data: { out } });
const cache = createRequire(import.meta.url).cache;
process.on('exit', () => { for (const file of Object.keys(cache)) appendFileSync(out, pathToFileURL(file).href + '\\n'); });
`;

let dir: string;
let hooksUrl: string;
let preloadUrl: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-boundaries-'));
  hooksUrl = await writeResolveHooks(dir);
  await writeFile(join(dir, 'preload.mjs'), PRELOAD);
  preloadUrl = pathToFileURL(join(dir, 'preload.mjs')).href;
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every module URL that loading all of `folder` (under dist/) brings in. */
async function loadedBy(folder: string): Promise<string[]> {
  const modules = (await readdir(join(DIST, folder)))
    .filter((f) => f.endsWith('.js'))
    .map((f) => pathToFileURL(join(DIST, folder, f)).href);
  expect(modules.length).toBeGreaterThan(0);
  const out = join(dir, `${folder}.txt`);
  await writeFile(out, '');
  await promisify(execFile)(process.execPath, ['--input-type=module', '-e', RUNNER, hooksUrl, out, ...modules], {
    env: { ...process.env, NO_COLOR: '1' },
  });
  return [...new Set((await readFile(out, 'utf8')).split('\n').filter(Boolean))];
}

const under = (folder: string) => (url: string) => url.startsWith(pathToFileURL(join(DIST, folder)).href + '/');
const npm = (name: string) => (url: string) => url.includes(`/node_modules/${name}/`);

describe('module boundaries', () => {
  it('loading the dashboard loads neither the server nor the store, nor the core, the CLI or the client', async () => {
    const loaded = await loadedBy('dashboard');
    expect(loaded.some(under('dashboard'))).toBe(true);
    expect(loaded.some(under('protocol'))).toBe(true);
    for (const folder of ['server', 'store', 'loaders', 'core', 'cli', 'client']) expect(loaded.filter(under(folder)), folder).toEqual([]);
    for (const name of ['fastify', '@modelcontextprotocol', 'lowdb']) expect(loaded.filter(npm(name)), name).toEqual([]);
  });

  it('loading the client loads neither fastify nor the core or the store, nor the server, the CLI or the dashboard', async () => {
    const loaded = await loadedBy('client');
    expect(loaded.some(under('client'))).toBe(true);
    expect(loaded.some(npm('oauth4webapi'))).toBe(true);
    for (const folder of ['server', 'store', 'loaders', 'core', 'cli', 'dashboard'])
      expect(loaded.filter(under(folder)), folder).toEqual([]);
    for (const name of ['fastify', '@modelcontextprotocol', 'lowdb']) expect(loaded.filter(npm(name)), name).toEqual([]);
  });
});

/** The environment of one traced CLI run: it writes every module URL it loads into the file `out` names. */
async function tracedEnv(name: string, env: NodeJS.ProcessEnv = {}) {
  const out = join(dir, `cli-${name}.txt`);
  await writeFile(out, '');
  return {
    env: { ...process.env, NO_COLOR: '1', ...env, NODE_OPTIONS: `--import ${preloadUrl}`, AA_LOADED_HOOKS: hooksUrl, AA_LOADED_OUT: out },
    loaded: async () => unbundled([...new Set((await readFile(out, 'utf8')).split('\n').filter(Boolean))]),
  };
}

/** Runs `agent-access ARGS` to its exit and lists what it loaded. */
async function loadedByCli(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ loaded: string[]; stdout: string }> {
  const traced = await tracedEnv(args.join('_').replace(/[^a-z]+/gi, '-'), env);
  const res = await runCli(args, { env: traced.env });
  expect(res.code, res.stderr).toBe(0);
  const loaded = await traced.loaded();
  // The trace works: the CLI's own modules are in it.
  expect(loaded.some(under('cli'))).toBe(true);
  return { loaded, stdout: res.stdout };
}

/** The server's and the dashboard's packages: no command that runs elsewhere may load them. */
const SERVER_SIDE = ['fastify', '@fastify', '@modelcontextprotocol', 'ink', 'react', '@orama', 'zod'];
const expectNone = (loaded: string[], names: readonly string[], what: string) => {
  for (const name of names) expect(loaded.filter(npm(name)), `${what} loads ${name}`).toEqual([]);
};

describe('what a command line loads (bin/agent-access.js)', () => {
  it('--help and --version load no command module and none of the server side', async () => {
    for (const flag of ['--help', '--version']) {
      const { loaded } = await loadedByCli([flag]);
      expect(loaded.filter(under('cli/commands')), flag).toEqual([]);
      expectNone(loaded, SERVER_SIDE, flag);
    }
  });

  it("a command's own help loads that command's module (and what it imports) only, and none of the server side", async () => {
    for (const [command, modules] of [
      // api.js shares client.js's withSession.
      ['ask', ['api.js', 'client.js']],
      ['serve', ['serve.js']],
    ] as const) {
      const { loaded, stdout } = await loadedByCli([command, '--help']);
      expect(stdout).toContain(`Usage: agent-access ${command}`);
      expect(
        loaded.filter(under('cli/commands')).map((url) => url.split('/').at(-1)),
        command,
      ).toEqual(modules);
      expectNone(loaded, SERVER_SIDE, `${command} --help`);
    }
  });

  it('serve without --ui loads no Ink, and no MCP SDK or zod while no request comes to /mcp; login, token, status and decode none of the server side; token with a valid token no HTTP, OAuth or lock', async () => {
    const traced = await tracedEnv('serve');
    const serve = await startServe(['--in-memory', '--consent', 'approve', '--quiet'], { env: traced.env });
    const config = join(dir, 'config');
    const env = { AGENT_ACCESS_CONFIG_DIR: config, AGENT_ACCESS_BASE_URL: serve.ready.base_url, BROWSER: '' };
    try {
      // Started, ready, and no request to /mcp yet: the agent plane's modules have not loaded.
      expectNone(await traced.loaded(), ['@modelcontextprotocol', 'zod'], 'serve with no request to /mcp');
      expectNone((await loadedByCli(['login', '--headless'], env)).loaded, SERVER_SIDE, 'login');

      const token = await loadedByCli(['token'], env);
      expect(token.stdout).toMatch(/^ey[\w-]+\.[\w-]+\.[\w-]+\n$/);
      expectNone(token.loaded, SERVER_SIDE, 'token');
      expectNone(token.loaded, ['undici', 'oauth4webapi', 'proper-lockfile', 'jose'], 'token (valid stored token)');

      for (const command of ['status', 'decode']) {
        const { loaded } = await loadedByCli([command], env);
        expectNone(loaded, SERVER_SIDE, command);
        expectNone(loaded, ['undici', 'oauth4webapi', 'proper-lockfile'], command);
        // jose's decode-only entry points: a few helpers, not its index with the crypto.
        const jose = loaded.filter(npm('jose'));
        expect(jose.length, command).toBeGreaterThan(0);
        expect(
          jose.filter((url) => !/\/jose\/dist\/webapi\/(util|lib)\//.test(url)),
          command,
        ).toEqual([]);
        expect(jose.length, command).toBeLessThan(10);
      }
    } finally {
      expect(await serve.stop()).toBe(0);
    }
    const loaded = await traced.loaded();
    expect(loaded.some(npm('fastify')), 'the trace of serve shows its server').toBe(true);
    expectNone(loaded, ['ink', 'react'], 'serve without --ui');
    // The login's discovery asks /mcp for its 401 first (RFC 9728 §5.1, as MCP clients start), which loads them.
    expect(loaded.some(npm('@modelcontextprotocol/server')), 'the 401 of /mcp a login starts from').toBe(true);
    expect(loaded.some(npm('@orama/orama')), 'the search index, built in a quiet moment').toBe(true);
  });
});
