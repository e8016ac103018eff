/**
 * Client findings, each produced by the real sequence that causes it (the MCP SDK client with parallel tool calls
 * across an expiry, a client without resource, an authorization URL without scope, retries without a key, an ignored
 * 429), and none for a well-behaved client run through the same flows, against an emulator in this process. What
 * only sockets and processes show (a call held on a raw socket, a second `agent-access login`, the admin API,
 * `agent-access findings`, serve's log) is in test/findings.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock, MINUTE } from '../../src/core/state/clock.js';
import { issueTokensWithoutConsent } from '../../src/core/oauth/issue-tokens.js';
import type { Finding } from '../../src/protocol/findings.js';
import type { Emulator } from '../../src/server/emulator.js';
import { startInProcess } from '../helpers/emulator.js';
import { connectWithOAuth } from '../helpers/mcp-client.js';
import { Browser, authorizeAndApprove, authorizeUrl, bearer, http, pkce, postJson, refresh, register } from '../helpers/oauth.js';
import { ask } from '../helpers/rest.js';

const codes = (findings: readonly Finding[]) => findings.map((f) => f.code).sort();
/** At warning and above: the tests' grants hold scopes some flows never use (scope.unused is info). */
const notable = (emulator: Emulator) => emulator.core.findings.list().filter((f) => f.severity !== 'info');

/** The MCP SDK client, logged in and once used, on a manual clock moved past its access token's expiry. */
async function sdkClientPastExpiry() {
  const clock = new ManualClock();
  const emulator = await startInProcess({ clock });
  const { client } = await connectWithOAuth(emulator, 'ask');
  await client.callTool({ name: 'ask', arguments: { question: 'Wann kommt der Hufschmied?' } });
  clock.advance(16 * MINUTE);
  return { emulator, client };
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
    const emulator = await startInProcess();
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
    const emulator = await startInProcess();
    const { client_id } = await register(emulator.baseUrl);
    const res = await new Browser().get(authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, scope: null }, pkce().challenge));
    expect(res.status).toBe(302);
    const location = new URL(res.headers.location as string);
    expect(location.searchParams.get('error')).toBe('invalid_scope');
    expect(location.searchParams.get('error_description')).toMatch(/Hint: Request the scopes the agent needs, e\.g\. scope=ask/);
    expect(notable(emulator)).toMatchObject([{ code: 'authorize.missing_parameter', client_id, severity: 'error' }]);
  });

  it('the error page keeps its German words for the person and folds the developer part away ("Für Entwickler")', async () => {
    const emulator = await startInProcess();
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
    const emulator = await startInProcess();
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
    const emulator = await startInProcess();
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
    const emulator = await startInProcess({ clock, rateLimit: '1/min' });
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

  it('registration.repeated: a client that registers anew on every run; the settings page would list each as another app', async () => {
    const emulator = await startInProcess();
    for (let i = 0; i < 2; i++) await register(emulator.baseUrl);
    expect(notable(emulator)).toEqual([]);
    const { client_id } = await register(emulator.baseUrl);
    expect(notable(emulator)).toMatchObject([{ code: 'registration.repeated', client_id, client_name: 'Test Agent', count: 1 }]);
    expect(notable(emulator)[0]!.hint).toMatch(/^Register once and keep the client_id/);
  });

  it('scope.unused (info): a scope granted and never used by the run’s end; using it clears the finding', async () => {
    const emulator = await startInProcess();
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
    const emulator = await startInProcess({ clock, rateLimit: '3/min' });
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
});
