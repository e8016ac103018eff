import { sha256 } from '../../state/crypto.js';
import { OAuthError, invalidGrant } from '../../state/errors.js';
import { checkTokenResource, issueTokens } from '../issue-tokens.js';
import { verifyS256 } from '../pkce.js';
import { invalidateFamily, startFamily } from '../token-family.js';
import type { GrantType } from './types.js';

/**
 * Spec 4.3, OAuth 2.1 §4.1.3: the code is single use and bound to the client, the redirect URI,
 * the PKCE challenge and the resource. A replay, when otherwise valid, revokes what the code produced.
 */
export const authorizationCodeGrant: GrantType = {
  parameters: ['client_id', 'code', 'redirect_uri', 'code_verifier'],
  async handler(core, params, client) {
    const now = core.clock.now();
    const key = sha256(params.code as string);
    const code = core.repo.get('codes', key);
    if (!code || code.client_id !== client.client_id)
      throw refused(
        'authorization code is unknown or was issued to another client',
        'Exchange the code from the redirect unchanged, with the client_id that asked for it.',
      );
    if (code.redirect_uri !== params.redirect_uri)
      throw refused(
        'redirect_uri differs from the one in the authorization request',
        `Send the redirect_uri of the authorization request byte for byte (it was ${code.redirect_uri}), port included.`,
      );
    if (!verifyS256(params.code_verifier as string, code.code_challenge))
      throw refused(
        'code_verifier does not match the code_challenge',
        "Send the code_verifier whose S256 hash was this request's code_challenge: keep the verifier per authorization request (two " +
          'logins at once must not share one slot).',
      );
    const grant = core.repo.get('grants', code.grant_id);
    if (code.consumed_at !== null) {
      // A code is used once; a second use means it leaked, so what it produced is revoked (OAuth 2.1 §4.1.3).
      const family = code.family_id ? core.repo.get('families', code.family_id) : undefined;
      if (family) invalidateFamily(core, family, 'code_replay');
      core.events.emit('code.replayed', { grant_id: code.grant_id, client_id: code.client_id, family_id: code.family_id });
      throw refused(
        'authorization code was already used; the tokens issued from it are revoked',
        'Exchange each code once: a retried or doubled code exchange (a reloaded redirect page, two handlers for one callback) counts as a leaked code.',
      );
    }
    if (now >= code.expires_at)
      throw refused('authorization code has expired', 'Exchange the code as soon as the redirect arrives: codes here live 60 seconds.');
    if (!grant || grant.status !== 'active') throw invalidGrant('the grant behind this code was revoked');
    checkTokenResource(core, grant, params.resource);
    const { family, refreshToken } = startFamily(core, grant);
    core.repo.update('codes', key, { consumed_at: now, family_id: family.id });
    return issueTokens(core, grant, family, refreshToken, grant.scopes, 'authorization_code');
  },
};

const refused = (description: string, hint: string) => new OAuthError('invalid_grant', description, { hint });
