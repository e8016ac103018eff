import { decodeJwt } from 'jose/jwt/decode';
import type { StoredLogin } from './token-store.js';

// What `login` and `status` show of a stored login. Apart from the login flow, so that `status` loads neither the
// flow nor its HTTP client; and jose's decode-only entry point, not its crypto.

export interface LoginResult {
  base_url: string;
  issuer: string;
  client_id: string;
  client_registered: boolean;
  subject: string | null;
  scope: string;
  audience: string | string[] | null;
  resource: string | null;
  expires_at: string;
  refresh_token: boolean;
}

/** Subject and audience as the access token states them (spec 2.3: it can be decoded); null when it is opaque. */
export function tokenClaims(token: string): Record<string, unknown> | null {
  try {
    return decodeJwt(token);
  } catch {
    return null;
  }
}

export function describeLogin(baseUrl: string, issuer: string, login: StoredLogin, registered: boolean): LoginResult {
  const claims = tokenClaims(login.access_token);
  return {
    base_url: baseUrl,
    issuer,
    client_id: login.client_id,
    client_registered: registered,
    subject: typeof claims?.sub === 'string' ? claims.sub : null,
    scope: login.scope,
    audience: (claims?.aud as string | string[] | undefined) ?? null,
    resource: login.resource,
    expires_at: new Date(login.expires_at).toISOString(),
    refresh_token: login.refresh_token !== null,
  };
}
