import type { PendingAction, WorkspaceChange } from './entities.js';
import { addAmount, type ChargeEntry } from './charges.js';
import type { IdempotencyRecord } from './idempotency.js';
import { frozen } from './immutable.js';
import type { ResearchJob, TrainingDocument } from './entities.js';
import {
  COLLECTION_NAMES,
  type AuthorizationCode,
  type Client,
  type Grant,
  type ScenarioOrigin,
  type SigningKey,
  type State,
  type TokenFamily,
} from './state.js';
import type { KnowledgeDocument } from './entities.js';

/** The keyed collections of the state and what one entry of each is. */
export interface Collections {
  clients: Client;
  grants: Grant;
  /** Keyed by the code's hash. */
  codes: AuthorizationCode;
  families: TokenFamily;
  /** jti → the access token's expiry. */
  revoked_access_tokens: number;
  idempotency: IdempotencyRecord;
  /** Keyed by the charge's seq. */
  charge_ledger: ChargeEntry;
  research_jobs: ResearchJob;
  training_documents: TrainingDocument;
  pending_actions: PendingAction;
  shared_knowledge: KnowledgeDocument;
}
export type CollectionName = keyof Collections;

export { COLLECTION_NAMES };
COLLECTION_NAMES satisfies ReadonlyArray<CollectionName>;

/** The state as every module but the repository sees it: for reading only; changes go through the repository. */
export type ReadonlyState = Readonly<Omit<State, CollectionName | 'keys' | 'workspace_changes' | 'charges'>> & {
  readonly [C in CollectionName]: Readonly<Record<string, Readonly<Collections[C]>>>;
} & {
  readonly keys: readonly SigningKey[];
  readonly workspace_changes: readonly WorkspaceChange[];
  readonly charges: {
    readonly count: number;
    readonly by_client: Readonly<Record<string, number>>;
    readonly by_grant: Readonly<Record<string, number>>;
  };
};

/**
 * One change of a commit: the value now at `path` in the state, or (no value) that nothing is there any more.
 * Applied in order over the state before the commit, a commit's changes give the state after it; applying a
 * change twice changes nothing more (each one sets a whole value), which is what lets a journal be replayed
 * over a state file that already holds some of it.
 */
export type Change = readonly [path: readonly string[]] | readonly [path: readonly string[], value: unknown];

/** What one commit makes durable: the state's changes (charges among them, in `charge_ledger`). */
export interface CommitBatch {
  changes: Change[];
  /** What `rollBack` puts back if the batch cannot be made durable (absent: a batch made elsewhere, a test's). */
  readonly undo?: UndoLog;
}

/**
 * For each place changed since a drain (by its path key): its value before the first of those changes, or that it
 * had none. Values are shared, not copied: entries are immutable.
 */
type UndoLog = Map<string, { path: readonly string[]; present: boolean; value: unknown }>;

const pathKey = (path: readonly string[]): string => path.join('\u0000');

/** `table[key] = value` as an own property, also for the key `__proto__` (which assignment would take as the prototype). */
export function setOwn(table: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(table, key, { value, enumerable: true, writable: true, configurable: true });
  else table[key] = value;
}

/**
 * For a frozen view, per table (a collection, or `by_client` and `by_grant` of the charge totals): each key changed
 * since it was taken, with its value before the first of those changes (undefined: it had none).
 */
type Before = Map<string, Map<string, unknown>>;

const CHARGE_TABLES: readonly string[] = ['by_client', 'by_grant'];

/** The live object of a table of `state`. */
const liveTable = (state: State, name: string): Record<string, unknown> =>
  ((CHARGE_TABLES.includes(name) ? state.charges : state) as unknown as Record<string, Record<string, unknown>>)[name]!;

/** One of a frozen view's tables: its name and its keys, in their order when the view was taken. */
export class FrozenTable {
  constructor(
    readonly name: string,
    readonly keys: readonly string[],
  ) {}
}

/**
 * The state at one moment, read while the repository goes on changing it (Repository.frozenView). `fields` are the
 * state's fields in their order: a table as a FrozenTable (its entries through `entries`), the charge totals as
 * `{ count, by_client, by_grant }` with the two tables so, every other field as it was (lists copied: the
 * repository appends to them).
 */
export class FrozenView {
  readonly fields: ReadonlyArray<readonly [string, unknown]>;
  readonly #state: State;
  readonly #before: Before;
  readonly #release: () => void;

