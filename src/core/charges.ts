/** Spec 1: charged operations, in AKh. Prices are not shown in the spec; these are the emulator's defaults. */
export interface Prices {
  ask: number;
  research: number;
}

export const DEFAULT_PRICES: Prices = { ask: 0.1, research: 2 };

/** One line of the charge ledger. */
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

export interface ChargeTotals {
  /** Lines of the ledger that are committed (the ledger file may hold more after a crash; they are dropped). */
  count: number;
  by_client: Record<string, number>;
  by_grant: Record<string, number>;
}

export const emptyTotals = (): ChargeTotals => ({ count: 0, by_client: {}, by_grant: {} });

/** Sums in thousandths to keep decimal prices exact. */
export const addAmount = (a: number, b: number): number => Math.round((a + b) * 1000) / 1000;

/** The charge ledger beside a state file: `state.json` → `state.charges.jsonl`. */
export const ledgerFileFor = (stateFile: string): string => `${stateFile.replace(/\.json$/i, '')}.charges.jsonl`;

const shellQuoted = (path: string): string => `'${path.replace(/'/g, `'\\''`)}'`;

/** The shell command that moves a state file away together with its charge ledger: they belong together, never one alone. */
export const moveAwayCommand = (stateFile: string): string => {
  const ledger = ledgerFileFor(stateFile);
  return `mv ${shellQuoted(stateFile)} ${shellQuoted(`${stateFile}.bak`)} && mv ${shellQuoted(ledger)} ${shellQuoted(`${ledger}.bak`)}`;
};
