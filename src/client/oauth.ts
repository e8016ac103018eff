import * as oauth from 'oauth4webapi';
import { ClientError } from '../protocol/errors.js';
import { isLoopbackHost } from '../protocol/loopback.js';
import { bearerChallenge, type HttpClient } from './http.js';

/** What discovery found: the authorization server (RFC 8414) and the protected resource (RFC 9728). */
export interface Discovered {
  as: oauth.AuthorizationServer;
  /** The resource identifier to ask tokens for: `{base_url}/mcp` as the resource metadata names it. */
  resource: string;
}

export const CLIENT_NAME = 'agent-access CLI';

/** Plain http is allowed for loopback servers only (the local emulator); everything else must be https. */
function checkScheme(url: string): URL {
  const parsed = new URL(url);
  if (parsed.protocol === 'http:' && !isLoopbackHost(parsed.hostname))
    throw new ClientError('usage', `refusing plain http to ${parsed.origin}: only loopback servers may use http`);
  return parsed;
}

/** oauth4webapi's options for a request to `url`: this client's fetch, and plain http where checkScheme allows it. */
function requestOptions(http: HttpClient, url: string) {
  const { protocol } = checkScheme(url);
  return {
    [oauth.customFetch]: http.fetch as unknown as typeof fetch,
    ...(protocol === 'http:' ? { [oauth.allowInsecureRequests]: true } : {}),
  };
}

/** oauth4webapi's errors as one line each, of the kind that fits. */
export function oauthFailure(step: string, e: unknown): ClientError {
  if (e instanceof ClientError) return e;
  if (e instanceof oauth.ResponseBodyError) {
    const kind = e.status >= 500 ? 'server' : e.error === 'invalid_grant' ? 'auth_required' : 'failed';
    return new ClientError(
      kind,
      `${step}: ${e.error}${e.error_description ? `: ${e.error_description}` : ''} (HTTP ${e.status})`,
      `oauth.${e.error}`,
    );
  }
  if (e instanceof oauth.AuthorizationResponseError) {
    return new ClientError(
      e.error === 'access_denied' ? 'denied' : 'failed',
      `${step}: ${e.error}${e.error_description ? `: ${e.error_description}` : ''}`,
      `oauth.${e.error}`,
    );
  }
  const err = e as Error & { code?: string; cause?: unknown };
  // Duck-typed: the Response comes from undici's fetch, whose class is not the global one on every Node.
  const response = err.cause as { status?: unknown; url?: unknown } | undefined;
  const answered = typeof response?.status === 'number' && typeof response.url === 'string';
  if (answered && /unexpected HTTP status code/.test(err.message))
    return new ClientError(
      (response.status as number) >= 500 ? 'server' : 'failed',
      `${step}: the server answered HTTP ${response.status as number} (${response.url as string})`,
      'oauth.failed',
    );
  const cause = answered ? ` (HTTP ${response.status as number} from ${response.url as string})` : '';
  const network = (err.cause as { code?: string } | undefined)?.code;
  if (err instanceof TypeError && network)
    return new ClientError('unreachable', `${step}: cannot reach the server (${network})`, 'client.unreachable');
  // fetch never connects to the Fetch standard's "bad ports" (1, 9, 25, 6000, …), and says only "fetch failed".
  if (err instanceof TypeError && (err.cause as Error | undefined)?.message === 'bad port')
    return new ClientError(
      'unreachable',
      `${step}: cannot reach the server: its port is one fetch never connects to (a "bad port" of the Fetch standard, such as 1, 9, 25 ` +
        `or 6000); serve it on another port`,
      'client.unreachable',
    );
  return new ClientError('failed', `${step}: ${err.message ?? String(e)}${cause}`, 'oauth.failed');
}

/**
 * RFC 9728 then RFC 8414, as the MCP authorization spec has clients do it: the resource metadata of `{base_url}/mcp`
 * names the authorization server, whose metadata must carry exactly that issuer and support PKCE with S256.
 */
