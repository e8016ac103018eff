/**
 * The state file's writer thread: every blocking file step of a durable write runs here, in the order the main
 * thread posted them, so that the main thread never waits on the disk and renames never go back.
 *
 * - `commit`: append one journal record (fdatasync), acknowledge. A failed append is cut off again, so that a
 *   later record never follows half of one. (Its charges are in it; the ledger file is the main thread's view.)
 * - `compaction-begin` / `compaction-chunk` / `compaction-end`: a new state file (a compaction), written to a fresh temp file (0600,
 *   created exclusively, never through a symlink) in chunks while commits go on, then fdatasync, rename over the
 *   state file, directory fsync. The journal then keeps only what was appended after `compaction-begin` (those records are
 *   newer than the new state file), rewritten the same way, or goes when there is none.
 * - `replace`: a state file given whole (a snapshot restored), written durably; the journal goes.
 */
import {
  closeSync,
  constants,
  mkdirSync,
  fdatasyncSync,
  fstatSync,
  ftruncateSync,
  fsyncSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { parentPort } from 'node:worker_threads';
import { ledgerFileFor } from './state-files.js';
import { FILES_GONE, LOCK_LOST } from './writer-errors.js';

export type WriterMessage =
  | { op: 'open'; id: number; file: string; journal: string; journalText: string | null; lock?: string | null }
  | { op: 'commit'; id: number; record: string }
  | { op: 'compaction-begin'; id: number; salvage?: boolean }
  | { op: 'compaction-chunk'; text: string }
  | { op: 'compaction-end'; id: number }
  | { op: 'replace'; id: number; state: string }
  | { op: 'close'; id: number };

export interface WriterReply {
  id: number;
  /** Bytes in the journal after the step. */
  journalBytes?: number;
  /** `compaction-end`: bytes of the state file written. */
  stateFileBytes?: number;
  /** `open`: temp files left by a writer that was killed, now removed. */
  swept?: number;
  error?: { message: string; code?: string };
}

const { O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_APPEND } = constants;

interface Paths {
  file: string;
  journal: string;
}

/** An open append-only file and how long it is. */
interface Appendable {
  fd: number;
  size: number;
  /** The file's identity when opened: a path that names another file (or none) no longer leads to what is appended. */
  dev: number;
  ino: number;
}

/** The lock directory this process holds (lock.ts), as it was when the writer opened: a new holder makes another. */
let lock: { path: string; dev: number; ino: number; birth: number } | null = null;

/**
 * Throws (LOCK_LOST) unless the lock directory is still the one this process made: removed by hand, or taken over
 * by another process after this one stood still (SIGSTOP, a debugger), it is not. The lock's refresh timer finds
 * that too, but only once it runs: a process that continues serves the requests queued for it first.
 */
function checkLock(): void {
  if (!lock) return;
  let at: { dev: number; ino: number; birthtimeMs: number } | null = null;
  try {
    at = statSync(lock.path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  if (at && at.dev === lock.dev && at.ino === lock.ino && at.birthtimeMs === lock.birth) return;
  // Gone with the folder it was in: that is what to say.
  const folder = dirname(lock.path);
  if (!at && !statOrNull(folder))
    throw Object.assign(new Error(`the state folder ${folder} was removed while serve ran`), { code: FILES_GONE.folder });
  throw Object.assign(
    new Error(`the lock ${lock.path} is no longer this process's (${at ? 'another process made it anew' : 'it was removed'})`),
    { code: LOCK_LOST },
  );
}

let paths: Paths | null = null;
let journal: Appendable | null = null;
/** A state file being written. */
interface CompactionWrite {
  name: string;
  fd: number;
  journalOffset: number;
  bytes: number;
  error: Error | null;
}
let compaction: CompactionWrite | null = null;
/** Whether the last commit failed: a state file begun right after it would claim a record that is not on disk. */
let lastCommitFailed = false;

const tempName = (file: string) => join(dirname(file), `.${basename(file)}.${randomBytes(9).toString('base64url')}.tmp`);
/** Exactly the names `tempName` makes for this file. */
const isTempOf = (file: string, name: string) => {
  const prefix = `.${basename(file)}.`;
  return (
    name.length === prefix.length + 16 &&
    name.startsWith(prefix) &&
    name.endsWith('.tmp') &&
    /^[A-Za-z0-9_-]{12}$/.test(name.slice(prefix.length, -4))
  );
};

/**
 * A compaction's bytes, gathered in the same buffer and written when it is full or a chunk ends, instead of a fresh
 * buffer each (fresh memory is what costs most on a VM).
 */
const out = Buffer.allocUnsafe(1 << 20);
let outLength = 0;

/** write(2) may write less than asked (a full disk, a signal): go on until all of it is written, or fail. */
function writeAll(fd: number, buffer: Uint8Array, position: number | null = null): void {
  for (let offset = 0; offset < buffer.length;) {
    const written = writeSync(fd, buffer, offset, buffer.length - offset, position === null ? null : position + offset);
    if (written === 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' });
    offset += written;
  }
}

function syncDir(file: string): void {
  const dir = openSync(dirname(file), 'r');
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/** Opens an append-only file (0600, never through a symlink); a file created here is made durable by a directory fsync. */
function openAppendable(file: string): Appendable {
  let created = false;
  let fd: number;
  try {
    fd = openSync(file, O_WRONLY | O_APPEND | O_NOFOLLOW);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    fd = openSync(file, O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    created = true;
  }
  if (created) syncDir(file);
  const { size, dev, ino } = fstatSync(fd);
  return { fd, size, dev, ino };
}

/** Throws (FILES_GONE) unless `file` still names the open `target`, or its folder is gone. One stat: about a microsecond. */
function checkInPlace(file: string, target: Appendable): void {
  const at = statOrNull(file);
  if (at && at.dev === target.dev && at.ino === target.ino) return;
  const folder = dirname(file);
  if (!statOrNull(folder))
    throw Object.assign(new Error(`the state folder ${folder} was removed while serve ran`), { code: FILES_GONE.folder });
  throw Object.assign(new Error(`the journal ${file} was ${at ? 'replaced' : 'removed'} while serve ran`), { code: FILES_GONE.journal });
}

function statOrNull(file: string): { dev: number; ino: number } | null {
  try {
    return statSync(file);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return null;
    throw e;
  }
}

function append(target: Appendable, text: string): void {
  const bytes = Buffer.from(text, 'utf8');
  try {
    writeAll(target.fd, bytes);
    fdatasyncSync(target.fd);
  } catch (e) {
    cutBack(target);
    throw e;
  }
  target.size += bytes.length;
}

/** Removes whatever part of a failed append reached the file. */
function cutBack(target: Appendable): void {
  try {
    ftruncateSync(target.fd, target.size);
    fdatasyncSync(target.fd);
  } catch {
    // The next start drops a torn last record; a torn line with records after it is refused there, never replayed.
  }
}

/** Writes `bytes` as `file`: fresh temp file, fdatasync, rename, directory fsync. */
function writeDurably(file: string, bytes: Uint8Array): void {
  const name = tempName(file);
  let fd = openSync(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  // Forgotten before it is closed, also when close fails (Linux releases the number either way): a second close would
  // hit whatever the main thread opened under that number since, a socket, and abort the process.
  const forget = () => {
    const open = fd;
    fd = -1;
    return open;
  };
  try {
    writeAll(fd, bytes);
    fdatasyncSync(fd);
    closeSync(forget());
    renameSync(name, file);
  } catch (e) {
    if (fd >= 0) closeQuietly(fd);
    unlinkQuietly(name);
    throw e;
  }
  syncDir(file);
}

const closeQuietly = (fd: number) => {
  try {
    closeSync(fd);
  } catch {
    // already closed
  }
};
const unlinkQuietly = (name: string) => {
  try {
    unlinkSync(name);
  } catch {
    // gone already
  }
};

function dropJournal(p: Paths): void {
  if (journal) closeQuietly(journal.fd);
  journal = null;
  try {
    unlinkSync(p.journal);
    syncDir(p.journal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
}

/** The journal from `offset` to its end. */
function journalTail(p: Paths, offset: number): Buffer {
  const size = journal?.size ?? 0;
  const tail = Buffer.alloc(Math.max(0, size - offset));
  if (tail.length === 0) return tail;
  const fd = openSync(p.journal, O_RDONLY | O_NOFOLLOW);
  try {
    for (let read = 0; read < tail.length;) {
      const n = readSync(fd, tail, read, tail.length - read, offset + read);
      if (n === 0) throw Object.assign(new Error('journal shorter than written'), { code: 'EIO' });
      read += n;
    }
  } finally {
    closeSync(fd);
  }
  return tail;
}

function flushOut(b: CompactionWrite): void {
  if (outLength === 0) return;
  const length = outLength;
  outLength = 0;
  writeAll(b.fd, out.subarray(0, length));
  b.bytes += length;
}

function writeText(b: CompactionWrite, text: string): void {
  if (text.length === 0) return;
  // UTF-8 takes at most 3 bytes a char.
  if (text.length * 3 > out.length - outLength) flushOut(b);
  if (text.length * 3 <= out.length) outLength += out.write(text, outLength, 'utf8');
  else {
    const bytes = Buffer.from(text, 'utf8');
    writeAll(b.fd, bytes);
    b.bytes += bytes.length;
  }
}

/**
 * One message, handled as the thread does; exported so that a test can run the writer in its own process and cut it
 * short after any file operation (test/writer-crash-points.test.ts).
 */
export function handle(message: WriterMessage): WriterReply | null {
  switch (message.op) {
    case 'open': {
      paths = { file: message.file, journal: message.journal };
      if (message.lock) {
        const { dev, ino, birthtimeMs } = statSync(message.lock);
        lock = { path: message.lock, dev, ino, birth: birthtimeMs };
      }
      mkdirSync(dirname(message.file), { recursive: true, mode: 0o700 });
      let swept = 0;
      // Temp files of a writer that was killed before it could remove them: this is the one writer now.
      for (const name of readdirSync(dirname(message.file))) {
        // The ledger file's too: the main thread writes it the same way (durable-write.ts).
        if ([message.file, message.journal, ledgerFileFor(message.file)].some((f) => isTempOf(f, name))) {
          unlinkQuietly(join(dirname(message.file), name));
          swept++;
        }
      }
      // What the journal must hold before anything is appended (load found a torn last record, or stale ones).
      if (message.journalText === '') dropJournal(paths);
      else if (message.journalText !== null) writeDurably(message.journal, Buffer.from(message.journalText, 'utf8'));
      return { id: message.id, swept };
    }
    case 'commit': {
      const p = need();
      lastCommitFailed = true;
      // Not one byte into files another process may own now.
      checkLock();
      const target = (journal ??= openAppendable(p.journal));
      append(target, message.record);
      // Before the acknowledgement: appended to a file no path names any more, the record would be lost.
      checkInPlace(p.journal, target);
      // And still ours once written (it could have stood still in between): else not acknowledged.
      checkLock();
      lastCommitFailed = false;
      return { id: message.id, journalBytes: target.size };
    }
    case 'compaction-begin': {
      const p = need();
      const name = tempName(p.file);
      // One given up half way (its main thread stopped posting: the files were found gone) goes.
      if (compaction && compaction.fd >= 0) {
        closeQuietly(compaction.fd);
        unlinkQuietly(compaction.name);
      }
      compaction = { name, fd: -1, journalOffset: journal?.size ?? 0, bytes: 0, error: null };
      // The snapshot was taken after the record just before: if that record is not on disk, neither may the snapshot be.
      // A salvage is of the state rolled back to before that record (the journal was found gone): it may.
      if (lastCommitFailed && !message.salvage) {
        compaction.error = new Error('the journal record this state file follows could not be written');
        return null;
      }
      try {
        compaction.fd = openSync(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
      } catch (e) {
        // Reported by compaction-end, which the main thread waits for.
        compaction.error = e as Error;
      }
      return null;
    }
    case 'compaction-chunk': {
      if (compaction && !compaction.error) {
        try {
          writeText(compaction, message.text);
          flushOut(compaction);
        } catch (e) {
          outLength = 0;
          compaction.error = e as Error;
        }
      }
      return null;
    }
    case 'compaction-end': {
      const p = need();
      const b = compaction;
      compaction = null;
      if (!b) throw new Error('no state file write in progress');
      const created = b.fd >= 0;
      try {
        if (b.error) throw b.error;
        fdatasyncSync(b.fd);
        // Forgotten before it is closed (see writeDurably): a failed rename below must not close it again.
        const fd = b.fd;
        b.fd = -1;
        closeSync(fd);
        renameSync(b.name, p.file);
      } catch (e) {
        if (b.fd >= 0) closeQuietly(b.fd);
        if (created) unlinkQuietly(b.name);
        throw e;
      }
      syncDir(p.file);
      // From here the state file holds every record up to compaction-begin; a crash before the journal is rewritten
      // leaves records the next start skips by number.
      const tail = journalTail(p, b.journalOffset);
      if (tail.length === 0) dropJournal(p);
      else {
        writeDurably(p.journal, tail);
        if (journal) closeQuietly(journal.fd);
        // Not kept closed: a commit would append to whatever holds that number next.
        journal = null;
        journal = openAppendable(p.journal);
      }
      return { id: message.id, journalBytes: journal?.size ?? 0, stateFileBytes: b.bytes };
    }
    case 'replace': {
      const p = need();
      // The state names the journal position it follows, so a crash before the journal goes has its records skipped.
      writeDurably(p.file, Buffer.from(message.state, 'utf8'));
      dropJournal(p);
      return { id: message.id, journalBytes: 0 };
    }
    case 'close': {
      if (journal) closeQuietly(journal.fd);
      journal = null;
      if (compaction && compaction.fd >= 0) {
        closeQuietly(compaction.fd);
        unlinkQuietly(compaction.name);
        compaction = null;
      }
      return { id: message.id };
    }
  }
}

function need(): Paths {
  if (!paths) throw new Error('the writer was not opened');
  return paths;
}

parentPort?.on('message', (message: WriterMessage) => {
  let reply: WriterReply | null;
  try {
    reply = handle(message);
  } catch (e) {
    const error = e as NodeJS.ErrnoException;
    reply = 'id' in message ? { id: message.id, error: { message: error.message, code: error.code } } : null;
  }
  if (reply) parentPort?.postMessage(reply);
});
