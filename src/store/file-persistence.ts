import { constants, existsSync } from 'node:fs';
import { open, readFile, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Low, type Adapter } from 'lowdb';
import { StateFileError } from '../core/state/errors.js';
import { ledgerText, type ChargeEntry } from '../core/state/charges.js';
import type { StatePersistence, StateExport } from '../core/state/persistence.js';
import { FrozenView } from '../core/state/frozen-view.js';
import { applyChanges } from '../core/state/journal-replay.js';
import type { Repository } from '../core/state/repository.js';
import { adoptLedger, checkState, emptyState, notValidJson, type State } from '../core/state/state.js';
import { journalFileFor, ledgerFileFor, moveAwayCommand, resetAdvice, shellQuoted } from './state-files.js';
import { readOptional, writeFileDurably } from './durable-write.js';
import { committedCharges } from './memory-persistence.js';
import { plural } from '../protocol/format.js';
import { journalLine, parseJournal, type JournalRecord } from './journal.js';
import { FILES_GONE, folderGone, JOURNAL_STUCK, LOCK_LOST, StateWriter } from './writer.js';
import { stateChunks, withJournalSeq } from './state-text.js';

export interface FilePersistenceOptions {
  /** Fold the journal into the state file once it holds this many bytes and as many as the state file (the larger of the two). Default 8 MiB. */
  journalLimit?: number;
  /** Fold a journal that has waited this long (real time) even when it is small, so the state file is never far behind. Default 60 s. */
  journalMaxAgeMs?: number;
  /** What start-up found and did after a crash, one line each (serve prints them on stderr). */
  onNotice?: (line: string) => void;
  /**
   * The state's files were found gone from their paths (a journal or ledger removed by hand, or the folder): nothing
   * more is acknowledged, and the owner should stop (serve exits 3). The error says what happened and what is kept.
   */
  onLost?: (error: Error) => void;
  /**
   * The lock directory the owner holds on the file (lock.ts): each commit checks that it is still this one before it
   * writes and before it is acknowledged, and fails (onLost, code LOCK_LOST) when it is not.
   */
  lockDir?: string;
  /** A new state file was put in place (a compaction, a restore): a new inode, which the owner locks (lock.ts). */
  onStateFile?: () => void;
}

export const DEFAULT_JOURNAL_LIMIT = 8 * 1024 * 1024;
const DEFAULT_JOURNAL_MAX_AGE_MS = 60_000;
/**
 * A compaction that failed (a full disk, a state file made immutable) is tried again after this long, doubled after
 * each failure in a row up to the journal's maximum age: meanwhile the journal holds every write, as it does anyway.
 */
const COMPACTION_RETRY_MS = 1_000;
/**
 * A compaction hands the writer the state file's text in pieces of about this many characters: below V8's
 * large-object size (128 KiB), so that no piece takes fresh pages from the kernel (on a VM their page faults cost
 * more than the text).
 */
const PIECE_CHARS = 32 << 10;

/** The state file as read: the state, and the number of the last journal record it holds. */
interface OnDisk {
  state: State;
  seq: number;
}

/** The state file to write: a frozen view of the state, and the number of the last journal record it holds. */
interface CompactionInput {
  view: FrozenView;
  seq: number;
}

type Deferred<T = void> = { promise: Promise<T>; resolve: (value: T) => void; reject: (e: unknown) => void };
function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** lowdb's adapter: reads the state file (JSON.parse), and writes it durably from a frozen view (a compaction, see writer.ts). */
class StateFileAdapter implements Adapter<OnDisk | CompactionInput | null> {
  constructor(
    readonly file: string,
    readonly writeCompaction: (input: CompactionInput) => Promise<void>,
  ) {}

  async read(): Promise<OnDisk | null> {
    let json: unknown;
    try {
      json = JSON.parse(await readFile(this.file, 'utf8'));
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code === 'ENOENT') return null;
      if (e instanceof SyntaxError) throw notValidJson(this.file, e, resetAdvice(this.file));
      throw new StateFileError(
        this.file,
        `cannot read state file ${this.file} (${err.code ?? err.message}). Check its permissions, or start with --state OTHER_FILE or --in-memory.`,
        { cause: e },
      );
    }
    return checkStateFile(json, this.file);
  }

  write(input: OnDisk | CompactionInput | null): Promise<void> {
    if (!input) return Promise.resolve();
    // Written in pieces while requests go on: only a frozen view stays as it was meanwhile.
    if (!('view' in input)) return Promise.reject(new Error('the state file is written from a frozen view of the repository'));
    return this.writeCompaction(input);
  }
}

