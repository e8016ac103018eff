import type { FindingSeverity } from '../../protocol/findings.js';
import { age } from '../../protocol/format.js';
import { findingClient, type DashboardState } from '../model.js';
import { clockTime, line, type Tone, type View } from './common.js';

/** A finding's colour: under NO_COLOR the severity is still spelled out in its row. */
const SEVERITY_TONES: Record<FindingSeverity, Tone> = { error: 'alarm', warning: 'warn', info: 'normal' };
/** How long ago, on the emulator clock (never "in …": a restore can set a manual clock back). */
const ago = (state: DashboardState, at: number): string => `${age(Math.max(0, state.now - at))} ago`;

/** The Findings view: what the emulator noticed about the clients, most severe first. */
export const findings: View = {
  title: 'Findings',
  detailWraps: true,
  table(state) {
    return {
      headers: ['SEVERITY', 'CODE', 'CLIENT (unverified)', 'COUNT', 'LAST SEEN'],
      widths: [8, 29, 19, 5, 14],
      // Kept in display order by the reducer: most severe first, then the newest.
      rows: state.findings.map((f) => ({
        key: f.id,
        cells: [f.severity.toUpperCase(), f.code, findingClient(state, f), String(f.count), ago(state, f.last_at)],
        tone: SEVERITY_TONES[f.severity],
      })),
    };
  },
  detail(state, key) {
    const f = state.findings.find((x) => x.id === key);
    if (!f) return [];
    const name = state.clients[f.client_id]?.client_name ?? f.client_name;
    const ids = f.grant_id
      ? `grant    ${f.grant_id}${f.family_id ? `   family ${f.family_id}` : ''}`
      : f.family_id
        ? `family   ${f.family_id}`
        : '';
    // Message and hint are sentences: they wrap to the pane, never cut.
    return [
      line(
        `${f.severity.toUpperCase()} ${f.code}   seen ${f.count}×, last ${ago(state, f.last_at)} (${clockTime(f.last_at)}), first ${clockTime(f.first_at)}`,
        SEVERITY_TONES[f.severity],
        2,
      ),
      line(`client   ${name ? `“${name}” (unverified name) ` : ''}${f.client_id}`, 'normal', 9),
      line(`what     ${f.message}`, 'normal', 9),
      line(`hint     ${f.hint}`, 'normal', 9),
      line(`spec     ${f.spec}`, 'normal', 9),
      ...(ids ? [line(ids, 'normal', 9)] : []),
    ];
  },
};
