import { isUtf8 } from 'node:buffer';
import { open, readFile, stat } from 'node:fs/promises';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { Low, type Adapter } from 'lowdb';
import { StateFileError } from '../core/errors.js';
import type { StatePersistence, StoredState } from '../core/persistence.js';
import { applyChanges, setOwn, SnapshotTable, StateSnapshot, type Repository } from '../core/repository.js';
import { COLLECTION_NAMES, checkState, emptyState, notValidJson, type State } from '../core/state.js';
import { journalFileFor, ledgerFileFor, resetAdvice } from '../core/state-files.js';
import { readOptional } from './durable-write.js';
import { ledgerMatches, reconcileLedgerFile, type LedgerSummary } from './ledger.js';
import { journalLine, parseJournal, type JournalRecord } from './journal.js';
import { BodySource, coldHead, coldJob, isColdable, locationOf, moveJob } from './research-bodies.js';
import type { ResearchJob } from '../core/jobs.js';
import type { WriterMessage, WriterReply } from './state-writer.js';

export interface FilePersistenceOptions {
  /** Fold the journal into the state file once it holds this many bytes and as many as the state file (the larger of the two). Default 8 MiB. */
  journalLimit?: number;
  /** Fold a journal that has waited this long (real time) even when it is small, so the state file is never far behind. Default 60 s. */
  journalMaxAgeMs?: number;
  /** What start-up found and did after a crash, one line each (serve prints them on stderr). */
  onNotice?: (line: string) => void;
}

export const DEFAULT_JOURNAL_LIMIT = 8 * 1024 * 1024;
/** A ledger this large (about 6 000 charges) is read on the writer's thread, in parallel with the state file. */
const LEDGER_ON_WRITER_BYTES = 1 << 20;
const DEFAULT_JOURNAL_MAX_AGE_MS = 60_000;
/**
 * The writer thread's young generation, in MB. Everything it allocates (a compaction's pieces, a large ledger's
 * lines at a start) dies young, and V8 grew its default young generation to hold it, about 12 MB of RSS kept for as
 * long as serve runs (a 100k-record state under the bench's refresh load: 253 MB peak instead of 266).
 */
const WRITER_YOUNG_MB = 4;
/**
 * A compaction hands the writer text in pieces of about this size, and gives the event loop back every SLICE_MS. A
 * piece stays below V8's large-object size, so neither thread takes fresh pages from the kernel for each one
 * (see PIECE_BYTES).
 */
const CHUNK_CHARS = 32 << 10;
/** ... or once it holds this many numbers of cold entries to copy (three each). */
const COPIES_PER_CHUNK = 3 << 10;
const SLICE_MS = 4;

/** A succeeded research job as a compaction wrote it: its entry is `length` bytes at `offset` in the new state file. */
interface Placed {
  key: string;
  job: ResearchJob;
  offset: number;
  length: number;
}

/** The state file as read: the state, and the number of the last journal record it holds. */
interface Base {
  state: State;
  seq: number;
}

/** The state file to write: a snapshot of the state, and the number of the last journal record it holds. */
interface SnapshotBase {
  snapshot: StateSnapshot;
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

/**
 * The state file's text in pieces: `JSON.stringify` of the state with `journal_seq` as its last field, and a line
 * break before each entry of a table and before each table's closing brace (still one JSON document; `jq .` reads
 * it). One entry per line lets a start parse the file entry by entry (`readStateFile`), never holding the whole
 * text, and lets a large state be written a slice at a time.
 */
export function* stateChunks(state: State | StateSnapshot, seq: number): Generator<string> {
  const snapshot = state instanceof StateSnapshot ? state : new StateSnapshot(state);
  for (const piece of statePieces(snapshot, seq)) yield typeof piece === 'string' ? piece : JSON.stringify(piece.job);
}

/** stateChunks' text, with each succeeded research job's entry as the job itself (a compaction may copy it from the old file). */
function* statePieces(snapshot: StateSnapshot, seq: number): Generator<string | { key: string; job: ResearchJob }> {
  yield '{';
  let first = true;
  for (const [name, value] of snapshot.fields) {
    if (value === undefined || name === 'journal_seq') continue;
    yield `${first ? '' : ','}${JSON.stringify(name)}:`;
    first = false;
    if (!(value instanceof SnapshotTable)) {
      yield* inline(snapshot, value);
      continue;
    }
    let firstEntry = true;
    yield '{';
    const jobs = name === 'research_jobs';
    for (const [key, entry] of snapshot.entries(value)) {
      if (jobs && isColdable(entry as ResearchJob)) {
        yield `\n${firstEntry ? '' : ','}${JSON.stringify(key)}:`;
        yield { key, job: entry as ResearchJob };
      } else yield `\n${firstEntry ? '' : ','}${JSON.stringify(key)}:${JSON.stringify(entry)}`;
      firstEntry = false;
    }
    yield '\n}';
  }
  yield `${first ? '' : ','}"journal_seq":${seq}}\n`;
}

/** A field that is not a table, on one line as JSON.stringify writes it; the charge totals' tables a piece an entry. */
function* inline(snapshot: StateSnapshot, value: unknown): Generator<string> {
  if (value instanceof SnapshotTable) {
    let first = true;
    yield '{';
    for (const [key, entry] of snapshot.entries(value)) {
      yield `${first ? '' : ','}${JSON.stringify(key)}:${JSON.stringify(entry)}`;
      first = false;
    }
    yield '}';
  } else if (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).some((v) => v instanceof SnapshotTable)
  ) {
    let first = true;
    yield '{';
    for (const [key, field] of Object.entries(value)) {
      if (field === undefined) continue;
      yield `${first ? '' : ','}${JSON.stringify(key)}:`;
      yield* inline(snapshot, field);
      first = false;
    }
    yield '}';
  } else yield JSON.stringify(value);
}

