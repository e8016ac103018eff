/**
 * Refresh-token families (spec 3.2, 5.3, 7; OAuth 2.1 §4.3, RFC 9700 §4.14.2), in this process on a manual clock:
 * every use rotates, only the newest works, and a replay of any earlier token ends the whole family.
 */
import { describe, expect, it } from 'vitest';
import { DAY, SECOND } from '../../src/core/state/clock.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { revokeToken } from '../../src/core/oauth/revocation.js';
import { FAMILY_HISTORY } from '../../src/core/oauth/token-family.js';
import { authorize, exchangeCode, oauthError, openCore, refresh, register, walkToTokens } from './helpers.js';

const bearer = (token: string) => `Bearer ${token}`;

describe('token families', () => {
  it('spec 3.2: a refresh rotates; the response carries a new refresh token and the old one stops working', async () => {
    const { core, eventsNamed } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    const next = await refresh(core, client.client_id, tokens.refresh_token);
    expect(next.refresh_token).toBeTruthy();
    expect(next.refresh_token).not.toBe(tokens.refresh_token);
    expect(next).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'ask' });
    expect(eventsNamed('refresh.rotated')).toEqual([expect.objectContaining({ from_generation: 1, to_generation: 2 })]);
    await expect(refresh(core, client.client_id, next.refresh_token!)).resolves.toMatchObject({ token_type: 'Bearer' });
  });

  it('spec 3.2: replay of a rotated refresh token revokes the family: every refresh and access token of it stops working', async () => {
    const { core, eventsNamed } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    const second = await refresh(core, client.client_id, tokens.refresh_token);
    expect(await oauthError(refresh(core, client.client_id, tokens.refresh_token))).toBe('invalid_grant');
    expect(eventsNamed('family.invalidated')).toEqual([expect.objectContaining({ reason: 'refresh_replay', replayed_generation: 1 })]);
    // The newest token of the family, which was valid a moment ago, is dead too, and so are its access tokens.
    expect(await oauthError(refresh(core, client.client_id, second.refresh_token!))).toBe('invalid_grant');
    await expect(authenticate(core, bearer(second.access_token), 'ask')).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).rejects.toMatchObject({ status: 401 });
  });

  it(`spec 3.2: a replay of ANY earlier refresh token kills the family, also one older than the ${FAMILY_HISTORY} generations it remembers`, async () => {
    const { core, eventsNamed } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    const chain = [tokens.refresh_token];
    for (let i = 0; i < FAMILY_HISTORY + 2; i++) chain.push((await refresh(core, client.client_id, chain.at(-1)!)).refresh_token!);
    expect(await oauthError(refresh(core, client.client_id, chain[0]!))).toBe('invalid_grant');
    expect(eventsNamed('family.invalidated')).toEqual([expect.objectContaining({ reason: 'refresh_replay' })]);
    expect(await oauthError(refresh(core, client.client_id, chain.at(-1)!))).toBe('invalid_grant');
  });

  it('spec 3.2: a replay kills only its own family; another authorization of the same client keeps working', async () => {
    const { core } = await openCore();
    const first = await walkToTokens(core);
    const other = await exchangeCode(core, await authorize(core, first.client));
    await refresh(core, first.client.client_id, first.tokens.refresh_token);
    await oauthError(refresh(core, first.client.client_id, first.tokens.refresh_token));
    await expect(refresh(core, first.client.client_id, other.refresh_token!)).resolves.toMatchObject({ token_type: 'Bearer' });
  });

  it('OAuth 2.1 §4.3: a refresh token belongs to its client; another client presenting it is refused without harm to the family', async () => {
    const { core } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    const thief = await register(core, { client_name: 'Fremder Agent' });
    expect(await oauthError(refresh(core, thief.client_id, tokens.refresh_token))).toBe('invalid_grant');
    await expect(refresh(core, client.client_id, tokens.refresh_token)).resolves.toMatchObject({ token_type: 'Bearer' });
  });

  it('refresh tokens expire 30 days after their issue; each rotation starts a new 30 days', async () => {
    const { core, clock } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    clock.advance(29 * DAY);
    const rotated = await refresh(core, client.client_id, tokens.refresh_token);
    clock.advance(29 * DAY);
    const again = await refresh(core, client.client_id, rotated.refresh_token!);
    clock.advance(30 * DAY);
    expect(await oauthError(refresh(core, client.client_id, again.refresh_token!))).toBe('invalid_grant');
  });

  it('RFC 6749 §3.3: scope on refresh may narrow the access token, never widen it (invalid_scope)', async () => {
    const { core } = await openCore();
    const { client, tokens } = await walkToTokens(core, { scope: 'ask research' });
    const narrow = await refresh(core, client.client_id, tokens.refresh_token, { scope: 'ask' });
    expect(narrow.scope).toBe('ask');
    expect(await oauthError(refresh(core, client.client_id, narrow.refresh_token!, { scope: 'ask training.write' }))).toBe('invalid_scope');
    // The grant keeps its scopes: the next refresh without scope gives all of them again.
    expect((await refresh(core, client.client_id, narrow.refresh_token!)).scope).toBe('ask research');
  });

  it('RFC 7591 §2: a client that did not register refresh_token gets no refresh token and may not use the grant', async () => {
    const { core } = await openCore();
    const { client, tokens } = await walkToTokens(core, { client: { grant_types: ['authorization_code'] } });
    expect(tokens).not.toHaveProperty('refresh_token');
    expect(await oauthError(refresh(core, client.client_id, 'aa1.handle.secret'))).toBe('unauthorized_client');
  });

  it('RFC 7009 §2.1: revoking the current refresh token ends its grant and every token of it', async () => {
    const { core } = await openCore();
    const { client, tokens, grantId } = await walkToTokens(core);
    await revokeToken(core, { client_id: client.client_id, token: tokens.refresh_token });
    expect(core.state.grants[grantId]).toMatchObject({ status: 'revoked', revoked_by: 'client' });
    expect(await oauthError(refresh(core, client.client_id, tokens.refresh_token))).toBe('invalid_grant');
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
  });

  it('RFC 7009 §2.1: an access token revoked by its client is refused from the next request; its refresh token keeps working', async () => {
    const { core, clock } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    await revokeToken(core, { client_id: client.client_id, token: tokens.access_token });
    clock.advance(SECOND);
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).rejects.toThrow(/revoked/);
    const next = await refresh(core, client.client_id, tokens.refresh_token);
    await expect(authenticate(core, bearer(next.access_token), 'ask')).resolves.toMatchObject({ client_id: client.client_id });
  });

  it('RFC 7009 §2.2: a token of another client, or no token at all of ours, is answered the same and changes nothing', async () => {
    const { core } = await openCore();
    const { client, tokens, grantId } = await walkToTokens(core);
    const other = await register(core, { client_name: 'Anderer Agent' });
    await expect(revokeToken(core, { client_id: other.client_id, token: tokens.refresh_token })).resolves.toBeUndefined();
    await expect(revokeToken(core, { client_id: other.client_id, token: tokens.access_token })).resolves.toBeUndefined();
    await expect(revokeToken(core, { client_id: client.client_id, token: 'not-a-token' })).resolves.toBeUndefined();
    expect(core.state.grants[grantId]!.status).toBe('active');
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).resolves.toMatchObject({ client_id: client.client_id });
  });
});
