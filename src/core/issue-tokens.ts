import { tokenTimes, type AccessTokenClaims } from './access-token.js';
import type { CoreContext } from './context.js';
import { randomToken } from './crypto.js';
import { OAuthError } from './errors.js';
import type { TokenResponse } from './grants/types.js';
import type { Grant, TokenFamily } from './state.js';
import { withAccessToken } from './token-family.js';

/** RFC 8707 §2.2: a `resource` sent to the token endpoint must be the one the grant was given for. */
export function checkTokenResource(core: CoreContext, grant: Grant, requested: string | undefined): void {
  if (requested === undefined) return;
  if (grant.resource === null) throw new OAuthError('invalid_target', 'this grant was given without a resource (identity token); authorize again with resource to get an agent token');
  if (requested !== core.resource) throw new OAuthError('invalid_target', `resource "${requested}" is not served here; the only resource is ${core.resource}`);
}

/**
 * Signs an access token for the family, records it, makes the change durable, then answers (spec 2.2). The refresh
 * token is left out for a client that did not register the refresh_token grant (RFC 7591 §2, RFC 6749 §5.1); its
 * family still exists, to track and revoke the access tokens.
 */
export async function issueTokens(core: CoreContext, grant: Grant, family: TokenFamily, refreshToken: string, scopes: readonly string[], grantType: 'authorization_code' | 'refresh_token'): Promise<TokenResponse> {
  const now = core.clock.now();
  const times = tokenTimes(now, core.lifetimes.accessToken);
  // An agent grant's audience is this service's /mcp at its current address (ports may change between runs).
  const audience = grant.resource !== null ? core.resource : grant.client_id;
  const claims: AccessTokenClaims = {
    iss: core.issuer,
    sub: grant.person_id,
    aud: audience,
    client_id: grant.client_id,
    scope: scopes.join(' '),
    ...times,
    jti: randomToken(16),
    grant_id: grant.id,
    family_id: family.id,
  };
  core.repo.update('grants', grant.id, { last_used_at: now });
  // The family as it is now: the caller's copy may be from before its rotation.
  const issuedFrom = core.repo.put('families', family.id, withAccessToken(core.state.families[family.id] ?? family, { jti: claims.jti, issued_at: now, expires_at: times.exp * 1000, scopes }));
  const [accessToken] = await Promise.all([core.signer.sign(claims), core.commit()]);
  core.events.emit('tokens.issued', {
    grant_id: grant.id,
    client_id: grant.client_id,
    family_id: family.id,
    jti: claims.jti,
    scopes,
    audience,
    expires_at: times.exp * 1000,
    generation: issuedFrom.current.generation,
    grant_type: grantType,
  });
  const refreshable = core.state.clients[grant.client_id]?.grant_types.includes('refresh_token') ?? true;
  return { access_token: accessToken, token_type: 'Bearer', expires_in: times.exp - times.iat, ...(refreshable ? { refresh_token: refreshToken } : {}), scope: claims.scope };
}
