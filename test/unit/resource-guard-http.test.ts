import { writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HOUR, ManualClock } from '../../src/core/state/clock.js';
import type { AppEvent } from '../../src/core/state/events.js';
import { listGrants, revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { requireScope } from '../../src/server/resource-guard.js';
import { scratchDir, startInProcess } from '../helpers/emulator.js';
import { authorizeAndApprove, bearer, Browser, decodeJwt, http, postForm, refresh } from '../helpers/oauth.js';

/** An emulator with two probe routes behind the guard, standing in for the REST routes and /mcp of later parts. */
const guarded = (options: Parameters<typeof startInProcess>[0] = {}) =>
  startInProcess({
    ...options,
    extendApi: (app, core) => {
      app.get('/probe/ask', { preHandler: requireScope(core, 'ask') }, async (request) => ({
        ok: true,
        client_id: request.access!.client_id,
        sub: request.access!.person_id,
      }));
      app.get('/probe/research', { preHandler: requireScope(core, 'research') }, async () => ({ ok: true }));
    },
  });

const legacyTokenOf = (handle: string) => `aa1.${handle.repeat(22)}.${'s'.repeat(43)}`;

/** A fixtures dir with the default person and the given legacy grants. */
async function legacyFixtures(grants: Array<{ scopes: string[]; handle: string }>): Promise<string> {
  const dir = join(await scratchDir(), 'fixtures');
  await mkdir(dir);
  await writeFile(join(dir, 'persons.json'), JSON.stringify([{ id: 'person_erika', name: 'Erika Mustermann', email: 'erika@example.de' }]));
  await writeFile(
    join(dir, 'grants.json'),
    JSON.stringify(
      grants.map((g, i) => ({
        client: { client_id: `client_legacy_${i}`, client_name: 'Alter Agent', redirect_uris: ['http://127.0.0.1/cb'] },
        person_id: 'person_erika',
        scopes: g.scopes,
        resource: 'mcp',
        refresh_token: legacyTokenOf(g.handle),
      })),
    ),
  );
  return dir;
}

describe('spec 5.5 / RFC 6750 §3 / RFC 9728 §5.1: the resource guard', () => {
  it('no token → 401 with WWW-Authenticate naming resource_metadata and the scope, no error code', async () => {
    const emu = await guarded();
    const res = await http(`${emu.baseUrl}/probe/ask`);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(
      `Bearer resource_metadata="${emu.baseUrl}/.well-known/oauth-protected-resource/mcp", scope="ask"`,
    );
    expect(res.headers['content-type']).toContain('application/problem+json');
  });

  it('a token in the query string is ignored', async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu);
    const res = await http(`${emu.baseUrl}/probe/ask?access_token=${flow.tokens!.access_token}`);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).not.toContain('error=');
  });

  it('a valid agent token passes, with the scheme in any case', async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu);
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const res = await http(`${emu.baseUrl}/probe/ask`, { headers: { authorization: `${scheme} ${flow.tokens!.access_token}` } });
      expect(res.status).toBe(200);
      expect(res.json()).toEqual({ ok: true, client_id: flow.client_id, sub: 'person_erika' });
    }
  });

  it('spec 5.8: an identity token (no resource) → 401 invalid_token', async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu, { resource: null });
    const res = await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(flow.tokens!.access_token) });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(
      /^Bearer error="invalid_token", error_description="identity token refused[^"]*", resource_metadata="[^"]+", scope="ask"$/,
    );
  });

  it('a forged, malformed or foreign-signed token → 401 invalid_token', async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu);
    const [h, p] = flow.tokens!.access_token.split('.');
    const forgedPayload = Buffer.from(JSON.stringify({ ...decodeJwt(flow.tokens!.access_token).payload, scope: 'ask research' })).toString(
      'base64url',
    );
    const other = await guarded();
    const foreign = await authorizeAndApprove(other);
    for (const token of [
      `${h}.${forgedPayload}.${flow.tokens!.access_token.split('.')[2]}`,
      `${h}.${p}`,
      'x',
      foreign.tokens!.access_token,
    ]) {
      const res = await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(token) });
      expect(res.status).toBe(401);
      expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
    }
  });

  it('a missing scope → 403 insufficient_scope with the scope needed', async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu, { scope: 'ask' });
    const res = await http(`${emu.baseUrl}/probe/research`, { headers: bearer(flow.tokens!.access_token) });
    expect(res.status).toBe(403);
    expect(res.headers['www-authenticate']).toContain('error="insufficient_scope"');
    expect(res.headers['www-authenticate']).toContain('scope="research"');
  });

  it('spec 5.7 / 3.3: a grant the person revokes on the settings page is refused on the next request, before expiry', async () => {
    const emu = await guarded();
    const browser = new Browser();
    const flow = await authorizeAndApprove(emu, { browser });
    expect((await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(flow.tokens!.access_token) })).status).toBe(200);
    const settings = await browser.get(`${emu.authUrl}/settings`);
    expect(settings.text).toContain('Test Agent');
    // The button asks first (45.10): its form leads to the question, whose form revokes.
    const question = await browser.get(new URL(Browser.form(settings.text).action, emu.authUrl).toString());
    expect(question.status).toBe(200);
    expect(question.text).toContain('widerrufen?</h1>');
    expect((await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(flow.tokens!.access_token) })).status).toBe(200);
    const { action, fields } = Browser.form(question.text);
    const revoked = await browser.post(new URL(action, emu.authUrl).toString(), fields);
    expect(revoked.status).toBe(303);
    const next = await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(flow.tokens!.access_token) });
    expect(next.status).toBe(401);
    expect(next.headers['www-authenticate']).toContain('revoked');
    expect((await browser.get(`${emu.authUrl}/settings`)).text).toContain('Widerrufen am');
  });

  it('the request log names whose genuine token was refused (revoked grant, missing scope); a forged or expired one is marked, not taken for none (45.8)', async () => {
    const clock = new ManualClock(Date.UTC(2026, 10, 28, 8));
    const emu = await guarded({ clock });
    const flow = await authorizeAndApprove(emu, { scope: 'ask' });
    const other = await authorizeAndApprove(emu, { scope: 'ask' });
    const grantId = String(decodeJwt(flow.tokens!.access_token).payload.grant_id);
    const served: Array<Extract<AppEvent, { name: 'request.served' }>> = [];
    emu.core.events.subscribe((e) => e.name === 'request.served' && served.push(e));
    const get = async (path: string, token: string) => (await http(`${emu.baseUrl}${path}`, { headers: bearer(token) })).status;
    expect(await get('/probe/research', flow.tokens!.access_token)).toBe(403);
    await revokeGrant(emu.core, grantId, 'admin');
    expect(await get('/probe/ask', flow.tokens!.access_token)).toBe(401);
    expect(await get('/probe/ask', `${flow.tokens!.access_token.slice(0, -4)}AAAA`)).toBe(401);
    expect((await http(`${emu.baseUrl}/probe/ask`)).status).toBe(401);
    clock.advance(2 * HOUR);
    expect(await get('/probe/ask', other.tokens!.access_token)).toBe(401);
    await expect.poll(() => served.length).toBe(5);
    expect(served.map((e) => [e.data.status, e.data.client_id ?? null, e.data.grant_id ?? null, e.data.bearer ?? null])).toEqual([
      [403, flow.client_id, grantId, null],
      [401, flow.client_id, grantId, null],
      [401, null, null, 'invalid'],
      [401, null, null, null],
      [401, null, null, 'expired'],
    ]);
  });

  it("the settings form is refused without its CSRF token; a person cannot revoke another person's grant", async () => {
    const emu = await guarded();
    const browser = new Browser();
    await authorizeAndApprove(emu, { browser });
    const grant = listGrants(emu.core)[0]!;
    const forged = await browser.post(`${emu.authUrl}/settings/grants/${grant.id}/revoke`, { csrf: 'forged' });
    expect(forged.status).toBe(403);
    // A grant that is not there: a German sentence, not the developer's English, and nothing about being sent back.
    const { fields } = Browser.form((await browser.get(`${emu.authUrl}/settings/grants/${grant.id}/revoke`)).text);
    const missing = await browser.post(`${emu.authUrl}/settings/grants/grant_nope/revoke`, fields);
    expect(missing.status).toBe(404);
    expect((await browser.get(`${emu.authUrl}/settings/grants/grant_nope/revoke`)).status).toBe(404);
    expect(missing.text.split('<details class="developer">')[0]).toContain('Diesen Zugriff gibt es nicht');
    expect(missing.text).not.toContain('zurückgeleitet');
    await expect(revokeGrant(emu.core, grant.id, 'person', 'person_max')).rejects.toMatchObject({ status: 404 });
    expect(emu.core.state.grants[grant.id]!.status).toBe('active');
  });
});

