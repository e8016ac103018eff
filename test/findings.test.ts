/**
 * Client findings over real sockets, each produced by the real sequence that causes it (the MCP SDK client with
 * parallel tool calls across an expiry, a client without resource, an authorization URL without scope, retries
 * without a key, an ignored 429, a second login), and none for a well-behaved client run through the same flows.
 * Where they show: GET /_admin/findings, emu.findings() and assertNoFindings(), `agent-access findings`, serve's log.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ManualClock, MINUTE } from '../src/core/state/clock.js';
import { setConsentPolicy } from '../src/core/oauth/consent.js';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import { startEmulator as startApi, type RunningEmulator } from '../src/index.js';
import { FindingsError, type Finding } from '../src/protocol/findings.js';
import type { Emulator } from '../src/server/emulator.js';
import { runCli, startServe } from './helpers/cli.js';
import { clientEnv, startCli } from './helpers/client.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { connectWithOAuth } from './helpers/mcp-client.js';
import { Browser, authorizeAndApprove, authorizeUrl, bearer, http, pkce, postJson, refresh, register } from './helpers/oauth.js';

const codes = (findings: readonly Finding[]) => findings.map((f) => f.code).sort();
/** At warning and above: the tests' grants hold scopes some flows never use (scope.unused is info). */
const notable = (emulator: Emulator) => emulator.core.findings.list().filter((f) => f.severity !== 'info');

/** The MCP SDK client, logged in and once used, on a manual clock moved past its access token's expiry. */
async function sdkClientPastExpiry() {
  const clock = new ManualClock();
  const emulator = await startEmulator({ clock });
  const { client } = await connectWithOAuth(emulator, 'ask');
  await client.callTool({ name: 'ask', arguments: { question: 'Wann kommt der Hufschmied?' } });
  clock.advance(16 * MINUTE);
  return { emulator, client };
}

const ask = (emulator: Emulator, token: string, question: string, headers: Record<string, string> = {}) =>
  postJson(`${emulator.baseUrl}/chat/ask`, { question }, bearer(token, headers));

/**
 * The `ask` tool called on /mcp over a raw socket, in two steps: its head goes first, with `Expect: 100-continue`, so
 * that the `100 Continue` shows the head was received (Node answers it as it hands the request on); its body goes on
 * `send()`. /mcp checks a tool call's rate limit once the body is read, so the call has arrived but is not yet admitted.
 */
function heldToolCall(emulator: Emulator, token: string, question: string) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'ask', arguments: { question } } });
  const { port } = new URL(emulator.baseUrl);
  const socket = connect({ host: '127.0.0.1', port: Number(port) });
  let received = '';
  const arrived = new Promise<void>((resolve, reject) => {
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      if (received.startsWith('HTTP/1.1 100')) resolve();
    });
    socket.on('error', reject);
  });
  const answered = new Promise<number>((resolve) =>
    socket.on('close', () => resolve(Number(/HTTP\/1\.1 (?!100)(\d{3})/.exec(received)?.[1]))),
  );
  socket.write(
    [
      'POST /mcp HTTP/1.1',
      `Host: 127.0.0.1:${port}`,
      `Authorization: Bearer ${token}`,
      'Content-Type: application/json',
      'Accept: application/json, text/event-stream',
      'MCP-Protocol-Version: 2025-06-18',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Expect: 100-continue',
      'Connection: close',
      '',
      '',
    ].join('\r\n'),
  );
  return {
    arrived,
    /** Sends the body; resolves to the status of the answer. */
    send: () => {
      socket.write(body);
      return answered;
    },
  };
}

