import { clientName } from '../model.js';
import { clockTime, line, type View } from './common.js';

/** The Approvals view: the agent plane's write actions, those waiting for the person first. */
export const approvals: View = {
  title: 'Approvals',
  table(state) {
    const order = { pending: 0, approved: 1, rejected: 2, applied: 3 } as const;
    return {
      headers: ['STATUS', 'CLIENT', 'KIND', 'OP', 'DESCRIPTION'],
      widths: [8, 14, 9, 6, 38],
      rows: Object.values(state.actions)
        .sort((a, b) => order[a.status] - order[b.status] || b.created_at - a.created_at)
        .map((a) => ({
          key: a.id,
          cells: [a.status, clientName(state, a.client_id), a.kind, a.operation, a.description],
          tone: a.status === 'pending' ? 'warn' : a.status === 'rejected' ? 'dim' : 'normal',
        })),
    };
  },
  detail(state, key) {
    const a = state.actions[key];
    if (!a) return [];
    return [
      line(`write action ${a.id}`),
      line(`client   ${clientName(state, a.client_id)}   person ${a.person_id}`),
      line(`change   ${a.operation} ${a.kind}`),
      line(a.description),
      line(
        `status   ${a.status}${a.decided_at ? ` (decided ${clockTime(a.decided_at)})` : ''}`,
        a.status === 'pending' ? 'warn' : 'normal',
      ),
      line(a.status === 'pending' ? 'a approves, x rejects (asks first)' : '', 'dim'),
    ];
  },
};
