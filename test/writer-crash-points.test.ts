/**
 * kill -9 after any one of the state writer's file operations (docs/serve.md "How the state is stored"). A commit, a
 * compaction with commits in its middle and a snapshot restore are each cut short after their first, second, …
 * operation in turn, and a start on what is left must succeed with every acknowledged charge and record. The
 * writer's message handler runs in this process, and node:fs is wrapped so that from the chosen operation on
 * nothing more reaches the disk, as when the process dies there; the start then reads the files as serve does,
 * through the real writer thread. Where test/crash-consistency.test.ts kills a server at random moments, this
 * reaches every moment of these three, the rare ones too.
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
import { handle, type WriterMessage } from '../src/store/state-writer.js';
import { scratchDir } from './helpers/emulator.js';

/** The operation the process dies at (1 = the first after arming), how many have run, and what a dead process's calls throw. */
const { crash, Crash } = vi.hoisted(() => ({
  crash: { armed: false, at: Infinity, count: 0, dead: false },
  Crash: class Crash extends Error {},
}));

vi.mock('node:fs', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs')>();
  /** Every call that changes what is on disk; opening a file only to read it (or a folder to sync it) changes nothing. */
  const changes = (name: string, args: unknown[]) =>
    name !== 'openSync' ||
    !(args[1] === 'r' || args[1] === fs.constants.O_RDONLY || args[1] === (fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW));
  const wrapped: Record<string, unknown> = {};
  for (const name of ['openSync', 'writeSync', 'fdatasyncSync', 'fsyncSync', 'renameSync', 'unlinkSync', 'ftruncateSync', 'mkdirSync']) {
    const original = (fs as unknown as Record<string, (...args: unknown[]) => unknown>)[name]!;
    wrapped[name] = (...args: unknown[]) => {
      if (crash.armed && changes(name, args)) {
        if (crash.dead || ++crash.count >= crash.at) {
          crash.dead = true;
          throw new Crash(`the process died at ${name}`);
        }
      }
      return original(...args);
    };
  }
  return { ...fs, ...wrapped, default: { ...fs, ...wrapped } };
});

const T0 = Date.UTC(2026, 2, 1, 9);

const stateOf = (repo: Repository) => repo.state as unknown as State;

/** What a start must find: the state's charge count, within what is allowed; every acknowledged charge among them. */
interface Outcome {
  acknowledged: number;
  allowed: number[];
}

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

/** A commit message for the repository's changes since the last one, as FilePersistence makes it. */
function commit(repo: Repository, seq: number): WriterMessage {
  const { changes } = repo.drain();
  return { op: 'commit', id: 0, record: journalLine({ seq, changes }) };
}

const openMessage = (file: string): WriterMessage => ({
  op: 'open',
  id: 0,
  file,
  journal: journalFileFor(file),
  journalText: null,
});

/** The repository of a state of `n` charges, all committed. */
function charged(n: number): { repo: Repository } {
  const repo = new Repository(emptyState());
  for (let i = 1; i <= n; i++) charge(repo, i);
  repo.drain();
  return { repo };
}

/**
 * Runs `scenario` with the process dying at each file operation in turn, then once whole; after each, a start on
 * the files must succeed, with the outcome's charges, and the ledger file written from exactly the charges the state holds.
 */
async function everyCrashPoint(
  scenario: (file: string) => Promise<{ steps: WriterMessage[]; outcome: (acked: number) => Outcome }>,
): Promise<number> {
  for (let at = 1; ; at++) {
    const file = join(await scratchDir(), 'state.json');
    const { steps, outcome } = await scenario(file);
    let acked = 0;
    let died = false;
    Object.assign(crash, { armed: true, at, count: 0, dead: false });
    try {
      for (const step of steps) {
        handle(step);
        acked++;
      }
    } catch (e) {
      if (!(e instanceof Crash)) throw e;
      died = true;
    } finally {
      // Still dead: what the writer would clean up on its way out never reaches the disk.
      handle({ op: 'close', id: 0 });
      crash.armed = false;
    }
    const expected = outcome(acked);
    const notices: string[] = [];
    const persistence = new FilePersistence(file, { onNotice: (line) => notices.push(line) });
    const state = await persistence.load().catch((e: unknown) => {
      throw new Error(`cut short at file operation ${at} (after ${acked} steps): the next start failed: ${(e as Error).message}`);
    });
    await persistence.close();
    const count = state?.charges.count ?? 0;
    const where = `cut short at file operation ${at} (after ${acked} steps; notices: ${JSON.stringify(notices)})`;
    expect(expected.allowed, where).toContain(count);
    expect(count, where).toBeGreaterThanOrEqual(expected.acknowledged);
    const ledger = (await readFile(ledgerFileFor(file), 'utf8').catch(() => '')).split('\n').filter(Boolean);
    expect(
      ledger.map((line) => (JSON.parse(line) as { seq: number }).seq),
      where,
    ).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    if (!died) return at - 1;
  }
}

