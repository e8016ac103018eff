import type { ChargeEntry } from './charges.js';
import type { Core } from './core.js';
import type { FaultView, ReplayEntry, RequestEntry, Snapshot } from '../protocol/snapshot.js';

export type { FaultView, ReplayEntry, RequestEntry, Snapshot } from '../protocol/snapshot.js';

/** How many of the newest items a snapshot carries per list; older ones stay in the state file. */
export const SNAPSHOT_LIMITS = { families: 200, jobs: 200, charges: 200, actions: 200, requests: 200 } as const;

const newest = <T extends { created_at: number }>(items: Iterable<T>, limit: number): T[] =>
  [...items].sort((a, b) => a.created_at - b.created_at).slice(-limit);

/** Builds the snapshot from the core's state at this moment (synchronous, so `seq` matches it exactly). */
export function buildSnapshot(
  core: Core,
  extra: { charges: ChargeEntry[]; replays: ReplayEntry[]; requests: RequestEntry[]; faults?: FaultView[] },
): Snapshot {
  const s = core.state;
  // First: judging the run-wide findings may publish some, which this snapshot then already holds.
  const findings = core.findings.list();
  return {
    seq: core.events.seq,
    now: core.clock.now(),
    service: { base_url: core.urls.baseUrl, auth_url: core.urls.authUrl, issuer: core.issuer },
    persons: Object.fromEntries(core.persons.map((p) => [p.id, p.name])),
    clients: Object.fromEntries(
      Object.values(s.clients).map((c) => [
        c.client_id,
        { client_id: c.client_id, client_name: c.client_name, registered_at: c.client_id_issued_at * 1000 },
      ]),
    ),
    grants: Object.values(s.grants).map((g) => ({
      ...g,
      scopes: [...g.scopes],
      revoked_at: g.revoked_at ?? null,
      revoked_by: g.revoked_by ?? null,
    })),
    families: newest(Object.values(s.families), SNAPSHOT_LIMITS.families).map((f) => ({
      id: f.id,
      grant_id: f.grant_id,
      client_id: f.client_id,
      status: f.status,
      created_at: f.created_at,
      invalidated_at: f.invalidated_at ?? null,
      invalidated_reason: f.invalidated_reason ?? null,
      replayed_generation: f.replayed_generation ?? null,
      chain: [...f.history, f.current].map((g) => ({ generation: g.generation, issued_at: g.issued_at, rotated_at: g.rotated_at })),
      access_tokens: f.access_tokens.map((t) => ({
        jti: t.jti,
        issued_at: t.issued_at,
        expires_at: t.expires_at,
        revoked: Object.hasOwn(s.revoked_access_tokens, t.jti),
      })),
    })),
    research: newest(Object.values(s.research_jobs), SNAPSHOT_LIMITS.jobs).map((j) => ({
      id: j.id,
      client_id: j.client_id,
      grant_id: j.grant_id,
      question: j.question,
      status: j.status,
      created_at: j.created_at,
      finished_at: j.finished_at ?? null,
      error: j.error ? `${j.error.code}: ${j.error.message}` : null,
    })),
    training: newest(Object.values(s.training_documents), SNAPSHOT_LIMITS.jobs).map((d) => ({
      id: d.id,
      client_id: d.client_id,
      grant_id: d.grant_id,
      file_name: d.file_name,
      size: d.size,
      processing_step: d.processing_step,
      created_at: d.created_at,
      finished_at: d.indexed_at ?? null,
      error: d.error ? `${d.error.code}: ${d.error.message}` : null,
    })),
    charges: {
      by_client: { ...s.charges.by_client },
      by_grant: { ...s.charges.by_grant },
      entries: extra.charges.slice(-SNAPSHOT_LIMITS.charges),
      replays: extra.replays.slice(-SNAPSHOT_LIMITS.charges),
    },
    actions: newest(Object.values(s.pending_actions), SNAPSHOT_LIMITS.actions).map((a) => ({
      id: a.id,
      client_id: a.client_id,
      person_id: a.person_id,
      kind: a.kind,
      operation: a.operation,
      description: a.description,
      status: a.status,
      created_at: a.created_at,
      decided_at: a.decided_at ?? null,
    })),
    requests: extra.requests.slice(-SNAPSHOT_LIMITS.requests),
    faults: extra.faults ?? [],
    findings,
  };
}
