import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** URL-safe random string with `bytes` bytes of entropy. */
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString('base64url');

/** Secrets at rest are stored as this hash, never as themselves. */
export const sha256 = (value: string): string => createHash('sha256').update(value).digest('base64url');

/** Constant-time comparison of two strings of any length (both are hashed first, so lengths leak nothing). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

/** Short random identifier with a readable prefix, e.g. `grant_3fZ…`. */
export const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('base64url')}`;
