import { authorizationCodeGrant } from './authorization-code.js';
import { refreshTokenGrant } from './refresh-token.js';
import type { GrantType } from './types.js';

/** The grant types the token endpoint dispatches to. */
export const GRANT_TYPES: Readonly<Record<string, GrantType>> = {
  authorization_code: authorizationCodeGrant,
  refresh_token: refreshTokenGrant,
};

export type { GrantType, IssuedTokens, TokenParams, TokenResponse } from './types.js';
