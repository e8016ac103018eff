/**
 * Faults on purpose (docs/emulator-control.md "Faults"): each one armed through the programmatic API (the admin API underneath) or a serve
 * flag, and observed the way a client sees it; each listed in the dashboard's overview and marked in the request log.
 */
import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import type { AppEvent } from '../src/core/state/events.js';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import { startEmulator as startInProcess, startRunning } from './helpers/emulator.js';
import type { RunningEmulator, StartEmulatorOptions } from '../src/index.js';
import { runCli, startServe } from './helpers/cli.js';
import { bearer, http, postJson, refresh } from './helpers/oauth.js';
import { postMcp, toolCall } from './helpers/rest.js';

const start = (options: StartEmulatorOptions = {}) => startRunning({ clock: 'manual', ...options });

const ask = (emu: RunningEmulator, token: string, question = 'Wann kommt der Hufschmied?') =>
  postJson(`${emu.baseUrl}/chat/ask`, { question }, bearer(token));
const overview = async (emu: RunningEmulator) => (await http(`${emu.adminUrl}/overview`, { headers: bearer(emu.adminToken) })).json();
const charges = async (emu: RunningEmulator) =>
  (await http(`${emu.adminUrl}/charges`, { headers: bearer(emu.adminToken) })).json().entries as unknown[];

/** One JSON-RPC message to /mcp: a `tools/call` of `tool`, or another method with `tool` null. */
const mcpCall = (emu: RunningEmulator, token: string, tool: string | null, args: Record<string, string> = {}) =>
  postMcp(emu.baseUrl, token, tool === null ? { jsonrpc: '2.0', id: 1, method: 'tools/list' } : toolCall(tool, args));

