import { constants } from 'node:fs';
import { access, lstat, mkdir, readdir, readFile, readlink, realpath, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import lockfile from 'proper-lockfile';
import { StateFileError, StateLockedError } from '../core/state/errors.js';
import { makeDirDurably } from './durable-write.js';

/** A held lock is refreshed this often; one not refreshed for STALE_MS is a dead holder's and may be taken. */
const UPDATE_MS = 1_000;
const STALE_MS = 5_000;

/** What a holder announced about itself (serve's admin file, see admin-file.ts), judged now. */
export interface AnnouncedHolder {
  pid: number;
  /** Where it announced itself (the admin file), for messages. */
  file: string;
  /** When it announced itself (the admin file's mtime, ms): after it had taken the lock. */
  announcedAt: number;
  /** Its pid is alive and its admin port takes connections (a stopped serve's kernel still accepts): it may hold the lock. */
  live: boolean;
  /**
   * Provably gone: announced on this host and in this pid namespace, and its pid is not alive, or belongs to a
   * process started after the announcement (a reused pid). A serve that is stopping (its port closed, its pid
   * alive) is not gone.
   */
  gone: boolean;
}

export interface LockOptions {
  /** The holder as it announced itself (serve's admin file), if it did. */
  holder?: () => Promise<AnnouncedHolder | null>;
  /** The lock was lost (another process took it over): the holder must stop writing. */
  onCompromised?: (error: Error) => void;
  /** One line for the person at the terminal: a wait on a lock, a lock taken over from a holder that is gone. */
  onNotice?: (line: string) => void;
}

/**
 * Takes the single-writer lock on a state file: a `FILE.lock` directory that the holder refreshes every second.
 * If a live process holds it, this fails at once. If the holder announced itself and is provably gone (killed,
 * see AnnouncedHolder.gone) and the lock is still the one it took (created before it announced itself, so
 * nobody has taken it since), the lock is taken at once. Otherwise a holder that is gone is waited out until
 * proper-lockfile sees its lock go stale. A holder that announced its pid and is still alive keeps its lock even
 * when it has not refreshed it for longer than that (stopped with Ctrl+Z, paused in a debugger): staleness alone
 * would hand its file to a second writer. Returns the release function.
 */
export async function lockStateFile(file: string, options: LockOptions = {}): Promise<StateLock> {
  const release = await lockStatePath(file, options);
  // Once a start, not at every compaction.
  await sweepIdentityLocks(identityLockDir());
  let held: IdentityLock | null;
  try {
    held = await lockIdentity(file, options);
  } catch (e) {
    await release().catch(() => undefined);
    throw e;
  }
  let moving = Promise.resolve();
  return Object.assign(
    async () => {
      await moving;
      await held?.release().catch(() => undefined);
      await release();
    },
    {
      // One at a time: two compactions in a row must not leave the older inode locked and the newer not.
      identify: () =>
        (moving = moving.then(async () => {
          const now = await stat(file).catch(() => null);
          if (!now || (held && held.dev === now.dev && held.ino === now.ino)) return;
          const next = await lockIdentity(file, options).catch((e: unknown) => {
            options.onNotice?.(`cannot lock ${file} by its new identity: ${(e as Error).message}`);
            return null;
          });
          if (!next) return;
          const previous = held;
          held = next;
          await previous?.release().catch(() => undefined);
        })),
    },
  );
}

/**
 * Releases both locks. `identify` moves the lock on the file's identity to the file the path names now: call it once
 * there is a file (a first start), and after each write of a new state file (a compaction renames a new inode into
 * place, and a link made to it then would otherwise not be seen).
 */
export type StateLock = (() => Promise<void>) & { identify: () => Promise<void> };

/** A folder of this user's that no one else may read or write. */
function isPrivateDir(info: { isDirectory(): boolean; uid: number; mode: number }): boolean {
  const uid = process.getuid?.();
  return info.isDirectory() && (uid === undefined || info.uid === uid) && (info.mode & 0o077) === 0;
}

/** The private folder of this user's that locks by identity are in. */
const identityLockDir = (): string => join(tmpdir(), `agent-access-${process.getuid?.() ?? 'user'}`);

/** A lock by identity not refreshed for this long was left by a killed holder (a live one refreshes it every second). */
const IDENTITY_LEFTOVER_MS = 60 * 60_000;

/** Removes the locks and notes killed holders left in `dir` long ago, so that the folder does not grow run after run. */
async function sweepIdentityLocks(dir: string): Promise<void> {
  const info = await lstat(dir).catch(() => null);
  if (!info || !isPrivateDir(info)) return;
  const cutoff = Date.now() - IDENTITY_LEFTOVER_MS;
  const names = await readdir(dir).catch(() => [] as string[]);
  const old = async (name: string) => {
    const info = await lstat(join(dir, name)).catch(() => null);
    return info !== null && info.mtimeMs < cutoff;
  };
  for (const name of names) if (/^\d+-\d+\.lock$/.test(name) && (await old(name))) await rmdir(join(dir, name)).catch(() => undefined);
  for (const name of names) {
    if (!/^\d+-\d+\.json$/.test(name) || !(await old(name))) continue;
    const lock = await lstat(join(dir, name.replace(/\.json$/, '.lock'))).catch(() => null);
    if (!lock) await rm(join(dir, name), { force: true });
  }
}

interface IdentityLock {
  dev: number;
  ino: number;
  release: () => Promise<void>;
}

/** The lock on the state file's path (see lockStateFile). */
async function lockStatePath(file: string, options: LockOptions): Promise<() => Promise<void>> {
  try {
    await makeDirDurably(dirname(file), { gitignore: true });
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
    throw (
      (await notWritable(file, dirname(file))) ??
      new StateFileError(
        file,
        `cannot create the directory of state file ${file} (${code}). Choose a writable place with --state OTHER_FILE, or use --in-memory.`,
        { cause: e },
      )
    );
  }
  // Before the lock: on a read-only folder, a lock left by a killed serve can be neither taken over nor waited out,
  // and the wait ended in "in use by another agent-access process".
  const readOnly = await notWritable(file, dirname(file));
  if (readOnly) throw readOnly;
  const holder = async (): Promise<AnnouncedHolder | null> => (await options.holder?.()) ?? null;
  const announced = await holder();
  // Locked at all, stale or not: a lock directory left behind with the admin file decides nothing by itself.
  if (announced?.live && (await lockfile.check(file, { realpath: false, stale: Number.MAX_SAFE_INTEGER })))
    throw new StateLockedError(file, announced.pid);
  const takenOver = announced?.gone ? await removeLockOfGoneHolder(file, announced) : null;
  try {
    const release = await takeLock(file, 0, options);
    if (takenOver) options.onNotice?.(takenOver);
    return release;
  } catch (e) {
    if (!(e instanceof StateLockedError)) throw e;
    const now = await holder();
    if (now?.live) throw new StateLockedError(file, now.pid);
    // A holder that died, or one that announced nothing (a short CLI call, or a start in progress): wait for release or staleness.
    const age = await lockAge(file);
    if (age !== null)
      options.onNotice?.(
        `waiting for the lock on ${file}, last refreshed ${seconds(age)} ago ${heldBy(now)}; it is taken once released, or once not ` +
          `refreshed for ${STALE_MS / 1000} s`,
      );
    return takeLock(file, Math.ceil((STALE_MS + 1_500) / 250), options);
  }
}

const lockDirOf = (file: string): string => `${file}.lock`;

/**
 * The lock on the state file itself, by its device and inode: a hard link to it from another folder is another path,
 * with a lock, journal and ledger of its own beside it, and a second serve started on it wrote the same file. It is
 * a lock directory (as the path's) in a folder of this user's in the temp folder, named by the identity, beside a note
 * of the path that holds it (takeIdentity says who is refused). The identity is the file's at the start, moved to each
 * new state file a compaction puts in place (StateLock.identify). Null: no file yet (nothing can link to it), or no
 * lock by identity could be had (the path's lock alone then).
 */
async function lockIdentity(file: string, options: LockOptions): Promise<IdentityLock | null> {
  const identity = await stat(file).catch(() => null);
  if (!identity) return null;
  const dir = identityLockDir();
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    // Another user's folder (made first in a shared temp folder) could hold or fake locks.
    if (!isPrivateDir(await lstat(dir))) throw new Error(`${dir} is not private`);
  } catch (e) {
    options.onNotice?.(
      `cannot lock ${file} by its identity in ${dir} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): a hard link to it ` +
        `could let a second serve start on it`,
    );
    return null;
  }
  const key = join(dir, `${identity.dev}-${identity.ino}`);
  const note = `${key}.json`;
  const release = await takeIdentity(file, identity, key, options);
  if (!release) return null;
  await writeFile(note, JSON.stringify({ path: file, pid: process.pid }), { mode: 0o600 });
  return {
    dev: identity.dev,
    ino: identity.ino,
    release: async () => {
      await rm(note, { force: true });
      await release();
    },
  };
}

