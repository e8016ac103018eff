import { Low, Memory } from 'lowdb';
import { stateText, type StatePersistence, type StoredState } from '../core/persistence.js';
import type { Repository } from '../core/repository.js';
import type { State } from '../core/state.js';

/** The in-memory twin of FilePersistence (`--in-memory`, tests): lowdb's Memory adapter; nothing leaves the process. */
export class MemoryPersistence implements StatePersistence {
  readonly location = null;
  readonly #db: Low<State | null>;
  #ledger: string[] = [];

  constructor(initial: State | null = null) {
    this.#db = new Low<State | null>(new Memory<State | null>(), null);
    this.#db.data = initial;
  }

  async load(): Promise<State | null> {
    return this.#db.data;
  }

  async commit(repo: Repository): Promise<void> {
    const { ledger } = repo.drain();
    this.#ledger.push(...ledger);
    this.#db.data = repo.state as State;
    await this.#db.write();
  }

  async readLedger(): Promise<string[]> {
    return [...this.#ledger];
  }

  /** Serialised as the file adapter stores it, at the call. */
  async readStored(repo: Repository): Promise<StoredState> {
    const snapshot = repo.snapshot();
    let state: State;
    try {
      state = snapshot.toState();
    } finally {
      snapshot.release();
    }
    await this.commit(repo);
    const lines = this.#ledger.slice(0, state.charges.count);
    return { state: stateText(state), ledger: lines.length > 0 ? lines.map((line) => `${line}\n`).join('') : null };
  }

  async replaceStored(stored: StoredState, state: State, swap: () => void): Promise<void> {
    this.#db.data = state;
    this.#ledger = (stored.ledger ?? '').split('\n').filter((line) => line.length > 0);
    swap();
  }

  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}
