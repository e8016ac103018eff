/**
 * Issue 46.4: the persistence port's contract, run by both adapters (in memory and the state file with its journal),
 * as workers-oauth-provider runs one storage suite over each of its stores: commit and read back, group commit,
 * restart with a journal, compaction while writing, snapshot save and restore, retention. Where the memory adapter's
 * answer is trivially the same it still runs the case: the contract is that they agree.
 *
 * Crash at every file operation is the file adapter's alone, and stays in writer-crash-points.test.ts: it cuts the
 * writer's node:fs calls after operation 1, 2, … of a commit, a compaction and a restore (a vi.mock of node:fs for its
 * whole file, which would change every case here) and starts on what is left with every acknowledged charge.
 * Faults (a full disk, files removed) are in storage-faults.test.ts.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DAY, HOUR } from '../src/core/state/clock.js';
import type { StatePersistence } from '../src/core/state/persistence.js';
import { Repository } from '../src/core/state/repository.js';
import { applyRetention, DEFAULT_RETENTION } from '../src/core/oauth/retention.js';
import { emptyState, parseState, type Client, type Grant, type State } from '../src/core/state/state.js';
import { FilePersistence, type FilePersistenceOptions } from '../src/store/file-persistence.js';
import { MemoryPersistence } from '../src/store/memory-persistence.js';
import { journalFileFor, resetAdvice } from '../src/store/state-files.js';
import { scratchDir } from './helpers/emulator.js';

interface Adapter {
  persistence: StatePersistence;
  /** The adapter a later start would have: a new one on the same file, or the same memory. */
  reopen(): Promise<StatePersistence>;
  /**
   * The adapter a start after kill -9 would have: a new one on the same file while this one is never stopped (the
   * journal holds what the state file does not), or the same memory.
   */
  restartWithoutStop(): Promise<StatePersistence>;
}

/** Compactions are started by the tests that want them, never by the journal's age while a case runs. */
const NO_AGE: FilePersistenceOptions = { journalMaxAgeMs: 3_600_000 };

const adapters: Array<[string, (options?: FilePersistenceOptions) => Promise<Adapter>]> = [
  [
    'memory',
    async () => {
      const persistence = new MemoryPersistence();
      return { persistence, reopen: async () => persistence, restartWithoutStop: async () => persistence };
    },
  ],
  [
    'file',
    async (options = {}) => {
      const file = join(await scratchDir(), 'state.json');
      const make = () => new FilePersistence(file, { ...NO_AGE, ...options });
      return { persistence: make(), reopen: async () => make(), restartWithoutStop: async () => make() };
    },
  ],
];

const client = (id: string): Client => ({ client_id: id, client_name: `Client ${id}` }) as unknown as Client;
const charge = (repo: Repository, n: number) =>
  repo.recordCharge({ at: n, client_id: 'c1', grant_id: 'g1', route: 'POST /chat/ask', amount: 0.5, unit: 'AKh', idempotency_key: null });

async function opened(adapter: Adapter): Promise<Repository> {
  return new Repository((await adapter.persistence.load()) ?? emptyState());
}

