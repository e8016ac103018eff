import { emptyTotals, ledgerProblem, type ChargeEntry, type ChargeTotals } from './charges.js';
import { StateFileError } from './errors.js';
import type { PendingAction, WorkspaceChange } from './entities.js';
import type { IdempotencyRecord } from './idempotency.js';
import type { ResearchJob, TrainingDocument } from './entities.js';
import type { KnowledgeDocument } from './entities.js';

/**
 * Everything the emulator keeps. Times are epoch milliseconds on the emulator's clock.
 * Codes and refresh tokens appear only as SHA-256 hashes.
 */
export interface State {
  version: 1;
  keys: SigningKey[];
  clients: Record<string, Client>;
  grants: Record<string, Grant>;
  /** Keyed by the code's hash. */
  codes: Record<string, AuthorizationCode>;
  families: Record<string, TokenFamily>;
  /** jti → access-token expiry, for RFC 7009 revocation of single access tokens; pruned after expiry. */
  revoked_access_tokens: Record<string, number>;
  /** Stored responses by (client, route, key) for 24 hours (spec 4.4 rule 5, 8). */
  idempotency: Record<string, IdempotencyRecord>;
  /** Running totals of the charges in `charge_ledger`. */
  charges: ChargeTotals;
  /**
   * Every charge, keyed by its seq (spec 1): the one record of them. The ledger file beside a state file
   * (`state.charges.jsonl`) is written from it.
   */
  charge_ledger: Record<string, ChargeEntry>;
  research_jobs: Record<string, ResearchJob>;
  training_documents: Record<string, TrainingDocument>;
  /** Write actions of the agent plane, waiting for the person or decided (spec 2.7, 4.4 rule 1). */
  pending_actions: Record<string, PendingAction>;
  /** Applied workspace changes, in order; replayed over the fixtures' workspace on start. */
  workspace_changes: WorkspaceChange[];
  /** Knowledge-base documents of a scenario that belong to no grant: every person finds them, like the fixtures' knowledge/. */
  shared_knowledge: Record<string, KnowledgeDocument>;
  /** The scenario file this state was created from (`serve --scenario`); absent when it was not. */
  scenario?: ScenarioOrigin;
}

/** Which scenario a state was created from: a later start with a scenario must name the same content (sha256 of its bytes). */
export interface ScenarioOrigin {
  file: string;
  /** Hex SHA-256 of the scenario file's bytes, as `sha256sum` prints it. */
  sha256: string;
}

export interface SigningKey {
  kid: string;
  alg: 'ES256';
  created_at: number;
  private_jwk: JsonWebKeyEC;
  public_jwk: JsonWebKeyEC;
}

export interface JsonWebKeyEC {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  d?: string;
}

export interface Client {
  readonly client_id: string;
  readonly client_id_issued_at: number;
  readonly client_name: string;
  readonly redirect_uris: readonly string[];
  readonly grant_types: readonly string[];
  readonly response_types: readonly string[];
  readonly token_endpoint_auth_method: 'none';
  /** OpenID Connect Registration §2 (MCP SEP-837): `native` for a loopback or app client, `web`; absent when not sent. */
  readonly application_type?: 'native' | 'web';
  /**
   * Registered through open registration (RFC 7591), not from a scenario or the fixtures: only such a client goes when
   * it was never used (Retention.unusedClients). Absent on clients of state files written before it was kept.
   */
  readonly self_registered?: true;
}

export interface Grant {
  readonly id: string;
  readonly client_id: string;
  readonly person_id: string;
  readonly scopes: readonly string[];
  /**
   * `{base_url}/mcp` for agent grants (or `http://localhost:{port}/mcp`, `http://[::1]:{port}/mcp`: the loopback name
   * the client asked for, without its port; resource-names.ts); null for identity grants (no resource requested).
   */
  readonly resource: string | null;
  readonly created_at: number;
  readonly last_used_at: number | null;
  readonly status: 'active' | 'revoked';
  readonly revoked_at?: number;
  readonly revoked_by?: 'person' | 'admin' | 'client';
}

/** Who revoked a grant, as refusals say it: `access was revoked by an administrator`. */
export const revokedByWhom = (grant: Pick<Grant, 'revoked_by'> | undefined): string =>
  grant?.revoked_by === 'client' ? 'the client' : grant?.revoked_by === 'admin' ? 'an administrator' : 'the person';

