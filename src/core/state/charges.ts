import { addAmount, type ChargeEntry } from '../../protocol/charges.js';
import { plural } from '../../protocol/format.js';

export { addAmount, DEFAULT_PRICES, type ChargeEntry, type Prices } from '../../protocol/charges.js';

/** The running totals of the charges in the state's `charge_ledger` (its entries are the one record of them). */
export interface ChargeTotals {
  /** Charges recorded: `charge_ledger` holds seq 1 to `count`. */
  count: number;
  by_client: Record<string, number>;
  by_grant: Record<string, number>;
}

export const emptyTotals = (): ChargeTotals => ({ count: 0, by_client: {}, by_grant: {} });

/** One ledger line as the ledger file (`state.charges.jsonl`) and a snapshot hold it. */
export const ledgerLine = (entry: ChargeEntry): string => `${JSON.stringify(entry)}\n`;

/** The ledger file's text for these entries (seq order). */
export const ledgerText = (entries: Iterable<ChargeEntry>): string => {
  let text = '';
  for (const entry of entries) text += ledgerLine(entry);
  return text;
};

const ENTRY_KEYS = ['seq', 'at', 'client_id', 'grant_id', 'route', 'amount', 'unit', 'idempotency_key'] as const;

/** `value` as charge `seq`, or why it is not one. */
function checkEntry(value: unknown, seq: number): ChargeEntry | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'it is not a JSON object';
  const entry = value as Record<string, unknown>;
  const unknown = Object.keys(entry).filter((k) => !(ENTRY_KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) return `it has unknown field ${unknown.map((k) => JSON.stringify(k)).join(', ')}`;
  if (entry.seq !== seq) return `its seq is ${JSON.stringify(entry.seq)}, not ${seq}`;
  if (typeof entry.at !== 'number' || !Number.isFinite(entry.at)) return '"at" is not a time in ms';
  for (const key of ['client_id', 'grant_id', 'route'] as const)
    if (typeof entry[key] !== 'string' || entry[key] === '') return `"${key}" is not a non-empty string`;
  if (typeof entry.amount !== 'number' || !Number.isFinite(entry.amount)) return '"amount" is not a number';
  if (entry.unit !== 'AKh') return `"unit" is ${JSON.stringify(entry.unit)}, not "AKh"`;
  if (entry.idempotency_key !== null && typeof entry.idempotency_key !== 'string') return '"idempotency_key" is neither a string nor null';
  return entry as unknown as ChargeEntry;
}

/**
 * Why `ledger` is not the ledger of `totals` (charges 1 to count, summing per client and per grant to the totals),
 * or null when it is. A state file checks its own `charge_ledger` so; a state file written before the ledger moved
 * into it takes its entries from the ledger file's first `count` lines, checked the same way.
 */
export function ledgerProblem(totals: ChargeTotals, ledger: Readonly<Record<string, unknown>>): string | null {
  const sums = { by_client: new Map<string, number>(), by_grant: new Map<string, number>() };
  if (Object.keys(ledger).length !== totals.count)
    return `it holds ${plural(Object.keys(ledger).length, 'charge')}, but "charges.count" is ${totals.count}`;
  for (let seq = 1; seq <= totals.count; seq++) {
    const entry = checkEntry(ledger[String(seq)], seq);
    if (typeof entry === 'string') return `charge ${seq}: ${entry}`;
    for (const [field, id] of [
      ['by_client', entry.client_id],
      ['by_grant', entry.grant_id],
    ] as const)
      sums[field].set(id, addAmount(sums[field].get(id) ?? 0, entry.amount));
  }
  for (const field of ['by_client', 'by_grant'] as const) {
    const recorded = totals[field];
    if (Object.keys(recorded).length !== sums[field].size) return `its sums per ${field.slice(3)} are not "charges.${field}"`;
    for (const [id, sum] of sums[field])
      if (recorded[id] !== sum)
        return `its charges of ${field.slice(3)} ${id} sum to ${sum} AKh, but "charges.${field}" says ${recorded[id]}`;
  }
  return null;
}
