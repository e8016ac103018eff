import type { CryptoKey, JWTPayload } from 'jose';
import { epochSeconds } from '../state/clock.js';
import { sha256 } from '../state/crypto.js';
import { loadJose } from './keys.js';
import type { SigningKey } from '../state/state.js';

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

/** Tokens whose signature and fixed claims were checked, kept so a client's next request skips the ES256 verify. */
const VERIFIED_CACHE_SIZE = 10_000;

interface Verified {
  claims: AccessTokenClaims;
  issuer: string;
}

/** Signs and verifies RFC 9068 JWT access tokens (ES256, `typ: at+jwt`) with the state's signing key. */
export class AccessTokenSigner {
  readonly #key: SigningKey;
  #privateKey: Promise<CryptoKey> | undefined;
  #publicKey: Promise<CryptoKey> | undefined;
  /**
   * By the SHA-256 of the token: a hit needs the exact bytes that once verified, and no token is compared or
   * kept in the clear. The signature, `typ`, `iss` and the required claims do not change with time; `exp` and
   * `nbf` do, so a hit checks them against the clock of this request exactly as jose would.
   */
  readonly #verified = new Map<string, Verified>();

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
    return (this.#privateKey ??= loadJose().then(async (j) => asCryptoKey(await j.importJWK({ ...this.#key.private_jwk }, 'ES256'))));
  }

  #public(): Promise<CryptoKey> {
    return (this.#publicKey ??= loadJose().then(async (j) => asCryptoKey(await j.importJWK({ ...this.#key.public_jwk }, 'ES256'))));
  }

  /** RFC 9068 §2: a JWS over the claims with header `typ: at+jwt`. The claims are complete, so jose's JWS layer signs them directly. */
  async sign(claims: AccessTokenClaims): Promise<string> {
    const [{ CompactSign }, key] = await Promise.all([loadJose(), this.#private()]);
    return new CompactSign(encoder.encode(JSON.stringify(claims)))
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: this.#key.kid })
      .sign(key);
  }

  /**
   * Verifies signature, `typ`, `iss` and `exp` at the clock's time. Throws jose's typed errors
   * (e.g. `ERR_JWT_EXPIRED`); the caller turns them into `invalid_token`.
   */
  async verify(token: string, issuer: string, nowMs: number, options: { ignoreExpiry?: boolean } = {}): Promise<AccessTokenClaims> {
    const digest = sha256(token);
    const hit = this.#verified.get(digest);
    if (hit && hit.issuer === issuer) return this.#checkTimes(hit.claims, nowMs, options);
    const [{ jwtVerify }, key] = await Promise.all([loadJose(), this.#public()]);
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['ES256'],
      typ: 'at+jwt',
      issuer,
      currentDate: new Date(nowMs),
      requiredClaims: ['sub', 'aud', 'exp', 'iat', 'jti', 'client_id', 'scope'],
      ...(options.ignoreExpiry ? { clockTolerance: Number.MAX_SAFE_INTEGER } : {}),
    });
    // Shared by every request that presents this token: frozen, so none can change what the next one sees.
    const claims = Object.freeze(payload) as AccessTokenClaims;
    if (this.#verified.size >= VERIFIED_CACHE_SIZE) this.#verified.delete(this.#verified.keys().next().value!);
    this.#verified.set(digest, { claims, issuer });
    return claims;
  }

  /** jose's `nbf` and `exp` rules (RFC 7519 §4.1.4, 4.1.5, no leeway) for a token verified before. */
  async #checkTimes(claims: AccessTokenClaims, nowMs: number, options: { ignoreExpiry?: boolean }): Promise<AccessTokenClaims> {
    if (options.ignoreExpiry) return claims;
    const now = epochSeconds(nowMs);
    const early = typeof claims.nbf === 'number' && claims.nbf > now;
    if (!early && claims.exp > now) return claims;
    // jose's own error types, so the caller tells an expired token from another refusal as for a first verify.
    const { errors } = await loadJose();
    if (early) throw new errors.JWTClaimValidationFailed('"nbf" claim timestamp check failed', claims, 'nbf', 'check_failed');
    throw new errors.JWTExpired('"exp" claim timestamp check failed', claims, 'exp', 'check_failed');
  }
}

export const tokenTimes = (nowMs: number, lifetimeMs: number) => ({
  iat: epochSeconds(nowMs),
  exp: epochSeconds(nowMs) + Math.floor(lifetimeMs / 1000),
});

/** importJWK answers a CryptoKey for an EC JWK (a Uint8Array only for symmetric `oct` keys, which we never store). */
function asCryptoKey(key: CryptoKey | Uint8Array): CryptoKey {
  if (key instanceof Uint8Array) throw new Error('signing key is not an EC key');
  return key;
}
