import type { DashboardState } from './model.js';
import { VIEWS, VIEW_TITLES, clockTime, type Line, type Row, type Table, type Tone, type ViewName } from './views/index.js';

/** How the views' rows and lines are laid out on the screen: the header, the tabs, columns and wrapped lines. */

/** The labels of the detail panes (`client   `, `families `) take 9 columns. */
const LABEL_WIDTH = 9;
const LABELLED = /^[a-z_]+ +(?=\S)/;
/** Where a line's continuation starts when it does not say: under the value of a `label    value` line, else 2 in. */
const hangOf = (l: Line): number => {
  if (l.hang !== undefined) return l.hang;
  const label = LABELLED.exec(l.text)?.[0].length;
  return label === LABEL_WIDTH ? label : l.text.length - l.text.trimStart().length + 2;
};

/**
 * The header: what is watched, whether the stream is live, and the server's clock; the auth and settings URLs too
 * when the width has room for them (the Grants view and the help always show them).
 */
export function header(state: DashboardState, columns: number): string {
  const c = state.connection;
  if (c.status !== 'connected') {
    return `agent-access ○ ${c.status === 'connecting' ? 'connecting' : 'DISCONNECTED, retrying'}${c.detail ? `: ${c.detail}` : ''}`;
  }
  const s = state.service;
  const clock = `  clock ${clockTime(state.now)}Z`;
  let text = `agent-access ● live  ${s?.base_url ?? ''}`;
  for (const part of s ? [`  auth ${s.auth_url}`, `  settings ${s.auth_url}/settings`] : []) {
    if (text.length + part.length + clock.length > columns) break;
    text += part;
  }
  return text + clock;
}

/**
 * The lines wrapped to `width` at spaces, their continuation lines `hang` columns in (none on a pane too narrow for
 * that); a word longer than a line is broken. A number and its unit (`0.4 s`, `2048 bytes`, `14m 54s`) stay on one
 * line, and so do `← replayed` and `at 12:03:04`: the messages come from the server with plain spaces, and `0.4` at
 * the end of one line and `s after` at the start of the next reads as something else.
 */
export function wrapLines(lines: readonly Line[], width: number): Line[] {
  return lines.flatMap((l) => (l.text.length <= width ? [l] : wrapText(l.text, width, hangOf(l)).map((text) => ({ text, tone: l.tone }))));
}

const UNIT = /^(?:ms|s|m|h|d|min|AKh|bytes|KB|MB|%|×)(?![\p{L}\p{N}])/u;
const DURATION_PART = /^\d+(?:ms|s|m|h|d)$/;
const MARK = /^[←→✖]$/;
const TIME = /^\d\d:\d\d/;
/**
 * Whether the space at `at` is not a place to break: it joins a number to its unit, two parts of one duration, a mark
 * (`← replayed`) to its word, or `at` to its time.
 */
function joins(text: string, at: number): boolean {
  const before = text.slice(0, at).split(' ').at(-1) ?? '';
  const after = text.slice(at + 1);
  if (/\d$/.test(before) && UNIT.test(after)) return true;
  if (MARK.test(before) || (before === 'at' && TIME.test(after))) return true;
  return DURATION_PART.test(before) && DURATION_PART.test(after.split(' ')[0] ?? '');
}

/**
 * The last space at or before `room` to break at (past the line's own indent): one that keeps a number with its unit
 * if there is one.
 */
function breakAt(text: string, room: number): number {
  const indent = text.length - text.trimStart().length;
  let fallback = -1;
  for (let i = text.lastIndexOf(' ', room); i > indent; i = text.lastIndexOf(' ', i - 1)) {
    if (!joins(text, i)) return i;
    if (fallback < 0) fallback = i;
  }
  return fallback;
}

function wrapText(text: string, width: number, hang: number): string[] {
  if (width < 1) return [text];
  const indent = hang < width / 2 ? ' '.repeat(hang) : '';
  const out: string[] = [];
  let rest = text;
  let prefix = '';
  while (prefix.length + rest.length > width) {
    const room = width - prefix.length;
    const space = breakAt(rest, room);
    const cut = space > 0 ? space : room;
    out.push(prefix + rest.slice(0, cut).trimEnd());
    rest = rest.slice(cut).trimStart();
    prefix = indent;
  }
  out.push(prefix + rest);
  return out;
}

