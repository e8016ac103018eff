import type { FindingSeverity } from '../protocol/findings.js';
import { age, relativeTime } from '../protocol/format.js';
import { TRAINING_STEPS } from '../protocol/jobs.js';
import { SCOPES, isSupportedScope } from '../protocol/scopes.js';
import { clientName, findingClient, type DashboardState } from './model.js';

/**
 * What each view shows, as plain rows and lines: pure functions of the dashboard state, so the filter,
 * the tests and the Ink components all see the same text.
 */

export const VIEWS = ['grants', 'families', 'jobs', 'charges', 'requests', 'approvals', 'faults', 'findings'] as const;
export type ViewName = (typeof VIEWS)[number];

export const VIEW_TITLES: Record<ViewName, string> = {
  grants: 'Grants',
  families: 'Token families',
  jobs: 'Jobs',
  charges: 'Charges',
  requests: 'Requests',
  approvals: 'Approvals',
  faults: 'Faults',
  findings: 'Findings',
};

export type Tone = 'normal' | 'alarm' | 'ok' | 'dim' | 'warn';

export interface Row {
  key: string;
  cells: string[];
  tone: Tone;
}

export interface Line {
  text: string;
  tone: Tone;
  /**
   * Every detail line wraps to the pane's width at spaces (a cut word reads as another word: 'the whole family d');
   * its continuation lines start this many columns in. Unset: under its label (`client   …`: 9), else 2 further in
   * than the line itself.
   */
  hang?: number;
}

export interface Table {
  headers: string[];
  /** Column widths; the last column takes what is left. */
  widths: number[];
  rows: Row[];
}

/**
 * Client names, questions and descriptions come from clients: a control character in them could move the cursor,
 * set the window title or write the clipboard (OSC 52). Each becomes one visible replacement character.
 */
export const printable = (text: string): string => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '\ufffd');

/** `12:03:04` in UTC, as the CLI prints times (ISO, Z): the same on every machine. */
export const clockTime = (ms: number | null): string => (ms ? new Date(ms).toISOString().slice(11, 19) : '-');
const line = (text: string, tone: Tone = 'normal', hang?: number): Line => (hang === undefined ? { text, tone } : { text, tone, hang });
/** The labels of the detail panes (`client   `, `families `) take 9 columns. */
const LABEL_WIDTH = 9;
const LABELLED = /^[a-z_]+ +(?=\S)/;
/** Where a line's continuation starts when it does not say: under the value of a `label    value` line, else 2 in. */
const hangOf = (l: Line): number => {
  if (l.hang !== undefined) return l.hang;
  const label = LABELLED.exec(l.text)?.[0].length;
  return label === LABEL_WIDTH ? label : l.text.length - l.text.trimStart().length + 2;
};
const isWriteScope = (scope: string): boolean => isSupportedScope(scope) && SCOPES[scope].writes;
/** Write scopes carry a mark wherever scopes are listed. */
export const markScopes = (scopes: readonly string[]): string => scopes.map((s) => (isWriteScope(s) ? `${s}✎` : s)).join(' ');
const amount = (n: number): string => `${Number(n.toFixed(3))} AKh`;
const newestFirst = <T extends { created_at: number }>(items: T[]): T[] => [...items].sort((a, b) => b.created_at - a.created_at);

/** A finding's colour: under NO_COLOR the severity is still spelled out in its row. */
const SEVERITY_TONES: Record<FindingSeverity, Tone> = { error: 'alarm', warning: 'warn', info: 'normal' };
/** How long ago, on the emulator clock (never "in …": a restore can set a manual clock back). */
const ago = (state: DashboardState, at: number): string => `${age(Math.max(0, state.now - at))} ago`;

/** Why a token family ended (FamilyEndReason), in words. */
const ENDINGS: Record<string, string> = {
  code_replay: 'its authorization code was used twice',
  grant_revoked: 'its grant was revoked',
  token_revoked: 'the client revoked its token',
};

/** A job's row colour: failed, done, or still running. */
const toneOf = (failed: boolean, done: boolean): Tone => (failed ? 'alarm' : done ? 'ok' : 'normal');

export function table(state: DashboardState, view: ViewName): Table {
  switch (view) {
    case 'grants':
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
    case 'families':
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
    case 'jobs': {
      const research = Object.values(state.research).map((j) => ({
        key: j.id,
        created_at: j.created_at,
        cells: [
          'research',
          j.status,
          progress(['queued', 'running', 'succeeded'], j.status),
          age((j.finished_at ?? state.now) - j.created_at),
          clientName(state, j.client_id),
          j.question,
        ],
        tone: toneOf(j.status === 'failed', j.status === 'succeeded'),
      }));
      const training = Object.values(state.training).map((d) => ({
        key: d.id,
        created_at: d.created_at,
        cells: [
          'training',
          d.processing_step,
          progress(TRAINING_STEPS, d.processing_step),
          age((d.finished_at ?? state.now) - d.created_at),
          clientName(state, d.client_id),
          d.file_name,
        ],
        tone: toneOf(d.processing_step === 'failed', d.processing_step === 'indexed'),
      }));
      return {
        headers: ['KIND', 'STATUS', 'PROGRESS', 'ELAPSED', 'CLIENT', 'WHAT'],
        widths: [8, 9, 8, 8, 14, 27],
        rows: newestFirst([...research, ...training]).map(({ key, cells, tone }) => ({ key, cells, tone })),
      };
    }
    case 'charges':
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
    case 'requests':
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
    case 'approvals': {
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
    }
    case 'faults': {
      const order = { armed: 0, spent: 1, cleared: 2 } as const;
      return {
        headers: ['STATE', 'FAULT', 'KIND', 'FIRED', 'WHAT'],
        widths: [7, 9, 14, 5, 40],
        rows: Object.values(state.faults)
          .sort((a, b) => order[a.state] - order[b.state] || b.created_at - a.created_at)
          .map((f) => ({
            key: f.id,
            cells: [
              f.state,
              f.id,
              f.kind,
              `${f.fired}${f.remaining !== null && f.state === 'armed' ? `/${f.fired + f.remaining}` : ''}`,
              f.description,
            ],
            tone: f.state === 'armed' ? 'warn' : 'dim',
          })),
      };
    }
    case 'findings':
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
  }
}

