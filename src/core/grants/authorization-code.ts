import { sha256 } from '../crypto.js';
import { invalidGrant } from '../errors.js';
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
    if (!code || code.client_id !== client.client_id) throw invalidGrant('authorization code is unknown or was issued to another client');
    if (code.redirect_uri !== params.redirect_uri) throw invalidGrant('redirect_uri differs from the one in the authorization request');
    if (!verifyS256(params.code_verifier as string, code.code_challenge))
      throw invalidGrant('code_verifier does not match the code_challenge');
    const grant = core.repo.get('grants', code.grant_id);
    if (code.consumed_at !== null) {
      // A code is used once; a second use means it leaked, so what it produced is revoked (OAuth 2.1 §4.1.3).
      const family = code.family_id ? core.repo.get('families', code.family_id) : undefined;
      if (family) invalidateFamily(core, family, 'code_replay');
      core.events.emit('code.replayed', { grant_id: code.grant_id, client_id: code.client_id, family_id: code.family_id });
      await core.commit();
      throw invalidGrant('authorization code was already used; the tokens issued from it are revoked');
    }
    if (now >= code.expires_at) throw invalidGrant('authorization code has expired');
    if (!grant || grant.status !== 'active') throw invalidGrant('the grant behind this code was revoked');
    checkTokenResource(core, grant, params.resource);
    const { family, refreshToken } = startFamily(core, grant);
    core.repo.update('codes', key, { consumed_at: now, family_id: family.id });
    return issueTokens(core, grant, family, refreshToken, grant.scopes, 'authorization_code');
  },
};
