import { open, readFile } from 'node:fs/promises';
import { FrozenTable, FrozenView } from '../core/state/frozen-view.js';
import { setOwn } from '../core/state/tables.js';
import { COLLECTION_NAMES, type State } from '../core/state/state.js';

/**
 * The state file's text, written (stateChunks; statePieces for a compaction) and read (readStateFile): both sides
 * of the entry-per-line layout in one place, so that a change to one is made beside the other.
 */

/**
 * The state file's text in pieces: `JSON.stringify` of the state with `journal_seq` as its last field, and a line
 * break before each entry of a table and before each table's closing brace (still one JSON document; `jq .` reads
 * it). One entry per line lets a start parse the file entry by entry (`readStateFile`), never holding the whole
 * text, and lets a large state be written a slice at a time.
 */
export function* stateChunks(state: State | FrozenView, seq: number): Generator<string> {
  const view = state instanceof FrozenView ? state : new FrozenView(state);
  yield '{';
  let first = true;
  for (const [name, value] of view.fields) {
    if (value === undefined || name === 'journal_seq') continue;
    yield `${first ? '' : ','}${JSON.stringify(name)}:`;
    first = false;
    if (!(value instanceof FrozenTable)) {
      yield* inline(view, value);
      continue;
    }
    let firstEntry = true;
    yield '{';
    for (const [key, entry] of view.entries(value)) {
      yield `\n${firstEntry ? '' : ','}${JSON.stringify(key)}:${JSON.stringify(entry)}`;
      firstEntry = false;
    }
    yield '\n}';
  }
  yield `${first ? '' : ','}"journal_seq":${seq}}\n`;
}

/** A field that is not a table, on one line as JSON.stringify writes it; the charge totals' tables a piece an entry. */
function* inline(view: FrozenView, value: unknown): Generator<string> {
  if (value instanceof FrozenTable) {
    let first = true;
    yield '{';
    for (const [key, entry] of view.entries(value)) {
      yield `${first ? '' : ','}${JSON.stringify(key)}:${JSON.stringify(entry)}`;
      first = false;
    }
    yield '}';
  } else if (
    value !== null &&
    typeof value === 'object' &&
    !Array.isArray(value) &&
    Object.values(value).some((v) => v instanceof FrozenTable)
  ) {
    let first = true;
    yield '{';
    for (const [key, field] of Object.entries(value)) {
      if (field === undefined) continue;
      yield `${first ? '' : ','}${JSON.stringify(key)}:`;
      yield* inline(view, field);
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

/** What parseValue returns for text that is not one JSON value. */
const NOT_A_VALUE = Symbol('not a JSON value');
/** Thrown where a file leaves the entry-per-line layout: readStateFile then parses it whole. */
const notInLayout = () => new Error('not in the entry-per-line layout');

/**
 * Reads and parses a state file. A file in the layout `stateChunks` writes is read a piece at a time and its
 * entries parsed a piece at a time, never holding the whole text (a 50 MB state would otherwise cost its bytes,
 * its text and its objects together). Any other JSON (an older compact file, a hand-edited one) is parsed whole;
 * so is a file the entry-wise reading cannot follow, so that its error is JSON.parse's own.
 */
export async function readStateFile(file: string): Promise<unknown> {
  try {
    return await readStateFileByEntries(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== undefined) throw e;
    return JSON.parse((await readFile(file)).toString('utf8'));
  }
}

/**
 * readStateFile's way for a file in the entry-per-line layout; throws on any other file, and on anything
 * JSON.parse of the whole text would refuse (a comma with no entry after it, two entries without one).
 */
export async function readStateFileByEntries(file: string): Promise<unknown> {
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
    /**
     * The entries from `from` (a line break) to `to`, one a line as stateChunks writes them, into `table`. Each
     * line's key is read with KEY and its value parsed alone: parsed as one object, a batch's entry names (all
     * different) made V8 a hidden class each, a good part of a start's parse and its garbage. KEY matches only
     * valid JSON and each value is parsed on its own, so a line is accepted
     * exactly when it is a valid entry; any other layout (a blank line, an entry over two lines, a space after a
     * key) parses the batch as an object, as before, which refuses what JSON.parse refuses.
     */
    const parseLines = (from: number, to: number): void => {
      if (!table || (text.charCodeAt(from + 1) === 0x2c) !== tableHasEntries) return parseEntries(from, to);
      const keys: string[] = [];
      const values: unknown[] = [];
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
        const value = parseValue(valueAt, end);
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
      text = eof ? '' : text.slice(at);
      if (text.length > MAX_LINE_BYTES) throw notInLayout();
    };
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, READ_BYTES, null);
      for (let from = 0; from < bytesRead; from += PIECE_BYTES) {
        text += buffer.toString('latin1', from, Math.min(from + PIECE_BYTES, bytesRead));
        consume(false);
      }
      if (bytesRead === 0) break;
    }
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

/** A stored state text with its `journal_seq` set to `seq` (a snapshot restored continues the journal's numbering). */
export function withJournalSeq(text: string, seq: number): string {
  const body = text.replace(/\n$/, '');
  const marked = /,"journal_seq":\d+}$/.test(body)
    ? body.replace(/,"journal_seq":\d+}$/, `,"journal_seq":${seq}}`)
    : body.replace(/}$/, `${body === '{}' ? '' : ','}"journal_seq":${seq}}`);
  return `${marked}\n`;
}
