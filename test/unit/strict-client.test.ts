/**
 * A strict client against the emulator: oauth4webapi v3 runs the whole flow (discovery, registration,
 * authorization code with PKCE, JWT access token validation, refresh rotation, revocation) and refuses
 * anything that does not follow the RFCs to the letter. Each describe names the RFC whose rule it proves.
 */
import * as oauth from 'oauth4webapi';
import { describe, expect, it } from 'vitest';
import type { Emulator } from '../../src/server/emulator.js';
import { authenticate } from '../../src/core/oauth/resource-guard.js';
import { startInProcess } from '../helpers/emulator.js';
import { fetchInProcess } from '../helpers/in-process.js';
import { Browser, REDIRECT } from '../helpers/oauth.js';

/**
 * Every oauth4webapi call that touches the network gets this: we are on http loopback, and the emulator is in this
 * process (its requests go through `inject`).
 */
const insecure = { [oauth.allowInsecureRequests]: true, [oauth.customFetch]: fetchInProcess } as const;

interface Setup {
  emulator: Emulator;
  as: oauth.AuthorizationServer;
  client: oauth.Client;
  resource: string;
}

/** RFC 8414 discovery and RFC 7591 registration, both through oauth4webapi. */
async function setup(clientName = 'Strict Client'): Promise<Setup> {
  const emulator = await startInProcess();
  const issuer = new URL(emulator.issuer);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }));
  const registered = await oauth.processDynamicClientRegistrationResponse(
    await oauth.dynamicClientRegistrationRequest(
      as,
      {
        client_name: clientName,
        redirect_uris: [REDIRECT],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      },
      insecure,
    ),
  );
  return { emulator, as, client: registered, resource: `${emulator.baseUrl}/mcp` };
}

interface FrontChannel {
  /** The Location the consent answer redirected to, untouched. */
  callback: URL;
  state: string;
  verifier: string;
}

/** Builds the authorization URL as oauth4webapi users do, and answers the consent page like a browser. */
async function authorize(
  s: Setup,
  decision: 'approve' | 'deny' = 'approve',
  options: { scope?: string; resource?: string | null } = {},
): Promise<FrontChannel> {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(s.as.authorization_endpoint!);
  url.searchParams.set('client_id', s.client.client_id);
  url.searchParams.set('redirect_uri', REDIRECT);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('scope', options.scope ?? 'ask research');
  url.searchParams.set('state', state);
  url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
  url.searchParams.set('code_challenge_method', 'S256');
  const resource = options.resource === undefined ? s.resource : options.resource;
  if (resource !== null) url.searchParams.set('resource', resource);

  const browser = new Browser();
  const page = await browser.get(url.toString());
  expect(page.status, page.text).toBe(200);
  const { action, fields } = Browser.form(page.text);
  const answer = await browser.post(new URL(action, url).toString(), { ...fields, decision });
  expect(answer.status, answer.text).toBe(302);
  return { callback: new URL(answer.headers.location as string), state, verifier };
}

/** Code → tokens through oauth4webapi; `resource` is sent on the token request as MCP clients do (RFC 8707 §2.2). */
async function exchange(s: Setup, front: FrontChannel, resource: string | null = s.resource): Promise<oauth.TokenEndpointResponse> {
  const params = oauth.validateAuthResponse(s.as, s.client, front.callback, front.state);
  const response = await oauth.authorizationCodeGrantRequest(s.as, s.client, oauth.None(), params, REDIRECT, front.verifier, {
    ...insecure,
    ...(resource !== null ? { additionalParameters: { resource } } : {}),
  });
  return oauth.processAuthorizationCodeResponse(s.as, s.client, response);
}

/** What a resource server in front of `{base_url}/mcp` would do with the bearer token. */
const validateAtMcp = (s: Setup, accessToken: string, audience = s.resource) =>
  oauth.validateJwtAccessToken(s.as, new Request(s.resource, { headers: { authorization: `Bearer ${accessToken}` } }), audience, insecure);

