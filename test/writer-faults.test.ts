/**
 * The state writer under file faults it survives (issue 41, point 7): a rename that fails (the state file made
 * immutable, `chattr +i`), a journal that cannot be checked, written or cut back. The writer runs in this process,
 * and node:fs and node:fs/promises are wrapped to inject the faults.
 */
import { mkdir, readdir, readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Repository } from '../src/core/state/repository.js';
import { emptyState, type State } from '../src/core/state/state.js';
import { FilePersistence } from '../src/store/file-persistence.js';
import { journalFileFor } from '../src/store/state-files.js';
import { journalLine } from '../src/store/journal.js';
import { stateChunks } from '../src/store/state-text.js';
import { JOURNAL_STUCK, LOCK_LOST, StateWriter } from '../src/store/writer.js';
import { scratchDir } from './helpers/emulator.js';

const JOURNAL = 'state.journal.jsonl';

const { faults } = vi.hoisted(() => ({
  faults: {
    /** The base name a rename onto fails, and with which code. */
    renameOnto: null as string | null,
    code: 'EPERM',
    /** The base name whose stat fails with EIO (not a missing file: the check cannot tell). */
    statFails: null as string | null,
    /** The journal's next write stops halfway with EIO; its truncate fails with EIO. */
    journalWriteFails: false,
    journalTruncateFails: false,
  },
}));

const eio = (what: string) => Object.assign(new Error(`EIO: i/o error, ${what}`), { code: 'EIO' });

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const path = await import('node:path');
  const statSync = ((file: string, ...rest: []) => {
    if (faults.statFails !== null && path.basename(file) === faults.statFails) throw eio(`stat '${file}'`);
    return fs.statSync(file, ...rest);
  }) as typeof fs.statSync;
  return { ...fs, statSync, default: { ...fs, statSync } };
});

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const path = await import('node:path');
  const rename = async (from: string, to: string) => {
    if (faults.renameOnto !== null && path.basename(to) === faults.renameOnto)
      throw Object.assign(new Error(`${faults.code}: operation not permitted, rename '${from}' -> '${to}'`), { code: faults.code });
    return fs.rename(from, to);
  };
  // The journal's handle, with its write and truncate faulted on demand.
  const open = async (...args: Parameters<typeof fs.open>) => {
    const handle = await fs.open(...args);
    if (path.basename(String(args[0])) !== JOURNAL) return handle;
    return new Proxy(handle, {
      get(target, name) {
        if (name === 'write')
          return async (buffer: Buffer, offset: number, length: number) => {
            if (!faults.journalWriteFails) return target.write(buffer, offset, length);
            await target.write(buffer, offset, Math.floor(length / 2));
            throw eio('write');
          };
        if (name === 'truncate')
          return async (length: number) => {
            if (faults.journalTruncateFails) throw eio('ftruncate');
            return target.truncate(length);
          };
        const value = Reflect.get(target, name) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
  };
  return { ...fs, rename, open, default: { ...fs, rename, open } };
});

let writer: StateWriter | null = null;
afterEach(async () => {
  await writer?.close();
  Object.assign(faults, { renameOnto: null, statFails: null, journalWriteFails: false, journalTruncateFails: false });
});

const journalSeqs = async (file: string) =>
  (await readFile(journalFileFor(file), 'utf8'))
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as { seq: number }).seq);

const stateOf = (repo: Repository) => repo.state as unknown as State;

const commit = (repo: Repository, seq: number) => writer!.commit(journalLine({ seq, changes: repo.drain().changes }));

async function* pieces(text: string) {
  yield text;
}

const charge = (repo: Repository, n: number) =>
  repo.recordCharge({
    at: Date.UTC(2026, 2, 1) + n,
    client_id: 'client_a',
    grant_id: 'grant_a',
    route: 'POST /chat/ask',
    amount: 1,
    unit: 'AKh',
    idempotency_key: null,
  });

async function opened(): Promise<{ file: string; repo: Repository }> {
  const file = join(await scratchDir(), 'state.json');
  writer = new StateWriter(file, journalFileFor(file));
  await writer.open(null, null);
  return { file, repo: new Repository(emptyState()) };
}

describe('the state writer when a compaction fails (issue 41.7)', () => {
  it('41.7: a compaction whose rename over the state file fails removes its temp file, and the journal takes the next commits', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    await commit(repo, 1);
    faults.renameOnto = 'state.json';
    await expect(writer!.compaction(pieces([...stateChunks(stateOf(repo), 1)].join('')))).rejects.toThrow(/EPERM/);
    // The temp file is gone; the writer goes on appending to the journal it had.
    expect((await readdir(join(file, '..'))).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    charge(repo, 2);
    await commit(repo, 2);
    const journal = (await readFile(journalFileFor(file), 'utf8')).trim().split('\n');
    expect(await journalSeqs(file)).toEqual([1, 2]);
    // Both charges are in those records (the ledger file is written from them).
    expect(
      journal.map((line) =>
        (JSON.parse(line) as { changes: unknown[][] }).changes.some(([path]) => (path as string[])[0] === 'charge_ledger'),
      ),
    ).toEqual([true, true]);
  });

  it('41.7: a compaction whose journal rewrite cannot be renamed keeps the journal it had, and the next commits go on into it', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    await commit(repo, 1);
    const text = [...stateChunks(stateOf(repo), 1)].join('');
    // A record after the compaction began: the journal is rewritten to hold it, through a temp file and a rename.
    charge(repo, 2);
    const compaction = writer!.compaction(
      (async function* () {
        yield text;
        faults.renameOnto = 'state.journal.jsonl';
        await commit(repo, 2);
      })(),
    );
    await expect(compaction).rejects.toThrow(/EPERM/);
    faults.renameOnto = null;
    charge(repo, 3);
    await commit(repo, 3);
    expect(await journalSeqs(file)).toEqual([1, 2, 3]);
  });
});

