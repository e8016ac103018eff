import { epochSeconds } from '../state/clock.js';
import type { CoreContext } from '../context.js';
import { newId } from '../state/crypto.js';
import { ProblemError } from '../state/errors.js';
import type { GrantRevoker } from '../state/events.js';
import { isRetiredScope, isSupportedScope } from './scopes.js';
import type { Grant, TokenFamily } from '../state/state.js';
import { invalidateFamily, startFamily } from './token-family.js';

/** A grant from fixtures or a scenario, e.g. a legacy grant that still carries retired scopes (spec 9). */
export interface GrantSeed {
  /** The grant's id (a scenario names its grants); default a new one. */
  id?: string;
  client: { client_id: string; client_name: string; redirect_uris: readonly string[] };
  person_id: string;
  scopes: string[];
  resource: 'mcp' | null;
  /** The family's current refresh token, `aa1.<handle>.<secret>`; stored only as a hash. Without it, no family. */
  refresh_token?: string;
  /** Default active; a revoked seed grant's family is invalidated as a revocation would. */
  status?: 'active' | 'revoked';
  /** Default: when the state is created. */
  created_at?: number;
}

/** What a new grant is made of; the rest every grant starts with (active, never used). */
export type NewGrant = Pick<Grant, 'id' | 'client_id' | 'person_id' | 'scopes' | 'resource' | 'created_at'>;

/** Puts a new grant in place (consent, a test's tokens, a seed); returns it. */
export function createGrant(core: CoreContext, fields: NewGrant): Grant {
  const { id, client_id, person_id, scopes, resource, created_at } = fields;
  // Fields in the order every grant is stored in.
  const grant: Grant = { id, client_id, person_id, scopes, resource, created_at, last_used_at: null, status: 'active' };
  return core.repo.put('grants', grant.id, grant);
}

/** Tells the event bus of a grant a person (or a test) gave; seed grants come with the state and are not told. */
export function announceGrant(core: CoreContext, grant: Grant): void {
  core.events.emit('grant.created', {
    grant_id: grant.id,
    client_id: grant.client_id,
    person_id: grant.person_id,
    scopes: grant.scopes,
    resource: grant.resource,
  });
}

/** A grant as listed: with its client's name and its token families. */
export interface GrantView extends Grant {
  client_name: string;
  families: Array<Pick<TokenFamily, 'id' | 'status' | 'rotations' | 'invalidated_reason' | 'invalidated_at'> & { generation: number }>;
}

/**
 * Spec 3.3: the stored grants (kept so that they can be revoked), newest first, each with its client's name and its
 * token families: what the settings page, the admin API and the CLI show. `filter` narrows to a person or a client.
 */
export function listGrants(core: CoreContext, filter: GrantFilter = {}): GrantView[] {
  return pageOfGrants(core, filter, { offset: 0, limit: Infinity }).grants;
}

export interface GrantFilter {
  person_id?: string;
  client_id?: string;
}

/** One page of grants, and how many there are in all: what a list that may hold thousands shows at once. */
export interface GrantPage {
  grants: GrantView[];
  /** Grants that match the filter, on every page. */
  total: number;
  offset: number;
  limit: number;
  /** The clients with an active grant among all that match, not only this page's. */
  active_clients: string[];
}

/**
 * `limit` grants from `offset` on, newest first; `activeFirst`: the active ones first (the settings page). Views are
 * made for the page alone, so a page of a state with many grants costs a sort, not a view of each grant.
 */
export function pageOfGrants(
  core: CoreContext,
  filter: GrantFilter,
  page: { offset: number; limit: number; activeFirst?: boolean },
): GrantPage {
  const all = matching(core, filter);
  const order = page.activeFirst
    ? (a: Grant, b: Grant) => Number(a.status !== 'active') - Number(b.status !== 'active') || newestFirst(a, b)
    : newestFirst;
  const active = new Set(all.filter((g) => g.status === 'active').map((g) => g.client_id));
  return {
    grants: views(core, all.sort(order).slice(page.offset, page.offset + page.limit)),
    total: all.length,
    offset: page.offset,
    limit: page.limit,
    active_clients: [...active],
  };
}

/** One grant as the lists show it. */
export const grantView = (core: CoreContext, grant: Grant): GrantView => views(core, [grant])[0]!;

