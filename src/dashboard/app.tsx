import { Box, Text, useApp, useInput, useStdout, type Key } from 'ink';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { keysOf } from './keys.js';
import { clientName, initialState, reduce, type DashboardState, type StreamMessage } from './model.js';
import { fitColumns, header as headerText, rowText, tabs, widthsFor, wrapLines } from './layout.js';
import {
  VIEWS,
  VIEW_TITLES,
  clockTime,
  detail,
  detailWraps,
  printable,
  serviceLines,
  table,
  type Line,
  type Row,
  type Tone,
  type ViewName,
} from './views/index.js';

export interface DashboardActions {
  revokeGrant(grantId: string): Promise<void>;
  decideAction(actionId: string, decision: 'approve' | 'reject'): Promise<void>;
}

export interface DashboardProps {
  /** Starts the source of stream messages; returns the function that stops it. */
  subscribe: (push: (message: StreamMessage) => void) => () => void;
  actions: DashboardActions;
  /** False under NO_COLOR: tones then show as text marks and attributes only. */
  colors: boolean;
  /** How long messages gather before one render (the stream can bring hundreds per second). */
  batchMs?: number;
  /** How long the footer shows the answer to a key (`revoked …`, `cancelled`) before the activity line returns. */
  messageMs?: number;
}

type Mode =
  | { kind: 'normal' }
  | { kind: 'help' }
  | { kind: 'filter'; text: string }
  | { kind: 'confirm'; question: string; run: () => Promise<void> };

const TONE_COLORS: Record<Tone, string | undefined> = { normal: undefined, alarm: 'red', ok: 'green', warn: 'yellow', dim: undefined };
const WIDE = 120;
/** Stacked, the list keeps its header and three rows however much its detail needs. */
const MIN_LIST = 4;
/** Stacked, the list keeps its header and seven rows when the terminal has them, however much the detail could use. */
const LIST_ROWS = 8;
/** How many rows' details (from the top, and the selected one) size the stacked detail pane: each render computes them. */
const DETAIL_SAMPLE = 50;
const MESSAGE_MS = 5000;

/**
 * The part of `lines` from `offset` that fits `height` rows. What does not fit is said, not dropped silently: the last
 * row then says which lines show and which keys scroll. `offset` is clamped (see `maxOffset`).
 */
function windowed(lines: readonly Line[], height: number, offset: number, keys: string): Line[] {
  if (lines.length <= height || height < 2) return lines.slice(0, height);
  const from = Math.min(offset, maxOffset(lines.length, height));
  const shown = lines.slice(from, from + height - 1);
  return [...shown, { text: `… lines ${from + 1}-${from + shown.length} of ${lines.length}: ${keys} scroll`, tone: 'dim' }];
}
/** The largest useful offset: the last lines fill the rows above the scroll note. */
const maxOffset = (count: number, height: number): number => (count <= height ? 0 : count - (height - 1));

/** The terminal's size, following resizes; the frame stays one line short of the screen so Ink never clears it. */
function useTerminalSize(): { columns: number; rows: number } {
  const { stdout } = useStdout();
  const read = () => ({ columns: stdout.columns || 80, rows: stdout.rows || 24 });
  const [size, setSize] = useState(read);
  useEffect(() => {
    const onResize = () => setSize(read());
    stdout.on('resize', onResize);
    return () => void stdout.off('resize', onResize);
  }, [stdout]);
  return size;
}

function useStream(subscribe: DashboardProps['subscribe'], batchMs: number): DashboardState {
  const [state, setState] = useState(initialState);
  useEffect(() => {
    const queue: StreamMessage[] = [];
    let timer: NodeJS.Timeout | undefined;
    const stop = subscribe((message) => {
      queue.push(message);
      timer ??= setTimeout(() => {
        timer = undefined;
        const batch = queue.splice(0);
        setState((s) => batch.reduce(reduce, s));
      }, batchMs);
    });
    return () => {
      clearTimeout(timer);
      stop();
    };
  }, [subscribe, batchMs]);
  return state;
}

