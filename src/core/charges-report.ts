import type { ChargeEntry } from './charges.js';
import type { Core } from './core.js';

export interface ChargesReport {
  unit: 'AKh';
  total: number;
  clients: Array<{ client_id: string; client_name: string; total: number; charges: number }>;
  entries: ChargeEntry[];
}

/** Totals per client (from the state) and the ledger's entries, for `agent-access charges`. */
export function chargesReport(core: Core, ledgerLines: string[]): ChargesReport {
  const entries = ledgerLines.map((line) => JSON.parse(line) as ChargeEntry);
  const counts = new Map<string, number>();
  for (const e of entries) counts.set(e.client_id, (counts.get(e.client_id) ?? 0) + 1);
  const clients = Object.entries(core.state.charges.by_client)
    .map(([client_id, total]) => ({ client_id, client_name: core.state.clients[client_id]?.client_name ?? '(unbekannter Client)', total, charges: counts.get(client_id) ?? 0 }))
    .sort((a, b) => b.total - a.total);
  const total = Math.round(clients.reduce((sum, c) => sum + c.total * 1000, 0)) / 1000;
  return { unit: 'AKh', total, clients, entries };
}
