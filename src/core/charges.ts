export { addAmount, type ChargeEntry } from '../protocol/charges.js';

/** Spec 1: charged operations, in AKh. Prices are not shown in the spec; these are the emulator's defaults. */
export interface Prices {
  ask: number;
  research: number;
}

export const DEFAULT_PRICES: Prices = { ask: 0.1, research: 2 };

export interface ChargeTotals {
  /** Lines of the ledger that are committed (the ledger file may hold more after a crash; they are dropped). */
  count: number;
  by_client: Record<string, number>;
  by_grant: Record<string, number>;
}

export const emptyTotals = (): ChargeTotals => ({ count: 0, by_client: {}, by_grant: {} });
