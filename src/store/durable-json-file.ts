import { mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Adapter } from 'lowdb';
import { StateFileError } from '../core/errors.js';

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
 * A lowdb adapter for one JSON file, written the way a state file must be: to a temp file created 0600,
 * fsynced, then renamed over the target, so a reader never sees half a file and a crash loses no answered change.
 * Saves that arrive while a write runs are coalesced into the next one (group commit), and the data is
 * serialised only when a write starts. lowdb's own JSONFile (steno) neither sets the mode nor fsyncs, and
 * serialises on every call.
 */
export class DurableJsonFile<T> implements Adapter<T> {
  readonly file: string;
  readonly #parse: (text: string) => T;
  readonly #temp: string;
  #data: T | undefined;
  #queued: Deferred | null = null;
  #running: Promise<void> | null = null;

  constructor(file: string, parse: (text: string) => T) {
    this.file = file;
    this.#parse = parse;
    this.#temp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
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
    this.#data = data;
    const queued = (this.#queued ??= deferred());
    this.#running ??= this.#drain();
    return queued.promise;
  }

  /** Resolves once every write asked for so far is on disk. */
  async flush(): Promise<void> {
    while (this.#running) await this.#running.catch(() => undefined);
  }

  async #drain(): Promise<void> {
    try {
      while (this.#queued) {
        const batch = this.#queued;
        this.#queued = null;
        try {
          await this.#writeNow(JSON.stringify(this.#data, null, 2) + '\n');
          batch.resolve();
        } catch (e) {
          batch.reject(e);
        }
      }
    } finally {
      this.#running = null;
    }
  }

  async #writeNow(text: string): Promise<void> {
    await mkdir(dirname(this.file), { recursive: true, mode: 0o700 });
    const handle = await open(this.#temp, 'w', 0o600);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.datasync();
    } finally {
      await handle.close();
    }
    try {
      await rename(this.#temp, this.file);
    } catch (e) {
      await unlink(this.#temp).catch(() => undefined);
      throw e;
    }
  }
}
