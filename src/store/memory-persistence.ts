import { Low, Memory } from 'lowdb';
import { ledgerText, type ChargeEntry } from '../core/state/charges.js';
import { stateText, type StatePersistence, type StateExport } from '../core/state/persistence.js';
import type { Repository } from '../core/state/repository.js';
import type { State } from '../core/state/state.js';
import { moveAwayCommand, resetAdvice } from './state-files.js';

/** The in-memory twin of FilePersistence (`--in-memory`, tests): lowdb's Memory adapter; nothing leaves the process. */
export class MemoryPersistence implements StatePersistence {
  readonly location = null;
  readonly resetAdvice = resetAdvice;
  readonly moveAwayCommand = moveAwayCommand;
  readonly #db: Low<State | null>;
  /** Charges up to this seq are committed. */
  #committed = 0;

  constructor(initial: State | null = null) {
    this.#db = new Low<State | null>(new Memory<State | null>(), null);
    this.#db.data = initial;
    this.#committed = initial?.charges.count ?? 0;
  }

  async load(): Promise<State | null> {
    return this.#db.data;
  }

  async commit(repo: Repository): Promise<void> {
    repo.drain();
    this.#db.data = repo.state as State;
    this.#committed = repo.state.charges.count;
    await this.#db.write();
  }

  async readCharges(): Promise<ChargeEntry[]> {
    return committedCharges(this.#db.data, this.#committed);
  }

  /** Serialised as the file adapter stores it, at the call. */
  async exportState(repo: Repository): Promise<StateExport> {
    const view = repo.frozenView();
    let state: State;
    try {
      state = view.toState();
    } finally {
      view.release();
    }
    await this.commit(repo);
    const ledger = ledgerText(committedCharges(state, state.charges.count));
    return { state: stateText(state), ledger: ledger === '' ? null : ledger };
  }

  async importState(_exported: StateExport, state: State, swap: () => void): Promise<void> {
    this.#db.data = state;
    this.#committed = state.charges.count;
    swap();
  }

  async flush(): Promise<void> {}
  async close(): Promise<void> {}
}

/** Charges 1 to `count` of `state` (entries never change once recorded: a later one has a higher seq). */
export function committedCharges(state: Pick<State, 'charge_ledger'> | null, count: number): ChargeEntry[] {
  const entries: ChargeEntry[] = [];
  for (let seq = 1; seq <= count; seq++) entries.push(state!.charge_ledger[String(seq)]!);
  return entries;
}