export interface AuthorizationCode {
  readonly hash: string;
  readonly client_id: string;
  readonly grant_id: string;
  readonly redirect_uri: string;
  readonly code_challenge: string;
  readonly issued_at: number;
  readonly expires_at: number;
  readonly consumed_at: number | null;
  /** The family its exchange created: revoked if the code is replayed. */
  readonly family_id: string | null;
}

export interface RefreshGeneration {
  readonly generation: number;
  /** Hash of the refresh token of this generation (for rotated generations, its first 16 characters). */
  readonly hash: string;
  readonly issued_at: number;
  readonly rotated_at: number | null;
}

export interface TokenFamily {
  readonly id: string;
  readonly grant_id: string;
  readonly client_id: string;
  /** Hash of the family handle, the part of every refresh token that names its family. */
  readonly handle_hash: string;
  readonly current: RefreshGeneration & { expires_at: number };
  /** The newest rotated generations (bounded), for display and to name a replayed token. */
  readonly history: readonly RefreshGeneration[];
  readonly rotations: number;
  readonly created_at: number;
  readonly status: 'active' | 'invalidated';
  readonly invalidated_at?: number;
  readonly invalidated_reason?: 'refresh_replay' | 'code_replay' | 'grant_revoked' | 'token_revoked';
  /** Generation of the replayed token when a replay killed the family (null: older than the kept history). */
  readonly replayed_generation?: number | null;
  /** The newest access tokens issued from the family (bounded), for display. */
  readonly access_tokens: ReadonlyArray<{
    readonly jti: string;
    readonly issued_at: number;
    readonly expires_at: number;
    readonly scopes: readonly string[];
  }>;
}

export const emptyState = (): State => ({
  version: 1,
  keys: [],
  clients: {},
  grants: {},
  codes: {},
  families: {},
  revoked_access_tokens: {},
  idempotency: {},
  charges: emptyTotals(),
  charge_ledger: {},
  research_jobs: {},
  training_documents: {},
  pending_actions: {},
  workspace_changes: [],
  shared_knowledge: {},
});

/** The keyed tables of the state, in the order a state file holds them. */
export const COLLECTION_NAMES = [
  'clients',
  'grants',
  'codes',
  'families',
  'revoked_access_tokens',
  'idempotency',
  'charge_ledger',
  'research_jobs',
  'training_documents',
  'pending_actions',
  'shared_knowledge',
] as const;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A P-256 coordinate or private scalar: 32 bytes, base64url without padding. */
const COORDINATE = /^[A-Za-z0-9_-]{43}$/;
const isP256Jwk = (v: unknown, withPrivate: boolean): boolean =>
  isRecord(v) &&
  v.kty === 'EC' &&
  v.crv === 'P-256' &&
  COORDINATE.test(String(v.x)) &&
  COORDINATE.test(String(v.y)) &&
  (!withPrivate || COORDINATE.test(String(v.d)));

/**
 * Parses what was read from a state file. Anything but the shape written by this version is refused
 * with a message that names the file; the file itself is never touched here.
 */
export function parseState(text: string, file: string, advice: string): State {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw notValidJson(file, e as Error, advice);
  }
  return checkState(json, file, advice);
}

/** The refusal of a state file whose text is not JSON: names the file and the way out. */
export const notValidJson = (file: string, error: Error, advice: string): StateFileError =>
  // Newer V8s quote the text around the fault, newlines and all: escaped, so the message stays one line.
  new StateFileError(file, `state file ${file} is not valid JSON (${oneLine(error.message)}). ${advice}`);

/** Line breaks and other control characters as escapes (`\n`), so quoted file text cannot break a message's line. */
const oneLine = (text: string): string =>
  text.replace(/[\u0000-\u001f\u007f]/g, (c) =>
    c === '\n' ? '\\n' : c === '\r' ? '\\r' : c === '\t' ? '\\t' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );

