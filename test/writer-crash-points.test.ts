/**
 * kill -9 after any one of the state writer's file operations (docs/storage.md). A commit, a compaction with commits in
 * its middle and a snapshot restore are each cut short after their first, second, … operation in turn, and a start
 * on what is left must succeed with every acknowledged charge and record. The writer runs in this process, and
 * node:fs/promises is wrapped so that from the chosen operation on nothing more reaches the disk, as when the process
 * dies there; the start then reads the files as serve does. Where test/crash-consistency.test.ts kills a server at
 * random moments, this reaches every moment of these three, the rare ones too.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { ledgerText } from '../src/core/state/charges.js';
import { Repository } from '../src/core/state/repository.js';
import { emptyState, type State } from '../src/core/state/state.js';
import { journalFileFor, ledgerFileFor } from '../src/store/state-files.js';
import { FilePersistence } from '../src/store/file-persistence.js';
import { journalLine } from '../src/store/journal.js';
import { stateChunks, withJournalSeq } from '../src/store/state-text.js';
import { StateWriter } from '../src/store/writer.js';
import { scratchDir } from './helpers/emulator.js';

/** The operation the process dies at (1 = the first after arming), how many have run, and what a dead process's calls throw. */
const { crash, Crash } = vi.hoisted(() => ({
  crash: { armed: false, at: Infinity, count: 0, dead: false },
  Crash: class Crash extends Error {},
}));

vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  /** Counts a call that changes what is on disk; a dead process's calls fail. */
  const step = (name: string) => {
    if (!crash.armed) return;
    if (crash.dead || ++crash.count >= crash.at) {
      crash.dead = true;
      throw new Crash(`the process died at ${name}`);
    }
  };
  const wrap =
    <A extends unknown[], R>(name: string, fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      step(name);
      return fn(...args);
    };
  const open = async (...args: Parameters<typeof fs.open>) => {
    // Opening a file only to read it (or a folder to sync it) changes nothing.
    const flags = args[1];
    if (!(flags === undefined || flags === 'r' || (typeof flags === 'number' && (flags & 3) === fs.constants.O_RDONLY))) step('open');
    const handle = await fs.open(...args);
    for (const method of ['write', 'writeFile', 'datasync', 'sync', 'truncate'] as const) {
      const original = (handle[method] as (...a: unknown[]) => Promise<unknown>).bind(handle);
      Object.assign(handle, { [method]: wrap(method, original) });
    }
    return handle;
  };
  const wrapped = { open, rename: wrap('rename', fs.rename), rm: wrap('rm', fs.rm), mkdir: wrap('mkdir', fs.mkdir) };
  return { ...fs, ...wrapped, default: { ...fs, ...wrapped } };
});

const T0 = Date.UTC(2026, 2, 1, 9);

const stateOf = (repo: Repository) => repo.state as unknown as State;

/** Files as a clean stop leaves them: the state file (with `journal_seq`), the ledger written from it, no journal. */
async function cleanStop(file: string, state: State, seq: number) {
  await writeFile(file, [...stateChunks(state, seq)].join(''), { mode: 0o600 });
  if (state.charges.count > 0) await writeFile(ledgerFileFor(file), ledgerText(Object.values(state.charge_ledger)), { mode: 0o600 });
}

/** A charge of 1 AKh to one client, through the repository as the core records it. */
const charge = (repo: Repository, n: number) =>
  repo.recordCharge({
    at: T0 + n,
    client_id: 'client_a',
    grant_id: 'grant_a',
    route: 'POST /research',
    amount: 1,
    unit: 'AKh',
    idempotency_key: `key-${n}`,
  });

/** Appends the repository's changes since the last commit as record `seq`, as FilePersistence does. */
const commit = (writer: StateWriter, repo: Repository, seq: number) => writer.commit(journalLine({ seq, changes: repo.drain().changes }));

/** What a scenario does with the writer; `ack(n)` once a commit with n charges in all is acknowledged. */
type Run = (writer: StateWriter, ack: (charges: number) => void) => Promise<void>;

/** The repository of a state of `n` charges, all committed. */
function charged(n: number): { repo: Repository } {
  const repo = new Repository(emptyState());
  for (let i = 1; i <= n; i++) charge(repo, i);
  repo.drain();
  return { repo };
}

/**
 * Runs `scenario` with the process dying at each file operation in turn, then once whole; after each, a start on
 * the files must succeed, with at least the acknowledged charges and at most those allowed, and the ledger file
 * written from exactly the charges the state holds.
 */
