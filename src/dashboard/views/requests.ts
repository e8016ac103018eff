import { clientName } from '../model.js';
import { clockTime, line, type View } from './common.js';

/** The Requests view: the request log, newest first; a fault marks the answers it shaped. */
export const requests: View = {
  title: 'Requests',
  table(state) {
    return {
      headers: ['TIME', 'METHOD', 'PATH', 'STATUS', 'MS', 'CLIENT'],
      widths: [8, 6, 28, 6, 6, 20],
      rows: [...state.requests].reverse().map((r) => ({
        key: String(r.seq),
        // "F": an injected fault shaped this answer (see the Faults view).
        cells: [
          clockTime(r.at),
          r.method,
          r.path,
          `${r.status}${r.faults?.length ? ' F' : ''}`,
          String(r.ms),
          r.client_id ? clientName(state, r.client_id) : r.bearer ? `(${r.bearer} token)` : '-',
        ],
        tone: r.status >= 500 || r.faults?.length ? 'alarm' : r.status >= 400 ? 'warn' : 'normal',
      })),
    };
  },
  detail(state, key) {
    const r = state.requests.find((x) => String(x.seq) === key);
    if (!r) return [];
    return [
      line(`${r.method} ${r.path}`),
      line(
        `status   ${r.status}   ${r.ms} ms ` +
          `  on ${(r.server === 'api' ? state.service?.base_url : state.service?.auth_url) ?? `the ${r.server} server`}   at ${clockTime(r.at)}`,
        r.status >= 500 ? 'alarm' : r.status >= 400 ? 'warn' : 'normal',
      ),
      line(
        `client   ${
          r.client_id
            ? `${clientName(state, r.client_id)} (${r.client_id})`
            : r.bearer
              ? `- (${r.bearer} bearer token, refused)`
              : '- (no bearer token)'
        }`,
        r.bearer ? 'warn' : 'normal',
      ),
      ...(r.grant_id ? [line(`grant    ${r.grant_id}`)] : []),
      ...(r.faults?.length ? [line(`faults   ${r.faults.join(', ')} (injected on purpose)`, 'alarm')] : []),
    ];
  },
};
