import { DAY, HOUR } from './clock.js';
import type { Repository } from './repository.js';
import type { TokenFamily } from './state.js';

/**
 * How long finished records stay in the state, on the emulator clock (README "State: retention"). The spec
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
}

export const DEFAULT_RETENTION: Retention = {
  researchJobs: 7 * DAY,
  failedTraining: 7 * DAY,
  decidedActions: 7 * DAY,
  deadFamilies: 7 * DAY,
  expiredCodes: DAY,
};

/** The names `serve --retention` takes, and the field each sets. */
export const RETENTION_NAMES = {
  jobs: 'researchJobs',
  'failed-training': 'failedTraining',
  actions: 'decidedActions',
  families: 'deadFamilies',
  codes: 'expiredCodes',
} as const satisfies Record<string, keyof Retention>;

/** When a family stopped being of use: invalidated, or its current refresh token expired. */
export const familyEndedAt = (family: TokenFamily): number =>
  family.status === 'invalidated' ? (family.invalidated_at ?? family.created_at) : family.current.expires_at;

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
  return { removed, families };
}
