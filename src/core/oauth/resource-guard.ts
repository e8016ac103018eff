import type { AccessTokenClaims } from './access-token.js';
import type { CoreContext } from '../context.js';
import { HINTS } from './client-hints.js';
import { BearerError } from '../state/errors.js';
import type { AccessRefusal } from '../state/events.js';
import { isResourceName } from './resource-names.js';
import { splitScope } from './scopes.js';
import { revokedByWhom, type Grant } from '../state/state.js';

/** What the resource guard hands to a route once a bearer token passed every check. */
export interface AccessContext {
  claims: AccessTokenClaims;
  scopes: string[];
  grant: Grant;
  client_id: string;
  person_id: string;
  /** Injected faults that shaped this request (emulator control), for the request log. */
  faults: string[];
  /** When the request arrived (arrivals.ts), as its transport numbered it. */
  arrival?: number;
}

/** Jobs and documents are their client's and their person's; to anyone else they do not exist (404). */
export const belongsTo = (record: { client_id: string; person_id: string }, access: AccessContext): boolean =>
  record.client_id === access.client_id && record.person_id === access.person_id;

/**
 * The resource guard (spec 4.4, 5.4, 5.5, 5.7, 5.8; RFC 6750, RFC 9068). Checks a bearer credential for a
 * protected route: signature, `exp`, `iss`, `aud` = `{base_url}/mcp`, then on every request that the grant is
 * active, the family alive and the token not revoked, and finally the route's scope (`checkScope`; `null`: any agent token, the
 * caller checks scopes itself with `checkScope`, and a 401 challenge names `challengeScope`). Throws `BearerError` (401 or 403).
 * `reached`: `{base_url}/mcp` under the loopback name the request reached (resource-names.ts); `aud` must be that.
 */
export async function authenticate(
  core: CoreContext,
  authorization: string | undefined,
  required: string | null,
  challengeScope: string = required ?? 'ask',
  where = '/mcp',
  reached: string = core.resource,
): Promise<AccessContext> {
  const scope = challengeScope;
  let known: { client_id: string; grant_id: string; family_id: string } | null = null;
  // Every refusal is published (access.refused) with what it knows of the token, for the client findings.
  const refuse = (status: 401 | 403, reason: AccessRefusal, description: string, hint?: string, challenge = scope): BearerError => {
    core.events.emit('access.refused', {
      client_id: known?.client_id ?? null,
      grant_id: known?.grant_id ?? null,
      family_id: known?.family_id ?? null,
      status,
      reason,
      where,
    });
    const error = reason === 'token_missing' ? undefined : status === 403 ? 'insufficient_scope' : 'invalid_token';
    const token = known ? { client_id: known.client_id, grant_id: known.grant_id } : null;
    return new BearerError(status, error, description, challenge, hint, token, reason);
  };
  const match = authorization ? /^bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization) : null;
  if (!match) {
    if (authorization && /^bearer\b/i.test(authorization)) throw refuse(401, 'token_malformed', 'the bearer token is malformed');
    throw refuse(
      401,
      'token_missing',
      `a bearer token with scope "${scope}" is required`,
      authorization
        ? 'Send the access token as "Authorization: Bearer <token>" (RFC 6750 section 2.1).'
        : 'Send an access token as "Authorization: Bearer <token>"; the resource_metadata in WWW-Authenticate leads to the ' +
            'authorization server that issues it (RFC 9728).',
    );
  }
  let claims: AccessTokenClaims;
  try {
    claims = await core.signer.verify(match[1] as string, core.issuer, core.clock.now());
  } catch (e) {
    const expired = (e as { code?: string }).code === 'ERR_JWT_EXPIRED';
    throw expired
      ? refuse(401, 'token_expired', 'the access token has expired', HINTS.expiredAccessToken)
      : refuse(
          401,
          'token_invalid',
          'the access token is not valid here',
          'Send an access token this server issued (from its /oauth/token), unchanged; tokens of another server or of an emulator ' +
            'started with another state file are not valid here.',
        );
  }
  known = { client_id: claims.client_id, grant_id: claims.grant_id, family_id: claims.family_id };
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(reached)) {
    // RFC 8707: a token is bound to the name of the resource the client asked for, and works under that name only.
    const other = (audiences as readonly string[]).find((aud) => isResourceName(core.resource, aud));
    if (other !== undefined)
      throw refuse(
        401,
        'token_for_other_name',
        `the access token is for ${other}, not for ${reached} as this request reached it; use the name the token was issued for, or ` +
          `authorize again with resource=${reached}`,
        `Call the resource under the name its token was issued for (the token's aud), or authorize again with ` +
          `resource=${reached}: a token is bound to the resource it was asked for (RFC 8707), and 127.0.0.1, localhost and [::1] are three ` +
          `names. Use one of them throughout.`,
      );
    throw refuse(401, 'identity_token', `identity token refused: issued without resource=${reached}`, HINTS.identityToken(reached));
  }
  const grant = core.state.grants[claims.grant_id];
  if (!grant || grant.status !== 'active') {
    throw refuse(401, 'grant_revoked', `access was revoked by ${revokedByWhom(grant)}`, HINTS.grantRevoked);
  }
  const family = core.state.families[claims.family_id];
  if (!family || family.status !== 'active')
    throw refuse(401, 'family_invalidated', 'the token family was invalidated', HINTS.familyInvalidated);
  if (Object.hasOwn(core.state.revoked_access_tokens, claims.jti))
    throw refuse(
      401,
      'token_revoked',
      'the access token was revoked',
      'The client revoked this access token (RFC 7009): use a newer one or refresh.',
    );
  const scopes = splitScope(claims.scope);
  if (required !== null) checkScope(core, { claims, scopes }, required, 'this route', where);
  const used = core.repo.update('grants', grant.id, { last_used_at: core.clock.now() });
  return { claims, scopes, grant: used, client_id: claims.client_id, person_id: claims.sub, faults: [] };
}

/**
 * Spec 5.5, RFC 6750 §3.1: the one scope check of both transports: a REST route's (in `authenticate`, before its body
 * is read) and an MCP tool's (before the call is admitted against the rate limit). Throws a 403 `insufficient_scope`
 * naming the scope, published as `access.refused`. `needs` says who needs it (`this route`, `the tool "ask"`); `where`
 * is the route the event names.
 */
export function checkScope(
  core: Pick<CoreContext, 'events'>,
  access: Pick<AccessContext, 'claims' | 'scopes'>,
  scope: string,
  needs: string,
  where: string,
): void {
  if (access.scopes.includes(scope)) return;
  const { client_id, grant_id, family_id } = access.claims;
  core.events.emit('access.refused', { client_id, grant_id, family_id, status: 403, reason: 'insufficient_scope', where });
  throw new BearerError(
    403,
    'insufficient_scope',
    `${needs} needs scope "${scope}"`,
    scope,
    HINTS.insufficientScope(scope),
    { client_id, grant_id },
    'insufficient_scope',
  );
}
