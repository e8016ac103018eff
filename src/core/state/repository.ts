import type { PendingAction, WorkspaceChange } from './entities.js';
import { addAmount, type ChargeEntry } from './charges.js';
import type { IdempotencyRecord } from './idempotency.js';
import { frozen } from './immutable.js';
import { FrozenView, type KeptValues } from './frozen-view.js';
import { liveTable, setOwn } from './tables.js';
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
  readonly #frozenViews = new Set<KeptValues>();

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
    const before: KeptValues = new Map();
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
