import * as oauth from 'oauth4webapi';
import { ClientError } from '../protocol/errors.js';
import { isLoopbackHost } from '../protocol/loopback.js';
import type { HttpClient } from './http.js';

/** What discovery found: the authorization server (RFC 8414) and the protected resource (RFC 9728). */
export interface Discovered {
  as: oauth.AuthorizationServer;
  /** The resource identifier to ask tokens for: `{base_url}/mcp` as the resource metadata names it. */
  resource: string;
}

export const CLIENT_NAME = 'agent-access CLI';

/** Plain http is allowed for loopback servers only (the local emulator); everything else must be https. */
function requestOptions(http: HttpClient, url: string) {
  const { protocol, hostname } = new URL(url);
  if (protocol === 'http:' && !isLoopbackHost(hostname))
    throw new ClientError('usage', `refusing plain http to ${new URL(url).origin}: only loopback servers may use http`);
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
  const cause = err.cause instanceof Response ? ` (HTTP ${err.cause.status} from ${err.cause.url})` : '';
  const network = (err.cause as { code?: string } | undefined)?.code;
  if (err instanceof TypeError && network)
    return new ClientError('unreachable', `${step}: cannot reach the server (${network})`, 'client.unreachable');
  // fetch never connects to the Fetch standard's "bad ports" (1, 9, 25, 6000, …), and says only "fetch failed".
  if (err instanceof TypeError && (err.cause as Error | undefined)?.message === 'bad port')
    return new ClientError(
      'unreachable',
      `${step}: cannot reach the server: its port is one fetch never connects to (a "bad port" of the Fetch standard, such as 1, 9, 25 or 6000); serve it on another port`,
      'client.unreachable',
    );
  return new ClientError('failed', `${step}: ${err.message ?? String(e)}${cause}`, 'oauth.failed');
}

/**
 * RFC 9728 then RFC 8414: the resource metadata of `{base_url}/mcp` names the authorization server, whose
 * metadata must carry exactly that issuer and support PKCE with S256.
 */
export async function discover(http: HttpClient, baseUrl: string): Promise<Discovered> {
  const resourceId = new URL(`${baseUrl}/mcp`);
  let rs: oauth.ResourceServer;
  try {
    rs = await oauth.processResourceDiscoveryResponse(
      resourceId,
      await oauth.resourceDiscoveryRequest(resourceId, requestOptions(http, baseUrl)),
    );
  } catch (e) {
    throw oauthFailure(`discovery of ${baseUrl}/.well-known/oauth-protected-resource/mcp`, e);
  }
  const issuerText = rs.authorization_servers?.[0];
  if (!issuerText) throw new ClientError('server', `the resource metadata of ${resourceId.href} names no authorization server`);
  const issuer = new URL(issuerText);
  let as: oauth.AuthorizationServer;
  try {
    as = await oauth.processDiscoveryResponse(
      issuer,
      await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...requestOptions(http, issuerText) }),
    );
  } catch (e) {
    throw oauthFailure(`discovery of the authorization server ${issuerText}`, e);
  }
  if (!as.code_challenge_methods_supported?.includes('S256'))
    throw new ClientError('server', `${issuerText} does not announce PKCE with S256 (code_challenge_methods_supported)`);
  if (!as.authorization_endpoint || !as.token_endpoint)
    throw new ClientError('server', `${issuerText} announces no authorization or token endpoint`);
  return { as, resource: rs.resource };
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
      },
      requestOptions(http, as.registration_endpoint),
    );
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
