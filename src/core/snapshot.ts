import type { ChargeEntry } from './charges.js';
import type { Core } from './core.js';
import type { EventMap } from './events.js';
import type { Grant } from './state.js';

/** How many of the newest items a snapshot carries per list; older ones stay in the state file. */
export const SNAPSHOT_LIMITS = { families: 200, jobs: 200, charges: 200, actions: 200, requests: 200 } as const;

export type RequestEntry = EventMap['request.served'] & { seq: number; at: number };
/** An idempotent replay: answered from the stored response, free (kept in memory since the emulator started). */
export type ReplayEntry = EventMap['idempotency.replayed'] & { seq: number; at: number };

export interface FamilyView {
  id: string;
  grant_id: string;
  client_id: string;
  status: 'active' | 'invalidated';
  created_at: number;
  invalidated_at: number | null;
  invalidated_reason: string | null;
  /** The generation whose replay killed the family (null: unknown or not a replay). */
  replayed_generation: number | null;
  /** The refresh-token chain, oldest first; the last entry is the current token. */
  chain: Array<{ generation: number; issued_at: number; rotated_at: number | null }>;
  access_tokens: Array<{ jti: string; issued_at: number; expires_at: number; revoked: boolean }>;
}

export interface ResearchView {
  id: string;
  client_id: string;
  grant_id: string;
  question: string;
  status: string;
  created_at: number;
  finished_at: number | null;
  error: string | null;
}

export interface TrainingView {
  id: string;
  client_id: string;
  grant_id: string;
  file_name: string;
  size: number;
  processing_step: string;
  created_at: number;
  finished_at: number | null;
  error: string | null;
}

export interface ActionView {
  id: string;
  client_id: string;
  person_id: string;
  kind: string;
  operation: 'create' | 'update';
  description: string;
  status: 'pending' | 'approved' | 'rejected' | 'applied';
  created_at: number;
  decided_at: number | null;
}

/** An injected fault as the dashboard lists it. */
export interface FaultView {
  id: string;
  kind: string;
  description: string;
  state: 'armed' | 'spent' | 'cleared';
  fired: number;
  remaining: number | null;
  created_at: number;
  last_fired_at: number | null;
}

/**
 * What the admin stream sends first (and again after every reconnect): the state as the dashboard shows it.
 * The events with `seq` greater than this snapshot's `seq` follow it. It is a read model: no secrets, no hashes.
 */
export interface Snapshot {
  seq: number;
  now: number;
  service: { base_url: string; auth_url: string; issuer: string };
  persons: Record<string, string>;
  clients: Record<string, { client_id: string; client_name: string; registered_at: number }>;
  grants: Array<Omit<Grant, 'revoked_at' | 'revoked_by'> & { revoked_at: number | null; revoked_by: string | null }>;
  families: FamilyView[];
  research: ResearchView[];
  training: TrainingView[];
  charges: { by_client: Record<string, number>; by_grant: Record<string, number>; entries: ChargeEntry[]; replays: ReplayEntry[] };
  actions: ActionView[];
  requests: RequestEntry[];
  faults: FaultView[];
}

const newest = <T extends { created_at: number }>(items: Iterable<T>, limit: number): T[] => [...items].sort((a, b) => a.created_at - b.created_at).slice(-limit);

/** Builds the snapshot from the core's state at this moment (synchronous, so `seq` matches it exactly). */
export function buildSnapshot(core: Core, extra: { charges: ChargeEntry[]; replays: ReplayEntry[]; requests: RequestEntry[]; faults?: FaultView[] }): Snapshot {
  const s = core.state;
  return {
    seq: core.events.seq,
    now: core.clock.now(),
    service: { base_url: core.urls.baseUrl, auth_url: core.urls.authUrl, issuer: core.issuer },
    persons: Object.fromEntries(core.persons.map((p) => [p.id, p.name])),
    clients: Object.fromEntries(Object.values(s.clients).map((c) => [c.client_id, { client_id: c.client_id, client_name: c.client_name, registered_at: c.client_id_issued_at * 1000 }])),
    grants: Object.values(s.grants).map((g) => ({ ...g, scopes: [...g.scopes], revoked_at: g.revoked_at ?? null, revoked_by: g.revoked_by ?? null })),
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
      access_tokens: f.access_tokens.map((t) => ({ jti: t.jti, issued_at: t.issued_at, expires_at: t.expires_at, revoked: Object.hasOwn(s.revoked_access_tokens, t.jti) })),
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
    charges: { by_client: { ...s.charges.by_client }, by_grant: { ...s.charges.by_grant }, entries: extra.charges.slice(-SNAPSHOT_LIMITS.charges), replays: extra.replays.slice(-SNAPSHOT_LIMITS.charges) },
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
  };
}
