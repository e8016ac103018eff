import { OAUTH_ERRORS, PROBLEMS, type ErrorCode, type OAuthErrorCode, type ProblemCode } from '../../protocol/problems.js';

export type { OAuthErrorCode } from '../../protocol/problems.js';

/**
 * Typed errors with stable codes from the one registry (src/protocol/problems.ts). OAuth errors carry the RFC 6749
 * `error` code, the HTTP status, and whether they may be sent to the client's redirect URI (never when the client
 * or redirect is in doubt).
 */
export class AgentAccessError extends Error {
  readonly code: ErrorCode;
  /**
   * For the client's developer, where the cause is known: what to change in the client (src/core/oauth/client-hints.ts).
   * Sent as the second sentence of an OAuth `error_description`, a problem's `hint` member, and the error page's
   * "Für Entwickler" part; it never changes the refusal itself.
   */
  readonly hint: string | undefined;
  constructor(code: ErrorCode, message: string, options?: ErrorOptions & { hint?: string }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.hint = options?.hint;
  }
}

/** Maps text onto the error_description character set: quotes become apostrophes, anything else outside it '?'. */
export const oauthText = (text: string): string =>
  text
    .replace(/"/g, "'")
    .replace(/\\/g, '/')
    .replace(/[^\x20-\x7e]/g, '?');

export class OAuthError extends AgentAccessError {
  readonly error: OAuthErrorCode;
  readonly status: number;
  /** False when the redirect URI or client is not trustworthy: the error is shown directly, never redirected. */
  readonly redirectable: boolean;
  /** WWW-Authenticate value, for a 401 to client authentication sent in the Authorization header (RFC 6749 §5.2). */
  readonly challenge: string | undefined;
  /** Retry-After in seconds, for a refusal that passes with time (RFC 9110 §10.2.3): a 429 or 503. */
  readonly retryAfter: number | undefined;
  constructor(
    error: OAuthErrorCode,
    description: string,
    options: { status?: number; redirectable?: boolean; challenge?: string; hint?: string; retryAfter?: number } = {},
  ) {
    super(error, description, { hint: options.hint });
    this.error = error;
    this.status = options.status ?? OAUTH_ERRORS[error].status;
    this.redirectable = options.redirectable ?? true;
    this.challenge = options.challenge;
    this.retryAfter = options.retryAfter;
  }
  /** RFC 6749 §5.2 error body. */
  toJSON(): { error: OAuthErrorCode; error_description: string } {
    return { error: this.error, error_description: this.description };
  }

  /**
   * The message, then the developer hint, within the characters RFC 6749 allows in error_description
   * (%x20-21 / %x23-5B / %x5D-7E).
   */
  get description(): string {
    return oauthText(this.hint ? `${this.message.replace(/\.$/, '')}. Hint: ${this.hint}` : this.message);
  }
}

/** A refusal by the resource guard (RFC 6750 §3): 401 without or with a bad token, 403 for a missing scope. */
export class BearerError extends AgentAccessError {
  declare readonly code: 'access_token_required' | 'invalid_token' | 'insufficient_scope';
  readonly status: 401 | 403;
  readonly error: 'invalid_token' | 'insufficient_scope' | undefined;
  readonly scope: string;
  /** Whose token was refused, when it was a genuine one of ours (signature checked): for the request log. */
  readonly token: { client_id: string; grant_id: string } | null;
  /** Why, as `access.refused` says it (`token_expired`, `token_invalid`, …), when the guard knows. */
  readonly reason: string | undefined;
  constructor(
    status: 401 | 403,
    error: BearerError['error'],
    description: string,
    scope: string,
    hint?: string,
    token: BearerError['token'] = null,
    reason?: string,
  ) {
    // RFC 6750 §3.1: a request without a token gets no error code; its problem says a token is required.
    super(error ?? 'access_token_required', description, { hint });
    this.status = status;
    this.error = error;
    this.scope = scope;
    this.token = token;
    this.reason = reason;
  }
}

/** Not found, conflict and the like (rendered as RFC 9457 problems): a registry code, its status, and the specific sentence. */
export class ProblemError extends AgentAccessError {
  declare readonly code: ProblemCode;
  readonly status: number;
  constructor(code: ProblemCode, message: string, hint?: string) {
    super(code, message, { hint });
    this.status = PROBLEMS[code].status;
  }
}

/** The state file cannot be used; the message names the file and the way out. */
export class StateFileError extends AgentAccessError {
  readonly file: string;
  constructor(file: string, message: string, options?: ErrorOptions) {
    super('state_unusable', message, options);
    this.file = file;
  }
}

/** Another process holds the state file's lock (store/lock.ts); here so the CLI's error mapping need not load the lock. */
export class StateLockedError extends AgentAccessError {
  readonly pid: number | null;
  constructor(file: string, pid: number | null) {
    super('state_locked', `state file ${file} is in use by another agent-access process${pid ? ` (pid ${pid})` : ''}`);
    this.pid = pid;
  }
}

export const invalidRequest = (d: string) => new OAuthError('invalid_request', d);
export const invalidGrant = (d: string) => new OAuthError('invalid_grant', d);
export const invalidScope = (d: string) => new OAuthError('invalid_scope', d);
export const invalidTarget = (d: string) => new OAuthError('invalid_target', d);
export const invalidClient = (d: string) => new OAuthError('invalid_client', d, { status: 401 });
