import type { State } from './state.js';

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
  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}
