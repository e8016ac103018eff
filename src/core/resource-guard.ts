import type { AccessTokenClaims } from './access-token.js';
import type { CoreContext } from './context.js';
import { BearerError } from './errors.js';
import { splitScope } from './scopes.js';
import type { Grant } from './state.js';

/** What the resource guard hands to a route once a bearer token passed every check. */
export interface AccessContext {
  claims: AccessTokenClaims;
  scopes: string[];
  grant: Grant;
  client_id: string;
  person_id: string;
  /** Injected faults that shaped this request (emulator control), for the request log. */
  faults: string[];
}

/**
 * The resource guard (spec 4.4, 5.4, 5.5, 5.7, 5.8; RFC 6750, RFC 9068). Checks a bearer credential for a
 * protected route: signature, `exp`, `iss`, `aud` = `{base_url}/mcp`, then on every request that the grant is
 * active, the family alive and the token not revoked, and finally the route's scope (`null`: any agent token; the
 * caller checks scopes itself, and a 401 challenge names `challengeScope`). Throws `BearerError` (401 or 403).
 */
export async function authenticate(
  core: CoreContext,
  authorization: string | undefined,
  required: string | null,
  challengeScope: string = required ?? 'ask',
): Promise<AccessContext> {
  const scope = challengeScope;
  const match = authorization ? /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization) : null;
  if (!match) {
    if (authorization && /^bearer\b/i.test(authorization))
      throw new BearerError(401, 'invalid_token', 'the bearer token is malformed', scope);
    throw new BearerError(401, undefined, `a bearer token with scope "${scope}" is required`, scope);
  }
  let claims: AccessTokenClaims;
  try {
    claims = await core.signer.verify(match[1] as string, core.issuer, core.clock.now());
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new BearerError(
      401,
      'invalid_token',
      code === 'ERR_JWT_EXPIRED' ? 'the access token has expired' : 'the access token is not valid here',
      scope,
    );
  }
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(core.resource)) {
    throw new BearerError(401, 'invalid_token', `identity token refused: issued without resource=${core.resource}`, scope);
  }
  const grant = core.state.grants[claims.grant_id];
  if (!grant || grant.status !== 'active') {
    const by = grant?.revoked_by === 'client' ? 'the client' : grant?.revoked_by === 'admin' ? 'an administrator' : 'the person';
    throw new BearerError(401, 'invalid_token', `access was revoked by ${by}`, scope);
  }
  const family = core.state.families[claims.family_id];
  if (!family || family.status !== 'active') throw new BearerError(401, 'invalid_token', 'the token family was invalidated', scope);
  if (Object.hasOwn(core.state.revoked_access_tokens, claims.jti))
    throw new BearerError(401, 'invalid_token', 'the access token was revoked', scope);
  const scopes = splitScope(claims.scope);
  if (required !== null && !scopes.includes(required))
    throw new BearerError(403, 'insufficient_scope', `this route needs scope "${required}"`, required);
  const used = core.repo.update('grants', grant.id, { last_used_at: core.clock.now() });
  return { claims, scopes, grant: used, client_id: claims.client_id, person_id: claims.sub, faults: [] };
}