describe('faults observed by a client (docs/emulator-control.md "Faults")', () => {
  it('rate_limit count=2: the next two asks get 429 with Retry-After and RateLimit headers, uncharged; the third passes; the request log marks both', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    const fault = await emu.faults.add({ kind: 'rate_limit', count: 2, retry_after: 7 });
    for (let i = 0; i < 2; i++) {
      const res = await ask(emu, access_token);
      expect(res.status).toBe(429);
      expect(res.headers).toMatchObject({ 'retry-after': '7', 'ratelimit-remaining': '0', 'ratelimit-limit': '60' });
      expect(res.json()).toMatchObject({ type: 'urn:agent-access:error:rate_limit_exceeded', status: 429 });
    }
    expect((await ask(emu, access_token)).status).toBe(200);
    expect(await charges(emu)).toHaveLength(1);
    const snap = await overview(emu);
    expect(
      snap.requests.filter((r: { faults?: string[] }) => r.faults).map((r: { status: number; faults: string[] }) => [r.status, r.faults]),
    ).toEqual([
      [429, [`${fault.id} rate_limit`]],
      [429, [`${fault.id} rate_limit`]],
    ]);
    expect(snap.faults).toEqual([expect.objectContaining({ id: fault.id, kind: 'rate_limit', state: 'spent', fired: 2, remaining: 0 })]);
  });

  it('rate_limit rate=0.5: every second matching request, deterministically', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'rate_limit', rate: 0.5, route: 'POST /chat/ask' });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await ask(emu, access_token)).status);
    expect(statuses).toEqual([200, 429, 200, 429, 200, 429]);
  });

  it('server_error on POST /research (503, once): the problem shape with Retry-After, no job, no charge; then it works. On /oauth/token: RFC 6749 JSON, and the refresh token still works after', async () => {
    const emu = await start();
    const tokens = await emu.issueTokens({ scopes: ['research'] });
    await emu.faults.add({ kind: 'server_error', route: 'POST /research', status: 503, count: 1 });
    const failed = await postJson(`${emu.baseUrl}/research`, { question: 'Hausordnung Ruhezeiten' }, bearer(tokens.access_token));
    expect(failed.status).toBe(503);
    expect(failed.headers['retry-after']).toBe('1');
    expect(failed.json()).toMatchObject({ type: 'urn:agent-access:error:server_error', status: 503 });
    expect((await overview(emu)).research).toEqual([]);
    expect(await charges(emu)).toEqual([]);
    expect((await postJson(`${emu.baseUrl}/research`, { question: 'Hausordnung Ruhezeiten' }, bearer(tokens.access_token))).status).toBe(
      202,
    );

    await emu.faults.add({ kind: 'server_error', route: '/oauth/token', count: 1 });
    const tokenFailure = await refresh(emu.baseUrl, { client_id: tokens.client_id, refresh_token: tokens.refresh_token! });
    expect(tokenFailure.status).toBe(500);
    expect(tokenFailure.json()).toMatchObject({ error: 'server_error' });
    // The failure happened before the grant handler: the token was not rotated, so it is not a replay now.
    expect((await refresh(emu.baseUrl, { client_id: tokens.client_id, refresh_token: tokens.refresh_token! })).status).toBe(200);
  });

  it('server_error limited to one client leaves the others alone; a route pattern with * matches a prefix', async () => {
    const emu = await start();
    const a = await emu.issueTokens({ scopes: ['ask'] });
    const b = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'server_error', route: '/chat/*', client_id: a.client_id });
    expect((await ask(emu, a.access_token)).status).toBe(500);
    expect((await ask(emu, b.access_token)).status).toBe(200);
  });

  it('latency: the matching request is answered no sooner than the added milliseconds', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'latency', ms: 400, route: 'POST /chat/ask', count: 1 });
    const started = performance.now();
    expect((await ask(emu, access_token)).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(400);
  });

  it('ask_timeout for matching questions: 504 ask_timeout, uncharged; other questions are answered', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'ask_timeout', match: 'hufschmied' });
    const res = await ask(emu, access_token, 'Wann kommt der Hufschmied?');
    expect(res.status).toBe(504);
    expect(res.json()).toMatchObject({ type: 'urn:agent-access:error:ask_timeout' });
    expect((await ask(emu, access_token, 'Was steht in der Hausordnung?')).status).toBe(200);
    expect(await charges(emu)).toHaveLength(1);
  });

  it('research_fail count=1: the next job fails with an error when it would finish; the one after succeeds', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['research'] });
    await emu.faults.add({ kind: 'research_fail', count: 1 });
    const first = (await postJson(`${emu.baseUrl}/research`, { question: 'Hausordnung Ruhezeiten' }, bearer(access_token))).json();
    const second = (await postJson(`${emu.baseUrl}/research`, { question: 'Hausordnung Ruhezeiten' }, bearer(access_token))).json();
    expect(first.status).toBe('queued');
    await emu.clock.advance('10m');
    const failed = (await http(`${emu.baseUrl}${first.poll}`, { headers: bearer(access_token) })).json();
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'research_failed' } });
    expect(failed.report).toBeUndefined();
    expect((await http(`${emu.baseUrl}${second.poll}`, { headers: bearer(access_token) })).json().status).toBe('succeeded');
  });

  it('refresh_replay (now): the family dies by the replay rule; the client sees invalid_grant on refresh and 401 on its access token', async () => {
    const emu = await start();
    const tokens = await emu.issueTokens({ scopes: ['ask'] });
    const fault = await emu.faults.add({ kind: 'refresh_replay', grant_id: tokens.grant_id });
    // "Now": it has fired by the time the answer arrives.
    expect(fault).toMatchObject({ state: 'spent', fired: 1 });
    const renewed = await refresh(emu.baseUrl, { client_id: tokens.client_id, refresh_token: tokens.refresh_token! });
    expect(renewed.status).toBe(400);
    expect(renewed.json()).toMatchObject({ error: 'invalid_grant' });
    const refused = await ask(emu, tokens.access_token);
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toContain('token family was invalidated');
    const snap = await overview(emu);
    expect(snap.families[0]).toMatchObject({ status: 'invalidated', invalidated_reason: 'refresh_replay' });
    expect(snap.faults[0]).toMatchObject({ id: fault.id, state: 'spent', fired: 1 });
  });

  it('revoke at a chosen moment (in 10m on the clock) and after N requests: refused from the next request on, as revoked by the person', async () => {
    const emu = await start();
    const timed = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'revoke', grant_id: timed.grant_id, in: '10m' });
    expect((await ask(emu, timed.access_token)).status).toBe(200);
    await emu.clock.advance('9m');
    expect((await ask(emu, timed.access_token)).status).toBe(200);
    await emu.clock.advance('1m');
    const refused = await ask(emu, timed.access_token);
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toContain('revoked by the person');

    const counted = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'revoke', grant_id: counted.grant_id, after_requests: 2 });
    expect((await ask(emu, counted.access_token)).status).toBe(200);
    expect((await ask(emu, counted.access_token)).status).toBe(200);
    expect((await ask(emu, counted.access_token)).status).toBe(401);
  });

  it('list and clear: a cleared fault no longer fires; bad faults are 400 (404 for an unknown grant or fault) and arm nothing', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    const fault = await emu.faults.add({ kind: 'server_error', route: 'POST /chat/ask' });
    expect((await ask(emu, access_token)).status).toBe(500);
    expect((await emu.faults.clear(fault.id)).map((f) => f.id)).toEqual([fault.id]);
    expect((await ask(emu, access_token)).status).toBe(200);
    expect((await emu.faults.list()).map((f) => [f.id, f.state, f.fired])).toEqual([[fault.id, 'cleared', 1]]);
    for (const spec of [
      { kind: 'meltdown' },
      { kind: 'server_error', status: 404 },
      { kind: 'latency' },
      { kind: 'rate_limit', rate: 1.5 },
      { kind: 'rate_limit', ms: 5 },
      { kind: 'server_error', route: 'chat/ask' },
      { kind: 'revoke' },
      { kind: 'revoke', grant_id: 'g', in: '1m', after_requests: 1 },
      { kind: 'ask_timeout', matches: 'x' },
    ]) {
      await expect(emu.faults.add(spec as never), JSON.stringify(spec)).rejects.toMatchObject({ status: 400 });
    }
    await expect(emu.faults.add({ kind: 'revoke', grant_id: 'grant_nope' })).rejects.toMatchObject({ status: 404 });
    await expect(emu.faults.clear('fault_nope')).rejects.toMatchObject({ status: 404 });
    expect(await emu.faults.list()).toHaveLength(1);
  });

  it('faults from startEmulator options reach a child emulator as --fault flags', async () => {
    const emu = await start({ mode: 'child', faults: [{ kind: 'server_error', route: 'POST /chat/ask', status: 502, count: 1 }] });
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    expect((await ask(emu, access_token)).status).toBe(502);
    expect((await ask(emu, access_token)).status).toBe(200);
  });
});