  constructor(state: State, before: Before = new Map(), release: () => void = () => undefined) {
    const table = (name: string, live: object): FrozenTable => {
      before.set(name, new Map());
      return new FrozenTable(name, Object.keys(live));
    };
    this.fields = Object.entries(state).map(([name, value]: [string, unknown]) => {
      if ((COLLECTION_NAMES as readonly string[]).includes(name)) return [name, table(name, value as object)] as const;
      if (name === 'charges') {
        // In the order the core makes them (a hand-edited file may have them in another).
        const totals = value as State['charges'];
        return [
          name,
          {
            count: totals.count,
            by_client: table('by_client', totals.by_client),
            by_grant: table('by_grant', totals.by_grant),
          },
        ] as const;
      }
      return [name, Array.isArray(value) ? [...(value as unknown[])] : value] as const;
    });
    this.#state = state;
    this.#before = before;
    this.#release = release;
  }

  /** The charges counted when it was taken. */
  get chargeCount(): number {
    return (this.fields.find(([name]) => name === 'charges')?.[1] as { count: number }).count;
  }

  /** A table's entries as they were, in their order then. */
  *entries(table: FrozenTable): Generator<[string, unknown]> {
    const live = liveTable(this.#state, table.name);
    const changed = this.#before.get(table.name)!;
    for (const key of table.keys) {
      const value = changed.has(key) ? changed.get(key) : live[key];
      if (value !== undefined) yield [key, value];
    }
  }

  /** The frozen view as a plain state of its own. */
  toState(): State {
    const plain = (value: unknown): unknown => {
      if (value instanceof FrozenTable) {
        const copy: Record<string, unknown> = {};
        for (const [key, entry] of this.entries(value)) setOwn(copy, key, entry);
        return copy;
      }
      if (value === null || typeof value !== 'object' || Array.isArray(value) || Object.isFrozen(value)) return value;
      return Object.fromEntries(Object.entries(value).map(([k, v]: [string, unknown]) => [k, plain(v)]));
    };
    return Object.fromEntries(this.fields.map(([name, value]) => [name, plain(value)])) as unknown as State;
  }

  /** Done with it: the repository stops keeping values for it. */
  release(): void {
    this.#release();
  }
}

/** A subset of a collection's keys that `where` keeps current. */
interface Subset {
  collection: CollectionName;
  test: (entry: unknown) => boolean;
  keys: Set<string>;
}

/**
 * The one way the state changes (spec-level operations live in the core's modules; this only stores). Every
 * entry is an immutable value: a change puts a new value in place of the old one, so nothing changes an entry
 * behind the back of whoever read it, and a frozen view that copies the collections' key-to-value tables holds a
 * consistent state. The repository remembers where the state changed since the last commit; `drain` hands
 * those places, with their values as they are now, to persistence.
 */
export class Repository {
  #state: State;
  /**
   * Places changed since the last drain, by their key, in the order a replay must write them to give the same key
   * order: a key is moved to the end when it is inserted (as the object moved it), and one removed on the way is
   * replayed as a removal first (an entry that was there before, removed and put again, moved to the end).
   */
  #changed = new Map<string, { path: readonly string[]; removed: boolean }>();
  /** What the places changed since the last drain held before: a rollback puts it back. */
  #undo: UndoLog = new Map();
  /** Told after a rollback which tables and fields it put back (what lives beside the state follows them). */
  readonly #rollBackListeners: Array<(heads: ReadonlySet<string>) => void> = [];
  /** What `where` hands out, kept current here. */
  #subsets: Subset[] = [];
  /** For each frozen view not yet released: the values its tables had before the changes made since it was taken. */
  readonly #frozenViews = new Set<Before>();

  constructor(state: State) {
    this.#state = freezeEntries(state);
  }

  /**
   * The keys of the entries of `collection` for which `test` holds, kept current by every put, update, delete and
   * replace: the few unfinished jobs among many finished ones, without looking at every job. In the order they
   * came to pass the test (the collection's order after a replace).
   */
  where<C extends CollectionName>(collection: C, test: (entry: Collections[C]) => boolean): ReadonlySet<string> {
    const subset: Subset = { collection, test: test as (entry: unknown) => boolean, keys: new Set() };
    this.#fill(subset);
    this.#subsets.push(subset);
    return subset.keys;
  }

