/**
 * Issue 46.4: the persistence port's contract, run by both adapters (in memory and the state file with its journal),
 * as workers-oauth-provider runs one storage suite over each of its stores. What only the file adapter does (crash
 * points, compaction under load, faults) is in journal.test.ts, writer-crash-points.test.ts and storage-faults.test.ts.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { StatePersistence } from '../src/core/state/persistence.js';
import { Repository } from '../src/core/state/repository.js';
import { emptyState, parseState, type Client, type State } from '../src/core/state/state.js';
import { FilePersistence } from '../src/store/file-persistence.js';
import { MemoryPersistence } from '../src/store/memory-persistence.js';
import { journalFileFor, resetAdvice } from '../src/store/state-files.js';
import { scratchDir } from './helpers/emulator.js';

interface Adapter {
  persistence: StatePersistence;
  /** The adapter a later start would have: a new one on the same file, or the same memory. */
  reopen(): Promise<StatePersistence>;
}

const adapters: Array<[string, () => Promise<Adapter>]> = [
  [
    'memory',
    async () => {
      const persistence = new MemoryPersistence();
      return { persistence, reopen: async () => persistence };
    },
  ],
  [
    'file',
    async () => {
      const file = join(await scratchDir(), 'state.json');
      return { persistence: new FilePersistence(file), reopen: async () => new FilePersistence(file) };
    },
  ],
];

const client = (id: string): Client => ({ client_id: id, client_name: `Client ${id}` }) as unknown as Client;
const charge = (repo: Repository, n: number) =>
  repo.recordCharge({ at: n, client_id: 'c1', grant_id: 'g1', route: 'POST /chat/ask', amount: 0.5, unit: 'AKh', idempotency_key: null });

async function opened(adapter: Adapter): Promise<Repository> {
  return new Repository((await adapter.persistence.load()) ?? emptyState());
}

describe.each(adapters)('46.4 the persistence contract: %s', (name, make) => {
  it('commit and read back: a committed entry and a charge are in the state a later start loads, and readCharges lists the charge', async () => {
    const adapter = await make();
    const repo = await opened(adapter);
    repo.put('clients', 'c1', client('c1'));
    charge(repo, 1);
    await adapter.persistence.commit(repo);
    expect(await adapter.persistence.readCharges()).toEqual([expect.objectContaining({ seq: 1, amount: 0.5 })]);
    await adapter.persistence.close();
    const again = await adapter.reopen();
    const state = (await again.load())!;
    expect(state.clients.c1).toEqual(client('c1'));
    expect(state.charges).toEqual({ count: 1, by_client: { c1: 0.5 }, by_grant: { g1: 0.5 } });
    expect(await again.readCharges()).toHaveLength(1);
    await again.close();
  });

  it('group commit: commits asked for in one turn all resolve, each change durable; the file adapter writes them as one journal record', async () => {
    const adapter = await make();
    const repo = await opened(adapter);
    // A first commit: a new state gets its state file with it, so what follows goes to the journal.
    repo.put('clients', 'x', client('x'));
    await adapter.persistence.commit(repo);
    const commits = ['a', 'b', 'c'].map((id) => {
      repo.put('clients', id, client(id));
      charge(repo, id.charCodeAt(0));
      return adapter.persistence.commit(repo);
    });
    await Promise.all(commits);
    expect((await adapter.persistence.readCharges()).map((c) => c.seq)).toEqual([1, 2, 3]);
    if (adapter.persistence.location) {
      const records = (await readFile(journalFileFor(adapter.persistence.location), 'utf8')).trim().split('\n');
      expect(records, name).toHaveLength(1);
    }
    await adapter.persistence.close();
    const state = (await (await adapter.reopen()).load())!;
    expect(Object.keys(state.clients).sort()).toEqual(['a', 'b', 'c', 'x']);
  });

  it('snapshot save and restore: readStored, more changes, then replaceStored brings back the state and its charges exactly', async () => {
    const adapter = await make();
    const repo = await opened(adapter);
    repo.put('clients', 'c1', client('c1'));
    charge(repo, 1);
    await adapter.persistence.commit(repo);
    const saved = await adapter.persistence.readStored(repo);
    repo.put('clients', 'c2', client('c2'));
    charge(repo, 2);
    await adapter.persistence.commit(repo);
    expect(await adapter.persistence.readCharges()).toHaveLength(2);
    const restored: State = parseState(saved.state, 'snapshot', resetAdvice('snapshot'));
    await adapter.persistence.replaceStored(saved, restored, () => repo.replace(restored));
    expect(await adapter.persistence.readCharges()).toHaveLength(1);
    expect(Object.keys(repo.state.clients)).toEqual(['c1']);
    await adapter.persistence.close();
    const state = (await (await adapter.reopen()).load())!;
    expect(Object.keys(state.clients)).toEqual(['c1']);
    expect(state.charges.count).toBe(1);
  });
});
