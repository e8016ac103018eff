/**
 * The state writer under file faults it survives (issue 41, point 7): a rename that fails (the state file made
 * immutable, `chattr +i`) or a write that fails. The writer's message handler runs in this process, and node:fs is
 * wrapped to inject the fault and to keep count of descriptors: a descriptor closed twice is refused here (EBADF)
 * rather than closed, since in serve the second close hits whatever the main thread opened under that number since
 * (a socket), which aborted the process.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Repository } from '../src/core/state/repository.js';
import { emptyState, type State } from '../src/core/state/state.js';
import { journalFileFor } from '../src/store/state-files.js';
import { journalLine } from '../src/store/journal.js';
import { stateChunks } from '../src/store/state-text.js';
import { handle, type WriterMessage } from '../src/store/state-writer.js';
import { scratchDir } from './helpers/emulator.js';

const { faults, fds } = vi.hoisted(() => ({
  /** The base name a rename onto fails, and with which code. */
  faults: { renameOnto: null as string | null, code: 'EPERM' },
  /** Descriptors open now, and every close of one that was not open. */
  fds: { open: new Set<number>(), doubleCloses: [] as number[] },
}));

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  const path = await import('node:path');
  const wrapped = {
    openSync: (...args: Parameters<typeof fs.openSync>) => {
      const fd = fs.openSync(...args);
      fds.open.add(fd);
      return fd;
    },
    closeSync: (fd: number) => {
      if (!fds.open.delete(fd)) {
        fds.doubleCloses.push(fd);
        throw Object.assign(new Error(`EBADF: descriptor ${fd} closed twice`), { code: 'EBADF' });
      }
      fs.closeSync(fd);
    },
    renameSync: (from: string, to: string) => {
      if (faults.renameOnto !== null && path.basename(to) === faults.renameOnto)
        throw Object.assign(new Error(`${faults.code}: operation not permitted, rename '${from}' -> '${to}'`), { code: faults.code });
      fs.renameSync(from, to);
    },
  };
  return { ...fs, ...wrapped, default: { ...fs, ...wrapped } };
});

afterEach(() => {
  handle({ op: 'close', id: 0 });
  faults.renameOnto = null;
  fds.doubleCloses.length = 0;
});

const stateOf = (repo: Repository) => repo.state as unknown as State;

function commit(repo: Repository, seq: number): WriterMessage {
  const { changes } = repo.drain();
  return { op: 'commit', id: 0, record: journalLine({ seq, changes }) };
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
  handle({ op: 'open', id: 0, file, journal: journalFileFor(file), journalText: null });
  return { file, repo: new Repository(emptyState()) };
}

describe('the state writer when a compaction fails (issue 41.7)', () => {
  it('41.7: a compaction whose rename over the state file fails closes its temp file once, removes it, and the journal takes the next commits', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    handle(commit(repo, 1));
    faults.renameOnto = 'state.json';
    handle({ op: 'compaction-begin', id: 0 });
    handle({ op: 'compaction-chunk', text: [...stateChunks(stateOf(repo), 1)].join('') });
    expect(() => handle({ op: 'compaction-end', id: 0 })).toThrow(/EPERM/);
    expect(fds.doubleCloses).toEqual([]);
    // The temp file is gone; the writer goes on appending to the journal it had.
    const { readdir } = await import('node:fs/promises');
    expect((await readdir(join(file, '..'))).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    charge(repo, 2);
    expect(handle(commit(repo, 2))?.error).toBeUndefined();
    const journal = (await readFile(journalFileFor(file), 'utf8')).trim().split('\n');
    expect(journal.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual([1, 2]);
    // Both charges are in those records (the ledger file is the main thread's, written from them).
    expect(
      journal.map((line) =>
        (JSON.parse(line) as { changes: unknown[][] }).changes.some(([path]) => (path as string[])[0] === 'charge_ledger'),
      ),
    ).toEqual([true, true]);
  });

  it('41.7: a compaction whose journal rewrite cannot be renamed closes the rewrite once, and the writer keeps the journal it had', async () => {
    const { file, repo } = await opened();
    charge(repo, 1);
    handle(commit(repo, 1));
    handle({ op: 'compaction-begin', id: 0 });
    handle({ op: 'compaction-chunk', text: [...stateChunks(stateOf(repo), 1)].join('') });
    // A record after the snapshot: the journal is rewritten to hold it, through a temp file and a rename.
    charge(repo, 2);
    handle(commit(repo, 2));
    faults.renameOnto = 'state.journal.jsonl';
    expect(() => handle({ op: 'compaction-end', id: 0 })).toThrow(/EPERM/);
    expect(fds.doubleCloses).toEqual([]);
    charge(repo, 3);
    expect(handle(commit(repo, 3))?.error).toBeUndefined();
    const journal = (await readFile(journalFileFor(file), 'utf8')).trim().split('\n');
    expect(journal.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual([1, 2, 3]);
  });
});
