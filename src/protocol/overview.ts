/** The read model the admin API sends (`GET /_admin/overview`, and first on its event stream): no secrets, no hashes. */

import type { ChargeEntry } from './charges.js';
import type { EventMap } from './events.js';
import type { Finding } from './findings.js';

export type RequestEntry = EventMap['request.served'] & { seq: number; at: number };
/** An idempotent replay: answered from the stored response, free (kept in memory since the emulator started). */
export type ReplayEntry = EventMap['idempotency.replayed'] & { seq: number; at: number };

/** A grant as the overview lists it. */
export interface GrantEntry {
  readonly id: string;
  readonly client_id: string;
  readonly person_id: string;
  readonly scopes: readonly string[];
  /**
   * `{base_url}/mcp` for agent grants (or `http://localhost:{port}/mcp`, `http://[::1]:{port}/mcp`: the loopback name
   * the client asked for, without its port); null for identity grants (no resource requested).
   */
  readonly resource: string | null;
  readonly created_at: number;
  readonly last_used_at: number | null;
  readonly status: 'active' | 'revoked';
  revoked_at: number | null;
  revoked_by: string | null;
}

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
 * The events with `seq` greater than this overview's `seq` follow it.
 */
export interface Overview {
  seq: number;
  now: number;
  service: { base_url: string; auth_url: string; issuer: string };
  persons: Record<string, string>;
  /**
   * How many there are in all: the lists hold the newest (OVERVIEW_LIMITS); the rest come from GET /_admin/grants
   * and /_admin/findings, page by page.
   */
  totals: { clients: number; grants: number; findings: number };
  /** The clients the lists name, and the newest registrations. */
  clients: Record<string, { client_id: string; client_name: string; registered_at: number }>;
  grants: GrantEntry[];
  families: FamilyView[];
  research: ResearchView[];
  training: TrainingView[];
  charges: { by_client: Record<string, number>; by_grant: Record<string, number>; entries: ChargeEntry[]; replays: ReplayEntry[] };
  actions: ActionView[];
  requests: RequestEntry[];
  faults: FaultView[];
  /** Client findings, most severe first (protocol/findings); `finding.recorded` events follow. */
  findings: Finding[];
}