export async function discover(http: HttpClient, baseUrl: string): Promise<Discovered> {
  const resourceId = new URL(`${baseUrl}/mcp`);
  const rs = await firstMetadata(
    http,
    await resourceMetadataUrls(http, resourceId),
    `the resource metadata of ${resourceId.href}`,
    (r, url) => resourceMetadata(resourceId, url, r),
  );
  const issuerText = rs.authorization_servers?.[0];
  if (!issuerText) throw new ClientError('server', `the resource metadata of ${resourceId.href} names no authorization server`);
  const issuer = new URL(issuerText);
  const as = await firstMetadata(http, authorizationServerMetadataUrls(issuer), `the authorization server ${issuerText}`, (r) =>
    oauth.processDiscoveryResponse(issuer, r),
  );
  if (!as.code_challenge_methods_supported?.includes('S256'))
    throw new ClientError('server', `${issuerText} does not announce PKCE with S256 (code_challenge_methods_supported)`);
  if (!as.authorization_endpoint || !as.token_endpoint)
    throw new ClientError('server', `${issuerText} announces no authorization or token endpoint`);
  return { as, resource: rs.resource };
}

/**
 * Where the resource metadata may be, in the order RFC 9728 and the MCP authorization spec give: the
 * `resource_metadata` of the `401` a request without a token gets (§5.1), then the path-based well-known URI (§3.1),
 * then the root one.
 */
async function resourceMetadataUrls(http: HttpClient, resourceId: URL): Promise<string[]> {
  const wellKnown = `${resourceId.origin}/.well-known/oauth-protected-resource`;
  const urls = [`${wellKnown}${resourceId.pathname}`, wellKnown];
  let challenge: Response;
  try {
    checkScheme(resourceId.href);
    // A POST, as an MCP client's first request is: some servers answer other methods 404 or 405 before any token check.
    challenge = await http.fetch(resourceId.href, {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'ping' }),
    });
    await challenge.body?.cancel();
  } catch (e) {
    throw oauthFailure(`discovery at ${resourceId.href}`, e);
  }
  const named = challenge.status === 401 ? bearerChallenge(challenge.headers.get('www-authenticate') ?? '').resource_metadata : undefined;
  return named ? [named, ...urls.filter((u) => u !== named)] : urls;
}

/**
 * RFC 9728 §3.3: the metadata names the resource whose identifier the URL was made from: `{base_url}/mcp` for the
 * path-based URL and the 401's; the root URL describes the origin, though MCP servers (this emulator among them) also
 * name `{base_url}/mcp` there. Either is compared exactly; the resource is then asked for as named.
 */
async function resourceMetadata(resourceId: URL, url: string, response: Response): Promise<oauth.ResourceServer> {
  if (url !== `${resourceId.origin}/.well-known/oauth-protected-resource`)
    return oauth.processResourceDiscoveryResponse(resourceId, response);
  const copy = response.clone();
  try {
    return await oauth.processResourceDiscoveryResponse(resourceId, response);
  } catch {
    return oauth.processResourceDiscoveryResponse(new URL(resourceId.origin), copy);
  }
}

/**
 * Where an authorization server's metadata may be (MCP authorization spec, "Authorization Server Metadata
 * Discovery"): RFC 8414 with the issuer's path after the well-known part, then OpenID Connect Discovery with the path
 * after the well-known part and, as OpenID Connect Discovery §4 has it, before.
 */
function authorizationServerMetadataUrls(issuer: URL): string[] {
  const path = issuer.pathname.replace(/\/$/, '');
  const { origin } = issuer;
  if (!path) return [`${origin}/.well-known/oauth-authorization-server`, `${origin}/.well-known/openid-configuration`];
  // Never the root form for an issuer with a path: the root document is another issuer's.
  return [
    `${origin}/.well-known/oauth-authorization-server${path}`,
    `${origin}/.well-known/openid-configuration${path}`,
    `${origin}${path}/.well-known/openid-configuration`,
  ];
}

/**
 * The first of `urls` that answers with metadata `process` accepts (it checks `resource` or `issuer` exactly). A URL
 * that is not found, or whose metadata names another resource or issuer, gives way to the next; when none answers,
 * the error says what each did.
 */
async function firstMetadata<T>(
  http: HttpClient,
  urls: string[],
  what: string,
  process: (response: Response, url: string) => Promise<T>,
): Promise<T> {
  const tried: string[] = [];
  for (const url of urls) {
    let response: Response;
    try {
      checkScheme(url);
      response = await http.fetch(url, { method: 'GET', headers: { accept: 'application/json' } });
    } catch (e) {
      throw oauthFailure(`discovery of ${what} at ${url}`, e);
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      tried.push(`${url}: HTTP ${response.status}`);
      continue;
    }
    try {
      return await process(response, url);
    } catch (e) {
      tried.push(`${url}: ${oauthFailure('', e).message.replace(/^: /, '')}`);
    }
  }
  throw new ClientError('server', `discovery of ${what} failed: ${tried.join('; ')}`);
}

export const publicClient = (clientId: string): oauth.Client => ({ client_id: clientId, token_endpoint_auth_method: 'none' });