async function everyCrashPoint(scenario: (file: string) => Promise<{ run: Run; before: number; allowed: number[] }>): Promise<number> {
  for (let at = 1; ; at++) {
    const file = join(await scratchDir(), 'state.json');
    // `allowed` is read once the run ended: it may depend on how far the run got.
    const outcome = await scenario(file);
    let acknowledged = outcome.before;
    let died = false;
    const writer = new StateWriter(file, journalFileFor(file));
    Object.assign(crash, { armed: true, at, count: 0, dead: false });
    try {
      await outcome.run(writer, (n) => (acknowledged = n));
    } catch (e) {
      // Whatever fails once the process is dead fails of its death (the writer may report it in an error of its own).
      if (!crash.dead) throw e;
      died = true;
    } finally {
      // Still dead: what the writer would clean up on its way out never reaches the disk.
      await writer.close();
      crash.armed = false;
    }
    const notices: string[] = [];
    const persistence = new FilePersistence(file, { onNotice: (line) => notices.push(line) });
    const state = await persistence.load().catch((e: unknown) => {
      throw new Error(`cut short at file operation ${at}: the next start failed: ${(e as Error).message}`);
    });
    await persistence.close();
    const count = state?.charges.count ?? 0;
    const where = `cut short at file operation ${at} (${acknowledged} charges acknowledged; notices: ${JSON.stringify(notices)})`;
    expect(outcome.allowed, where).toContain(count);
    expect(count, where).toBeGreaterThanOrEqual(acknowledged);
    const ledger = (await readFile(ledgerFileFor(file), 'utf8').catch(() => '')).split('\n').filter(Boolean);
    expect(
      ledger.map((line) => (JSON.parse(line) as { seq: number }).seq),
      where,
    ).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    if (!died) return at - 1;
  }
}

/** A compaction's text in two pieces, with `between` run between them (commits go on during a compaction). */
async function* twoPieces(text: string, between: () => Promise<void>) {
  yield text.slice(0, text.length >> 1);
  await between();
  yield text.slice(text.length >> 1);
}

describe('the state writer cut short after any file operation (kill -9)', () => {
  it('a commit with charges after a compaction removed the journal: its charges are in its journal record, so a crash at any point keeps every acknowledged one, and the next start writes the ledger file from the state', async () => {
    const operations = await everyCrashPoint(async (file) => {
      const { repo } = charged(2);
      await cleanStop(file, stateOf(repo), 5);
      charge(repo, 3);
      const run: Run = async (writer, ack) => {
        await writer.open(null, null);
        await commit(writer, repo, 6);
        ack(3);
      };
      return { run, before: 2, allowed: [2, 3] };
    });
    // mkdir, the journal made and its folder synced, the record's append and sync.
    expect(operations).toBeGreaterThanOrEqual(5);
  });

  it('a compaction with commits before, during and after it: every acknowledged charge survives a crash at any point, and the journal keeps the records newer than the new state file', async () => {
    const scenario = async (file: string) => {
      const { repo } = charged(2);
      await cleanStop(file, stateOf(repo), 5);
      const run: Run = async (writer, ack) => {
        await writer.open(null, null);
        charge(repo, 3);
        await commit(writer, repo, 6);
        ack(3);
        // The state file the compaction writes: the state as of record 6.
        const base = [...stateChunks(stateOf(repo), 6)].join('');
        await writer.compaction(
          twoPieces(base, async () => {
            charge(repo, 4);
            await commit(writer, repo, 7);
            ack(4);
          }),
        );
        charge(repo, 5);
        await commit(writer, repo, 8);
        ack(5);
      };
      return { run, before: 2, allowed: [2, 3, 4, 5] };
    };
    const operations = await everyCrashPoint(scenario);
    expect(operations).toBeGreaterThanOrEqual(15);

    // Whole, the state file holds record 6 and the journal exactly records 7 and 8.
    const file = join(await scratchDir(), 'state.json');
    const { run } = await scenario(file);
    const writer = new StateWriter(file, journalFileFor(file));
    await run(writer, () => undefined);
    await writer.close();
    expect((JSON.parse(await readFile(file, 'utf8')) as { journal_seq: number }).journal_seq).toBe(6);
    const journal = (await readFile(journalFileFor(file), 'utf8')).trim().split('\n');
    expect(journal.map((line) => (JSON.parse(line) as { seq: number }).seq)).toEqual([7, 8]);
  });

  it('a snapshot restore after a compaction removed the journal: a crash at any point leaves the state before or the state restored, and the next start takes it and writes the ledger file from it', async () => {
    const operations = await everyCrashPoint(async (file) => {
      // The snapshot: two charges; since then a third, and a clean stop (no journal).
      const { repo } = charged(2);
      const stored = [...stateChunks(stateOf(repo), 0)].join('');
      charge(repo, 3);
      repo.drain();
      await cleanStop(file, stateOf(repo), 6);
      let restored = false;
      const run: Run = async (writer) => {
        await writer.open(null, null);
        await writer.replace(withJournalSeq(stored, 6));
        restored = true;
      };
      // Whole, the restore leaves two charges; cut short, either.
      return {
        run,
        before: 2,
        get allowed() {
          return restored ? [2] : [2, 3];
        },
      };
    });
    // mkdir, the state file's temp made, written, synced, renamed and its folder synced, the journal's removal.
    expect(operations).toBeGreaterThanOrEqual(7);
  });
});
