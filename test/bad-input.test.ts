/**
 * Property-based bad input (fast-check) against a running emulator over real sockets: for registration, authorize,
 * token, revoke, /chat/ask, /research, /research/{id}, /training and /mcp, generated inputs that the service must
 * refuse (wrong types, missing and extra fields, huge values, control characters, broken encodings, bad JSON, wrong
 * content types). Each gets a 4xx in its route's documented error shape, never a 5xx or a reset connection, and the
 * stored state (state file and charge ledger) is byte for byte what it was. A failure prints fast-check's seed and
 * path; `FC_SEED=<seed>` reruns that sequence.
 */
import fc from 'fast-check';
import { request } from 'undici';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import type { StateExport } from '../src/core/state/persistence.js';
import type { Emulator } from '../src/server/emulator.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { REDIRECT, authorizeUrl, pkce, register } from './helpers/oauth.js';

const RUNS = 300;
const SEED = process.env.FC_SEED === undefined ? undefined : Number(process.env.FC_SEED);

/** One request as sent: the body as raw bytes, so that broken encodings reach the server as they are. */
interface Sent {
  method?: string;
  path: string;
  headers?: Record<string, string | string[]>;
  body?: Buffer | string;
}

interface Answer {
  status: number;
  type: string;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

async function send(base: string, sent: Sent): Promise<Answer> {
  try {
    const res = await request(`${base}${sent.path}`, {
      method: (sent.method ?? 'POST') as 'POST',
      headers: sent.headers,
      body: sent.body,
    });
    const text = await res.body.text();
    return { status: res.statusCode, type: String(res.headers['content-type'] ?? ''), text, headers: res.headers };
  } catch (e) {
    // A reset or a closed socket: the client never read an answer.
    throw new Error(`${sent.method ?? 'POST'} ${sent.path.slice(0, 80)}: no answer (${(e as Error).message})`, { cause: e });
  }
}

const json = (value: unknown) => JSON.stringify(value);

// ---- generators: the building blocks of bad input ----------------------------------------------------------

const notAString = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 2 }),
);
const controlChar = fc.integer({ min: 0, max: 0x1f }).map((c) => String.fromCharCode(c));
const withControl = fc.tuple(fc.string({ maxLength: 20 }), controlChar, fc.string({ maxLength: 20 })).map(([a, c, b]) => `${a}${c}${b}`);
/** Just over a limit: the bytes are the cost of every case, so a little over is as good a test as far over. */
const huge = (min: number) => fc.integer({ min, max: Math.ceil(min * 1.25) }).map((n) => 'x'.repeat(n));
/** Text that is not JSON at all, or JSON cut short. */
const brokenJson = fc.oneof(
  fc.constantFrom('{', '{"', '{"a":', '[1,', '{"a":1,}', "{'a':1}", 'nul', '"unterminated', '{"a":1}}', '\u0000'),
  fc.string({ minLength: 1, maxLength: 30 }).filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return true;
    }
  }),
);
/** UTF-8 that is not: a lone continuation byte, a truncated sequence, an overlong form, a surrogate, 0xFF. */
const invalidUtf8 = fc.constantFrom([0x80], [0xc3], [0xe2, 0x82], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xff], [0xf8, 0x88, 0x80, 0x80, 0x80]);
const withBrokenUtf8 = (before: string, after: string) =>
  invalidUtf8.map((bytes) => Buffer.concat([Buffer.from(before), Buffer.from(bytes), Buffer.from(after)]));
const wrongJsonType = fc.constantFrom(
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
);
const notAnObject = fc.oneof(
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.integer(),
  fc.string({ maxLength: 10 }),
  fc.constant(null),
  fc.boolean(),
);

/** A JSON POST body in one of the ways it can be wrong, given the fields of a valid body and how each can be spoilt. */
function badJsonPosts(
  path: string,
  headers: Record<string, string>,
  valid: Record<string, unknown>,
  spoilt: fc.Arbitrary<Record<string, unknown>>,
) {
  const jsonHeaders = { ...headers, 'content-type': 'application/json' };
  return fc.oneof(
    spoilt.map((body): Sent => ({ path, headers: jsonHeaders, body: json(body) })),
    notAnObject.map((body): Sent => ({ path, headers: jsonHeaders, body: json(body) })),
    brokenJson.map((body): Sent => ({ path, headers: jsonHeaders, body })),
    wrongJsonType.map((type): Sent => ({ path, headers: { ...headers, 'content-type': type }, body: json(valid) })),
    fc.constant<Sent>({ path, headers, body: json(valid) }),
    withBrokenUtf8(json(valid).slice(0, -2), '"}').map((body): Sent => ({ path, headers: jsonHeaders, body })),
  );
}