describe('the state writer cut short after any file operation (kill -9)', () => {
  it('a commit with charges after a compaction removed the journal: its charges are in its journal record, so a crash at any point keeps every acknowledged one, and the next start writes the ledger file from the state', async () => {
    const operations = await everyCrashPoint(async (file) => {
      const { repo } = charged(2);
      await cleanStop(file, stateOf(repo), 5);
      charge(repo, 3);
      return {
        steps: [openMessage(file), commit(repo, 6)],
        // Step 2 is the commit: acknowledged once it returned.
        outcome: (acked) => ({ acknowledged: acked >= 2 ? 3 : 2, allowed: [2, 3] }),
      };
    });
    // mkdir, the journal made and its folder synced, the record's append and sync.
    expect(operations).toBeGreaterThanOrEqual(5);
  });

  it('a compaction with commits before, during and after it: every acknowledged charge survives a crash at any point, and the journal keeps the records newer than the new state file', async () => {
    const operations = await everyCrashPoint(async (file) => {
      const { repo } = charged(2);
      await cleanStop(file, stateOf(repo), 5);
      charge(repo, 3);
      const first = commit(repo, 6);
      // The state file the compaction writes: the state as of record 6.
      const base = [...stateChunks(stateOf(repo), 6)].join('');
      charge(repo, 4);
      const during = commit(repo, 7);
      charge(repo, 5);
      const after = commit(repo, 8);
      const steps: WriterMessage[] = [
        openMessage(file),
        first,
        { op: 'compaction-begin', id: 0 },
        { op: 'compaction-chunk', text: base.slice(0, base.length >> 1) },
        during,
        { op: 'compaction-chunk', text: base.slice(base.length >> 1) },
        { op: 'compaction-end', id: 0 },
        after,
      ];
      // Charges acknowledged once the step of their commit returned: 3 at step 2, 4 at step 5, 5 at step 8.
      return { steps, outcome: (acked) => ({ acknowledged: acked >= 8 ? 5 : acked >= 5 ? 4 : acked >= 2 ? 3 : 2, allowed: [2, 3, 4, 5] }) };
    });
    expect(operations).toBeGreaterThanOrEqual(15);

    // Whole, the state file holds record 6 and the journal exactly records 7 and 8, whatever the order they came in.
    const file = join(await scratchDir(), 'state.json');
    const { repo } = charged(2);
    await cleanStop(file, stateOf(repo), 5);
    charge(repo, 3);
    handle(openMessage(file));
    handle(commit(repo, 6));
    const base = [...stateChunks(stateOf(repo), 6)].join('');
    handle({ op: 'compaction-begin', id: 0 });
    handle({ op: 'compaction-chunk', text: base });
    charge(repo, 4);
    handle(commit(repo, 7));
    handle({ op: 'compaction-end', id: 0 });
    charge(repo, 5);
    handle(commit(repo, 8));
    handle({ op: 'close', id: 0 });
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
      const replace: WriterMessage = { op: 'replace', id: 0, state: withJournalSeq(stored, 6) };
      return {
        steps: [openMessage(file), replace],
        // Whole, the restore leaves two charges; cut short, either.
        outcome: (acked) => ({ acknowledged: 2, allowed: acked >= 2 ? [2] : [2, 3] }),
      };
    });
    // mkdir, the state file's temp made, written, synced, renamed and its folder synced, the journal's removal.
    expect(operations).toBeGreaterThanOrEqual(7);
  });
});