/** Checks a parsed state (a file's, or one a journal was replayed over); `what` names it in the message. */
export function checkState(json: unknown, file: string, advice: string, what = `state file ${file}`): State {
  const problem = (detail: string) => new StateFileError(file, `${what} is not an agent-access state file: ${detail}. ${advice}`);
  if (!isRecord(json)) throw problem('the top level is not an object');
  if (json.version !== 1) throw problem(`unsupported version ${JSON.stringify(json.version)} (expected 1)`);
  // Collections added after the first release: a file written before them gets them empty.
  json.idempotency ??= {};
  json.charges ??= emptyTotals();
  json.research_jobs ??= {};
  json.training_documents ??= {};
  json.pending_actions ??= {};
  json.workspace_changes ??= [];
  json.shared_knowledge ??= {};
  if (!Array.isArray(json.workspace_changes)) throw problem('"workspace_changes" is not a list');
  if (
    !isRecord(json.charges) ||
    typeof json.charges.count !== 'number' ||
    !isRecord(json.charges.by_client) ||
    !isRecord(json.charges.by_grant)
  )
    throw problem('"charges" is malformed');
  // The hash chain over the ledger file of earlier versions: the ledger is in the state now.
  delete json.charges.ledger_chain;
  // A state written before the ledger moved into it: without charges it has an empty one; with charges, its ledger
  // file's lines become it (adoptLedger, where the file is read).
  if (json.charge_ledger === undefined && json.charges.count === 0) json.charge_ledger = {};
  if (!Array.isArray(json.keys)) throw problem('"keys" is not a list');
  for (const [i, key] of json.keys.entries()) {
    if (
      !isRecord(key) ||
      typeof key.kid !== 'string' ||
      key.alg !== 'ES256' ||
      !isP256Jwk(key.private_jwk, true) ||
      !isP256Jwk(key.public_jwk, false)
    ) {
      throw problem(`keys[${i}] is not an ES256 (P-256) signing key`);
    }
  }
  for (const name of COLLECTION_NAMES) {
    const value = json[name];
    if (name === 'charge_ledger' && value === undefined) continue;
    if (!isRecord(value)) throw problem(`"${name}" is not an object`);
    // By key, not Object.entries: a table of 100k entries would make 100k pairs to throw away.
    for (const id of Object.keys(value)) {
      const entry = value[id];
      const ok = name === 'revoked_access_tokens' ? typeof entry === 'number' : isRecord(entry);
      if (!ok) throw problem(`${name}["${id}"] is malformed`);
    }
  }
  if (json.charge_ledger !== undefined) {
    const wrong = ledgerProblem(json.charges as unknown as ChargeTotals, json.charge_ledger as Record<string, unknown>);
    if (wrong) throw problem(`"charge_ledger" does not match "charges": ${wrong}`);
  }
  const grants = json.grants as Record<string, Record<string, unknown>>;
  for (const id of Object.keys(grants)) {
    const grant = grants[id]!;
    if (!Array.isArray(grant.scopes) || typeof grant.client_id !== 'string' || (grant.status !== 'active' && grant.status !== 'revoked')) {
      throw problem(`grants["${id}"] is malformed`);
    }
  }
  if (
    json.scenario !== undefined &&
    (!isRecord(json.scenario) ||
      typeof json.scenario.file !== 'string' ||
      typeof json.scenario.sha256 !== 'string' ||
      !/^[0-9a-f]{64}$/.test(json.scenario.sha256))
  ) {
    throw problem('"scenario" is malformed');
  }
  const families = json.families as Record<string, Record<string, unknown>>;
  for (const id of Object.keys(families)) {
    const family = families[id]!;
    if (typeof family.handle_hash !== 'string' || !isRecord(family.current) || !Array.isArray(family.history)) {
      throw problem(`families["${id}"] is malformed`);
    }
  }
  return json as unknown as State;
}

/**
 * A state written before the ledger moved into it (no `charge_ledger`, charges counted) takes its entries from the
 * ledger file's text (`ledger`, null: none): its first `count` lines, which must be charges 1 to count and sum to the
 * totals. Refused otherwise, naming both files; nothing is changed. A state that has its ledger is left alone.
 */
export function adoptLedger(state: State, ledger: string | null, file: string, ledgerName: string, advice: string): State {
  if ((state as Partial<State>).charge_ledger !== undefined) return state;
  const entries: Record<string, unknown> = {};
  // Complete lines only: a last one without its line break was cut short.
  const lines = (ledger ?? '').split('\n').slice(0, -1);
  for (let seq = 1; seq <= state.charges.count && seq <= lines.length; seq++) {
    try {
      entries[String(seq)] = JSON.parse(lines[seq - 1]!);
    } catch {
      entries[String(seq)] = lines[seq - 1];
    }
  }
  const wrong = ledger === null ? 'it is missing' : ledgerProblem(state.charges, entries);
  if (wrong)
    throw new StateFileError(
      file,
      `state file ${file} was written before the charges moved into it, and ${ledgerName} does not belong to it: ` + `${wrong}. ${advice}`,
    );
  state.charge_ledger = entries as Record<string, ChargeEntry>;
  return state;
}