describe('RFC 9728 §5 / MCP authorization: {base_url}/mcp starts discovery', () => {
  it.each(['GET', 'POST', 'DELETE'])('%s /mcp without a token → 401 with resource_metadata and scope', async (method) => {
    const emu = await guarded();
    const res = await http(`${emu.baseUrl}/mcp`, {
      method,
      ...(method === 'POST' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}),
    });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe(
      `Bearer resource_metadata="${emu.baseUrl}/.well-known/oauth-protected-resource/mcp", scope="ask"`,
    );
  });

  it('spec 5.8: an identity token is refused at /mcp; an agent token passes the guard to the MCP server', async () => {
    const emu = await guarded();
    const identity = await authorizeAndApprove(emu, { resource: null });
    expect((await http(`${emu.baseUrl}/mcp`, { headers: bearer(identity.tokens!.access_token) })).headers['www-authenticate']).toContain(
      'invalid_token',
    );
    const agent = await authorizeAndApprove(emu);
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '1' } },
    };
    const res = await http(`${emu.baseUrl}/mcp`, {
      method: 'POST',
      headers: { ...bearer(agent.tokens!.access_token), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(init),
    });
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({
      jsonrpc: '2.0',
      id: 1,
      result: { serverInfo: { name: 'agent-access' }, capabilities: { tools: {} } },
    });
  });
});