/** RFC 7591 registration of a public client with the fields of spec 2.1. */
export async function registerClient(http: HttpClient, as: oauth.AuthorizationServer, redirectUri: string): Promise<string> {
  if (!as.registration_endpoint) throw new ClientError('server', `${as.issuer} offers no registration endpoint`);
  try {
    const response = await oauth.dynamicClientRegistrationRequest(
      as,
      {
        client_name: CLIENT_NAME,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        // A loopback redirect URI makes it a native client (RFC 8252; OpenID Registration §2; MCP SEP-837).
        application_type: 'native',
      },
      requestOptions(http, as.registration_endpoint),
    );
    // A public client uses nothing of the answer but client_id. Some servers issue a client_secret anyway, without the
    // client_secret_expires_at RFC 7591 §3.2.1 then requires; the secret goes unused, so that does not fail the login.
    if (response.status === 201 || response.status === 200) {
      const body = (await response
        .clone()
        .json()
        .catch(() => null)) as { client_id?: unknown; client_secret?: unknown } | null;
      if (body && typeof body.client_id === 'string' && body.client_id !== '' && body.client_secret !== undefined) return body.client_id;
    }
    return (await oauth.processDynamicClientRegistrationResponse(response)).client_id;
  } catch (e) {
    throw oauthFailure('client registration', e);
  }
}

export interface AuthorizationRequest {
  url: string;
  state: string;
  verifier: string;
}

/** Spec 4.2: PKCE S256 and a single-use state; `resource` unless an identity token is wanted. */
export async function authorizationRequest(
  as: oauth.AuthorizationServer,
  p: { clientId: string; redirectUri: string; scope: string; resource: string | null },
): Promise<AuthorizationRequest> {
  const verifier = oauth.generateRandomCodeVerifier();
  const state = oauth.generateRandomState();
  const url = new URL(as.authorization_endpoint!);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', p.clientId);
  url.searchParams.set('redirect_uri', p.redirectUri);
  url.searchParams.set('scope', p.scope);
  url.searchParams.set('state', state);
  url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
  url.searchParams.set('code_challenge_method', 'S256');
  if (p.resource) url.searchParams.set('resource', p.resource);
  return { url: url.toString(), state, verifier };
}

/** Checks `state` and `iss` of the redirect (RFC 9207) and returns its parameters, or throws the error it carries. */
export function validateRedirect(as: oauth.AuthorizationServer, clientId: string, redirect: URL, state: string): URLSearchParams {
  return oauth.validateAuthResponse(as, publicClient(clientId), redirect, state);
}

const extra = (resource: string | null) => (resource ? { additionalParameters: { resource } } : {});

export async function exchangeCode(
  http: HttpClient,
  as: oauth.AuthorizationServer,
  p: { clientId: string; redirectUri: string; params: URLSearchParams; verifier: string; resource: string | null },
): Promise<oauth.TokenEndpointResponse> {
  try {
    const client = publicClient(p.clientId);
    const response = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), p.params, p.redirectUri, p.verifier, {
      ...extra(p.resource),
      ...requestOptions(http, as.token_endpoint!),
    });
    return await oauth.processAuthorizationCodeResponse(as, client, response);
  } catch (e) {
    throw oauthFailure('code exchange', e);
  }
}

export async function refreshTokens(
  http: HttpClient,
  as: oauth.AuthorizationServer,
  p: { clientId: string; refreshToken: string; resource: string | null },
): Promise<oauth.TokenEndpointResponse> {
  const client = publicClient(p.clientId);
  const response = await oauth.refreshTokenGrantRequest(as, client, oauth.None(), p.refreshToken, {
    ...extra(p.resource),
    ...requestOptions(http, as.token_endpoint!),
  });
  return oauth.processRefreshTokenResponse(as, client, response);
}

/** RFC 7009. Returns false when the server offers no revocation endpoint. */
export async function revokeToken(
  http: HttpClient,
  as: oauth.AuthorizationServer,
  p: { clientId: string; token: string; hint: 'refresh_token' | 'access_token' },
): Promise<boolean> {
  if (!as.revocation_endpoint) return false;
  try {
    const response = await oauth.revocationRequest(as, publicClient(p.clientId), oauth.None(), p.token, {
      additionalParameters: { token_type_hint: p.hint },
      ...requestOptions(http, as.revocation_endpoint),
    });
    await oauth.processRevocationResponse(response);
    return true;
  } catch (e) {
    throw oauthFailure('revocation', e);
  }
}
