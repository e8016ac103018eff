import { mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import lockfile from 'proper-lockfile';
import { AgentAccessError, StateFileError } from '../core/errors.js';

export class StateLockedError extends AgentAccessError {
  constructor(file: string) {
    super('state.locked', `state file ${file} is in use by another agent-access process`);
  }
}

/**
 * Takes the single-writer lock on a state file (a `FILE.lock` directory refreshed while held; a holder that
 * died is taken over after `staleMs`). Returns the release function.
 */
export async function lockStateFile(
  file: string,
  options: { retries?: number; staleMs?: number; onCompromised?: (e: Error) => void; holderPid?: () => Promise<number | null> } = {},
): Promise<() => Promise<void>> {
  try {
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new StateFileError(file, `cannot create the directory of state file ${file} (${code}). Choose a writable place with --state OTHER_FILE, or use --in-memory.`, { cause: e });
  }
  try {
    return await takeLock(file, options);
  } catch (e) {
    // A holder killed with SIGKILL leaves its lock for `staleMs`; when it announced its pid and that process is gone, take over now.
    if (!(e instanceof StateLockedError) || !options.holderPid) throw e;
    const pid = await options.holderPid();
    if (pid === null || pid === process.pid || isAlive(pid)) throw e;
    await rm(`${file}.lock`, { recursive: true, force: true });
    return takeLock(file, options);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function takeLock(file: string, options: { retries?: number; staleMs?: number; onCompromised?: (e: Error) => void }): Promise<() => Promise<void>> {
  try {
    return await lockfile.lock(file, {
      realpath: false,
      stale: options.staleMs ?? 10_000,
      update: Math.min(5_000, Math.floor((options.staleMs ?? 10_000) / 2)),
      retries: options.retries ? { retries: options.retries, minTimeout: 50, maxTimeout: 250 } : 0,
      onCompromised: options.onCompromised ?? ((e) => process.emitWarning(`agent-access: lost the lock on ${file}: ${e.message}`)),
    });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOCKED') throw new StateLockedError(file);
    throw new StateFileError(file, `cannot lock state file ${file} (${code ?? (e as Error).message}). Check that its directory is writable, or use --state OTHER_FILE or --in-memory.`, { cause: e });
  }
}

/** Releases a lock this process holds, if it holds one (used when start-up fails half-way). */
export async function unlockQuietly(file: string): Promise<void> {
  await lockfile.unlock(file, { realpath: false }).catch(() => undefined);
}