describe('server errors', () => {
  it('a 500 hides its details from the client and reaches onError', async () => {
    const errors: Array<[Error, string]> = [];
    const emu = await startInProcess({
      onError: (e, context) => errors.push([e, context]),
      extendApi: (app) => {
        app.get('/boom', async () => {
          throw new Error('secret detail');
        });
      },
    });
    const res = await http(`${emu.baseUrl}/boom`);
    expect(res.status).toBe(500);
    expect(res.text).not.toContain('secret detail');
    expect(errors).toHaveLength(1);
    expect(errors[0]![1]).toBe('request');
    expect(errors[0]![0].message).toContain('GET /boom failed: secret detail');
  });
});

describe('RFC 7009: token revocation', () => {
  it('revoking a refresh token ends its grant: refresh and access tokens are refused', async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu);
    const res = await postForm(`${emu.baseUrl}/oauth/revoke`, {
      token: flow.tokens!.refresh_token,
      token_type_hint: 'refresh_token',
      client_id: flow.client_id,
    });
    expect(res.status).toBe(200);
    expect((await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(flow.tokens!.access_token) })).status).toBe(401);
    expect((await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).json().error).toBe(
      'invalid_grant',
    );
    expect(listGrants(emu.core)[0]).toMatchObject({ status: 'revoked', revoked_by: 'client' });
  });

  it('revoking an access token refuses that token only', async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu);
    const next = (await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).json();
    expect((await postForm(`${emu.baseUrl}/oauth/revoke`, { token: flow.tokens!.access_token, client_id: flow.client_id })).status).toBe(
      200,
    );
    expect((await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(flow.tokens!.access_token) })).status).toBe(401);
    expect((await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(next.access_token) })).status).toBe(200);
  });

  it("an unknown token or another client's token → 200 and nothing changes", async () => {
    const emu = await guarded();
    const flow = await authorizeAndApprove(emu);
    const other = await authorizeAndApprove(emu);
    expect((await postForm(`${emu.baseUrl}/oauth/revoke`, { token: 'whatever', client_id: flow.client_id })).status).toBe(200);
    expect((await postForm(`${emu.baseUrl}/oauth/revoke`, { token: other.tokens!.refresh_token, client_id: flow.client_id })).status).toBe(
      200,
    );
    expect(listGrants(emu.core).every((g) => g.status === 'active')).toBe(true);
  });

  it('a missing token → 400 invalid_request; an unknown client → 401 invalid_client', async () => {
    const emu = await guarded();
    expect((await postForm(`${emu.baseUrl}/oauth/revoke`, { client_id: 'x' })).json().error).toBe('invalid_request');
    const res = await postForm(`${emu.baseUrl}/oauth/revoke`, { token: 't', client_id: 'client_nope' });
    expect(res.status).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });
});