/** `valid` with one field removed, of a wrong type, or replaced by a bad value; unknown extra fields come along. */
function spoil(valid: Record<string, unknown>, badValues: Record<string, fc.Arbitrary<unknown>>) {
  const field = fc.constantFrom(...Object.keys(valid));
  const extra = fc.dictionary(
    fc.string({ minLength: 1, maxLength: 8 }).filter((k) => !(k in valid)),
    fc.jsonValue({ maxDepth: 1 }),
    { maxKeys: 2 },
  );
  return fc.oneof(
    fc.tuple(field, extra).map(([name, more]) => {
      const { [name]: _gone, ...rest } = valid;
      return { ...rest, ...more };
    }),
    fc.tuple(field, notAString, extra).map(([name, value, more]) => ({ ...valid, ...more, [name]: value })),
    ...Object.entries(badValues).map(([name, value]) => fc.tuple(value, extra).map(([v, more]) => ({ ...valid, ...more, [name]: v }))),
  );
}

// ---- the documented error shapes ------------------------------------------------------------------------------

function expectProblem(answer: Answer) {
  expect(answer.type).toMatch(/^application\/problem\+json/);
  const body = JSON.parse(answer.text) as Record<string, unknown>;
  expect(body).toMatchObject({
    type: expect.stringMatching(/^urn:agent-access:error:[a-z_]+$/),
    title: expect.any(String),
    status: answer.status,
  });
  expect(typeof body.detail).toBe('string');
}

function expectOAuthError(answer: Answer) {
  expect(answer.type).toMatch(/^application\/json/);
  const body = JSON.parse(answer.text) as Record<string, unknown>;
  expect(body).toEqual({ error: expect.stringMatching(/^[a-z_]+$/), error_description: expect.any(String) });
  expect(body.error_description as string).toMatch(/^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/); // RFC 6749 §5.2
}

function expectJsonRpcError(answer: Answer) {
  const body = JSON.parse(answer.text) as Record<string, unknown>;
  if (answer.status === 401 || answer.status === 403 || answer.status === 429) return expectProblem(answer);
  expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: expect.any(Number), message: expect.any(String) } });
}

// ---- the run ----------------------------------------------------------------------------------------------

interface Target {
  emulator: Emulator;
  token: string;
  clientId: string;
}

/** One emulator with a state file and a manual clock (a refused request must not even move `last_used_at`). */
async function target(): Promise<Target> {
  const emulator = await startEmulator({ state: `${await scratchDir()}/state.json`, clock: new ManualClock(), rateLimit: '1000000/min' });
  const issued = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask', 'research', 'training.write'] });
  return { emulator, token: issued.access_token, clientId: issued.client_id };
}