describe('a compaction that ends after its writer may no longer write', () => {
  it('a compaction still writing when the writer closes renames nothing: the state file stays, its temp file goes', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    await commit(repo, 1);
    const text = [...stateChunks(stateOf(repo), 1)].join('');
    await writer!.compaction(pieces(text));
    const before = await readFile(file, 'utf8');
    charge(repo, 2);
    await commit(repo, 2);
    let closed!: Promise<void>;
    const compaction = writer!.compaction(
      (async function* () {
        yield [...stateChunks(stateOf(repo), 2)].join('');
        // serve stops (a lost lock, a signal) while the temp file is being written.
        closed = writer!.close();
      })(),
    );
    await expect(compaction).rejects.toThrow(/closed/);
    await closed;
    expect(await readFile(file, 'utf8')).toBe(before);
    expect((await readdir(join(file, '..'))).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    // The journal keeps record 2, which the state file does not hold.
    expect(await journalSeqs(file)).toEqual([2]);
    writer = null;
  });

  it('a compaction whose lock was taken over meanwhile renames nothing over the files (LOCK_LOST)', async () => {
    const file = join(await scratchDir(), 'state.json');
    const lockDir = `${file}.lock`;
    await mkdir(lockDir, { recursive: true });
    writer = new StateWriter(file, journalFileFor(file));
    await writer.open(null, lockDir);
    const repo = new Repository(emptyState());
    charge(repo, 1);
    await commit(repo, 1);
    const compaction = writer.compaction(
      (async function* () {
        yield [...stateChunks(stateOf(repo), 1)].join('');
        // Another process took the files over: it removed the lock and made its own.
        await rmdir(lockDir);
        await mkdir(lockDir);
      })(),
    );
    await expect(compaction).rejects.toMatchObject({ code: LOCK_LOST });
    await expect(readFile(file, 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });
    expect((await readdir(join(file, '..'))).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });
});

describe('a commit that is refused leaves nothing of its record behind (the persistence numbers the next one the same)', () => {
  it('a journal whose check after the append fails (EIO, not a missing file): the record is cut off again, and the next one takes its number', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    await commit(repo, 1);
    charge(repo, 2);
    faults.statFails = JOURNAL;
    const refused = repo.drain().changes;
    await expect(writer!.commit(journalLine({ seq: 2, changes: refused }))).rejects.toMatchObject({ code: 'EIO' });
    faults.statFails = null;
    await writer!.commit(journalLine({ seq: 2, changes: refused }));
    expect(await journalSeqs(file)).toEqual([1, 2]);
  });

  it('a write that fails halfway and cannot be cut back: nothing more is appended after the torn record', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    await commit(repo, 1);
    const acknowledged = await readFile(journalFileFor(file), 'utf8');
    charge(repo, 2);
    const refused = repo.drain().changes;
    Object.assign(faults, { journalWriteFails: true, journalTruncateFails: true });
    await expect(writer!.commit(journalLine({ seq: 2, changes: refused }))).rejects.toMatchObject({
      code: JOURNAL_STUCK,
      message: expect.stringMatching(/could not be cut back after a failed write \(EIO: i\/o error, write; then EIO/),
    });
    Object.assign(faults, { journalWriteFails: false, journalTruncateFails: false });
    await expect(writer!.commit(journalLine({ seq: 2, changes: refused }))).rejects.toMatchObject({ code: JOURNAL_STUCK });
    const journal = await readFile(journalFileFor(file), 'utf8');
    expect(journal.startsWith(acknowledged)).toBe(true);
    // Half of the refused record, and no whole record after it.
    expect(journal.slice(acknowledged.length)).not.toContain('\n');
  });

  it('through the persistence: its requests fail, nothing more is acknowledged, and serve is told to stop (JOURNAL_STUCK)', async () => {
    const file = join(await scratchDir(), 'state.json');
    const lost: Error[] = [];
    const persistence = new FilePersistence(file, { onLost: (e) => lost.push(e) });
    const repo = new Repository((await persistence.load()) ?? emptyState());
    charge(repo, 1);
    await persistence.commit(repo);
    Object.assign(faults, { journalWriteFails: true, journalTruncateFails: true });
    charge(repo, 2);
    await expect(persistence.commit(repo)).rejects.toMatchObject({ code: JOURNAL_STUCK });
    expect(repo.state.charges.count).toBe(1);
    expect(lost).toEqual([
      expect.objectContaining({
        code: JOURNAL_STUCK,
        message: expect.stringMatching(/stopped acknowledging writes .*the journal ends with a refused record that could not be cut off/),
      }),
    ]);
    Object.assign(faults, { journalWriteFails: false, journalTruncateFails: false });
    charge(repo, 3);
    await expect(persistence.commit(repo)).rejects.toThrow(/stopped acknowledging writes/);
    await persistence.close().catch(() => undefined);
  });
});

describe('a compaction of a state loaded with its journal', () => {
  it('keeps in the journal only what was appended after it began, not the records the new state file holds', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    await commit(repo, 1);
    charge(repo, 2);
    await commit(repo, 2);
    // A new start: the journal is on disk, replayed, and not opened again until the first commit.
    await writer!.close();
    writer = new StateWriter(file, journalFileFor(file));
    await writer.open(null, null);
    const text = [...stateChunks(stateOf(repo), 2)].join('');
    charge(repo, 3);
    await writer.compaction(
      (async function* () {
        yield text;
        await commit(repo, 3);
      })(),
    );
    expect(await journalSeqs(file)).toEqual([3]);
  });
});
