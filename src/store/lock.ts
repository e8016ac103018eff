import { lstat, mkdir, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import lockfile from 'proper-lockfile';
import { AgentAccessError, StateFileError } from '../core/errors.js';

/** A held lock is refreshed this often; one not refreshed for STALE_MS is a dead holder's and may be taken. */
const UPDATE_MS = 1_000;
const STALE_MS = 5_000;

export class StateLockedError extends AgentAccessError {
  readonly pid: number | null;
  constructor(file: string, pid: number | null) {
    super('state.locked', `state file ${file} is in use by another agent-access process${pid ? ` (pid ${pid})` : ''}`);
    this.pid = pid;
  }
}

export interface LockOptions {
  /** The holder's pid as it announced itself (serve's admin file), if known. */
  holderPid?: () => Promise<number | null>;
  /** The lock was lost (another process took it over): the holder must stop writing. */
  onCompromised?: (error: Error) => void;
}

/**
 * Takes the single-writer lock on a state file: a `FILE.lock` directory that the holder refreshes every second.
 * If a live process holds it, this fails at once. If the holder is gone (killed without releasing), this waits
 * until proper-lockfile sees the lock go stale and takes it. A holder that announced its pid and is still alive
 * keeps its lock even when it has not refreshed it for longer than that (stopped with Ctrl+Z, paused in a
 * debugger): staleness alone would hand its file to a second writer. Returns the release function.
 */
export async function lockStateFile(file: string, options: LockOptions = {}): Promise<() => Promise<void>> {
  try {
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw new StateFileError(file, `cannot create the directory of state file ${file} (${code}). Choose a writable place with --state OTHER_FILE, or use --in-memory.`, { cause: e });
  }
  const liveHolder = async (): Promise<number | null> => {
    const pid = (await options.holderPid?.()) ?? null;
    return pid !== null && isAlive(pid) ? pid : null;
  };
  const announced = await liveHolder();
  // Locked at all, stale or not: a lock directory left behind with the admin file decides nothing by itself.
  if (announced !== null && (await lockfile.check(file, { realpath: false, stale: Number.MAX_SAFE_INTEGER }))) throw new StateLockedError(file, announced);
  try {
    return await takeLock(file, 0, options);
  } catch (e) {
    if (!(e instanceof StateLockedError)) throw e;
    const pid = await liveHolder();
    if (pid !== null) throw new StateLockedError(file, pid);
    // A holder that died, or one that announced nothing (a short CLI call, or a start in progress): wait for release or staleness.
    return takeLock(file, Math.ceil((STALE_MS + 1_500) / 250), options);
  }
}

/**
 * The state file's path with every symlink resolved. Each name for one file must get the same lock, admin file
 * and ledger, or two writers could each hold "their" file; and a write must replace the file, not a link to it.
 * A file that does not exist yet is named by its directory's real path, as far as that exists; a link to such a
 * file (a first start) by the path of the file it names.
 */
export async function realStatePath(path: string, hops = 0): Promise<string> {
  const absolute = resolve(path);
  try {
    return await realpath(absolute);
  } catch (e) {
    // Not reachable (a loop, no permission): reading it later gives the precise error.
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return absolute;
  }
  const link = await lstat(absolute).catch(() => null);
  if (link?.isSymbolicLink() && hops < 40) return realStatePath(resolve(dirname(absolute), await readlink(absolute)), hops + 1);
  const rest = [basename(absolute)];
  for (let dir = dirname(absolute); ; dir = dirname(dir)) {
    try {
      return join(await realpath(dir), ...rest);
    } catch {
      if (dirname(dir) === dir) return absolute;
      rest.unshift(basename(dir));
    }
  }
}

/** Whether a process with this pid exists (EPERM: it does, under another user). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function takeLock(file: string, retries: number, options: LockOptions): Promise<() => Promise<void>> {
  try {
    return await lockfile.lock(file, {
      realpath: false,
      stale: STALE_MS,
      update: UPDATE_MS,
      retries: retries > 0 ? { retries, minTimeout: 250, maxTimeout: 250, factor: 1 } : 0,
      onCompromised: options.onCompromised ?? ((e) => process.emitWarning(`agent-access: lost the lock on ${file}: ${e.message}`)),
    });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ELOCKED') throw new StateLockedError(file, null);
    throw new StateFileError(file, `cannot lock state file ${file} (${code ?? (e as Error).message}). Check that its directory is writable, or use --state OTHER_FILE or --in-memory.`, { cause: e });
  }
}

/** Releases a lock this process holds, if it holds one (used when start-up fails half-way). */
export async function unlockQuietly(file: string): Promise<void> {
  await lockfile.unlock(file, { realpath: false }).catch(() => undefined);
}
