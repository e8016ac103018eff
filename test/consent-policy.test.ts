/**
 * Consent as code (docs/emulator-control.md "Consent as code"): a policy per client or for all answers the consent screen through the same decision
 * its form posts, recorded as the policy's answer; scripted person actions (revoke, approve or reject a write action).
 * The browser cases run Debian Chromium on the real authorize endpoint.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Browser as Chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest } from '../src/protocol/admin-client.js';
import type { AppEvent } from '../src/core/state/events.js';
import { chromiumPlan, launchChromium, requireChromium } from './helpers/chromium.js';
import { runCli, startServe } from './helpers/cli.js';
import { scratchDir, startEmulator, startRunning } from './helpers/emulator.js';
import { authorizeUrl, exchangeCode, http, pkce, postJson, register } from './helpers/oauth.js';

/** A client's loopback redirect target that answers 200 to /callback. */
async function callbackServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Client</title>'),
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const plan = chromiumPlan('consent-policy.test.ts');

describe.skipIf(!plan.run)(`consent policies through the real page in Chromium${plan.note}`, () => {
  let chromium: Chromium;
  beforeAll(async () => {
    requireChromium();
    chromium = await launchChromium();
  });
  afterAll(async () => chromium?.close());

  /** Opens the authorize URL in Chromium and returns where the browser ended up. */
  async function navigate(url: string): Promise<URL> {
    const context = await chromium.newContext();
    try {
      const page = await context.newPage();
      await page.goto(url, { waitUntil: 'load' });
      return new URL(page.url());
    } finally {
      await context.close();
    }
  }

  it('a deny policy answers the real consent page with access_denied (state and iss kept), and no grant', async () => {
    const emu = await startRunning({ consent: 'deny' });
    const cb = await callbackServer();
    try {
      const { client_id } = await register(emu.baseUrl, { redirect_uris: [cb.url] });
      const url = authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri: cb.url, state: 'st-deny' }, pkce().challenge);
      const landed = await navigate(url);
      expect(landed.origin + landed.pathname).toBe(cb.url);
      expect(Object.fromEntries(landed.searchParams)).toMatchObject({ error: 'access_denied', state: 'st-deny', iss: emu.issuer });
      expect(landed.searchParams.get('error_description')).toMatch(/consent policy denied/);
      expect(landed.searchParams.has('code')).toBe(false);
      const grants = await adminRequest<{ grants: unknown[] }>({ adminUrl: emu.adminUrl, token: emu.adminToken }, 'GET', '/grants');
      expect(grants.grants).toEqual([]);
    } finally {
      await cb.close();
    }
  });

  it('an approve policy sends the browser back with a code that exchanges for tokens; a per-client "page" still shows the page', async () => {
    const emu = await startRunning({ consent: 'approve' });
    const cb = await callbackServer();
    try {
      const { client_id } = await register(emu.baseUrl, { redirect_uris: [cb.url] });
      const p = pkce();
      const landed = await navigate(
        authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri: cb.url, scope: 'ask research', state: 'st-ok' }, p.challenge),
      );
      expect(landed.searchParams.get('state')).toBe('st-ok');
      expect(landed.searchParams.get('iss')).toBe(emu.issuer);
      const code = landed.searchParams.get('code')!;
      const tokens = await exchangeCode(emu.baseUrl, { client_id, code, code_verifier: p.verifier, redirect_uri: cb.url });
      expect(tokens.status).toBe(200);
      expect(tokens.json()).toMatchObject({ scope: 'ask research', expires_in: 900 });

      // One client back to the person: the consent page is shown to them as usual.
      await emu.consent.set({ decision: 'page', clientId: client_id });
      const page = await http(authorizeUrl(emu.authUrl, emu.baseUrl, { client_id, redirect_uri: cb.url }, p.challenge));
      expect(page.status).toBe(200);
      expect(page.text).toContain('Zulassen');
    } finally {
      await cb.close();
    }
  });
});