describe('drop_response: the answer to a charged call is lost (docs/emulator-control.md "Faults"; issue 42.2 lost-answer)', () => {
  const keyed = (token: string, key: string) => bearer(token, { 'idempotency-key': key });
  const requestLog = async (emu: RunningEmulator, path: string) =>
    (await overview(emu)).requests
      .filter((r: { path: string }) => r.path === path)
      .map((r: { status: number; faults?: string[] }) => [r.status, r.faults]);
  const toolCall = (emu: RunningEmulator, token: string, args: Record<string, string>) => mcpCall(emu, token, 'ask', args);

  it('42.2 lost-answer: drop_response commits and charges, then closes before the answer; a retry with the same Idempotency-Key gets the stored answer, one charge in the ledger', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    const fault = await emu.faults.add({ kind: 'drop_response', count: 1 });
    // The connection is closed before any byte of the answer: the client sees a reset, no status.
    await expect(
      ask(emu, access_token).then(
        () => null,
        (e: Error & { code?: string }) => e.code,
      ),
    ).resolves.toBe('UND_ERR_SOCKET');
    expect(await charges(emu)).toHaveLength(1);
    const retry = await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Wann kommt der Hufschmied?' }, keyed(access_token, 'k-1'));
    expect(retry.status).toBe(200);
    expect(await charges(emu)).toHaveLength(2);
    // The case a client must survive: the first try had a key.
    await emu.faults.add({ kind: 'drop_response', route: 'POST /chat/ask', count: 1 });
    const body = { question: 'Was steht in der Hausordnung?' };
    const lost = await postJson(`${emu.baseUrl}/chat/ask`, body, keyed(access_token, 'k-2')).catch((e: Error) => e);
    expect(lost).toBeInstanceOf(Error);
    expect(await charges(emu)).toHaveLength(3);
    const replay = await postJson(`${emu.baseUrl}/chat/ask`, body, keyed(access_token, 'k-2'));
    expect(replay.status).toBe(200);
    expect(replay.json()).toMatchObject({ answer: expect.any(String), message_id: expect.any(String) });
    expect(await charges(emu)).toHaveLength(3);
    const log = await requestLog(emu, '/chat/ask');
    expect(log).toEqual([
      [200, [`${fault.id} drop_response`]],
      [200, undefined],
      [200, [expect.stringMatching(/^fault_\d+ drop_response$/)]],
      [200, undefined],
    ]);
    expect((await emu.faults.list()).map((f) => [f.kind, f.state, f.fired])).toEqual([
      ['drop_response', 'spent', 1],
      ['drop_response', 'spent', 1],
    ]);
  });

  it('42.2 lost-answer: a retry without a key after a lost answer is carried out again and charged twice', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['research'] });
    await emu.faults.add({ kind: 'drop_response', route: 'POST /research', count: 1 });
    const question = { question: 'Hausordnung Ruhezeiten' };
    await expect(postJson(`${emu.baseUrl}/research`, question, bearer(access_token))).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect((await postJson(`${emu.baseUrl}/research`, question, bearer(access_token))).status).toBe(202);
    expect(await charges(emu)).toHaveLength(2);
    // Both were carried out: two jobs.
    expect((await overview(emu)).research).toHaveLength(2);
    expect(await requestLog(emu, '/research')).toEqual([
      [202, [expect.stringMatching(/drop_response$/)]],
      [202, undefined],
    ]);
  });

  it('42.2 lost-answer: an MCP tools/call (as POST /mcp) is committed and charged, then its connection closed; the same idempotency_key gets the stored result, one charge', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    const fault = await emu.faults.add({ kind: 'drop_response', route: 'POST /mcp', count: 1 });
    const args = { question: 'Wann kommt der Hufschmied?', idempotency_key: 'mcp-1' };
    await expect(toolCall(emu, access_token, args)).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect(await charges(emu)).toHaveLength(1);
    const retry = await toolCall(emu, access_token, args);
    expect(retry.status).toBe(200);
    expect(retry.json().result).toMatchObject({ structuredContent: { answer: expect.any(String) } });
    expect(await charges(emu)).toHaveLength(1);
    expect(await requestLog(emu, '/mcp')).toEqual([
      [200, [`${fault.id} drop_response`]],
      [200, undefined],
    ]);
  });

  it('drop_response leaves free calls alone by default: a poll is answered', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['research'] });
    const job = (await postJson(`${emu.baseUrl}/research`, { question: 'Hausordnung' }, keyed(access_token, 'r-1'))).json();
    await emu.faults.add({ kind: 'drop_response' });
    expect((await http(`${emu.baseUrl}${job.poll}`, { headers: bearer(access_token) })).status).toBe(200);
    const fired = (await emu.faults.list())[0]!;
    expect(fired.fired).toBe(0);
  });
});