/** Runs `fn` and returns what it threw (failing the test when it did not throw). */
async function thrown(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an error, but the call succeeded');
}

describe('RFC 8414: authorization server metadata', () => {
  it('discovery: oauth4webapi accepts the metadata and its issuer is byte-identical to the issuer in use', async () => {
    const { emulator, as } = await setup();
    expect(as.issuer).toBe(emulator.issuer);
    expect(as.authorization_endpoint).toBe(`${emulator.authUrl}/oauth/authorize`);
    expect(as.token_endpoint).toBe(`${emulator.baseUrl}/oauth/token`);
    expect(as.code_challenge_methods_supported).toEqual(['S256']);
    expect(as.token_endpoint_auth_methods_supported).toEqual(['none']);
    expect(as.authorization_response_iss_parameter_supported).toBe(true);
    expect(as.jwks_uri).toBeTypeOf('string');
    expect(as.registration_endpoint).toBeTypeOf('string');
    expect(as.revocation_endpoint).toBeTypeOf('string');
  });
});

describe('RFC 9728: protected resource metadata', () => {
  it('discovery: the /mcp resource names the issuer as its authorization server', async () => {
    const { emulator, resource } = await setup();
    const resourceId = new URL(resource);
    const rs = await oauth.processResourceDiscoveryResponse(resourceId, await oauth.resourceDiscoveryRequest(resourceId, insecure));
    expect(rs.resource).toBe(resource);
    expect(rs.authorization_servers).toEqual([emulator.issuer]);
    expect(rs.bearer_methods_supported).toEqual(['header']);
    expect(rs.scopes_supported).toContain('ask');
  });
});

describe('RFC 7591: dynamic client registration', () => {
  it('registration: 201 accepted by oauth4webapi, a public client without secret that echoes its metadata', async () => {
    const { client } = await setup('Strikter Client');
    expect(client.client_id).toBeTypeOf('string');
    expect(client.client_secret).toBeUndefined();
    expect(client.token_endpoint_auth_method).toBe('none');
    expect(client.redirect_uris).toEqual([REDIRECT]);
    expect(client.client_name).toBe('Strikter Client');
  });
});

describe('RFC 9207: authorization server issuer identification', () => {
  it('RFC 9207: every authorization response carries iss = issuer (approval and denial)', async () => {
    const s = await setup();
    const approved = await authorize(s, 'approve');
    const denied = await authorize(s, 'deny');
    for (const front of [approved, denied]) {
      expect(front.callback.searchParams.getAll('iss')).toEqual([s.emulator.issuer]);
      expect(front.callback.searchParams.get('state')).toBe(front.state);
    }
    expect(oauth.validateAuthResponse(s.as, s.client, approved.callback, approved.state).get('code')).toBeTruthy();
  });

  it('RFC 9207: a response whose iss differs from the issuer is refused by the client', async () => {
    const s = await setup();
    const front = await authorize(s);
    const tampered = new URL(front.callback);
    // localhost is not 127.0.0.1 to a strict client: the mix-up defence compares strings.
    tampered.searchParams.set('iss', s.emulator.issuer.replace('127.0.0.1', 'localhost'));
    const error = await thrown(() => oauth.validateAuthResponse(s.as, s.client, tampered, front.state));
    expect(error).toBeInstanceOf(oauth.OperationProcessingError);
    expect(error).toMatchObject({ code: oauth.INVALID_RESPONSE, message: expect.stringContaining('"iss"') });
  });

  it('RFC 9207: a response without iss is refused, because the metadata promises it', async () => {
    const s = await setup();
    const front = await authorize(s);
    const stripped = new URL(front.callback);
    stripped.searchParams.delete('iss');
    const error = await thrown(() => oauth.validateAuthResponse(s.as, s.client, stripped, front.state));
    expect(error).toMatchObject({ code: oauth.INVALID_RESPONSE, message: expect.stringContaining('"iss"') });
  });
});

