import type { CryptoKey, JWTPayload } from 'jose';
import { epochSeconds } from './clock.js';
import { loadJose } from './keys.js';
import type { SigningKey } from './state.js';

/** RFC 9068 claims of our access tokens, plus references to the grant and token family. */
export interface AccessTokenClaims extends JWTPayload {
  iss: string;
  sub: string;
  aud: string;
  client_id: string;
  scope: string;
  iat: number;
  exp: number;
  jti: string;
  grant_id: string;
  family_id: string;
}

const encoder = new TextEncoder();

/** Signs and verifies RFC 9068 JWT access tokens (ES256, `typ: at+jwt`) with the state's signing key. */
export class AccessTokenSigner {
  readonly #key: SigningKey;
  #privateKey: Promise<CryptoKey> | undefined;
  #publicKey: Promise<CryptoKey> | undefined;

  constructor(key: SigningKey) {
    this.#key = key;
  }

  get kid(): string {
    return this.#key.kid;
  }

  /** Imports the keys ahead of the first request. */
  async warmUp(): Promise<void> {
    await Promise.all([this.#private(), this.#public()]);
  }

  #private(): Promise<CryptoKey> {
    return (this.#privateKey ??= loadJose().then((j) => j.importJWK({ ...this.#key.private_jwk }, 'ES256') as Promise<CryptoKey>));
  }

  #public(): Promise<CryptoKey> {
    return (this.#publicKey ??= loadJose().then((j) => j.importJWK({ ...this.#key.public_jwk }, 'ES256') as Promise<CryptoKey>));
  }

  /** RFC 9068 §2: a JWS over the claims with header `typ: at+jwt`. The claims are complete, so jose's JWS layer signs them directly. */
  async sign(claims: AccessTokenClaims): Promise<string> {
    const [{ CompactSign }, key] = await Promise.all([loadJose(), this.#private()]);
    return new CompactSign(encoder.encode(JSON.stringify(claims))).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: this.#key.kid }).sign(key);
  }

  /**
   * Verifies signature, `typ`, `iss` and `exp` at the clock's time. Throws jose's typed errors
   * (e.g. `ERR_JWT_EXPIRED`); the caller turns them into `invalid_token`.
   */
  async verify(token: string, issuer: string, nowMs: number, options: { ignoreExpiry?: boolean } = {}): Promise<AccessTokenClaims> {
    const [{ jwtVerify }, key] = await Promise.all([loadJose(), this.#public()]);
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['ES256'],
      typ: 'at+jwt',
      issuer,
      currentDate: new Date(nowMs),
      requiredClaims: ['sub', 'aud', 'exp', 'iat', 'jti', 'client_id', 'scope'],
      ...(options.ignoreExpiry ? { clockTolerance: Number.MAX_SAFE_INTEGER } : {}),
    });
    return payload as AccessTokenClaims;
  }
}

export const tokenTimes = (nowMs: number, lifetimeMs: number) => ({
  iat: epochSeconds(nowMs),
  exp: epochSeconds(nowMs) + Math.floor(lifetimeMs / 1000),
});
