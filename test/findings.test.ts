/**
 * Client findings that only real sockets and processes show: a retry judged by its arrival (a tool call held on a
 * raw socket), a second `agent-access login`, and where findings show (GET /_admin/findings, emu.findings() and
 * assertNoFindings(), `agent-access findings`, serve's log). The others are held in process by
 * test/unit/findings-http.test.ts.
 */
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../src/core/state/clock.js';
import { setConsentPolicy } from '../src/core/oauth/consent.js';
import { issueTokensWithoutConsent } from '../src/core/oauth/issue-tokens.js';
import { startEmulator as startApi, type RunningEmulator } from '../src/index.js';
import { FindingsError } from '../src/protocol/findings.js';
import type { Emulator } from '../src/server/emulator.js';
import { runCli, startServe } from './helpers/cli.js';
import { clientEnv, startCli } from './helpers/client.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { Browser, authorizeAndApprove, authorizeUrl, bearer, http, pkce, register } from './helpers/oauth.js';
import { ask } from './helpers/rest.js';

/** At warning and above: the tests' grants hold scopes some flows never use (scope.unused is info). */
const notable = (emulator: Emulator) => emulator.core.findings.list().filter((f) => f.severity !== 'info');

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
});

describe('a well-behaved client: no findings', () => {
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
