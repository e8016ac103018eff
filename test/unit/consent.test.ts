/**
 * The authorization request and the consent screen (spec 3.3, 4.2, 5.6; OAuth 2.1 §4.1; RFC 9207), in this process
 * on a manual clock: checked in two phases, consent asked every time, answered once, within its lifetime, from the
 * browser session that saw it.
 */
import { describe, expect, it } from 'vitest';
import { MINUTE } from '../../src/core/state/clock.js';
import { beginConsent, checkAuthorizationRequest, decideConsent, findInteraction } from '../../src/core/oauth/consent.js';
import { ANSWERED_LIMIT, ConsentScreens } from '../../src/core/oauth/consent-screens.js';
import type { Core } from '../../src/core/core.js';
import type { Client } from '../../src/core/state/state.js';
import { pkce } from '../helpers/oauth.js';
import { authorize, authorizeQuery, BASE_URL, BINDING, exchangeCode, openCore, register, RESOURCE } from './helpers.js';

/** The consent screen for a valid request of `client`, shown to the default person in BINDING's session. */
function showConsent(core: Core, client: Client, query: Record<string, string | undefined> = {}) {
  const outcome = checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge, query));
  if (outcome.kind !== 'consent') throw new Error(`refused: ${outcome.error.message}`);
  return beginConsent(core, outcome.request, core.defaultPerson.id, BINDING);
}

const check = (core: Core, client: Client, query: Record<string, string | string[] | undefined>) =>
  checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge, query));

