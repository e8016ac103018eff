import { clientName } from '../model.js';
import { amount, clockTime, isWriteScope, line, markScopes, newestFirst, type View } from './common.js';
import { pageLines, serviceLines } from './service.js';

/** The Grants view: every grant, newest first; with none selected, where this emulator serves what. */
export const grants: View = {
  title: 'Grants',
  // No grant yet: where a person and a client start.
  unselected: serviceLines,
  table(state) {
    return {
      headers: ['STATUS', 'CLIENT (unverified)', 'PERSON', 'SCOPES', 'CREATED', 'USED'],
      widths: [7, 19, 12, 20, 8, 8],
      rows: newestFirst(Object.values(state.grants)).map((g) => ({
        key: g.id,
        cells: [
          g.status,
          clientName(state, g.client_id),
          state.persons[g.person_id] ?? g.person_id,
          markScopes(g.scopes) || '(identity)',
          clockTime(g.created_at),
          clockTime(g.last_used_at),
        ],
        tone: g.status === 'revoked' ? 'dim' : 'normal',
      })),
    };
  },
  detail(state, key) {
    const g = state.grants[key];
    if (!g) return [];
    const families = Object.values(state.families).filter((f) => f.grant_id === g.id);
    return [
      line(`grant ${g.id}`),
      line(`client   “${clientName(state, g.client_id)}” (unverified name) ${g.client_id}`),
      line(`person   ${state.persons[g.person_id] ?? '?'} (${g.person_id})`),
      line(`kind     ${g.resource ? `agent token for ${g.resource}` : 'identity only (no resource)'}`),
      line(
        `scopes   ${g.scopes.map((s) => (isWriteScope(s) ? `${s} (writes)` : s)).join(', ') || '-'}`,
        g.scopes.some(isWriteScope) ? 'warn' : 'normal',
      ),
      line(
        `status   ${g.status}${g.revoked_at ? ` by ${g.revoked_by ?? '?'} at ${clockTime(g.revoked_at)}` : '   (r revokes it, asks first)'}`,
        g.status === 'revoked' ? 'alarm' : 'ok',
      ),
      line(`created  ${clockTime(g.created_at)}   last used ${clockTime(g.last_used_at)}`),
      line(
        `families ${families.length} (${families.filter((f) => f.status === 'active').length} active)   charged ${amount(state.charges.by_grant[g.id] ?? 0)}`,
      ),
      // Where the person sees this grant and where a client's login asks: in view whatever the width (docs/dashboard.md).
      ...pageLines(state),
    ];
  },
};
