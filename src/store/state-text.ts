import { FrozenTable, FrozenView } from '../core/state/frozen-view.js';
import type { State } from '../core/state/state.js';

/**
 * The state file's text in pieces: `JSON.stringify` of the state with `journal_seq` as its last field, and a line
 * break before each entry of a table and before each table's closing brace (still one JSON document, which a start
 * reads with JSON.parse; `jq .` reads it, `grep` finds an entry). A large state is written a slice at a time.
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

/** A stored state text with its `journal_seq` set to `seq` (a snapshot restored continues the journal's numbering). */
export function withJournalSeq(text: string, seq: number): string {
  const body = text.replace(/\n$/, '');
  const marked = /,"journal_seq":\d+}$/.test(body)
    ? body.replace(/,"journal_seq":\d+}$/, `,"journal_seq":${seq}}`)
    : body.replace(/}$/, `${body === '{}' ? '' : ','}"journal_seq":${seq}}`);
  return `${marked}\n`;
}