describe('authorization request', () => {
  it('OAuth 2.1 §4.1.2.1: an unknown client or an unregistered redirect_uri is answered directly, never redirected', async () => {
    const { core } = await openCore();
    const client = await register(core);
    expect(check(core, client, { client_id: 'client_nobody' })).toMatchObject({
      kind: 'error_page',
      error: { error: 'invalid_client', redirectable: false },
    });
    expect(check(core, client, { redirect_uri: 'https://attacker.example/cb' })).toMatchObject({
      kind: 'error_page',
      error: { error: 'invalid_request' },
    });
    expect(check(core, client, { redirect_uri: undefined })).toMatchObject({ kind: 'error_page' });
  });

  it('RFC 8252 §7.3: a loopback redirect URI matches on any port; path and host still count', async () => {
    const { core } = await openCore();
    const client = await register(core);
    expect(check(core, client, { redirect_uri: 'http://127.0.0.1:51234/callback' }).kind).toBe('consent');
    expect(check(core, client, { redirect_uri: 'http://127.0.0.1:51234/other' }).kind).toBe('error_page');
    expect(check(core, client, { redirect_uri: 'http://localhost:8976/callback' }).kind).toBe('error_page');
  });

  it.each([
    ['code_challenge is missing', { code_challenge: undefined }, 'invalid_request'],
    ['code_challenge_method is absent (plain)', { code_challenge_method: undefined }, 'invalid_request'],
    ['code_challenge_method is plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['code_challenge is too short', { code_challenge: 'abc' }, 'invalid_request'],
    ['state is missing', { state: undefined }, 'invalid_request'],
    ['response_type is token', { response_type: 'token' }, 'unsupported_response_type'],
    ['a retired scope is requested', { scope: 'ask documents.read' }, 'invalid_scope'],
    ['an unknown scope is requested', { scope: 'ask admin' }, 'invalid_scope'],
    ['no scope is requested', { scope: undefined }, 'invalid_scope'],
    ['another resource is requested', { resource: 'https://elsewhere.example/mcp' }, 'invalid_target'],
    ['a parameter is repeated', { scope: ['ask', 'research'] }, 'invalid_request'],
  ])('spec 4.2, OAuth 2.1 §4.1.2.1: when %s, the error is redirected with state and iss (RFC 9207)', async (_what, query, error) => {
    const { core } = await openCore();
    const client = await register(core);
    const outcome = check(core, client, { state: 'xyz', ...query });
    expect(outcome).toMatchObject({ kind: 'redirect', error: { error } });
    const location = new URL((outcome as { location: string }).location);
    expect(location.origin + location.pathname).toBe(client.redirect_uris[0]);
    expect(location.searchParams.get('error')).toBe(error);
    expect(location.searchParams.get('iss')).toBe(BASE_URL);
    if ('state' in query && query.state === undefined) expect(location.searchParams.has('state')).toBe(false);
    else expect(location.searchParams.get('state')).toBe('xyz');
  });

  it('spec 4.2: resource {base_url}/mcp asks for an agent token; without it, an identity request', async () => {
    const { core } = await openCore();
    const client = await register(core);
    expect(check(core, client, {})).toMatchObject({ kind: 'consent', request: { resource: RESOURCE, scopes: ['ask'] } });
    expect(check(core, client, { resource: undefined })).toMatchObject({ kind: 'consent', request: { resource: null } });
  });
});

describe('consent', () => {
  it('spec 3.3, 5.6: consent is shown every time; a stored grant never skips the screen', async () => {
    const { core, eventsNamed } = await openCore();
    const client = await register(core);
    await authorize(core, client);
    expect(Object.keys(core.state.grants)).toHaveLength(1);
    expect(check(core, client, {}).kind).toBe('consent');
    await authorize(core, client);
    expect(eventsNamed('consent.shown')).toHaveLength(2);
    expect(Object.keys(core.state.grants)).toHaveLength(2);
  });

  it('spec 5.6: the consent screen names the client as registered, with the requested scopes and resource', async () => {
    const { core, eventsNamed } = await openCore();
    const client = await register(core, { client_name: 'Kalender-Agent' });
    showConsent(core, client, { scope: 'ask workspace.write' });
    expect(eventsNamed('consent.shown')).toEqual([
      expect.objectContaining({
        client_name: 'Kalender-Agent',
        scopes: ['ask', 'workspace.write'],
        resource: RESOURCE,
        answered_by: 'person',
      }),
    ]);
  });

  it('OAuth 2.1 §4.1.2.1: the person denies: access_denied with state and iss, and no grant or code is stored', async () => {
    const { core, eventsNamed } = await openCore();
    const client = await register(core);
    const interaction = showConsent(core, client, { state: 'deny-me' });
    const location = new URL(await decideConsent(core, interaction.ticket, BINDING, 'deny'));
    expect(Object.fromEntries(location.searchParams)).toMatchObject({ error: 'access_denied', state: 'deny-me', iss: BASE_URL });
    expect(location.searchParams.has('code')).toBe(false);
    expect(core.state.grants).toEqual({});
    expect(core.state.codes).toEqual({});
    expect(eventsNamed('consent.denied')).toHaveLength(1);
  });

  it('OAuth 2.1 §4.1.2: approval redirects with a code, the exact state and iss, and stores the grant (spec 3.3: kept so it can be revoked)', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const a = await authorize(core, client, { state: 'exact state ä' });
    expect(a.location.searchParams.get('state')).toBe('exact state ä');
    expect(a.location.searchParams.get('iss')).toBe(BASE_URL);
    expect(Object.values(core.state.grants)).toEqual([
      expect.objectContaining({
        client_id: client.client_id,
        person_id: 'person_erika',
        scopes: ['ask'],
        resource: RESOURCE,
        status: 'active',
      }),
    ]);
  });

  it('a consent screen can be answered for 10 minutes on the clock; after that it has expired', async () => {
    const { core, clock } = await openCore();
    const client = await register(core);
    const late = showConsent(core, client);
    clock.advance(10 * MINUTE - 1);
    expect(findInteraction(core, late.ticket, BINDING)).toBeDefined();
    clock.advance(1);
    await expect(decideConsent(core, late.ticket, BINDING, 'approve')).rejects.toMatchObject({ status: 400, code: 'consent_expired' });
    expect(core.state.grants).toEqual({});
  });

  it('a consent screen is answered once: a second answer is refused and stores nothing more', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const interaction = showConsent(core, client);
    await decideConsent(core, interaction.ticket, BINDING, 'approve');
    await expect(decideConsent(core, interaction.ticket, BINDING, 'approve')).rejects.toMatchObject({ code: 'consent_expired' });
    await expect(decideConsent(core, interaction.ticket, BINDING, 'deny')).rejects.toMatchObject({ code: 'consent_expired' });
    expect(Object.keys(core.state.grants)).toHaveLength(1);
  });

  it('RFC 6749 §10.12: consent cannot be given from another browser session than the one that saw the page', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const interaction = showConsent(core, client);
    await expect(decideConsent(core, interaction.ticket, 'another-session', 'approve')).rejects.toMatchObject({ code: 'consent_expired' });
    await expect(decideConsent(core, interaction.ticket, BINDING, 'approve')).resolves.toMatch(/code=/);
  });

  it('RFC 6749 §3.3: a consent policy may approve a subset of the requested scopes; the tokens carry only those', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const verifier = pkce();
    const interaction = showConsent(core, client, { scope: 'ask research', code_challenge: verifier.challenge });
    const location = new URL(await decideConsent(core, interaction.ticket, BINDING, 'approve', { by: 'policy', scopes: ['ask'] }));
    const tokens = await exchangeCode(core, { client, code: location.searchParams.get('code')!, pkce: verifier });
    expect(tokens.scope).toBe('ask');
    expect(Object.values(core.state.grants)[0]!.scopes).toEqual(['ask']);
  });
});