describe('RFC 6749 §4.1.2: authorization response', () => {
  it('RFC 6749 §4.1.2.1: a denied consent is an access_denied error response with the exact state', async () => {
    const s = await setup();
    const front = await authorize(s, 'deny');
    expect(front.callback.searchParams.get('code')).toBeNull();
    const error = await thrown(() => oauth.validateAuthResponse(s.as, s.client, front.callback, front.state));
    expect(error).toBeInstanceOf(oauth.AuthorizationResponseError);
    const e = error as oauth.AuthorizationResponseError;
    expect(e.error).toBe('access_denied');
    expect(e.cause.get('state')).toBe(front.state);
    expect(e.cause.get('iss')).toBe(s.emulator.issuer);
  });

  it('RFC 6749 §10.12: a response with a state other than the one sent is refused by the client', async () => {
    const s = await setup();
    const front = await authorize(s);
    const error = await thrown(() => oauth.validateAuthResponse(s.as, s.client, front.callback, oauth.generateRandomState()));
    expect(error).toMatchObject({ code: oauth.INVALID_RESPONSE, message: expect.stringContaining('"state"') });
  });
});

describe('RFC 7636: authorization code grant with PKCE S256', () => {
  it('RFC 7636: the code with its verifier gives a Bearer token response that oauth4webapi accepts', async () => {
    const s = await setup();
    const tokens = await exchange(s, await authorize(s));
    expect(tokens.token_type).toBe('bearer'); // oauth4webapi lower-cases it after checking
    expect(tokens.expires_in).toBe(900);
    expect(tokens.scope).toBe('ask research');
    expect(tokens.access_token).toBeTypeOf('string');
    expect(tokens.refresh_token).toBeTypeOf('string');
  });

  it('RFC 7636 §4.6: a wrong code_verifier is answered invalid_grant', async () => {
    const s = await setup();
    const front = await authorize(s);
    const error = await thrown(() => exchange(s, { ...front, verifier: oauth.generateRandomCodeVerifier() }));
    expect(error).toBeInstanceOf(oauth.ResponseBodyError);
    expect(error).toMatchObject({ status: 400, error: 'invalid_grant' });
  });
});

describe('RFC 9068: JWT profile for access tokens', () => {
  it('RFC 9068: access token validates as at+jwt against jwks_uri', async () => {
    const s = await setup();
    const tokens = await exchange(s, await authorize(s));
    const [header] = tokens.access_token.split('.');
    expect(JSON.parse(Buffer.from(header!, 'base64url').toString())).toMatchObject({ typ: 'at+jwt', alg: 'ES256' });
    const claims = await validateAtMcp(s, tokens.access_token);
    expect(claims.iss).toBe(s.emulator.issuer);
    expect(claims.aud).toBe(s.resource);
    expect(claims.client_id).toBe(s.client.client_id);
    expect(claims.sub).toBeTypeOf('string');
    expect(claims.jti).toBeTypeOf('string');
    expect(claims.exp - claims.iat).toBe(900);
    expect(claims.scope).toBe('ask research');
  });

  it('RFC 9068 §4: the audience is checked: the token does not validate for another resource', async () => {
    const s = await setup();
    const tokens = await exchange(s, await authorize(s));
    const error = await thrown(() => validateAtMcp(s, tokens.access_token, `${s.emulator.baseUrl}/other`));
    expect(error).toMatchObject({ code: oauth.JWT_CLAIM_COMPARISON, message: expect.stringContaining('"aud"') });
  });

  it('RFC 8707 / spec 5.8: a token requested without resource is an identity token and does not validate for /mcp', async () => {
    const s = await setup();
    const tokens = await exchange(s, await authorize(s, 'approve', { resource: null }), null);
    const error = await thrown(() => validateAtMcp(s, tokens.access_token));
    expect(error).toMatchObject({ code: oauth.JWT_CLAIM_COMPARISON, message: expect.stringContaining('"aud"') });
  });
});

