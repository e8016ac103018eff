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
