import { addAmount, type ChargeEntry } from '../state/charges.js';
import type { CoreContext } from '../context.js';

export interface ChargesReport {
  unit: 'AKh';
  total: number;
  clients: Array<{ client_id: string; client_name: string; total: number; charges: number }>;
  entries: ChargeEntry[];
}

/**
 * Totals per client and overall for `agent-access charges`, all summed from `entries` (the committed ledger lines,
 * in seq order) as recordCharge sums them: the totals are those of exactly these entries, never of charges
 * recorded since (the state's running totals may already count charges whose lines are not committed yet).
 */
export function chargesReport(core: CoreContext, entries: ChargeEntry[]): ChargesReport {
  const perClient = new Map<string, { total: number; charges: number }>();
  let total = 0;
  for (const e of entries) {
    const client = perClient.get(e.client_id) ?? { total: 0, charges: 0 };
    client.total = addAmount(client.total, e.amount);
    client.charges++;
    perClient.set(e.client_id, client);
    total = addAmount(total, e.amount);
  }
  const clients = [...perClient]
    .map(([client_id, c]) => ({
      client_id,
      client_name: core.state.clients[client_id]?.client_name ?? '(unbekannter Client)',
      total: c.total,
      charges: c.charges,
    }))
    .sort((a, b) => b.total - a.total);
  return { unit: 'AKh', total, clients, entries };
}
