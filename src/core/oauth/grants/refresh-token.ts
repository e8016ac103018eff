import type { CoreContext } from '../../context.js';
import { HINTS } from '../client-hints.js';
import { OAuthError, invalidGrant, invalidScope } from '../../state/errors.js';
import type { RefreshRefusal } from '../../state/events.js';
import { checkTokenResource, issueTokens } from '../issue-tokens.js';
import { isRetiredScope, splitScope } from '../scopes.js';
import { revokedByWhom, type Grant, type TokenFamily } from '../../state/state.js';
import { CONCURRENT_WINDOW, invalidateFamily, parseRefreshToken, replayedGeneration, rotateRefreshToken } from '../token-family.js';
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
      throw new OAuthError('invalid_grant', 'refresh token is unknown or was issued to another client', {
        hint: 'Send the refresh_token of the newest token response, with the client_id it was issued to.',
      });
    const refused = (reason: RefreshRefusal, generation: number | null = null, since: number | null = null) =>
      core.events.emit('refresh.refused', {
        client_id: family.client_id,
        grant_id: family.grant_id,
        family_id: family.id,
        reason,
        generation,
        since_ms: since,
      });
    if (family.status !== 'active') {
      const since = family.invalidated_at !== undefined ? now - family.invalidated_at : null;
      refused(family.invalidated_reason === 'grant_revoked' ? 'grant_revoked' : 'family_invalidated', null, since);
      throw new OAuthError('invalid_grant', familyEnded(family, core.repo.get('grants', family.grant_id)), {
        hint:
          family.invalidated_reason === 'grant_revoked'
            ? HINTS.grantRevoked
            : family.invalidated_reason === 'refresh_replay' && since !== null && since <= CONCURRENT_WINDOW
              ? HINTS.concurrentRefresh
              : HINTS.familyInvalidated,
      });
    }
    const grant = core.repo.get('grants', family.grant_id);
    if (!grant || grant.status !== 'active') {
      refused('grant_revoked');
      throw new OAuthError('invalid_grant', `the grant was revoked by ${revokedByWhom(grant)}; authorize again`, {
        hint: HINTS.grantRevoked,
      });
    }
    if (parsed.tokenHash !== family.current.hash) {
      const replayed = replayedGeneration(family, parsed.tokenHash);
      const since = replayed?.rotated_at != null ? now - replayed.rotated_at : null;
      invalidateFamily(core, family, 'refresh_replay', replayed?.generation ?? null);
      refused('replay', replayed?.generation ?? null, since);
      throw new OAuthError('invalid_grant', 'refresh token was already used (replay); every token of its family is now invalid', {
        hint: since !== null && since <= CONCURRENT_WINDOW ? HINTS.concurrentRefresh : HINTS.staleRefreshToken,
      });
    }
    if (now >= family.current.expires_at) {
      refused('expired');
      throw new OAuthError('invalid_grant', 'refresh token has expired; authorize again', {
        hint: 'Refresh tokens here expire 30 days after their issue: send the person through authorization again.',
      });
    }
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

/** Why the family no longer works, as the refusal says it (the wording says what happened, not only that it did). */
function familyEnded(family: TokenFamily, grant: Grant | undefined): string {
  switch (family.invalidated_reason) {
    case 'refresh_replay':
      return 'refresh token family was invalidated because one of its refresh tokens was used twice (replay); authorize again';
    case 'code_replay':
      return 'refresh token family was invalidated because its authorization code was used twice; authorize again';
    case 'grant_revoked':
      return `the grant was revoked by ${revokedByWhom(grant)}; authorize again`;
    case 'token_revoked':
      return 'the refresh token was revoked (RFC 7009); authorize again';
    default:
      return 'refresh token family was invalidated; authorize again';
  }
}