/** A parsed state file: the state, and `journal_seq` (0 in files written before the journal). */
function checkStateFile(json: unknown, file: string): OnDisk {
  let seq = 0;
  if (typeof json === 'object' && json !== null && Object.hasOwn(json, 'journal_seq')) {
    seq = (json as { journal_seq: unknown }).journal_seq as number;
    if (!Number.isSafeInteger(seq) || seq < 0)
      throw new StateFileError(
        file,
        `state file ${file} is not an agent-access state file: "journal_seq" is malformed. ${resetAdvice(file)}`,
      );
    delete (json as { journal_seq?: unknown }).journal_seq;
  }
  return { state: checkState(json, file, resetAdvice(file)), seq };
}

/**
 * The state a start would load from `file` and its journal, read without changing anything (tests, tools): the
 * state file's state with every newer journal record replayed; null when there is neither.
 */
export async function readStateAt(file: string): Promise<State | null> {
  const { state } = await replayJournal(file, await new StateFileAdapter(file, () => Promise.resolve()).read());
  return state && adoptLedgerFile(state, file);
}

/** A state from before the charges moved into it takes them from its ledger file (adoptLedger). */
async function adoptLedgerFile(state: State, file: string): Promise<State> {
  if ((state as Partial<State>).charge_ledger !== undefined) return state;
  const ledgerFile = ledgerFileFor(file);
  return adoptLedger(state, await readOptional(ledgerFile), file, `its charge ledger ${ledgerFile}`, resetAdvice(file));
}

/** The journal beside `file` replayed over its state file's content (`onDisk`). Refuses a journal that does not continue it. */
async function replayJournal(
  file: string,
  onDisk: OnDisk | null,
): Promise<{
  state: State | null;
  seq: number;
  journalBytes: number;
  dropped: number;
  replayed: number;
  stale: number;
  records: JournalRecord[];
  /** Whether there was a journal file: a clean stop removes it (see #load). */
  found: boolean;
}> {
  const journalFile = journalFileFor(file);
  const journalText = await readOptional(journalFile).catch((e: NodeJS.ErrnoException) => {
    throw new StateFileError(
      file,
      `cannot read journal ${journalFile} (${e.code ?? e.message}). Check its permissions. ${resetAdvice(file)}`,
      { cause: e },
    );
  });
  let state = onDisk?.state ?? null;
  let seq = onDisk?.seq ?? 0;
  if (journalText === null) return { state, seq, journalBytes: 0, dropped: 0, replayed: 0, stale: 0, records: [], found: false };
  const { records, dropped } = parseJournal(journalText, journalFile, file);
  const pending = records.filter((r) => r.seq > seq);
  if (!onDisk && pending.length > 0 && pending[0]!.seq !== 1) {
    throw new StateFileError(
      file,
      `state file ${file} is missing, but its journal ${journalFile} is there and continues it (from ` +
        `record ${pending[0]!.seq}). Put the state file back, or move the journal away too. ${resetAdvice(file)}`,
    );
  }
  if (pending.length > 0 && pending[0]!.seq !== seq + 1) {
    throw new StateFileError(
      file,
      `journal ${journalFile} starts at record ${pending[0]!.seq}, but state file ${file} ends at record ${seq}: records are missing. ${resetAdvice(file)}`,
    );
  }
  if (pending.length > 0) {
    state ??= emptyState();
    for (const record of pending) {
      try {
        applyChanges(state, record.changes);
      } catch (e) {
        throw new StateFileError(file, `journal ${journalFile}, record ${record.seq}: ${(e as Error).message}. ${resetAdvice(file)}`);
      }
    }
    state = checkState(state, file, resetAdvice(file), `state file ${file} with its journal replayed`);
  }
  seq = Math.max(seq, records.at(-1)?.seq ?? 0);
  return {
    state,
    seq,
    journalBytes: Buffer.byteLength(journalText, 'utf8') - dropped,
    dropped,
    replayed: pending.length,
    stale: records.length - pending.length,
    records,
    found: true,
  };
}

