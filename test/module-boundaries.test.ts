import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The client and the dashboard speak only the wire (src/protocol): loading them must not load the server, the
 * store or the core. `npm run lint:deps` checks the imports as written; this checks what Node really loads from
 * the build, dynamic imports at load time and CommonJS requires included.
 */

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));

// Runs in Node's module-hooks thread: every URL an import resolves to is appended to the file it is given.
const HOOKS = `
import { appendFileSync } from 'node:fs';
let out;
export function initialize(data) { out = data.out; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(out, result.url + '\\n');
  return result;
}
`;

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

let dir: string;
let hooksUrl: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-boundaries-'));
  const hooksFile = join(dir, 'hooks.mjs');
  await writeFile(hooksFile, HOOKS);
  hooksUrl = pathToFileURL(hooksFile).href;
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
    for (const folder of ['server', 'store', 'core', 'cli', 'client']) expect(loaded.filter(under(folder)), folder).toEqual([]);
    for (const name of ['fastify', '@modelcontextprotocol', 'lowdb']) expect(loaded.filter(npm(name)), name).toEqual([]);
  });

  it('loading the client loads neither fastify nor the core or the store, nor the server, the CLI or the dashboard', async () => {
    const loaded = await loadedBy('client');
    expect(loaded.some(under('client'))).toBe(true);
    expect(loaded.some(npm('oauth4webapi'))).toBe(true);
    for (const folder of ['server', 'store', 'core', 'cli', 'dashboard']) expect(loaded.filter(under(folder)), folder).toEqual([]);
    for (const name of ['fastify', '@modelcontextprotocol', 'lowdb']) expect(loaded.filter(npm(name)), name).toEqual([]);
  });
});
