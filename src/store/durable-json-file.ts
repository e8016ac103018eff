import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import { basename, dirname, join } from 'node:path';
import type { Adapter } from 'lowdb';
import { StateFileError } from '../core/errors.js';
import { SnapshotSerializer } from './snapshot-serializer.js';

type Deferred = { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void };
const deferred = (): Deferred => {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
};

/**
 * Snapshots handed to the writer at once. One: saves that arrive while it writes wait for the next snapshot,
 * which then holds all of them. A second queued snapshot hides the hop back to the main thread but was
 * measured slower, because more, smaller snapshots cost more serialisation on the main thread.
 */
const QUEUE_DEPTH = 1;

/**
 * The blocking part of a durable write, run in one worker thread: write the snapshot to a fresh temp file
 * (created exclusively, 0600), fdatasync, rename it over the target, fsync the directory, acknowledge. One
 * message in, one out, so under load the main thread is not needed between the steps; messages are handled in
 * order, so renames never go back. Inline CommonJS so it loads the same from dist/ and from the TypeScript
 * sources under test.
 *
 * Freeing the file a rename replaces costs as much as the rename itself, and durability does not wait for it:
 * the writer keeps the current file open, so the rename does not free the old one, and closes it once the next
 * rename is acknowledged, while the main thread prepares the next snapshot. Every snapshot still goes to a new
 * file, never into one a reader may hold. (Creating the next temp file ahead was tried too: it left a file in
 * the directory between writes, so removing the directory right after an acknowledged write could fail.)
 */
