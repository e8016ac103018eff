/**
 * Spec 1: charged operations, in AKh. Prices are not shown in the spec; these are the emulator's defaults (`serve
 * --price-ask`, `--price-research`), which `conformance server` also quotes for what a run may have charged.
 */
export interface Prices {
  ask: number;
  research: number;
}

export const DEFAULT_PRICES: Prices = { ask: 0.1, research: 2 };

/** One line of the charge ledger, as the admin API and its event stream carry it. */
export interface ChargeEntry {
  seq: number;
  at: number;
  client_id: string;
  grant_id: string;
  route: string;
  amount: number;
  unit: 'AKh';
  idempotency_key: string | null;
}

/** Sums in thousandths to keep decimal prices exact. */
export const addAmount = (a: number, b: number): number => Math.round((a + b) * 1000) / 1000;
