import type { ClientErrorKind } from './errors.js';

/**
 * Every error code of agent-access, defined once: the server answers with these codes, the CLI and the admin client
 * turn them into exit codes through them, and docs/errors.md lists them (test/unit/problems.test.ts keeps it so).
 *
 * The naming scheme is snake_case `<thing>_<what>` (`grant_not_found`, `csrf_check_failed`). A request the caller got
 * wrong is `invalid_<thing>` or `unsupported_<thing>`, as RFC 6749 §5.2 names its errors
 * (https://www.rfc-editor.org/rfc/rfc6749#section-5.2), so that one malformed request is `invalid_request` on
 * every route; RFC 6750 §3.1 names `invalid_token` and `insufficient_scope`
 * (https://www.rfc-editor.org/rfc/rfc6750#section-3.1).
 */
interface ProblemEntry {
  /** The HTTP status the problem is answered with. */
  readonly status: number;
  /** What it means to a client, which the CLI maps to its exit code. */
  readonly kind: ClientErrorKind;
  /** The public one-line message: the problem's `title` (RFC 9457 §3.1.3), the same for every occurrence. */
  readonly title: string;
}

/**
 * The codes non-OAuth routes answer as RFC 9457 problems (`type: urn:agent-access:error:<code>`), REST, admin API
 * and HTML error pages alike, and that MCP tool errors carry as `error`.
 */
export const PROBLEMS = {
  // Input the caller got wrong.
  invalid_request: { status: 400, kind: 'usage', title: 'The request is malformed' },
  invalid_json: { status: 400, kind: 'usage', title: 'The request body is not valid JSON' },
  invalid_idempotency_key: { status: 400, kind: 'usage', title: 'The Idempotency-Key header is not a valid key' },
  invalid_file_name: { status: 400, kind: 'usage', title: 'The file name is not allowed' },
  content_empty: { status: 400, kind: 'usage', title: 'The content is empty' },
  content_too_large: { status: 413, kind: 'usage', title: 'The content is too large' },
  body_too_large: { status: 413, kind: 'usage', title: 'The request body is too large' },
  unsupported_media_type: { status: 415, kind: 'usage', title: 'The request body has an unsupported media type' },
  method_not_allowed: { status: 405, kind: 'usage', title: 'The route does not take this method' },
  invalid_duration: { status: 400, kind: 'usage', title: 'The duration is not valid' },
  invalid_consent_policy: { status: 400, kind: 'usage', title: 'The consent policy is not valid' },
  invalid_fault: { status: 400, kind: 'usage', title: 'The fault is not valid' },
  invalid_snapshot_name: { status: 400, kind: 'usage', title: 'The snapshot name is not allowed' },
  host_not_allowed: { status: 421, kind: 'usage', title: 'The Host header names a host this server does not serve' },

  // Who may call.
  access_token_required: { status: 401, kind: 'auth_required', title: 'A bearer access token is required' },
  invalid_token: { status: 401, kind: 'auth_required', title: 'The access token is not valid' },
  insufficient_scope: { status: 403, kind: 'denied', title: 'The access token lacks the scope this needs' },
  agent_token_refused: { status: 403, kind: 'denied', title: 'This route refuses agent tokens' },
  browser_session_required: { status: 403, kind: 'denied', title: 'This route serves the browser application only' },
  csrf_check_failed: { status: 403, kind: 'denied', title: 'The form does not belong to this session' },
  admin_loopback_only: { status: 403, kind: 'denied', title: 'The admin API answers loopback peers only' },
  admin_token_required: { status: 401, kind: 'denied', title: 'The admin API needs its admin token' },
  rate_limit_exceeded: { status: 429, kind: 'rate_limited', title: 'The rate limit is exceeded' },

  // What is not there.
  route_not_found: { status: 404, kind: 'not_found', title: 'No such route' },
  research_job_not_found: { status: 404, kind: 'not_found', title: 'No such research job' },
  training_document_not_found: { status: 404, kind: 'not_found', title: 'No such training document' },
  record_not_found: { status: 404, kind: 'not_found', title: 'No such workspace record' },
  action_not_found: { status: 404, kind: 'not_found', title: 'No such write action' },
  grant_not_found: { status: 404, kind: 'not_found', title: 'No such grant' },
  client_not_found: { status: 404, kind: 'not_found', title: 'No such client' },
  person_not_found: { status: 404, kind: 'not_found', title: 'No such person' },
  fault_not_found: { status: 404, kind: 'not_found', title: 'No such fault' },
  snapshot_not_found: { status: 404, kind: 'not_found', title: 'No such snapshot' },

  // What the state does not allow now.
  idempotency_key_reused: { status: 409, kind: 'conflict', title: 'The Idempotency-Key was used with another request' },
  idempotency_key_in_flight: { status: 409, kind: 'conflict', title: 'A request with this Idempotency-Key is still running' },
  record_gone: { status: 409, kind: 'conflict', title: 'The record no longer exists' },
  action_already_decided: { status: 409, kind: 'conflict', title: 'The write action was already decided' },
  grant_revoked: { status: 409, kind: 'conflict', title: 'The grant was revoked' },
  consent_expired: { status: 400, kind: 'failed', title: 'The consent request expired or was already answered' },
  clock_not_manual: { status: 409, kind: 'conflict', title: 'The clock is real time and cannot be moved' },
  token_family_missing: { status: 409, kind: 'conflict', title: 'The grant has no live token family' },
  fault_limit_reached: { status: 409, kind: 'conflict', title: 'Too many faults are armed' },
  snapshot_baseline_missing: { status: 409, kind: 'conflict', title: 'The state has no baseline snapshot' },
  snapshot_damaged: { status: 409, kind: 'conflict', title: 'The snapshot cannot be used' },

  // The server's side.
  ask_timeout: { status: 504, kind: 'server', title: 'The question was abandoned after the ask timeout' },
  server_error: { status: 500, kind: 'server', title: 'The service failed' },
  server_starting: { status: 503, kind: 'server', title: 'The emulator is still starting' },
  snapshots_disabled: { status: 501, kind: 'server', title: 'This server runs without snapshots' },
  agent_plane_disabled: { status: 501, kind: 'server', title: 'This server runs without the agent plane' },
} as const satisfies Record<string, ProblemEntry>;

