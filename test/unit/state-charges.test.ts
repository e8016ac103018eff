/**
 * Issue 46: a state's charges have one source of truth, its `charge_ledger`, which must hold seq 1 to count and sum
 * to the totals; a state file that does not is refused when read, naming what differs. The ledger file written from
 * it, and serve's rewriting of it, are in test/ledger.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { ChargeEntry } from '../../src/core/state/charges.js';
import { StateFileError } from '../../src/core/state/errors.js';
import { emptyState, parseState } from '../../src/core/state/state.js';
import { resetAdvice } from '../../src/store/state-files.js';

const entry = (seq: number, client_id: string, amount: number, grant_id = `grant_${client_id}`): ChargeEntry => ({
  seq,
  at: 1_700_000_000_000 + seq,
  client_id,
  grant_id,
  route: 'POST /chat/ask',
  amount,
  unit: 'AKh',
  idempotency_key: null,
});
/** A state file's text with these charges and the totals they sum to. */
const stateWith = (entries: ChargeEntry[]) => {
  const state = emptyState() as unknown as Record<string, unknown> & {
    charges: { count: number; by_client: Record<string, number>; by_grant: Record<string, number> };
  };
  state.charges.count = entries.length;
  for (const e of entries) {
    state.charges.by_client[e.client_id] = Math.round(((state.charges.by_client[e.client_id] ?? 0) + e.amount) * 1000) / 1000;
    state.charges.by_grant[e.grant_id] = Math.round(((state.charges.by_grant[e.grant_id] ?? 0) + e.amount) * 1000) / 1000;
  }
  state.charge_ledger = Object.fromEntries(entries.map((e) => [String(e.seq), e]));
  return state;
};
const refusal = (run: () => unknown): StateFileError => {
  try {
    run();
  } catch (e) {
    expect(e).toBeInstanceOf(StateFileError);
    return e as StateFileError;
  }
  throw new Error('expected a refusal');
};

describe("a state's charges: charge_ledger holds seq 1 to count, and sums to the totals", () => {
  const three = [entry(1, 'c1', 0.1), entry(2, 'c2', 0.25), entry(3, 'c1', 0.3)];

  it('charges that sum (in thousandths) to the totals are accepted', () => {
    expect(parseState(JSON.stringify(stateWith(three)), 's.json', resetAdvice('s.json')).charges.count).toBe(3);
  });

  it('a tampered total, a missing charge, a charge with a bad field: refused, naming what differs', () => {
    const tampered = stateWith(three);
    tampered.charges.by_client.c1 = 0.5;
    expect(refusal(() => parseState(JSON.stringify(tampered), 's.json', resetAdvice('s.json'))).message).toMatch(
      /charges of client c1 sum to 0.4 AKh, but "charges.by_client" says 0.5/,
    );
    const missing = stateWith(three);
    delete (missing.charge_ledger as Record<string, unknown>)['2'];
    expect(refusal(() => parseState(JSON.stringify(missing), 's.json', resetAdvice('s.json'))).message).toMatch(
      /it holds 2 charges, but "charges.count" is 3/,
    );
    const bad = stateWith(three);
    (bad.charge_ledger as Record<string, ChargeEntry>)['1'] = { ...three[0]!, amount: '0.1' as unknown as number };
    expect(refusal(() => parseState(JSON.stringify(bad), 's.json', resetAdvice('s.json'))).message).toMatch(
      /charge 1: "amount" is not a number/,
    );
  });
});