describe('OAuth 2.1 §4.3: refresh token grant', () => {
  it('OAuth 2.1 §4.3.1: every refresh rotates: a new refresh token differs, and the new access token validates', async () => {
    const s = await setup();
    const first = await exchange(s, await authorize(s));
    const second = await oauth.processRefreshTokenResponse(
      s.as,
      s.client,
      await oauth.refreshTokenGrantRequest(s.as, s.client, oauth.None(), first.refresh_token!, {
        ...insecure,
        additionalParameters: { resource: s.resource },
      }),
    );
    expect(second.refresh_token).toBeTypeOf('string');
    expect(second.refresh_token).not.toBe(first.refresh_token);
    expect(second.access_token).not.toBe(first.access_token);
    expect(second.expires_in).toBe(900);
    const claims = await validateAtMcp(s, second.access_token);
    expect(claims.client_id).toBe(s.client.client_id);
  });

  it('OAuth 2.1 §4.3.1: the rotated-out refresh token is refused with invalid_grant', async () => {
    const s = await setup();
    const first = await exchange(s, await authorize(s));
    const refreshWith = async (token: string) =>
      oauth.processRefreshTokenResponse(
        s.as,
        s.client,
        await oauth.refreshTokenGrantRequest(s.as, s.client, oauth.None(), token, insecure),
      );
    await refreshWith(first.refresh_token!);
    const error = await thrown(() => refreshWith(first.refresh_token!));
    expect(error).toBeInstanceOf(oauth.ResponseBodyError);
    expect(error).toMatchObject({ status: 400, error: 'invalid_grant' });
  });
});

describe('RFC 7009: token revocation', () => {
  it('RFC 7009 §2.2: revoking the refresh token answers 200, and the refresh token is refused afterwards', async () => {
    const s = await setup();
    const tokens = await exchange(s, await authorize(s));
    await expect(
      oauth.processRevocationResponse(
        await oauth.revocationRequest(s.as, s.client, oauth.None(), tokens.refresh_token!, {
          ...insecure,
          additionalParameters: { token_type_hint: 'refresh_token' },
        }),
      ),
    ).resolves.toBeUndefined();
    const error = await thrown(async () =>
      oauth.processRefreshTokenResponse(
        s.as,
        s.client,
        await oauth.refreshTokenGrantRequest(s.as, s.client, oauth.None(), tokens.refresh_token!, insecure),
      ),
    );
    expect(error).toMatchObject({ status: 400, error: 'invalid_grant' });
    await expect(authenticate(s.emulator.core, `Bearer ${tokens.access_token}`, 'ask')).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
    });
  });

  it('RFC 7009 §2.1: a revoked access token is refused from the next request on', async () => {
    const s = await setup();
    const tokens = await exchange(s, await authorize(s));
    await expect(authenticate(s.emulator.core, `Bearer ${tokens.access_token}`, 'ask')).resolves.toMatchObject({
      client_id: s.client.client_id,
    });
    await oauth.processRevocationResponse(
      await oauth.revocationRequest(s.as, s.client, oauth.None(), tokens.access_token, {
        ...insecure,
        additionalParameters: { token_type_hint: 'access_token' },
      }),
    );
    await expect(authenticate(s.emulator.core, `Bearer ${tokens.access_token}`, 'ask')).rejects.toMatchObject({
      status: 401,
      error: 'invalid_token',
    });
  });

  it('RFC 7009 §2.2: revoking an unknown token also answers 200', async () => {
    const s = await setup();
    await expect(
      oauth.processRevocationResponse(await oauth.revocationRequest(s.as, s.client, oauth.None(), 'not-a-token', insecure)),
    ).resolves.toBeUndefined();
  });
});