export type ProblemCode = keyof typeof PROBLEMS;

export const PROBLEM_TYPE_PREFIX = 'urn:agent-access:error:';

export const isProblemCode = (code: unknown): code is ProblemCode => typeof code === 'string' && Object.hasOwn(PROBLEMS, code);

/** The code of an RFC 9457 problem body this service sent (`urn:agent-access:error:<code>`), if it is one of ours. */
export function problemCodeOf(body: unknown): ProblemCode | undefined {
  const type = (body as { type?: unknown } | null)?.type;
  const code = typeof type === 'string' && type.startsWith(PROBLEM_TYPE_PREFIX) ? type.slice(PROBLEM_TYPE_PREFIX.length) : undefined;
  return isProblemCode(code) ? code : undefined;
}

/**
 * The errors of the OAuth endpoints, whose codes are the RFCs' own: RFC 6749 §4.1.2.1 and §5.2, RFC 8707 §2
 * (`invalid_target`), RFC 7591 §3.2.2 (registration), RFC 7009 §2.2.1 (`unsupported_token_type`). They are answered
 * as RFC 6749 JSON (`error`, `error_description`), never as problems; listed here for their default status and
 * their exit code.
 */
export const OAUTH_ERRORS = {
  invalid_request: { status: 400, kind: 'usage', title: 'The request is malformed' },
  invalid_client: { status: 401, kind: 'auth_required', title: 'The client is unknown' },
  invalid_grant: { status: 400, kind: 'auth_required', title: 'The code or refresh token is not valid' },
  unauthorized_client: { status: 400, kind: 'denied', title: 'The client may not use this grant type' },
  unsupported_grant_type: { status: 400, kind: 'usage', title: 'The grant type is not supported' },
  unsupported_response_type: { status: 400, kind: 'usage', title: 'The response type is not supported' },
  invalid_scope: { status: 400, kind: 'usage', title: 'The scope is unknown, retired or wider than granted' },
  invalid_target: { status: 400, kind: 'usage', title: 'The resource is not served here' },
  access_denied: { status: 400, kind: 'denied', title: 'The person denied access' },
  server_error: { status: 500, kind: 'server', title: 'The service failed' },
  temporarily_unavailable: { status: 503, kind: 'server', title: 'The service is temporarily unavailable' },
  invalid_redirect_uri: { status: 400, kind: 'usage', title: 'The redirect URI is not allowed' },
  invalid_client_metadata: { status: 400, kind: 'usage', title: 'The client metadata is not valid' },
  unsupported_token_type: { status: 400, kind: 'usage', title: 'The token type is not supported' },
} as const satisfies Record<string, ProblemEntry>;