const newestFirst = (a: Grant, b: Grant) => b.created_at - a.created_at;

/** The grants that match, the latest made first: the state keeps them in the order made, and grants made in one millisecond sort (stably) by it. */
const matching = (core: CoreContext, filter: GrantFilter): Grant[] =>
  Object.values(core.state.grants)
    .filter((g) => (!filter.person_id || g.person_id === filter.person_id) && (!filter.client_id || g.client_id === filter.client_id))
    .reverse();

/** Each grant with its client's name and its token families. */
function views(core: CoreContext, grants: Grant[]): GrantView[] {
  const wanted = new Set(grants.map((g) => g.id));
  // Families by grant, in one pass: a state of many grants must not cost grants × families.
  const familiesOf = new Map<string, GrantView['families']>();
  for (const f of Object.values(core.state.families)) {
    if (!wanted.has(f.grant_id)) continue;
    const view = {
      id: f.id,
      status: f.status,
      rotations: f.rotations,
      generation: f.current.generation,
      invalidated_reason: f.invalidated_reason,
      invalidated_at: f.invalidated_at,
    };
    const list = familiesOf.get(f.grant_id);
    if (list) list.push(view);
    else familiesOf.set(f.grant_id, [view]);
  }
  return grants.map((g) => ({
    ...g,
    client_name: core.state.clients[g.client_id]?.client_name ?? '(unbekannter Client)',
    families: familiesOf.get(g.id) ?? [],
  }));
}

/**
 * Spec 3.3, 5.7: the person (or an admin, or the client itself, RFC 7009) ends a grant; every family of it is
 * invalidated, so it applies from the next request. `personId`: only that person's grant (404 otherwise).
 */
export async function revokeGrant(core: CoreContext, id: string, by: GrantRevoker, personId?: string): Promise<Grant> {
  const grant = Object.hasOwn(core.state.grants, id) ? core.state.grants[id] : undefined;
  if (!grant || (personId !== undefined && grant.person_id !== personId))
    throw new ProblemError('grant_not_found', `no grant with id "${id}"`);
  if (grant.status === 'revoked') return grant;
  const revoked = core.repo.update('grants', id, { status: 'revoked', revoked_at: core.clock.now(), revoked_by: by });
  for (const family of Object.values(core.state.families))
    if (family.grant_id === id) invalidateFamily(core, family, by === 'client' ? 'token_revoked' : 'grant_revoked');
  await core.commit();
  core.events.emit('grant.revoked', { grant_id: grant.id, client_id: grant.client_id, by });
  return revoked;
}

/**
 * Creates a fixtures or scenario grant, with its client and (given a refresh token) its family: a new state only.
 * A revoked seed ends as revocation would (spec 3.3); retired scopes are allowed, as a legacy grant has them (spec 9).
 */
export function seedGrant(core: CoreContext, seed: GrantSeed): void {
  const now = core.clock.now();
  const existing = core.state.clients[seed.client.client_id];
  if (!existing) {
    core.repo.put('clients', seed.client.client_id, {
      ...seed.client,
      client_id_issued_at: epochSeconds(now),
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    });
  }
  const unknown = seed.scopes.filter((s) => !isSupportedScope(s) && !isRetiredScope(s));
  if (unknown.length > 0) throw new Error(`seed grant for ${seed.client.client_id}: unknown scope ${unknown.join(', ')}`);
  if (!core.person(seed.person_id)) throw new Error(`seed grant for ${seed.client.client_id}: unknown person "${seed.person_id}"`);
  const id = seed.id ?? newId('grant');
  if (Object.hasOwn(core.state.grants, id)) throw new Error(`seed grant ${id}: a grant with this id exists already`);
  const grant = createGrant(core, {
    id,
    client_id: seed.client.client_id,
    person_id: seed.person_id,
    scopes: [...seed.scopes],
    resource: seed.resource === 'mcp' ? '{base_url}/mcp' : null,
    created_at: seed.created_at ?? now,
  });
  const family = seed.refresh_token ? startFamily(core, grant, seed.refresh_token).family : undefined;
  if (seed.status === 'revoked') {
    core.repo.update('grants', grant.id, { status: 'revoked', revoked_at: now, revoked_by: 'person' });
    if (family) invalidateFamily(core, family, 'grant_revoked');
  }
}
