import { Low } from 'lowdb';
import { parseState, type State } from '../core/state.js';
import type { StatePersistence } from '../core/persistence.js';
import { DurableJsonFile } from './durable-json-file.js';

/** The state in one lowdb JSON file. Only one process may hold it at a time (see lock.ts). */
export class FilePersistence implements StatePersistence {
  readonly location: string;
  readonly #adapter: DurableJsonFile<State | null>;
  readonly #db: Low<State | null>;

  constructor(file: string) {
    this.location = file;
    this.#adapter = new DurableJsonFile<State | null>(file, (text) => parseState(text, file));
    this.#db = new Low<State | null>(this.#adapter, null);
  }

  async load(): Promise<State | null> {
    await this.#db.read();
    return this.#db.data;
  }

  save(state: State): Promise<void> {
    this.#db.data = state;
    return this.#db.write();
  }

  flush(): Promise<void> {
    return this.#adapter.flush();
  }

  close(): Promise<void> {
    return this.#adapter.close();
  }
}
