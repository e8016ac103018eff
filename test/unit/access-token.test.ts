/**
 * RFC 9068 §4, RFC 7519 §4.1.4: the access token signer of the core verifies our tokens, remembers the ones that
 * verified, and still checks expiry, nbf and issuer on every call; on given times, no clock, no socket. Over HTTP
 * the same rule is held in test/unit/access-token-http.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { AccessTokenSigner, type AccessTokenClaims } from '../../src/core/oauth/access-token.js';
import { generateSigningKey } from '../../src/core/oauth/keys.js';

const ISSUER = 'http://127.0.0.1:4100';
const T0 = Date.UTC(2026, 10, 21, 9, 0, 0);

async function signed(overrides: Partial<AccessTokenClaims> = {}) {
  const signer = new AccessTokenSigner(await generateSigningKey(T0));
  const claims: AccessTokenClaims = {
    iss: ISSUER,
    sub: 'person_erika',
    aud: `${ISSUER}/mcp`,
    client_id: 'client_1',
    scope: 'ask',
    iat: T0 / 1000,
    exp: T0 / 1000 + 900,
    jti: 'jti_1',
    grant_id: 'grant_1',
    family_id: 'family_1',
    ...overrides,
  };
  return { signer, token: await signer.sign(claims), claims };
}

/** A token with one character of its signature changed: same header and claims, not our signature. */
const tampered = (token: string): string => {
  const last = token.at(-2) === 'A' ? 'B' : 'A';
  return `${token.slice(0, -2)}${last}${token.at(-1)}`;
};

describe('RFC 9068 §4 / RFC 7519 §4.1.4: verifying our access tokens, verified once and then remembered', () => {
  it('a token that verified is accepted again until exp, and refused as expired at exp, however often it was seen', async () => {
    const { signer, token, claims } = await signed();
    expect(await signer.verify(token, ISSUER, T0)).toMatchObject({ jti: 'jti_1', scope: 'ask' });
    expect(await signer.verify(token, ISSUER, T0 + 899_999)).toMatchObject({ jti: 'jti_1' });
    await expect(signer.verify(token, ISSUER, claims.exp * 1000)).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' });
    // The revocation path reads expired tokens too.
    expect(await signer.verify(token, ISSUER, claims.exp * 1000 + 60_000, { ignoreExpiry: true })).toMatchObject({ jti: 'jti_1' });
  });

  it('an expired token seen first, and a token seen first through the revocation path, are still refused as expired', async () => {
    const { signer, token, claims } = await signed();
    await expect(signer.verify(token, ISSUER, claims.exp * 1000)).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' });
    const second = await signed();
    await second.signer.verify(second.token, ISSUER, claims.exp * 1000 + 1, { ignoreExpiry: true });
    await expect(second.signer.verify(second.token, ISSUER, claims.exp * 1000 + 1)).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' });
  });

  it('a changed signature is refused after the genuine token verified; so is the genuine token under another issuer', async () => {
    const { signer, token } = await signed();
    await signer.verify(token, ISSUER, T0);
    await expect(signer.verify(tampered(token), ISSUER, T0)).rejects.toMatchObject({ code: 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED' });
    await expect(signer.verify(token, 'http://127.0.0.1:9999', T0)).rejects.toMatchObject({ code: 'ERR_JWT_CLAIM_VALIDATION_FAILED' });
  });

  it('a token that is not yet valid (nbf) is refused until nbf, also when it was seen before', async () => {
    const { signer, token } = await signed({ nbf: T0 / 1000 + 60 });
    await signer.verify(token, ISSUER, T0 + 60_000);
    await expect(signer.verify(token, ISSUER, T0)).rejects.toMatchObject({ code: 'ERR_JWT_CLAIM_VALIDATION_FAILED', claim: 'nbf' });
  });

  it('the claims handed out cannot be changed by one request for the next', async () => {
    const { signer, token } = await signed();
    const first = await signer.verify(token, ISSUER, T0);
    expect(() => {
      (first as { scope: string }).scope = 'ask research';
    }).toThrow(TypeError);
    expect((await signer.verify(token, ISSUER, T0)).scope).toBe('ask');
  });
});
