import { AgentAccessError, OAuthError, StateLockedError } from '../core/state/errors.js';
import { ClientError, type ClientErrorKind } from '../protocol/errors.js';
import { kindOfCode, type ProcessErrorCode } from '../protocol/problems.js';

/** Exit codes of every command (documented in docs/errors.md). */
export const EXIT = {
  ok: 0,
  failure: 1,
  usage: 2,
  state: 3,
  authRequired: 4,
  denied: 5,
  server: 6,
  notFound: 7,
  conflict: 8,
  rateLimited: 9,
  /** `findings --fail-on`: findings at or above the threshold. */
  findings: 10,
  /** 128 + SIGINT, as shells report it. */
  interrupted: 130,
} as const;

/** The exit code of each kind of failure: of the client side's, and of every code in the registry (src/protocol/problems.ts). */
export const CLIENT_EXIT: Record<ClientErrorKind, number> = {
  usage: EXIT.usage,
  failed: EXIT.failure,
  state: EXIT.state,
  auth_required: EXIT.authRequired,
  denied: EXIT.denied,
  unreachable: EXIT.server,
  server: EXIT.server,
  not_found: EXIT.notFound,
  conflict: EXIT.conflict,
  rate_limited: EXIT.rateLimited,
  findings: EXIT.findings,
  interrupted: EXIT.interrupted,
};

/** An expected failure: printed as one line on stderr, no stack trace. */
export class CliError extends AgentAccessError {
  readonly exitCode: number;
  constructor(message: string, exitCode: number = EXIT.failure, code: ProcessErrorCode = 'cli_failed') {
    super(code, message);
    this.exitCode = exitCode;
  }
}

/** Turns a thrown error into its message and exit code. Unknown errors keep their stack for a bug report. */
export function describeCliError(error: unknown): { message: string; exitCode: number } {
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode };
  if (error instanceof ClientError) return { message: error.message, exitCode: CLIENT_EXIT[error.kind] };
  if (error instanceof StateLockedError)
    return { message: `${error.message}. Stop the other process, or use another --state file.`, exitCode: exitCodeOf(error.code) };
  if (error instanceof OAuthError) return { message: `${error.error}: ${error.message}`, exitCode: exitCodeOf(error.code) };
  if (error instanceof AgentAccessError) return { message: error.message, exitCode: exitCodeOf(error.code) };
  const err = error as NodeJS.ErrnoException;
  if (err?.code === 'EADDRINUSE')
    return {
      message:
        `address in use: ${err.message.replace(/^listen EADDRINUSE: address already in use /, '')}. ` +
        'Pick another port (serve: --port/--auth-port; login: --callback-port), or 0 for a free one.',
      exitCode: EXIT.failure,
    };
  if (err?.code === 'EACCES' && err.syscall === 'listen')
    return { message: `not allowed to listen: ${err.message}`, exitCode: EXIT.failure };
  return { message: err?.stack ?? String(error), exitCode: EXIT.failure };
}

/** The exit code of a code in the registry; a code it does not hold is a plain failure. */
export function exitCodeOf(code: string): number {
  const kind = kindOfCode(code);
  return kind ? CLIENT_EXIT[kind] : EXIT.failure;
}

export function failWith(error: unknown): never {
  const { message, exitCode } = describeCliError(error);
  process.stderr.write(`agent-access: ${message}\n`);
  process.exit(exitCode);
}
