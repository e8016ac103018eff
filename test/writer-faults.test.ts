/**
 * The state writer under file faults it survives (issue 41, point 7): a rename that fails (the state file made
 * immutable, `chattr +i`). The writer runs in this process, and node:fs/promises is wrapped to inject the fault.
 */
import { mkdir, readdir, readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Repository } from '../src/core/state/repository.js';
import { emptyState, type State } from '../src/core/state/state.js';
import { journalFileFor } from '../src/store/state-files.js';
import { journalLine } from '../src/store/journal.js';
import { stateChunks } from '../src/store/state-text.js';
import { LOCK_LOST, StateWriter } from '../src/store/writer.js';
import { scratchDir } from './helpers/emulator.js';

const { faults } = vi.hoisted(() => ({
  /** The base name a rename onto fails, and with which code. */
  faults: { renameOnto: null as string | null, code: 'EPERM' },
}));

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const path = await import('node:path');
  const rename = async (from: string, to: string) => {
    if (faults.renameOnto !== null && path.basename(to) === faults.renameOnto)
      throw Object.assign(new Error(`${faults.code}: operation not permitted, rename '${from}' -> '${to}'`), { code: faults.code });
    return fs.rename(from, to);
  };
  return { ...fs, rename, default: { ...fs, rename } };
});

let writer: StateWriter | null = null;
afterEach(async () => {
  await writer?.close();
  faults.renameOnto = null;
});

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
    expect(journal.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual([1, 2]);
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
    const journal = (await readFile(journalFileFor(file), 'utf8')).trim().split('\n');
    expect(journal.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual([1, 2, 3]);
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
    const journal = (await readFile(journalFileFor(file), 'utf8')).trim().split('\n');
    expect(journal.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual([2]);
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