describe('client findings from real clients (spec 3.2, 4.2, 4.4, 5.8; RFC 8707)', () => {
  it('refresh.concurrent: the MCP SDK client with three tool calls in flight when the access token expires', async () => {
    const { emulator, client } = await sdkClientPastExpiry();
    // Each call finds the token expired and refreshes with the same refresh token; the replay rule kills the family.
    await Promise.allSettled([1, 2, 3].map(() => client.callTool({ name: 'ask', arguments: { question: 'Was steht an?' } })));
    const concurrent = emulator.core.findings.list().find((f) => f.code === 'refresh.concurrent');
    expect(concurrent).toMatchObject({ severity: 'error', client_name: 'MCP SDK test agent', spec: 'spec 3.2; OAuth 2.1 §4.3.1' });
    expect(concurrent!.count).toBeGreaterThanOrEqual(1);
    expect(concurrent!.hint).toMatch(/serialise refreshes/);
  });

  it('token.identity_at_resource and refresh.loop: a client that never sends resource, refreshing after every 401 at /mcp', async () => {
    const emulator = await startEmulator();
    const flow = await authorizeAndApprove(emulator, { resource: null });
    let tokens = flow.tokens!;
    for (let i = 0; i < 3; i++) {
      const res = await http(`${emulator.baseUrl}/mcp`, {
        method: 'POST',
        headers: bearer(tokens.access_token, { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }),
        body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      });
      expect(res.status).toBe(401);
      expect(res.json()).toMatchObject({ detail: expect.stringMatching(/identity token/), hint: expect.stringMatching(/^Send resource=/) });
      tokens = (await refresh(emulator.baseUrl, { client_id: flow.client_id, refresh_token: tokens.refresh_token })).json();
    }
    expect(codes(notable(emulator))).toEqual(['authorize.missing_parameter', 'refresh.loop', 'token.identity_at_resource']);
    expect(notable(emulator).find((f) => f.code === 'token.identity_at_resource')).toMatchObject({ count: 3, client_id: flow.client_id });
  });

  it('authorize.missing_parameter: an authorization URL without scope lands on invalid_scope whose description says what to send', async () => {
    const emulator = await startEmulator();
    const { client_id } = await register(emulator.baseUrl);
    const res = await new Browser().get(authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, scope: null }, pkce().challenge));
    expect(res.status).toBe(302);
    const location = new URL(res.headers.location as string);
    expect(location.searchParams.get('error')).toBe('invalid_scope');
    expect(location.searchParams.get('error_description')).toMatch(/Hint: Request the scopes the agent needs, e\.g\. scope=ask/);
    expect(notable(emulator)).toMatchObject([{ code: 'authorize.missing_parameter', client_id, severity: 'error' }]);
  });

  it('the error page keeps its German words for the person and folds the developer part away ("Für Entwickler")', async () => {
    const emulator = await startEmulator();
    const { client_id } = await register(emulator.baseUrl);
    const res = await new Browser().get(
      authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, redirect_uri: null }, pkce().challenge),
    );
    expect(res.status).toBe(400);
    expect(res.text).toContain('Die Anfrage der Anwendung ist unvollständig oder fehlerhaft.');
    expect(res.text).toMatch(
      /<details class="developer"><summary>Für Entwickler<\/summary>\s*<p lang="en"><bdi>redirect_uri is missing<\/bdi><\/p><p lang="en">Hint: <bdi>Send redirect_uri/,
    );
    expect(notable(emulator)).toMatchObject([{ code: 'authorize.missing_parameter', client_id }]);
  });

  it('idempotency.retry_without_key: the same ask sent twice without a key is charged twice and noticed; with a key it is not', async () => {
    const emulator = await startEmulator();
    const { access_token } = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'] });
    expect((await ask(emulator, access_token, 'Wann kommt der Hufschmied?', { 'idempotency-key': 'k1' })).status).toBe(200);
    expect((await ask(emulator, access_token, 'Wann kommt der Hufschmied?', { 'idempotency-key': 'k1' })).status).toBe(200);
    expect((await ask(emulator, access_token, 'Was kostet das Futter?')).status).toBe(200);
    expect(notable(emulator)).toEqual([]);
    expect((await ask(emulator, access_token, 'Was kostet das Futter?')).status).toBe(200);
    expect(notable(emulator)).toMatchObject([{ code: 'idempotency.retry_without_key', severity: 'warning' }]);
    expect(notable(emulator)[0]!.message).toMatch(/POST \/chat\/ask .* without Idempotency-Key, and charged again/);
  });

  it('44.5: an MCP caller is told of its idempotency_key argument, not of a header: the finding, its hint and the 409', async () => {
    const emulator = await startEmulator();
    const { client } = await connectWithOAuth(emulator, 'ask');
    const ask = (args: Record<string, string>) => client.callTool({ name: 'ask', arguments: args });
    await ask({ question: 'Was kostet das Futter?' });
    await ask({ question: 'Was kostet das Futter?' });
    const [finding] = notable(emulator);
    expect(finding).toMatchObject({ code: 'idempotency.retry_without_key' });
    expect(finding!.message).toMatch(/without idempotency_key, and charged again/);
    expect(finding!.hint).toMatch(/^Pass the idempotency_key argument/);
    expect(`${finding!.message} ${finding!.hint}`).not.toMatch(/Idempotency-Key|header/);
    await ask({ question: 'Wann kommt der Hufschmied?', idempotency_key: 'k' });
    const reused = await ask({ question: 'Etwas anderes?', idempotency_key: 'k' });
    expect(reused.structuredContent).toMatchObject({
      error: 'idempotency_key_reused',
      detail: expect.stringMatching(/^idempotency_key "k"/),
    });
    expect(JSON.stringify(reused.structuredContent)).not.toMatch(/Idempotency-Key/);
    await client.close();
  });

  it('ratelimit.retry_too_early: a request right after a 429; waiting the Retry-After is no finding', async () => {
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, rateLimit: '1/min' });
    const issue = issueTokensWithoutConsent;
    const patient = await issue(emulator.core, { scopes: ['ask'] });
    expect((await ask(emulator, patient.access_token, 'eins', { 'idempotency-key': 'a' })).status).toBe(200);
    const limited = await ask(emulator, patient.access_token, 'zwei', { 'idempotency-key': 'b' });
    expect(limited.status).toBe(429);
    clock.advance(Number(limited.headers['retry-after']) * 1000);
    expect((await ask(emulator, patient.access_token, 'zwei', { 'idempotency-key': 'b' })).status).toBe(200);
    expect(notable(emulator)).toEqual([]);

    const eager = await issue(emulator.core, { scopes: ['ask'] });
    expect((await ask(emulator, eager.access_token, 'eins', { 'idempotency-key': 'a' })).status).toBe(200);
    expect((await ask(emulator, eager.access_token, 'zwei', { 'idempotency-key': 'b' })).status).toBe(429);
    expect((await ask(emulator, eager.access_token, 'zwei', { 'idempotency-key': 'b' })).status).toBe(429);
    expect(notable(emulator)).toMatchObject([{ code: 'ratelimit.retry_too_early', grant_id: eager.grant_id, severity: 'warning' }]);
  });

  it('48: ratelimit.retry_too_early judges by arrival: a call in flight when the 429 of its grant went out is no retry', async () => {
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, rateLimit: '1/min' });
    const { access_token } = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'] });
    expect((await ask(emulator, access_token, 'eins')).status).toBe(200); // the window is used up
    // Two at once under one grant: the tool call arrives first, and is admitted only after the ask's 429 went out.
    const inFlight = heldToolCall(emulator, access_token, 'zwei');
    await inFlight.arrived;
    expect((await ask(emulator, access_token, 'drei')).status).toBe(429);
    expect(await inFlight.send()).toBe(429);
    // The client sent it before it could know of the 429 (RFC 9110 §10.2.3 asks it to wait before its next request).
    expect(notable(emulator)).toEqual([]);
  });

  it('48: ratelimit.retry_too_early: a request sent after the 429 was received and before its Retry-After is one, on either transport', async () => {
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, rateLimit: '1/min' });
    const { access_token, grant_id } = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'] });
    expect((await ask(emulator, access_token, 'eins')).status).toBe(200);
    const limited = await ask(emulator, access_token, 'zwei');
    expect(limited.status).toBe(429);
    clock.advance(Number(limited.headers['retry-after']) * 1000 - 1000); // a second short of the Retry-After
    const toolCall = heldToolCall(emulator, access_token, 'drei');
    await toolCall.arrived;
    expect(await toolCall.send()).toBe(429);
    expect(notable(emulator)).toMatchObject([{ code: 'ratelimit.retry_too_early', grant_id, count: 1 }]);
    expect((await ask(emulator, access_token, 'vier')).status).toBe(429);
    expect(notable(emulator)).toMatchObject([{ code: 'ratelimit.retry_too_early', grant_id, count: 2 }]);
  });

  it('48: ratelimit.retry_too_early: a request sent after one 429 is judged by it, though another 429 went out while it was handled', async () => {
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, rateLimit: '1/min' });
    const { access_token, grant_id } = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'] });
    expect((await ask(emulator, access_token, 'eins')).status).toBe(200);
    expect((await ask(emulator, access_token, 'zwei')).status).toBe(429);
    // Both sent after that 429 was received: the tool call arrives, the ask gets a 429 of its own, then the call is admitted.
    const toolCall = heldToolCall(emulator, access_token, 'drei');
    await toolCall.arrived;
    expect((await ask(emulator, access_token, 'vier')).status).toBe(429);
    expect(await toolCall.send()).toBe(429);
    expect(notable(emulator)).toMatchObject([{ code: 'ratelimit.retry_too_early', grant_id, count: 2 }]);
  });

  it('registration.repeated: a client that registers anew on every run; the settings page would list each as another app', async () => {
    const emulator = await startEmulator();
    for (let i = 0; i < 2; i++) await register(emulator.baseUrl);
    expect(notable(emulator)).toEqual([]);
    const { client_id } = await register(emulator.baseUrl);
    expect(notable(emulator)).toMatchObject([{ code: 'registration.repeated', client_id, client_name: 'Test Agent', count: 1 }]);
    expect(notable(emulator)[0]!.hint).toMatch(/^Register once and keep the client_id/);
  });

  it('scope.unused (info): a scope granted and never used by the run’s end; using it clears the finding', async () => {
    const emulator = await startEmulator();
    const flow = await authorizeAndApprove(emulator, { scope: 'ask research' });
    expect((await ask(emulator, flow.tokens!.access_token, 'Wann kommt der Hufschmied?')).status).toBe(200);
    expect(emulator.core.findings.list()).toMatchObject([{ code: 'scope.unused', severity: 'info', spec: 'spec 5.9' }]);
    expect(emulator.core.findings.list()[0]!.message).toBe('The grant holds “research”, which no request of it has used.');
    const job = await postJson(`${emulator.baseUrl}/research`, { question: 'Hufschmied?' }, bearer(flow.tokens!.access_token));
    expect(job.status).toBe(202);
    expect(emulator.core.findings.list()).toEqual([]);
  });
});

