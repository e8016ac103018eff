/**
 * Authorization codes at the token endpoint (spec 4.3, OAuth 2.1 §4.1.3, RFC 7636, RFC 8707), in this process on a
 * manual clock: single use, short-lived, and bound to the client, the redirect URI, the PKCE challenge and the resource.
 */
import { describe, expect, it } from 'vitest';
import { SECOND } from '../../src/core/state/clock.js';
import { revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { pkce } from '../helpers/oauth.js';
import { authorize, claimsOf, exchangeCode, oauthError, openCore, refresh, register, RESOURCE } from './helpers.js';

describe('authorization codes', () => {
  it('spec 4.3, 2.2: a code and its verifier give a Bearer access token of 900 s, a refresh token and the granted scope', async () => {
    const { core } = await openCore();
    const a = await authorize(core, await register(core), { scope: 'ask research' });
    const tokens = await exchangeCode(core, a);
    expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'ask research' });
    expect(tokens.refresh_token).toMatch(/^aa1\./);
    expect(claimsOf(tokens.access_token)).toMatchObject({ aud: RESOURCE, client_id: a.client.client_id, scope: 'ask research' });
  });

  it('OAuth 2.1 §4.1.3: a code is single use; a replay is invalid_grant and revokes the tokens issued from it', async () => {
    const { core, eventsNamed } = await openCore();
    const a = await authorize(core, await register(core));
    const first = await exchangeCode(core, a);
    expect(await oauthError(exchangeCode(core, a))).toBe('invalid_grant');
    expect(eventsNamed('family.invalidated')).toEqual([expect.objectContaining({ reason: 'code_replay' })]);
    expect(await oauthError(exchangeCode(core, a))).toBe('invalid_grant');
    await expect(authenticate(core, `Bearer ${first.access_token}`, 'ask')).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
    expect(await oauthError(refresh(core, a.client.client_id, first.refresh_token!))).toBe('invalid_grant');
  });

  it('OAuth 2.1 §4.1.2: a code expires after its lifetime (60 s) on the clock', async () => {
    const { core, clock } = await openCore();
    const fresh = await authorize(core, await register(core));
    clock.advance(59 * SECOND);
    await expect(exchangeCode(core, fresh)).resolves.toMatchObject({ token_type: 'Bearer' });
    const late = await authorize(core, fresh.client);
    clock.advance(60 * SECOND);
    expect(await oauthError(exchangeCode(core, late))).toBe('invalid_grant');
  });

  it('RFC 7636 §4.6: the code_verifier must hash (S256) to the code_challenge; a missing one is invalid_request', async () => {
    const { core } = await openCore();
    const a = await authorize(core, await register(core));
    expect(await oauthError(exchangeCode(core, a, { code_verifier: pkce().verifier }))).toBe('invalid_grant');
    expect(await oauthError(exchangeCode(core, a, { code_verifier: a.pkce.challenge }))).toBe('invalid_grant');
    expect(await oauthError(exchangeCode(core, a, { code_verifier: undefined }))).toBe('invalid_request');
    // A failed attempt does not use the code up.
    await expect(exchangeCode(core, a)).resolves.toMatchObject({ token_type: 'Bearer' });
  });

  it('spec 4.3: redirect_uri must be the one of the authorization request', async () => {
    const { core } = await openCore();
    const client = await register(core, { redirect_uris: ['http://127.0.0.1:8976/callback', 'http://127.0.0.1:8976/other'] });
    const a = await authorize(core, client);
    expect(await oauthError(exchangeCode(core, a, { redirect_uri: 'http://127.0.0.1:8976/other' }))).toBe('invalid_grant');
    expect(await oauthError(exchangeCode(core, a, { redirect_uri: undefined }))).toBe('invalid_request');
  });

  it('OAuth 2.1 §4.1.3: a code is bound to the client it was issued to', async () => {
    const { core } = await openCore();
    const a = await authorize(core, await register(core));
    const other = await register(core, { client_name: 'Anderer Agent' });
    expect(await oauthError(exchangeCode(core, a, { client_id: other.client_id }))).toBe('invalid_grant');
    expect(await oauthError(exchangeCode(core, a, { client_id: 'client_unknown' }))).toBe('invalid_client');
  });

  it('RFC 8707 §2.2: the code is bound to its resource; another resource, or any resource for an identity grant, is invalid_target', async () => {
    const { core } = await openCore();
    const client = await register(core);
    const agent = await authorize(core, client);
    expect(await oauthError(exchangeCode(core, agent, { resource: 'https://elsewhere.example/mcp' }))).toBe('invalid_target');
    await expect(exchangeCode(core, agent, { resource: RESOURCE })).resolves.toMatchObject({ token_type: 'Bearer' });
    const identity = await authorize(core, client, { resource: undefined });
    expect(await oauthError(exchangeCode(core, identity, { resource: RESOURCE }))).toBe('invalid_target');
  });

  it('spec 4.2, 5.8: without resource the code gives an identity token: its audience is the client, not {base_url}/mcp', async () => {
    const { core } = await openCore();
    const a = await authorize(core, await register(core), { resource: undefined });
    const tokens = await exchangeCode(core, a);
    expect(claimsOf(tokens.access_token).aud).toBe(a.client.client_id);
  });

  it('spec 3.3: a code whose grant was revoked before the exchange gives nothing', async () => {
    const { core } = await openCore();
    const a = await authorize(core, await register(core));
    const grant = Object.values(core.state.grants)[0]!;
    await revokeGrant(core, grant.id, 'person');
    expect(await oauthError(exchangeCode(core, a))).toBe('invalid_grant');
  });
});
