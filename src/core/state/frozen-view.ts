import { COLLECTION_NAMES, type State } from './state.js';
import { liveTable, setOwn } from './tables.js';

/**
 * For a frozen view, per table (a collection, or `by_client` and `by_grant` of the charge totals): each key changed
 * since it was taken, with its value before the first of those changes (undefined: it had none).
 */
export type KeptValues = Map<string, Map<string, unknown>>;

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
  readonly #before: KeptValues;
  readonly #release: () => void;

  constructor(state: State, before: KeptValues = new Map(), release: () => void = () => undefined) {
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
