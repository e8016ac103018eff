const encoder = new TextEncoder();
const OPEN = encoder.encode('{');
const CLOSE = encoder.encode('}');
const CLOSE_LINE = encoder.encode('}\n');
const COMMA = encoder.encode(',');

type PlainObject = Record<string, unknown>;

const isPlainObject = (value: unknown): value is PlainObject => {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
};

/** JSON.stringify would call it (with the member's key as argument): such a value is never taken apart. */
const hasToJSON = (value: object): boolean => typeof (value as { toJSON?: unknown }).toJSON === 'function';

/** Frozen all the way down, and only plain data (no getters): nothing in it can change, so neither can its JSON. */
function isDeepFrozenData(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return typeof value !== 'function';
  if (!Object.isFrozen(value) || hasToJSON(value)) return false;
  if (!Array.isArray(value) && !isPlainObject(value)) return false;
  for (const key of Object.keys(value)) {
    const property = Object.getOwnPropertyDescriptor(value, key);
    if (!property || !('value' in property) || !isDeepFrozenData(property.value)) return false;
  }
  return true;
}

/**
 * Serialises a state snapshot exactly as `JSON.stringify` does (and a newline), as UTF-8, for a state that is written again and
 * again with few entries changed. Each top-level object (a collection) is written member by member, and the
 * text of a member that is frozen all the way down is kept, by the member's identity, and reused while that
 * very object is in place. A frozen object cannot change, so the kept text is always what `JSON.stringify`
 * would write; everything else is serialised anew each time. The core keeps its clients, grants, codes and
 * families frozen (src/core/immutable.ts), which is what makes the reuse pay.
 */
export class SnapshotSerializer {
  readonly #members = new WeakMap<object, { key: string; bytes: Uint8Array }>();

  /** The UTF-8 bytes of `JSON.stringify(value)` and a newline. */
  serialize(value: unknown): Uint8Array {
    const whole = () => encoder.encode(`${JSON.stringify(value)}\n`);
    if (!isPlainObject(value) || hasToJSON(value)) return whole();
    const parts: Uint8Array[] = [OPEN];
    let first = true;
    for (const key of Object.keys(value)) {
      const member = value[key];
      if (isPlainObject(member) && !hasToJSON(member)) {
        const inner = this.#collection(member);
        // A member of the collection wants toJSON: JSON.stringify decides everything, as it would.
        if (inner === null) return whole();
        parts.push(first ? encoder.encode(`${JSON.stringify(key)}:{`) : encoder.encode(`,${JSON.stringify(key)}:{`), ...inner, CLOSE);
        first = false;
        continue;
      }
      // toJSON is called with the member's key: JSON.stringify of the whole passes it, of the member alone would not.
      if (typeof member === 'object' && member !== null && hasToJSON(member)) return whole();
      const text = JSON.stringify(member);
      if (text === undefined) continue; // undefined, a function or a symbol: JSON.stringify leaves the key out
      parts.push(encoder.encode(`${first ? '' : ','}${JSON.stringify(key)}:${text}`));
      first = false;
    }
    parts.push(CLOSE_LINE);
    return concat(parts);
  }

  /** The collection's members as `"key":value` parts with commas between; null when one has a toJSON. */
  #collection(collection: PlainObject): Uint8Array[] | null {
    const parts: Uint8Array[] = [];
    for (const key of Object.keys(collection)) {
      const entry = collection[key];
      let bytes: Uint8Array | undefined;
      if (typeof entry === 'object' && entry !== null) {
        if (hasToJSON(entry)) return null;
        const kept = this.#members.get(entry);
        if (kept !== undefined && kept.key === key) {
          bytes = kept.bytes;
        } else {
          bytes = encoder.encode(`${JSON.stringify(key)}:${JSON.stringify(entry)}`);
          if (isDeepFrozenData(entry)) this.#members.set(entry, { key, bytes });
        }
      } else {
        const text = JSON.stringify(entry);
        if (text === undefined) continue;
        bytes = encoder.encode(`${JSON.stringify(key)}:${text}`);
      }
      if (parts.length > 0) parts.push(COMMA);
      parts.push(bytes);
    }
    return parts;
  }
}

/** One new buffer of its own (never a slice of a shared pool): it is transferred to the writer thread. */
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