describe('a well-behaved client: no findings', () => {
  it('authorize with every parameter, keys on charged calls, one refresh per expiry, the 429 waited out, logout after re-login', async () => {
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, rateLimit: '3/min' });
    const browser = new Browser();
    const flow = await authorizeAndApprove(emulator, { scope: 'ask', browser });
    let tokens = flow.tokens!;
    for (const [i, question] of ['eins', 'zwei', 'zwei'].entries())
      expect((await ask(emulator, tokens.access_token, question, { 'idempotency-key': `key-${Math.min(i, 1)}` })).status).toBe(200);
    const limited = await ask(emulator, tokens.access_token, 'drei', { 'idempotency-key': 'key-3' });
    expect(limited.status).toBe(429);
    clock.advance(Number(limited.headers['retry-after']) * 1000);
    expect((await ask(emulator, tokens.access_token, 'drei', { 'idempotency-key': 'key-3' })).status).toBe(200);
    clock.advance(16 * MINUTE);
    expect((await ask(emulator, tokens.access_token, 'vier', { 'idempotency-key': 'key-4' })).status).toBe(401);
    tokens = (await refresh(emulator.baseUrl, { client_id: flow.client_id, refresh_token: tokens.refresh_token })).json();
    expect((await ask(emulator, tokens.access_token, 'vier', { 'idempotency-key': 'key-4' })).status).toBe(200);
    // Authorized again: the old refresh token is revoked (RFC 7009) as the client switches to the new grant.
    const again = await authorizeAndApprove(emulator, { client_id: flow.client_id, scope: 'ask', browser });
    expect(
      (
        await http(`${emulator.baseUrl}/oauth/revoke`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token: tokens.refresh_token, client_id: flow.client_id }).toString(),
        })
      ).status,
    ).toBe(200);
    expect((await ask(emulator, again.tokens!.access_token, 'fünf', { 'idempotency-key': 'key-5' })).status).toBe(200);
    expect(emulator.core.findings.list()).toEqual([]);
  });

  it('the MCP SDK client with calls one after another across an expiry refreshes once: no findings', async () => {
    const { emulator, client } = await sdkClientPastExpiry();
    for (const question of ['Was steht an?', 'Und morgen?'])
      expect((await client.callTool({ name: 'ask', arguments: { question } })).isError).toBeFalsy();
    expect(emulator.core.findings.list()).toEqual([]);
  });

  it('grant.abandoned for a client that authorizes again and keeps the old grant; `agent-access login` twice revokes the first', async () => {
    const emulator = await startEmulator();
    const flow = await authorizeAndApprove(emulator);
    await authorizeAndApprove(emulator, { client_id: flow.client_id });
    expect(notable(emulator)).toMatchObject([{ code: 'grant.abandoned', client_id: flow.client_id }]);
    // `login --headless` needs a consent policy to answer for the person.
    setConsentPolicy(emulator.core, null, { decision: 'approve' });

    const env = clientEnv(await scratchDir());
    for (let i = 0; i < 2; i++) {
      const cli = startCli(['login', '--base-url', emulator.baseUrl, '--headless'], { env });
      expect(await cli.exit, cli.stderr()).toBe(0);
    }
    const logins = emulator.core.findings.list().filter((f) => f.client_id !== flow.client_id && f.severity !== 'info');
    expect(logins).toEqual([]);
  });
});

