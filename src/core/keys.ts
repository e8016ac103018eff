import { generateKeyPairSync } from 'node:crypto';
import type { JsonWebKeyEC, SigningKey } from './state.js';

type Jose = typeof import('jose');
let joseModule: Promise<Jose> | undefined;
/** jose is loaded on first use, keeping it off the start-up path (ready time is benchmarked). */
export const loadJose = (): Promise<Jose> => (joseModule ??= import('jose'));

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