describe('faults on one MCP tool (docs/emulator-control.md "Faults": tool; issue 42.2 rate-limited, server-error)', () => {
  it('42.2 rate-limited: rate_limit tool=ask count=2 gives the next two ask calls 429 with Retry-After; other tools, tools/list and REST pass; the third ask passes', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask', 'research'] });
    const fault = await emu.faults.add({ kind: 'rate_limit', tool: 'ask', count: 2, retry_after: 2 });
    expect(fault.description).toBe('429 Too Many Requests on tool ask (2×)');
    const question = { question: 'Wann kommt der Hufschmied?' };
    const limited = await mcpCall(emu, access_token, 'ask', question);
    expect(limited.status).toBe(429);
    expect(limited.headers['retry-after']).toBe('2');
    expect((await mcpCall(emu, access_token, null)).status).toBe(200);
    expect((await mcpCall(emu, access_token, 'start_research', { question: 'Hausordnung' })).status).toBe(200);
    expect((await ask(emu, access_token)).status).toBe(200);
    expect((await mcpCall(emu, access_token, 'ask', question)).status).toBe(429);
    const third = await mcpCall(emu, access_token, 'ask', question);
    expect(third.status).toBe(200);
    expect(third.json().result).toMatchObject({ structuredContent: { answer: expect.any(String) } });
    expect((await emu.faults.list())[0]).toMatchObject({ state: 'spent', fired: 2 });
  });

  it('42.2 server-error: server_error tool=start_research status=503 answers that tools/call 503 with Retry-After, starts no job, charges nothing; ask calls pass', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask', 'research'] });
    await emu.faults.add({ kind: 'server_error', tool: 'start_research', status: 503, count: 1 });
    expect((await mcpCall(emu, access_token, 'ask', { question: 'Wann kommt der Hufschmied?' })).status).toBe(200);
    const failed = await mcpCall(emu, access_token, 'start_research', { question: 'Hausordnung', idempotency_key: 'r-1' });
    expect(failed.status).toBe(503);
    expect(failed.headers['retry-after']).toBe('1');
    expect((await overview(emu)).research).toEqual([]);
    expect(await charges(emu)).toHaveLength(1);
    const retried = await mcpCall(emu, access_token, 'start_research', { question: 'Hausordnung', idempotency_key: 'r-1' });
    expect(retried.status).toBe(200);
    expect((await overview(emu)).research).toHaveLength(1);
    expect(await charges(emu)).toHaveLength(2);
  });

  it('tool=* matches every tool call and no other MCP message nor REST route; a tool name that is no name, or tool on a kind that does not take it, is refused and arms nothing', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'server_error', tool: '*' });
    expect((await mcpCall(emu, access_token, null)).status).toBe(200);
    expect((await ask(emu, access_token)).status).toBe(200);
    expect((await mcpCall(emu, access_token, 'ask', { question: 'Hufschmied' })).status).toBe(500);
    await emu.faults.clear();
    for (const spec of [
      { kind: 'rate_limit', tool: 'ask tool' },
      { kind: 'rate_limit', tool: '' },
      { kind: 'ask_timeout', tool: 'ask' },
    ] as const)
      await expect(emu.faults.add(spec as never)).rejects.toMatchObject({ status: 400 });
    expect((await emu.faults.list()).filter((f) => f.state === 'armed')).toEqual([]);
  });

  it("42.2 lost-answer: drop_response tool=add_training_document leaves an ask alone and loses the upload's answer", async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask', 'training.write'] });
    await emu.faults.add({ kind: 'drop_response', tool: 'add_training_document', count: 1 });
    expect((await mcpCall(emu, access_token, 'ask', { question: 'Hufschmied', idempotency_key: 'a-1' })).status).toBe(200);
    await expect(
      mcpCall(emu, access_token, 'add_training_document', { file_name: 'stall.md', content: '# Stall', idempotency_key: 't-1' }),
    ).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
    expect((await emu.faults.list())[0]).toMatchObject({ state: 'spent', fired: 1 });
  });
});

