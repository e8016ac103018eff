import type { ChargeEntry } from './charges.js';
import type { Finding } from './findings.js';

/**
 * The events of the emulator as its admin stream sends them: `entity.verb` names with their payloads.
 * The core publishes them on its event bus; the dashboard folds them into its state.
 */
export interface EventMap {
  'client.registered': { client_id: string; client_name: string; redirect_uris: readonly string[] };
  /** `answered_by`: `policy` when a consent policy answers it instead of the person seeing the page. */
  'consent.shown': {
    interaction_id: string;
    client_id: string;
    client_name: string;
    person_id: string;
    scopes: readonly string[];
    resource: string | null;
    answered_by: ConsentAnswerer;
  };
  /** `scopes`: what was granted; a policy may approve fewer than were requested (`requested_scopes`). */
  'consent.approved': {
    interaction_id: string;
    client_id: string;
    person_id: string;
    scopes: readonly string[];
    requested_scopes: readonly string[];
    grant_id: string;
    by: ConsentAnswerer;
  };
  'consent.denied': { interaction_id: string; client_id: string; person_id: string; scopes: readonly string[]; by: ConsentAnswerer };
  'consent_policy.set': { client_id: string | null; decision: 'page' | 'approve' | 'deny'; scopes?: readonly string[] };
  'grant.created': { grant_id: string; client_id: string; person_id: string; scopes: readonly string[]; resource: string | null };
  'grant.scopes_reduced': { grant_id: string; removed: readonly string[]; scopes: readonly string[] };
  'grant.revoked': { grant_id: string; client_id: string; by: GrantRevoker };
  'code.issued': { grant_id: string; client_id: string; expires_at: number };
  'code.replayed': { grant_id: string; client_id: string; family_id: string | null };
  'tokens.issued': {
    grant_id: string;
    client_id: string;
    family_id: string;
    jti: string;
    scopes: readonly string[];
    audience: string;
    expires_at: number;
    generation: number;
    grant_type: 'authorization_code' | 'refresh_token';
  };
  'refresh.rotated': { grant_id: string; family_id: string; from_generation: number; to_generation: number };
  'family.invalidated': { grant_id: string; family_id: string; reason: FamilyEndReason; replayed_generation?: number };
  'access_token.revoked': { jti: string; client_id: string };
  /** `body_sha256`: a charge without Idempotency-Key names its request body's hash, so that a retry without a key shows. */
  'charge.recorded': ChargeEntry & { body_sha256?: string };
  'idempotency.replayed': { client_id: string; grant_id: string; route: string; key: string };
  /**
   * `retry_after`: the seconds the 429's Retry-After names. `arrival`, here and on `request.admitted`: the number of
   * the request in the order requests arrived in (their heads received), which the findings judge a retry by.
   */
  'rate_limit.exceeded': { client_id: string; grant_id: string; route: string; arrival: number; retry_after: number };
  /** A request passed the resource guard, its scope and the rate limit (`route`: the REST route or `tool <name>`). */
  'request.admitted': { client_id: string; grant_id: string; route: string; arrival: number; scope: string };
  /**
   * The authorization request was refused. `client_id`: as sent, when it names a client (otherwise null); `missing`:
   * the required parameters it left out.
   */
  'authorize.refused': { client_id: string | null; error: string; description: string; missing: readonly string[] };
  /**
   * A refresh token of a known family was refused. `generation`: the replayed generation, when the family remembers
   * it; `since_ms`: how long ago the presented token was rotated (a replay) or the family ended (`family_invalidated`).
   */
  'refresh.refused': {
    client_id: string;
    grant_id: string;
    family_id: string;
    reason: RefreshRefusal;
    generation: number | null;
    since_ms: number | null;
  };
  /** The resource guard refused a bearer token (401) or its scope (403); `where`: `METHOD /path` as routed. */
  'access.refused': {
    client_id: string | null;
    grant_id: string | null;
    family_id: string | null;
    status: 401 | 403;
    reason: AccessRefusal;
    where: string;
  };
  /** A client finding was recorded or counted again (protocol/findings). */
  'finding.recorded': Finding;
  'research.created': { job_id: string; client_id: string; grant_id: string; question: string };
  'research.running': { job_id: string; client_id: string };
  'research.succeeded': { job_id: string; client_id: string; citations: number };
  'research.failed': { job_id: string; client_id: string; error: string; message: string };
  'training.received': { document_id: string; client_id: string; grant_id: string; file_name: string; size: number };
  'training.step': { document_id: string; client_id: string; processing_step: string; error?: string };
  'action.pending': {
    action_id: string;
    client_id: string;
    grant_id: string;
    person_id: string;
    kind: string;
    operation: 'create' | 'update';
    description: string;
  };
  'action.approved': { action_id: string; client_id: string; person_id: string };
  'action.rejected': { action_id: string; client_id: string; person_id: string };
  'action.applied': { action_id: string; client_id: string; kind: string; record_id: string };
  /** `faults`: the injected faults that shaped this answer (`fault_1 server_error`). */
  /** `variant`: with --vary-unspecified, what the response varied (its Agent-Access-Variant header). */
  'request.served': {
    server: 'api' | 'auth';
    method: string;
    path: string;
    status: number;
    ms: number;
    client_id?: string;
    grant_id?: string;
    /** The request carried a bearer token that names no client: `expired`, or `invalid` (malformed, forged, another server's). */
    bearer?: 'expired' | 'invalid';
    faults?: readonly string[];
    variant?: string;
  };
  'fault.armed': { fault_id: string; kind: string; description: string; remaining: number | null };
  /** `state` after firing: `spent` once its count is used up (a grant fault fires once). */
  'fault.fired': {
    fault_id: string;
    kind: string;
    description: string;
    state: 'armed' | 'spent' | 'cleared';
    remaining: number | null;
    method?: string;
    path?: string;
    /** An MCP tool call's tool. */
    tool?: string;
    client_id?: string;
    grant_id?: string;
  };
  'fault.cleared': { fault_id: string; kind: string };
  /** The whole state was replaced by a snapshot (`reset`: the baseline): readers start again from a fresh overview. */
  'state.restored': { snapshot: string; reset: boolean };
}

