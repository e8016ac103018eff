import { createHash, hash as cryptoHash, randomBytes, timingSafeEqual } from 'node:crypto';

const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let poolOffset = POOL_SIZE;

/**
 * URL-safe random string with `bytes` bytes of entropy. Bytes come from a pool refilled from the CSPRNG,
 * because one small synchronous call per token was a measurable share of a token request. Each byte is used once.
 */
export function randomToken(bytes = 32): string {
  if (bytes > POOL_SIZE) return randomBytes(bytes).toString('base64url');
  if (poolOffset + bytes > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    poolOffset = 0;
  }
  const token = pool.toString('base64url', poolOffset, poolOffset + bytes);
  poolOffset += bytes;
  return token;
}

/** Secrets at rest are stored as this hash, never as themselves. */
export const sha256 = (value: string): string => cryptoHash('sha256', value, 'base64url');

/** Constant-time comparison of two strings of any length (both are hashed first, so lengths leak nothing). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

/** Random bytes for identifiers of another form (see formatId). */
export const randomBytesFor = (length: number): Uint8Array => randomBytes(length);

/** Short random identifier with a readable prefix, e.g. `grant_3fZ…`. */
export const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('base64url')}`;
