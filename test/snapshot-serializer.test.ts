import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { frozen } from '../src/core/immutable.js';
import { SnapshotSerializer } from '../src/store/snapshot-serializer.js';

const decoder = new TextDecoder();
const text = (serializer: SnapshotSerializer, value: unknown) => decoder.decode(serializer.serialize(value));
const expected = (value: unknown) => `${JSON.stringify(value)}\n`;

/** A state-like value: top-level collections of entries, some frozen all the way down, and other members. */
const collection = fc.dictionary(fc.string(), fc.oneof(fc.jsonValue(), fc.jsonValue().map((v) => frozen(v))));
const stateLike = fc.dictionary(fc.string(), fc.oneof(collection, fc.jsonValue()));

/** One change to a state-like value, as the core makes them (frozen entries replaced) or as it must not rely on. */
type Change =
  | { kind: 'replace'; collection: number; key: string; entry: unknown }
  | { kind: 'edit-unfrozen'; collection: number; value: unknown }
  | { kind: 'delete'; collection: number }
  | { kind: 'move'; collection: number; key: string }
  | { kind: 'not-json'; collection: number; key: string; value: undefined | (() => void) | symbol }
  | { kind: 'drop-collection'; collection: number }
  | { kind: 'restore-collection' };
const change: fc.Arbitrary<Change> = fc.oneof(
  fc.record({ kind: fc.constant('replace' as const), collection: fc.nat(), key: fc.string(), entry: fc.jsonValue().map((v) => frozen(v)) }),
  fc.record({ kind: fc.constant('edit-unfrozen' as const), collection: fc.nat(), value: fc.jsonValue() }),
  fc.record({ kind: fc.constant('delete' as const), collection: fc.nat() }),
  fc.record({ kind: fc.constant('move' as const), collection: fc.nat(), key: fc.string() }),
  fc.record({ kind: fc.constant('not-json' as const), collection: fc.nat(), key: fc.string(), value: fc.constantFrom(undefined, () => {}, Symbol('s')) }),
  fc.record({ kind: fc.constant('drop-collection' as const), collection: fc.nat() }),
  fc.record({ kind: fc.constant('restore-collection' as const) }),
);

/** Collections taken out by `drop-collection`, put back (under the same name) by `restore-collection`. */
const dropped: Array<[string, Record<string, unknown>]> = [];

function apply(state: Record<string, Record<string, unknown>>, c: Change): void {
  const names = Object.keys(state);
  if (c.kind === 'restore-collection') {
    const back = dropped.pop();
    if (back) state[back[0]] = back[1];
    return;
  }
  if (names.length === 0) return;
  const name = names[c.collection % names.length]!;
  const target = state[name]!;
  if (c.kind === 'drop-collection') {
    dropped.push([name, target]);
    delete state[name];
    return;
  }
  if (c.kind === 'not-json') {
    target[c.key] = c.value;
    return;
  }
  const keys = Object.keys(target);
  if (c.kind === 'replace') target[c.key] = c.entry;
  else if (c.kind === 'delete' && keys.length > 0) delete target[keys[0]!];
  else if (c.kind === 'move' && keys.length > 0) {
    // The same (possibly frozen) object under another key.
    target[c.key] = target[keys[0]!];
    delete target[keys[0]!];
  } else if (c.kind === 'edit-unfrozen') {
    const entry = Object.values(target).find((e): e is Record<string, unknown> => typeof e === 'object' && e !== null && !Array.isArray(e) && !Object.isFrozen(e));
    if (entry) entry.edited = c.value;
  }
}