describe('consent policies (docs/emulator-control.md "Consent as code")', () => {
  it('approve a subset: only the requested scopes in the policy are granted, the token response says so, and the events name the policy', async () => {
    const emulator = await startEmulator({ consent: [{ clientId: null, policy: { decision: 'approve', scopes: ['ask'] } }] });
    const events: AppEvent[] = [];
    emulator.core.events.subscribe((e) => events.push(e));
    const { client_id } = await register(emulator.baseUrl);
    const p = pkce();
    const answer = await http(authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, scope: 'ask research' }, p.challenge));
    expect(answer.status).toBe(302);
    const code = new URL(answer.headers.location as string).searchParams.get('code')!;
    const tokens = await exchangeCode(emulator.baseUrl, { client_id, code, code_verifier: p.verifier });
    // RFC 6749 §5.1: the response names the granted scope when it differs from the request.
    expect(tokens.json()).toMatchObject({ scope: 'ask' });
    const approved = events.find((e) => e.name === 'consent.approved');
    expect(approved?.data).toMatchObject({
      by: 'policy',
      scopes: ['ask'],
      requested_scopes: ['ask', 'research'],
      person_id: emulator.core.defaultPerson.id,
    });
    expect(events.some((e) => e.name === 'consent.shown')).toBe(true);
    // The research route is refused: the grant does not hold it.
    const research = await postJson(
      `${emulator.baseUrl}/research`,
      { question: 'Hausordnung' },
      { authorization: `Bearer ${tokens.json().access_token}` },
    );
    expect(research.status).toBe(403);
  });

  it('approve a subset that meets none of the requested scopes: access_denied, no grant', async () => {
    const emulator = await startEmulator({ consent: [{ clientId: null, policy: { decision: 'approve', scopes: ['research'] } }] });
    const { client_id } = await register(emulator.baseUrl);
    const answer = await http(authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, scope: 'ask', state: 's1' }, pkce().challenge));
    const location = new URL(answer.headers.location as string);
    expect(Object.fromEntries(location.searchParams)).toMatchObject({ error: 'access_denied', state: 's1' });
    expect(Object.keys(emulator.core.state.grants)).toHaveLength(0);
  });

  it('a policy for one client overrides the one for all; a policy never skips the checks before consent (invalid_scope still redirects as such)', async () => {
    const emulator = await startEmulator();
    const a = await register(emulator.baseUrl);
    const b = await register(emulator.baseUrl);
    const admin = { adminUrl: emulator.adminUrl, token: emulator.adminToken };
    await adminRequest(admin, 'POST', '/consent', { decision: 'approve' });
    const view = await adminRequest(admin, 'POST', '/consent', { decision: 'deny', client_id: b.client_id });
    expect(view).toEqual({ default: { decision: 'approve' }, clients: { [b.client_id]: { decision: 'deny' } } });
    const go = async (client_id: string, scope = 'ask') =>
      new URL(
        (await http(authorizeUrl(emulator.authUrl, emulator.baseUrl, { client_id, scope }, pkce().challenge))).headers.location as string,
      ).searchParams;
    expect((await go(a.client_id)).has('code')).toBe(true);
    expect((await go(b.client_id)).get('error')).toBe('access_denied');
    expect((await go(a.client_id, 'contacts.read')).get('error')).toBe('invalid_scope');
  });

  it('bad policies get 400 (or 404 for an unknown client) and change nothing', async () => {
    const emulator = await startEmulator();
    const admin = { adminUrl: emulator.adminUrl, token: emulator.adminToken };
    for (const body of [
      { decision: 'maybe' },
      { decision: 'deny', scopes: ['ask'] },
      { decision: 'approve', scopes: ['documents.read'] },
      { decision: 'approve', scopes: ['nope'] },
      { decision: 'approve', scopes: [] },
      { decision: 'approve', clientId: 'x' },
    ]) {
      await expect(adminRequest(admin, 'POST', '/consent', body)).rejects.toMatchObject({ status: 400 });
    }
    await expect(adminRequest(admin, 'POST', '/consent', { decision: 'approve', client_id: 'client_nobody' })).rejects.toMatchObject({
      status: 404,
    });
    expect(emulator.core.consentPolicies.view()).toEqual({ default: { decision: 'page' }, clients: {} });
  });

  it('serve --consent sets policies from flags; a malformed one is a usage error (exit 2)', async () => {
    const bad = await runCli(['serve', '--in-memory', '--port', '0', '--auth-port', '0', '--consent', 'approve=documents.read']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/retired scope documents\.read/);
    const serve = await startServe(['--in-memory', '--quiet', '--consent', 'approve=ask', '--consent', 'client_x:deny']);
    try {
      const view = await adminRequest({ adminUrl: serve.ready.admin_url, token: serve.ready.admin_token }, 'GET', '/consent');
      expect(view).toEqual({ default: { decision: 'approve', scopes: ['ask'] }, clients: { client_x: { decision: 'deny' } } });
    } finally {
      await serve.stop();
    }
  });
});

