import { AgentAccessError, OAuthError, StateFileError } from '../core/errors.js';
import { ClientError, type ClientErrorKind } from '../protocol/errors.js';
import { StateLockedError } from '../store/lock.js';

/** Exit codes of every command (documented in the README). */
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
  /** 128 + SIGINT, as shells report it. */
  interrupted: 130,
} as const;

/** The exit code of each kind of client-side failure. */
const CLIENT_EXIT: Record<ClientErrorKind, number> = {
  usage: EXIT.usage,
  failed: EXIT.failure,
  auth_required: EXIT.authRequired,
  denied: EXIT.denied,
  unreachable: EXIT.server,
  server: EXIT.server,
  not_found: EXIT.notFound,
  conflict: EXIT.conflict,
  rate_limited: EXIT.rateLimited,
  interrupted: EXIT.interrupted,
};

/** An expected failure: printed as one line on stderr, no stack trace. */
export class CliError extends AgentAccessError {
  readonly exitCode: number;
  constructor(message: string, exitCode: number = EXIT.failure, code = 'cli.failed') {
    super(code, message);
    this.exitCode = exitCode;
  }
}

/** Turns a thrown error into its message and exit code. Unknown errors keep their stack for a bug report. */
export function describeCliError(error: unknown): { message: string; exitCode: number } {
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode };
  if (error instanceof ClientError) return { message: error.message, exitCode: CLIENT_EXIT[error.kind] };
  if (error instanceof StateFileError) return { message: error.message, exitCode: EXIT.state };
  if (error instanceof StateLockedError) return { message: `${error.message}. Stop the other process, or use another --state file.`, exitCode: EXIT.state };
  if (error instanceof OAuthError) return { message: `${error.error}: ${error.message}`, exitCode: EXIT.failure };
  // A scenario file is input given on the command line: a bad one is a usage error.
  if (error instanceof AgentAccessError && error.code === 'scenario.invalid') return { message: error.message, exitCode: EXIT.usage };
  if (error instanceof AgentAccessError) return { message: error.message, exitCode: error.code.endsWith('not_found') ? EXIT.notFound : EXIT.failure };
  const err = error as NodeJS.ErrnoException;
  if (err?.code === 'EADDRINUSE') return { message: `address in use: ${err.message.replace(/^listen EADDRINUSE: address already in use /, '')}. Pick another port (serve: --port/--auth-port; login: --callback-port), or 0 for a free one.`, exitCode: EXIT.failure };
  if (err?.code === 'EACCES' && err.syscall === 'listen') return { message: `not allowed to listen: ${err.message}`, exitCode: EXIT.failure };
  return { message: err?.stack ?? String(error), exitCode: EXIT.failure };
}

export function failWith(error: unknown): never {
  const { message, exitCode } = describeCliError(error);
  process.stderr.write(`agent-access: ${message}\n`);
  process.exit(exitCode);
}