/**
 * The state in one JSON file, kept current by a journal beside it (docs/serve.md "How the state is stored"):
 * a commit appends one record with only what changed (fsynced) and is durable then; once the journal is large
 * or old, the state is written whole to a new state file in the background (temp file, fsync, rename) and the
 * journal starts over. A start reads the state file and replays the journal. After a clean stop the state file
 * alone holds everything. Only one process may hold it at a time (see lock.ts).
 */
export class FilePersistence implements StatePersistence {
  readonly location: string;
  readonly resetAdvice = resetAdvice;
  readonly moveAwayCommand = moveAwayCommand;
  readonly journalFile: string;
  readonly ledgerFile: string;
  /** lowdb's in-memory twin of the state file: the state as read at a start, a frozen view while one is written. */
  readonly #db: Low<OnDisk | CompactionInput | null>;
  readonly #adapter: StateFileAdapter;
  readonly #limit: number;
  readonly #maxAgeMs: number;
  readonly #notice: (line: string) => void;
  readonly #onLost: (error: Error) => void;
  readonly #lockDir: string | null;
  readonly #onStateFile: () => void;
  /** Only the journal was found gone: the state in memory is written as the state file as the owner stops. */
  #salvage = false;

  readonly #writer: StateWriter;
  /** The writer's start on these files (see #open); a commit that finds it failed fails with its error. */
  #opened: Promise<void> | null = null;
  /** The number of the newest journal record handed to the writer. */
  #seq = 0;
  #journalBytes = 0;
  #stateFileBytes = 0;
  #compactedAt = Date.now();
  /** Compactions that failed in a row, and when the next one due to size or age may be tried. */
  #failedCompactions = 0;
  #retryAt = 0;
  #repo: Repository | null = null;
  #waiting: Deferred[] = [];
  #scheduled = false;
  /** A commit record is with the writer (one at a time: later commits wait and share the next record). */
  #inWriter = false;
  /** A state file write is in progress, or asked for at the next record. */
  #compacting: Promise<void> | null = null;
  #wantCompaction: Deferred | null = null;
  /** Set while an exclusive section runs: no record is handed to the writer. */
  #held = false;
  #exclusiveChain: Promise<void> = Promise.resolve();
  #idle: Deferred | null = null;
  #ageTimer: NodeJS.Timeout | null = null;
  #abandoned: Error | null = null;
  /** What the journal must hold before the first append (a torn last record, or records the state file holds, were found at load). */
  #journalRewrite: string | null = null;
  /** charges.count of the state file on disk: the charges an export of it (exportState) holds. */
  #stateFileCharges = 0;
  /** The state as loaded (before the first commit hands over the repository). */
  #loaded: State | null = null;
  /** Charges up to this seq are in a durable record. */
  #committedCharges = 0;
  /** Writes to the ledger file, one after the other (#appendLedger). */
  #ledgerWrites: Promise<void> = Promise.resolve();
  #ledgerHandle: FileHandle | null = null;
  #ledgerStale = false;

  constructor(file: string, options: FilePersistenceOptions = {}) {
    this.location = file;
    this.journalFile = journalFileFor(file);
    this.ledgerFile = ledgerFileFor(file);
    this.#limit = options.journalLimit ?? DEFAULT_JOURNAL_LIMIT;
    this.#maxAgeMs = options.journalMaxAgeMs ?? DEFAULT_JOURNAL_MAX_AGE_MS;
    this.#notice = options.onNotice ?? (() => undefined);
    this.#onLost = options.onLost ?? (() => undefined);
    this.#lockDir = options.lockDir ?? null;
    this.#onStateFile = options.onStateFile ?? (() => undefined);
    this.#writer = new StateWriter(file, this.journalFile);
    this.#adapter = new StateFileAdapter(file, (input) => this.#writeCompaction(input));
    this.#db = new Low<OnDisk | CompactionInput | null>(this.#adapter, null);
  }

