import type { CoreContext } from '../context.js';
import { OAuthError, invalidRequest } from '../state/errors.js';
import { GRANT_TYPES, type IssuedTokens, type TokenParams, type TokenResponse } from './grants/index.js';
import { requireClient } from './registration.js';

/**
 * Spec 4.3, OAuth 2.1 §3.2: the token endpoint. Checks the grant type and the parameters it requires, then that
 * the client registered that grant type, and dispatches to the grant type's module (src/core/grants/), which changes the
 * state through the repository and never commits: the exchange commits once, here.
 */
export async function exchangeToken(core: CoreContext, params: TokenParams): Promise<TokenResponse> {
  const grantType = params.grant_type;
  if (!grantType) throw invalidRequest('grant_type is missing');
  const handler = Object.hasOwn(GRANT_TYPES, grantType) ? GRANT_TYPES[grantType] : undefined;
  if (!handler)
    throw new OAuthError('unsupported_grant_type', `grant_type "${grantType}" is not supported; use authorization_code or refresh_token`);
  for (const name of handler.parameters) if (!params[name]) throw invalidRequest(`${name} is missing`);
  // RFC 7591 §2, RFC 6749 §5.2: a client uses only the grant types it registered; refused before any code or family is looked at.
  const client = requireClient(core, params.client_id as string);
  if (!client.grant_types.includes(grantType)) {
    throw new OAuthError(
      'unauthorized_client',
      `grant_type ${grantType} is not among the grant_types this client registered (${client.grant_types.join(', ')}); register again ` +
        `with ${grantType} in grant_types to use it`,
    );
  }
  // The exchange's one commit, at its end whether it answers or refuses: a refusal that changed the state (a replayed
  // code or refresh token ends its family) is durable before it is said, and tokens only once what they stand for is.
  let issued: IssuedTokens;
  try {
    issued = await handler.handler(core, params, client);
  } finally {
    await core.commit();
  }
  issued.announce();
  return issued.response;
}
