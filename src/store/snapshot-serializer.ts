const encoder = new TextEncoder();
const OPEN = encoder.encode('{');
const CLOSE = encoder.encode('}');
const COMMA = encoder.encode(',');

type PlainObject = Record<string, unknown>;

const isPlainObject = (value: unknown): value is PlainObject => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
};

/** JSON.stringify would call it (with the member's key as argument): such a value is never taken apart. */
const hasToJSON = (value: object): boolean => typeof (value as { toJSON?: unknown }).toJSON === 'function';

/** What the last snapshot wrote for one collection, position by position (`texts[i]` undefined: key left out). */
interface Written {
  keys: string[];
  entries: unknown[];
  /** Each member's `"key":value`, as UTF-8. */
  texts: Array<Uint8Array | undefined>;
  /** Whether `texts[i]` can be reused while `entries[i]` is in place: a primitive, or plain data frozen all the way down. */
  lasting: boolean[];
  /** The collection's whole text, `{…}`. */
  text: Uint8Array;
}

/**
 * Serialises a state snapshot exactly as `JSON.stringify` does (and a newline), as UTF-8, for a state that is written again and
 * again with few entries changed. Each top-level object (a collection) is written member by member, and the
 * text of a member that is frozen all the way down is kept and reused while that very object is in place under
 * the same key. A frozen object cannot change, so the kept text is always what `JSON.stringify` would write;
 * everything else is serialised anew each time. The core keeps its clients, grants, codes and families frozen
 * (src/core/immutable.ts), which is what makes the reuse pay.
 *
 * Most writes change a few entries of a few collections, so each collection is compared with the last snapshot
 * position by position, and one that did not change at all reuses its whole text; an entry that moved under the
 * same key (an earlier one was deleted) is still found by its identity.
 */
export class SnapshotSerializer {
  readonly #written = new Map<string, Written>();
  /** Entries moved to another position keep their text: by identity, with the key it was written under. */
  readonly #byEntry = new WeakMap<object, { key: string; text: Uint8Array }>();

  /** The UTF-8 bytes of `JSON.stringify(value)` and a newline, in a buffer of their own (it is transferred to the writer thread). */
  serialize(value: unknown): Uint8Array {
    const whole = () => encoder.encode(`${JSON.stringify(value)}\n`);
    if (!isPlainObject(value) || hasToJSON(value)) return whole();
    const parts: Uint8Array[] = [];
    let first = true;
    for (const key of Object.keys(value)) {
      const member = value[key];
      if (isPlainObject(member) && !hasToJSON(member)) {
        const text = this.#collection(key, member);
        // A member of the collection wants toJSON: JSON.stringify decides everything, as it would.
        if (text === null) return whole();
        parts.push(encoder.encode(`${first ? '{' : ','}${JSON.stringify(key)}:`), text);
        first = false;
        continue;
      }
      // toJSON is called with the member's key: JSON.stringify of the whole passes it, of the member alone would not.
      if (typeof member === 'object' && member !== null && hasToJSON(member)) return whole();
      const text = JSON.stringify(member);
      if (text === undefined) continue; // undefined, a function or a symbol: JSON.stringify leaves the key out
      parts.push(encoder.encode(`${first ? '{' : ','}${JSON.stringify(key)}:${text}`));
      first = false;
    }
    parts.push(encoder.encode(first ? '{}\n' : '}\n'));
    return concat(parts);
  }

  /** The collection's text, `{"key":value,…}`; null when a member has a toJSON. */
  #collection(name: string, collection: PlainObject): Uint8Array | null {
    const before = this.#written.get(name);
    const keys = Object.keys(collection);
    const entries = new Array<unknown>(keys.length);
    const texts = new Array<Uint8Array | undefined>(keys.length);
    const lasting = new Array<boolean>(keys.length);
    let same = before !== undefined && before.keys.length === keys.length;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const entry = collection[key];
      entries[i] = entry;
      if (before !== undefined && before.lasting[i] === true && before.entries[i] === entry && before.keys[i] === key) {
        texts[i] = before.texts[i];
        lasting[i] = true;
        continue;
      }
      same = false;
      if (typeof entry === 'object' && entry !== null) {
        if (hasToJSON(entry)) return null;
        // Only entries frozen all the way down are kept, so a kept one needs no second look.
        const kept = this.#byEntry.get(entry);
        if (kept !== undefined && kept.key === key) {
          texts[i] = kept.text;
          lasting[i] = true;
        } else {
          const text = encoder.encode(`${JSON.stringify(key)}:${JSON.stringify(entry)}`);
          texts[i] = text;
          lasting[i] = isFrozenData(entry);
          if (lasting[i]) this.#byEntry.set(entry, { key, text });
        }
      } else {
        const text = JSON.stringify(entry);
        texts[i] = text === undefined ? undefined : encoder.encode(`${JSON.stringify(key)}:${text}`);
        lasting[i] = typeof entry !== 'function';
      }
    }
    const text = same ? (before as Written).text : braced(texts);
    this.#written.set(name, { keys, entries, texts, lasting, text });
    return text;
  }
}

/**
 * Frozen all the way down, and only plain data (no getters): nothing in it can change, so neither can its JSON.
 * Checked afresh for each new entry (the changed ones): remembering checked objects in a WeakSet was measured
 * slower, as the garbage collector pays for every weak entry.
 */
function isFrozenData(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return typeof value !== 'function';
  if (!Object.isFrozen(value) || hasToJSON(value)) return false;
  if (!Array.isArray(value) && !isPlainObject(value)) return false;
  for (const key of Object.keys(value)) {
    const property = Object.getOwnPropertyDescriptor(value, key);
    if (!property || !('value' in property) || !isFrozenData(property.value)) return false;
  }
  return true;
}

/** `{` the members with commas between `}`. */
function braced(members: Array<Uint8Array | undefined>): Uint8Array {
  const parts: Uint8Array[] = [OPEN];
  for (const member of members) {
    if (member === undefined) continue;
    if (parts.length > 1) parts.push(COMMA);
    parts.push(member);
  }
  parts.push(CLOSE);
  return concat(parts);
}

/** One new buffer of its own (never a slice of a shared pool). */
function concat(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