describe('41.4: consent screens are not kept on the server, so no flood can push one out', () => {
  it("41.4: 20 000 screens opened after a person's, in other sessions and in the person's own, leave the person's answerable", async () => {
    const { core } = await openCore();
    const client = await register(core);
    const outcome = checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge));
    if (outcome.kind !== 'consent') throw new Error('refused');
    const persons = beginConsent(core, outcome.request, core.defaultPerson.id, BINDING);
    for (let i = 0; i < 10_000; i++) beginConsent(core, outcome.request, core.defaultPerson.id, `flood-${i}`);
    // A page on another port of 127.0.0.1 is same-site: its requests carry the person's own cookie.
    for (let i = 0; i < 10_000; i++) beginConsent(core, outcome.request, core.defaultPerson.id, BINDING);
    await expect(decideConsent(core, persons.ticket, BINDING, 'approve')).resolves.toMatch(/code=/);
  });

  it('41.4: a ticket changed in any part, cut short, or signed before a restore is refused, and nothing is stored', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const interaction = showConsent(core, client);
    const [body, mac] = interaction.ticket.split('.') as [string, string];
    const flip = (text: string) => `${text.slice(0, 5)}${text[5] === 'A' ? 'B' : 'A'}${text.slice(6)}`;
    for (const forged of [`${flip(body)}.${mac}`, `${body}.${flip(mac)}`, body, `${body}.${mac}.x`, ''])
      await expect(decideConsent(core, forged, BINDING, 'approve')).rejects.toMatchObject({ code: 'consent_expired' });
    core.consentScreens.reset();
    await expect(decideConsent(core, interaction.ticket, BINDING, 'approve')).rejects.toMatchObject({ code: 'consent_expired' });
    expect(core.state.grants).toEqual({});
  });

  it('41.4: a screen whose client is no longer registered is refused', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const interaction = showConsent(core, client);
    core.repo.delete('clients', client.client_id);
    await expect(decideConsent(core, interaction.ticket, BINDING, 'approve')).rejects.toMatchObject({ code: 'consent_expired' });
    expect(core.state.grants).toEqual({});
  });

  it(`41.4: answered screens are remembered at most ${ANSWERED_LIMIT}, the earliest answered forgotten first`, async () => {
    const { core } = await openCore();
    const client = await register(core);
    const outcome = checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge));
    if (outcome.kind !== 'consent') throw new Error('refused');
    const screens = new ConsentScreens();
    const open = () => screens.open({ request: outcome.request, person_id: 'p', binding: BINDING, expires_at: 1 });
    const first = open();
    screens.answered(first);
    const second = open();
    screens.answered(second);
    for (let i = 2; i < ANSWERED_LIMIT; i++) screens.answered({ ...first, id: `answered-${i}` });
    expect(screens.wasAnswered(first.id)).toBe(true);
    screens.answered({ ...first, id: 'one-more' });
    expect(screens.wasAnswered(first.id)).toBe(false);
    expect(screens.wasAnswered(second.id)).toBe(true);
  });
});