export type GrantRevoker = 'person' | 'admin' | 'client';
/** Who answered a consent screen: the person on the page, or a consent policy (emulator control). */
export type ConsentAnswerer = 'person' | 'policy';
export type FamilyEndReason = 'refresh_replay' | 'code_replay' | 'grant_revoked' | 'token_revoked';

export type RefreshRefusal = 'replay' | 'family_invalidated' | 'grant_revoked' | 'expired';
export type AccessRefusal =
  | 'token_missing'
  | 'token_malformed'
  | 'token_invalid'
  | 'token_expired'
  | 'identity_token'
  /** The token is for `{base_url}/mcp` under another loopback name than the request reached (RFC 8707). */
  | 'token_for_other_name'
  | 'grant_revoked'
  | 'family_invalidated'
  | 'token_revoked'
  | 'insufficient_scope';

export type EventName = keyof EventMap;

/** Every event name, for consumers that must handle each (the dashboard's reducer tests check they do). */
export const EVENT_NAMES = [
  'client.registered',
  'consent.shown',
  'consent.approved',
  'consent.denied',
  'consent_policy.set',
  'grant.created',
  'grant.scopes_reduced',
  'grant.revoked',
  'code.issued',
  'code.replayed',
  'tokens.issued',
  'refresh.rotated',
  'family.invalidated',
  'access_token.revoked',
  'charge.recorded',
  'idempotency.replayed',
  'rate_limit.exceeded',
  'request.admitted',
  'authorize.refused',
  'refresh.refused',
  'access.refused',
  'finding.recorded',
  'research.created',
  'research.running',
  'research.succeeded',
  'research.failed',
  'training.received',
  'training.step',
  'action.pending',
  'action.approved',
  'action.rejected',
  'action.applied',
  'request.served',
  'fault.armed',
  'fault.fired',
  'fault.cleared',
  'state.restored',
] as const satisfies readonly EventName[];
// Compile-time check that the list is complete: this fails to type-check when an event is missing from it.
const everyEventListed: Exclude<EventName, (typeof EVENT_NAMES)[number]> extends never ? true : never = true;
void everyEventListed;
export type AppEvent = { [N in EventName]: { seq: number; at: number; name: N; data: EventMap[N] } }[EventName];