/**
 * Longer lines than this (the text is read a character a byte) mean a file not written entry per line (an entry is a
 * few KB; training content at most 256 KiB).
 */
const MAX_LINE_BYTES = 4 << 20;

/** A start reads the state file this many bytes at a time. */
const READ_BYTES = 1 << 20;

/**
 * ... and parses it this many bytes at a time. Every string made from a piece stays below V8's large-object size
 * (128 KiB), so it is made in the young generation's pages, which are used again and again: a larger string gets
 * pages of its own, fresh from the kernel each time, and on a VM their page faults cost more than parsing the text
 * in them.
 */
const PIECE_BYTES = 32 << 10;

/** A character that is not ASCII: in text read as Latin-1, a byte of a UTF-8 sequence. */
const NOT_ASCII = /[^\x00-\x7f]/;

/**
 * `text` read as Latin-1 (a character a byte) decoded as the UTF-8 it is. Exactly what decoding the whole file
 * would give for this piece, also for bytes that are not UTF-8 (U+FFFD for each bad sequence, as in JSON.parse of the
 * file's text): every piece ends at an ASCII character, and no UTF-8 sequence runs across one.
 */
const utf8 = (text: string): string => (NOT_ASCII.test(text) ? Buffer.from(text, 'latin1').toString('utf8') : text);

/** A line that opens a table: ends in `"name":{` for one of the state's tables. */
const TABLE_OPEN = new RegExp(`"(${COLLECTION_NAMES.join('|')})":\\{$`);

/** A JSON string as JSON.stringify writes it or any valid one: no raw control character, only JSON's escapes. */
const JSON_STRING = String.raw`"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"`;
/** An entry's key and its colon, at the start of its line. */
const KEY = new RegExp(`${JSON_STRING}:`, 'y');
/** An object of string fields (a citation). */
const STRING_OBJECT = `\\{(?:${JSON_STRING}:${JSON_STRING}(?:,${JSON_STRING}:${JSON_STRING})*)?\\}`;
/**
 * A succeeded research job's report and citations, last in its entry as the core writes them, up to the entry's
 * closing brace: what a start leaves in the file. Matches only valid JSON, in native code and without making a string.
 */
const JOB_BODY = new RegExp(`,"report":${JSON_STRING},"citations":\\[(?:${STRING_OBJECT}(?:,${STRING_OBJECT})*)?\\]\\}`, 'y');

/** What parseValue returns for text that is not one JSON value. */
const NOT_A_VALUE = Symbol('not a JSON value');
/**
 * Thrown when a file read with `bodies` is not all UTF-8 (a hand edit): readStateFile reads it again without, so that
 * every job is held whole and the next compaction writes the file as UTF-8 again (a cold job would be copied as it is).
 */
const NOT_UTF8 = new Error('not UTF-8');

/** Thrown where a file leaves the entry-per-line layout: readStateFile then parses it whole. */
const notInLayout = () => new Error('not in the entry-per-line layout');

/**
 * Reads and parses a state file. A file in the layout `stateChunks` writes is read a piece at a time and its
 * entries parsed a piece at a time, never holding the whole text (a 50 MB state would otherwise cost its bytes,
 * its text and its objects together). Any other JSON (an older compact file, a hand-edited one) is parsed whole;
 * so is a file the entry-wise reading cannot follow, so that its error is JSON.parse's own.
 */
export async function readStateFile(file: string, bodies?: BodySource): Promise<unknown> {
  try {
    return await readStateFileByEntries(file, bodies);
  } catch (e) {
    if (e === NOT_UTF8) return readStateFileByEntries(file);
    if ((e as NodeJS.ErrnoException).code !== undefined) throw e;
    return JSON.parse((await readFile(file)).toString('utf8'));
  }
}

/**
 * readStateFile's way for a file in the entry-per-line layout; throws on any other file, and on anything
 * JSON.parse of the whole text would refuse (a comma with no entry after it, two entries without one). With
 * `bodies` (the same file, opened), a succeeded research job is kept cold: its report and citations are read from
 * its entry's place in the file when asked for (research-bodies.ts).
 */