/**
 * Takes the lock directory `key` (see lockIdentity). Held for another path that names this very file now, the file
 * is served under two names and the start is refused. Held for another path that is another file now (inode numbers
 * are reused: the holder's file was replaced by a compaction, or removed, and this file made with its old number
 * since), it is waited for: its holder moves it to its new file, or it goes stale. The note is read anew at each try,
 * as a holder that has just taken the lock writes its note only after. Held for this path, it was left by a holder
 * that is gone (this process holds the path's lock now) and is taken at once. Null: still held for another file
 * after the wait, so the path's lock alone protects this one.
 */
async function takeIdentity(
  file: string,
  identity: { dev: number; ino: number },
  key: string,
  options: LockOptions,
): Promise<(() => Promise<void>) | null> {
  const deadline = Date.now() + STALE_MS + 1_500;
  let clearedOwn = false;
  for (;;) {
    try {
      return await lockfile.lock(key, {
        realpath: false,
        stale: STALE_MS,
        update: UPDATE_MS,
        onCompromised: options.onCompromised ?? ((e) => process.emitWarning(`agent-access: lost the lock on ${file}: ${e.message}`)),
      });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ELOCKED') throw e;
    }
    // A note cut short (its writer killed while writing it) names no holder, as no note does.
    const holder = (await readFile(`${key}.json`, 'utf8')
      .then(JSON.parse)
      .catch(() => null)) as { path?: unknown; pid?: unknown } | null;
    const theirs = typeof holder?.path === 'string' && holder.path !== file ? holder.path : null;
    if (theirs !== null) {
      const now = await stat(theirs).catch(() => null);
      if (now?.dev === identity.dev && now.ino === identity.ino)
        throw new StateFileError(
          file,
          `state file ${file} is the same file as ${theirs} (a hard link${
            typeof holder?.pid === 'number' ? `), which pid ${holder.pid} serves` : ')'
          }: two names for one file would let two processes write it, each with a journal and ledger of its own. ` +
            `Use one name, or copy the file (cp) for a second state.`,
        );
    } else if (holder?.path === file) {
      if (clearedOwn) throw new StateLockedError(file, null);
      clearedOwn = true;
      await rmdir(`${key}.lock`).catch(() => undefined);
      continue;
    }
    if (Date.now() >= deadline) {
      if (theirs === null) throw new StateLockedError(file, null);
      options.onNotice?.(`cannot lock ${file} by its identity: ${key} is held for ${theirs}, which is another file now`);
      return null;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/**
 * The error to give when `dir`, or the nearest folder above it that exists, cannot be written: a read-only file
 * system (EROFS, also for root) or a folder without write permission (EACCES, EPERM). Null when it can be.
 */
async function notWritable(file: string, dir: string): Promise<StateFileError | null> {
  for (let at = dir; ; at = dirname(at)) {
    try {
      await access(at, constants.W_OK);
      return null;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && dirname(at) !== at) continue;
      const way = 'Choose a writable place with --state OTHER_FILE, or use --in-memory.';
      if (code === 'EROFS')
        return new StateFileError(
          file,
          `cannot use state file ${file}: the folder ${at} is on a read-only file system, and serve writes its state, journal and lock there. ${way}`,
          { cause: e },
        );
      if (code === 'EACCES' || code === 'EPERM')
        return new StateFileError(file, `cannot use state file ${file}: the folder ${at} is not writable (${code}). ${way}`, { cause: e });
      return null;
    }
  }
}
const seconds = (ms: number): string => `${(Math.max(0, ms) / 1000).toFixed(1)} s`;

function heldBy(holder: AnnouncedHolder | null): string {
  if (!holder)
    return 'by a process that did not announce itself (a short CLI call, or a serve that is starting, or was killed before it announced itself)';
  if (holder.gone)
    return `by a process other than pid ${holder.pid} (named in ${holder.file}, which is gone): the lock is newer than that file, or its age unknown`;
  return `by pid ${holder.pid} (named in ${holder.file}), whose admin port does not take connections: it is stopping, or it died`;
}

/** How long ago the lock was last refreshed (ms), or null if there is none. */
async function lockAge(file: string): Promise<number | null> {
  const info = await stat(lockDirOf(file)).catch(() => null);
  return info ? Date.now() - info.mtimeMs : null;
}

/**
 * A lock created before its holder announced itself is that holder's: anyone who took it over since removed it
 * and created a new one (mkdir), born later. Birth times come from statx; where a file system has none, Node
 * reports 0 (never the holder's then) or the change time, which every refresh moves past the announcement.
 */
const isLockOf = (lock: { birthtimeMs: number }, holder: AnnouncedHolder): boolean =>
  lock.birthtimeMs > 0 && lock.birthtimeMs < holder.announcedAt;

/**
 * Removes the lock of a holder that is gone, if it is still that holder's (see isLockOf): nobody refreshes it,
 * so waiting for it to go stale would only delay the restart. Returns the notice to give once the lock is taken,
 * or null if the lock is someone else's (then the usual rules apply).
 */
async function removeLockOfGoneHolder(file: string, holder: AnnouncedHolder): Promise<string | null> {
  const dir = lockDirOf(file);
  const lock = await stat(dir).catch(() => null);
  if (!lock || !isLockOf(lock, holder)) return null;
  // Looked at again just before: two starts racing here must not remove the lock the faster one has just made.
  const again = await stat(dir).catch(() => null);
  if (!again || !isLockOf(again, holder)) return null;
  try {
    await rmdir(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return null;
  }
  return (
    `took over the lock on ${file} from pid ${holder.pid} (named in ${holder.file}), whose process is gone; the lock was last ` +
    `refreshed ${seconds(Date.now() - lock.mtimeMs)} ago`
  );
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
    throw new StateFileError(
      file,
      `cannot lock state file ${file} (${code ?? (e as Error).message}). Check that its directory is writable, or use --state OTHER_FILE or --in-memory.`,
      { cause: e },
    );
  }
}

/** Releases a lock this process holds, if it holds one (used when start-up fails half-way). */
export async function unlockQuietly(file: string): Promise<void> {
  await lockfile.unlock(file, { realpath: false }).catch(() => undefined);
}