describe('faults: edges (docs/emulator-control.md "Faults")', () => {
  it('a revocation due on the clock fires on the next request even between ticks, and that refused request is marked in the log', async () => {
    // The emulator's own tick (every 250 ms) also fires due faults; held still here, so that a tick cannot come
    // between the clock's move and the request and fire it first (then the request would not be the one marked).
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    // Given back however the test ends: the integration files share their modules and globals (vitest.config.ts).
    onTestFinished(() => void vi.useRealTimers());
    const clock = new ManualClock(Date.UTC(2026, 10, 21, 12));
    const emulator = await startInProcess({ clock });
    try {
      const served = new Promise<AppEvent>((resolve) =>
        emulator.core.events.subscribe((e) => e.name === 'request.served' && e.data.path === '/chat/ask' && resolve(e)),
      );
      const tokens = await issueTokensWithoutConsent(emulator.core, { scopes: ['ask'] });
      const fault = emulator.faults.arm({ kind: 'revoke', grant_id: tokens.grant_id, in: '1h' });
      // The clock moves without the admin API (which would fire it): only the request's own check can.
      clock.advance(60 * 60 * 1000);
      const res = await postJson(`${emulator.baseUrl}/chat/ask`, { question: 'Hufschmied?' }, bearer(tokens.access_token));
      expect(res.status).toBe(401);
      // Published once the answer is sent, which the client may see first.
      expect((await served).data).toMatchObject({ path: '/chat/ask', status: 401, faults: [`${fault.id} revoke`] });
    } finally {
      await emulator.stop();
    }
  });

  it('a path that is no route (a browser fetching /favicon.ico) does not use up a fault', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'server_error', count: 1 });
    expect((await http(`${emu.authUrl}/favicon.ico`)).status).toBe(404);
    expect((await ask(emu, access_token)).status).toBe(500);
  });

  it('rate spreads exactly: 0.29 of 100 matching requests is 29', async () => {
    const emu = await start();
    const { access_token } = await emu.issueTokens({ scopes: ['ask'] });
    const fault = await emu.faults.add({ kind: 'server_error', rate: 0.29, route: 'GET /.well-known/jwks.json' });
    for (let i = 0; i < 100; i++) await http(`${emu.baseUrl}/.well-known/jwks.json`);
    expect((await emu.faults.list()).find((f) => f.id === fault.id)?.fired).toBe(29);
    expect((await ask(emu, access_token)).status).toBe(200);
  });

  it('a 503 on a page is an error page with Retry-After; on the token endpoint RFC 6749 temporarily_unavailable', async () => {
    const emu = await start();
    const tokens = await emu.issueTokens({ scopes: ['ask'] });
    await emu.faults.add({ kind: 'server_error', route: 'GET /settings', status: 503, count: 1 });
    const page = await http(`${emu.authUrl}/settings`);
    expect([page.status, page.headers['retry-after'], String(page.headers['content-type'])]).toEqual([
      503,
      '1',
      expect.stringContaining('text/html'),
    ]);
    await emu.faults.add({ kind: 'server_error', route: 'POST /oauth/token', status: 503, count: 1 });
    const token = await refresh(emu.baseUrl, { client_id: tokens.client_id, refresh_token: tokens.refresh_token! });
    expect([token.status, token.headers['cache-control']]).toEqual([503, 'no-store']);
    expect(token.json()).toMatchObject({ error: 'temporarily_unavailable' });
  });

  it('a refresh_replay now on a grant without a live token family is refused (409): it would do nothing', async () => {
    const emu = await start();
    const tokens = await emu.issueTokens({ scopes: ['ask'] });
    await emu.person.revokeGrant(tokens.grant_id);
    await expect(emu.faults.add({ kind: 'refresh_replay', grant_id: tokens.grant_id })).rejects.toMatchObject({ status: 409 });
  });
});

