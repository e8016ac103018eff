import type { ChargeEntry } from './charges.js';
import type { Repository } from './repository.js';
import type { State } from './state.js';

/**
 * The export of the state: the state file's text exactly as stored, and the ledger file's text for its charges (null:
 * none), a copy to read: a state saved before the charges moved into it (no `charge_ledger`) takes them from it. A
 * snapshot is an export saved under a name.
 */
export interface StateExport {
  state: string;
  ledger: string | null;
}

/**
 * Where the core's state lives. The core changes its state only through its Repository, and asks for a commit;
 * an adapter drains the repository's changes when it writes (group commit: every change made before it drains
 * is in that write), and `commit` resolves once they are durable. The core never knows which adapter it has.
 */
export interface StatePersistence {
  readonly location: string | null;
  /**
   * What a refusal of the state file `file` tells the user to do: move it away with the files stored beside it (the
   * store knows their names), or start elsewhere. Said in every such message, so that none leaves the user stuck.
   */
  resetAdvice(file: string): string;
  /** The shell command that moves `file` and the files stored beside it away together. */
  moveAwayCommand(file: string): string;
  /** The stored state, or null when there is none yet. */
  load(): Promise<State | null>;
  /** Resolves once every change made in `repo` so far (its charges among them) is durable. */
  commit(repo: Repository): Promise<void>;
  /** The committed charges, oldest first (from the state: what its last durable commit holds). */
  readCharges(): Promise<ChargeEntry[]>;
  /**
   * The state as it is at the call (every change made so far, which a commit asked for in the same turn makes
   * durable), once that commit is durable: its export. (Snapshots: `Core.exportState`.)
   */
  exportState(repo: Repository): Promise<StateExport>;
  /**
   * Makes `exported.state` the stored state, byte for byte and durably, between two writes (the ledger file is
   * written from it). `state` is what it parses to. `swap` runs before
   * any later write starts (it puts `state` in the repository, so nothing of the old state can be written after it).
   */
  importState(exported: StateExport, state: State, swap: () => void): Promise<void>;
  /** Waits for pending writes. */
  flush(): Promise<void>;
  /** Waits for pending writes, leaves the stored state complete at rest, and releases what the adapter holds. */
  close(): Promise<void>;
}

/** The text a state is stored as: compact JSON with a final newline (`jq .` reads it). */
export const stateText = (state: unknown): string => `${JSON.stringify(state)}\n`;