export async function readStateFileByEntries(file: string, bodies?: BodySource): Promise<unknown> {
  const handle = await open(file, 'r');
  try {
    const buffer = Buffer.allocUnsafe(READ_BYTES);
    const skeleton: string[] = [];
    /** The start of a skeleton line longer than what was read so far: kept in pieces, never rescanned or copied. */
    let partial: string[] = [];
    let partialChars = 0;
    const tables: Record<string, Record<string, unknown>> = {};
    let table: Record<string, unknown> | null = null;
    /** Whether the open table has an entry yet: every later entry line, and only those, start with a comma. */
    let tableHasEntries = false;
    /**
     * Read and not yet parsed, as Latin-1: a character a byte, so a place in it is a place in the file, and the
     * reports a start leaves in the file (most of it) are never decoded. What is parsed is decoded first (utf8).
     * In a table, it starts at the line break before an entry.
     */
    let text = '';
    /** Where `text` starts in the file. */
    let textStart = 0;
    /**
     * The entries from `from` (a line break) to `to`, one a line as stateChunks writes them, into `table`. Each
     * line's key is read with KEY and its value parsed alone: parsed as one object, a batch's entry names (all
     * different) made V8 a hidden class each, a good part of a start's parse and its garbage. With `bodies`, a
     * succeeded research job whose line ends in a report and citations as the core writes them (JOB_BODY) is
     * parsed up to them only and kept cold: they are most of the file, and parsing them would make strings only to
     * drop them. KEY and JOB_BODY match only valid JSON and each value is parsed on its own, so a line is accepted
     * exactly when it is a valid entry; any other layout (a blank line, an entry over two lines, a space after a
     * key) parses the batch as an object, as before, which refuses what JSON.parse refuses.
     */
    const parseLines = (from: number, to: number): void => {
      if (!table || (text.charCodeAt(from + 1) === 0x2c) !== tableHasEntries) return parseEntries(from, to);
      const jobs = bodies !== undefined && table === tables.research_jobs;
      const keys: string[] = [];
      const values: unknown[] = [];
      /** The first `,"report":"` after the last place searched from (2 ** 32 - 1: none). */
      let nextReport = -1;
      for (let at = from; at < to;) {
        const next = text.indexOf('\n', at + 1);
        const end = next < 0 || next > to ? to : next;
        const comma = text.charCodeAt(at + 1) === 0x2c;
        // Each line after the first starts with its comma.
        if (!comma && at !== from) return parseEntries(from, to);
        const keyAt = at + (comma ? 2 : 1);
        KEY.lastIndex = keyAt;
        if (!KEY.test(text)) return parseEntries(from, to);
        const valueAt = KEY.lastIndex;
        const key = utf8(text.slice(keyAt + 1, valueAt - 2));
        keys.push(key.includes('\\') ? (JSON.parse(`"${key}"`) as string) : key);
        at = end;
        // The search goes on from where the last one ended, so lines without a report are not searched again.
        if (jobs && nextReport < valueAt) nextReport = text.indexOf(',"report":"', valueAt) >>> 0;
        let value: unknown = undefined;
        if (jobs && nextReport < end) {
          JOB_BODY.lastIndex = nextReport;
          if (JOB_BODY.test(text) && JOB_BODY.lastIndex === end) {
            const head = parseValue(valueAt, nextReport, '}') as Record<string, unknown> | null;
            // A head with a status before the report: a line `"k":{,"report":…}` is not JSON, though its head `{}` is.
            if (head?.status === 'succeeded' && !Object.hasOwn(head, 'report') && !Object.hasOwn(head, 'citations')) {
              value = coldHead(head, bodies, textStart + valueAt, end - valueAt);
            }
          }
        }
        value ??= parseValue(valueAt, end);
        if (value === NOT_A_VALUE) return parseEntries(from, to);
        values.push(value);
      }
      // In the lines' order, so a key given twice (a hand edit) keeps its first place and its last value, as in JSON.
      for (const [i, key] of keys.entries()) setOwn(table, key, values[i]);
      tableHasEntries = true;
    };
    /** The JSON value from `from` to `to` in `text` (and `after`), or NOT_A_VALUE. */
    const parseValue = (from: number, to: number, after = ''): unknown => {
      try {
        return JSON.parse(utf8(text.slice(from, to)) + after) as unknown;
      } catch {
        return NOT_A_VALUE;
      }
    };
    /** The entries from `from` (a line break) to `to` (the line break after the last of them) into `table`. */
    const parseEntries = (from: number, to: number): void => {
      if (!table) return;
      const comma = text.charCodeAt(from + 1) === 0x2c;
      if (comma !== tableHasEntries) throw notInLayout();
      const body = utf8(text.slice(comma ? from + 2 : from + 1, to));
      const blank = body.trim() === '';
      // A comma must have an entry after it.
      if (comma && blank) throw notInLayout();
      const entries = JSON.parse(`{${body}}`) as Record<string, unknown>;
      // Object.assign would take an own "__proto__" entry as the prototype.
      if (Object.hasOwn(entries, '__proto__')) for (const key in entries) setOwn(table, key, entries[key]);
      else Object.assign(table, entries);
      tableHasEntries ||= !blank;
    };

    /** Parses what `text` holds up to its last complete entry (all of it at the end) and keeps the rest. */
    const consume = (eof: boolean): void => {
      let at = 0;
      for (;;) {
        if (table) {
          // Entries hold no line breaks (JSON.stringify escapes them): a line break is the layout's own.
          const close = text.indexOf('\n}', at);
          if (close >= 0) {
            if (close > at) parseLines(at, close);
            // The table's closing brace was written into the skeleton when it opened; its line goes on after it.
            table = null;
            at = close + 2;
            continue;
          }
          const cut = text.lastIndexOf('\n,');
          if (cut > at) {
            parseLines(at, cut);
            at = cut;
          }
          break;
        }
        const end = text.indexOf('\n', at);
        if (end < 0) {
          partial.push(text.slice(at));
          partialChars += text.length - at;
          at = text.length;
          // A compact file (one long line) is not read line by line: parsed whole instead.
          if (partialChars > MAX_LINE_BYTES) throw notInLayout();
          if (eof) skeleton.push(partial.join(''));
          break;
        }
        const line = partial.length > 0 ? partial.join('') + text.slice(at, end) : text.slice(at, end);
        partial = [];
        partialChars = 0;
        const opened = TABLE_OPEN.exec(line);
        skeleton.push(opened ? `${line}}` : line);
        if (opened) {
          table = tables[opened[1]!] = {};
          tableHasEntries = false;
        }
        // A table's entries start at the line break before each of them.
        at = opened ? end : end + 1;
      }
      textStart += at;
      text = eof ? '' : text.slice(at);
      if (text.length > MAX_LINE_BYTES) throw notInLayout();
    };
    /**
     * The bytes at the start of `buffer`, read (and parsed) already: a UTF-8 sequence the last read cut. The check
     * runs only with `bodies`: a file read without keeps no byte of it as it is.
     */
    let carried = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, carried, READ_BYTES - carried, null);
      const end = carried + bytesRead;
      for (let from = carried; from < end; from += PIECE_BYTES) {
        text += buffer.toString('latin1', from, Math.min(from + PIECE_BYTES, end));
        consume(false);
      }
      if (bytesRead === 0) break;
      if (bodies) {
        const whole = wholeSequencesEnd(buffer, end);
        if (!isUtf8(buffer.subarray(0, whole))) throw NOT_UTF8;
        buffer.copyWithin(0, whole, end);
        carried = end - whole;
      }
    }
    // A sequence the file's end cut.
    if (carried > 0) throw NOT_UTF8;
    consume(true);
    if (table) throw notInLayout();
    // A table that closes on the line it opens (`{}` written compactly) never opened one here.
    const json = JSON.parse(utf8(skeleton.join('\n'))) as Record<string, unknown>;
    for (const [name, entries] of Object.entries(tables)) json[name] = entries;
    return json;
  } finally {
    await handle.close();
  }
}