/** Every charge 1 to `count` exactly once, in order, and totals that add them up once each. */
function expectChargesOnce(state: State, count: number, amount: number) {
  expect(Object.keys(state.charge_ledger).map(Number)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
  expect(state.charges.count).toBe(count);
  expect(state.charges.by_client.c1).toBeCloseTo(count * amount, 9);
  expect(state.charges.by_grant.g1).toBeCloseTo(count * amount, 9);
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

  it('snapshot save and restore: exportState, more changes, then importState of that export brings back the state and its charges exactly', async () => {
    const adapter = await make();
    const repo = await opened(adapter);
    repo.put('clients', 'c1', client('c1'));
    charge(repo, 1);
    await adapter.persistence.commit(repo);
    const saved = await adapter.persistence.exportState(repo);
    repo.put('clients', 'c2', client('c2'));
    charge(repo, 2);
    await adapter.persistence.commit(repo);
    expect(await adapter.persistence.readCharges()).toHaveLength(2);
    const restored: State = parseState(saved.state, 'snapshot', resetAdvice('snapshot'));
    await adapter.persistence.importState(saved, restored, () => repo.replace(restored));
    expect(await adapter.persistence.readCharges()).toHaveLength(1);
    expect(Object.keys(repo.state.clients)).toEqual(['c1']);
    await adapter.persistence.close();
    const state = (await (await adapter.reopen()).load())!;
    expect(Object.keys(state.clients)).toEqual(['c1']);
    expect(state.charges.count).toBe(1);
  });

  it('restart with a journal: commits in journal records only are all in what a start after kill -9 loads, in order (the later value wins), with their charges', async () => {
    const adapter = await make();
    const repo = await opened(adapter);
    // The first commit gives a new state its state file; the ones after it are journal records only.
    repo.put('clients', 'x', client('x'));
    await adapter.persistence.commit(repo);
    for (let i = 1; i <= 6; i++) {
      repo.put('clients', `c${i}`, client(`c${i}`));
      // The same key in every record: the last one's value is the one a start must have.
      repo.put('clients', 'x', { ...client('x'), client_name: `x after ${i}` });
      if (i === 3) repo.delete('clients', 'c2');
      charge(repo, i);
      await adapter.persistence.commit(repo);
    }
    if (adapter.persistence.location) {
      const records = (await readFile(journalFileFor(adapter.persistence.location), 'utf8')).trim().split('\n');
      expect(records, 'journal records, not compacted').toHaveLength(6);
      expect(await readFile(adapter.persistence.location, 'utf8'), 'the state file holds none of them').not.toContain('"c1"');
    }
    const again = await adapter.restartWithoutStop();
    const state = (await again.load())!;
    expect(Object.keys(state.clients).sort()).toEqual(['c1', 'c3', 'c4', 'c5', 'c6', 'x']);
    expect(state.clients.x!.client_name).toBe('x after 6');
    expectChargesOnce(state, 6, 0.5);
    expect((await again.readCharges()).map((c) => c.at)).toEqual([1, 2, 3, 4, 5, 6]);
    await again.close();
  });

  it('compaction while writing: compactions run while commits go on in the same and later turns; a restart loads every acknowledged commit, none doubled', async () => {
    let compactions = 0;
    const notices: string[] = [];
    const adapter = await make({ journalLimit: 1024, onStateFile: () => compactions++, onNotice: (line) => notices.push(line) });
    const repo = await opened(adapter);
    const acknowledged: string[] = [];
    let charges = 0;
    const commitClient = (id: string) => {
      // A long name, so that the state file grows and the journal passes it again and again.
      repo.put('clients', id, { ...client(id), client_name: `Client ${id} `.padEnd(200, '.') });
      charge(repo, ++charges);
      return adapter.persistence.commit(repo).then(() => acknowledged.push(id));
    };
    for (let round = 0; round < 40; round++) {
      // Three in one turn (one record), one in the next turn, while a compaction a record started may be running.
      const sameTurn = ['a', 'b', 'c'].map((k) => commitClient(`${k}${round}`));
      await new Promise((resolve) => setImmediate(resolve));
      await Promise.all([...sameTurn, commitClient(`d${round}`)]);
    }
    expect(acknowledged).toHaveLength(160);
    if (adapter.persistence.location) {
      // The first state file, then compactions that the journal's size started.
      expect(compactions, 'compactions while commits went on').toBeGreaterThanOrEqual(3);
    }
    const again = await adapter.restartWithoutStop();
    const state = (await again.load())!;
    expect(Object.keys(state.clients).sort()).toEqual([...acknowledged].sort());
    expectChargesOnce(state, 160, 0.5);
    expect((await again.readCharges()).map((c) => c.seq)).toEqual(Array.from({ length: 160 }, (_, i) => i + 1));
    // The ledger file, a view of the charges appended after each record, may lack the last lines after kill -9 (the
    // start rewrites it then), but never holds a line twice or out of place.
    expect(notices.filter((line) => /charge ledger .*(beyond|differed)/.test(line))).toEqual([]);
    await again.close();
  });

  it("retention: what the core's retention removes is gone after a commit and a restart, and what it keeps stays", async () => {
    const now = Date.UTC(2026, 2, 10, 9);
    const adapter = await make();
    const repo = await opened(adapter);
    const registered = (id: string, at: number) => ({ ...client(id), client_id_issued_at: at / 1000, self_registered: true }) as Client;
    const idempotency = (id: string, expiresAt: number) =>
      ({
        client_id: 'used',
        route: 'POST /chat/ask',
        key: id,
        fingerprint: 'f',
        created_at: expiresAt - DAY,
        expires_at: expiresAt,
      }) as const;
    repo.put('clients', 'unused-old', registered('unused-old', now - 2 * DAY));
    repo.put('clients', 'unused-new', registered('unused-new', now - HOUR));
    repo.put('clients', 'used', registered('used', now - 2 * DAY));
    repo.put('grants', 'g1', {
      id: 'g1',
      client_id: 'used',
      person_id: 'p',
      scopes: ['ask'],
      resource: null,
      created_at: now - 2 * DAY,
      last_used_at: null,
      status: 'active',
    } satisfies Grant);
    repo.put('idempotency', 'expired', idempotency('expired', now - 1));
    repo.put('idempotency', 'current', idempotency('current', now + HOUR));
    repo.put('revoked_access_tokens', 'jti-old', now - 2 * HOUR);
    repo.put('revoked_access_tokens', 'jti-new', now - HOUR / 2);
    await adapter.persistence.commit(repo);
    expect(applyRetention(repo, now, DEFAULT_RETENTION)).toEqual({ removed: 3, families: [] });
    await adapter.persistence.commit(repo);
    const expectRetained = (state: State) => {
      expect(Object.keys(state.clients).sort()).toEqual(['unused-new', 'used']);
      expect(Object.keys(state.grants)).toEqual(['g1']);
      expect(Object.keys(state.idempotency)).toEqual(['current']);
      expect(Object.keys(state.revoked_access_tokens)).toEqual(['jti-new']);
    };
    // From the journal (a start after kill -9), then from the state file alone (after a clean stop).
    const again = await adapter.restartWithoutStop();
    expectRetained((await again.load())!);
    await again.close();
    const atRest = await adapter.reopen();
    expectRetained((await atRest.load())!);
    await atRest.close();
  });
});
