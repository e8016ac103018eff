import { clientName, type DashboardState } from '../model.js';
import { amount, clockTime, line, type Line, type View } from './common.js';

function chargeTotals(state: DashboardState): Line[] {
  const clients = Object.entries(state.charges.by_client).sort((a, b) => b[1] - a[1]);
  const total = clients.reduce((sum, [, n]) => sum + n * 1000, 0) / 1000;
  const lines = [line(`total ${amount(total)}   (replays and polling are free)`), line('per client:', 'dim')];
  for (const [id, n] of clients) lines.push(line(`  ${amount(n).padStart(10)}  ${clientName(state, id)}`));
  lines.push(line('per grant:', 'dim'));
  for (const [id, n] of Object.entries(state.charges.by_grant).sort((a, b) => b[1] - a[1])) {
    const grant = state.grants[id];
    lines.push(line(`  ${amount(n).padStart(10)}  ${id}${grant ? `  ${clientName(state, grant.client_id)}` : ''}`));
  }
  return lines;
}

/** The Charges view: the charge log, newest first; the detail pane holds the totals, whatever is selected. */
export const charges: View = {
  title: 'Charges',
  unselected: chargeTotals,
  detail: (state) => chargeTotals(state),
  table(state) {
    return {
      headers: ['TIME', 'CLIENT', 'ROUTE', 'AMOUNT', 'IDEMPOTENCY KEY'],
      widths: [8, 17, 15, 13, 22],
      rows: [...state.charges.entries].reverse().map((e) => ({
        key: String(e.seq),
        cells: [
          clockTime(e.at),
          clientName(state, e.client_id),
          e.route,
          e.free ? 'free (replay)' : amount(e.amount),
          e.idempotency_key ?? '-',
        ],
        tone: e.free ? 'dim' : 'normal',
      })),
    };
  },
};