describe('spec 9: grants carrying retired scopes keep working and lose them at their next refresh', () => {
  it('a legacy grant from fixtures refreshes without its retired scopes, and the grant forgets them', async () => {
    const dir = await scratchDir();
    const fixtures = join(dir, 'fixtures');
    await mkdir(fixtures);
    await writeFile(
      join(fixtures, 'persons.json'),
      JSON.stringify([{ id: 'person_erika', name: 'Erika Mustermann', email: 'erika@example.de' }]),
    );
    const legacyToken = `aa1.${'L'.repeat(22)}.${'s'.repeat(43)}`;
    await writeFile(
      join(fixtures, 'grants.json'),
      JSON.stringify([
        {
          client: { client_id: 'client_legacy', client_name: 'Alter Agent', redirect_uris: ['http://127.0.0.1/cb'] },
          person_id: 'person_erika',
          scopes: ['ask', 'documents.read', 'contacts.read'],
          resource: 'mcp',
          refresh_token: legacyToken,
        },
      ]),
    );
    const emu = await guarded({ fixtures });
    const before = listGrants(emu.core)[0]!;
    expect(before.scopes).toEqual(['ask', 'documents.read', 'contacts.read']);
    const res = await refresh(emu.baseUrl, { client_id: 'client_legacy', refresh_token: legacyToken });
    expect(res.status).toBe(200);
    expect(res.json().scope).toBe('ask');
    expect(decodeJwt(res.json().access_token).payload.aud).toBe(`${emu.baseUrl}/mcp`);
    expect(listGrants(emu.core)[0]!.scopes).toEqual(['ask']);
    expect((await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(res.json().access_token) })).status).toBe(200);
    const retiredAsk = await refresh(emu.baseUrl, {
      client_id: 'client_legacy',
      refresh_token: res.json().refresh_token,
      scope: 'documents.read',
    });
    expect(retiredAsk.json().error).toBe('invalid_scope');
  });

  it('RFC 6749 §3.3: a grant holding only retired scopes has nothing to issue → invalid_grant, never an empty scope', async () => {
    const fixtures = await legacyFixtures([{ scopes: ['documents.read'], handle: 'R' }]);
    const emu = await guarded({ fixtures });
    const res = await refresh(emu.baseUrl, { client_id: 'client_legacy_0', refresh_token: legacyTokenOf('R') });
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_grant', error_description: expect.stringContaining('only retired scopes') });
  });

  it('two seed grants with one refresh-token handle are refused when the fixtures load', async () => {
    const fixtures = await legacyFixtures([
      { scopes: ['ask'], handle: 'D' },
      { scopes: ['ask'], handle: 'D' },
    ]);
    await expect(startInProcess({ fixtures })).rejects.toThrow(/handle .* is used by another grant/);
  });
});

describe('typed events: every change is published as entity.verb', () => {
  it('a flow with a replay publishes its events in order', async () => {
    const emu = await guarded();
    const events: AppEvent[] = [];
    emu.core.events.subscribe((e) => events.push(e));
    const flow = await authorizeAndApprove(emu);
    const next = (await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).json();
    await refresh(emu.baseUrl, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token });
    await http(`${emu.baseUrl}/probe/ask`, { headers: bearer(next.access_token) });
    await revokeGrant(emu.core, listGrants(emu.core)[0]!.id, 'admin');
    const names = events.filter((e) => e.name !== 'request.served').map((e) => e.name);
    expect(names).toEqual([
      'client.registered',
      'consent.shown',
      'consent.approved',
      'grant.created',
      'code.issued',
      'tokens.issued',
      'refresh.rotated',
      'tokens.issued',
      'family.invalidated',
      'refresh.refused',
      // Published by a listener of refresh.refused: every listener still sees the events in their order.
      'finding.recorded',
      'access.refused',
      'grant.revoked',
    ]);
    const served = events.filter((e) => e.name === 'request.served').map((e) => e.data);
    expect(served).toContainEqual(expect.objectContaining({ server: 'api', method: 'GET', path: '/probe/ask', status: 401 }));
    expect(served).toContainEqual(expect.objectContaining({ server: 'auth', method: 'POST', path: '/consent', status: 302 }));
    expect(events.map((e) => e.seq)).toEqual([...events.map((e) => e.seq)].sort((a, b) => a - b));
  });
});