  async load(): Promise<State | null> {
    await this.#db.read();
    const onDisk = this.#db.data as OnDisk | null;
    const read = await replayJournal(this.location, onDisk);
    this.#stateFileBytes = onDisk ? (await stat(this.location)).size : 0;
    this.#seq = read.seq;
    this.#journalBytes = read.journalBytes;
    // Before anything is appended, the journal holds just the records newer than the state file, whole. One that
    // holds none (a crash right after it was made) goes: else every later start would take the files for left by a crash.
    if (read.dropped > 0 || read.stale > 0 || (read.found && read.records.length === 0))
      this.#journalRewrite = read.records
        .filter((r) => r.seq > (onDisk?.seq ?? 0))
        .map(journalLine)
        .join('');
    if (read.dropped > 0) {
      this.#notice(
        `dropped an unfinished journal record (${read.dropped} bytes) at the end of ${this.journalFile}: its request was never answered`,
      );
    }
    const records = (n: number) => `${n} journal record${n === 1 ? '' : 's'}`;
    if (read.stale > 0)
      this.#notice(
        `skipped ${records(read.stale)} at the start of ${this.journalFile} that ${this.location} already holds: the last process ` +
          `stopped after writing the state file and before cutting the journal`,
      );
    if (read.replayed > 0)
      this.#notice(
        onDisk
          ? `replayed ${records(read.replayed)} from ${this.journalFile} (the last stop was not clean)`
          : `replayed ${records(read.replayed)} from ${this.journalFile} onto an empty state: the first ` +
              `start on ${this.location} stopped before it wrote the state file`,
      );
    const legacy = read.state !== null && (read.state as Partial<State>).charge_ledger === undefined;
    const state = read.state && (await adoptLedgerFile(read.state, this.location));
    // Written with its charges at the next compaction, a clean stop's at the latest.
    if (legacy) this.#journalBytes ||= 1;
    this.#loaded = state;
    this.#committedCharges = this.#stateFileCharges = state?.charges.count ?? 0;
    await this.#checkLedgerFile(state);
    this.#open();
    return state;
  }

  /**
   * The ledger file is written from the state's charges: after a crash it may lack the last charges' lines (they
   * are appended once their record is durable), or be missing. It is rewritten then, and a line says so.
   */
  async #checkLedgerFile(state: State | null): Promise<void> {
    const count = state?.charges.count ?? 0;
    const expected = ledgerText(committedCharges(state, count));
    const found = await readOptional(this.ledgerFile).catch(() => null);
    if (found === expected || (found === null && expected === '')) return;
    // Charges beside a state that has none: the ledger of another state (its state file moved away alone). Kept.
    if (count === 0)
      throw new StateFileError(
        this.location,
        `charge ledger ${this.ledgerFile} does not belong to state file ${this.location}: it holds ` +
          `${found!.split('\n').filter(Boolean).length} charge lines, but ${state ? 'the state records no charges' : 'there is no state file'}. ` +
          `Nothing was changed. Put back the state file these charges belong to; or, to start over without them, move the ledger away ` +
          `as well: mv ${shellQuoted(this.ledgerFile)} ${shellQuoted(`${this.ledgerFile}.bak`)}`,
      );
    await writeFileDurably(this.ledgerFile, expected);
    const why =
      found === null
        ? 'it was missing'
        : expected.startsWith(found)
          ? 'it lacked the last charges: the process stopped before it appended them'
          : found.startsWith(expected)
            ? 'it held lines beyond the charges the state holds'
            : 'it differed from the charges the state holds';
    this.#notice(`rewrote charge ledger ${this.ledgerFile} from the ${plural(count, 'charge')} in ${this.location}: ${why}`);
  }

  /**
   * Appends charges to the ledger file once their record is durable, in order; the file is only a view of the state's
   * charges. An append that fails, or a ledger file removed or replaced meanwhile, gets the whole file rewritten from
   * the committed charges instead.
   */
  #appendLedger(text: string): void {
    this.#ledgerWrites = this.#ledgerWrites.then(async () => {
      if (!this.#ledgerStale) {
        try {
          this.#ledgerHandle ??= await open(
            this.ledgerFile,
            constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW,
            0o600,
          );
          const [at, open_] = await Promise.all([stat(this.ledgerFile), this.#ledgerHandle.stat()]);
          if (at.ino === open_.ino && at.dev === open_.dev) {
            await this.#ledgerHandle.write(text);
            return;
          }
        } catch {
          // rewritten below
        }
        this.#ledgerStale = true;
      }
      await this.#rewriteLedger();
    });
  }

  /** The ledger file rewritten whole from the committed charges (after a failed append, a restore). */
  async #rewriteLedger(): Promise<void> {
    const handle = this.#ledgerHandle;
    this.#ledgerHandle = null;
    await handle?.close().catch(() => undefined);
    try {
      const text = ledgerText(await this.#charges());
      // No charges, no ledger file (a restore of a state without any).
      if (text === '') await rm(this.ledgerFile, { force: true });
      else await writeFileDurably(this.ledgerFile, text);
      this.#ledgerStale = false;
    } catch (e) {
      this.#ledgerStale = true;
      this.#notice(
        `cannot write charge ledger ${this.ledgerFile} (${(e as Error).message}): the charges are kept in ${this.location}, and the next start writes it`,
      );
    }
  }

  /** The committed charges: those the last durable record holds. */
  async #charges(): Promise<ChargeEntry[]> {
    return committedCharges(this.#repo?.state ?? this.#loaded, this.#committedCharges);
  }

  commit(repo: Repository): Promise<void> {
    if (this.#abandoned) {
      // Answered with an error: what the request changed goes (docs/serve.md: a server error changes nothing).
      repo.rollBack({ changes: [] });
      return Promise.reject(this.#abandoned);
    }
    this.#repo = repo;
    const done = deferred();
    this.#waiting.push(done);
    this.#schedule();
    return done.promise;
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    // After the current turn: every request handled in it shares one record (group commit).
    setImmediate(() => {
      this.#scheduled = false;
      this.#next();
    });
  }

  #next(): void {
    if (this.#inWriter || this.#held || this.#abandoned) return;
    const repo = this.#repo;
    if (this.#waiting.length === 0 || !repo) {
      if (!this.#compacting) {
        this.#idle?.resolve();
        this.#idle = null;
      }
      return;
    }
    const batch = this.#waiting;
    this.#waiting = [];
    const drained = repo.drain();
    const { changes } = drained;
    const charges = repo.state.charges.count;
    const settle = (error?: unknown) => {
      for (const d of batch) {
        if (error) d.reject(error);
        else d.resolve();
      }
    };
    if (changes.length === 0) {
      // Nothing to write; everything before is durable (no record is in flight). A state that exists only as a
      // journal (a first start that was killed) gets its state file now.
      if (this.#stateFileBytes === 0 && this.#seq > 0 && !this.#wantCompaction && !this.#compacting && this.#compactionDue())
        this.#requestCompaction().then(
          () => settle(),
          () => settle(),
        );
      else settle();
      this.#maybeBeginCompaction(repo);
      this.#next();
      return;
    }
    const seq = ++this.#seq;
    const record = journalLine({ seq, changes });
    this.#inWriter = true;
    const opened = this.#opened ?? Promise.resolve();
    const written = this.#writer.commit(record).catch(async (e: unknown) => {
      // The writer could not start on the files: that is the cause to report.
      await opened.catch((cause: unknown) => {
        throw this.#writeError(cause);
      });
      throw this.#writeError(e);
    });
    // Taken right after the drain: a state file written from it holds exactly the records up to this one.
    this.#maybeBeginCompaction(repo);
    written.then(
      (journalBytes) => {
        this.#inWriter = false;
        this.#journalBytes = journalBytes;
        // Durable: the ledger file, a view of them, gets its lines.
        if (charges > this.#committedCharges) {
          const added = changes.filter(([path]) => path[0] === 'charge_ledger' && Number(path[1]) > this.#committedCharges);
          this.#committedCharges = charges;
          this.#appendLedger(ledgerText(added.map((change) => change[1] as ChargeEntry)));
        }
        if (this.#stateFileBytes === 0 && this.#compactionDue()) {
          // A new state gets its state file before its first answer: it exists, 0600, as soon as serve is up. The
          // record is durable either way: a state file that cannot be written is said and tried again (#requestCompaction).
          this.#requestCompaction().then(
            () => settle(),
            () => settle(),
          );
        } else {
          settle();
          if (!this.#compacting && this.#journalBytes >= Math.max(this.#limit, this.#stateFileBytes) && this.#compactionDue())
            void this.#requestCompaction().catch(() => undefined);
        }
        this.#next();
      },
      (error: unknown) => {
        this.#inWriter = false;
        // Not written: the number is free again, and its requests are answered with an error, so nothing of it may
        // happen later (docs/serve.md: a server error changes and charges nothing). The state goes back to before it, with
        // what was changed since on top of it, whose commits fail with it.
        this.#seq = seq - 1;
        repo.rollBack(drained);
        const since = this.#waiting;
        this.#waiting = [];
        settle(error);
        for (const d of since) d.reject(error);
        const code = (error as NodeJS.ErrnoException).code;
        if (code === FILES_GONE.journal || code === FILES_GONE.folder || code === LOCK_LOST || code === JOURNAL_STUCK)
          this.#lose(error as Error, code);
        this.#next();
      },
    );
  }

  /** Whether a compaction that is due by size or age may be tried now: not while one that failed waits for its retry. */
  #compactionDue(): boolean {
    return Date.now() >= this.#retryAt;
  }

  /**
   * Asks for a state file write at the next record (compaction). One that fails is said, with its cause, and the
   * next one due by size or age waits for a backoff: the journal keeps every write meanwhile, and serve goes on.
   */
  #requestCompaction(): Promise<void> {
    // Nothing is committed any more, so no record would begin it.
    if (this.#abandoned) return Promise.reject(this.#abandoned);
    if (this.#compacting) return this.#compacting;
    this.#wantCompaction = deferred();
    this.#compacting = this.#wantCompaction.promise
      .then(
        () => {
          if (this.#failedCompactions > 0)
            this.#notice(
              `wrote ${this.location} again after ${this.#failedCompactions} failed compaction${this.#failedCompactions === 1 ? '' : 's'}`,
            );
          this.#failedCompactions = 0;
          this.#retryAt = 0;
        },
        (e: unknown) => {
          if (!this.#abandoned) {
            const delay = Math.min(COMPACTION_RETRY_MS * 2 ** this.#failedCompactions++, this.#maxAgeMs);
            this.#retryAt = Date.now() + delay;
            this.#notice(
              `compaction failed: ${(e as Error).message}; every answered write ` +
                `is in ${this.journalFile} (${this.#journalBytes} bytes), which a start replays; serving goes on, next try in ${delay / 1000} s`,
            );
          }
          throw e;
        },
      )
      .finally(() => {
        this.#compacting = null;
        this.#compactedAt = Date.now();
        this.#next();
      });
    // A record of its own if changes wait; else the state file is written as the state is now.
    if (this.#repo) void this.commit(this.#repo).catch(() => undefined);
    return this.#compacting;
  }

  #maybeBeginCompaction(repo: Repository): void {
    const wanted = this.#wantCompaction;
    if (!wanted) return;
    this.#wantCompaction = null;
    const view = repo.frozenView();
    this.#db.data = { view, seq: this.#seq };
    // Not kept once written: it would keep the values the repository has replaced since.
    this.#db
      .write()
      .finally(() => {
        view.release();
        this.#db.data = null;
      })
      .then(wanted.resolve, wanted.reject);
  }

  /** lowdb's write of the state file: in pieces, while commits go on into the journal. */
  async #writeCompaction(input: CompactionInput, salvage = false): Promise<void> {
    const written = await this.#writer.compaction(this.#pieces(input, salvage), salvage).catch((e: unknown) => {
      throw this.#writeError(e);
    });
    this.#onStateFile();
    this.#stateFileBytes = written.stateFileBytes;
    this.#stateFileCharges = input.view.chargeCount;
    this.#journalBytes = written.journalBytes;
  }

  /**
   * The state file's text from a frozen view, in pieces of PIECE_CHARS and the entry that passes it. The writer takes
   * them as microtasks: requests are served while it writes its buffer, each time it is full.
   */
  async *#pieces(input: CompactionInput, salvage: boolean): AsyncGenerator<string> {
    let text = '';
    for (const piece of stateChunks(input.view, input.seq)) {
      text += piece;
      if (text.length < PIECE_CHARS) continue;
      yield text;
      text = '';
      if (this.#abandoned && !salvage) throw this.#abandoned;
    }
    yield text;
  }

  /** A failed write as the owner reports it: the file it was for, the cause, and the cause's code. */
  #writeError(e: unknown): Error {
    const error = e as NodeJS.ErrnoException;
    if (error.message.startsWith('cannot write state file')) return error;
    return Object.assign(new Error(`cannot write state file ${this.location}: ${error.message}`, { cause: e }), { code: error.code });
  }

  /** Between two commits: the charges of every record durable so far. */
  readCharges(): Promise<ChargeEntry[]> {
    return this.#exclusive(() => this.#charges());
  }

  /** A compaction now, then the state file as it is on disk, and the ledger file's text for its charges. */
  async exportState(repo: Repository): Promise<StateExport> {
    this.#repo = repo;
    await this.#requestCompaction();
    return this.#exclusive(async () => {
      const ledger = ledgerText(committedCharges(repo.state, this.#stateFileCharges));
      return { state: await readFile(this.location, 'utf8'), ledger: ledger === '' ? null : ledger };
    });
  }

  importState(exported: StateExport, state: State, swap: () => void): Promise<void> {
    return this.#exclusive(async () => {
      if (this.#abandoned) throw this.#abandoned;
      const text = withJournalSeq(exported.state, this.#seq);
      await this.#writer.replace(text).catch((e: unknown) => {
        throw this.#writeError(e);
      });
      this.#onStateFile();
      this.#journalBytes = 0;
      this.#stateFileBytes = Buffer.byteLength(text, 'utf8');
      this.#compactedAt = Date.now();
      this.#committedCharges = this.#stateFileCharges = state.charges.count;
      swap();
      this.#ledgerWrites = this.#ledgerWrites.then(() => this.#rewriteLedger());
      await this.#ledgerWrites;
    });
  }

  /**
   * Runs `fn` with nothing in flight: once every commit asked for before is durable and no state file write runs,
   * and with no record handed to the writer until it is done (later commits wait and share the next record).
   */
  #exclusive<R>(fn: () => Promise<R>): Promise<R> {
    const run = this.#exclusiveChain.then(async () => {
      await this.flush();
      // Set in the same turn as flush ended: records are posted only from #next, which sees it.
      this.#held = true;
      try {
        return await fn();
      } finally {
        this.#held = false;
        this.#next();
      }
    });
    this.#exclusiveChain = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /**
   * A commit found it may write no more: its files gone from their paths (FILES_GONE: what it appended is in a file no
   * path names), the lock another process's (LOCK_LOST), or a refused record stuck at the journal's end
   * (JOURNAL_STUCK). Nothing more is acknowledged. If only the journal went, the state in memory (every answered
   * write) becomes the state file as the owner stops (#salvageStateFile), and the ledger in place matches it;
   * otherwise nothing is written back.
   */
  #lose(error: Error, code: string): void {
    const cause = error.message.replace(/^cannot write state file [^:]*: /, '');
    let kept: string;
    if (code === FILES_GONE.journal) {
      this.#salvage = true;
      kept = `every write answered before is kept: ${this.location} is written from memory as serve stops`;
    } else if (code === LOCK_LOST) kept = `nothing more is written: the files may be another process's now`;
    else if (code === JOURNAL_STUCK) kept = `nothing more is written: the journal ends with a refused record that could not be cut off`;
    else kept = `nothing is written back: the state of this run is not on disk any more`;
    const lost = Object.assign(
      new Error(`${cause}; stopped acknowledging writes (the request that found it was answered with an error); ${kept}`, { cause: error }),
      { code },
    );
    this.abandon(lost);
    this.#onLost(lost);
  }

  /** Every answered write, from memory, as the state file (the journal was found gone; see #lose). */
  async #salvageStateFile(repo: Repository): Promise<void> {
    // A compaction under way stops at its next slice (abandoned); the writer drops what it had begun.
    await this.#compacting?.catch(() => undefined);
    const view = repo.frozenView();
    try {
      await this.#writeCompaction({ view, seq: this.#seq }, true);
    } finally {
      view.release();
    }
  }

  /**
   * Whether the state file's folder is gone. When it is, serve stops as when a commit finds it gone (FILES_GONE):
   * the lock, which went with the folder, may notice first, and the folder's removal is what the user must hear.
   */
  lostWithFolder(): boolean {
    const folder = dirname(this.location);
    if (existsSync(folder)) return false;
    this.#lose(folderGone(folder), FILES_GONE.folder);
    return true;
  }

  /**
   * The lock was taken over: saves waiting, and every save from here on, fail with `error`, and nothing more is
   * handed to the writer. Writing them anyway would undo what the new owner wrote.
   */
  abandon(error: Error): void {
    this.#abandoned ??= error;
    // Changes not yet handed to the writer were never acknowledged, and never will be: they go.
    this.#repo?.rollBack({ changes: [] });
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const d of waiting) d.reject(this.#abandoned);
    this.#wantCompaction?.reject(this.#abandoned);
    this.#wantCompaction = null;
    this.#idle?.resolve();
  }

  /** Resolves once every commit asked for so far is durable (or failed) and no state file write runs. */
  async flush(): Promise<void> {
    while (!this.#abandoned && (this.#inWriter || this.#waiting.length > 0 || this.#scheduled || this.#compacting)) {
      if (this.#compacting) await this.#compacting.catch(() => undefined);
      else await (this.#idle ??= deferred()).promise;
    }
  }

  /** Folds the journal into the state file, so that at rest the state file alone holds everything; stops the writer. */
  async close(): Promise<void> {
    if (this.#ageTimer) clearInterval(this.#ageTimer);
    this.#ageTimer = null;
    await this.flush();
    try {
      if (!this.#abandoned && this.#repo && (this.#journalBytes > 0 || this.#stateFileBytes === 0))
        await this.#requestCompaction().catch((e: unknown) => {
          if (this.#abandoned) throw e;
          // Every answered write is durable in the journal (a commit is answered only then): a clean stop all the same.
          this.#notice(
            `stopped without folding the journal into ${this.location} (${(e as Error).message}); every answered write is ` +
              `kept in ${this.journalFile}, which the next start replays`,
          );
        });
      if (this.#salvage && this.#repo)
        await this.#salvageStateFile(this.#repo).then(
          () => this.#notice(`wrote ${this.location} from memory: it holds every answered write (journal record ${this.#seq})`),
          (e: unknown) =>
            this.#notice(
              `could not write ${this.location} from memory (${(e as Error).message}): the writes answered since its last compaction are lost`,
            ),
        );
    } finally {
      // One given up (abandoned) ends at its next piece: the writer closes after it, not under it.
      await this.#compacting?.catch(() => undefined);
      await this.#ledgerWrites;
      await this.#ledgerHandle?.close().catch(() => undefined);
      this.#ledgerHandle = null;
      await this.#writer.close();
    }
  }

  /**
   * Starts the writer on these files without waiting for it: it first removes temp files a killed writer left and, if
   * load found a torn or stale journal, rewrites it; the writer's steps run in order, so that is done before the first
   * record is appended.
   */
  #open(): void {
    if (this.#opened) return;
    const rewrite = this.#journalRewrite;
    this.#journalRewrite = null;
    if (rewrite !== null) this.#journalBytes = Buffer.byteLength(rewrite, 'utf8');
    this.#opened = this.#writer.open(rewrite, this.#lockDir).then((swept) => {
      if (swept) this.#notice(`removed ${plural(swept, 'temp file')} left by a writer that was stopped mid-write, beside ${this.location}`);
    });
    // A failure shows on the first commit, which waits for this.
    this.#opened.catch(() => undefined);
    this.#ageTimer = setInterval(
      () => {
        if (this.#journalBytes > 0 && Date.now() - this.#compactedAt >= this.#maxAgeMs && !this.#held && this.#compactionDue())
          void this.#requestCompaction().catch(() => undefined);
      },
      Math.min(this.#maxAgeMs, 5_000),
    );
    this.#ageTimer.unref();
  }
}
