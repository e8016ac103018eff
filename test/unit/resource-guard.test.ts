/**
 * The resource guard (spec 2.3, 4.4, 5.3-5.8; RFC 6750 §3, RFC 9068 §4), in this process on a manual clock: what a
 * REST route or the agent plane checks on every request before it does anything.
 */
import { describe, expect, it } from 'vitest';
import { MINUTE, SECOND } from '../../src/core/state/clock.js';
import { issueTokensWithoutConsent } from '../../src/core/oauth/issue-tokens.js';
import { revokeGrant } from '../../src/core/oauth/grants-admin.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { claimsOf, openCore, refresh, RESOURCE, walkToTokens } from './helpers.js';

const bearer = (token: string) => `Bearer ${token}`;

describe('resource guard', () => {
  it('spec 5.3, 8: an access token lives 15 minutes on the clock: accepted up to the last second, refused as expired at 900 s', async () => {
    const { core, clock } = await openCore();
    const { tokens } = await walkToTokens(core);
    const claims = claimsOf(tokens.access_token);
    expect((claims.exp as number) - (claims.iat as number)).toBe(900);
    clock.advance(15 * MINUTE - SECOND);
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).resolves.toMatchObject({ scopes: ['ask'] });
    clock.advance(SECOND);
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
      message: 'the access token has expired',
    });
  });

  it('spec 5.3: a refresh after expiry gives a new access token with a fresh 15 minutes', async () => {
    const { core, clock } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    clock.advance(20 * MINUTE);
    const next = await refresh(core, client.client_id, tokens.refresh_token);
    await expect(authenticate(core, bearer(next.access_token), 'ask')).resolves.toMatchObject({ client_id: client.client_id });
  });

  it('spec 2.3, 5.8: a token whose audience is not {base_url}/mcp is an identity token and is refused (401 invalid_token)', async () => {
    const { core } = await openCore();
    const { tokens } = await walkToTokens(core, { resource: undefined });
    expect(claimsOf(tokens.access_token).aud).not.toBe(RESOURCE);
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
      message: expect.stringMatching(/identity token refused/),
    });
  });

  it('RFC 9068 §4: a token signed for another issuer is refused', async () => {
    const { core } = await openCore();
    const { tokens } = await walkToTokens(core);
    core.setUrls({ baseUrl: 'http://127.0.0.1:5999', authUrl: 'http://127.0.0.1:5998' });
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
  });

  it('spec 5.5, RFC 6750 §3: no token is 401 without an error code, naming the route scope in the challenge', async () => {
    const { core } = await openCore();
    await expect(authenticate(core, undefined, 'research')).rejects.toMatchObject({ status: 401, error: undefined, scope: 'research' });
    await expect(authenticate(core, 'Basic abc', 'ask')).rejects.toMatchObject({ status: 401, error: undefined });
    await expect(authenticate(core, 'Bearer', 'ask')).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
    await expect(authenticate(core, 'Bearer not.a.jwt', 'ask')).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
  });

  it('spec 4.4, RFC 6750 §3.1: a token without the route scope is 403 insufficient_scope naming it', async () => {
    const { core } = await openCore();
    const { tokens } = await walkToTokens(core, { scope: 'ask' });
    await expect(authenticate(core, bearer(tokens.access_token), 'research')).rejects.toMatchObject({
      status: 403,
      error: 'insufficient_scope',
      scope: 'research',
    });
  });

  it('RFC 6750 §2.1: the scheme is case-insensitive', async () => {
    const { core } = await openCore();
    const { tokens } = await walkToTokens(core);
    await expect(authenticate(core, `bearer ${tokens.access_token}`, 'ask')).resolves.toMatchObject({ scopes: ['ask'] });
  });

  it('spec 3.3, 5.7: revocation by the person applies from the next request, long before the token expires', async () => {
    const { core } = await openCore();
    const { tokens, grantId } = await walkToTokens(core);
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).resolves.toBeDefined();
    await revokeGrant(core, grantId, 'person');
    await expect(authenticate(core, bearer(tokens.access_token), 'ask')).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
      message: 'access was revoked by the person',
    });
  });

  it('spec 3.3: the guard records when a grant was last used, on the clock', async () => {
    const { core, clock } = await openCore();
    const { tokens, grantId } = await walkToTokens(core);
    clock.advance(MINUTE);
    await authenticate(core, bearer(tokens.access_token), 'ask');
    expect(core.state.grants[grantId]!.last_used_at).toBe(clock.now());
  });

  it('the test shortcut issues real tokens: the guard treats them as any other', async () => {
    const { core } = await openCore();
    const issued = await issueTokensWithoutConsent(core, { scopes: ['ask'] });
    await expect(authenticate(core, bearer(issued.access_token), 'ask')).resolves.toMatchObject({ client_id: issued.client_id });
    const identity = await issueTokensWithoutConsent(core, { scopes: ['ask'], identity: true });
    await expect(authenticate(core, bearer(identity.access_token), 'ask')).rejects.toMatchObject({ status: 401 });
  });
});