export type OAuthErrorCode = keyof typeof OAUTH_ERRORS;

export const isOAuthErrorCode = (code: unknown): code is OAuthErrorCode => typeof code === 'string' && Object.hasOwn(OAUTH_ERRORS, code);

/** Errors inside one process that never reach the wire: no status, only what they mean to the CLI. */
export const PROCESS_ERRORS = {
  scenario_invalid: { kind: 'usage', title: 'The scenario file is not valid' },
  profile_invalid: { kind: 'usage', title: 'The variant profile file is not valid' },
  fixtures_invalid: { kind: 'failed', title: 'The fixtures are not valid' },
  state_unusable: { kind: 'state', title: 'The state file cannot be used' },
  state_locked: { kind: 'state', title: 'The state file is held by another process' },
  cli_failed: { kind: 'failed', title: 'The command failed' },
  job_failed: { kind: 'failed', title: 'The research job or training ingest failed' },
  file_unreadable: { kind: 'failed', title: 'The file cannot be read' },
  wait_timed_out: { kind: 'failed', title: 'The job did not finish within the wait' },
  wait_cancelled: { kind: 'interrupted', title: 'Waiting was stopped' },
  login_required: { kind: 'auth_required', title: 'Not logged in' },
  token_not_jwt: { kind: 'failed', title: 'The token is not a JWT' },
  findings_reported: { kind: 'findings', title: 'Client findings at or above the threshold were recorded' },
  conformance_failed: { kind: 'failed', title: 'A conformance scenario failed' },
  command_not_started: { kind: 'failed', title: 'The command under test could not be started' },
  conformance_interrupted: { kind: 'interrupted', title: 'The conformance run was stopped' },
} as const satisfies Record<string, Omit<ProblemEntry, 'status'>>;

export type ProcessErrorCode = keyof typeof PROCESS_ERRORS;

/** Any code an error inside agent-access carries. */
export type ErrorCode = ProblemCode | OAuthErrorCode | ProcessErrorCode;

/**
 * What a code means to a client. Problem codes come first: `invalid_request` and `server_error` are in both wire
 * tables with the same meaning.
 */
export function kindOfCode(code: string): ClientErrorKind | undefined {
  if (isProblemCode(code)) return PROBLEMS[code].kind;
  if (isOAuthErrorCode(code)) return OAUTH_ERRORS[code].kind;
  if (Object.hasOwn(PROCESS_ERRORS, code)) return PROCESS_ERRORS[code as ProcessErrorCode].kind;
  return undefined;
}

/**
 * What an error answer of this service means to a client: its code's kind (a problem's `type`, or an OAuth error's
 * `error`); an answer without a known code by its status class.
 */
export function kindOfAnswer(status: number, body: unknown): ClientErrorKind {
  const oauth = (body as { error?: unknown } | null)?.error;
  const known = problemCodeOf(body) ?? (isOAuthErrorCode(oauth) ? oauth : undefined);
  if (known) return kindOfCode(known)!;
  return status >= 500 || status < 400 ? 'server' : 'failed';
}
