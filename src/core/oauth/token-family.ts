import type { CoreContext } from '../context.js';
import { SECOND } from '../state/clock.js';
import { newId, randomToken, sha256 } from '../state/crypto.js';
import type { FamilyEndReason } from '../state/events.js';
import type { Grant, RefreshGeneration, TokenFamily } from '../state/state.js';

const PREFIX = 'aa1';
/**
 * A replayed refresh token counts as a parallel refresh (not a stale one) this soon after its rotation: the grant's
 * hint and the findings both judge by it, so it lives with the family rule.
 */
export const CONCURRENT_WINDOW = 10 * SECOND;
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

/** A new family for a grant, with its first refresh token (a value; `startFamily` stores it). */
function createFamily(
  grant: Grant,
  now: number,
  refreshLifetime: number,
  presetToken?: string,
): { family: TokenFamily; refreshToken: string } {
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

/** Spec 3.2: the current token becomes rotated and a new one is the only one that works. Returns the rotated family (a value). */
function rotateFamily(
  family: TokenFamily,
  refreshToken: string,
  now: number,
  refreshLifetime: number,
): { family: TokenFamily; refreshToken: string } {
  const handle = refreshToken.split('.')[1] as string;
  const next = mintToken(handle);
  const { expires_at: _expired, ...previous } = family.current;
  return {
    family: {
      ...family,
      history: [...family.history, { ...previous, hash: fingerprint(previous.hash), rotated_at: now }].slice(-FAMILY_HISTORY),
      current: {
        generation: family.current.generation + 1,
        hash: sha256(next),
        issued_at: now,
        rotated_at: null,
        expires_at: now + refreshLifetime,
      },
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
export function replayedGeneration(family: TokenFamily, tokenHash: string): RefreshGeneration | null {
  return family.history.find((g) => g.hash === fingerprint(tokenHash)) ?? null;
}

/** The family with this access token listed (the newest FAMILY_ACCESS_TOKENS are kept). */
export function withAccessToken(family: TokenFamily, entry: TokenFamily['access_tokens'][number]): TokenFamily {
  return { ...family, access_tokens: [...family.access_tokens, entry].slice(-FAMILY_ACCESS_TOKENS) };
}

/**
 * Spec 3.2: starts the grant's token family, stored and findable by its handle; returns it with its first refresh
 * token. `presetToken` (fixtures, a scenario) gives that token instead of a new one. Throws, before anything is
 * stored, when another family has the same handle.
 */
export function startFamily(core: CoreContext, grant: Grant, presetToken?: string): { family: TokenFamily; refreshToken: string } {
  const created = createFamily(grant, core.clock.now(), core.lifetimes.refreshToken, presetToken);
  core.indexFamily(created.family);
  core.repo.put('families', created.family.id, created.family);
  return created;
}

/**
 * Spec 3.2, OAuth 2.1 §4.3: rotates the family on a refresh; returns the rotated family and its new refresh token,
 * for `issueTokens` to store once, with the access token it issues from it.
 */
export function rotateRefreshToken(
  core: CoreContext,
  family: TokenFamily,
  presented: string,
): { family: TokenFamily; refreshToken: string } {
  const rotated = rotateFamily(family, presented, core.clock.now(), core.lifetimes.refreshToken);
  core.events.emit('refresh.rotated', {
    grant_id: family.grant_id,
    family_id: family.id,
    from_generation: family.current.generation,
    to_generation: rotated.family.current.generation,
  });
  return rotated;
}

/** Spec 3.2, 7: every refresh and access token of the family stops working. A family already invalid stays as it is. */
export function invalidateFamily(core: CoreContext, family: TokenFamily, reason: FamilyEndReason, replayed: number | null = null): void {
  if (core.state.families[family.id]?.status !== 'active') return;
  core.repo.update('families', family.id, {
    status: 'invalidated',
    invalidated_at: core.clock.now(),
    invalidated_reason: reason,
    ...(reason === 'refresh_replay' ? { replayed_generation: replayed } : {}),
  });
  core.events.emit('family.invalidated', {
    grant_id: family.grant_id,
    family_id: family.id,
    reason,
    ...(replayed !== null ? { replayed_generation: replayed } : {}),
  });
}

/**
 * A fault on purpose: a refresh token of the grant's live family is presented again after its rotation, as a thief
 * or a second copy of the client would. The family dies by the replay rule (spec 3.2), exactly as if the token had
 * reached the token endpoint. A family that never rotated counts its current token as the one used twice.
 */
export function replayStoredRefreshToken(core: CoreContext, grantId: string): void {
  for (const family of Object.values(core.state.families)) {
    if (family.grant_id !== grantId || family.status !== 'active') continue;
    invalidateFamily(core, family, 'refresh_replay', family.history.at(-1)?.generation ?? family.current.generation);
  }
}
