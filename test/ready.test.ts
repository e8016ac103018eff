import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeResolveHooks } from './helpers/module-trace.js';

/**
 * "Ready means ready": what a request needs is loaded before the emulator says it is ready, or loads after it in the
 * background while the requests that need it wait (the search index), or with the first request to the one route
 * that needs it (the MCP SDK, with the first /mcp request, which an MCP client sends before it has a token); once
 * loaded, nothing loads in the path of a request. Checked on the build, in a process of its own, by the modules
 * Node loads (a resolve hook logs each one) between marks the script writes.
 */

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));

// Starts the emulator, marks the ready point, sends the first requests at once (each kind: metadata, token, ask,
// /mcp), marks when they are answered and when the background loading is done, then sends them all again.
const SCRIPT = `
import { register } from 'node:module';
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
const [hooks, out, dist, state, create] = process.argv.slice(2);
if (!create) register(hooks, { data: { out } });
const mark = (name) => appendFileSync(out, 'MARK ' + name + '\\n');
// A client's first fetch loads and compiles its own HTTP machinery, which on a busy machine takes longer than the
// server's quiet moment: done first, against a throwaway server, so that the burst below comes from a warm client.
const warm = createServer((request, response) => response.end('ok'));
await new Promise((resolve) => warm.listen(0, '127.0.0.1', resolve));
await fetch('http://127.0.0.1:' + warm.address().port + '/').then((r) => r.text());
await new Promise((resolve) => warm.close(resolve));
const { Emulator } = await import(dist + 'server/emulator.js');
const emu = await Emulator.start({ state, port: 0, authPort: 0, onNotice: () => {} });
if (create) {
  await emu.stop();
  process.exit(0);
}
mark('ready');
// A client's burst right after the ready line: for 400 ms, four requests in flight at all times (one after another
// alone leaves gaps of over 50 ms between them when the machine is busy, and the server may rightly see those as
// quiet).
const burst = async () => {
  for (const end = Date.now() + 400; Date.now() < end; ) await fetch(emu.baseUrl + '/.well-known/oauth-authorization-server').then((r) => r.text());
};
await Promise.all([burst(), burst(), burst(), burst()]);
mark('burst');
// A grant of its own for each round: the first round's refresh spends its refresh token.
const issue = () => fetch(emu.adminUrl + '/tokens', {
  method: 'POST',
  headers: { authorization: 'Bearer ' + emu.adminToken, 'content-type': 'application/json' },
  body: JSON.stringify({ scopes: ['ask'] }),
}).then((r) => r.json());
const requests = async (admin) => {
  const answers = await Promise.all([
    fetch(emu.baseUrl + '/.well-known/oauth-authorization-server'),
    fetch(emu.baseUrl + '/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: admin.refresh_token, client_id: admin.client_id }),
    }),
    fetch(emu.baseUrl + '/chat/ask', {
      method: 'POST',
      headers: { authorization: 'Bearer ' + admin.access_token, 'content-type': 'application/json' },
      body: JSON.stringify({ question: 'Wann kommt der Hufschmied?' }),
    }),
    fetch(emu.baseUrl + '/mcp', {
      method: 'POST',
      headers: { authorization: 'Bearer ' + admin.access_token, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
    }),
  ]);
  const bodies = await Promise.all(answers.map((r) => r.text()));
  appendFileSync(out, 'STATUS ' + answers.map((r) => r.status).join(' ') + '\\n');
  appendFileSync(out, 'ASK ' + bodies[2] + '\\n');
};
const [first, second] = [await issue(), await issue()];
await requests(first);
mark('answered');
await emu.loaded();
mark('loaded');
await requests(second);
mark('answered again');
await emu.stop();
`;

let dir: string;
let log: string[];

/** The module URLs logged between two marks (or from the start / to the end). */
function between(from: string | null, to: string | null): string[] {
  const start = from === null ? 0 : log.indexOf(`MARK ${from}`);
  const end = to === null ? log.length : log.indexOf(`MARK ${to}`);
  expect(start, `mark ${from}`).toBeGreaterThanOrEqual(0);
  expect(end, `mark ${to}`).toBeGreaterThan(start);
  return log.slice(start, end).filter((line) => line.startsWith('file:') || line.startsWith('node:'));
}

const npm = (name: string) => (url: string) => url.includes(`/node_modules/${name}/`);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aa-ready-'));
  const hooks = await writeResolveHooks(dir);
  const out = join(dir, 'log.txt');
  await writeFile(out, '');
  const script = join(dir, 'script.mjs');
  await writeFile(script, SCRIPT);
  const args = [script, hooks, out, pathToFileURL(DIST).href, join(dir, 'state.json')];
  const run = (...more: string[]) =>
    promisify(execFile)(process.execPath, [...args, ...more], { env: { ...process.env, NO_COLOR: '1' }, timeout: 60_000 });
  // A user's second start, as the bench measures it: the state file and its signing key exist.
  await run('create');
  await run();
  log = (await readFile(out, 'utf8')).split('\n').filter(Boolean);
}, 90_000);

afterAll(async () => {
  if (!process.env.KEEP) await rm(dir, { recursive: true, force: true });
});

describe('ready means ready', () => {
  it('every first request is answered in full: token, ask (waits for the search index) and /mcp (waits for the MCP SDK)', () => {
    const statuses = log.filter((l) => l.startsWith('STATUS '));
    expect(statuses).toEqual(['STATUS 200 200 200 200', 'STATUS 200 200 200 200']);
    const asks = log.filter((l) => l.startsWith('ASK ')).map((l) => JSON.parse(l.slice(4)) as { sources: unknown[] });
    // The first ask, sent while the index was still loading, finds what the later one finds.
    expect(asks[0]!.sources.length).toBeGreaterThan(0);
    expect(asks[0]!.sources).toEqual(asks[1]!.sources);
  });

  it('on an existing state file, the signing keys are imported before the ready point: jose is loaded by then', () => {
    expect(between(null, 'ready').some(npm('jose'))).toBe(true);
  });

  it('a burst of requests right after the ready point is served before any of it loads: the index waits for a quiet moment, the MCP SDK for a request to /mcp', () => {
    const burst = between('ready', 'burst');
    for (const name of ['@orama/orama', '@modelcontextprotocol', 'zod']) expect(burst.filter(npm(name)), name).toEqual([]);
  });

  it('the search index and the MCP SDK load after the ready point, not before it', () => {
    const before = between(null, 'ready');
    for (const name of ['@orama/orama', '@modelcontextprotocol', 'zod']) {
      expect(before.filter(npm(name)), name).toEqual([]);
      expect(between('ready', 'loaded').some(npm(name)), name).toBe(true);
    }
  });

  it('once loaded (and the first round, which asked /mcp, answered), requests of every kind load nothing more: no warm-up in the path of a request', () => {
    expect(between('loaded', 'answered again')).toEqual([]);
  });
});
