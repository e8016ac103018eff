import type { AccessTokenClaims } from './access-token.js';
import type { CoreContext } from '../context.js';
import { invalidRequest } from '../state/errors.js';
import type { TokenParams } from './grants/index.js';
import { revokeGrant } from './grants-admin.js';
import { requireClient } from './registration.js';
import { parseRefreshToken } from './token-family.js';

/**
 * The revocation endpoint (RFC 7009 §2; spec 3.3, 5.7): answers the same whether or not the token was valid. A
 * refresh token ends its grant and every token of it; an access token is refused from then on. Only the client the
 * token was issued to can revoke it.
 */
export async function revokeToken(core: CoreContext, params: TokenParams): Promise<void> {
  if (!params.client_id) throw invalidRequest('client_id is missing');
  const client = requireClient(core, params.client_id);
  const token = params.token;
  if (!token) throw invalidRequest('token is missing');
  const parsed = parseRefreshToken(token);
  if (parsed) {
    const family = core.familyByHandle(parsed.handleHash);
    if (family && family.client_id === client.client_id && family.current.hash === parsed.tokenHash) {
      const grant = core.state.grants[family.grant_id];
      if (grant) await revokeGrant(core, grant.id, 'client');
    }
    return;
  }
  let claims: AccessTokenClaims;
  try {
    claims = await core.signer.verify(token, core.issuer, core.clock.now(), { ignoreExpiry: true });
  } catch {
    return;
  }
  if (claims.client_id !== client.client_id || claims.exp * 1000 <= core.clock.now()) return;
  core.repo.put('revoked_access_tokens', claims.jti, claims.exp * 1000);
  await core.commit();
  core.events.emit('access_token.revoked', { jti: claims.jti, client_id: client.client_id });
}
