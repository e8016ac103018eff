import { request } from 'undici';
import { textOf } from './format.js';
import type { ClientErrorKind } from './errors.js';
import { kindOfAnswer, problemCodeOf, type ProblemCode } from './problems.js';

/** Where the admin API of a running emulator is, and the token it wants. */
export interface AdminEndpoint {
  adminUrl: string;
  token: string;
}

/**
 * The admin API answered with an error: its status and problem body, the problem's registry code, and what it means
 * to a client (its `kind`, which the CLI turns into an exit code).
 */
export class AdminError extends Error {
  readonly code: ProblemCode | undefined;
  readonly kind: ClientErrorKind;
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    readonly path: string,
  ) {
    super(textOf(body.detail ?? body.error_description, `the emulator answered ${status}`));
    this.code = problemCodeOf(body);
    this.kind = kindOfAnswer(status, body);
  }
}

/**
 * One call to the admin API (grants, charges, clock, tokens, decisions). Answers >= 400 throw AdminError;
 * a connection that fails throws undici's error, for the caller to say the emulator is not there.
 */
export async function adminRequest<T>(
  endpoint: AdminEndpoint,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<T> {
  const response = await request(`${endpoint.adminUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${endpoint.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
  const answer = (await response.body.json().catch(() => ({}))) as Record<string, unknown>;
  if (response.statusCode >= 400) throw new AdminError(response.statusCode, answer, path);
  return answer as T;
}
