import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import { ledgerFileFor } from '../src/store/state-files.js';
import type { Emulator } from '../src/server/emulator.js';
import { readStateAt } from '../src/store/file-persistence.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { clientMetadata } from './helpers/oauth.js';
import { chunked, rawExchange, requestHead, type RawExchange, type RawResponse } from './helpers/raw-http.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const TEN_MB = 10 * 1000 * 1000;

type Shape = (response: RawResponse) => void;

/** RFC 6749 §5.2: `{error, error_description}` as JSON. */
const oauthJson =
  (error: string): Shape =>
  (response) => {
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(response.json()).toEqual({ error, error_description: expect.any(String) });
  };
/** RFC 9457: a problem with the service's code and the answer's status. */
const problem =
  (code: string): Shape =>
  (response) => {
    expect(response.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(response.json()).toMatchObject({ type: `urn:agent-access:error:${code}`, status: response.status, detail: expect.any(String) });
  };
/** MCP Streamable HTTP: /mcp answers its transport's refusals as JSON-RPC errors (code -32000). */
const jsonRpc: Shape = (response) => {
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  expect(response.json()).toEqual({ jsonrpc: '2.0', id: null, error: { code: -32000, message: expect.any(String) } });
};
/** The German error page of `{auth_url}` with the error's code. */
const page =
  (code: string): Shape =>
  (response) => {
    expect(response.headers['content-type']).toMatch(/^text\/html/);
    expect(response.body).toContain('<html lang="de">');
    expect(response.body).toContain(`Fehlercode: <code>${code}</code>`);
  };

/** What a client needs: one complete answer with the status and shape, and no reset on the way. */
function expectAnswer(exchange: RawExchange, status: number, shape: Shape): RawResponse {
  expect(exchange.error, 'the client met a reset').toBeUndefined();
  expect(exchange.response, 'no complete answer arrived').toBeDefined();
  const response = exchange.response!;
  expect(response.status).toBe(status);
  shape(response);
  return response;
}

interface Setup {
  emu: Emulator;
  token: string;
  state: string;
}

/** An emulator on a state file, with an agent token for every REST scope (issued before the state is compared). */
async function setUp(): Promise<Setup> {
  const state = join(await scratchDir(), 'state.json');
  const emu = await startEmulator({ state });
  const { access_token } = await issueTokensWithoutConsent(emu.core, { scopes: ['ask', 'research', 'training.write'] });
  return { emu, token: access_token, state };
}

/** The state as the file and its journal hold it, and the charge ledger's bytes. */
const stored = async (state: string) => ({
  state: await readStateAt(state),
  ledger: await readFile(ledgerFileFor(state)).catch(() => null),
});

interface BodyRoute {
  name: string;
  url: (s: Setup) => string;
  headers: (s: Setup) => Record<string, string>;
  /** A body whose one large field has `size` bytes. */
  body: (size: number) => Buffer;
  /** The route's body limit. */
  limit: number;
  shape: Shape;
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const pad = (size: number) => 'x'.repeat(size);
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
const JSON_TYPE = { 'content-type': 'application/json' };
const withToken = (s: Setup) => ({ ...JSON_TYPE, authorization: `Bearer ${s.token}` });

const BODY_ROUTES: BodyRoute[] = [
  {
    name: 'POST /oauth/register',
    url: (s) => `${s.emu.baseUrl}/oauth/register`,
    headers: () => JSON_TYPE,
    body: (size) => json({ ...clientMetadata(), software_statement: pad(size) }),
    limit: MiB,
    shape: oauthJson('invalid_client_metadata'),
  },
  {
    name: 'POST /oauth/token',
    url: (s) => `${s.emu.baseUrl}/oauth/token`,
    headers: () => FORM,
    body: (size) => Buffer.from(`grant_type=authorization_code&client_id=client_x&redirect_uri=x&code_verifier=x&code=${pad(size)}`),
    limit: MiB,
    shape: oauthJson('invalid_request'),
  },
  {
    name: 'POST /oauth/revoke',
    url: (s) => `${s.emu.baseUrl}/oauth/revoke`,
    headers: () => FORM,
    body: (size) => Buffer.from(`client_id=client_x&token=${pad(size)}`),
    limit: MiB,
    shape: oauthJson('invalid_request'),
  },
  {
    name: 'POST /chat/ask',
    url: (s) => `${s.emu.baseUrl}/chat/ask`,
    headers: withToken,
    body: (size) => json({ question: pad(size) }),
    limit: 2 * MiB,
    shape: problem('body_too_large'),
  },
  {
    name: 'POST /research',
    url: (s) => `${s.emu.baseUrl}/research`,
    headers: withToken,
    body: (size) => json({ question: pad(size) }),
    limit: 2 * MiB,
    shape: problem('body_too_large'),
  },
  {
    name: 'POST /training',
    url: (s) => `${s.emu.baseUrl}/training`,
    headers: withToken,
    body: (size) => json({ file_name: 'a.md', content: pad(size) }),
    limit: 2 * MiB,
    shape: problem('body_too_large'),
  },
  {
    name: 'POST /mcp',
    url: (s) => `${s.emu.baseUrl}/mcp`,
    headers: (s) => ({ ...withToken(s), accept: 'application/json, text/event-stream' }),
    body: (size) => json({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'ask', arguments: { question: pad(size) } } }),
    limit: MiB,
    shape: jsonRpc,
  },
  {
    name: 'POST /consent on {auth_url}',
    url: (s) => `${s.emu.authUrl}/consent`,
    headers: () => FORM,
    body: (size) => Buffer.from(`interaction=x&decision=approve&csrf=${pad(size)}`),
    limit: MiB,
    shape: page('body_too_large'),
  },
  {
    name: 'POST /_admin/clock/advance',
    url: (s) => `${s.emu.adminUrl}/clock/advance`,
    headers: (s) => ({ ...JSON_TYPE, authorization: `Bearer ${s.emu.adminToken}` }),
    body: (size) => json({ by: pad(size) }),
    limit: MiB,
    shape: problem('body_too_large'),
  },
  {
    name: 'POST to a path no route has',
    url: (s) => `${s.emu.baseUrl}/no/such/route`,
    headers: () => JSON_TYPE,
    body: (size) => json({ x: pad(size) }),
    limit: MiB,
    shape: problem('body_too_large'),
  },
];

describe('RFC 9110 §15.5.14, RFC 9112 §9.6: a body over the limit gets a 413 the client reads, then the connection closes in stages', () => {
  it.each(BODY_ROUTES)(
    '$name: a field at the limit, 10 MB declared, 10 MB chunked; read while sending, after sending, or stopping at the answer; no reset, state unchanged',
    async (route) => {
      const setup = await setUp();
      const before = await stored(setup.state);
      const url = route.url(setup);
      const headers = route.headers(setup);
      const atLimit = route.body(route.limit);
      const ten = route.body(TEN_MB);
      const exchanges = [
        // Declared: refused before any of the body is read.
        await rawExchange(url, requestHead('POST', url, headers, atLimit), atLimit),
        await rawExchange(url, requestHead('POST', url, headers, ten), ten, { readAfterSending: true }),
        // Chunked: refused once the limit is passed while reading.
        await rawExchange(url, requestHead('POST', url, { ...headers, 'transfer-encoding': 'chunked' }, ten), chunked(ten)),
        await rawExchange(url, requestHead('POST', url, { ...headers, 'transfer-encoding': 'chunked' }, ten), chunked(ten), {
          stopOnAnswer: true,
        }),
      ];
      for (const exchange of exchanges) {
        const response = expectAnswer(exchange, 413, route.shape);
        expect(response.headers.connection).toBe('close');
      }
      // The clients that do not stop sent all of it, and the server read it rather than reset them.
      expect(exchanges.slice(0, 3).map((e) => e.sent)).toEqual([atLimit.length, ten.length, chunked(ten).length]);
      expect(await stored(setup.state)).toEqual(before);
    },
  );

  it('RFC 9112 §9.3: a small body left unread by an early answer (401 before the body) is read and dropped, and the connection serves the next request', async () => {
    const { emu } = await setUp();
    const body = json({ question: 'Wann kommt der Hufschmied?' });
    const url = `${emu.baseUrl}/chat/ask`;
    const pipelined =
      requestHead('POST', url, JSON_TYPE, body) +
      body.toString() +
      requestHead('GET', `${emu.baseUrl}/.well-known/oauth-authorization-server`, {});
    const exchange = await rawExchange(url, pipelined, undefined, { expect: 2 });
    expect(exchange.error).toBeUndefined();
    expect(exchange.responses.map((r) => r.status)).toEqual([401, 200]);
    expect(exchange.responses[0]!.headers.connection).not.toBe('close');
  });

  it('RFC 9112 §9.6: 10 MB with a Content-Length on a route that refuses before the body (no token) → 401 read, no reset', async () => {
    const { emu } = await setUp();
    const url = `${emu.baseUrl}/chat/ask`;
    const ten = json({ question: pad(TEN_MB) });
    const exchange = await rawExchange(url, requestHead('POST', url, JSON_TYPE, ten), ten, { readAfterSending: true });
    expectAnswer(exchange, 401, problem('access_token_required'));
    expect(exchange.sent).toBe(ten.length);
  });
});

/** Routes of every error shape, for the limits of the request target and the header fields. */
const HEAD_ROUTES: Array<{ name: string; method: string; url: (emu: Emulator) => string; shape: Shape }> = [
  { name: 'GET /oauth/authorize on {auth_url}', method: 'GET', url: (e) => `${e.authUrl}/oauth/authorize`, shape: page('invalid_request') },
  { name: 'POST /oauth/token', method: 'POST', url: (e) => `${e.baseUrl}/oauth/token`, shape: oauthJson('invalid_request') },
  { name: 'POST /oauth/register', method: 'POST', url: (e) => `${e.baseUrl}/oauth/register`, shape: oauthJson('invalid_client_metadata') },
  { name: 'POST /chat/ask', method: 'POST', url: (e) => `${e.baseUrl}/chat/ask`, shape: problem('invalid_request') },
  { name: 'POST /mcp', method: 'POST', url: (e) => `${e.baseUrl}/mcp`, shape: jsonRpc },
  { name: 'GET /research/{id}', method: 'GET', url: (e) => `${e.baseUrl}/research/job_x`, shape: problem('invalid_request') },
  { name: 'GET /_admin/health', method: 'GET', url: (e) => `${e.adminUrl}/health`, shape: problem('invalid_request') },
  { name: 'a path no route has', method: 'GET', url: (e) => `${e.baseUrl}/no/such/route`, shape: problem('invalid_request') },
];

describe('RFC 9110 §15.5.15, RFC 6585 §5: a request target or header fields over the limit, in the route error shape', () => {
  it.each(HEAD_ROUTES)(
    '$name: a 10 KB URL → 414, 900 short header fields (over 16 KiB with their separators) → 431; the state is unchanged',
    async (route) => {
      const setup = await setUp();
      const before = await stored(setup.state);
      const url = route.url(setup.emu);
      const body = route.method === 'POST' ? Buffer.from('{}') : undefined;
      const headers = body ? JSON_TYPE : {};
      const long = `${url}?pad=${pad(10_000)}`;
      expectAnswer(await rawExchange(long, requestHead(route.method, long, headers, body), body), 414, route.shape);
      // Within what the parser takes (names and values, 13 500 bytes), over the 16 KiB of the fields with their separators.
      const many = {
        ...headers,
        ...Object.fromEntries(Array.from({ length: 900 }, (_, i) => [`x-p${String(i).padStart(4, '0')}`, 'vvvvvvvv'])),
      };
      expectAnswer(await rawExchange(url, requestHead(route.method, url, many, body), body), 431, route.shape);
      expect(await stored(setup.state)).toEqual(before);
    },
  );

  it.each(HEAD_ROUTES)(
    '41.2: $name: a head over 16 KiB (a 20 KB URL, 64 KB of header fields) → 431 problem from the parser; the state is unchanged',
    async (route) => {
      const setup = await setUp();
      const before = await stored(setup.state);
      const url = route.url(setup.emu);
      const body = route.method === 'POST' ? Buffer.from('{}') : undefined;
      const headers = body ? JSON_TYPE : {};
      const long = `${url}?pad=${pad(20_000)}`;
      expectAnswer(await rawExchange(long, requestHead(route.method, long, headers, body), body), 431, problem('invalid_request'));
      const big = { ...headers, 'x-padding': pad(64_000) };
      expectAnswer(await rawExchange(url, requestHead(route.method, url, big, body), body), 431, problem('invalid_request'));
      expect(await stored(setup.state)).toEqual(before);
    },
  );

  it.each([
    ['{base_url}', (e: Emulator) => `${e.baseUrl}/.well-known/oauth-authorization-server`],
    ['{auth_url}', (e: Emulator) => `${e.authUrl}/oauth/authorize`],
  ])(
    'RFC 6585 §5: on %s, 2 MiB of header fields sent in pieces, past what the parser takes (16 KiB) → 431 problem the client reads, no reset',
    async (_origin, target) => {
      const { emu } = await setUp();
      const url = target(emu);
      const head = requestHead('GET', url, {}).replace(/\r\n$/, 'x-padding: ');
      const exchange = await rawExchange(url, head, Buffer.from(`${pad(2 * MiB)}\r\n\r\n`), { chunk: 16 * KiB });
      const response = expectAnswer(exchange, 431, problem('invalid_request'));
      expect(response.headers.connection).toBe('close');
    },
  );
});
