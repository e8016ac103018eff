import { OAuthError, invalidRequest, invalidTarget } from './errors.js';
import { isValidPkceValue } from './pkce.js';
import { redirectUriMatches } from './redirect-uri.js';
import { requireSupportedScopes, type Scope } from './scopes.js';
import type { Client } from './state.js';

/** A validated authorization request (OAuth 2.1 §4.1.1, spec 4.2). */
export interface AuthorizationRequest {
  client: Client;
  /** As sent by the client (a loopback URI may differ from the registered one in its port). */
  redirect_uri: string;
  state: string;
  scopes: Scope[];
  /** `{base_url}/mcp`, or null for an identity request. */
  resource: string | null;
  code_challenge: string;
}

export type AuthorizationOutcome =
  | { kind: 'consent'; request: AuthorizationRequest }
  /** Client or redirect URI in doubt: answer directly, never redirect. */
  | { kind: 'error_page'; error: OAuthError }
  | { kind: 'redirect'; error: OAuthError; location: string };

export type QueryValue = string | string[] | undefined;

/** The authorization request's parameters (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2.1), each taken once. */
export const AUTHORIZE_PARAMETERS = [
  'client_id',
  'redirect_uri',
  'response_type',
  'code_challenge',
  'code_challenge_method',
  'state',
  'scope',
  'resource',
] as const;

/** Appends OAuth response parameters to a redirect URI, keeping its own query (RFC 6749 §4.1.2). */
export function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.append(k, v);
  return url.toString();
}

/**
 * Two phases, as OAuth 2.1 §4.1.2.1 requires: problems with `client_id` or `redirect_uri` are shown
 * directly; every later problem is redirected back with `error`, `state` and `iss` (RFC 9207).
 */
export function validateAuthorizationRequest(
  findClient: (clientId: string) => Client | undefined,
  query: Record<string, QueryValue>,
  issuer: string,
  resource: string,
): AuthorizationOutcome {
  const direct = (error: OAuthError): AuthorizationOutcome => ({
    kind: 'error_page',
    error: new OAuthError(error.error, error.message, { status: 400, redirectable: false }),
  });

  const clientId = query.client_id;
  if (typeof clientId !== 'string' || clientId === '')
    return direct(invalidRequest(Array.isArray(clientId) ? 'client_id is repeated' : 'client_id is missing'));
  const client = findClient(clientId);
  if (!client) return direct(new OAuthError('invalid_client', `unknown client_id "${clientId}": register the client first`));
  const redirectUri = query.redirect_uri;
  if (typeof redirectUri !== 'string' || redirectUri === '')
    return direct(invalidRequest(Array.isArray(redirectUri) ? 'redirect_uri is repeated' : 'redirect_uri is missing'));
  if (!client.redirect_uris.some((r) => redirectUriMatches(r, redirectUri))) {
    return direct(invalidRequest(`redirect_uri "${redirectUri}" is not registered for this client`));
  }

  const stateParam = typeof query.state === 'string' ? query.state : undefined;
  const fail = (error: OAuthError): AuthorizationOutcome => ({
    kind: 'redirect',
    error,
    location: redirectWith(redirectUri, { error: error.error, error_description: error.description, state: stateParam, iss: issuer }),
  });

  for (const name of AUTHORIZE_PARAMETERS) {
    if (name !== 'resource' && Array.isArray(query[name])) return fail(invalidRequest(`${name} is repeated`));
  }
  const responseType = query.response_type as string | undefined;
  if (!responseType) return fail(invalidRequest('response_type is missing'));
  if (responseType !== 'code')
    return fail(new OAuthError('unsupported_response_type', `response_type "${responseType}" is not supported; use "code"`));
  if (stateParam === undefined || stateParam === '') return fail(invalidRequest('state is required'));
  const challenge = query.code_challenge as string | undefined;
  if (!challenge) return fail(invalidRequest('code_challenge is required (PKCE with S256)'));
  const method = query.code_challenge_method as string | undefined;
  if (method !== 'S256') {
    return fail(
      invalidRequest(
        method === undefined
          ? 'code_challenge_method is missing; only S256 is supported (absent means plain)'
          : `code_challenge_method "${method}" is not supported; use S256`,
      ),
    );
  }
  if (!isValidPkceValue(challenge)) return fail(invalidRequest('code_challenge must be 43 to 128 characters of [A-Za-z0-9-._~]'));
  let scopes: Scope[];
  try {
    scopes = requireSupportedScopes(query.scope as string | undefined);
  } catch (e) {
    return fail(e as OAuthError);
  }
  const requested = query.resource;
  if (Array.isArray(requested)) return fail(invalidTarget(`only one resource may be requested: ${resource}`));
  if (requested !== undefined && requested !== resource)
    return fail(invalidTarget(`resource "${requested}" is not served here; the only resource is ${resource}`));

  return {
    kind: 'consent',
    request: { client, redirect_uri: redirectUri, state: stateParam, scopes, resource: requested ?? null, code_challenge: challenge },
  };
}
