/**
 * The state's files on disk, written on the main thread with Node's async fs (the blocking calls run on libuv's
 * pool, so requests go on meanwhile). Each step runs after the one before it ended, in the order asked:
 *
 * - `commit`: append one journal record and fdatasync it. A commit that fails cuts its record off again: a refused
 *   record is not on disk, and its number is the next one's. A journal that cannot be cut back takes no more. Not
 *   cut back: a record in a file no path names (FILES_GONE), or one appended before the lock was found lost (the
 *   file may be another process's now).
 * - `compaction`: a new state file written to a fresh temp file (0600, created exclusively, never through a symlink)
 *   while commits go on, then fdatasync, rename, folder fsync; the journal then keeps only the records appended
 *   since the compaction began (newer than the new state file), rewritten the same way, or goes when there is none.
 * - `replace`: a state file given whole (a snapshot restored), written durably; the journal goes.
 */
import { constants, statSync } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ledgerFileFor } from './state-files.js';
import { isTempOf, syncDir, tempName, writeFileDurably } from './durable-write.js';

/** A commit found the state's files gone from their paths after appending: the file it appended to is nobody's now. */
export const FILES_GONE = { journal: 'JOURNAL_GONE', folder: 'STATE_FOLDER_GONE' } as const;
/** The single-writer lock is no longer this process's: the commit wrote nothing (or is not acknowledged). */
export const LOCK_LOST = 'LOCK_LOST';
/** A refused record could not be cut off the journal again: no record may follow it, so nothing more is written. */
export const JOURNAL_STUCK = 'JOURNAL_STUCK';

const { O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_APPEND } = constants;

const coded = (message: string, code: string) => Object.assign(new Error(message), { code });

/** The state's folder was found gone (FILES_GONE.folder): what a commit, the lock check and the owner all say then. */
export const folderGone = (folder: string): Error => coded(`the state folder ${folder} was removed while serve ran`, FILES_GONE.folder);

/**
 * A file's identity, or null when it is gone. Synchronous: a stat of a path the kernel has cached costs less than a
 * round trip through libuv's pool, and a commit makes three.
 */
function statOrNull(file: string): { dev: number; ino: number; birthtimeMs: number } | null {
  try {
    return statSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw e;
  }
}

/** The open journal, its length, and its identity when opened (a path that names another file no longer leads to it). */
interface Journal {
  handle: FileHandle;
  size: number;
  dev: number;
  ino: number;
}

export class StateWriter {
  #journal: Journal | null = null;
  #lock: { path: string; dev: number; ino: number; birth: number } | null = null;
  /** Steps run one after the other (a compaction's temp file is written outside of it, see `compaction`). */
  #chain: Promise<unknown> = Promise.resolve();
  /** Whether the last commit failed: a state file begun right after it would claim a record that is not on disk. */
  #lastCommitFailed = false;
  /** A compaction's bytes, gathered here between writes instead of in a fresh buffer for each piece. */
  #out: Buffer | null = null;
  /** A compaction is writing its temp file (one at a time: they would share #out). */
  #compacting = false;
  /** The start on the files failed, or a refused record stuck in the journal: nothing more is written (each step fails with it). */
  #unwritable: Error | null = null;
  /** Closed: nothing more is written, so a compaction that ends late cannot rename over files another process may own. */
  #closed = false;

  constructor(
    readonly file: string,
    readonly journalFile: string,
  ) {}