/** An access token of a live family: revoked, or its countdown. */
function tokenState(state: DashboardState, t: { expires_at: number; revoked: boolean }): string {
  if (t.revoked) return 'revoked';
  return t.expires_at > state.now ? `expires ${relativeTime(t.expires_at - state.now)}` : 'expired';
}

/** `■■■□□` for the steps done of a fixed sequence; a failed job shows where it stopped. */
function progress(steps: readonly string[], current: string): string {
  const at = steps.indexOf(current);
  const done = at < 0 ? 0 : at + 1;
  return current === 'failed' ? '✖' : '■'.repeat(done) + '□'.repeat(steps.length - done);
}

/** The detail pane of the selected row. */
export function detail(state: DashboardState, view: ViewName, key: string | undefined): Line[] {
  if (view === 'charges') return chargeTotals(state);
  // No grant yet: where a person and a client start.
  if (key === undefined && view === 'grants') return serviceLines(state);
  if (key === undefined) return [line('nothing selected', 'dim')];
  switch (view) {
    case 'grants': {
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
    }
    case 'families': {
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
    }
    case 'jobs': {
      const j = state.research[key];
      if (j) {
        return [
          line(`research job ${j.id}`),
          line(`client   ${clientName(state, j.client_id)}   grant ${j.grant_id}`),
          line(`question ${j.question}`),
          line(
            `status   ${j.status}  ${progress(['queued', 'running', 'succeeded'], j.status)}`,
            j.status === 'failed' ? 'alarm' : j.status === 'succeeded' ? 'ok' : 'normal',
          ),
          line(
            `created  ${clockTime(j.created_at)}   ${
              j.finished_at ? `finished ${clockTime(j.finished_at)} after` : 'running for'
            } ${age((j.finished_at ?? state.now) - j.created_at)}`,
          ),
          ...(j.error ? [line(`error    ${j.error}`, 'alarm')] : []),
        ];
      }
      const d = state.training[key];
      if (!d) return [];
      return [
        line(`training document ${d.id}`),
        line(`client   ${clientName(state, d.client_id)}   grant ${d.grant_id}`),
        line(`file     ${d.file_name} (${d.size} bytes)`),
        line(
          `step     ${TRAINING_STEPS.map((s) => (s === d.processing_step ? `[${s}]` : s)).join(' › ')}` +
            `${d.processing_step === 'failed' ? ' › [failed]' : ''}`,
          d.processing_step === 'failed' ? 'alarm' : d.processing_step === 'indexed' ? 'ok' : 'normal',
        ),
        line(
          `created  ${clockTime(d.created_at)}   ${
            d.finished_at ? `done ${clockTime(d.finished_at)} after` : 'running for'
          } ${age((d.finished_at ?? state.now) - d.created_at)}`,
        ),
        ...(d.error ? [line(`error    ${d.error}`, 'alarm')] : []),
      ];
    }
    case 'requests': {
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
    }
    case 'faults': {
      const f = state.faults[key];
      if (!f) return [];
      return [
        line(`fault ${f.id} (${f.kind}), armed at ${clockTime(f.created_at)}`),
        line(f.description, f.state === 'armed' ? 'warn' : 'normal'),
        line(
          `state    ${f.state}   fired ${f.fired}×${f.remaining !== null ? `, ${f.remaining} left` : ''}${
            f.last_fired_at ? `, last at ${clockTime(f.last_fired_at)}` : ''
          }`,
        ),
        line('faults are armed with serve --fault, POST /_admin/faults or faults.add()', 'dim'),
      ];
    }
    case 'findings': {
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
    }
    case 'approvals': {
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
    }
  }
}

/**
 * Where this emulator serves what, as the ready lines of `serve` say it: a dashboard (`serve --ui` prints no ready
 * lines) is where a person looks for the consent and settings pages.
 */
export function serviceLines(state: DashboardState): Line[] {
  const s = state.service;
  if (!s) return [line('waiting for the emulator…', 'dim')];
  return [
    line(`base_url ${s.base_url}   (issuer, API, ${s.base_url}/mcp)`),
    line(`auth_url ${s.auth_url}   (browser pages)`),
    ...pageLines(state),
    line(`metadata ${s.base_url}/.well-known/oauth-authorization-server`),
  ];
}

/** The consent and settings pages: in the help, the Grants view with nothing selected, and each grant's detail. */
function pageLines(state: DashboardState): Line[] {
  const s = state.service;
  if (!s) return [];
  return [
    line(`consent  ${s.auth_url}/oauth/authorize   (a client's login opens it)`),
    line(`settings ${s.auth_url}/settings   (the person's grants, to revoke)`),
  ];
}

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

/** Whether the view's detail is mostly sentences (and so may need more rows than its half of a stacked layout). */
export const detailWraps = (view: ViewName): boolean => view === 'findings';

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
