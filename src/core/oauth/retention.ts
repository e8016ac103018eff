import { DAY, HOUR } from '../state/clock.js';
import type { Repository } from '../state/repository.js';
import type { Client, TokenFamily } from '../state/state.js';

/**
 * How long finished records stay in the state, on the emulator clock (docs/serve.md "Retention"). The spec
 * names only the idempotency window (24 hours, spec 8); the rest are the emulator's choices, long enough to
 * poll a result or look at a dead family in the dashboard, short enough that a long run's state stays small.
 */
export interface Retention {
  /** Research jobs that succeeded or failed, from when they finished; a poll after that is 404. */
  researchJobs: number;
  /** Training documents whose ingest failed, from when they were received. Indexed ones are the knowledge base and stay. */
  failedTraining: number;
  /** Write actions the person rejected, or that were applied, from when that happened. */
  decidedActions: number;
  /** Token families, from when they were invalidated or their refresh token expired. */
  deadFamilies: number;
  /** Authorization codes past their expiry: kept this long to recognise a replay (and revoke what the code gave). */
  expiredCodes: number;
  /**
   * Clients never used (no grant was ever made for them), from their registration: open registration must not let a
   * long run collect clients nobody uses (a page in the developer's browser can register them).
   */
  unusedClients: number;
}

export const DEFAULT_RETENTION: Retention = {
  researchJobs: 7 * DAY,
  failedTraining: 7 * DAY,
  decidedActions: 7 * DAY,
  deadFamilies: 7 * DAY,
  expiredCodes: DAY,
  unusedClients: DAY,
};

/** The names `serve --retention` takes, and the field each sets. */
export const RETENTION_NAMES = {
  jobs: 'researchJobs',
  'failed-training': 'failedTraining',
  actions: 'decidedActions',
  families: 'deadFamilies',
  codes: 'expiredCodes',
  'unused-clients': 'unusedClients',
} as const satisfies Record<string, keyof Retention>;

/** When a family stopped being of use: invalidated, or its current refresh token expired. */
export const familyEndedAt = (family: TokenFamily): number =>
  family.status === 'invalidated' ? (family.invalidated_at ?? family.created_at) : family.current.expires_at;

/** The ids of the clients a grant was ever made for (grants stay in the state, revoked ones too). Only clients that
 * registered themselves go unused: a scenario's or the fixtures' are there on purpose. */
const clientsInUse = (repo: Repository): Set<string> => new Set(repo.values('grants').map((g) => g.client_id));

/** When the client, registered and never used, is let go of. */
export const unusedClientEndsAt = (client: Client, retention: Retention): number =>
  client.client_id_issued_at * 1000 + retention.unusedClients;

/** The soonest moment an unused client is let go of, or null when every client has a grant. */
export function nextUnusedClientExpiry(repo: Repository, retention: Retention): number | null {
  const used = clientsInUse(repo);
  let soonest: number | null = null;
  for (const [id, client] of repo.entries('clients')) {
    if (used.has(id) || !client.self_registered) continue;
    const at = unusedClientEndsAt(client, retention);
    if (soonest === null || at < soonest) soonest = at;
  }
  return soonest;
}

/**
 * Removes what retention lets go of as of `now`, plus what is expired by rule: idempotency records past their
 * 24 hours (spec 8) and revoked access-token ids an hour past the token's own expiry (it is refused by `exp`
 * then). Returns the families removed (the caller forgets their refresh-token handles) and how many entries went.
 */
export function applyRetention(repo: Repository, now: number, retention: Retention): { removed: number; families: TokenFamily[] } {
  let removed = 0;
  const families: TokenFamily[] = [];
  const drop = (collection: Parameters<Repository['delete']>[0], key: string) => {
    if (repo.delete(collection, key)) removed++;
  };
  for (const [hash, code] of repo.entries('codes')) if (code.expires_at + retention.expiredCodes <= now) drop('codes', hash);
  for (const [id, record] of repo.entries('idempotency')) if (record.expires_at <= now) drop('idempotency', id);
  for (const [jti, exp] of repo.entries('revoked_access_tokens')) if (exp + HOUR <= now) drop('revoked_access_tokens', jti);
  for (const [id, family] of repo.entries('families')) {
    if (familyEndedAt(family) + retention.deadFamilies <= now) {
      drop('families', id);
      families.push(family);
    }
  }
  for (const [id, job] of repo.entries('research_jobs')) {
    if ((job.status === 'succeeded' || job.status === 'failed') && (job.finished_at ?? job.created_at) + retention.researchJobs <= now)
      drop('research_jobs', id);
  }
  for (const [id, doc] of repo.entries('training_documents'))
    if (doc.processing_step === 'failed' && doc.created_at + retention.failedTraining <= now) drop('training_documents', id);
  for (const [id, action] of repo.entries('pending_actions')) {
    const decidedAt = action.status === 'applied' ? action.applied_at : action.status === 'rejected' ? action.decided_at : undefined;
    if (decidedAt !== undefined && decidedAt + retention.decidedActions <= now) drop('pending_actions', id);
  }
  removed += dropUnusedClients(repo, now, retention);
  return { removed, families };
}

/** Removes the clients that registered themselves, never got a grant, and are past `retention.unusedClients`; returns how many. */
export function dropUnusedClients(repo: Repository, now: number, retention: Retention): number {
  let removed = 0;
  const used = clientsInUse(repo);
  for (const [id, client] of repo.entries('clients'))
    if (client.self_registered && !used.has(id) && unusedClientEndsAt(client, retention) <= now && repo.delete('clients', id)) removed++;
  return removed;
}
