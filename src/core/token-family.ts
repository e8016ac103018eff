import { newId, randomToken, sha256 } from './crypto.js';
import type { Grant, TokenFamily } from './state.js';

const PREFIX = 'aa1';
/**
 * How many rotated generations a family keeps to name a replayed token; an older replay is still recognised
 * (by its handle) but reported without its generation. The full chain is on the event stream.
 */
export const FAMILY_HISTORY = 4;
/** How many issued access tokens a family lists (the event stream has every one). */
export const FAMILY_ACCESS_TOKENS = 1;

/**
 * Refresh tokens are `aa1.<handle>.<secret>`. The handle names the family and appears only inside that
 * family's refresh tokens, so presenting it with a stale secret proves an old token of the family was held:
 * a replay (spec 3.2). Only hashes of handle and token are stored.
 */
export function parseRefreshToken(token: string): { handleHash: string; tokenHash: string } | null {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[0] !== PREFIX || !parts[1] || !parts[2]) return null;
  return { handleHash: sha256(parts[1]), tokenHash: sha256(token) };
}

const mintToken = (handle: string) => `${PREFIX}.${handle}.${randomToken(32)}`;

/** Starts a family for a grant; returns it with its first refresh token. */
export function createFamily(grant: Grant, now: number, refreshLifetime: number, presetToken?: string): { family: TokenFamily; refreshToken: string } {
  let handle: string;
  let refreshToken: string;
  if (presetToken) {
    const parts = presetToken.split('.');
    if (parts.length !== 3 || parts[0] !== PREFIX || !parts[1] || !parts[2]) {
      throw new Error(`refresh token must have the form ${PREFIX}.<handle>.<secret>`);
    }
    handle = parts[1];
    refreshToken = presetToken;
  } else {
    handle = randomToken(16);
    refreshToken = mintToken(handle);
  }
  const family: TokenFamily = {
    id: newId('fam'),
    grant_id: grant.id,
    client_id: grant.client_id,
    handle_hash: sha256(handle),
    current: { generation: 1, hash: sha256(refreshToken), issued_at: now, rotated_at: null, expires_at: now + refreshLifetime },
    history: [],
    rotations: 0,
    created_at: now,
    status: 'active',
    access_tokens: [],
  };
  return { family, refreshToken };
}

/** Spec 3.2: the current token becomes rotated and a new one is the only one that works. Returns the rotated family. */
export function rotateFamily(family: TokenFamily, refreshToken: string, now: number, refreshLifetime: number): { family: TokenFamily; refreshToken: string } {
  const handle = refreshToken.split('.')[1] as string;
  const next = mintToken(handle);
  const { expires_at: _expired, ...previous } = family.current;
  return {
    family: {
      ...family,
      history: [...family.history, { ...previous, hash: fingerprint(previous.hash), rotated_at: now }].slice(-FAMILY_HISTORY),
      current: { generation: family.current.generation + 1, hash: sha256(next), issued_at: now, rotated_at: null, expires_at: now + refreshLifetime },
      rotations: family.rotations + 1,
    },
    refreshToken: next,
  };
}

/**
 * Rotated generations keep only a prefix of their hash (96 bits): it names a replayed token, it never
 * authenticates one (the family handle does), and every stored byte is rewritten on each durable save.
 */
const fingerprint = (hash: string) => hash.slice(0, 16);

/** Which rotated generation a replayed token was, when the family still remembers it. */
export function replayedGeneration(family: TokenFamily, tokenHash: string): number | null {
  return family.history.find((g) => g.hash === fingerprint(tokenHash))?.generation ?? null;
}

/** The family with this access token listed (the newest FAMILY_ACCESS_TOKENS are kept). */
export function withAccessToken(family: TokenFamily, entry: TokenFamily['access_tokens'][number]): TokenFamily {
  return { ...family, access_tokens: [...family.access_tokens, entry].slice(-FAMILY_ACCESS_TOKENS) };
}