/** Runs RUNS generated requests; each must be refused as `check` says, and the stored state must stay as it was. */
async function refusesAll(t: Target, requests: fc.Arbitrary<Sent>, check: (answer: Answer, sent: Sent) => void, base = t.emulator.baseUrl) {
  const before = await t.emulator.core.exportState();
  await fc.assert(
    fc.asyncProperty(requests, async (sent) => {
      const answer = await send(base, sent);
      expect(answer.status, `${answer.status} ${answer.text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
      expect(answer.status, answer.text.slice(0, 300)).toBeLessThan(500);
      check(answer, sent);
    }),
    { numRuns: RUNS, ...(SEED !== undefined ? { seed: SEED } : {}) },
  );
  expectSameExport(await t.emulator.core.exportState(), before);
}

/** The export (stored state and ledger) as it was (parsed first, so that a difference shows as a readable diff). */
function expectSameExport(after: StateExport, before: StateExport) {
  expect(JSON.parse(after.state)).toEqual(JSON.parse(before.state));
  expect(after).toEqual(before);
}

const bearer = (t: Target) => ({ authorization: `Bearer ${t.token}` });

// 300 requests over sockets per property, some of a megabyte: a budget for the work, not for a slow answer.
describe('bad input is refused cleanly: a 4xx in the documented shape, no 5xx, no reset, state unchanged', { timeout: 120_000 }, () => {
  it('RFC 7591 §3.2.2: POST /oauth/register', async () => {
    const t = await target();
    const valid = {
      client_name: 'Agent',
      redirect_uris: ['http://127.0.0.1:9/cb'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
    const badUri = fc.oneof(
      fc.constantFrom(
        '/relative',
        'http://app.example/cb',
        'https://a.example/cb#f',
        'ftp://127.0.0.1/x',
        'http://LOCALHOST/cb',
        'https://u:p@a.example/',
      ),
      withControl.map((s) => `http://127.0.0.1:9/${s}`),
      huge(2001).map((s) => `https://a.example/${s}`),
    );
    const spoilt = spoil(valid, {
      client_name: fc.oneof(fc.constant(''), withControl, huge(201)),
      redirect_uris: fc.oneof(
        fc.constant([]),
        badUri.map((u) => [u]),
        fc.constant(Array.from({ length: 21 }, (_, i) => `http://127.0.0.1/${i}`)),
      ),
      grant_types: fc.oneof(fc.constant([]), fc.constant(['client_credentials']), fc.constant(['refresh_token'])),
      response_types: fc.oneof(fc.constant([]), fc.constant(['token'])),
      token_endpoint_auth_method: fc.constantFrom('client_secret_basic', 'private_key_jwt', ''),
    });
    await refusesAll(t, badJsonPosts('/oauth/register', {}, valid, spoilt), (answer) => expectOAuthError(answer));
    expect(Object.keys(t.emulator.core.state.clients)).toHaveLength(1); // the token's own client only
  });

  it('OAuth 2.1 §4.1.2.1: GET /oauth/authorize answers an error page or redirects with error, never a consent page', async () => {
    const t = await target();
    const { client_id } = await register(t.emulator.baseUrl);
    const { challenge } = pkce();
    const base = new URL(authorizeUrl(t.emulator.authUrl, t.emulator.baseUrl, { client_id, state: 's' }, challenge));
    const params = [...base.searchParams.keys()];
    const spoilt = fc.oneof(
      // Without resource the request is an identity request (spec 4.2): valid, not bad input.
      fc.constantFrom(...params.filter((p) => p !== 'resource')).map((name) => ({ drop: name })),
      fc.constantFrom(...params).map((name) => ({ repeat: name })),
      fc.record({
        set: fc.constantFrom(
          ['response_type', 'token'],
          ['code_challenge', 'short'],
          ['code_challenge_method', 'plain'],
          ['scope', 'contacts.read'],
          ['scope', 'ask admin'],
          ['resource', 'https://elsewhere.example/mcp'],
          ['client_id', 'client_unknown'],
          ['redirect_uri', 'http://127.0.0.1:9/other'],
          ['redirect_uri', 'https://evil.example/cb'],
        ),
      }),
      fc.tuple(fc.constantFrom('client_id', 'redirect_uri', 'code_challenge'), withControl).map(([name, v]) => ({ set: [name, v] })),
    );
    const requests = spoilt.map((change): Sent => {
      const url = new URL(base);
      if ('drop' in change) url.searchParams.delete(change.drop);
      else if ('repeat' in change) url.searchParams.append(change.repeat, url.searchParams.get(change.repeat)!);
      else url.searchParams.set(change.set[0], change.set[1]);
      return { method: 'GET', path: `${url.pathname}${url.search}` };
    });
    const before = await t.emulator.core.exportState();
    await fc.assert(
      fc.asyncProperty(requests, async (sent) => {
        const answer = await send(t.emulator.authUrl, sent);
        if (answer.status === 302) {
          const location = new URL(String(answer.headers.location));
          expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
          expect(location.searchParams.get('error')).toMatch(/^[a-z_]+$/);
          expect(location.searchParams.get('iss')).toBe(t.emulator.issuer);
        } else {
          expect(answer.status, answer.text.slice(0, 300)).toBe(400);
          expect(answer.type).toMatch(/^text\/html/);
          expect(answer.text).toContain('Fehlercode: <code>');
        }
      }),
      { numRuns: RUNS, ...(SEED !== undefined ? { seed: SEED } : {}) },
    );
    expectSameExport(await t.emulator.core.exportState(), before);
  });

  it('RFC 6749 §5.2: POST /oauth/token', async () => {
    const t = await target();
    const form = 'application/x-www-form-urlencoded';
    const field = fc.oneof(fc.string({ maxLength: 40 }), withControl, huge(10_000));
    const fields = fc.record(
      {
        grant_type: fc.oneof(fc.constantFrom('authorization_code', 'refresh_token', 'password', 'client_credentials', ''), field),
        client_id: fc.oneof(fc.constant(t.clientId), field),
        code: field,
        redirect_uri: field,
        code_verifier: field,
        refresh_token: field,
        scope: field,
      },
      { requiredKeys: [] },
    );
    const requests = fc.oneof(
      fields.map((f): Sent => ({ path: '/oauth/token', headers: { 'content-type': form }, body: new URLSearchParams(f).toString() })),
      fields.map((f): Sent => ({ path: '/oauth/token', headers: { 'content-type': 'application/json' }, body: json(f) })),
      fc
        .constantFrom(
          'grant_type=refresh_token&refresh_token=%ff%fe',
          'grant_type=%zz',
          '%',
          'a=b&&&=',
          'grant_type=authorization_code&code=a&code=b',
        )
        .map((body): Sent => ({ path: '/oauth/token', headers: { 'content-type': form }, body })),
      withBrokenUtf8('grant_type=refresh_token&client_id=x&refresh_token=', '').map((body): Sent => ({
        path: '/oauth/token',
        headers: { 'content-type': form },
        body,
      })),
    );
    await refusesAll(t, requests, (answer) => expectOAuthError(answer));
  });

  it('RFC 7009 §2.2.1: POST /oauth/revoke refuses what is not a revocation request (an unknown token is 200 by design)', async () => {
    const t = await target();
    const form = 'application/x-www-form-urlencoded';
    const requests = fc.oneof(
      fc
        .record(
          { client_id: fc.constant(t.clientId), token_type_hint: fc.constantFrom('refresh_token', 'access_token') },
          { requiredKeys: [] },
        )
        .map((f): Sent => ({ path: '/oauth/revoke', headers: { 'content-type': form }, body: new URLSearchParams(f).toString() })),
      fc.string({ minLength: 1, maxLength: 20 }).map((token): Sent => ({
        path: '/oauth/revoke',
        headers: { 'content-type': form },
        body: new URLSearchParams({ token }).toString(),
      })),
      fc.string({ minLength: 1, maxLength: 20 }).map((token): Sent => ({
        path: '/oauth/revoke',
        headers: { 'content-type': 'application/json' },
        body: json({ token, client_id: t.clientId }),
      })),
      huge(1024 * 1024 + 1).map((token): Sent => ({
        path: '/oauth/revoke',
        headers: { 'content-type': form },
        body: `token=${token}&client_id=${t.clientId}`,
      })),
    );
    await refusesAll(t, requests, (answer) => expectOAuthError(answer));
  });

  it('spec 4.4, 2.4: POST /chat/ask', async () => {
    const t = await target();
    const valid = { question: 'Wann kommt der Hufschmied?' };
    const spoilt = spoil(valid, { question: fc.oneof(fc.constant(''), fc.constantFrom(' ', '\n\t '), huge(4001)) });
    const keyed = fc.oneof(fc.constant(''), huge(256), fc.constant('a\tb'), fc.constant('  ')).map((key): Sent => ({
      path: '/chat/ask',
      headers: { ...bearer(t), 'content-type': 'application/json', 'idempotency-key': key },
      body: json(valid),
    }));
    await refusesAll(t, fc.oneof(badJsonPosts('/chat/ask', bearer(t), valid, spoilt), keyed), (answer) => expectProblem(answer));
  });

  it('spec 4.4, 3.1: POST /research', async () => {
    const t = await target();
    const valid = { question: 'Wie hoch ist die Pacht?' };
    const spoilt = spoil(valid, { question: fc.oneof(fc.constant(''), fc.constant('   '), huge(4001)) });
    await refusesAll(t, badJsonPosts('/research', bearer(t), valid, spoilt), (answer) => expectProblem(answer));
    expect(Object.keys(t.emulator.core.state.research_jobs)).toHaveLength(0);
  });

  it('spec 4.4, 2.5: GET /research/{job_id} for ids that name no job of the caller', async () => {
    const t = await target();
    const id = fc.oneof(
      fc.string({ minLength: 1, maxLength: 40 }),
      withControl,
      huge(201),
      fc.constantFrom('..', '%', '%2F', 'job_/x', '__proto__', 'constructor'),
    );
    const requests = id.map((value): Sent => ({ method: 'GET', path: `/research/${encodeURIComponent(value)}`, headers: bearer(t) }));
    await refusesAll(t, requests, (answer) => expectProblem(answer));
  });

  it('spec 4.4, 2.6: POST /training', async () => {
    const t = await target();
    const valid = { file_name: 'notiz.md', content: '# Notiz\n\nHufschmied am Dienstag.' };
    const spoilt = spoil(valid, {
      file_name: fc.oneof(
        fc.constantFrom(
          '',
          '.',
          '..',
          '../x.md',
          'a/b.md',
          'a\\b.md',
          'notiz.exe',
          'notiz',
          '.md',
          'C:x.md',
          'a\u2215b.md',
          'a\uff0fb.md',
          'x\u202Egpj.md',
        ),
        withControl.map((s) => `${s}.md`),
        huge(256),
      ),
      content: fc.oneof(fc.constant(''), fc.constant(' \n '), huge(256 * 1024 + 1)),
    });
    await refusesAll(t, badJsonPosts('/training', bearer(t), valid, spoilt), (answer) => expectProblem(answer));
    expect(Object.keys(t.emulator.core.state.training_documents)).toHaveLength(0);
  });

  it('JSON-RPC 2.0, MCP Streamable HTTP: POST /mcp', async () => {
    const t = await target();
    const headers = { ...bearer(t), accept: 'application/json, text/event-stream' };
    const call = (name: unknown, args: unknown) => ({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });
    const requests = fc.oneof(
      brokenJson.map((body): Sent => ({ path: '/mcp', headers: { ...headers, 'content-type': 'application/json' }, body })),
      fc
        .oneof(
          notAnObject,
          fc.record({ jsonrpc: fc.oneof(fc.constant('1.0'), notAString), id: fc.integer(), method: fc.constant('tools/list') }),
        )
        .map((body): Sent => ({ path: '/mcp', headers: { ...headers, 'content-type': 'application/json' }, body: json(body) })),
      wrongJsonType.map((type): Sent => ({
        path: '/mcp',
        headers: { ...headers, 'content-type': type },
        body: json(call('ask', { question: 'x' })),
      })),
      withBrokenUtf8(json(call('ask', { question: 'x' })).slice(0, -4), '"}}}').map((body): Sent => ({
        path: '/mcp',
        headers: { ...headers, 'content-type': 'application/json' },
        body,
      })),
      fc
        .array(fc.constant(call('ask', { question: 'x' })), { minLength: 1, maxLength: 3 })
        .map((batch): Sent => ({ path: '/mcp', headers: { ...headers, 'content-type': 'application/json' }, body: json(batch) })),
    );
    await refusesAll(t, requests, (answer) => expectJsonRpcError(answer));
    expect(t.emulator.core.state.charges.count).toBe(0);
  });

  it("MCP tools/call with bad arguments: a tool error in MCP's shape (HTTP 200, isError or a JSON-RPC error), never charged", async () => {
    const t = await target();
    const headers = { ...bearer(t), accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
    const tools = fc.constantFrom(
      'ask',
      'start_research',
      'get_research',
      'add_training_document',
      'get_training_document',
      'nope',
      'contacts_list',
    );
    const args = fc.oneof(
      notAnObject,
      fc.record({ question: fc.oneof(notAString, fc.constant(''), huge(4001)) }),
      fc.record({ job_id: fc.oneof(notAString, fc.constant(''), huge(201)), document_id: fc.oneof(notAString, huge(201)) }),
      fc.record({ file_name: fc.constantFrom('', '../x.md', 'x.exe'), content: fc.constantFrom('', ' ') }),
      fc.record({ question: fc.constant('Hallo?'), idempotency_key: fc.oneof(fc.constant(''), huge(256), fc.constant('a\tb')) }),
    );
    const requests = fc.tuple(tools, args).map(([name, a]): Sent => ({
      path: '/mcp',
      headers,
      body: json({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name, arguments: a } }),
    }));
    const before = await t.emulator.core.exportState();
    await fc.assert(
      fc.asyncProperty(requests, async (sent) => {
        const answer = await send(t.emulator.baseUrl, sent);
        expect(answer.status, answer.text.slice(0, 300)).toBe(200);
        const body = JSON.parse(answer.text) as { id: number; error?: { code: number }; result?: { isError?: boolean } };
        expect(body.id).toBe(7);
        expect(body.error?.code !== undefined || body.result?.isError === true, answer.text.slice(0, 300)).toBe(true);
      }),
      { numRuns: RUNS, ...(SEED !== undefined ? { seed: SEED } : {}) },
    );
    expectSameExport(await t.emulator.core.exportState(), before);
    expect(t.emulator.core.state.charges.count).toBe(0);
  });
});