describe('SnapshotSerializer: the state file text is exactly JSON.stringify of the state', () => {
  it('any JSON value, with frozen and unfrozen entries, serialises as JSON.stringify does', () => {
    fc.assert(
      fc.property(fc.oneof(stateLike, fc.jsonValue()), (value) => {
        expect(text(new SnapshotSerializer(), value)).toBe(expected(value));
      }),
      { numRuns: 300 },
    );
  });

  it('after any sequence of changes each snapshot is still exactly JSON.stringify: kept texts never go stale', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.string(), collection, { minKeys: 1 }), fc.array(change, { maxLength: 30 }), (initial, changes) => {
        const state = initial as Record<string, Record<string, unknown>>;
        const serializer = new SnapshotSerializer();
        dropped.length = 0;
        expect(text(serializer, state)).toBe(expected(state));
        for (const c of changes) {
          apply(state, c);
          expect(text(serializer, state)).toBe(expected(state));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('an entry frozen only on the outside is serialised anew: a change inside it is written', () => {
    const serializer = new SnapshotSerializer();
    const inner = { scopes: ['ask'] };
    const state = { grants: { g1: Object.freeze({ id: 'g1', inner }) } };
    expect(text(serializer, state)).toBe(expected(state));
    inner.scopes.push('research');
    expect(text(serializer, state)).toContain('"scopes":["ask","research"]');
    expect(text(serializer, state)).toBe(expected(state));
  });

  it('a member with toJSON is left to JSON.stringify, which passes it its key', () => {
    const serializer = new SnapshotSerializer();
    const byKey = (key: string) => `key:${key}`;
    for (const state of [{ at: { when: { toJSON: byKey } } }, { top: { toJSON: byKey }, other: {} }, { c: { d: new Date(0) } }]) {
      expect(text(serializer, state)).toBe(expected(state));
    }
  });

  it('a frozen entry with a getter is serialised anew each time: its value can still change', () => {
    const serializer = new SnapshotSerializer();
    let value = 1;
    const state = { families: { f1: Object.freeze({ get v() { return value; } }) } };
    expect(text(serializer, state)).toBe('{"families":{"f1":{"v":1}}}\n');
    value = 2;
    expect(text(serializer, state)).toBe('{"families":{"f1":{"v":2}}}\n');
  });

  it('an entry frozen all the way down is serialised once while it stays in place, and again once replaced', () => {
    const serializer = new SnapshotSerializer();
    const first = frozen({ id: 'fam_1', current: { generation: 1 } });
    const state: { families: Record<string, unknown>; version: number } = { families: { fam_1: first }, version: 1 };
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      const timesFor = (entry: unknown) => stringify.mock.calls.filter(([arg]) => arg === entry).length;
      text(serializer, state);
      text(serializer, state);
      expect(timesFor(first)).toBe(1);
      const second = frozen({ id: 'fam_1', current: { generation: 2 } });
      state.families.fam_1 = second;
      expect(text(serializer, state)).toBe(expected(state));
      expect(timesFor(second)).toBe(1);
    } finally {
      stringify.mockRestore();
    }
  });

  it('an entry that moved up when an earlier one was deleted keeps its text, and so does each entry of a collection that did not change', () => {
    const serializer = new SnapshotSerializer();
    const a = frozen({ id: 'a', scopes: ['ask'] });
    const b = frozen({ id: 'b', scopes: ['research'] });
    const client = frozen({ client_name: 'Prüf-Agent ✓' });
    const state: { grants: Record<string, unknown>; clients: Record<string, unknown> } = { grants: { a, b }, clients: { c: client } };
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      const timesFor = (entry: unknown) => stringify.mock.calls.filter(([arg]) => arg === entry).length;
      expect(text(serializer, state)).toBe(expected(state));
      delete state.grants.a;
      expect(text(serializer, state)).toBe(expected(state));
      expect(timesFor(b)).toBe(1);
      expect(timesFor(client)).toBe(1);
    } finally {
      stringify.mockRestore();
    }
  });

  it('the bytes are UTF-8 in a buffer of their own (it is transferred to the writer thread)', () => {
    const serializer = new SnapshotSerializer();
    const state = { clients: { c1: frozen({ client_name: 'Prüf-Agent ✓' }) }, version: 1 };
    for (let i = 0; i < 3; i++) {
      // From the second time on, the collection's kept text is reused: still copied into a buffer of the snapshot's own.
      const bytes = serializer.serialize(state);
      expect(Buffer.from(bytes).toString('utf8')).toBe(expected(state));
      expect(bytes.byteOffset).toBe(0);
      expect(bytes.buffer.byteLength).toBe(bytes.byteLength);
      // Transferring it (as the store does) detaches it; nothing the serializer keeps may go with it.
      structuredClone(bytes, { transfer: [bytes.buffer] });
      expect(bytes.byteLength).toBe(0);
    }
  });

  it('a collection in which nothing changed is copied whole, not put together member by member again', () => {
    const serializer = new SnapshotSerializer();
    const clients = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`c${i}`, frozen({ client_id: `c${i}`, client_name: `Agent ${i}` })]));
    const state: { clients: Record<string, unknown>; grants: Record<string, unknown> } = { clients, grants: { g1: frozen({ id: 'g1' }) } };
    expect(text(serializer, state)).toBe(expected(state));
    state.grants.g1 = frozen({ id: 'g1', last_used_at: 1 });
    const copies = vi.spyOn(Uint8Array.prototype, 'set');
    try {
      expect(text(serializer, state)).toBe(expected(state));
      // The snapshot's own parts and the changed grants collection: a few copies, not one per client.
      expect(copies.mock.calls.length).toBeLessThan(20);
    } finally {
      copies.mockRestore();
    }
  });
});
