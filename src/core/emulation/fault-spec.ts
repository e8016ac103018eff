import { parseDuration } from '../state/clock.js';
import { ProblemError } from '../state/errors.js';
import { violation, type InputSchema } from '../state/inputs.js';

/**
 * A fault spec (emulator control): what a caller asks for, by flag, admin API or programmatic API, checked against one
 * definition of each field and resolved into the fault's settings. The faults in force are faults.ts's.
 */
export const FAULT_KINDS = [
  'rate_limit',
  'server_error',
  'latency',
  'drop_response',
  'ask_timeout',
  'research_fail',
  'refresh_replay',
  'revoke',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** What a caller asks for (flag, admin API, programmatic API). */
export interface FaultSpec {
  kind: FaultKind;
  /**
   * rate_limit, server_error, latency, drop_response: which requests, as `METHOD PATH` or `PATH`, the path as the spec
   * writes it (`/research/{job_id}`) or as sent; a trailing `*` matches a prefix. Default: every route (rate_limit:
   * every rate-limited route, the REST allowlist and MCP tool calls; drop_response: every call that takes an
   * idempotency key, the allowlist's POSTs and their MCP tools as `POST /mcp`).
   */
  route?: string;
  /**
   * rate_limit, server_error, latency, drop_response: only MCP `tools/call` requests of this tool (`ask`,
   * `start_research`, …), or of any tool with `*`. Lets each tool be faulted on its own, as `route` does each REST route,
   * where they all share `POST /mcp`.
   */
  tool?: string;
  /** Fires this many times, then is spent. Default: until cleared. */
  count?: number;
  /** Fires on this share of the matching requests (0 < rate ≤ 1), spread evenly: 0.25 is every fourth. */
  rate?: number;
  /** ask_timeout, research_fail: only questions that contain this text (case-insensitive). */
  match?: string;
  /** server_error: the status, 500–599. Default 500. */
  status?: number;
  /** latency: added milliseconds (real time). */
  ms?: number;
  /** rate_limit: the Retry-After seconds. Default 1. */
  retry_after?: number;
  /** Only requests of this client. */
  client_id?: string;
  /** Request faults: only requests of this grant. refresh_replay, revoke: the grant they act on (required). */
  grant_id?: string;
  /** refresh_replay, revoke: when, on the emulator's clock (epoch ms or ISO 8601). Default: at once. */
  at?: number | string;
  /** refresh_replay, revoke: in this long from now on the emulator's clock (`10m`), instead of `at`. */
  in?: string | number;
  /** refresh_replay, revoke: once the grant has served this many more requests (they succeed; the next is refused). */
  after_requests?: number;
}

/** A spec as checked, its defaults filled in and its times resolved: the settings of a fault (faults.ts). */
export interface FaultSettings {
  kind: FaultKind;
  route: string | null;
  tool: string | null;
  count: number | null;
  rate: number | null;
  match: string | null;
  status: number | null;
  ms: number | null;
  retry_after: number | null;
  client_id: string | null;
  grant_id: string | null;
  /** refresh_replay, revoke: the moment (emulator clock), if time-triggered. */
  at: number | null;
  after_requests: number | null;
}

/** The kinds that act on a grant at a moment, rather than on matching requests. */
export const GRANT_KINDS: readonly FaultKind[] = ['refresh_replay', 'revoke'];

const bad = (message: string) => new ProblemError('invalid_fault', message);

/** Which fields each kind takes; anything else is an error, so a misspelt intent never arms a different fault. */
const FIELDS: Record<FaultKind, readonly (keyof FaultSpec)[]> = {
  rate_limit: ['route', 'tool', 'count', 'rate', 'retry_after', 'client_id', 'grant_id'],
  server_error: ['route', 'tool', 'count', 'rate', 'status', 'client_id', 'grant_id'],
  latency: ['route', 'tool', 'count', 'rate', 'ms', 'client_id', 'grant_id'],
  drop_response: ['route', 'tool', 'count', 'rate', 'client_id', 'grant_id'],
  ask_timeout: ['count', 'rate', 'match', 'client_id', 'grant_id'],
  research_fail: ['count', 'rate', 'match', 'client_id', 'grant_id'],
  refresh_replay: ['grant_id', 'at', 'in', 'after_requests'],
  revoke: ['grant_id', 'at', 'in', 'after_requests'],
};

/** A moment on the emulator clock (`at`) or a duration from now (`in`): a number of milliseconds, or text. */
const TIME_OR_TEXT = [
  { type: 'integer', minimum: 0 },
  { type: 'string', minLength: 1, maxLength: 40 },
] as const satisfies readonly InputSchema[];

/**
 * Each field of a fault spec, defined once: the admin API's route schema is built from these (src/server/schemas.ts),
 * and `parseFaultSpec` checks the flag form and the programmatic API against the same definitions.
 */
export const FAULT_FIELDS = {
  kind: { type: 'string', enum: FAULT_KINDS, description: `one of ${FAULT_KINDS.join(', ')}` },
  route: {
    type: 'string',
    maxLength: 200,
    pattern: '^(?:(?:GET|POST|DELETE|PUT|PATCH|OPTIONS) )?(?:\\*|/\\S*)$',
    description: '"PATH" or "METHOD PATH" of at most 200 characters (e.g. "POST /research", "/research/{job_id}", "/oauth/*", "*")',
  },
  tool: {
    type: 'string',
    maxLength: 64,
    pattern: '^(?:\\*|[A-Za-z0-9_.-]+)$',
    description: 'an MCP tool name of at most 64 characters (e.g. "ask", "start_research"), or "*" for any tool',
  },
  count: { type: 'integer', minimum: 1, maximum: 1_000_000 },
  rate: {
    type: 'number',
    exclusiveMinimum: 0,
    maximum: 1,
    description: 'a share of requests, more than 0 and at most 1 (0.25: every fourth)',
  },
  match: { type: 'string', minLength: 1, maxLength: 500, pattern: '\\S', description: 'a non-empty text of at most 500 characters' },
  status: { type: 'integer', minimum: 500, maximum: 599 },
  ms: { type: 'integer', minimum: 1, maximum: 120_000 },
  retry_after: { type: 'integer', minimum: 0, maximum: 86_400 },
  client_id: { type: 'string', minLength: 1, maxLength: 200 },
  grant_id: { type: 'string', minLength: 1, maxLength: 200 },
  at: { anyOf: TIME_OR_TEXT, description: 'a time on the emulator clock (epoch ms or ISO 8601)' },
  in: { anyOf: TIME_OR_TEXT, description: 'a duration (10m, 24h, 1h30m, or milliseconds)' },
  after_requests: { type: 'integer', minimum: 1, maximum: 1_000_000 },
} as const satisfies Record<keyof FaultSpec, InputSchema>;

function parseAt(value: number | string, name: string): number {
  const at = typeof value === 'number' ? value : /^\d+$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(at)) throw bad(`${name} "${value}" is not a time (epoch ms or ISO 8601)`);
  return at;
}

