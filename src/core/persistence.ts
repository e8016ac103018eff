import type { State } from './state.js';

/** The state file's text and the charge ledger's text exactly as stored (`ledger` null: no ledger file yet). */
export interface StoredState {
  state: string;
  ledger: string | null;
}

/**
 * Where the core's state lives. `save` resolves once the given state is durable; adapters may
 * coalesce concurrent saves into one write (group commit). The core never knows which adapter it has.
 */
export interface StatePersistence {
  readonly location: string | null;
  load(): Promise<State | null>;
  /** Makes the state durable, with `ledger` lines appended to the charge ledger before it (same write). */
  save(state: State, ledger?: string[]): Promise<void>;
  /** The committed lines of the charge ledger, oldest first. */
  readLedger(): Promise<string[]>;
  /**
   * The stored state and ledger, byte for byte, as one consistent pair: once every save asked for before the call
   * is durable, and before any later one starts. (Snapshots: `Core.exportStored`.)
   */
  readStored(): Promise<StoredState>;
  /**
   * Makes `stored` the stored state and ledger, byte for byte and durably, between two saves. `state` is what
   * `stored.state` parses to: later saves start from it. `swap` runs before any later save starts (it swaps the
   * core's state, so nothing of the old state can be written after the new one).
   */
  replaceStored(stored: StoredState, state: State, swap: () => void): Promise<void>;
  /** Waits for pending writes. */
  flush(): Promise<void>;
  /** Waits for pending writes and releases what the adapter holds. */
  close(): Promise<void>;
}

/** The in-memory twin: nothing leaves the process. */
export class MemoryPersistence implements StatePersistence {
  readonly location = null;
  #state: State | null;
  constructor(initial: State | null = null) {
    this.#state = initial;
  }
  async load(): Promise<State | null> {
    return this.#state;
  }
  #ledger: string[] = [];
  async save(state: State, ledger: string[] = []): Promise<void> {
    this.#state = state;
    this.#ledger.push(...ledger);
  }
  async readLedger(): Promise<string[]> {
    return [...this.#ledger];
  }
  /** Serialised as the file adapter writes it, at the call: called in the same turn as a save, it is that save. */
  readStored(): Promise<StoredState> {
    const stored = { state: `${JSON.stringify(this.#state)}\n`, ledger: this.#ledger.length > 0 ? this.#ledger.map((line) => `${line}\n`).join('') : null };
    return Promise.resolve(stored);
  }
  async replaceStored(stored: StoredState, state: State, swap: () => void): Promise<void> {
    this.#state = state;
    this.#ledger = (stored.ledger ?? '').split('\n').filter((line) => line.length > 0);
    swap();
  }
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}
