import { SUPPORTED_SCOPES } from './scopes.js';

/**
 * What a client developer should change when the service refuses a request for a known cause, in one place: the
 * findings (findings.ts) carry these as `hint`, and refusals add them as their developer line (an OAuth
 * `error_description`'s second sentence, a problem's `hint`, the error page's "Für Entwickler" part).
 * Each names the client habit that usually causes it.
 */

/** The authorization request's parameters whose absence has a known client habit behind it. */
export type MissingParameter = 'scope' | 'state' | 'resource' | 'code_challenge' | 'code_challenge_method' | 'redirect_uri';

export function missingParameterHint(parameter: MissingParameter, resource: string): string {
  switch (parameter) {
    case 'scope':
      return (
        `Request the scopes the agent needs, e.g. scope=ask (the protected resource metadata's scopes_supported: ${SUPPORTED_SCOPES.join(' ')}; ` +
        `the 401 from /mcp names scope="ask"). The MCP TypeScript SDK 1.12 to 1.20 sends no scope unless the app sets clientMetadata.scope.`
      );
    case 'state':
      return (
        'Send a fresh random state with every authorization request and compare it on the redirect. ' +
        "The MCP TypeScript SDK's example OAuthClientProvider sends none: implement state() in your provider."
      );
    case 'resource':
      return (
        `Send resource=${resource} with the authorization and the token requests (RFC 8707); without it the token is an identity ` +
        'token that /mcp and the REST routes refuse. MCP clients older than the 2025-06-18 authorization spec leave it out.'
      );
    case 'code_challenge':
      return (
        'Use PKCE (RFC 7636): send the S256 hash of a fresh code_verifier as code_challenge, with code_challenge_method=S256, and ' +
        'the verifier to /oauth/token. Clients written for confidential clients often skip it.'
      );
    case 'code_challenge_method':
      return 'Send code_challenge_method=S256 with the challenge: an absent method means plain (RFC 7636 section 4.3), which this server does not accept.';
    case 'redirect_uri':
      return 'Send redirect_uri, exactly as registered (OAuth 2.1 section 4.1.1 requires it); clients written for OAuth 2.0 rely on a registered default.';
  }
}

export const HINTS = {
  /** Spec 3.2: parallel refreshes with one refresh token. */
  concurrentRefresh:
    'Refresh once per token family: serialise refreshes behind one lock or shared promise, so that requests that find the access token ' +
    'expired wait for one refresh and then use its tokens. Each refresh token works once; a second use kills the family.',
  /** Spec 3.2: a rotated token presented again later. */
  staleRefreshToken:
    'Store the refresh token from every token response and use only the newest: each refresh rotates it, and presenting an old one kills the family.',
  refreshLoop:
    'Refresh when the access token expires (expires_in 900) or is refused as expired, not after every refusal: a token refused for ' +
    'another reason (identity token, missing scope, revoked grant) stays refused after a refresh.',
  identityToken: (resource: string) =>
    `Send resource=${resource} in the authorization request and the token requests (RFC 8707), then authorize again: a token issued ` +
    `without it is an identity token, refused on every workspace route. MCP TypeScript SDK 1.12 sends no resource; newer versions do.`,
  retryTooEarly:
    'After a 429, wait the seconds its Retry-After header names (RateLimit-Reset says the same) before the next request with this ' +
    'grant; retrying at once is refused again.',
  /** `key`: how the caller sends it; none when the caller may be either (a REST client or an MCP one). */
  retryWithoutKey: (key?: 'idempotency_key' | 'Idempotency-Key') =>
    key === 'idempotency_key'
      ? 'Pass the idempotency_key argument (a fresh random value per operation, the same value on every retry of it): a retry with the ' +
        'same key and arguments is answered from the stored result and not charged again.'
      : key === 'Idempotency-Key'
        ? 'Send an Idempotency-Key header (a fresh random value per operation, the same value on every retry of it): a retry with the ' +
          'same key and body is answered from the stored response and not charged again.'
        : 'Send an Idempotency-Key header, or the idempotency_key argument of an MCP tool (a fresh random value per operation, the ' +
          'same value on every retry of it): a retry with the same key and body is answered from the stored response and not charged again.',
  repeatedRegistration:
    'Register once and keep the client_id (per server and redirect URI); register again only when the server answers invalid_client.',
  abandonedGrant:
    'When the client authorizes again (a new login), revoke the previous refresh token at /oauth/revoke (RFC 7009), so that the person ' +
    'does not keep grants that nothing uses.',
  unusedScope: 'Request only the scopes the agent uses (spec 5.9): the person sees each on the consent screen.',
  codeNeverExchanged:
    'Exchange the code from the redirect at the token endpoint (grant_type=authorization_code with the PKCE code_verifier) right away: ' +
    'it expires in minutes and works once.',
  familyInvalidated:
    'Drop the stored tokens and send the person through authorization again. If this was not a revocation, look for a parallel or ' +
    'repeated use of one refresh token.',
  grantRevoked: 'The person revoked access: drop the stored tokens and ask the person to authorize again.',
  expiredAccessToken: 'Refresh the access token (grant_type=refresh_token) and retry once with the new one.',
  insufficientScope: (scope: string) =>
    `Authorize again with scope ${scope} (the 403's WWW-Authenticate names it); a refresh cannot widen a grant.`,
} as const;