export function Dashboard({ subscribe, actions, colors, batchMs = 16, messageMs = MESSAGE_MS }: DashboardProps) {
  const { exit } = useApp();
  const { columns, rows: screenRows } = useTerminalSize();
  const state = useStream(subscribe, batchMs);
  const [view, setView] = useState<ViewName>('grants');
  const [selected, setSelected] = useState<Partial<Record<ViewName, string>>>({});
  const [filters, setFilters] = useState<Partial<Record<ViewName, string>>>({});
  const [mode, setMode] = useState<Mode>({ kind: 'normal' });
  const [message, setMessage] = useState<Line | null>(null);
  // How far the detail pane (of this view and row) and the help are scrolled.
  const [detailScroll, setDetailScroll] = useState<{ of: string; by: number }>({ of: '', by: 0 });
  const [helpScroll, setHelpScroll] = useState(0);

  // A message answers a key (done, cancelled, failed). It goes with the next key, which asks something new, and after
  // `messageMs` on its own: the footer is also where the newest activity shows (a replay, a refused request), and a
  // stale answer must not hide it. "working…" stays until the answer replaces it.
  useEffect(() => {
    if (!message || message.text === 'working…') return;
    const timer = setTimeout(() => setMessage((m) => (m === message ? null : m)), messageMs);
    return () => clearTimeout(timer);
  }, [message, messageMs]);

  const t = useMemo(() => table(state, view), [state, view]);
  const filter = filters[view] ?? '';
  const rows = useMemo(() => (filter ? t.rows.filter((r) => rowText(r).includes(filter.toLowerCase())) : t.rows), [t, filter]);
  const index = Math.max(
    0,
    rows.findIndex((r) => r.key === selected[view]),
  );
  const current = rows[index];

  const height = Math.max(8, screenRows - 1);
  const wide = columns >= WIDE;
  const bodyHeight = height - 4;
  // Body: the list (with a header row) and the detail pane, stacked, or side by side on wide terminals.
  const listWidth = wide ? Math.floor(columns * 0.6) : columns;
  const detailWidth = wide ? columns - listWidth - 1 : columns;
  const details = wrapLines(detail(state, view, current?.key), detailWidth);
  // Stacked, the detail takes the rows the longest detail of the list needs (the same for every row, so the list stands
  // still while the selection moves) and the list the rest: all a tall terminal has. The list keeps LIST_ROWS (or half
  // a short terminal), a list whose details are sentences (findings) MIN_LIST.
  const half = Math.max(3, Math.floor((bodyHeight - 1) / 2));
  const needed = wide
    ? 0
    : [...rows.slice(0, DETAIL_SAMPLE), ...(current ? [current] : [])].reduce(
        (n, r) => Math.max(n, wrapLines(detail(state, view, r.key), detailWidth).length),
        details.length,
      );
  const floor = detailWraps(view) ? MIN_LIST : Math.min(half, LIST_ROWS);
  const listHeight = wide ? bodyHeight : Math.min(bodyHeight - 2, Math.max(floor, bodyHeight - 1 - needed));
  const detailHeight = wide ? bodyHeight : bodyHeight - listHeight - 1;
  // The scroll belongs to the row it was made on: another row or view starts at its top.
  const detailOf = `${view}:${current?.key ?? ''}`;
  const detailOffset = detailScroll.of === detailOf ? Math.min(detailScroll.by, maxOffset(details.length, detailHeight)) : 0;
  const helpLines = wrapLines(
    [...[...HELP, '', 'This emulator'].map((text) => ({ text, tone: 'normal' as const })), ...serviceLines(state)],
    columns,
  );
  const helpOffset = Math.min(helpScroll, maxOffset(helpLines.length, bodyHeight));

  const select = (i: number) => {
    const row = rows[Math.min(Math.max(0, i), rows.length - 1)];
    if (row) setSelected((s) => ({ ...s, [view]: row.key }));
  };
  const confirm = (question: string, run: () => Promise<void>, done: string) =>
    setMode({
      kind: 'confirm',
      question,
      run: () =>
        run().then(
          () => setMessage({ text: done, tone: 'ok' }),
          (e: Error) => setMessage({ text: `failed: ${e.message}`, tone: 'alarm' }),
        ),
    });

  // Keys act on what is on screen now: the handler is rebuilt each render and read through a ref, because Ink
  // re-subscribes a new handler only after the render's effects run, and a key can arrive before that.
  const onKey = useRef<Parameters<typeof useInput>[0]>(() => undefined);
  onKey.current = (input, key) => {
    if (mode.kind === 'filter') {
      if (key.return) {
        setFilters((f) => ({ ...f, [view]: mode.text }));
        setMode({ kind: 'normal' });
      } else if (key.escape) setMode({ kind: 'normal' });
      else if (key.backspace || key.delete) setMode({ kind: 'filter', text: mode.text.slice(0, -1) });
      else if (input && !key.ctrl && !key.meta) setMode({ kind: 'filter', text: mode.text + input });
      return;
    }
    if (mode.kind === 'confirm') {
      if (input === 'y' || input === 'Y') {
        setMessage({ text: 'working…', tone: 'dim' });
        void mode.run();
      } else setMessage({ text: 'cancelled', tone: 'dim' });
      setMode({ kind: 'normal' });
      return;
    }
    setMessage(null);
    if (input === 'q') return exit();
    if (input === '?') return setMode(mode.kind === 'help' ? { kind: 'normal' } : { kind: 'help' });
    if (mode.kind === 'help') {
      if (input === 'j' || key.downArrow) return setHelpScroll(Math.min(helpOffset + 1, maxOffset(helpLines.length, bodyHeight)));
      if (input === 'k' || key.upArrow) return setHelpScroll(Math.max(0, helpOffset - 1));
    }
    if (input === 'J') return setDetailScroll({ of: detailOf, by: Math.min(detailOffset + 1, maxOffset(details.length, detailHeight)) });
    if (input === 'K') return setDetailScroll({ of: detailOf, by: Math.max(0, detailOffset - 1) });
    if (key.escape) {
      if (mode.kind === 'help') setMode({ kind: 'normal' });
      else setFilters((f) => ({ ...f, [view]: '' }));
      return;
    }
    const at = VIEWS.indexOf(view);
    if (key.tab) return setView(VIEWS[(at + (key.shift ? VIEWS.length - 1 : 1)) % VIEWS.length] as ViewName);
    if (/^[1-9]$/.test(input) && Number(input) <= VIEWS.length) return setView(VIEWS[Number(input) - 1] as ViewName);
    if (input === 'j' || key.downArrow) return select(index + 1);
    if (input === 'k' || key.upArrow) return select(index - 1);
    if (key.pageDown) return select(index + listHeight);
    if (key.pageUp) return select(index - listHeight);
    if (input === 'g') return select(0);
    if (input === 'G') return select(rows.length - 1);
    if (input === '/') return setMode({ kind: 'filter', text: filter });
    if (input === 'r' && view === 'grants' && current) {
      const grant = state.grants[current.key];
      if (grant?.status !== 'active') return setMessage({ text: 'this grant is already revoked', tone: 'dim' });
      return confirm(
        `Revoke the grant of “${clientName(state, grant.client_id)}” (${grant.id})? y/n`,
        () => actions.revokeGrant(grant.id),
        `revoked ${grant.id}`,
      );
    }
    if ((input === 'a' || input === 'x') && view === 'approvals' && current) {
      const action = state.actions[current.key];
      if (action?.status !== 'pending') return setMessage({ text: 'this action is already decided', tone: 'dim' });
      const decision = input === 'a' ? 'approve' : 'reject';
      return confirm(
        `${decision === 'approve' ? 'Approve' : 'Reject'} “${action.description}”? y/n`,
        () => actions.decideAction(action.id, decision),
        `${decision === 'approve' ? 'approved' : 'rejected'} ${action.id}`,
      );
    }
  };
  // The keys of one read act one at a time, each on the screen the one before it left: a key is handled only by the
  // handler of a render after the previous key (React may still run the effects of an older render first), and a turn
  // forces that render even when a key changed nothing.
  const queued = useRef<Array<[string, Key]>>([]);
  const handledBy = useRef<typeof onKey.current | null>(null);
  const [, setTurn] = useState(0);
  const pump = useCallback(() => {
    if (queued.current.length === 0) return;
    if (handledBy.current === onKey.current) return setTurn((n) => n + 1);
    handledBy.current = onKey.current;
    onKey.current(...queued.current.shift()!);
    if (queued.current.length > 0) setTurn((n) => n + 1);
  }, []);
  useEffect(pump);
  useInput(
    useCallback(
      (input, key) => {
        queued.current.push(...keysOf(input, key));
        pump();
      },
      [pump],
    ),
  );

  const paint = (tone: Tone, inverse = false) => ({
    ...(colors && TONE_COLORS[tone] ? { color: TONE_COLORS[tone] } : {}),
    ...(tone === 'dim' ? { dimColor: true } : {}),
    ...(inverse ? { inverse: true } : {}),
  });
  const text = (key: string, content: string, tone: Tone = 'normal', inverse = false, width = columns) => (
    <Text key={key} wrap="truncate-end" {...paint(tone, inverse)}>
      {printable(content.length > width ? content.slice(0, width) : content.padEnd(width))}
    </Text>
  );

  const live = state.connection.status === 'connected';
  const header = headerText(state, columns);
  // One column of every list line is the selection mark.
  const widths = widthsFor(t, listWidth - 1);
  const visible = listHeight - 1;
  const offset = index < visible ? 0 : index - visible + 1;
  const listLines: Array<[string, string, Tone, boolean]> = [[`h`, fitColumns(t.headers, widths, listWidth - 1), 'dim', false]];
  rows.slice(offset, offset + visible).forEach((row: Row, i) => {
    listLines.push([row.key, fitColumns(row.cells, widths, listWidth - 1), row.tone, offset + i === index]);
  });
  if (rows.length === 0) listLines.push(['empty', filter ? `nothing matches “${filter}”` : emptyText(view), 'dim', false]);
  while (listLines.length < listHeight) listLines.push([`pad${listLines.length}`, '', 'normal', false]);
  const detailLines = windowed(details, detailHeight, detailOffset, 'J/K');
  while (detailLines.length < detailHeight) detailLines.push({ text: '', tone: 'normal' });

  const footer: [string, Tone] =
    mode.kind === 'filter'
      ? [`filter ${VIEW_TITLES[view]}: ${mode.text}▏ (Enter applies, Esc cancels)`, 'warn']
      : mode.kind === 'confirm'
        ? [mode.question, 'warn']
        : message
          ? [message.text, message.tone]
          : lastActivity(state);
  const viewKeys = view === 'grants' ? '  r revoke' : view === 'approvals' ? '  a approve  x reject' : '';
  const hints = `Tab/1-${VIEWS.length} view  j/k move  / filter${filter ? ` [${filter}] Esc clears` : ''}${viewKeys}  ? help  q quit`;

  return (
    <Box flexDirection="column" width={columns} height={height}>
      {text('header', header, live ? 'normal' : 'alarm')}
      <Box height={1} overflow="hidden">
        {tabs(state, view, columns).map((tab, i) => [
          <Text key={`sep-${tab.view}`} dimColor>
            {i === 0 ? ' ' : '│'}
          </Text>,
          <Text key={tab.view} {...paint(tab.tone, tab.view === view)}>
            {tab.label}
          </Text>,
        ])}
      </Box>
      {mode.kind === 'help' ? (
        <Box flexDirection="column" height={bodyHeight}>
          {windowed(helpLines, bodyHeight, helpOffset, 'j/k').map((h, i) => text(`help${i}`, h.text, h.tone))}
        </Box>
      ) : (
        <Box flexDirection={wide ? 'row' : 'column'} height={bodyHeight}>
          <Box flexDirection="column" width={listWidth}>
            {listLines.map(([key, content, tone, isSelected]) =>
              text(key, `${isSelected ? '›' : ' '}${content}`.slice(0, listWidth), tone, isSelected, listWidth),
            )}
          </Box>
          {wide ? <Box width={1} /> : text('rule', `─ ${VIEW_TITLES[view]} `.padEnd(columns, '─'), 'dim')}
          <Box flexDirection="column" width={detailWidth}>
            {detailLines.map((l, i) => text(`d${i}`, l.text, l.tone, false, detailWidth))}
          </Box>
        </Box>
      )}
      {text('footer', footer[0], footer[1])}
      {text('hints', hints, 'dim')}
    </Box>
  );
}

