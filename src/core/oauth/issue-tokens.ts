import { tokenTimes, type AccessTokenClaims } from './access-token.js';
import type { CoreContext } from '../context.js';
import { newId, randomToken } from '../state/crypto.js';
import { OAuthError, ProblemError } from '../state/errors.js';
import type { IssuedTokens, TokenResponse } from './grants/types.js';
import { announceGrant, createGrant } from './grants-admin.js';
import { announceClient, createClient } from './registration.js';
import { grantedResourceName, isResourceName } from './resource-names.js';
import { requireSupportedScopes } from './scopes.js';
import type { Client, Grant, TokenFamily } from '../state/state.js';
import { startFamily, withAccessToken } from './token-family.js';

/**
 * The resource an agent grant was given for, at the service's current address: `{base_url}/mcp` under the loopback
 * name the client asked for (RFC 8707 §2.1, https://www.rfc-editor.org/rfc/rfc8707#section-2.1); null for an
 * identity grant. Its access tokens carry it as `aud`.
 */
export function grantResource(core: CoreContext, grant: Grant): string | null {
  return grant.resource === null ? null : grantedResourceName(core.resource, grant.resource);
}

/** RFC 8707 §2.2: a `resource` sent to the token endpoint must be the one the grant was given for. */
export function checkTokenResource(core: CoreContext, grant: Grant, requested: string | undefined): void {
  if (requested === undefined) return;
  const granted = grantResource(core, grant);
  if (granted === null)
    throw new OAuthError(
      'invalid_target',
      'this grant was given without a resource (identity token); authorize again with resource to get an agent token',
    );
  if (requested === granted) return;
  if (isResourceName(core.resource, requested))
    throw new OAuthError(
      'invalid_target',
      `resource "${requested}" is not the one this grant was given for (${granted}): tokens are bound to the name the client ` +
        `authorized with; send ${granted}, or authorize again with resource=${requested}`,
    );
  throw new OAuthError('invalid_target', `resource "${requested}" is not served here; the only resource is ${core.resource}`);
}

/**
 * Signs an access token for the family and records it (spec 2.2); the caller's use case commits, then announces the
 * tokens and answers. The refresh token is left out for a client that did not register the refresh_token grant
 * (RFC 7591 §2, RFC 6749 §5.1); its family still exists, to track and revoke the access tokens.
 */
export async function issueTokens(
  core: CoreContext,
  grant: Grant,
  family: TokenFamily,
  refreshToken: string,
  scopes: readonly string[],
  grantType: 'authorization_code' | 'refresh_token',
): Promise<IssuedTokens> {
  const now = core.clock.now();
  const times = tokenTimes(now, core.lifetimes.accessToken);
  // An agent grant's audience is this service's /mcp at its current address (ports may change between runs).
  const audience = grantResource(core, grant) ?? grant.client_id;
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
  // The family as the grant handed it over, started or just rotated: stored once, with this access token listed.
  const issuedFrom = core.repo.put(
    'families',
    family.id,
    withAccessToken(family, { jti: claims.jti, issued_at: now, expires_at: times.exp * 1000, scopes }),
  );
  const accessToken = await core.signer.sign(claims);
  const refreshable = core.state.clients[grant.client_id]?.grant_types.includes('refresh_token') ?? true;
  return {
    response: {
      access_token: accessToken,
      token_type: 'Bearer',
      expires_in: times.exp - times.iat,
      ...(refreshable ? { refresh_token: refreshToken } : {}),
      scope: claims.scope,
    },
    announce: () =>
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
      }),
  };
}

/**
 * The test shortcut (README: issueTokens): a grant and its first tokens as if the person had approved on the consent
 * page, without the page, for tests whose subject is not the flow. Scopes are checked as at /authorize (spec 2.7, 5.9);
 * the grant, family and tokens are the real ones (refresh, revocation and the resource guard treat them as any
 * other). Recorded as `grant.created`.
 */
export async function issueTokensWithoutConsent(
  core: CoreContext,
  options: { scopes: string[]; identity?: boolean; client_id?: string; client_name?: string; person_id?: string },
): Promise<TokenResponse & { client_id: string; grant_id: string }> {
  // Everything is checked before anything is created.
  const scopes = requireSupportedScopes(options.scopes.join(' '));
  const person = options.person_id ? core.person(options.person_id) : core.defaultPerson;
  if (!person) throw new ProblemError('person_not_found', `no person "${options.person_id}" in the fixtures`);
  if (options.client_id && !Object.hasOwn(core.state.clients, options.client_id))
    throw new ProblemError('client_not_found', `no client "${options.client_id}"; leave it out to register one`);
  const registered = options.client_id
    ? null
    : createClient(core, {
        client_name: options.client_name ?? 'Test client (issueTokens)',
        redirect_uris: ['http://127.0.0.1/callback'],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
      });
  const client = registered ?? (core.state.clients[options.client_id!] as Client);
  const grant = createGrant(core, {
    id: newId('grant'),
    client_id: client.client_id,
    person_id: person.id,
    scopes: [...scopes],
    resource: options.identity ? null : core.resource,
    created_at: core.clock.now(),
  });
  const { family, refreshToken } = startFamily(core, grant);
  const issued = await issueTokens(core, grant, family, refreshToken, grant.scopes, 'authorization_code');
  // The shortcut's one commit; what it made is told once it is durable, in the order it was made.
  await core.commit();
  if (registered) announceClient(core, registered);
  announceGrant(core, grant);
  issued.announce();
  return { ...issued.response, client_id: client.client_id, grant_id: grant.id };
}
