import type { CoreContext } from '../context.js';
import { invalidGrant, invalidScope } from '../errors.js';
import { checkTokenResource, issueTokens } from '../issue-tokens.js';
import { isRetiredScope, splitScope } from '../scopes.js';
import type { Grant } from '../state.js';
import { invalidateFamily, parseRefreshToken, replayedGeneration, rotateRefreshToken } from '../token-family.js';
import type { GrantType } from './types.js';

/**
 * Spec 3.2, 5.3, OAuth 2.1 §4.3: every use rotates; presenting a rotated token invalidates the whole family.
 * `scope` may narrow the access token, never widen; retired scopes leave the grant here (spec 9).
 */
export const refreshTokenGrant: GrantType = {
  parameters: ['client_id', 'refresh_token'],
  async handler(core, params, client) {
    const now = core.clock.now();
    const presented = params.refresh_token as string;
    const parsed = parseRefreshToken(presented);
    const family = parsed ? core.familyByHandle(parsed.handleHash) : undefined;
    if (!parsed || !family || family.client_id !== client.client_id)
      throw invalidGrant('refresh token is unknown or was issued to another client');
    if (family.status !== 'active') throw invalidGrant('refresh token family was invalidated; authorize again');
    const grant = core.repo.get('grants', family.grant_id);
    if (!grant || grant.status !== 'active') throw invalidGrant('the grant was revoked; authorize again');
    if (parsed.tokenHash !== family.current.hash) {
      invalidateFamily(core, family, 'refresh_replay', replayedGeneration(family, parsed.tokenHash));
      await core.commit();
      throw invalidGrant('refresh token was already used (replay); every token of its family is now invalid');
    }
    if (now >= family.current.expires_at) throw invalidGrant('refresh token has expired; authorize again');
    checkTokenResource(core, grant, params.resource);
    const kept = grant.scopes.filter((s) => !isRetiredScope(s));
    // RFC 6749 §3.3: a token needs at least one scope; a grant left with retired scopes only has nothing to give.
    if (kept.length === 0)
      throw invalidGrant(`the grant holds only retired scopes (${grant.scopes.join(' ')}); authorize again with a supported scope`);
    let scopes = kept;
    if (params.scope !== undefined) {
      const requested = splitScope(params.scope);
      const retired = requested.filter(isRetiredScope);
      if (retired.length > 0) throw invalidScope(`retired scope ${retired.join(', ')} is no longer supported`);
      const wider = requested.filter((s) => !kept.includes(s));
      if (requested.length === 0 || wider.length > 0)
        throw invalidScope(`scope may only narrow the grant (${kept.join(' ')}); not granted: ${wider.join(', ') || '(empty)'}`);
      scopes = requested;
    }
    if (kept.length !== grant.scopes.length) reduceGrantScopes(core, grant, kept);
    const rotated = rotateRefreshToken(core, family, presented);
    return issueTokens(core, grant, rotated.family, rotated.refreshToken, scopes, 'refresh_token');
  },
};

/** Spec 9: grants that carry retired scopes lose them at their next refresh. */
function reduceGrantScopes(core: CoreContext, grant: Grant, kept: readonly string[]): void {
  const removed = grant.scopes.filter((s) => !kept.includes(s));
  core.repo.update('grants', grant.id, { scopes: kept });
  core.events.emit('grant.scopes_reduced', { grant_id: grant.id, removed, scopes: kept });
}
