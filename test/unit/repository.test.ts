/**
 * The core's one write path (src/core/state/repository.ts): every change goes through the repository, which replaces
 * immutable entries and hands persistence exactly the places that changed. Checked in-process, without files.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyChanges } from '../../src/core/state/journal-replay.js';
import { Repository } from '../../src/core/state/repository.js';
import { stateText } from '../../src/core/state/persistence.js';
import { emptyState, type Grant, type State } from '../../src/core/state/state.js';
import { stateChunks } from '../../src/store/state-text.js';

const grant = (id: string, n: number): Grant => ({
  id,
  client_id: `c${n % 3}`,
  person_id: 'person_erika',
  scopes: ['ask'],
  resource: null,
  created_at: n,
  last_used_at: null,
  status: 'active',
});

type Op =
  | { kind: 'put'; id: string; n: number }
  | { kind: 'update'; id: string; n: number }
  | { kind: 'delete'; id: string }
  | { kind: 'charge'; id: string; amount: number }
  | { kind: 'workspace'; n: number }
  | { kind: 'revoke-token'; id: string; n: number }
  | { kind: 'drain' };

const ids = fc.constantFrom('a', 'b', 'c', 'd', '__proto__', 'constructor', 'x.y', 'ü');
const ops = fc.array(
  fc.oneof(
    fc.record({ kind: fc.constant('put' as const), id: ids, n: fc.nat(1000) }),
    fc.record({ kind: fc.constant('update' as const), id: ids, n: fc.nat(1000) }),
    fc.record({ kind: fc.constant('delete' as const), id: ids }),
    fc.record({ kind: fc.constant('charge' as const), id: ids, amount: fc.constantFrom(0.1, 2, 0.001) }),
    fc.record({ kind: fc.constant('workspace' as const), n: fc.nat(1000) }),
    fc.record({ kind: fc.constant('revoke-token' as const), id: ids, n: fc.nat(1000) }),
    fc.constant({ kind: 'drain' as const }),
  ),
  { maxLength: 60 },
);

function run(repo: Repository, op: Op): void {
  switch (op.kind) {
    case 'put':
      repo.put('grants', op.id, grant(op.id, op.n));
      return;
    case 'update':
      if (repo.has('grants', op.id)) repo.update('grants', op.id, { last_used_at: op.n });
      return;
    case 'delete':
      repo.delete('grants', op.id);
      return;
    case 'charge':
      repo.recordCharge({
        at: 0,
        client_id: `c-${op.id}`,
        grant_id: op.id,
        route: 'POST /chat/ask',
        amount: op.amount,
        unit: 'AKh',
        idempotency_key: null,
      });
      return;
    case 'workspace':
      repo.appendWorkspaceChange({
        action_id: `act${op.n}`,
        at: op.n,
        kind: 'contacts',
        operation: 'create',
        record: { id: `k${op.n}`, title: 'Anna' },
      });
      return;
    case 'revoke-token':
      repo.put('revoked_access_tokens', op.id, op.n);
      return;
    case 'drain':
      return;
  }
}

describe('the repository: one write path that knows what changed', () => {
  it('drained changes, replayed in order over the state before, give exactly the state after (property, 300 runs)', () => {
    fc.assert(
      fc.property(ops, (sequence) => {
        const repo = new Repository(emptyState());
        const replayed = emptyState();
        const ledger: string[] = [];
        for (const op of [...sequence, { kind: 'drain' as const }]) {
          if (op.kind === 'drain') {
            const batch = repo.drain();
            // What persistence writes is JSON: the replay sees the changes as a journal holds them.
            applyChanges(replayed, JSON.parse(JSON.stringify(batch.changes)));
            // The charges are changes like any other: in charge_ledger, keyed by seq.
            for (const [path, value] of batch.changes)
              if (path[0] === 'charge_ledger' && value !== undefined) ledger.push(JSON.stringify(value));
          } else run(repo, op);
        }
        expect(JSON.stringify(replayed)).toBe(JSON.stringify(repo.state));
        // Every charge reached the journal once, in the batch that recorded it, numbered as the totals count them.
        expect(ledger.map((line) => JSON.parse(line).seq)).toEqual(Array.from({ length: repo.state.charges.count }, (_, i) => i + 1));
      }),
      { numRuns: 300 },
    );
  });

  it("a subset (`where`) holds exactly the keys whose entries pass its test, in the table's order, through puts, updates, deletes and a replace (property, 300 runs)", () => {
    const odd = (g: Grant) => g.created_at % 2 === 1 || g.last_used_at !== null;
    const expected = (repo: Repository) => Object.keys(repo.state.grants).filter((k) => odd(repo.state.grants[k]!));
    fc.assert(
      fc.property(ops, ops, (before, after) => {
        const repo = new Repository(emptyState());
        for (const op of before) run(repo, op);
        const subset = repo.where('grants', odd);
        for (const op of after) {
          run(repo, op);
          expect([...subset].sort()).toEqual(expected(repo).sort());
        }
        // A snapshot restored: the subset is made again from the new state, in its order.
        const other = new Repository(emptyState());
        for (const op of before) run(other, op);
        repo.replace(structuredClone(other.state) as State);
        expect([...subset]).toEqual(expected(repo));
      }),
      { numRuns: 300 },
    );
  });

  it('a key removed and put again replays to the same key order: within one commit, and across two', () => {
    // Found by the property above (seed 874992456): put ü, remove ü, put a, put ü gave {ü, a} on replay, {a, ü} live.
    for (const drainAfter of [Infinity, 1]) {
      const repo = new Repository(emptyState());
      repo.put('grants', 'x', grant('x', 0));
      const replayed = emptyState();
      applyChanges(replayed, repo.drain().changes);
      const steps: Array<() => unknown> = [
        () => repo.put('grants', 'ü', grant('ü', 0)),
        () => repo.delete('grants', 'ü'),
        () => repo.delete('grants', 'x'),
        () => repo.put('grants', 'a', grant('a', 0)),
        () => repo.put('grants', 'x', grant('x', 1)),
        () => repo.put('grants', 'ü', grant('ü', 1)),
      ];
      steps.forEach((step, i) => {
        step();
        if (i === drainAfter) applyChanges(replayed, repo.drain().changes);
      });
      applyChanges(replayed, repo.drain().changes);
      expect(Object.keys(repo.state.grants)).toEqual(['a', 'x', 'ü']);
      expect(JSON.stringify(replayed)).toBe(JSON.stringify(repo.state));
    }
  });

  it('keys are plain data: "__proto__" is an entry like any other, never the table\'s prototype', () => {
    const repo = new Repository(emptyState());
    repo.put('grants', '__proto__', grant('__proto__', 1));
    expect(repo.has('grants', '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(repo.state.grants)).toBe(Object.prototype);
    const replayed = emptyState();
    applyChanges(replayed, JSON.parse(JSON.stringify(repo.drain().changes)));
    expect(Object.keys(replayed.grants)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(replayed.grants)).toBe(Object.prototype);
  });

  it('a place changed several times before a drain is one change, with its value at the drain', () => {
    const repo = new Repository(emptyState());
    repo.put('grants', 'g', grant('g', 1));
    repo.update('grants', 'g', { last_used_at: 5 });
    repo.update('grants', 'g', { last_used_at: 7 });
    const { changes } = repo.drain();
    expect(changes).toEqual([[['grants', 'g'], { ...grant('g', 1), last_used_at: 7 }]]);
    expect(repo.drain().changes).toEqual([]);
  });

  it('entries are frozen values: a change replaces the entry, and what a reader holds stays as it was', () => {
    const repo = new Repository(emptyState());
    const before = repo.put('grants', 'g', grant('g', 1));
    const after = repo.update('grants', 'g', { status: 'revoked' });
    expect(Object.isFrozen(before) && Object.isFrozen(after)).toBe(true);
    expect(before.status).toBe('active');
    expect(repo.get('grants', 'g')).toBe(after);
    expect(() => {
      (after as { status: string }).status = 'active';
    }).toThrow(TypeError);
  });

  it('a frozen view holds the state of its moment; later changes do not reach it', () => {
    const repo = new Repository(emptyState());
    repo.put('grants', 'g', grant('g', 1));
    repo.recordCharge({ at: 0, client_id: 'c', grant_id: 'g', route: 'POST /research', amount: 2, unit: 'AKh', idempotency_key: null });
    const view = repo.frozenView();
    const text = JSON.stringify(view.toState());
    repo.update('grants', 'g', { status: 'revoked' });
    repo.put('grants', 'h', grant('h', 2));
    repo.recordCharge({ at: 0, client_id: 'c', grant_id: 'g', route: 'POST /research', amount: 2, unit: 'AKh', idempotency_key: null });
    repo.appendWorkspaceChange({ action_id: 'a', at: 0, kind: 'contacts', operation: 'create', record: { id: 'k', title: 'Anna' } });
    expect(JSON.stringify(view.toState())).toBe(text);
  });

  it('a frozen view keeps no copy of the tables: any changes after it (puts, updates, deletes, charges, a replace) leave it as it was, keys in their order', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('put' as const), key: fc.constantFrom('a', 'b', 'c', '__proto__', '1'), n: fc.nat(9) }),
      fc.record({ kind: fc.constant('update' as const), key: fc.constantFrom('a', 'b', 'c', '__proto__', '1'), n: fc.nat(9) }),
      fc.record({ kind: fc.constant('delete' as const), key: fc.constantFrom('a', 'b', 'c', '__proto__', '1') }),
      fc.record({ kind: fc.constant('charge' as const), client: fc.constantFrom('c1', 'c2'), grant: fc.constantFrom('a', 'b') }),
      fc.record({ kind: fc.constant('replace' as const) }),
    );
    type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;
    const apply = (repo: Repository, o: Op): void => {
      if (o.kind === 'put') repo.put('grants', o.key, grant(o.key, o.n));
      else if (o.kind === 'update') {
        if (repo.has('grants', o.key)) repo.update('grants', o.key, { last_used_at: o.n });
      } else if (o.kind === 'delete') repo.delete('grants', o.key);
      else if (o.kind === 'charge')
        repo.recordCharge({
          at: 0,
          client_id: o.client,
          grant_id: o.grant,
          route: 'POST /research',
          amount: 1,
          unit: 'AKh',
          idempotency_key: null,
        });
      else repo.replace({ ...emptyState(), grants: { z: grant('z', 0) } });
    };
    fc.assert(
      fc.property(fc.array(op, { maxLength: 12 }), fc.array(op, { maxLength: 12 }), fc.boolean(), (before, after, second) => {
        const repo = new Repository(emptyState());
        for (const o of before) apply(repo, o);
        const expected = stateText(structuredClone(repo.state));
        const view = repo.frozenView();
        // A second frozen view taken part way and released early must not disturb the first.
        for (const [i, o] of after.entries()) {
          if (second && i === 1) repo.frozenView().release();
          apply(repo, o);
        }
        expect(stateText(view.toState())).toBe(expected);
        // The compaction's text, read from the frozen view while it is still held.
        expect([...stateChunks(view, 0)].join('')).toBe([...stateChunks(JSON.parse(expected) as State, 0)].join(''));
        view.release();
      }),
    );
  });

  it("a compaction writes the charge totals in the core's order, whatever order a hand-edited state file had", () => {
    const edited = { ...emptyState(), charges: { by_grant: { g: 1 }, by_client: { c: 1 }, count: 1 } } as State;
    const view = new Repository(edited).frozenView();
    expect([...stateChunks(view, 0)].join('')).toContain('"charges":{"count":1,"by_client":{"c":1},"by_grant":{"g":1}}');
    view.release();
  });

  it('41.8: a batch that could not be made durable is rolled back, with what was changed since its drain: nothing of it is drained again, and the ledger starts over where it was', () => {
    const repo = new Repository(emptyState());
    repo.put('grants', 'g', grant('g', 1));
    repo.drain();
    repo.recordCharge({ at: 0, client_id: 'c', grant_id: 'g', route: 'POST /research', amount: 2, unit: 'AKh', idempotency_key: 'k' });
    repo.put('revoked_access_tokens', 'jti', 5);
    const failed = repo.drain();
    repo.recordCharge({ at: 1, client_id: 'c', grant_id: 'g', route: 'POST /research', amount: 2, unit: 'AKh', idempotency_key: null });
    repo.update('grants', 'g', { last_used_at: 9 });
    repo.rollBack(failed);
    expect(repo.drain()).toMatchObject({ changes: [] });
    expect(repo.state.charges).toEqual({ count: 0, by_client: {}, by_grant: {} });
    expect(repo.state.grants.g).toEqual(grant('g', 1));
    expect(repo.has('revoked_access_tokens', 'jti')).toBe(false);
    // The next charge is number 1 again.
    repo.recordCharge({ at: 2, client_id: 'c', grant_id: 'g', route: 'POST /research', amount: 2, unit: 'AKh', idempotency_key: 'k' });
    expect(
      repo
        .drain()
        .changes.filter(([path]) => path[0] === 'charge_ledger')
        .map(([path]) => path[1]),
    ).toEqual(['1']);
  });

  it('41.8: a rollback gives the state as it was before the batch, whatever the batch and the changes since did; subsets and a frozen view taken in between stay right (property, 300 runs)', () => {
    /** The state as JSON with every object's keys sorted: a rollback may put an entry back at another place in its table. */
    const canonical = (value: unknown): string =>
      JSON.stringify(value, (_key, v: unknown) =>
        v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
      );
    const odd = (g: Grant) => g.created_at % 2 === 1 || g.last_used_at !== null;
    fc.assert(
      fc.property(ops, ops, ops, (before, inBatch, since) => {
        const repo = new Repository(emptyState());
        const subset = repo.where('grants', odd);
        for (const op of before) run(repo, op);
        repo.drain();
        const expected = canonical(repo.state);
        for (const op of inBatch) run(repo, op);
        const batch = repo.drain();
        // A compaction's frozen view, taken right after the drain.
        const view = repo.frozenView();
        const snapshotted = canonical(view.toState());
        for (const op of since) run(repo, op);
        repo.rollBack(batch);
        expect(canonical(repo.state)).toBe(expected);
        expect(repo.drain()).toMatchObject({ changes: [] });
        expect(canonical(view.toState())).toBe(snapshotted);
        view.release();
        const passing = Object.keys(repo.state.grants).filter((k) => odd(repo.state.grants[k]!));
        expect([...subset].sort()).toEqual(passing.sort());
      }),
      { numRuns: 300 },
    );
  });

  it('a replay refuses changes no repository writes (a journal from elsewhere, or edited), and list gaps', () => {
    for (const bad of [
      [['grants']],
      [['nope', 'x'], 1],
      [['keys', 'x'], {}],
      [['charges', 'total'], 1],
      [['workspace_changes', '5'], {}],
      [['workspace_changes', '0']],
      'x',
      [['grants', 'g'], 1, 2],
    ]) {
      expect(() => applyChanges(emptyState(), [bad])).toThrow();
    }
  });
});
