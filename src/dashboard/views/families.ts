import { relativeTime } from '../../protocol/format.js';
import { clientName, type DashboardState } from '../model.js';
import { clockTime, line, newestFirst, type View } from './common.js';

/** Why a token family ended (FamilyEndReason), in words. */
const ENDINGS: Record<string, string> = {
  code_replay: 'its authorization code was used twice',
  grant_revoked: 'its grant was revoked',
  token_revoked: 'the client revoked its token',
};

/** An access token of a live family: revoked, or its countdown. */
function tokenState(state: DashboardState, t: { expires_at: number; revoked: boolean }): string {
  if (t.revoked) return 'revoked';
  return t.expires_at > state.now ? `expires ${relativeTime(t.expires_at - state.now)}` : 'expired';
}

/** The Token families view: each family with its refresh-token chain and access tokens; a replay stands out. */
export const families: View = {
  title: 'Token families',
  table(state) {
    return {
      headers: ['STATUS', 'CLIENT', 'FAMILY', 'GEN', 'TOKENS', 'ACCESS TOKEN'],
      widths: [11, 17, 16, 3, 6, 21],
      rows: newestFirst(Object.values(state.families)).map((f) => {
        const last = f.access_tokens.at(-1);
        const current = f.chain.at(-1)?.generation ?? 0;
        const status = f.status === 'active' ? 'active' : f.invalidated_reason === 'refresh_replay' ? 'REPLAYED' : 'invalidated';
        return {
          key: f.id,
          cells: [
            status,
            clientName(state, f.client_id),
            f.id,
            String(current),
            String(f.access_tokens.length),
            // A dead family's tokens no longer count down: they ended with it, whatever their exp says.
            f.status !== 'active' ? `ended ${clockTime(f.invalidated_at)}` : last ? tokenState(state, last) : '-',
          ],
          tone:
            f.status === 'active'
              ? 'normal'
              : f.invalidated_reason === 'refresh_replay' || f.invalidated_reason === 'code_replay'
                ? 'alarm'
                : 'dim',
        };
      }),
    };
  },
  detail(state, key) {
    const f = state.families[key];
    if (!f) return [];
    const lines = [line(`family ${f.id} of grant ${f.grant_id}, ${clientName(state, f.client_id)}`)];
    if (f.status === 'invalidated') {
      const replay = f.invalidated_reason === 'refresh_replay';
      lines.push(
        line(
          replay
            ? `✖ REPLAY of refresh token gen ${f.replayed_generation ?? '(older than kept)'} at ${clockTime(f.invalidated_at)}: the whole family died`
            : `✖ ended at ${clockTime(f.invalidated_at)}: ${ENDINGS[f.invalidated_reason ?? ''] ?? f.invalidated_reason ?? '?'}; its tokens no longer work`,
          replay || f.invalidated_reason === 'code_replay' ? 'alarm' : 'dim',
        ),
      );
    }
    lines.push(line('refresh tokens:', 'dim'));
    const current = f.chain.at(-1)?.generation;
    for (const g of f.chain) {
      const replayed = g.generation === f.replayed_generation;
      const state_ = g.generation === current && f.status === 'active' ? 'current' : g.generation === current ? 'invalidated' : 'rotated';
      lines.push(
        line(
          `  gen ${g.generation}  ${state_.padEnd(11)} issued ${clockTime(g.issued_at)}` +
            `${g.rotated_at ? `  rotated ${clockTime(g.rotated_at)}` : ''}${replayed ? '  ← replayed' : ''}`,
          replayed ? 'alarm' : g.generation === current && f.status === 'active' ? 'ok' : 'normal',
        ),
      );
    }
    lines.push(line('access tokens (newest last):', 'dim'));
    for (const t of f.access_tokens) {
      lines.push(
        line(
          `  ${t.jti.slice(0, 10)}  issued ${clockTime(t.issued_at)}` +
            `  ${f.status === 'active' || t.revoked ? tokenState(state, t) : `ended with the family at ${clockTime(f.invalidated_at)}`}`,
          f.status !== 'active' || t.revoked || t.expires_at <= state.now ? 'dim' : 'normal',
        ),
      );
    }
    return lines;
  },
};