/**
 * Where the bytes up to `end` stop being whole UTF-8 sequences: at a lead byte in the last three whose sequence runs
 * past `end`, else `end` (bytes that are not UTF-8 are isUtf8's to find).
 */
export function wholeSequencesEnd(bytes: Uint8Array, end: number): number {
  for (let i = end - 1; i >= Math.max(0, end - 3); i--) {
    const byte = bytes[i]!;
    if (byte < 0x80) return end;
    if (byte >= 0xc0) return i + (byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2) > end ? i : end;
  }
  return end;
}

/** Reads the state file for lowdb, and writes it through the writer thread (a compaction). */
class StateFileAdapter implements Adapter<Base | SnapshotBase | null> {
  /** The file the last read kept succeeded research jobs' bodies in (with `coldBodies`). */
  source: BodySource | null = null;

  constructor(
    readonly file: string,
    readonly writeBase: (base: SnapshotBase) => Promise<void>,
    readonly coldBodies = false,
  ) {}

  async read(): Promise<Base | null> {
    let json: unknown;
    let source: BodySource | null = null;
    try {
      // Opened before it is read, so both are the same file.
      if (this.coldBodies) source = new BodySource(this.file);
      json = await readStateFile(this.file, source ?? undefined);
    } catch (e) {
      source?.close();
      const err = e as NodeJS.ErrnoException;
      if (err.code === 'ENOENT') return null;
      if (e instanceof SyntaxError) throw notValidJson(this.file, e);
      throw new StateFileError(
        this.file,
        `cannot read state file ${this.file} (${err.code ?? err.message}). Check its permissions, or start with --state OTHER_FILE or --in-memory.`,
        { cause: e },
      );
    }
    try {
      const base = checkBase(json, this.file);
      this.source = source;
      return base;
    } catch (e) {
      source?.close();
      throw e;
    }
  }

  write(base: Base | SnapshotBase | null): Promise<void> {
    if (!base) return Promise.resolve();
    // Written in slices while requests go on: only a snapshot stays as it was meanwhile.
    if (!('snapshot' in base)) return Promise.reject(new Error('the state file is written from a snapshot of the repository'));
    return this.writeBase(base);
  }
}

