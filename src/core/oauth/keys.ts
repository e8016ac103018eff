import { generateKeyPairSync } from 'node:crypto';
import type { JsonWebKeyEC, SigningKey } from '../state/state.js';

/** The parts of jose the server signs, verifies and imports keys with. */
type Jose = typeof import('jose/key/import') &
  typeof import('jose/jws/compact/sign') &
  typeof import('jose/jwt/verify') &
  typeof import('jose/jwk/thumbprint') & { errors: typeof import('jose/errors') };
let joseModule: Promise<Jose> | undefined;
/**
 * jose by its subpaths: the package's index loads every algorithm and format, which the start-up would pay for
 * (docs/bench.md "Start-up, first requests and memory"). Loaded once, before the server says it is ready (the
 * signing keys are imported then).
 */
export const loadJose = (): Promise<Jose> =>
  (joseModule ??= Promise.all([
    import('jose/key/import'),
    import('jose/jws/compact/sign'),
    import('jose/jwt/verify'),
    import('jose/jwk/thumbprint'),
    import('jose/errors'),
  ]).then(([keyImport, sign, verify, thumbprint, errors]) => ({ ...keyImport, ...sign, ...verify, ...thumbprint, errors })));

/** A fresh ES256 key pair; kid is the RFC 7638 thumbprint of the public key. */
export async function generateSigningKey(now: number): Promise<SigningKey> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const private_jwk = privateKey.export({ format: 'jwk' }) as unknown as JsonWebKeyEC;
  const public_jwk = publicKey.export({ format: 'jwk' }) as unknown as JsonWebKeyEC;
  const { calculateJwkThumbprint } = await loadJose();
  const kid = await calculateJwkThumbprint({ kty: 'EC', crv: public_jwk.crv, x: public_jwk.x, y: public_jwk.y });
  return { kid, alg: 'ES256', created_at: now, private_jwk, public_jwk };
}

/** RFC 7517 JWK Set served at jwks_uri: public parts only. */
export function publicJwks(keys: readonly SigningKey[]): { keys: Array<Record<string, string>> } {
  return {
    keys: keys.map((k) => ({ kty: 'EC', crv: 'P-256', x: k.public_jwk.x, y: k.public_jwk.y, kid: k.kid, alg: 'ES256', use: 'sig' })),
  };
}