/** Checks an untrusted fault (FAULT_FIELDS, then what each kind takes) and resolves its times against `now`. */
export function parseFaultSpec(spec: FaultSpec, now: number): FaultSettings {
  const kindViolation = violation(FAULT_FIELDS.kind, spec.kind, 'kind');
  if (kindViolation) throw bad(`${kindViolation}; not ${JSON.stringify(spec.kind)}`);
  const allowed = FIELDS[spec.kind];
  const given = Object.keys(spec).filter((k) => k !== 'kind' && (spec as unknown as Record<string, unknown>)[k] !== undefined);
  const extra = given.filter((k) => !allowed.includes(k as keyof FaultSpec));
  if (extra.length > 0) throw bad(`a ${spec.kind} fault takes ${allowed.join(', ')}; not ${extra.join(', ')}`);
  // A latency fault's ms is required: checked as if given.
  for (const field of spec.kind === 'latency' && !given.includes('ms') ? [...given, 'ms'] : given) {
    const name = field as keyof FaultSpec;
    const problem = violation(FAULT_FIELDS[name], spec[name], name);
    if (problem) throw bad(problem);
  }
  let at: number | null = null;
  if (GRANT_KINDS.includes(spec.kind)) {
    if (!spec.grant_id) throw bad(`a ${spec.kind} fault needs grant_id`);
    const triggers = [spec.at, spec.in, spec.after_requests].filter((v) => v !== undefined).length;
    if (triggers > 1) throw bad('give at most one of at, in and after_requests');
    if (spec.at !== undefined) at = parseAt(spec.at, 'at');
    if (spec.in !== undefined) {
      try {
        at = now + parseDuration(spec.in);
      } catch (e) {
        throw bad(`in: ${(e as Error).message}`);
      }
    }
    if (spec.after_requests === undefined) at ??= now;
  }
  return {
    kind: spec.kind,
    route: spec.route ?? null,
    tool: spec.tool ?? null,
    count: spec.count ?? null,
    rate: spec.rate ?? null,
    match: spec.match ?? null,
    status: spec.kind === 'server_error' ? (spec.status ?? 500) : null,
    ms: spec.ms ?? null,
    retry_after: spec.kind === 'rate_limit' ? (spec.retry_after ?? 1) : null,
    client_id: spec.client_id ?? null,
    grant_id: spec.grant_id ?? null,
    at,
    after_requests: spec.after_requests ?? null,
  };
}