function lastActivity(state: DashboardState): [string, Tone] {
  const last = state.activity.at(-1);
  return last ? [`${clockTime(last.at)} ${last.text}`, last.alarm ? 'alarm' : 'normal'] : ['', 'normal'];
}

function emptyText(view: ViewName): string {
  switch (view) {
    case 'grants':
      return 'no grants yet: run `agent-access login` or any OAuth client';
    case 'families':
      return 'no token families yet: a code exchange starts one';
    case 'jobs':
      return 'no research or training jobs yet';
    case 'charges':
      return 'nothing charged yet';
    case 'requests':
      return 'no requests yet';
    case 'approvals':
      return 'no write actions: they appear when an agent asks for a change on /mcp';
    case 'faults':
      return 'no faults: arm one with serve --fault, POST /_admin/faults or faults.add()';
    case 'findings':
      return "no findings: one is recorded when a client's traffic shows a habit to change";
  }
}

const HELP = [
  'Keys',
  '  Tab Shift+Tab  next, previous view     1-8  jump to a view',
  '  j k  ↓ ↑       move the selection      g G  first, last    PgDn PgUp  a page',
  '  /              filter the list (Enter applies; Esc clears it)',
  '  r              Grants: revoke the selected grant (asks y/n first)',
  '  a x            Approvals: approve or reject the selected action (asks y/n)',
  '  J K            scroll the detail pane (when it says there is more)',
  '  ?              this help (? or Esc closes it)          q  quit',
  '',
  'Views: 1 Grants  2 Token families  3 Jobs  4 Charges  5 Requests  6 Approvals',
  '       7 Faults (injected on purpose; F after a status: a fault shaped it)',
  '       8 Findings (what a client should change, most severe first)',
  '',
  'Marks',
  '  ✎ after a scope: it writes.  REPLAYED: a refresh token was used twice, so',
  '  its whole family died.  2! on a tab: approvals waiting, faults armed, or',
  '  error findings.  Client names are as registered: unverified.',
  '  Times are the emulator clock in UTC (virtual under a manual clock).',
];
