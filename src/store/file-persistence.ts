import { Low } from 'lowdb';
import { ledgerFileFor } from '../core/charges.js';
import { parseState, type State } from '../core/state.js';
import type { StatePersistence, StoredState } from '../core/persistence.js';
import { DurableJsonFile } from './durable-json-file.js';
import { reconcileLedgerFile } from './ledger.js';

/** The charge ledger beside the state file: `state.json` → `state.charges.jsonl`. */
export { ledgerFileFor };

/** The state in one lowdb JSON file. Only one process may hold it at a time (see lock.ts). */
export class FilePersistence implements StatePersistence {
  readonly location: string;
  readonly #adapter: DurableJsonFile<State | null>;
  readonly #db: Low<State | null>;
  readonly #onNotice: ((line: string) => void) | undefined;

  /** `onNotice` hears what load repaired on its own (uncommitted ledger lines dropped), one line each. */
  constructor(file: string, options: { onNotice?: (line: string) => void } = {}) {
    this.location = file;
    this.#onNotice = options.onNotice;
    this.#adapter = new DurableJsonFile<State | null>(file, (text) => parseState(text, file), ledgerFileFor(file));
    this.#db = new Low<State | null>(this.#adapter, null);
  }

  async load(): Promise<State | null> {
    await this.#db.read();
    const state = this.#db.data;
    // The ledger must be this state's (else StateFileError, nothing touched); lines beyond the committed count were appended by a write that never completed: dropped.
    await reconcileLedgerFile(this.location, ledgerFileFor(this.location), state?.charges ?? null, this.#onNotice);
    return state;
  }

  save(state: State, ledger: string[] = []): Promise<void> {
    if (ledger.length > 0) this.#adapter.appendWithNextWrite(ledger.map((line) => `${line}\n`).join(''));
    this.#db.data = state;
    return this.#db.write();
  }

  async readStored(): Promise<StoredState> {
    const { text, ledger } = await this.#adapter.readBoth();
    return { state: text, ledger };
  }

  replaceStored(stored: StoredState, state: State, swap: () => void): Promise<void> {
    return this.#adapter.replaceBoth(stored.state, stored.ledger, state, () => {
      this.#db.data = state;
      swap();
    });
  }

  /** Between two writes: every line is committed, none is half written (a write appends before it renames the state). */
  readLedger(): Promise<string[]> {
    return this.#adapter.exclusive(() => this.#adapter.readLedger());
  }

  /** The lock was taken over: from now on nothing is written, and saves fail (see DurableJsonFile.abandon). */
  abandon(error: Error): void {
    this.#adapter.abandon(error);
  }

  flush(): Promise<void> {
    return this.#adapter.flush();
  }

  close(): Promise<void> {
    return this.#adapter.close();
  }
}
