import { createHash } from 'node:crypto';
import { safeEqual } from '../state/crypto.js';

/** RFC 7636 §4.1/§4.2: 43–128 characters from the unreserved set. */
const PKCE_VALUE = /^[A-Za-z0-9\-._~]{43,128}$/;

export const isValidPkceValue = (value: string): boolean => PKCE_VALUE.test(value);

/** RFC 7636 §4.6: BASE64URL(SHA256(ASCII(code_verifier))) == code_challenge, compared in constant time. */
export function verifyS256(verifier: string, challenge: string): boolean {
  if (!isValidPkceValue(verifier)) return false;
  return safeEqual(createHash('sha256').update(verifier, 'ascii').digest('base64url'), challenge);
}
