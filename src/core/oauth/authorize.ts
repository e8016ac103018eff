import { OAuthError, invalidRequest, invalidTarget } from '../state/errors.js';
import { isResourceName } from './resource-names.js';
import { isValidPkceValue } from './pkce.js';
import { redirectUriMatches } from './redirect-uri.js';
import { SUPPORTED_SCOPES, requireSupportedScopes, type Scope } from './scopes.js';
import { missingParameterHint, type MissingParameter } from './client-hints.js';
import type { Client } from '../state/state.js';

/** A validated authorization request (OAuth 2.1 §4.1.1, spec 4.2). */
export interface AuthorizationRequest {
  client: Client;
  /** As sent by the client (a loopback URI may differ from the registered one in its port). */
  redirect_uri: string;
  state: string;
  scopes: Scope[];
  /** `{base_url}/mcp` (under the loopback name the client used), or null for an identity request. */
  resource: string | null;
  code_challenge: string;
}

/** `missing`: the required parameters the request left out (client findings name each). */
export type AuthorizationOutcome =
  | { kind: 'consent'; request: AuthorizationRequest }
  /** Client or redirect URI in doubt: answer directly, never redirect. */
  | { kind: 'error_page'; error: OAuthError; client_id: string | null; missing: MissingParameter[] }
  | { kind: 'redirect'; error: OAuthError; location: string; client_id: string; missing: MissingParameter[] };

/** Required parameters (spec 4.2) whose absence has a known client habit behind it; checked in this order. */
const REQUIRED_AFTER_REDIRECT = ['state', 'code_challenge', 'code_challenge_method', 'scope'] as const;

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
  const clientId = query.client_id;
  const direct = (error: OAuthError, missing: MissingParameter[] = []): AuthorizationOutcome => ({
    kind: 'error_page',
    error: new OAuthError(error.error, error.message, { status: 400, redirectable: false, hint: error.hint }),
    client_id: typeof clientId === 'string' && clientId !== '' ? clientId : null,
    missing,
  });
  if (typeof clientId !== 'string' || clientId === '')
    return direct(invalidRequest(Array.isArray(clientId) ? 'client_id is repeated' : 'client_id is missing'));
  const client = findClient(clientId);
  if (!client)
    return direct(
      new OAuthError('invalid_client', `unknown client_id "${clientId}": register the client first`, {
        hint:
          'The client_id was not registered here (another server, or an emulator that started afresh): register again at POST ' +
          '/oauth/register and use the new client_id.',
      }),
    );
  const redirectUri = query.redirect_uri;
  if (typeof redirectUri !== 'string' || redirectUri === '')
    return Array.isArray(redirectUri)
      ? direct(invalidRequest('redirect_uri is repeated'))
      : direct(missingParameter('redirect_uri', 'redirect_uri is missing', resource), ['redirect_uri']);
  if (!client.redirect_uris.some((r) => redirectUriMatches(r, redirectUri))) {
    return direct(
      new OAuthError('invalid_request', `redirect_uri "${redirectUri}" is not registered for this client`, {
        hint:
          `Send one of the registered redirect URIs (${client.redirect_uris.join(', ')}) exactly; a loopback redirect URI may ` +
          `differ in its port only (RFC 8252 section 7.3).`,
      }),
    );
  }

  const stateParam = typeof query.state === 'string' ? query.state : undefined;
  const fail = (error: OAuthError): AuthorizationOutcome => ({
    kind: 'redirect',
    error,
    location: redirectWith(redirectUri, { error: error.error, error_description: error.description, state: stateParam, iss: issuer }),
    client_id: client.client_id,
    missing: REQUIRED_AFTER_REDIRECT.filter((name) => query[name] === undefined || query[name] === ''),
  });

  for (const name of AUTHORIZE_PARAMETERS) {
    if (name !== 'resource' && Array.isArray(query[name])) return fail(invalidRequest(`${name} is repeated`));
  }
  const responseType = query.response_type as string | undefined;
  if (!responseType) return fail(invalidRequest('response_type is missing'));
  if (responseType !== 'code')
    return fail(new OAuthError('unsupported_response_type', `response_type "${responseType}" is not supported; use "code"`));
  if (stateParam === undefined || stateParam === '') return fail(missingParameter('state', 'state is required', resource));
  const challenge = query.code_challenge as string | undefined;
  if (!challenge) return fail(missingParameter('code_challenge', 'code_challenge is required (PKCE with S256)', resource));
  const method = query.code_challenge_method as string | undefined;
  if (method === undefined)
    return fail(
      missingParameter('code_challenge_method', 'code_challenge_method is missing; only S256 is supported (absent means plain)', resource),
    );
  if (method !== 'S256') return fail(invalidRequest(`code_challenge_method "${method}" is not supported; use S256`));
  if (!isValidPkceValue(challenge)) return fail(invalidRequest('code_challenge must be 43 to 128 characters of [A-Za-z0-9-._~]'));
  const scope = query.scope as string | undefined;
  if (scope === undefined || scope.trim() === '')
    return fail(
      new OAuthError('invalid_scope', `scope is required; supported scopes: ${SUPPORTED_SCOPES.join(' ')}`, {
        hint: missingParameterHint('scope', resource),
      }),
    );
  let scopes: Scope[];
  try {
    scopes = requireSupportedScopes(scope);
  } catch (e) {
    return fail(e as OAuthError);
  }
  const requested = query.resource;
  if (Array.isArray(requested)) return fail(invalidTarget(`only one resource may be requested: ${resource}`));
  // The resource under any loopback name of {base_url} (RFC 9728 §3.3): the grant keeps the one the client used.
  if (requested !== undefined && !isResourceName(resource, requested))
    return fail(invalidTarget(`resource "${requested}" is not served here; the only resource is ${resource}`));

  return {
    kind: 'consent',
    request: { client, redirect_uri: redirectUri, state: stateParam, scopes, resource: requested ?? null, code_challenge: challenge },
  };
}

/** A required parameter left out: `invalid_request`, with the client habit that usually causes it as its hint. */
function missingParameter(parameter: MissingParameter, description: string, resource: string): OAuthError {
  return new OAuthError('invalid_request', description, { hint: missingParameterHint(parameter, resource) });
}
