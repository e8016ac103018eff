import { afterEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { cleanup } from 'ink-testing-library';
import { initialState, reduce, type StreamMessage } from '../../src/dashboard/model.js';
import { wrapLines } from '../../src/dashboard/layout.js';
import { detail, table } from '../../src/dashboard/views/index.js';
import { KEYS, Script, T0, finding, renderDashboard, overview } from '../helpers/dashboard.js';
import { pollUntil } from '../helpers/wait.js';

afterEach(() => cleanup());

const MCP = 'http://127.0.0.1:4100/mcp';

/** A session as a client would cause it: consent, code exchange, a refresh, a replay, a job, charges, a write action. */
export function session(s = new Script()) {
  return [
    { type: 'connection', status: 'connected', url: 'http://127.0.0.1:4100/_admin/events', at: T0 } as const,
    { type: 'overview', overview: overview() } as const,
    s.event('grant.created', {
      grant_id: 'grant-1',
      client_id: 'client-1',
      person_id: 'person-anna',
      scopes: ['ask', 'workspace.write'],
      resource: MCP,
    }),
    s.event('tokens.issued', {
      grant_id: 'grant-1',
      client_id: 'client-1',
      family_id: 'fam-1',
      jti: 'jti-aaaaaaaa1',
      scopes: ['ask'],
      audience: MCP,
      expires_at: T0 + 902_000,
      generation: 1,
      grant_type: 'authorization_code',
    }),
    s.event('refresh.rotated', { grant_id: 'grant-1', family_id: 'fam-1', from_generation: 1, to_generation: 2 }),
    s.event('tokens.issued', {
      grant_id: 'grant-1',
      client_id: 'client-1',
      family_id: 'fam-1',
      jti: 'jti-bbbbbbbb2',
      scopes: ['ask'],
      audience: MCP,
      expires_at: T0 + 903_000,
      generation: 2,
      grant_type: 'refresh_token',
    }),
    s.event('family.invalidated', { grant_id: 'grant-1', family_id: 'fam-1', reason: 'refresh_replay', replayed_generation: 1 }),
    s.event('research.created', {
      job_id: 'job-1',
      client_id: 'client-1',
      grant_id: 'grant-1',
      question: 'Welche Regeln gelten für Hunde im Büro?',
    }),
    s.event('research.running', { job_id: 'job-1', client_id: 'client-1' }),
    s.event('training.received', {
      document_id: 'doc-1',
      client_id: 'client-1',
      grant_id: 'grant-1',
      file_name: 'hausordnung.md',
      size: 2048,
    }),
    s.event('training.step', { document_id: 'doc-1', client_id: 'client-1', processing_step: 'chunking' }),
    s.event('charge.recorded', {
      seq: 1,
      at: s.at,
      client_id: 'client-1',
      grant_id: 'grant-1',
      route: 'POST /research',
      amount: 2,
      unit: 'AKh',
      idempotency_key: 'key-1',
    }),
    s.event('idempotency.replayed', { client_id: 'client-1', grant_id: 'grant-1', route: 'POST /research', key: 'key-1' }),
    s.event('request.served', {
      server: 'api',
      method: 'POST',
      path: '/research',
      status: 202,
      ms: 4.5,
      client_id: 'client-1',
      grant_id: 'grant-1',
    }),
    s.event('request.served', {
      server: 'api',
      method: 'GET',
      path: '/research/job-1',
      status: 200,
      ms: 1.1,
      client_id: 'client-1',
      grant_id: 'grant-1',
    }),
    s.event('request.served', { server: 'auth', method: 'GET', path: '/oauth/authorize', status: 200, ms: 2 }),
    s.event('action.pending', {
      action_id: 'act-1',
      client_id: 'client-1',
      grant_id: 'grant-1',
      person_id: 'person-anna',
      kind: 'contacts',
      operation: 'update',
      description: 'Telefonnummer von Jonas Weber ändern',
    }),
  ];
}

describe('dashboard views (ink-testing-library, 80×24 unless said)', () => {
  it('Grants: client name marked unverified, person, write scopes marked, status, times; detail of the selection', async () => {
    const ui = renderDashboard();
    ui.send(...session());
    const f = await ui.waitFor((x) => x.includes('Wetter-Agent'));
    expect(f).toContain('CLIENT (unverified)');
    expect(f).toMatch(/active\s+Wetter-Agent\s+Anna Schmidt\s+ask workspace\.write✎/);
    expect(f).toContain('“Wetter-Agent” (unverified name)');
    expect(f).toContain('scopes   ask, workspace.write (writes)');
    expect(f).toContain('created  12:00:01');
    expect(f).toMatch(/last used 12:00:13/);
  });

  it('Token families: the chain of refresh tokens, the access tokens, and the replay that killed the family', async () => {
    const ui = renderDashboard();
    ui.send(...session());
    await ui.waitFor((x) => x.includes('Wetter-Agent'));
    await ui.press('2');
    const f = await ui.waitFor((x) => x.includes('REPLAY of'));
    expect(f).toMatch(/REPLAYED\s+Wetter-Agent\s+fam-1/);
    expect(f).toContain('✖ REPLAY of refresh token gen 1 at 12:00:05: the whole family died');
    expect(f).toMatch(/gen 1\s+rotated\s+issued 12:00:02\s+rotated 12:00:03\s+← replayed/);
    expect(f).toMatch(/gen 2\s+invalidated\s+issued 12:00:03/);
    // The family died with the replay: its tokens say so, they do not count down to an exp that no longer matters.
    expect(f).toMatch(/jti-aaaaaa\s+issued 12:00:02\s+ended with the family at 12:00:05/);
    expect(f).toMatch(/REPLAYED\s+Wetter-Agent\s+fam-1\s+2\s+2\s+ended 12:00:05/);
    expect(f).not.toContain('expires in');
  });

  it('Jobs: research and training with status, step progress, elapsed time and the error of a failed job', async () => {
    const ui = renderDashboard();
    const s = new Script();
    ui.send(...session(s));
    await ui.press('3');
    let f = await ui.waitFor((x) => x.includes('hausordnung.md'));
    expect(f).toMatch(/training\s+chunking\s+■■■□□\s+\d+s\s+Wetter-Agent\s+hausordnung\.md/);
    expect(f).toMatch(/research\s+running\s+■■□/);
    ui.send({ type: 'tick', now: s.at + 60_000 });
    await ui.waitFor((x) => /step\s+received › parsing › \[chunking\] › indexing › indexed/.test(x) && x.includes('running for 1m'));
    await ui.press('j');
    ui.send(s.event('research.failed', { job_id: 'job-1', client_id: 'client-1', error: 'no_sources', message: 'keine Quellen gefunden' }));
    f = await ui.waitFor((x) => x.includes('error    no_sources: keine Quellen gefunden'));
    expect(f).toMatch(/research\s+failed\s+✖/);
  });

  it('Charges: the ledger with replays shown as free, totals per client and per grant', async () => {
    const ui = renderDashboard();
    ui.send(...session());
    await ui.press('4');
    const f = await ui.waitFor((x) => x.includes('free (replay)'));
    expect(f).toMatch(/POST \/research\s+2 AKh\s+key-1/);
    expect(f).toContain('total 2 AKh');
    expect(f).toMatch(/per client:\s*\n\s+2 AKh\s+Wetter-Agent/);
    expect(f).toMatch(/per grant:\s*\n\s+2 AKh\s+grant-1/);
  });

  it('Requests: the live log, filtered with /, the filter cleared with Esc', async () => {
    const ui = renderDashboard();
    ui.send(...session());
    await ui.press('5');
    let f = await ui.waitFor((x) => x.includes('/oauth/authorize'));
    expect(f).toMatch(/12:00:12\s+POST\s+\/research\s+202\s+4\.5\s+Wetter-Agent/);
    await ui.press('/', 'a', 'u', 't', 'h');
    await ui.waitFor((x) => x.includes('filter Requests: auth'));
    await ui.press(KEYS.enter);
    f = await ui.waitFor((x) => !x.includes('POST   /research'), 'the filter to apply');
    expect(f).toContain('/oauth/authorize');
    expect(f).toContain('[auth] Esc clears');
    await ui.press(KEYS.escape);
    await ui.waitFor((x) => x.includes('/research/job-1'));
  });

  it('45.8 keys that arrive in one read each act: jjj moves three rows, k↓ and kk too, and a pasted filter applies', async () => {
    const ui = renderDashboard();
    const s = new Script();
    const grants = ['A', 'B', 'C', 'D', 'E'].map((n) =>
      s.event('grant.created', {
        grant_id: `grant-${n}`,
        client_id: 'client-1',
        person_id: 'person-anna',
        scopes: ['ask'],
        resource: MCP,
      }),
    );
    ui.send(...session(s).slice(0, 2), ...grants);
    // Newest first: E is selected.
    await ui.waitFor((x) => x.includes('grant grant-E'));
    ui.stdin.write('jjj');
    await ui.waitFor((x) => x.includes('grant grant-B'), 'three rows down');
    ui.stdin.write(`k${KEYS.down}`);
    ui.stdin.write('kk');
    await ui.waitFor((x) => x.includes('grant grant-D'), 'one up, one down, two up');
    ui.stdin.write('/12:00:02\r');
    const f = await ui.waitFor((x) => x.includes('[12:00:02] Esc clears'), 'the pasted filter applied');
    expect(f).toContain('grant grant-B');
  });

  it('45.8 Requests: a request whose bearer token was refused unread says so, apart from one that carried none', async () => {
    const ui = renderDashboard();
    const s = new Script();
    ui.send(
      ...session(s),
      s.event('request.served', { server: 'api', method: 'GET', path: '/chat/none', status: 401, ms: 1 }),
      s.event('request.served', { server: 'api', method: 'GET', path: '/chat/forged', status: 401, ms: 1, bearer: 'invalid' }),
    );
    await ui.press('5');
    let f = await ui.waitFor((x) => x.includes('/chat/forged'));
    expect(f).toMatch(/\/chat\/forged\s+401\s+1\s+\(invalid token\)/);
    expect(f).toContain('client   - (invalid bearer token, refused)');
    await ui.press('j');
    f = await ui.waitFor((x) => x.includes('GET /chat/none'));
    expect(f).toContain('client   - (no bearer token)');
  });

  it('Approvals: a pending write action, approved with a then y; rejected with x then y; n cancels', async () => {
    const ui = renderDashboard();
    ui.send(...session());
    await ui.press('6');
    const f = await ui.waitFor((x) => x.includes('Telefonnummer von Jonas Weber ändern'));
    expect(f).toMatch(/│6 Approvals 1!│/);
    await ui.press('a');
    await ui.waitFor((x) => x.includes('Approve “Telefonnummer von Jonas Weber ändern”? y/n'));
    await ui.press('n');
    await ui.waitFor((x) => x.includes('cancelled'));
    expect(ui.calls).toEqual([]);
    await ui.press('a', 'y');
    await ui.waitFor((x) => x.includes('approved act-1'));
    await ui.press('x', 'y');
    await ui.waitFor((x) => x.includes('rejected act-1'));
    expect(ui.calls).toEqual(['approve act-1', 'reject act-1']);
  });

  it('r on a grant asks first, then revokes through the admin action; the revoked event greys it out', async () => {
    const ui = renderDashboard();
    const s = new Script();
    ui.send(...session(s));
    await ui.waitFor((x) => x.includes('Wetter-Agent'));
    await ui.press('r');
    await ui.waitFor((x) => x.includes('Revoke the grant of “Wetter-Agent” (grant-1)? y/n'));
    await ui.press('y');
    await ui.waitFor((x) => x.includes('revoked grant-1'));
    expect(ui.calls).toEqual(['revoke grant-1']);
    ui.send(s.event('grant.revoked', { grant_id: 'grant-1', client_id: 'client-1', by: 'admin' }));
    const f = await ui.waitFor((x) => x.includes('status   revoked by admin'));
    expect(f).toMatch(/revoked\s+Wetter-Agent/);
    await ui.press('r');
    await ui.waitFor((x) => x.includes('this grant is already revoked'));
    expect(ui.calls).toEqual(['revoke grant-1']);
  });

  it('Tab, Shift+Tab and number keys switch views; j/k and arrows move; ? shows help; q quits', async () => {
    const ui = renderDashboard();
    const s = new Script();
    ui.send(
      ...session(s),
      s.event('grant.created', {
        grant_id: 'grant-2',
        client_id: 'client-1',
        person_id: 'person-anna',
        scopes: ['research'],
        resource: null,
      }),
    );
    await ui.waitFor((x) => x.includes('grant grant-2'));
    await ui.press('j');
    await ui.waitFor((x) => x.includes('grant grant-1'));
    await ui.press(KEYS.up);
    await ui.waitFor((x) => x.includes('grant grant-2'));
    await ui.press(KEYS.down);
    await ui.waitFor((x) => x.includes('grant grant-1'));
    await ui.press(KEYS.tab);
    await ui.waitFor((x) => x.includes('─ Token families'));
    await ui.press(KEYS.shiftTab, KEYS.shiftTab);
    await ui.waitFor((x) => x.includes('─ Findings'));
    await ui.press(KEYS.shiftTab, KEYS.shiftTab);
    await ui.waitFor((x) => x.includes('─ Approvals'));
    await ui.press('?');
    const f = await ui.waitFor((x) => x.includes('Keys'));
    expect(f).toContain('r              Grants: revoke the selected grant');
    await ui.press('?');
    await ui.waitFor((x) => x.includes('─ Approvals'));
    const before = ui.frames.length;
    await ui.press('q');
    // After q the app has ended: it lets go of the keyboard, and a key that would switch to Grants draws nothing any more.
    await pollUntil(() => ui.stdin.listenerCount('readable') === 0, 'the dashboard to stop reading keys');
    await ui.press('1');
    expect(ui.frames.slice(before).some((f) => f.includes('─ Grants'))).toBe(false);
  });

  it('fits 80×24 exactly (no line wider, no more than 23 lines), and uses the full width when there is more', async () => {
    const ui = renderDashboard({ columns: 80, rows: 24 });
    ui.send(...session());
    const markers: Record<string, string> = {
      '1': '─ Grants',
      '2': '─ Token families',
      '3': '─ Jobs',
      '4': '─ Charges',
      '5': '─ Requests',
      '6': '─ Approvals',
      '7': '─ Faults',
      '8': '─ Findings',
      '?': 'this help',
    };
    for (const [key, marker] of Object.entries(markers)) {
      await ui.press(key);
      const lines = (
        await ui.waitFor((x) => x.includes(marker) && (['?', '7', '8'].includes(key) || x.includes('Wetter-Agent')), marker)
      ).split('\n');
      expect(lines.length, `view ${key}`).toBeLessThanOrEqual(23);
      for (const l of lines) expect(l.length, `view ${key}: ${l}`).toBeLessThanOrEqual(80);
    }
    await ui.press('?', '1');
    ui.resize(160, 40);
    const wide = await ui.waitFor((x) => x.split('\n').length === 39);
    // Side by side: the list and the detail pane share a line.
    expect(wide).toMatch(/›active\s+Wetter-Agent.*12:00:13\s{2,}client\s+“Wetter-Agent”/);
    // The list takes 60 % of the 160 columns, the detail pane the rest after one column of space.
    expect(wide.split('\n')[3]?.indexOf('client   “Wetter-Agent”')).toBe(97);
  });

  it('45.8 the space is used: at 160×45 the columns widen and the list takes the rows; at 80×24 it fits, the list longer than half where details are short', async () => {
    const ui = renderDashboard({ columns: 80, rows: 24 });
    const s = new Script();
    const before = session(s);
    const requests = Array.from({ length: 40 }, () =>
      s.event('request.served', { server: 'auth', method: 'GET', path: '/.well-known/oauth-authorization-server', status: 200, ms: 1 }, 10),
    );
    ui.send(...before, ...requests);
    await ui.press('5');
    let f = await ui.waitFor((x) => x.includes('─ Requests') && x.includes('oauth-authorization-server'));
    let lines = f.replace(/\n$/, '').split('\n');
    expect(lines.length).toBeLessThanOrEqual(23);
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(80);
    // A request's detail takes at most 4 lines (one names the grant): the list takes the rest, 13 rows under its
    // header, not half the screen.
    expect(lines.filter((l) => /^[ ›]\d\d:\d\d:\d\d /.test(l))).toHaveLength(13);
    expect(f).toContain('/.well-known/oauth-authoriz…');
    ui.resize(160, 45);
    f = await ui.waitFor((x) => x.split('\n').length === 44, '160×45');
    lines = f.split('\n');
    for (const l of lines) expect(l.length).toBeLessThanOrEqual(160);
    // The list takes every row of the body (40 less its header) and the path column is wide enough for the path.
    expect(lines.filter((l) => /^[ ›]\d\d:\d\d:\d\d /.test(l))).toHaveLength(39);
    expect(f).toMatch(/GET\s+\/\.well-known\/oauth-authorization-server\s+200/);
  });

  it('45.8 the Grants view shows the consent and settings URLs with a grant selected, at 80×24 and 160×45', async () => {
    const ui = renderDashboard({ columns: 80, rows: 24 });
    ui.send(...session());
    for (const [columns, rows] of [
      [80, 24],
      [160, 45],
    ] as const) {
      ui.resize(columns, rows);
      const f = await ui.waitFor((x) => x.split('\n').length === rows - 1 && x.includes('grant grant-1'), `${columns}×${rows}`);
      expect(f).toContain('consent  http://127.0.0.1:4101/oauth/authorize');
      expect(f).toContain('settings http://127.0.0.1:4101/settings');
      expect(f).not.toMatch(/lines \d+-\d+ of/);
    }
  });

  it('shows when it is disconnected, and that it retries', async () => {
    const ui = renderDashboard();
    ui.send(...session());
    await ui.waitFor((x) => x.includes('● live'));
    ui.send({ type: 'connection', status: 'disconnected', detail: 'the emulator is not running (connection refused)', at: T0 });
    const f = await ui.waitFor((x) => x.includes('DISCONNECTED'));
    expect(f.split('\n')[0]).toContain('agent-access ○ DISCONNECTED, retrying: the emulator is not running (connection');
    // What was known stays on screen while it reconnects.
    expect(f).toContain('Wetter-Agent');
  });

  it('the footer shows the newest activity; alarms such as a replay are among them', async () => {
    const ui = renderDashboard();
    ui.send(...session());
    const f = await ui.waitFor((x) => x.includes('write action waits for approval'));
    expect(f).toContain('12:00:15 write action waits for approval: Telefonnummer von Jonas Weber ändern');
  });

  it('control characters a client put into its name or question never reach the terminal', async () => {
    const ui = renderDashboard();
    const s = new Script();
    const evil = 'Evil\u001B]52;c;ZWNobyBoaQ==\u0007\u001B[2J\rAgent';
    ui.send(
      {
        type: 'overview',
        overview: overview({ clients: { 'client-x': { client_id: 'client-x', client_name: evil, registered_at: T0 } } }),
      },
      s.event('grant.created', { grant_id: 'grant-x', client_id: 'client-x', person_id: 'person-anna', scopes: ['ask'], resource: null }),
      s.event('research.created', { job_id: 'job-x', client_id: 'client-x', grant_id: 'grant-x', question: 'Frage\u001B[31m rot' }),
    );
    const raw = await ui.waitFor((x) => x.includes('Evil'), 'the client');
    expect(ui.lastFrame()).not.toMatch(/\u001B\]|\u0007|\u001B\[2J|\r/);
    expect(raw).toContain('“Evil\ufffd]52;c;ZWNobyBoaQ==\ufffd\ufffd[2J\ufffdAgent”');
    await ui.press('3');
    await ui.waitFor((x) => x.includes('Frage\ufffd[31m rot'), 'the question, defused');
  });

  // A hint longer than any pane is wide, ending in a word that must be on screen.
  const LONG_HINT =
    'Refresh once per token family: serialise refreshes behind one lock or shared promise, so that requests that find the ' +
    'access token expired wait for one refresh and then use its tokens. Each refresh token works once; a second use kills ' +
    'the family. In the MCP TypeScript SDK, wrap the provider so that concurrent calls of tokens() share one pending refresh, ' +
    'and keep the newest refresh token in the same store the tokens came from, written before the next request goes out. ENDE.';
  const findingsOverview = () =>
    overview({
      now: T0 + 60_000,
      findings: [
        finding({
          id: 'scope.unused:client-1:grant-1',
          code: 'scope.unused',
          severity: 'info',
          family_id: null,
          last_at: T0 + 50_000,
          message: 'The grant holds “workspace.write”, which no request of it has used.',
          hint: 'Request only the scopes the agent uses (spec 5.9): the person sees each on the consent screen.',
          spec: 'spec 5.9',
        }),
        finding({ count: 3, first_at: T0, last_at: T0 + 2_000, hint: LONG_HINT }),
        finding({
          id: 'ratelimit.retry_too_early:client-2:grant-9',
          code: 'ratelimit.retry_too_early',
          severity: 'warning',
          client_id: 'client-2',
          client_name: 'Kalender-Bot',
          grant_id: 'grant-9',
          family_id: null,
          last_at: T0 + 55_000,
          message: 'A request came 0.5 s after a 429 whose Retry-After asked to wait 3 s.',
          hint: 'After a 429, wait the seconds its Retry-After header names before the next request with this grant.',
          spec: 'spec 7, 8; RFC 9110 §10.2.3',
        }),
      ],
    });
  /** The detail pane's text as one line: wrapped lines joined, runs of spaces as one. */
  const flat = (lines: string[]) => lines.join(' ').replace(/\s+/g, ' ');

  it('Findings: most severe first, then the newest; severity, code, client (unverified), count, last seen; errors badge the tab', async () => {
    const ui = renderDashboard();
    ui.send(
      { type: 'connection', status: 'connected', url: 'http://127.0.0.1:4100/_admin/events', at: T0 },
      {
        type: 'overview',
        overview: findingsOverview(),
      },
    );
    // Noticed from any view: the tab counts the error findings.
    let f = await ui.waitFor((x) => x.includes('8 Findings 1!'), 'the badge on the Grants view');
    expect(f.split('\n')[1]).toBe(' 1 Grants│2 Families│3 Jobs│4 Charges│5 Requests│6 Approvals│7│8 Findings 1!');
    await ui.press('8');
    f = await ui.waitFor((x) => x.includes('─ Findings'));
    expect(f).toMatch(/SEVERITY\s+CODE\s+CLIENT \(unverified\)\s+COUNT\s+LAST SEEN/);
    const rows = f.split('\n').filter((l) => /^[ ›](ERROR|WARNING|INFO) /.test(l));
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatch(/^›ERROR\s+refresh\.concurrent\s+Wetter-Agent\s+3\s+58s ago$/);
    expect(rows[1]).toMatch(/^ WARNING\s+ratelimit\.retry_too_early\s+Kalender-Bot\s+1\s+5s ago$/);
    expect(rows[2]).toMatch(/^ INFO\s+scope\.unused\s+Wetter-Agent\s+1\s+10s ago$/);
    await ui.press('j');
    f = await ui.waitFor((x) => x.includes('WARNING ratelimit.retry_too_early   seen 1×'));
    expect(f).toContain('client   “Kalender-Bot” (unverified name) client-2');
    expect(f).toContain('grant    grant-9');
    expect(f).not.toContain('family ');
  });

  for (const [columns, rows] of [
    [80, 24],
    [160, 40],
  ] as const) {
    it(`Findings at ${columns}×${rows}: message, hint, spec and ids wrap to the pane, never cut`, async () => {
      const ui = renderDashboard({ columns, rows });
      ui.send({ type: 'overview', overview: findingsOverview() });
      await ui.press('8');
      const f = await ui.waitFor((x) => x.includes('ENDE.'), 'the end of the long hint');
      const lines = f.split('\n');
      expect(lines.length).toBeLessThanOrEqual(rows - 1);
      for (const l of lines) expect(l.length, l).toBeLessThanOrEqual(columns);
      // Stacked at 80 columns the pane is below the rule; side by side it starts at column 97 (60 % and a space).
      const pane =
        columns < 120
          ? lines.slice(lines.findIndex((l) => l.startsWith('─ Findings')) + 1, -2)
          : lines.slice(2, -2).map((l) => l.slice(97));
      const text = flat(pane);
      expect(text).toContain('ERROR refresh.concurrent seen 3×, last 58s ago (12:00:02), first 12:00:00');
      expect(text).toContain('client “Wetter-Agent” (unverified name) client-1');
      expect(text).toContain(`what ${finding().message}`);
      expect(text).toContain(`hint ${LONG_HINT}`);
      expect(text).toContain('spec spec 3.2; OAuth 2.1 §4.3.1');
      expect(text).toContain('grant grant-1 family fam-1');
      // Wrapped at spaces: every line of the pane is a run of whole words, continued nine columns in.
      const hint = pane.slice(pane.findIndex((l) => l.startsWith('hint ')));
      expect(hint.length).toBeGreaterThan(columns < 120 ? 4 : 6);
      for (const l of hint.slice(
        1,
        hint.findIndex((x) => x.startsWith('spec ')),
      ))
        expect(l).toMatch(/^ {9}\S/);
      // The list still shows its header and the rows.
      expect(f).toMatch(/›ERROR\s+refresh\.concurrent/);
      expect(f).toMatch(/INFO\s+scope\.unused/);
    });
  }

  it('Findings: none yet says how they arise; the tab has no badge', async () => {
    const ui = renderDashboard();
    ui.send({ type: 'overview', overview: overview() });
    await ui.press('8');
    const f = await ui.waitFor((x) => x.includes('─ Findings'));
    expect(f).toContain("no findings: one is recorded when a client's traffic shows a habit to change");
    expect(f).toContain('8 Findings');
    expect(f).not.toContain('Findings 0');
    expect(f).not.toMatch(/Findings \d+!/);
  });
});

/** The ids the emulator really makes (longer than the session's): the lines they are in are wider than a pane. */
const LONG = { client: 'client_9Gt2gOtP4MjlDWpP', grant: 'grant_DuJOCJYCmv1e-lh2', family: 'fam_Ljxll8KECKM5QeJV' };

/** A replayed family and a finding with the emulator's own ids, and requests on both servers. */
function longSession(s = new Script()): StreamMessage[] {
  const token = (jti: string, generation: number) =>
    s.event('tokens.issued', {
      grant_id: LONG.grant,
      client_id: LONG.client,
      family_id: LONG.family,
      jti,
      scopes: ['ask'],
      audience: MCP,
      expires_at: s.at + 900_000,
      generation,
      grant_type: generation === 1 ? 'authorization_code' : 'refresh_token',
    });
  return [
    { type: 'connection', status: 'connected', url: 'http://127.0.0.1:4100/_admin/events', at: T0 },
    {
      type: 'overview',
      overview: overview({ clients: { [LONG.client]: { client_id: LONG.client, client_name: 'Wetter-Agent', registered_at: T0 } } }),
    },
    s.event('grant.created', { grant_id: LONG.grant, client_id: LONG.client, person_id: 'person-anna', scopes: ['ask'], resource: MCP }),
    token('WquuKmFO1Pxxxx', 1),
    s.event('refresh.rotated', { grant_id: LONG.grant, family_id: LONG.family, from_generation: 1, to_generation: 2 }),
    token('UlElX5-pORxxxx', 2),
    s.event('family.invalidated', { grant_id: LONG.grant, family_id: LONG.family, reason: 'refresh_replay', replayed_generation: 1 }),
    s.event(
      'finding.recorded',
      finding({
        id: `refresh.concurrent:${LONG.client}:${LONG.family}`,
        client_id: LONG.client,
        grant_id: LONG.grant,
        family_id: LONG.family,
        first_at: s.at,
        last_at: s.at,
      }),
    ),
    s.event('request.served', { server: 'auth', method: 'GET', path: '/oauth/authorize', status: 200, ms: 2 }),
    s.event('request.served', { server: 'api', method: 'POST', path: '/chat/ask', status: 404, ms: 11.8 }),
  ];
}

/** The detail pane's text on screen: right of the list when wide, else below the view's rule. */
function pane(frame: string, columns: number): string[] {
  const lines = frame.split('\n');
  if (columns >= 120) return lines.slice(2, -2).map((l) => l.slice(Math.floor(columns * 0.6) + 1));
  return lines.slice(lines.findIndex((l) => l.startsWith('─ ')) + 1, -2);
}
const words = (text: string): string => text.replace(/\s+/g, ' ').trim();

describe('dashboard fixes of issue 23 (ink-testing-library)', () => {
  for (const [columns, rows] of [
    [80, 24],
    [160, 45],
  ] as const) {
    it(`the detail pane wraps at word boundaries at ${columns}×${rows}: every word of every view's detail whole, in order`, async () => {
      const messages = longSession();
      const state = messages.reduce(reduce, initialState());
      const ui = renderDashboard({ columns, rows });
      ui.send(...messages);
      await ui.waitFor((x) => x.includes('8 Findings 1!'));
      for (const [key, view] of [
        ['1', 'grants'],
        ['2', 'families'],
        ['5', 'requests'],
        ['8', 'findings'],
      ] as const) {
        await ui.press(key);
        const expected = detail(state, view, table(state, view).rows[0]?.key);
        const first = expected[0]!.text.slice(0, 12);
        const f = await ui.waitFor((x) => pane(x, columns).some((l) => l.startsWith(first)), `the ${view} detail`);
        const shown = pane(f, columns);
        for (const l of shown) expect(l.length, l).toBeLessThanOrEqual(columns >= 120 ? columns - Math.floor(columns * 0.6) - 1 : columns);
        expect(words(shown.join(' ')), `${view} at ${columns}×${rows}`).toBe(words(expected.map((l) => l.text).join(' ')));
      }
    });
  }

  it('a number and its unit stay together in a wrapped finding (`0.4 s`), at 160 columns where the pane ended a line with `0.4`', async () => {
    const ui = renderDashboard({ columns: 160, rows: 45 });
    ui.send(...longSession());
    await ui.press('8');
    const f = await ui.waitFor((x) => x.includes('what     A refresh token'));
    const shown = pane(f, 160);
    expect(shown.some((l) => l.trimEnd().endsWith('0.4'))).toBe(false);
    expect(shown.join('\n')).toMatch(/0\.4 s after/);
  });

  it('the footer message clears on the next key, and on its own after a few seconds; then the activity line returns', async () => {
    const ui = renderDashboard({ messageMs: 300 });
    ui.send(...session());
    await ui.press('6', 'a', 'n');
    await ui.waitFor((x) => x.split('\n').at(-2)!.startsWith('cancelled'));
    // The next key (a move) takes the answer away at once.
    await ui.press('j');
    await ui.waitFor((x) => x.split('\n').at(-2)!.startsWith('12:00:15 write action waits'), 'the activity line after a key');
    await ui.press('a', 'n');
    await ui.waitFor((x) => x.split('\n').at(-2)!.startsWith('cancelled'));
    // No key: it goes after messageMs.
    await ui.waitFor((x) => x.split('\n').at(-2)!.startsWith('12:00:15 write action waits'), 'the activity line after the time');
  });

  it('no literal `{base_url}` or any `{placeholder}` in any view or the help; a request says the URL of its server', async () => {
    const ui = renderDashboard({ columns: 160, rows: 45 });
    ui.send(...longSession(), ...session(new Script({ seq: 100, at: T0 + 100_000 })).slice(2));
    await ui.waitFor((x) => x.includes('8 Findings 1!'));
    const headers = ['PERSON', 'FAMILY', 'PROGRESS', 'IDEMPOTENCY', 'METHOD', 'DESCRIPTION', 'FIRED', 'LAST SEEN', 'Keys'];
    for (const [i, key] of ['1', '2', '3', '4', '5', '6', '7', '8', '?'].entries()) {
      await ui.press(key);
      const f = await ui.waitFor((x) => x.includes(headers[i]!), `view ${key}`);
      expect(f, `view ${key}`).not.toMatch(/\{[a-z_]+\}/);
      await ui.press(key === '?' ? '?' : 'g');
    }
    await ui.press('5', 'g');
    let f = await ui.waitFor((x) => x.includes('GET /oauth/authorize'));
    expect(f).toMatch(/status {3}200 {3}2 ms {3}on http:\/\/127\.0\.0\.1:4101 {3}at 12:01:54/);
    await ui.press('/', 'c', 'h', 'a', 't', KEYS.enter);
    f = await ui.waitFor((x) => x.includes('POST /chat/ask'));
    expect(f).toMatch(/status {3}404 {3}11\.8 ms {3}on http:\/\/127\.0\.0\.1:4100 {3}at 12:00:08/);
  });

  it('dead token families show when and why they ended, never an expiry countdown; a live one counts down', async () => {
    const ui = renderDashboard();
    const s = new Script();
    ui.send(
      ...session(s),
      s.event('tokens.issued', {
        grant_id: 'grant-1',
        client_id: 'client-1',
        family_id: 'fam-2',
        jti: 'jti-cccccccc3',
        scopes: ['ask'],
        audience: MCP,
        expires_at: s.at + 900_000,
        generation: 1,
        grant_type: 'authorization_code',
      }),
    );
    await ui.press('2');
    let f = await ui.waitFor((x) => x.includes('fam-2'));
    expect(f).toMatch(/›active\s+Wetter-Agent\s+fam-2\s+1\s+1\s+expires in 14m 59s/);
    expect(f).toMatch(/REPLAYED\s+Wetter-Agent\s+fam-1\s+2\s+2\s+ended 12:00:05/);
    expect(f).toMatch(/jti-cccccc\s+issued 12:00:16\s+expires in 14m 59s/);
    ui.send(s.event('family.invalidated', { grant_id: 'grant-1', family_id: 'fam-2', reason: 'grant_revoked' }));
    f = await ui.waitFor((x) => x.includes('its grant was revoked'));
    expect(f).toContain('✖ ended at 12:00:17: its grant was revoked; its tokens no longer work');
    expect(f).toMatch(/invalidated\s+Wetter-Agent\s+fam-2\s+1\s+1\s+ended 12:00:17/);
    expect(f).toMatch(/jti-cccccc\s+issued 12:00:16\s+ended with the family at 12:00:17/);
    expect(f).not.toContain('expires in');
  });

  it('shows where the emulator serves what (serve --ui prints no ready lines): base, auth, consent and settings URLs', async () => {
    const ui = renderDashboard();
    ui.send({ type: 'connection', status: 'connected', at: T0 }, { type: 'overview', overview: overview() });
    // No grant yet: the Grants detail says where a person and a client start.
    let f = await ui.waitFor((x) => x.includes('base_url'));
    expect(f).toContain('base_url http://127.0.0.1:4100   (issuer, API, http://127.0.0.1:4100/mcp)');
    expect(f).toContain('auth_url http://127.0.0.1:4101   (browser pages)');
    expect(f).toContain("consent  http://127.0.0.1:4101/oauth/authorize   (a client's login opens it)");
    expect(f).toContain("settings http://127.0.0.1:4101/settings   (the person's grants, to revoke)");
    // 80 columns: the header keeps the base URL and the clock; the help has them all, whatever is selected.
    expect(f.split('\n')[0]).toBe('agent-access ● live  http://127.0.0.1:4100  clock 12:00:00Z');
    await ui.press('?');
    f = await ui.waitFor((x) => x.includes('Keys'));
    // 80×24 has 19 rows for the help: the rest is a scroll away, and the last row says so.
    expect(f).toMatch(/… lines 1-18 of \d+: j\/k scroll/);
    for (let i = 0; i < 10; i++) await ui.press('j');
    f = await ui.waitFor((x) => x.includes('metadata http://127.0.0.1:4100/.well-known/oauth-authorization-server'));
    expect(f).toContain("settings http://127.0.0.1:4101/settings   (the person's grants, to revoke)");
    // Wide: the header adds the auth and settings URLs.
    ui.resize(160, 45);
    f = await ui.waitFor((x) => x.split('\n')[0]!.includes('settings'));
    expect(f.split('\n')[0]).toBe(
      'agent-access ● live  http://127.0.0.1:4100  auth http://127.0.0.1:4101  settings http://127.0.0.1:4101/settings  clock 12:00:00Z',
    );
  });

  it('J and K scroll a detail pane that does not fit; its last row says which lines show', async () => {
    const ui = renderDashboard();
    const s = new Script();
    const before = session(s);
    const tokens = Array.from({ length: 12 }, (_, i) =>
      s.event('tokens.issued', {
        grant_id: 'grant-1',
        client_id: 'client-1',
        family_id: 'fam-9',
        jti: `jti${String(i).padStart(2, '0')}-abcdef`,
        scopes: ['ask'],
        audience: MCP,
        expires_at: T0 + 2_000_000,
        generation: i + 1,
        grant_type: 'refresh_token',
      }),
    );
    ui.send(...before, ...tokens);
    await ui.press('2');
    let f = await ui.waitFor((x) => x.includes('family fam-9'));
    expect(f).toMatch(/… lines 1-9 of \d+: J\/K scroll/);
    expect(f).not.toContain('jti11-abcd');
    for (let i = 0; i < 40; i++) await ui.press('J');
    f = await ui.waitFor((x) => x.includes('jti11-abcd'));
    expect(f).not.toContain('family fam-9');
    await ui.press('K');
    await ui.waitFor((x) => !x.includes('jti11-abcd'));
    // Another row starts at the top of its detail.
    await ui.press('j');
    await ui.waitFor((x) => x.includes('family fam-1'));
  });
});

describe('wrapLines: the detail text of a view that wraps', () => {
  it('no line wider than the pane; every word kept, in order; a word longer than a line broken', () => {
    const word = fc.stringMatching(/^[a-zA-Z0-9.,;:()“”§-]{1,40}$/);
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 120 }), fc.nat(12), (words, width, hang) => {
        const text = `hint     ${words.join(' ')}`;
        const lines = wrapLines([{ text, tone: 'normal', hang }], width);
        for (const l of lines) expect(l.text.length).toBeLessThanOrEqual(width);
        expect(lines.map((l) => l.text.replace(/\s+/g, '')).join('')).toBe(text.replace(/\s+/g, ''));
      }),
    );
  });

  it('continues `hang` columns in; without `hang`, under the label of a `label    value` line, else 2 further in', () => {
    const lines = wrapLines(
      [
        { text: 'what     eins zwei drei vier', tone: 'alarm', hang: 9 },
        { text: 'client   eins zwei drei vier', tone: 'normal' },
        { text: 'a line that wraps as well', tone: 'dim' },
        { text: '  gen 1  rotated     issued 08:02:20', tone: 'normal' },
      ],
      20,
    );
    expect(lines).toEqual([
      { text: 'what     eins zwei', tone: 'alarm' },
      { text: '         drei vier', tone: 'alarm' },
      { text: 'client   eins zwei', tone: 'normal' },
      { text: '         drei vier', tone: 'normal' },
      { text: 'a line that wraps as', tone: 'dim' },
      { text: '  well', tone: 'dim' },
      { text: '  gen 1  rotated', tone: 'normal' },
      { text: '    issued 08:02:20', tone: 'normal' },
    ]);
  });

  it('keeps a number and its unit on one line (`0.4 s`, `2048 bytes`, `14m 54s`), a mark with its word, `at` with its time', () => {
    const text = 'what     presented again 0.4 s after it was rotated';
    // Width 29 would end the first line at "0.4".
    expect(wrapLines([{ text, tone: 'normal' }], 29).map((l) => l.text)).toEqual([
      'what     presented again',
      '         0.4 s after it was',
      '         rotated',
    ]);
    expect(wrapLines([{ text: 'file     a.md (2048 bytes)', tone: 'normal' }], 21).map((l) => l.text)).toEqual([
      'file     a.md',
      '         (2048 bytes)',
    ]);
    expect(wrapLines([{ text: '  jti  expires in 14m 54s', tone: 'normal' }], 21).map((l) => l.text)).toEqual([
      '  jti  expires in',
      '    14m 54s',
    ]);
    expect(wrapLines([{ text: '0.4 s', tone: 'normal' }], 3).map((l) => l.text)).toEqual(['0.4', 's']);
    // A mark with its word, `at` with its time.
    expect(wrapLines([{ text: '  gen 1  rotated 08:02:21  ← replayed', tone: 'normal' }], 30).map((l) => l.text)).toEqual([
      '  gen 1  rotated 08:02:21',
      '    ← replayed',
    ]);
    expect(wrapLines([{ text: 'status   401   20.2 ms   at 08:14:24', tone: 'normal' }], 30).map((l) => l.text)).toEqual([
      'status   401   20.2 ms',
      '         at 08:14:24',
    ]);
  });
});