const WRITER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const fs = require('node:fs');
const path = require('node:path');
const { randomBytes } = require('node:crypto');
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_APPEND } = fs.constants;
/** The file now named as the target, held open until the next rename replaced it. */
let current = null;
const closeQuietly = (fd) => { try { fs.closeSync(fd); } catch {} };
const createTemp = (file) => {
  const name = path.join(path.dirname(file), '.' + path.basename(file) + '.' + randomBytes(9).toString('base64url') + '.tmp');
  return { name, fd: fs.openSync(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600) };
};
/** write(2) may write less than asked (a full disk, a signal): go on until all of it is written or it fails. */
const writeAll = (fd, buffer) => {
  for (let offset = 0; offset < buffer.length; ) {
    const written = fs.writeSync(fd, buffer, offset, buffer.length - offset);
    if (written === 0) throw Object.assign(new Error('write made no progress'), { code: 'EIO' });
    offset += written;
  }
};
const discard = (temp) => { closeQuietly(temp.fd); try { fs.unlinkSync(temp.name); } catch {} };
let swept = false;
/** Temp files of this target left by a writer that did not get to close (a crash, a kill -9): the one writer removes them. */
const sweep = (file) => {
  swept = true;
  // Exactly the names createTemp makes for this file: not those of another state file beside it (state.json.2).
  const prefix = '.' + path.basename(file) + '.';
  const ours = (name) => name.length === prefix.length + 16 && name.startsWith(prefix) && name.endsWith('.tmp') && /^[A-Za-z0-9_-]{12}$/.test(name.slice(prefix.length, -4));
  try {
    for (const name of fs.readdirSync(path.dirname(file))) {
      if (ours(name)) { try { fs.unlinkSync(path.join(path.dirname(file), name)); } catch {} }
    }
  } catch {}
};
parentPort.on('message', (message) => {
  if (message.close) {
    if (current !== null) closeQuietly(current);
    current = null;
    parentPort.postMessage({ id: message.id });
    return;
  }
  const { id, file, bytes, ledger, append } = message;
  let temp = null;
  if (!swept) sweep(file);
  try {
    if (append) {
      const lf = fs.openSync(ledger, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0o600);
      try {
        writeAll(lf, Buffer.from(append, 'utf8'));
        fs.fdatasyncSync(lf);
      } finally {
        fs.closeSync(lf);
      }
    }
    // A new name each time, created exclusively: never an existing file or a planted symlink.
    temp = createTemp(file);
    writeAll(temp.fd, bytes);
    fs.fdatasyncSync(temp.fd);
    fs.renameSync(temp.name, file);
    // The rename itself must reach the disk too, or a power loss could bring back the previous file.
    const dir = fs.openSync(path.dirname(file), 'r');
    try {
      fs.fsyncSync(dir);
    } finally {
      fs.closeSync(dir);
    }
  } catch (e) {
    if (temp) discard(temp);
    parentPort.postMessage({ id, error: { message: e.message, code: e.code } });
    return;
  }
  parentPort.postMessage({ id });
  if (current !== null) closeQuietly(current);
  current = temp.fd;
});
`;

/**
 * A lowdb adapter for one JSON file, written the way a state file must be: each snapshot goes to a temp file
 * created 0600, is fsynced, then renamed over the target, so a reader never sees half a file and a crash loses
 * no answered change (the directory is fsynced after the rename). Saves are coalesced (group commit): the
 * snapshot is taken after the current turn of the event loop, so every request handled in it shares one write. lowdb's own JSONFile (steno) neither sets the mode nor fsyncs, and serialises per call.
 */
export class DurableJsonFile<T> implements Adapter<T> {
  readonly file: string;
  readonly #parse: (text: string) => T;
  #data: T | undefined;
  #waiting: Deferred[] = [];
  /** Snapshots handed to the writer and not yet on disk. */
  #inWriter = 0;
  #scheduled = false;
  #idle: Deferred | null = null;
  #worker: Worker | null = null;
  #seq = 0;
  #dirReady: Promise<void> | null = null;
  #dirMade = false;

  readonly #ledger: string | null;
  #append = '';
  /** The newest write asked for: once it is durable, so is every earlier one. */
  #lastWrite: Promise<void> = Promise.resolve();
  /** Set during an exclusive section: writes wait (they are coalesced as usual) and none is handed to the writer. */
  #held = false;
  #exclusive: Promise<void> = Promise.resolve();
  /** Resolved when the writer has nothing in flight. */
  #drained: Deferred | null = null;
  readonly #serializer = new SnapshotSerializer();
  /** Set once the file is no longer ours to write (another process took its lock over). */
  #abandoned: Error | null = null;

  constructor(file: string, parse: (text: string) => T, ledgerFile: string | null = null) {
    this.file = file;
    this.#parse = parse;
    this.#ledger = ledgerFile;
  }

  async read(): Promise<T | null> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code === 'ENOENT') return null;
      throw new StateFileError(
        this.file,
        `cannot read state file ${this.file} (${err.code ?? err.message}). Check its permissions, or start with --state OTHER_FILE or --in-memory.`,
        { cause: e },
      );
    }
    return this.#parse(text);
  }

  write(data: T): Promise<void> {
    if (this.#abandoned) return Promise.reject(this.#abandoned);
    this.#data = data;
    const done = deferred();
    this.#waiting.push(done);
    this.#lastWrite = done.promise.catch(() => undefined);
    if (!this.#scheduled && this.#inWriter < QUEUE_DEPTH) {
      this.#scheduled = true;
      setImmediate(() => {
        this.#scheduled = false;
        this.#next();
      });
    }
    return done.promise;
  }

  /**
   * Another process owns the file now: saves still waiting, and every save from here on, fail with `error`, and
   * nothing more is handed to the writer (a snapshot it already has ends as it would). Writing them anyway
   * would undo what the new owner wrote.
   */
  abandon(error: Error): void {
    this.#abandoned ??= error;
    const waiting = this.#waiting;
    this.#waiting = [];
    this.#append = '';
    for (const d of waiting) d.reject(this.#abandoned);
    this.#next();
  }

  /** Text for the append-only ledger, written (and synced) just before the next state snapshot. */
  appendWithNextWrite(text: string): void {
    if (!this.#ledger) throw new Error('this file has no ledger');
    this.#append += text;
  }

  async readLedger(): Promise<string[]> {
    if (!this.#ledger) return [];
    try {
      return (await readFile(this.#ledger, 'utf8')).split('\n').filter((line) => line.length > 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
  }

  /**
   * Keeps the first `lines` lines of the ledger (the ones the state counts as committed). Written like every
   * other file here (temp file, rename): a crash while trimming keeps the committed lines, and a ledger that is a
   * symlink is replaced, never written through.
   */
  async trimLedger(lines: number): Promise<void> {
    const all = await this.readLedger();
    if (all.length <= lines || !this.#ledger) return;
    await writeFileDurably(this.#ledger, all.slice(0, lines).map((l) => `${l}\n`).join(''));
  }

  /** Resolves once every write asked for so far is on disk (or has failed). */
  async flush(): Promise<void> {
    if (this.#inWriter === 0 && this.#waiting.length === 0 && !this.#scheduled) return;
    await (this.#idle ??= deferred()).promise;
  }

  /**
   * Runs `fn` once every write asked for before the call is durable, with no write in flight while it runs and
   * none started until it is done (later writes wait and are coalesced as usual). Sections run one at a time.
   */
  async exclusive<R>(fn: () => Promise<R>): Promise<R> {
    const before = this.#lastWrite;
    const previous = this.#exclusive;
    let release!: () => void;
    this.#exclusive = new Promise<void>((resolve) => (release = resolve));
    await previous;
    try {
      await before;
      this.#held = true;
      // A write asked for after the call may have started meanwhile: it ends before fn reads or replaces the files.
      if (this.#inWriter > 0) await (this.#drained ??= deferred()).promise;
      return await fn();
    } finally {
      this.#held = false;
      release();
      this.#next();
    }
  }

  /** The file's and the ledger's text exactly as on disk (ledger null: no ledger file), read as one consistent pair. */
  readBoth(): Promise<{ text: string; ledger: string | null }> {
    return this.exclusive(async () => ({ text: await readFile(this.file, 'utf8'), ledger: this.#ledger ? await readOptional(this.#ledger) : null }));
  }

  /**
   * Replaces the file and the ledger with exactly these texts, each durably (temp file 0600, fdatasync, rename,
   * directory fsync), between two writes. `data` is what later writes write, and ledger text queued for the next
   * write is dropped (it belonged to what was replaced); `then` runs before any later write starts.
   */
  replaceBoth(text: string, ledger: string | null, data: T, then: () => void): Promise<void> {
    if (ledger !== null && !this.#ledger) return Promise.reject(new Error('this file has no ledger'));
    return this.exclusive(async () => {
      if (this.#abandoned) throw this.#abandoned;
      await this.#makeDir();
      // The ledger first, as every write does: a crash in between leaves a ledger that load() trims to the state's count.
      if (this.#ledger) {
        if (ledger === null) await rm(this.#ledger, { force: true });
        else await writeFileDurably(this.#ledger, ledger);
      }
      await writeFileDurably(this.file, text);
      this.#data = data;
      this.#append = '';
      then();
    });
  }

  /** Stops the writer thread once nothing is pending. */
  async close(): Promise<void> {
    await this.flush();
    const worker = this.#worker;
    if (!worker) return;
    // A write asked for from here on starts a writer of its own instead of going to this one as it stops.
    this.#worker = null;
    // The writer lets go of the file it holds (a worker's open files are the process's: terminate keeps them open).
    await this.#call(worker, { close: true }).catch(() => undefined);
    await worker.terminate();
  }

  #next(): void {
    if (this.#inWriter >= QUEUE_DEPTH) return;
    if (this.#waiting.length === 0) {
      if (this.#inWriter === 0) {
        this.#idle?.resolve();
        this.#idle = null;
      }
      return;
    }
    if (this.#held) return;
    const batch = this.#waiting;
    this.#waiting = [];
    // Compact: serialising and syncing fewer bytes is what bounds durable-write throughput (`jq .` reads it).
    const bytes = this.#serializer.serialize(this.#data);
    const append = this.#append;
    this.#append = '';
    this.#inWriter++;
    const finish = (error?: unknown) => {
      this.#inWriter--;
      if (this.#inWriter === 0) {
        this.#drained?.resolve();
        this.#drained = null;
      }
      for (const d of batch) error ? d.reject(error) : d.resolve();
      this.#next();
    };
    this.#send(bytes, append).then(() => finish(), finish);
  }

  async #send(bytes: Uint8Array, append: string): Promise<void> {
    // No await once the directory exists: the snapshot is posted before the answers of the batch just written go
    // out, so the writer does not sit idle meanwhile. (Async all the same, so a throw becomes the batch's rejection.)
    if (!this.#dirMade) await this.#makeDir();
    // The snapshot's buffer (its own, never a pool's) is transferred, not copied.
    return this.#call((this.#worker ??= this.#startWorker()), { file: this.file, bytes, ledger: this.#ledger, append }, [bytes.buffer as ArrayBuffer]);
  }

  #makeDir(): Promise<void> {
    return (this.#dirReady ??= mkdir(dirname(this.file), { recursive: true, mode: 0o700 }).then(() => {
      this.#dirMade = true;
    }));
  }

  /** One message to the writer and its answer; the writer keeps the process alive only while it has one. */
  async #call(worker: Worker, message: Record<string, unknown>, transfer: ArrayBuffer[] = []): Promise<void> {
    const id = ++this.#seq;
    worker.ref();
    try {
      await new Promise<void>((resolve, reject) => {
        const onMessage = (answer: { id: number; error?: { message: string; code?: string } }) => {
          if (answer.id !== id) return;
          worker.off('message', onMessage);
          worker.off('error', reject);
          if (answer.error) reject(Object.assign(new Error(`cannot write state file ${this.file}: ${answer.error.message}`), { code: answer.error.code }));
          else resolve();
        };
        worker.on('message', onMessage);
        worker.once('error', reject);
        worker.postMessage({ id, ...message }, transfer);
      });
    } finally {
      // An idle writer must not keep the process alive.
      worker.unref();
    }
  }

  #startWorker(): Worker {
    const worker = new Worker(WRITER_SOURCE, { eval: true });
    worker.unref();
    worker.once('exit', () => {
      if (this.#worker === worker) this.#worker = null;
    });
    return worker;
  }
}

async function readOptional(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

/** Writes `text` to `file` the way the writer thread does: a fresh temp file 0600 (never a symlink), fdatasync, rename, directory fsync. */
export async function writeFileDurably(file: string, text: string): Promise<void> {
  const temp = join(dirname(file), `.${basename(file)}.${randomBytes(9).toString('base64url')}.tmp`);
  const handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    try {
      await handle.writeFile(text, 'utf8');
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await rename(temp, file);
  } catch (e) {
    await rm(temp, { force: true });
    throw e;
  }
  const dir = await open(dirname(file), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
