/**
 * What went wrong on the client side (the client, the dashboard, finding an emulator), as a stable kind that a
 * front end turns into its own terms: the CLI maps each kind to a documented exit code (cli/errors).
 */
export type ClientErrorKind =
  /** The caller asked for something that cannot work (a bad URL, an empty scope). */
  | 'usage'
  /** Anything else that failed (a login that timed out, a damaged token store). */
  | 'failed'
  /** The state file cannot be used: damaged, held by another process, or its lock was lost. */
  | 'state'
  /** No valid login: the person must log in (again). */
  | 'auth_required'
  /** Refused: the person said no, or the token lacks the scope. */
  | 'denied'
  /** The server cannot be reached at all. */
  | 'unreachable'
  /** The server answered, but with a server error or something it must not say. */
  | 'server'
  | 'not_found'
  /** `findings --fail-on`: the emulator recorded client findings at or above the threshold. */
  | 'findings'
  /** An Idempotency-Key used for another request, or one still running. */
  | 'conflict'
  | 'rate_limited'
  /** The person stopped it (Ctrl-C). */
  | 'interrupted';

/** An expected failure: one line for people, no stack trace. `code` names the case more finely than `kind`. */
export class ClientError extends Error {
  override readonly name = 'ClientError';
  constructor(
    readonly kind: ClientErrorKind,
    message: string,
    readonly code: string = `client.${kind}`,
  ) {
    super(message);
  }
}
