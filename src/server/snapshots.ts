import { ManualClock } from '../core/state/clock.js';
import type { Core } from '../core/core.js';
import { ProblemError, StateFileError } from '../core/state/errors.js';
import {
  BASELINE,
  SNAPSHOT_NAME,
  SnapshotFileError,
  textSha256,
  type SnapshotRecord,
  type SnapshotStore,
} from '../store/snapshot-store.js';

/** What the admin API answers about a snapshot (never its content: that holds the signing key). */
export interface SnapshotInfo {
  name: string;
  saved_at: string;
  clock: { mode: 'system' | 'manual'; now: number; iso: string };
  /** Hex SHA-256 of the state file's and the ledger's exact text (null: no ledger file yet). */
  state_sha256: string;
  ledger_sha256: string | null;
  /** Lines of the charge ledger. */
  charges: number;
  /** Where it is kept; null in memory. */
  file: string | null;
}

export interface SnapshotList {
  snapshots: SnapshotInfo[];
  /** The state as it was created; `reset` returns to it. Null when this state predates snapshots. */
  baseline: SnapshotInfo | null;
  /** The snapshot directory; null for an in-memory emulator. */
  location: string | null;
}

/**
 * Saving and restoring the whole state of a running emulator: the state file and the charge ledger byte for byte,
 * the manual clock's time, and everything held in memory beside them (brought along by `reload`). One operation
 * at a time; requests keep being served, and a request in flight during a restore may be lost with the old state.
 */
export class Snapshots {
  readonly #core: Core;
  readonly #store: SnapshotStore;
  readonly #reload: () => void;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(core: Core, store: SnapshotStore, reload: () => void) {
    this.#core = core;
    this.#store = store;
    this.#reload = reload;
  }

  get location(): string | null {
    return this.#store.location;
  }

  #serial<T>(operation: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(operation, operation);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Saves the state as it is now under `name`, replacing a snapshot of that name. */
  save(name: string): Promise<SnapshotInfo> {
    checkName(name);
    return this.#serial(() => this.#save(name));
  }

  /** Records the state as created, for `reset`. Called once, when the emulator created its state. */
  captureBaseline(): Promise<SnapshotInfo> {
    return this.#serial(() => this.#save(BASELINE));
  }

  async #save(name: string): Promise<SnapshotInfo> {
    const exported = await this.#core.exportState();
    const clock = this.#core.clock;
    const record: SnapshotRecord = {
      name,
      saved_at: new Date().toISOString(),
      clock: { mode: clock instanceof ManualClock ? 'manual' : 'system', now: clock.now() },
      ...exported,
    };
    const file = await this.#store.put(record);
    return infoOf(record, file);
  }

  /** Brings back the state saved under `name`: 404 if there is none. */
  restore(name: string): Promise<SnapshotInfo> {
    checkName(name);
    return this.#serial(async () => {
      const record = await this.#get(name);
      if (!record)
        throw new ProblemError(
          'snapshot_not_found',
          `no snapshot "${name}"; \`agent-access snapshot list\` (GET /_admin/snapshots) shows the saved ones`,
        );
      return this.#apply(record);
    });
  }

  /** Brings back the state as it was created (from the scenario, else the fixtures). */
  reset(): Promise<SnapshotInfo> {
    return this.#serial(async () => {
      const record = await this.#get(BASELINE);
      if (!record) {
        const where = this.#store.fileOf(BASELINE);
        throw new ProblemError(
          'snapshot_baseline_missing',
          `this state has no baseline to reset to${where ? ` (${where} is missing)` : ''}: it was created before snapshots existed, or ` +
            `the file was removed. Save a snapshot and restore that instead, or start with a new state file.`,
        );
      }
      return this.#apply(record);
    });
  }

  async list(): Promise<SnapshotList> {
    const records = await this.#store.list();
    const info = (r: SnapshotRecord) => infoOf(r, this.#store.fileOf(r.name));
    const baseline = records.find((r) => r.name === BASELINE);
    return {
      snapshots: records.filter((r) => r.name !== BASELINE).map(info),
      baseline: baseline ? info(baseline) : null,
      location: this.#store.location,
    };
  }

  async #get(name: string): Promise<SnapshotRecord | null> {
    try {
      return await this.#store.get(name);
    } catch (e) {
      if (e instanceof SnapshotFileError) throw new ProblemError('snapshot_damaged', e.message);
      throw e;
    }
  }

  async #apply(record: SnapshotRecord): Promise<SnapshotInfo> {
    const file = this.#store.fileOf(record.name);
    const label = file ?? `snapshot "${record.name}"`;
    try {
      await this.#core.importState(record, label, () => {
        // The time it was saved at: tokens, codes and jobs stand where they stood.
        if (this.#core.clock instanceof ManualClock) this.#core.clock.set(record.clock.now);
        this.#reload();
        this.#core.events.emit('state.restored', { snapshot: record.name, reset: record.name === BASELINE });
      });
    } catch (e) {
      if (e instanceof StateFileError)
        throw new ProblemError('snapshot_damaged', `${e.message.replace(/ Nothing was changed\..*$/s, '')}; nothing was restored`);
      throw e;
    }
    return infoOf(record, file);
  }
}

function checkName(name: string): void {
  if (!SNAPSHOT_NAME.test(name)) {
    throw new ProblemError(
      'invalid_snapshot_name',
      `snapshot name ${JSON.stringify(name)} is not allowed: 1–64 letters, digits, ".", "_" or "-", starting with a letter or digit`,
    );
  }
}

function infoOf(record: SnapshotRecord, file: string | null): SnapshotInfo {
  return {
    name: record.name,
    saved_at: record.saved_at,
    clock: { ...record.clock, iso: new Date(record.clock.now).toISOString() },
    state_sha256: textSha256(record.state),
    ledger_sha256: record.ledger === null ? null : textSha256(record.ledger),
    charges: record.ledger === null ? 0 : record.ledger.split('\n').filter((line) => line.length > 0).length,
    file,
  };
}