describe('scripted person actions (docs/emulator-control.md "Consent as code")', () => {
  it('person.revokeGrant revokes as the person (settings), refused on the next request', async () => {
    const emu = await startRunning();
    const tokens = await emu.issueTokens({ scopes: ['ask'] });
    const grant = await emu.person.revokeGrant(tokens.grant_id);
    expect(grant).toMatchObject({ status: 'revoked', revoked_by: 'person' });
    const res = await postJson(`${emu.baseUrl}/chat/ask`, { question: 'Hufschmied?' }, { authorization: `Bearer ${tokens.access_token}` });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toContain('revoked by the person');
    await expect(emu.person.revokeGrant('grant_nope')).rejects.toMatchObject({ status: 404 });
  });

  it('person.actions lists pending write actions; decideAction approves one (continue_ask applies it) and rejects another', async () => {
    const emu = await startRunning();
    const { access_token } = await emu.issueTokens({ scopes: ['ask', 'workspace.write'] });
    const client = new Client({ name: 'scripted', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${emu.baseUrl}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${access_token}` } },
      }),
    );
    try {
      const askFor = async (question: string) =>
        (await client.callTool({ name: 'ask', arguments: { question } })).structuredContent as Record<string, string>;
      const first = await askFor('Lege einen Kontakt „Anna Schmidt“ an, Telefon: 0171 2345678.');
      expect(first).toMatchObject({ outcome: 'pending_approval' });
      const pending = await emu.person.actions('pending');
      expect(pending.map((a) => a.id)).toEqual([first.action_id]);
      expect(await emu.person.decideAction(first.action_id!, 'approve')).toMatchObject({
        id: first.action_id,
        status: expect.stringMatching(/approved|applied/),
      });
      const applied = (await client.callTool({ name: 'continue_ask', arguments: { action_id: first.action_id } }))
        .structuredContent as Record<string, string>;
      expect(applied.outcome).toBe('applied');

      const second = await askFor('Lege einen Kontakt „Bernd Maier“ an.');
      expect(await emu.person.decideAction(second.action_id!, 'reject')).toMatchObject({ status: 'rejected' });
      expect(await emu.person.actions('pending')).toEqual([]);
    } finally {
      await client.close();
    }
  });
});

describe('login --headless under a consent policy (docs/emulator-control.md "Consent as code", README "CI": CI without a person)', () => {
  it('approve: login completes without a browser and the token works; the default page: exit 5 naming the fix; deny: exit 5 access denied', async () => {
    const home = await scratchDir();
    const env = { AGENT_ACCESS_CONFIG_DIR: join(home, 'cfg'), AGENT_ACCESS_BASE_URL: '', BROWSER: 'false' };
    const serve = await startServe(['--in-memory', '--quiet']);
    const admin = { adminUrl: serve.ready.admin_url, token: serve.ready.admin_token };
    try {
      const base = ['--base-url', serve.ready.base_url];
      const page = await runCli(['login', '--headless', '--scope', 'ask', ...base], { env, cwd: home });
      expect(page.code).toBe(5);
      expect(page.stderr).toMatch(/waits for a person.*--consent approve/);

      await adminRequest(admin, 'POST', '/consent', { decision: 'approve' });
      const ok = await runCli(['login', '--headless', '--scope', 'ask research', '--json', ...base], { env, cwd: home });
      expect(ok.code, ok.stderr).toBe(0);
      expect(ok.stderr).toMatch(/without a browser/);
      expect(JSON.parse(ok.stdout)).toMatchObject({ scope: 'ask research', refresh_token: true });
      const asked = await runCli(['ask', 'Wann kommt der Hufschmied?', '--json', ...base], { env, cwd: home });
      expect(asked.code).toBe(0);

      await adminRequest(admin, 'POST', '/consent', { decision: 'deny' });
      const denied = await runCli(['login', '--headless', '--scope', 'ask', ...base], { env, cwd: home });
      expect(denied.code).toBe(5);
      expect(denied.stderr).toMatch(/access denied/);
      // The probe of the cached client never reached consent: one consent per login, no stray grants.
      const grants = await adminRequest<{ grants: Array<{ status: string }> }>(admin, 'GET', '/grants');
      expect(grants.grants).toHaveLength(1);
    } finally {
      await serve.stop();
    }
  });
});