describe('where findings show', () => {
  it('GET /_admin/findings, emu.findings(), assertNoFindings() in test code, and clearFindings()', async () => {
    const emu: RunningEmulator = await startApi();
    try {
      await emu.assertNoFindings();
      const { client_id } = await register(emu.baseUrl);
      await new Browser().get(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, state: null }, pkce().challenge));
      const res = await http(`${emu.adminUrl}/findings`, { headers: bearer(emu.adminToken) });
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({
        findings: [expect.objectContaining({ code: 'authorize.missing_parameter', client_id })],
        total: 1,
        offset: 0,
        limit: 1000,
        next: null,
      });
      expect(await emu.findings()).toEqual(res.json().findings);
      expect(await emu.findings({ minSeverity: 'error' })).toHaveLength(1);
      const failure = await emu.assertNoFindings({ failOn: 'error' }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(FindingsError);
      expect((failure as FindingsError).message).toMatch(
        /^1 client finding at or above error:\n\nERROR authorize\.missing_parameter client_\S+ \(“Test Agent”, unverified\)\n {2}An authorization request came without state and was refused \(invalid_request\)\.\n {2}hint: Send a fresh random state/,
      );
      expect(await emu.clearFindings()).toBe(1);
      await emu.assertNoFindings({ failOn: 'info' });
    } finally {
      await emu.stop();
    }
  });

  it('`agent-access findings` lists them with hints; --fail-on exits 10 at or above the severity; serve logs FINDING once', async () => {
    const dir = await scratchDir();
    const serve = await startServe(['--state', `${dir}/state.json`]);
    const env = { AGENT_ACCESS_ADMIN_TOKEN: serve.ready.admin_token };
    const target = ['--url', serve.ready.base_url];
    const clean = await runCli(['findings', ...target, '--fail-on', 'warning'], { env });
    expect(clean).toMatchObject({ code: 0, stdout: 'no findings\n' });
    const { client_id } = await register(serve.ready.base_url);
    for (let i = 0; i < 2; i++)
      await new Browser().get(authorizeUrl(serve.ready.auth_url, serve.ready.base_url, { client_id, scope: null }, pkce().challenge));
    const listed = await runCli(['findings', ...target], { env });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(
      /^ERROR authorize\.missing_parameter client_\S+ \(“Test Agent”, unverified\) ×2\n {2}An authorization request came without scope/,
    );
    expect(listed.stdout).toMatch(/\n {2}rests on: spec 4\.2; OAuth 2\.1 §4\.1\.1\n$/);
    const gated = await runCli(['findings', ...target, '--fail-on', 'error', '--json'], { env });
    expect(gated.code).toBe(10);
    expect(JSON.parse(gated.stdout).findings).toHaveLength(1);
    expect(gated.stderr).toBe('agent-access: 1 finding at or above error\n');
    expect((await runCli(['findings', ...target, '--fail-on', 'fatal'], { env })).code).toBe(2);
    await serve.stop();
    const findingLines = serve
      .stderr()
      .split('\n')
      .filter((l) => l.includes(' FINDING '));
    expect(findingLines).toEqual([
      expect.stringMatching(/ FINDING authorize\.missing_parameter client_\S+ error: An authorization request came without scope/),
    ]);
  });
});