  #fill(subset: Subset): void {
    subset.keys.clear();
    const table = this.#state[subset.collection] as Record<string, unknown>;
    for (const key of Object.keys(table)) if (subset.test(table[key])) subset.keys.add(key);
  }

  /** The whole state, for reading. */
  get state(): ReadonlyState {
    return this.#state;
  }

  get<C extends CollectionName>(collection: C, key: string): Collections[C] | undefined {
    const table = this.#state[collection] as Record<string, Collections[C]>;
    return Object.hasOwn(table, key) ? table[key] : undefined;
  }

  has(collection: CollectionName, key: string): boolean {
    return Object.hasOwn(this.#state[collection], key);
  }

  values<C extends CollectionName>(collection: C): Collections[C][] {
    return Object.values(this.#state[collection] as Record<string, Collections[C]>);
  }

  entries<C extends CollectionName>(collection: C): [string, Collections[C]][] {
    return Object.entries(this.#state[collection] as Record<string, Collections[C]>);
  }

  /** Puts an entry in place, frozen; returns it. */
  put<C extends CollectionName>(collection: C, key: string, entry: Collections[C]): Collections[C] {
    const inserted = !this.has(collection, key);
    this.#remember([collection, key]);
    this.#keep(collection, key);
    setOwn(this.#state[collection], key, frozen(entry));
    this.#mark([collection, key], inserted ? 'inserted' : 'updated');
    for (const subset of this.#subsets) {
      if (subset.collection !== collection) continue;
      if (subset.test(entry)) subset.keys.add(key);
      else subset.keys.delete(key);
    }
    return entry;
  }

  /**
   * Replaces the entry as it is now (never a copy read earlier) with the given fields changed; returns the new entry.
   * Fields are compared by identity: a change to an array or object field is always a change.
   */
  update<C extends CollectionName>(collection: C, key: string, change: Partial<Collections[C]>): Collections[C] {
    const current = this.get(collection, key);
    if (current === undefined || typeof current !== 'object') throw new Error(`no entry "${key}" in ${collection}`);
    // Nothing changes (a grant used again within the same millisecond, a manual clock): nothing to write.
    if (Object.entries(change).every(([field, value]) => Object.is((current as unknown as Record<string, unknown>)[field], value)))
      return current;
    return this.put(collection, key, { ...current, ...change });
  }

  /** Removes an entry; returns whether there was one. */
  delete(collection: CollectionName, key: string): boolean {
    if (!this.has(collection, key)) return false;
    this.#remember([collection, key]);
    this.#keep(collection, key);
    delete (this.#state[collection] as Record<string, unknown>)[key];
    this.#mark([collection, key], 'removed');
    for (const subset of this.#subsets) if (subset.collection === collection) subset.keys.delete(key);
    return true;
  }

  /** Spec 1: one charge and the totals, durable together with the next commit (in the same journal record). */
  recordCharge(entry: Omit<ChargeEntry, 'seq'>): ChargeEntry {
    const totals = this.#state.charges;
    const line: ChargeEntry = { seq: totals.count + 1, ...entry };
    this.#setCharges(['count'], line.seq);
    this.#setCharges(['by_client', entry.client_id], addAmount(totals.by_client[entry.client_id] ?? 0, entry.amount));
    this.#setCharges(['by_grant', entry.grant_id], addAmount(totals.by_grant[entry.grant_id] ?? 0, entry.amount));
    return this.put('charge_ledger', String(line.seq), line);
  }

  #setCharges(path: [string] | [string, string], value: number): void {
    const totals = this.#state.charges as unknown as Record<string, Record<string, number> | number>;
    this.#remember(['charges', ...path]);
    if (path.length === 1) totals[path[0]] = value;
    else {
      this.#keep(path[0], path[1]);
      setOwn(totals[path[0]] as Record<string, number>, path[1], value);
    }
    this.#mark(['charges', ...path]);
  }

  /** An applied workspace change, kept in order. */
  appendWorkspaceChange(change: WorkspaceChange): void {
    const list = this.#state.workspace_changes;
    this.#remember(['workspace_changes', String(list.length)]);
    list.push(frozen(change));
    this.#mark(['workspace_changes', String(list.length - 1)]);
  }

  addSigningKey(key: SigningKey): void {
    this.#remember(['keys', String(this.#state.keys.length)]);
    this.#state.keys.push(frozen(key));
    this.#mark(['keys', String(this.#state.keys.length - 1)]);
  }

  setScenario(origin: ScenarioOrigin): void {
    this.#remember(['scenario']);
    this.#state.scenario = frozen({ ...origin });
    this.#mark(['scenario']);
  }

  /** Whether anything changed since the last drain. */
  get dirty(): boolean {
    return this.#changed.size > 0;
  }

  /** The changes since the last drain, each with its value as it is now; starts over. */
  drain(): CommitBatch {
    const changes: Change[] = [];
    for (const { path, removed } of this.#changed.values()) {
      const found = lookup(this.#state, path);
      if (removed || !found.present) changes.push([path]);
      if (found.present) changes.push([path, found.value]);
    }
    this.#changed.clear();
    const undo = this.#undo;
    this.#undo = new Map();
    return { changes, undo };
  }

  /**
   * A drained batch could not be made durable, and its requests are answered with an error: the state goes back to
   * what it was before the batch, so nothing of it is written later, charged or acted on (a retry with the same
   * Idempotency-Key runs afresh). Changes made since the drain are built on it and go too (their commits fail
   * with it). Returns how many places were put back.
   */
  rollBack(batch: CommitBatch): number {
    const since = this.#undo;
    this.#undo = new Map();
    this.#changed.clear();
    // Newest first: what changed since the drain goes back to the batch's values, then those to the ones before.
    const heads = new Set<string>();
    for (const log of [since, batch.undo ?? (new Map() as UndoLog)])
      for (const { path, present, value } of log.values()) {
        this.#putBack(path, present, value);
        heads.add(path[0]!);
      }
    for (const listener of this.#rollBackListeners) listener(heads);
    return since.size + (batch.undo?.size ?? 0);
  }

  /** `listener` is told after each rollback which tables and fields it put back (`rollBack`). */
  onRollBack(listener: (heads: ReadonlySet<string>) => void): void {
    this.#rollBackListeners.push(listener);
  }

  /** Before a change at `path`: what is there now, unless a change since the last drain came first. */
  #remember(path: readonly string[]): void {
    const key = pathKey(path);
    if (this.#undo.has(key)) return;
    const found = lookup(this.#state, path);
    this.#undo.set(key, { path, present: found.present, value: found.present ? found.value : undefined });
  }

  /** Sets `path` back to a value it had (or to nothing), keeping frozen views and subsets as a change would, unrecorded. */
  #putBack(path: readonly string[], present: boolean, value: unknown): void {
    const [head, ...rest] = path as [string, ...string[]];
    if (head === 'workspace_changes' || head === 'keys') {
      // Lists are only appended to: an index that held nothing before is cut off again, with all after it.
      const list = this.#state[head] as unknown[];
      const index = Number(rest[0]);
      if (present) list[index] = value;
      else if (list.length > index) list.length = index;
      return;
    }
    if (head === 'scenario') {
      if (present) this.#state.scenario = value as ScenarioOrigin;
      else delete (this.#state as { scenario?: unknown }).scenario;
      return;
    }
    const [table, key] =
      head === 'charges' ? (rest.length === 2 ? [rest[0]!, rest[1]!] : [null, rest[0]!]) : ([head, rest[0]!] as [string, string]);
    if (table === null) {
      const totals = this.#state.charges as unknown as Record<string, unknown>;
      if (present) totals[key] = value;
      else delete totals[key];
      return;
    }
    this.#keep(table, key);
    const live = liveTable(this.#state, table);
    if (present) setOwn(live, key, value);
    else delete live[key];
    for (const subset of this.#subsets) {
      if (subset.collection !== table) continue;
      if (present && subset.test(value)) subset.keys.add(key);
      else subset.keys.delete(key);
    }
  }

  /**
   * The state as it is now, while requests go on changing it (a write of the whole state runs in slices). Copy on
   * write: it keeps each table's keys, and the repository keeps for it the value before each change it makes from
   * now on; copies of the tables themselves would be as large as the tables, made at every
   * compaction (docs/storage.md "The one write path"). Release it when done: until then every change keeps a value for it.
   */
  frozenView(): FrozenView {
    const before: Before = new Map();
    const view = new FrozenView(this.#state, before, () => this.#frozenViews.delete(before));
    this.#frozenViews.add(before);
    return view;
  }

  /** Before a change to `key` of `table`: the entry's value now, for each frozen view that has none kept for it yet. */
  #keep(table: string, key: string): void {
    if (this.#frozenViews.size === 0) return;
    const live = liveTable(this.#state, table);
    for (const before of this.#frozenViews) {
      const kept = before.get(table)!;
      if (!kept.has(key)) kept.set(key, Object.hasOwn(live, key) ? live[key] : undefined);
    }
  }

  /** Makes `state` the whole state (a snapshot restored); what was not committed is dropped. */
  replace(state: State): void {
    // A frozen view taken before reads the old state, which nothing changes any more.
    this.#frozenViews.clear();
    this.#state = freezeEntries(state);
    this.#changed.clear();
    this.#undo.clear();
    for (const subset of this.#subsets) this.#fill(subset);
  }

  #mark(path: readonly string[], how: 'inserted' | 'updated' | 'removed' = 'updated'): void {
    const key = pathKey(path);
    const seen = this.#changed.get(key);
    const removed = how === 'removed' || (seen?.removed ?? false);
    if (seen && how !== 'inserted') seen.removed = removed;
    else {
      this.#changed.delete(key);
      this.#changed.set(key, { path, removed });
    }
  }
}

function lookup(root: unknown, path: readonly string[]): { present: true; value: unknown } | { present: false } {
  let node = root;
  for (const step of path) {
    if (typeof node !== 'object' || node === null || !Object.hasOwn(node, step)) return { present: false };
    node = (node as Record<string, unknown>)[step];
  }
  return node === undefined ? { present: false } : { present: true, value: node };
}

/** Where a change may point: a collection entry, a charge total, a workspace change, a signing key, the scenario. */
function checkPath(path: readonly string[]): boolean {
  const [head, ...rest] = path;
  if ((COLLECTION_NAMES as readonly string[]).includes(head as string)) return rest.length === 1;
  if (head === 'charges')
    return (
      // ledger_chain: in a journal an earlier version left (the state check drops it).
      (rest.length === 1 && (rest[0] === 'count' || rest[0] === 'ledger_chain')) ||
      (rest.length === 2 && (rest[0] === 'by_client' || rest[0] === 'by_grant'))
    );
  if (head === 'workspace_changes' || head === 'keys') return rest.length === 1 && /^(0|[1-9]\d{0,8})$/.test(rest[0] as string);
  return head === 'scenario' && rest.length === 0;
}

/**
 * Applies changes as `Repository.drain` produced them to a plain state (a journal replayed on start). Throws on
 * a change that names no place a repository writes (the journal was not written by this version, or was edited).
 */
export function applyChanges(state: State, changes: readonly unknown[]): void {
  const root = state as unknown as Record<string, unknown>;
  for (const raw of changes) {
    if (
      !Array.isArray(raw) ||
      raw.length < 1 ||
      raw.length > 2 ||
      !Array.isArray(raw[0]) ||
      !raw[0].every((s) => typeof s === 'string') ||
      !checkPath(raw[0])
    ) {
      throw new Error(`not a change this version writes: ${JSON.stringify(raw).slice(0, 120)}`);
    }
    const path = raw[0];
    let node = root;
    for (const step of path.slice(0, -1)) {
      const next = node[step];
      if (typeof next !== 'object' || next === null) throw new Error(`change at ${path.join('.')}: ${step} is not there`);
      node = next as Record<string, unknown>;
    }
    const last = path[path.length - 1] as string;
    if (raw.length === 2) {
      if (Array.isArray(node) && Number(last) > node.length) throw new Error(`change at ${path.join('.')}: leaves a gap in the list`);
      setOwn(node, last, raw[1]);
    } else if (Array.isArray(node)) {
      throw new Error(`change at ${path.join('.')}: list entries are never removed`);
    } else {
      delete node[last];
    }
  }
}

/**
 * Freezes every entry of every table: entries are values, replaced on change (see Repository). Loaded entries are
 * frozen at their top level (a 100k-entry state would spend a tenth of a second more on the nested ones); what
 * `put` stores is frozen all through. Either way no code writes into an entry: the types say so.
 */
export function freezeEntries(state: State): State {
  for (const name of COLLECTION_NAMES) {
    const table = state[name] as Record<string, unknown>;
    for (const key in table) if (Object.hasOwn(table, key)) Object.freeze(table[key]);
  }
  for (const key of state.keys) frozen(key);
  for (const change of state.workspace_changes) frozen(change);
  if (state.scenario) frozen(state.scenario);
  return state;
}