/** A parsed state file: the state, and `journal_seq` (0 in files written before the journal). */
function checkBase(json: unknown, file: string): Base {
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
  return { state: checkState(json, file), seq };
}

/** A stored state text with its `journal_seq` set to `seq` (a snapshot restored continues the journal's numbering). */
export function withJournalSeq(text: string, seq: number): string {
  const body = text.replace(/\n$/, '');
  const marked = /,"journal_seq":\d+}$/.test(body)
    ? body.replace(/,"journal_seq":\d+}$/, `,"journal_seq":${seq}}`)
    : body.replace(/}$/, `${body === '{}' ? '' : ','}"journal_seq":${seq}}`);
  return `${marked}\n`;
}

/**
 * The state a start would load from `file` and its journal, read without changing anything (tests, tools): the
 * state file's state with every newer journal record replayed; null when there is neither.
 */
export async function readStateAt(file: string): Promise<State | null> {
  return (await replayJournal(file, await new StateFileAdapter(file, () => Promise.resolve()).read())).state;
}

/** The journal beside `file` replayed over its state file's content (`base`). Refuses a journal that does not continue it. */
async function replayJournal(
  file: string,
  base: Base | null,
): Promise<{
  state: State | null;
  seq: number;
  journalBytes: number;
  dropped: number;
  replayed: number;
  stale: number;
  records: JournalRecord[];
}> {
  const journalFile = journalFileFor(file);
  const journalText = await readOptional(journalFile).catch((e: NodeJS.ErrnoException) => {
    throw new StateFileError(
      file,
      `cannot read journal ${journalFile} (${e.code ?? e.message}). Check its permissions. ${resetAdvice(file)}`,
      { cause: e },
    );
  });
  let state = base?.state ?? null;
  let seq = base?.seq ?? 0;
  if (journalText === null) return { state, seq, journalBytes: 0, dropped: 0, replayed: 0, stale: 0, records: [] };
  const { records, dropped } = parseJournal(journalText, journalFile, file);
  const pending = records.filter((r) => r.seq > seq);
  if (!base && pending.length > 0 && pending[0]!.seq !== 1) {
    throw new StateFileError(
      file,
      `state file ${file} is missing, but its journal ${journalFile} is there and continues it (from record ${pending[0]!.seq}). Put the state file back, or move the journal away too. ${resetAdvice(file)}`,
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
    state = checkState(state, file, `state file ${file} with its journal replayed`);
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
  };
}

/** Where the writer thread's code is: beside this module once built; under the sources (tests), in the build. */
function writerUrl(): URL {
  const here = new URL(import.meta.url);
  return here.pathname.endsWith('.ts') ? new URL('../../dist/store/state-writer.js', here) : new URL('./state-writer.js', here);
}

/**
 * The state in one JSON file, kept current by a journal beside it (README "How the state is stored"):
 * a commit appends one record with only what changed (fsynced) and is durable then; once the journal is large
 * or old, the state is written whole to a new state file in the background (temp file, fsync, rename) and the
 * journal starts over. A start reads the state file and replays the journal. After a clean stop the state file
 * alone holds everything. Only one process may hold it at a time (see lock.ts).
 */
export class FilePersistence implements StatePersistence {
  readonly location: string;
  readonly journalFile: string;
  readonly ledgerFile: string;
  /** lowdb's in-memory twin of the state file: the state as read at a start, a snapshot while one is written. */
  readonly #db: Low<Base | SnapshotBase | null>;
  readonly #adapter: StateFileAdapter;
  /** The state file cold research jobs read their bodies from, and the one before it (closed at the next compaction). */
  #source: BodySource | null = null;
  #retired: BodySource | null = null;
  readonly #limit: number;
  readonly #maxAgeMs: number;
  readonly #notice: (line: string) => void;

  #worker: Worker | null = null;
  /** The writer's start on these files (see #open); a commit that finds it failed fails with its error. */
  #opened: Promise<void> | null = null;
  #callId = 0;
  /** Answers awaited from the writer. */
  #calls = 0;
  /** The number of the newest journal record handed to the writer. */
  #seq = 0;
  #journalBytes = 0;
  #baseBytes = 0;
  /** charges.count of the state file on disk: the ledger lines a snapshot of it takes. */
  #baseCharges = 0;
  #baseAt = Date.now();
  #repo: Repository | null = null;
  #waiting: Deferred[] = [];
  #scheduled = false;
  /** A commit record is with the writer (one at a time: later commits wait and share the next record). */
  #inWriter = false;
  /** A state file write is in progress, or asked for at the next record. */
  #compacting: Promise<void> | null = null;
  #wantBase: Deferred | null = null;
  /** Set while an exclusive section runs: no record is handed to the writer. */
  #held = false;
  #exclusiveChain: Promise<void> = Promise.resolve();
  #idle: Deferred | null = null;
  #ageTimer: NodeJS.Timeout | null = null;
  #abandoned: Error | null = null;
  /** What the journal must hold before the first append (a torn last record, or records the state file holds, were found at load). */
  #journalRewrite: string | null = null;

  constructor(file: string, options: FilePersistenceOptions = {}) {
    this.location = file;
    this.journalFile = journalFileFor(file);
    this.ledgerFile = ledgerFileFor(file);
    this.#limit = options.journalLimit ?? DEFAULT_JOURNAL_LIMIT;
    this.#maxAgeMs = options.journalMaxAgeMs ?? DEFAULT_JOURNAL_MAX_AGE_MS;
    this.#notice = options.onNotice ?? (() => undefined);
    this.#adapter = new StateFileAdapter(file, (base) => this.#writeBase(base), true);
    this.#db = new Low<Base | SnapshotBase | null>(this.#adapter, null);
  }

  async load(): Promise<State | null> {
    // A large ledger is read and parsed on the writer's thread while this one reads the state file; a small one
    // here after it, in less time than the thread takes to start (about 60 ms).
    const ledgerBytes = await stat(this.ledgerFile).then(
      (s) => s.size,
      () => 0,
    );
    const ledgerRead =
      ledgerBytes >= LEDGER_ON_WRITER_BYTES
        ? this.#call({ op: 'ledger-read', id: 0, file: this.ledgerFile }).then(
            (reply) => reply.ledger ?? null,
            () => null,
          )
        : null;
    try {
      return await this.#load(ledgerRead);
    } catch (e) {
      // A start that fails leaves no writer thread behind: it would stay, idle, for the rest of the process.
      void this.#worker?.terminate();
      this.#worker = null;
      this.#closeSources();
      throw e;
    }
  }

  async #load(ledgerRead: Promise<LedgerSummary | null> | null): Promise<State | null> {
    await this.#db.read();
    this.#source = this.#adapter.source;
    const base = this.#db.data as Base | null;
    const read = await replayJournal(this.location, base);
    this.#baseBytes = base ? (await stat(this.location)).size : 0;
    this.#baseCharges = base?.state.charges.count ?? 0;
    this.#seq = read.seq;
    this.#journalBytes = read.journalBytes;
    // Before anything is appended, the journal holds just the records newer than the state file, whole.
    if (read.dropped > 0 || read.stale > 0)
      this.#journalRewrite = read.records
        .filter((r) => r.seq > (base?.seq ?? 0))
        .map(journalLine)
        .join('');
    if (read.dropped > 0) {
      this.#notice(
        `dropped an unfinished journal record (${read.dropped} bytes) at the end of ${this.journalFile}: its request was never answered`,
      );
    }
    if (base && read.replayed > 0)
      this.#notice(
        `replayed ${read.replayed} journal record${read.replayed === 1 ? '' : 's'} from ${this.journalFile} (the last stop was not clean)`,
      );
    // The ledger must be this state's (else StateFileError, nothing touched); lines beyond the committed count were
    // appended by a commit that never completed: dropped.
    // What the writer thread read mostly matches as it is; anything else is checked here, which makes the refusal or
    // drops the uncommitted lines.
    const totals = read.state?.charges ?? null;
    const summary = ledgerRead && (await ledgerRead);
    if (!summary || !totals || !ledgerMatches(summary, totals))
      await reconcileLedgerFile(this.location, this.ledgerFile, totals, this.#notice);
    this.#open();
    return read.state;
  }

  commit(repo: Repository): Promise<void> {
    if (this.#abandoned) return Promise.reject(this.#abandoned);
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
    const { changes, ledger } = repo.drain();
    const settle = (error?: unknown) => {
      for (const d of batch) {
        if (error) d.reject(error);
        else d.resolve();
      }
    };
    if (changes.length === 0 && ledger.length === 0) {
      // Nothing to write; everything before is durable (no record is in flight). A state that exists only as a
      // journal (a first start that was killed) gets its state file now.
      if (this.#baseBytes === 0 && this.#seq > 0 && !this.#wantBase && !this.#compacting) this.#requestBase().then(() => settle(), settle);
      else settle();
      this.#maybeBeginBase(repo);
      this.#next();
      return;
    }
    const seq = ++this.#seq;
    const record = journalLine({ seq, changes });
    this.#inWriter = true;
    const opened = this.#opened ?? Promise.resolve();
    const written = this.#call({ op: 'commit', id: 0, record, ledger: ledger.map((line) => `${line}\n`).join('') }).catch(
      async (e: unknown) => {
        // The writer could not start on the files: that is the cause to report.
        await opened;
        throw e;
      },
    );
    // Taken right after the drain: a state file written from it holds exactly the records up to this one.
    this.#maybeBeginBase(repo);
    written.then(
      (reply) => {
        this.#inWriter = false;
        this.#journalBytes = reply.journalBytes ?? this.#journalBytes;
        if (this.#baseBytes === 0) {
          // A new state gets its state file before its first answer: it exists, 0600, as soon as serve is up.
          this.#requestBase().then(() => settle(), settle);
        } else {
          settle();
          if (!this.#compacting && this.#journalBytes >= Math.max(this.#limit, this.#baseBytes))
            void this.#requestBase().catch(() => undefined);
        }
        this.#next();
      },
      (error: unknown) => {
        this.#inWriter = false;
        // Not written: the number is free again, and the changes go into the next record (with their values then).
        this.#seq = seq - 1;
        repo.restore({ changes, ledger });
        settle(error);
        this.#next();
      },
    );
  }

  /** Asks for a state file write at the next record (compaction). */
  #requestBase(): Promise<void> {
    if (this.#compacting) return this.#compacting;
    this.#wantBase = deferred();
    this.#compacting = this.#wantBase.promise.finally(() => {
      this.#compacting = null;
      this.#baseAt = Date.now();
      this.#next();
    });
    // A record of its own if changes wait; else the state file is written as the state is now.
    if (this.#repo) void this.commit(this.#repo).catch(() => undefined);
    return this.#compacting;
  }

  #maybeBeginBase(repo: Repository): void {
    const wanted = this.#wantBase;
    if (!wanted) return;
    this.#wantBase = null;
    const snapshot = repo.snapshot();
    this.#db.data = { snapshot, seq: this.#seq };
    // Not kept once written: it would hold the jobs' reports that are read from the file from then on.
    this.#db
      .write()
      .finally(() => {
        snapshot.release();
        this.#db.data = null;
      })
      .then(wanted.resolve, wanted.reject);
  }

  /**
   * lowdb's write of the state file: in slices, through the writer thread, while commits go on. A cold research
   * job's entry is copied by the writer from the current state file; afterwards every succeeded job written, if
   * it is still the repository's, reads its body from the new file.
   */
  async #writeBase(base: SnapshotBase): Promise<void> {
    this.#post({ op: 'base-begin', id: 0 });
    let text = '';
    /** Cold entries to copy into `text`: its char index, then the offset and length of the bytes in #source. */
    let copies: number[] = [];
    /** Bytes of the new file up to the end of `text`. */
    let bytes = 0;
    const placed: Placed[] = [];
    const source = this.#source;
    let sliceStart = performance.now();
    let pieces = 0;
    for (const piece of statePieces(base.snapshot, base.seq)) {
      if (typeof piece === 'string') {
        text += piece;
        bytes += Buffer.byteLength(piece, 'utf8');
      } else {
        const { key, job } = piece;
        const at = locationOf(job);
        if (at && at.source === source) {
          copies.push(text.length, at.offset, at.length);
          placed.push({ key, job, offset: bytes, length: at.length });
          bytes += at.length;
        } else {
          const json = JSON.stringify(job);
          const length = Buffer.byteLength(json, 'utf8');
          text += json;
          placed.push({ key, job, offset: bytes, length });
          bytes += length;
        }
      }
      if (text.length >= CHUNK_CHARS || copies.length >= COPIES_PER_CHUNK) {
        this.#post({ op: 'base-chunk', text, copies, source: source?.fd ?? -1 });
        text = '';
        copies = [];
      }
      // Requests go on between slices; the clock is read every few pieces only.
      if (++pieces % 64 === 0 && performance.now() - sliceStart >= SLICE_MS) {
        await nextTurn();
        if (this.#abandoned) throw this.#abandoned;
        sliceStart = performance.now();
      }
    }
    this.#post({ op: 'base-chunk', text, copies, source: source?.fd ?? -1 });
    const reply = await this.#call({ op: 'base-end', id: 0 });
    this.#baseBytes = reply.baseBytes ?? 0;
    this.#baseCharges = base.snapshot.chargeCount;
    this.#journalBytes = reply.journalBytes ?? 0;
    if (this.#baseBytes === bytes) this.#coolDown(placed);
  }

  /** The succeeded jobs just written, as they are in the new state file; each still the repository's is held cold from now on. */
  #coolDown(placed: Placed[]): void {
    const repo = this.#repo;
    if (!repo) return;
    // No job reads from the file before any more.
    if (placed.length === 0) return this.#retireSource(null);
    let source: BodySource;
    try {
      source = new BodySource(this.location);
    } catch {
      // Out of file descriptors, say: the jobs stay as they are, whole or cold in the file before.
      return;
    }
    for (const { key, job, offset, length } of placed) {
      if (repo.get('research_jobs', key) !== job) continue;
      // A cold job moves to the new file as it is; a whole one is replaced by a cold one.
      if (!moveJob(job, source, offset, length)) repo.substitute('research_jobs', key, job, coldJob(job, source, offset, length));
    }
    this.#retireSource(source);
  }

  /** `next` becomes the file cold jobs read from; the one before stays open until the next compaction (a job read just before may still be read). */
  #retireSource(next: BodySource | null): void {
    this.#retired?.close();
    this.#retired = this.#source;
    this.#source = next;
  }

  #closeSources(): void {
    this.#retired?.close();
    this.#source?.close();
    this.#retired = this.#source = null;
  }

  /** Between two commits: every line is committed, none half written (a commit appends its ledger lines before its record). */
  readLedger(): Promise<string[]> {
    return this.#exclusive(async () => ((await readOptional(this.ledgerFile)) ?? '').split('\n').filter((line) => line.length > 0));
  }

  /** A compaction now, then the state file and the ledger lines it counts, read as they are on disk. */
  async readStored(repo: Repository): Promise<StoredState> {
    this.#repo = repo;
    await this.#requestBase();
    return this.#exclusive(async () => {
      const state = await readFile(this.location, 'utf8');
      const lines = (await readOptional(this.ledgerFile))?.split('\n').slice(0, this.#baseCharges) ?? [];
      return { state, ledger: lines.length > 0 ? lines.map((line) => `${line}\n`).join('') : null };
    });
  }

  replaceStored(stored: StoredState, state: State, swap: () => void): Promise<void> {
    return this.#exclusive(async () => {
      if (this.#abandoned) throw this.#abandoned;
      const text = withJournalSeq(stored.state, this.#seq);
      await this.#call({ op: 'replace', id: 0, state: text, ledger: stored.ledger });
      this.#journalBytes = 0;
      this.#baseBytes = Buffer.byteLength(text, 'utf8');
      this.#baseCharges = state.charges.count;
      this.#baseAt = Date.now();
      swap();
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
   * The lock was taken over: saves waiting, and every save from here on, fail with `error`, and nothing more is
   * handed to the writer. Writing them anyway would undo what the new owner wrote.
   */
  abandon(error: Error): void {
    this.#abandoned ??= error;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const d of waiting) d.reject(this.#abandoned);
    this.#wantBase?.reject(this.#abandoned);
    this.#wantBase = null;
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
      if (!this.#abandoned && this.#repo && (this.#journalBytes > 0 || this.#baseBytes === 0)) await this.#requestBase();
    } finally {
      const worker = this.#worker;
      this.#worker = null;
      if (worker) {
        await this.#callOn(worker, { op: 'close', id: 0 }).catch(() => undefined);
        await worker.terminate();
      }
      // After the writer: it may have been copying from them.
      this.#closeSources();
    }
  }

  /**
   * Starts the writer on these files without waiting for it (a start does not pay for the thread's start-up,
   * unless a large ledger had it started already):
   * it first removes temp files a killed writer left and, if load found a torn or stale journal, rewrites it; the
   * writer handles messages in order, so that is done before the first record is appended.
   */
  #open(): void {
    if (this.#opened) return;
    const rewrite = this.#journalRewrite;
    this.#journalRewrite = null;
    if (rewrite !== null) this.#journalBytes = Buffer.byteLength(rewrite, 'utf8');
    this.#opened = this.#call({
      op: 'open',
      id: 0,
      file: this.location,
      journal: this.journalFile,
      ledger: this.ledgerFile,
      journalText: rewrite,
    }).then((reply) => {
      if (reply.swept)
        this.#notice(
          `removed ${reply.swept} temp file${reply.swept === 1 ? '' : 's'} left by a writer that was stopped mid-write, beside ${this.location}`,
        );
    });
    // A failure shows on the first commit, which waits for this.
    this.#opened.catch(() => undefined);
    this.#ageTimer = setInterval(
      () => {
        if (this.#journalBytes > 0 && Date.now() - this.#baseAt >= this.#maxAgeMs && !this.#held)
          void this.#requestBase().catch(() => undefined);
      },
      Math.min(this.#maxAgeMs, 5_000),
    );
    this.#ageTimer.unref();
  }

  #post(message: WriterMessage): void {
    (this.#worker ??= this.#startWorker()).postMessage(message);
  }

  #call(message: WriterMessage & { id: number }): Promise<WriterReply> {
    return this.#callOn((this.#worker ??= this.#startWorker()), message);
  }

  /** One message to the writer and its answer; the writer keeps the process alive only while it has one. */
  #callOn(worker: Worker, message: WriterMessage & { id: number }): Promise<WriterReply> {
    const id = ++this.#callId;
    // The writer keeps the process alive only while an answer is awaited.
    if (this.#calls++ === 0) worker.ref();
    return new Promise<WriterReply>((resolve, reject) => {
      const onMessage = (reply: WriterReply) => {
        if (reply.id !== id) return;
        done();
        if (reply.error)
          reject(Object.assign(new Error(`cannot write state file ${this.location}: ${reply.error.message}`), { code: reply.error.code }));
        else resolve(reply);
      };
      const onError = (e: Error) => {
        done();
        reject(e);
      };
      const done = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        if (--this.#calls === 0) worker.unref();
      };
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.postMessage({ ...message, id });
    });
  }

  #startWorker(): Worker {
    const worker = new Worker(fileURLToPath(writerUrl()), { resourceLimits: { maxYoungGenerationSizeMb: WRITER_YOUNG_MB } });
    worker.unref();
    worker.once('exit', () => {
      if (this.#worker === worker) this.#worker = null;
    });
    return worker;
  }
}
