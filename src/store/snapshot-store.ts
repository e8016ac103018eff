import { createHash } from 'node:crypto';
import { chmod, mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { StateExport } from '../core/state/persistence.js';
import { writeFileDurably } from './durable-write.js';

/** Names people give snapshots: safe as file names everywhere, never a path. */
export const SNAPSHOT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** The state as it was created (from the scenario, else the fixtures); `reset` restores it. Not a valid SNAPSHOT_NAME. */
export const BASELINE = '_baseline';

/** One saved state: the state file's and the ledger's exact text, and the emulator clock at saving. */
export interface SnapshotRecord extends StateExport {
  name: string;
  /** Wall-clock time of saving (ISO). */
  saved_at: string;
  /** The emulator's clock at saving; a manual clock is set back to `now` on restore. */
  clock: { mode: 'system' | 'manual'; now: number };
}

/** Where snapshots are kept: files beside the state file, or memory for an in-memory emulator. */
export interface SnapshotStore {
  /** The directory, or null in memory. */
  readonly location: string | null;
  /** Saves (replacing one of the same name); returns its file, or null in memory. */
  put(record: SnapshotRecord): Promise<string | null>;
  /** The snapshot, or null if there is none of that name. Throws SnapshotFileError if its file is damaged. */
  get(name: string): Promise<SnapshotRecord | null>;
  /** Every snapshot, baseline included, by name. Damaged files are left out. */
  list(): Promise<SnapshotRecord[]>;
  /** The file a snapshot is (or would be) kept in, or null in memory. */
  fileOf(name: string): string | null;
}

export class SnapshotFileError extends Error {
  constructor(
    readonly file: string,
    message: string,
  ) {
    super(message);
  }
}

export const textSha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** `state.json` → `state.snapshots/`, beside it: two state files in one directory keep their snapshots apart. */
export const snapshotDirFor = (stateFile: string): string => `${stateFile.replace(/\.json$/i, '')}.snapshots`;

export class MemorySnapshotStore implements SnapshotStore {
  readonly location = null;
  readonly #records = new Map<string, SnapshotRecord>();
  async put(record: SnapshotRecord): Promise<null> {
    this.#records.set(record.name, { ...record, clock: { ...record.clock } });
    return null;
  }
  async get(name: string): Promise<SnapshotRecord | null> {
    const record = this.#records.get(name);
    return record ? { ...record, clock: { ...record.clock } } : null;
  }
  async list(): Promise<SnapshotRecord[]> {
    return [...this.#records.values()].sort((a, b) => a.name.localeCompare(b.name));
  }
  fileOf(): null {
    return null;
  }
}

const FORMAT = 'agent-access snapshot';

/**
 * One JSON file a snapshot (`<dir>/<name>.json`, 0600, the directory 0700), written durably. It carries the
 * SHA-256 of both texts, checked on every read: a damaged or hand-edited snapshot is refused, never restored.
 */
export class FileSnapshotStore implements SnapshotStore {
  constructor(readonly location: string) {}

  fileOf(name: string): string {
    return join(this.location, `${name}.json`);
  }

  async put(record: SnapshotRecord): Promise<string> {
    await mkdir(this.location, { recursive: true, mode: 0o700 });
    // mkdir leaves an existing directory's mode alone; these files hold the signing key and hashes.
    await chmod(this.location, 0o700);
    const file = this.fileOf(record.name);
    const body = {
      format: FORMAT,
      version: 1,
      name: record.name,
      saved_at: record.saved_at,
      clock: record.clock,
      state_sha256: textSha256(record.state),
      ledger_sha256: record.ledger === null ? null : textSha256(record.ledger),
      state: record.state,
      ledger: record.ledger,
    };
    await writeFileDurably(file, `${JSON.stringify(body, null, 2)}\n`);
    return file;
  }

  async get(name: string): Promise<SnapshotRecord | null> {
    const file = this.fileOf(name);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new SnapshotFileError(
        file,
        `snapshot file ${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      );
    }
    return parseSnapshot(text, file, name);
  }

  async list(): Promise<SnapshotRecord[]> {
    let names: string[];
    try {
      names = await readdir(this.location);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw e;
    }
    const records: SnapshotRecord[] = [];
    for (const entry of names.sort()) {
      const name = entry.replace(/\.json$/, '');
      if (!entry.endsWith('.json') || (name !== BASELINE && !SNAPSHOT_NAME.test(name))) continue;
      const record = await this.get(name).catch(() => null);
      if (record) records.push(record);
    }
    return records;
  }
}

function parseSnapshot(text: string, file: string, name: string): SnapshotRecord {
  const bad = (what: string) =>
    new SnapshotFileError(file, `snapshot file ${file} is damaged (${what}); it was not restored. Save it again, or delete the file.`);
  let json: Record<string, unknown>;
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw bad(`not JSON: ${(e as Error).message}`);
  }
  if (typeof json !== 'object' || json === null || json.format !== FORMAT || json.version !== 1)
    throw bad('not an agent-access snapshot of version 1');
  const clock = json.clock as { mode?: unknown; now?: unknown } | undefined;
  if (typeof json.state !== 'string' || !(typeof json.ledger === 'string' || json.ledger === null) || typeof json.saved_at !== 'string')
    throw bad('missing state, ledger or saved_at');
  if (!clock || (clock.mode !== 'system' && clock.mode !== 'manual') || typeof clock.now !== 'number' || !Number.isFinite(clock.now))
    throw bad('missing clock');
  if (json.name !== name) throw bad(`it names itself ${JSON.stringify(json.name)}`);
  if (json.state_sha256 !== textSha256(json.state) || json.ledger_sha256 !== (json.ledger === null ? null : textSha256(json.ledger)))
    throw bad('its content does not match its SHA-256');
  return { name, saved_at: json.saved_at, clock: { mode: clock.mode, now: clock.now }, state: json.state, ledger: json.ledger };
}
