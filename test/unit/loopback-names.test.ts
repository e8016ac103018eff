/**
 * Loopback names (STANDARDS "Loopback names"): a local client reaches `{base_url}` as 127.0.0.1, localhost or [::1]
 * and compares the protected resource metadata's `resource` with the URL it was given (RFC 9728 §3.3). The resource
 * is named as the client reached it, and its tokens are bound to that name (RFC 8707); the issuer keeps its one name
 * (RFC 8414 §3.3). In this process on a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { MINUTE } from '../../src/core/state/clock.js';
import { checkAuthorizationRequest } from '../../src/core/oauth/consent.js';
import { protectedResourceMetadata, resourceMetadataUrl } from '../../src/core/oauth/metadata.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { grantedResourceName, isResourceName, nameReached, resourceNames } from '../../src/core/oauth/resource-names.js';
import { pkce } from '../helpers/oauth.js';
import {
  AUTH_URL,
  BASE_URL,
  RESOURCE,
  authorize,
  authorizeQuery,
  claimsOf,
  exchangeCode,
  oauthError,
  openCore,
  refresh,
  register,
  walkToTokens,
} from './helpers.js';

const URLS = { baseUrl: BASE_URL, authUrl: AUTH_URL };
const LOCALHOST = 'http://localhost:4100/mcp';
const IPV6 = 'http://[::1]:4100/mcp';
const bearer = (token: string) => `Bearer ${token}`;

describe('the names of {base_url}/mcp', () => {
  it('STANDARDS "Loopback names": {base_url}/mcp on 127.0.0.1 is also served as localhost and [::1], same scheme, port and path', () => {
    expect([...resourceNames(RESOURCE)]).toEqual([
      ['127.0.0.1:4100', { origin: BASE_URL, resource: RESOURCE }],
      ['localhost:4100', { origin: 'http://localhost:4100', resource: LOCALHOST }],
      ['[::1]:4100', { origin: 'http://[::1]:4100', resource: IPV6 }],
    ]);
  });

  it.each([
    ['another port', 'http://localhost:4101/mcp'],
    ['another path', 'http://localhost:4100/mcp/'],
    ['another scheme', 'https://localhost:4100/mcp'],
    ['another loopback address', 'http://127.0.0.2:4100/mcp'],
    ['a name spelled otherwise', 'http://LOCALHOST:4100/mcp'],
    ['the IPv4-mapped address', 'http://[::ffff:127.0.0.1]:4100/mcp'],
    ['another host', 'http://example.com:4100/mcp'],
  ])('RFC 8707 §2: %s is no name of the resource (exact strings, as before)', (_what, candidate) => {
    expect(isResourceName(RESOURCE, candidate)).toBe(false);
  });

  it('a {base_url} on a host that is no loopback name has only its own name', () => {
    expect([...resourceNames('http://127.0.0.2:4100/mcp').values()].map((n) => n.resource)).toEqual(['http://127.0.0.2:4100/mcp']);
  });

  it.each([
    ['127.0.0.1:4100', RESOURCE],
    ['localhost:4100', LOCALHOST],
    ['LocalHost:4100', LOCALHOST],
    ['[::1]:4100', IPV6],
    ['localhost:4101', RESOURCE],
    ['127.0.0.2:4100', RESOURCE],
    [undefined, RESOURCE],
  ])('RFC 9728 §3.3: a request with Host %s reached %s', (host, resource) => {
    expect(nameReached(RESOURCE, host).resource).toBe(resource);
  });
});

describe('protected resource metadata (RFC 9728)', () => {
  it.each([
    ['localhost:4100', LOCALHOST, 'http://localhost:4100'],
    ['[::1]:4100', IPV6, 'http://[::1]:4100'],
    ['127.0.0.1:4100', RESOURCE, BASE_URL],
  ])(
    'RFC 9728 §3.3: with Host %s, resource is the resource as the client reached it; authorization_servers stays the one issuer (RFC 8414 §3.3)',
    (host, resource, origin) => {
      expect(protectedResourceMetadata(URLS, host)).toMatchObject({ resource, authorization_servers: [BASE_URL] });
      expect(resourceMetadataUrl(URLS, host)).toBe(`${origin}/.well-known/oauth-protected-resource/mcp`);
    },
  );

  it('without a Host (or with another), the metadata is what it always was', () => {
    expect(protectedResourceMetadata(URLS)).toEqual(protectedResourceMetadata(URLS, 'attacker.example'));
    expect(protectedResourceMetadata(URLS).resource).toBe(RESOURCE);
    expect(resourceMetadataUrl(URLS)).toBe(`${BASE_URL}/.well-known/oauth-protected-resource/mcp`);
  });
});

describe('authorization and tokens under a loopback name (RFC 8707)', () => {
  it.each([LOCALHOST, IPV6])(
    'RFC 8707 §2.1: resource=%s is accepted at /authorize, and the consent request keeps the name asked for',
    async (resource) => {
      const { core } = await openCore();
      const client = await register(core);
      expect(checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge, { resource }))).toMatchObject({
        kind: 'consent',
        request: { resource },
      });
    },
  );

  it('RFC 8707 §2.1: a resource that is no name of {base_url}/mcp is still invalid_target', async () => {
    const { core } = await openCore();
    const client = await register(core);
    for (const resource of ['http://localhost:4101/mcp', 'http://LOCALHOST:4100/mcp', 'http://127.0.0.2:4100/mcp'])
      expect(checkAuthorizationRequest(core, authorizeQuery(client, pkce().challenge, { resource }))).toMatchObject({
        kind: 'redirect',
        error: { error: 'invalid_target' },
      });
  });

  it.each([LOCALHOST, IPV6])(
    'RFC 8707, RFC 9068 §2.2: a grant for %s gives access tokens with that aud; iss stays {base_url}',
    async (resource) => {
      const { core } = await openCore();
      const { tokens } = await walkToTokens(core, { resource });
      expect(claimsOf(tokens.access_token)).toMatchObject({ aud: resource, iss: BASE_URL });
    },
  );

  it('the grant remembers the name without its port: after a restart on another port, refreshed tokens are for that name at the new port', async () => {
    const { core } = await openCore();
    const { client, tokens, grantId } = await walkToTokens(core, { resource: LOCALHOST });
    expect(core.state.grants[grantId]!.resource).toBe('http://localhost:{port}/mcp');
    core.setUrls({ baseUrl: 'http://127.0.0.1:5100', authUrl: 'http://127.0.0.1:5101' });
    const next = await refresh(core, client.client_id, tokens.refresh_token);
    expect(claimsOf(next.access_token)).toMatchObject({ aud: 'http://localhost:5100/mcp', iss: 'http://127.0.0.1:5100' });
  });

  it('default behaviour unchanged: a grant for {base_url}/mcp stores it as before and its tokens carry it as aud', async () => {
    const { core } = await openCore();
    const { tokens, grantId } = await walkToTokens(core);
    expect(core.state.grants[grantId]!.resource).toBe(RESOURCE);
    expect(claimsOf(tokens.access_token).aud).toBe(RESOURCE);
  });

  it.each([
    ['an absolute {base_url}/mcp of an earlier run', 'http://127.0.0.1:3000/mcp'],
    ['the fixtures template', '{base_url}/mcp'],
    ['an older run bound to localhost', 'http://localhost:3000/mcp'],
  ])('state of older versions: a grant storing %s means {base_url}/mcp at the current port', async (_what, stored) => {
    expect(grantedResourceName(RESOURCE, stored)).toBe(RESOURCE);
    const { core } = await openCore();
    const { client, tokens, grantId } = await walkToTokens(core);
    core.repo.update('grants', grantId, { resource: stored });
    const next = await refresh(core, client.client_id, tokens.refresh_token);
    expect(claimsOf(next.access_token).aud).toBe(RESOURCE);
  });

  it("RFC 8707 §2.2: the token endpoint accepts the grant's own name as resource, and refuses another name of it with invalid_target", async () => {
    const { core } = await openCore();
    const client = await register(core);
    const a = await authorize(core, client, { resource: LOCALHOST });
    const error = await exchangeCode(core, a, { resource: RESOURCE }).catch((e: Error) => e);
    expect(error).toMatchObject({
      error: 'invalid_target',
      message: expect.stringContaining(`not the one this grant was given for (${LOCALHOST})`),
    });
    const tokens = await exchangeCode(core, a, { resource: LOCALHOST });
    expect(await oauthError(refresh(core, client.client_id, tokens.refresh_token!, { resource: IPV6 }))).toBe('invalid_target');
    await expect(refresh(core, client.client_id, tokens.refresh_token!, { resource: LOCALHOST })).resolves.toMatchObject({
      token_type: 'Bearer',
    });
  });

  it('RFC 8707 §2.2: a grant for {base_url}/mcp refuses a refresh asking for localhost (invalid_target)', async () => {
    const { core } = await openCore();
    const { client, tokens } = await walkToTokens(core);
    expect(await oauthError(refresh(core, client.client_id, tokens.refresh_token, { resource: LOCALHOST }))).toBe('invalid_target');
  });
});

describe('the resource guard under a loopback name (RFC 8707, RFC 6750 §3.1)', () => {
  it('a token for localhost is accepted where the request reached localhost', async () => {
    const { core } = await openCore();
    const { tokens } = await walkToTokens(core, { resource: LOCALHOST });
    await expect(authenticate(core, bearer(tokens.access_token), 'ask', 'ask', '/mcp', LOCALHOST)).resolves.toMatchObject({
      scopes: ['ask'],
    });
  });

  it('RFC 8707: a token for localhost used via 127.0.0.1 (or [::1]) is 401 invalid_token, saying which name it is for', async () => {
    const { core, eventsNamed } = await openCore();
    const { tokens } = await walkToTokens(core, { resource: LOCALHOST });
    await expect(authenticate(core, bearer(tokens.access_token), 'ask', 'ask', '/mcp', RESOURCE)).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
      message: `the access token is for ${LOCALHOST}, not for ${RESOURCE} as this request reached it; use the name the token was issued for, or authorize again with resource=${RESOURCE}`,
    });
    await expect(authenticate(core, bearer(tokens.access_token), 'ask', 'ask', '/mcp', IPV6)).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
      message: expect.stringMatching(/^the access token is for http:\/\/localhost:4100\/mcp, not for http:\/\/\[::1\]:4100\/mcp/),
    });
    expect(eventsNamed('access.refused').map((e) => e.reason)).toEqual(['token_for_other_name', 'token_for_other_name']);
  });

  it('RFC 8707: a token for {base_url}/mcp is refused where the request reached localhost', async () => {
    const { core } = await openCore();
    const { tokens } = await walkToTokens(core);
    await expect(authenticate(core, bearer(tokens.access_token), 'ask', 'ask', '/mcp', LOCALHOST)).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
      message: expect.stringContaining(`the access token is for ${RESOURCE}, not for ${LOCALHOST}`),
    });
  });

  it('spec 5.8: an identity token reached through localhost is refused, naming the resource to ask for there', async () => {
    const { core } = await openCore();
    const { tokens } = await walkToTokens(core, { resource: undefined });
    await expect(authenticate(core, bearer(tokens.access_token), 'ask', 'ask', '/mcp', LOCALHOST)).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
      message: `identity token refused: issued without resource=${LOCALHOST}`,
    });
  });

  it('spec 5.3: a token for localhost expires after 900 s like any other', async () => {
    const { core, clock } = await openCore();
    const { tokens } = await walkToTokens(core, { resource: LOCALHOST });
    clock.advance(15 * MINUTE);
    await expect(authenticate(core, bearer(tokens.access_token), 'ask', 'ask', '/mcp', LOCALHOST)).rejects.toMatchObject({
      message: 'the access token has expired',
    });
  });
});