export interface Tab {
  view: ViewName;
  label: string;
  /** `alarm` or `warn` when the tab carries a badge. */
  tone: Tone;
}

/**
 * The tab row: each view's key, name, count and badge (`2!`: approvals waiting, faults armed, error findings). When the
 * row is wider than the terminal, the counts go first (each list shows its own), then, from the right, the names of
 * the tabs that are neither the current one nor badged: a badge stays in view, whatever the width.
 */
export function tabs(state: DashboardState, current: ViewName, columns: number): Tab[] {
  const pending = Object.values(state.actions).filter((a) => a.status === 'pending').length;
  const armed = Object.values(state.faults).filter((f) => f.state === 'armed').length;
  const errors = state.findings.filter((f) => f.severity === 'error').length;
  // Charges and Requests have no count: both logs are capped, so their length says little.
  const counts: Partial<Record<ViewName, number>> = {
    grants: Object.values(state.grants).filter((g) => g.status === 'active').length,
    families: Object.values(state.families).filter((f) => f.status === 'active').length,
    jobs: Object.keys(state.research).length + Object.keys(state.training).length,
  };
  const badges: Partial<Record<ViewName, [string, Tone]>> = {
    ...(pending ? { approvals: [`${pending}!`, 'warn'] } : {}),
    ...(armed ? { faults: [`${armed}!`, 'warn'] } : {}),
    ...(errors ? { findings: [`${errors}!`, 'alarm'] } : {}),
  };
  const row = (withCounts: boolean, short: ReadonlySet<ViewName>): Tab[] =>
    VIEWS.map((v, i) => {
      const count = withCounts ? counts[v] : undefined;
      const badge = badges[v];
      const label = short.has(v)
        ? String(i + 1)
        : [String(i + 1), v === 'families' ? 'Families' : VIEW_TITLES[v], count === undefined ? '' : String(count), badge?.[0] ?? '']
            .filter(Boolean)
            .join(' ');
      return { view: v, label, tone: badge?.[1] ?? 'normal' };
    });
  // One column before each tab: a space before the first, a separator before the others.
  const fits = (t: Tab[]) => t.reduce((n, tab) => n + 1 + tab.label.length, 0) <= columns;
  let result = row(true, new Set());
  if (fits(result)) return result;
  const short = new Set<ViewName>();
  result = row(false, short);
  for (const v of [...VIEWS].reverse()) {
    if (fits(result)) break;
    if (v === current || badges[v]) continue;
    short.add(v);
    result = row(false, short);
  }
  return result;
}

/** Fits cells into columns: each padded or cut to its width, the last one to what is left. */
export function fitColumns(cells: string[], widths: number[], total: number): string {
  let out = '';
  cells.forEach((cell, i) => {
    const last = i === cells.length - 1;
    const width = last ? Math.max(0, total - out.length) : (widths[i] ?? 10);
    const text = cell.length > width ? `${cell.slice(0, Math.max(0, width - 1))}…` : cell;
    out += last ? text : `${text.padEnd(width)} `;
  });
  return out.length > total ? out.slice(0, total) : out;
}

/** A column this narrow holds a fixed-width value (a time, a status, a count): it keeps its width when there is room. */
const FIXED_WIDTH = 11;

/**
 * Columns for a given width: the widths fit 79 columns (80 less the selection mark); narrower, they shrink; wider, the
 * columns of text (names, paths, descriptions) share the room in proportion to their widths.
 */
export function widthsFor(t: Table, total: number): number[] {
  const needed = t.widths.reduce((a, b) => a + b + 1, -1);
  if (needed > total) {
    const scale = total / needed;
    return t.widths.map((w) => Math.max(2, Math.floor(w * scale)));
  }
  // The last column takes what is left in any case (fitColumns): the others share the room.
  const grows = (w: number, i: number) => w > FIXED_WIDTH && i < t.widths.length - 1;
  const growing = t.widths.reduce((n, w, i) => n + (grows(w, i) ? w : 0), 0);
  if (growing === 0) return t.widths;
  const extra = total - needed;
  return t.widths.map((w, i) => (grows(w, i) ? w + Math.floor((extra * w) / growing) : w));
}

/** The text a filter matches: every cell of the row. */
export const rowText = (row: Row): string => row.cells.join(' ').toLowerCase();