  #step<T>(fn: () => Promise<T>, always = false): Promise<T> {
    const run = this.#chain.then(() => {
      if (this.#unwritable && !always) throw this.#unwritable;
      if (this.#closed && !always) throw new Error('the state writer was closed');
      return fn();
    });
    this.#chain = run.catch(() => undefined);
    return run;
  }

  /**
   * Makes the folder, removes temp files a killed process left (it is the one writer now), and puts `journalText`
   * in place of the journal when load found a torn or stale one ('' removes it). Resolves to the temp files removed.
   */
  open(journalText: string | null, lockDir: string | null): Promise<number> {
    return this.#step(async () => {
      if (lockDir) {
        const { dev, ino, birthtimeMs } = await stat(lockDir);
        this.#lock = { path: lockDir, dev, ino, birth: birthtimeMs };
      }
      const dir = dirname(this.file);
      await mkdir(dir, { recursive: true, mode: 0o700 });
      let swept = 0;
      for (const name of await readdir(dir)) {
        if ([this.file, this.journalFile, ledgerFileFor(this.file)].some((f) => isTempOf(f, name))) {
          await rm(join(dir, name), { force: true });
          swept++;
        }
      }
      if (journalText === '') await this.#dropJournal();
      else if (journalText !== null) await writeFileDurably(this.journalFile, journalText);
      return swept;
    }).catch((e: unknown) => {
      this.#unwritable = e as Error;
      throw e;
    });
  }

  /** Appends one record durably; resolves to the journal's length. Not acknowledged unless still ours and in place. */
  commit(record: string): Promise<number> {
    return this.#step(async () => {
      this.#lastCommitFailed = true;
      // Not one byte into files another process may own now.
      this.#checkLock();
      const journal = (this.#journal ??= await this.#openJournal());
      const bytes = Buffer.from(record, 'utf8');
      try {
        await writeAll(journal.handle, bytes);
        await journal.handle.datasync();
        // Appended to a file no path names any more, the record would be lost.
        this.#checkInPlace(journal);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === FILES_GONE.journal || code === FILES_GONE.folder) throw e;
        throw (await this.#cutBack(journal, e as Error)) ?? e;
      }
      journal.size += bytes.length;
      // And still ours once written (it could have stood still in between). Not cut back then: the file may be
      // another process's now.
      this.#checkLock();
      this.#lastCommitFailed = false;
      return journal.size;
    });
  }

  /**
   * Writes the state file from `pieces` (its text) while commits go on, then puts it in place and cuts the journal to
   * the records appended since this call. Resolves to the state file's and the journal's bytes.
   */
  async compaction(pieces: AsyncIterable<string>, salvage = false): Promise<{ stateFileBytes: number; journalBytes: number }> {
    // The view was taken after the record just before: if that record is not on disk, neither may the state file be.
    // A salvage is of the state rolled back to before it (the journal was found gone): it may.
    // With no journal open yet (none committed since the start), the one on disk holds records the view holds too.
    const { offset, journalAt, failed } = await this.#step(async () => {
      const journalAt = this.#journal ?? (await stat(this.journalFile).catch(() => null));
      return { offset: journalAt?.size ?? 0, journalAt, failed: this.#lastCommitFailed };
    });
    if (failed && !salvage) throw new Error('the journal record this state file follows could not be written');
    if (this.#compacting) throw new Error('a compaction is already being written');
    this.#compacting = true;
    const name = tempName(this.file);
    let handle: FileHandle | null = null;
    let bytes = 0;
    // The pieces are gathered in one buffer and written when it is full: requests go on during each write.
    const out = (this.#out ??= Buffer.allocUnsafe(1 << 20));
    let length = 0;
    try {
      handle = await open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
      for await (const text of pieces) {
        // UTF-8 takes at most 3 bytes a char.
        if (text.length * 3 > out.length - length) {
          await writeAll(handle, out.subarray(0, length));
          bytes += length;
          length = 0;
        }
        if (text.length * 3 <= out.length) length += out.write(text, length, 'utf8');
        else {
          const buffer = Buffer.from(text, 'utf8');
          await writeAll(handle, buffer);
          bytes += buffer.length;
        }
      }
      await writeAll(handle, out.subarray(0, length));
      bytes += length;
      await handle.datasync();
      // Forgotten before it is closed: a failure below must not close it again.
      const h = handle;
      handle = null;
      await h.close();
    } catch (e) {
      await handle?.close().catch(() => undefined);
      await rm(name, { force: true }).catch(() => undefined);
      throw e;
    } finally {
      this.#compacting = false;
    }
    const renamed = this.#step(async () => {
      // Not over files another process may own now (the lock checked as a commit checks it).
      this.#checkLock();
      await rename(name, this.file);
      await syncDir(dirname(this.file));
      // From here the state file holds every record up to `offset`; a crash before the journal is cut leaves
      // records the next start skips by number. A journal that is another file than the one measured (replaced by
      // hand) is kept whole: a start skips by number what the state file holds.
      const same = !this.#journal || (journalAt?.dev === this.#journal.dev && journalAt.ino === this.#journal.ino);
      const tail = await this.#journalTail(same ? offset : 0);
      if (tail.length === 0) await this.#dropJournal();
      else {
        await writeFileDurably(this.journalFile, tail);
        await this.#journal?.handle.close().catch(() => undefined);
        this.#journal = null;
        this.#journal = await this.#openJournal();
      }
      return { stateFileBytes: bytes, journalBytes: this.#journal?.size ?? 0 };
    });
    // Not renamed (a closed writer, a lost lock, a failed rename): the temp file goes. Once renamed, it is gone anyway.
    return renamed.catch(async (e: unknown) => {
      await rm(name, { force: true }).catch(() => undefined);
      throw e;
    });
  }

  /** A state file given whole, durably; the journal goes (the state names the journal position it follows). */
  replace(text: string): Promise<void> {
    return this.#step(async () => {
      await writeFileDurably(this.file, text);
      await this.#dropJournal();
    });
  }

  close(): Promise<void> {
    return this.#step(async () => {
      this.#closed = true;
      await this.#journal?.handle.close().catch(() => undefined);
      this.#journal = null;
    }, true);
  }

  /** Throws (FILES_GONE) unless the journal's path still names the file this writer appends to. */
  #checkInPlace(journal: Journal): void {
    const at = statOrNull(this.journalFile);
    if (at && at.dev === journal.dev && at.ino === journal.ino) return;
    if (!statOrNull(dirname(this.file))) throw folderGone(dirname(this.file));
    throw coded(`the journal ${this.journalFile} was ${at ? 'replaced' : 'removed'} while serve ran`, FILES_GONE.journal);
  }

  /**
   * Cuts a refused record (or the part of it written) off the journal. When that fails, nothing more is written, and
   * the error that says so (JOURNAL_STUCK) is returned.
   */
  async #cutBack(journal: Journal, cause: Error): Promise<Error | null> {
    try {
      await journal.handle.truncate(journal.size);
      await journal.handle.datasync();
      return null;
    } catch (e) {
      const stuck = new Error(
        `the journal ${this.journalFile} could not be cut back after a failed write (${cause.message}; then ${(e as Error).message}); ` +
          'no record may follow what is left of it',
        { cause },
      );
      return (this.#unwritable = Object.assign(stuck, { code: JOURNAL_STUCK }));
    }
  }

  /** Throws (LOCK_LOST) unless the lock directory is still the one this process made (lock.ts). */
  #checkLock(): void {
    const lock = this.#lock;
    if (!lock) return;
    const at = statOrNull(lock.path);
    if (at && at.dev === lock.dev && at.ino === lock.ino && at.birthtimeMs === lock.birth) return;
    const folder = dirname(lock.path);
    if (!at && !statOrNull(folder)) throw folderGone(folder);
    throw coded(`the lock ${lock.path} is no longer this process's (${at ? 'another process made it anew' : 'it was removed'})`, LOCK_LOST);
  }

  /** Opens the journal to append (0600, never through a symlink); one created here is made durable by a folder fsync. */
  async #openJournal(): Promise<Journal> {
    let handle: FileHandle;
    try {
      handle = await open(this.journalFile, O_WRONLY | O_APPEND | O_NOFOLLOW);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      handle = await open(this.journalFile, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
      await syncDir(dirname(this.journalFile)).catch(async (e: unknown) => {
        await handle.close().catch(() => undefined);
        throw e;
      });
    }
    const { size, dev, ino } = await handle.stat().catch(async (e: unknown) => {
      await handle.close().catch(() => undefined);
      throw e;
    });
    return { handle, size, dev, ino };
  }

  async #dropJournal(): Promise<void> {
    await this.#journal?.handle.close().catch(() => undefined);
    this.#journal = null;
    try {
      await rm(this.journalFile);
      await syncDir(dirname(this.journalFile));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }

  /** The journal from `offset` to its end. */
  async #journalTail(offset: number): Promise<Buffer> {
    const tail = Buffer.alloc(Math.max(0, (this.#journal?.size ?? 0) - offset));
    if (tail.length === 0) return tail;
    const handle = await open(this.journalFile, O_RDONLY | O_NOFOLLOW);
    try {
      for (let read = 0; read < tail.length;) {
        const { bytesRead } = await handle.read(tail, read, tail.length - read, offset + read);
        if (bytesRead === 0) throw coded('journal shorter than written', 'EIO');
        read += bytesRead;
      }
    } finally {
      await handle.close();
    }
    return tail;
  }
}

/** write(2) may write less than asked (a full disk, a signal): go on until all of it is written, or fail. */
async function writeAll(handle: FileHandle, buffer: Uint8Array): Promise<void> {
  for (let offset = 0; offset < buffer.length;) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset);
    if (bytesWritten === 0) throw coded('write made no progress', 'EIO');
    offset += bytesWritten;
  }
}