describe('serve --fault (docs/emulator-control.md "Faults": from flags)', () => {
  it('arms faults at start; the request log on stderr marks the answers they shaped', async () => {
    const serve = await startServe([
      '--in-memory',
      '--fault',
      'rate_limit:count=1',
      '--fault',
      '{"kind":"server_error","route":"GET /.well-known/jwks.json","count":1}',
    ]);
    try {
      const admin = bearer(serve.ready.admin_token);
      const tokens = (await postJson(`${serve.ready.admin_url}/tokens`, { scopes: ['ask'] }, admin)).json();
      expect((await postJson(`${serve.ready.base_url}/chat/ask`, { question: 'Hufschmied?' }, bearer(tokens.access_token))).status).toBe(
        429,
      );
      expect((await http(`${serve.ready.base_url}/.well-known/jwks.json`)).status).toBe(500);
      const faults = (await http(`${serve.ready.admin_url}/faults`, { headers: admin })).json().faults;
      expect(faults.map((f: { kind: string; state: string }) => [f.kind, f.state])).toEqual([
        ['rate_limit', 'spent'],
        ['server_error', 'spent'],
      ]);
      await expect.poll(() => serve.stderr()).toMatch(/POST \/chat\/ask 429 [\d.]+ms \S+ FAULT fault_1 rate_limit/);
      expect(serve.stderr()).toMatch(/GET \/.well-known\/jwks.json 500 [\d.]+ms FAULT fault_2 server_error/);
      expect(serve.stderr()).toMatch(/fault\.fired .*"fault_id":"fault_1"/);
    } finally {
      await serve.stop();
    }
  });

  it('42.2 lost-answer from the flag: serve --fault drop_response:count=1 closes the first ask unanswered, charged, and logs it', async () => {
    const serve = await startServe(['--in-memory', '--fault', 'drop_response:count=1']);
    try {
      const admin = bearer(serve.ready.admin_token);
      const tokens = (await postJson(`${serve.ready.admin_url}/tokens`, { scopes: ['ask'] }, admin)).json();
      const ask = () => postJson(`${serve.ready.base_url}/chat/ask`, { question: 'Hufschmied?' }, bearer(tokens.access_token));
      await expect(ask()).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' });
      expect((await ask()).status).toBe(200);
      expect((await http(`${serve.ready.admin_url}/charges`, { headers: admin })).json().entries).toHaveLength(2);
      await expect.poll(() => serve.stderr()).toMatch(/POST \/chat\/ask 200 [\d.]+ms \S+ FAULT fault_1 drop_response/);
      expect(serve.stderr()).toMatch(/fault\.fired .*"fault_id":"fault_1","kind":"drop_response"/);
    } finally {
      await serve.stop();
    }
  });

  it('a malformed --fault is a usage error (exit 2) that names the problem', async () => {
    const bad = await runCli(['serve', '--in-memory', '--port', '0', '--auth-port', '0', '--fault', 'latency:ms=fast']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/ms must be a whole number/);
  });
});
