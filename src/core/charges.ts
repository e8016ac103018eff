import { createHash } from 'node:crypto';

export { addAmount, DEFAULT_PRICES, type ChargeEntry, type Prices } from '../protocol/charges.js';

export interface ChargeTotals {
  /** Lines of the ledger that are committed (the ledger file may hold more after a crash; they are dropped). */
  count: number;
  by_client: Record<string, number>;
  by_grant: Record<string, number>;
  /**
   * The committed ledger lines chained: sha256 of the previous value (none before seq 1) and the line's text, in
   * hex. The sums above show a line whose amount was changed; this shows any edit (amounts moved between two lines
   * of one client and grant, a time, a route, a key). Absent in a state written before it, and after a snapshot
   * without it is restored: a start then takes it from the ledger.
   */
  ledger_chain?: string;
}

export const emptyTotals = (): ChargeTotals => ({ count: 0, by_client: {}, by_grant: {} });

/** ChargeTotals.ledger_chain after the ledger line `line` (its text, without the line break). */
export const chainLedger = (previous: string | undefined, line: string): string =>
  createHash('sha256')
    .update(previous ?? '')
    .update(line)
    .digest('hex');

/** The chain over `lines` (each without its line break) from the start of the ledger. */
export const ledgerChain = (lines: readonly string[]): string | undefined => lines.reduce<string | undefined>(chainLedger, undefined);
