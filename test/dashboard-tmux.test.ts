/**
 * Smoke test of the built CLI in a real terminal: `agent-access dashboard` runs inside tmux (80×24, and 160×45
 * where the side-by-side layout matters), the screen
 * is read with `capture-pane`, keys are sent with `send-keys`.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { inCi } from './helpers/chromium.js';
import { BIN, startServe, type ServeProcess } from './helpers/cli.js';
import { scratchDir } from './helpers/emulator.js';
import { authorizeAndApprove, refresh } from './helpers/oauth.js';
import { pollUntil } from './helpers/wait.js';

const run = promisify(execFile);
const TMUX = '/usr/bin/tmux';

function tmuxAvailable(): boolean {
  try {
    accessSync(TMUX, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
// CI installs tmux (.ci/run): there a missing tmux fails the test instead of skipping it.
const available = tmuxAvailable() || inCi();
if (!available) console.warn('[dashboard-tmux] SKIPPED: /usr/bin/tmux is missing (apt-get install -y tmux; CI does this in .ci/run)');

/** A tmux server of its own (its own socket), so the test never touches the developer's sessions. */
class Terminal {
  readonly socket = `agent-access-test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  tmux(...args: string[]) {
    return run(TMUX, ['-L', this.socket, ...args], { encoding: 'utf8' });
  }
  async start(command: string, env: Record<string, string>) {
    const vars = Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
    await this.tmux('new-session', '-d', '-x', '80', '-y', '24', ...vars, command);
  }
  /** The screen as text; with `escapes`, with its colour and attribute sequences. */
  async screen(escapes = false): Promise<string> {
    return (await this.tmux('capture-pane', '-p', ...(escapes ? ['-e'] : []))).stdout;
  }
  async waitFor(test: (screen: string) => boolean, what: string): Promise<string> {
    let screen = '';
    await pollUntil(async () => test((screen = await this.screen().catch(() => ''))), what, {
      timeoutMs: 15_000,
      intervalMs: 100,
      describe: () => screen,
    });
    return screen;
  }
  keys(...keys: string[]) {
    return this.tmux('send-keys', ...keys);
  }
  resize(columns: number, rows: number) {
    return this.tmux('resize-window', '-x', String(columns), '-y', String(rows));
  }
  kill() {
    return this.tmux('kill-server').catch(() => undefined);
  }
}

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function setup(env: Record<string, string>): Promise<{ term: Terminal; serve: ServeProcess }> {
  if (!tmuxAvailable()) throw new Error('tmux is required in CI: /usr/bin/tmux is missing (apt-get install -y tmux)');
  const dir = await scratchDir();
  const state = join(dir, 'state.json');
  const serve = await startServe(['--state', state]);
  cleanups.push(async () => {
    await serve.stop();
  });
  const term = new Terminal();
  cleanups.push(() => term.kill());
  // CI=true as in CI runs: the dashboard still draws live (Ink would otherwise print only its last frame).
  await term.start(`${process.execPath} ${BIN} dashboard --state ${state}; echo "EXIT=$?"; sleep 60`, {
    TERM: 'xterm-256color',
    CI: 'true',
    ...env,
  });
  return { term, serve };
}

describe.skipIf(!available)('agent-access dashboard in a real terminal (tmux, 80×24)', () => {
  it('attaches live, shows a login as it happens, switches views with keys, and quits with q (exit 0)', async () => {
    const { term, serve } = await setup({});
    let screen = await term.waitFor((s) => s.includes('● live'), 'the live header');
    expect(screen.split('\n')[0]).toContain(`agent-access ● live  ${serve.ready.base_url}`);
    // Eight tabs fit 80 columns without their counts (each list shows its own).
    expect(screen).toContain(' 1 Grants│2 Families│3 Jobs│4 Charges│5 Requests│6 Approvals│7 Faults│8 Findings');
    expect(screen).toContain('no grants yet');

    await authorizeAndApprove({ baseUrl: serve.ready.base_url, authUrl: serve.ready.auth_url }, { scope: 'ask research' });
    screen = await term.waitFor((s) => /›active\s+Test Agent/.test(s), 'the new grant');
    expect(screen).toMatch(/scopes\s+ask, research/);
    // The frame sits in place: header on the first line, key hints on line 23, the last line free (nothing
    // wrapped or scrolled).
    const lines = screen.replace(/\n$/, '').split('\n');
    expect(lines).toHaveLength(24);
    expect(lines[0]).toMatch(/^agent-access ● live/);
    expect(lines[22]).toMatch(/^Tab\/1-8 view/);
    expect(lines[23]).toBe('');

    // No flicker: what the dashboard writes while it runs (two clock ticks, a view switch) never clears the
    // screen, and every frame is one synchronized update (DEC mode 2026), drawn by the terminal at once.
    const raw = join(await scratchDir(), 'pane.raw');
    await term.tmux('pipe-pane', '-o', `cat >> ${raw}`);
    // Two frames the dashboard drew on its own (its clock ticks every second), then one for a key.
    await pollUntil(
      async () => (await readFile(raw, 'latin1').catch(() => '')).split('\u001B[?2026h').length > 2,
      'two frames drawn by the clock',
      { intervalMs: 100 },
    );
    await term.keys('2');
    screen = await term.waitFor((s) => s.includes('─ Token families'), 'the families view');
    await term.tmux('pipe-pane');
    const written = await readFile(raw, 'latin1');
    expect(written).not.toMatch(/\u001B\[2J|\u001B\[3J|\u001Bc/);
    const frames = written.split('\u001B[?2026h').slice(1);
    expect(frames.length).toBeGreaterThanOrEqual(2);
    for (const f of frames) expect(f).toContain('\u001B[?2026l');
    expect(screen).toMatch(/gen 1\s+current/);
    await term.keys('5');
    await term.waitFor((s) => /POST\s+\/oauth\/token\s+200/.test(s), 'the request log');
    await term.keys('?');
    await term.waitFor((s) => s.includes('Keys') && s.includes('this help'), 'the help');
    await term.keys('q');
    screen = await term.waitFor((s) => s.includes('EXIT='), 'the exit');
    expect(screen).toContain('EXIT=0');
  });

  const sgrColour = /\u001B\[[0-9;]*(?:3[0-7]|9[0-7]|38;[0-9;]+)m/;
  const red = /\u001B\[(?:[0-9;]*;)?31[;m]/;
  for (const [env, coloured] of [
    [{}, true],
    [{ NO_COLOR: '1' }, false],
  ] as const) {
    it(`${coloured ? 'colours alarms and states' : 'shows no colour under NO_COLOR'}, an error finding included`, async () => {
      const { term, serve } = await setup(env);
      await term.waitFor((s) => s.includes('● live'), 'the live header');
      const login = await authorizeAndApprove({ baseUrl: serve.ready.base_url, authUrl: serve.ready.auth_url }, { scope: 'ask' });
      await term.waitFor((s) => s.includes('status   active'), 'the grant');
      expect(sgrColour.test(await term.screen(true))).toBe(coloured);
      // A parallel refresh (one refresh token twice, at once): an error finding, red in its view unless NO_COLOR.
      const token = login.tokens!.refresh_token;
      for (const status of [200, 400])
        expect((await refresh(serve.ready.base_url, { client_id: login.client_id, refresh_token: token })).status).toBe(status);
      await term.waitFor((s) => s.includes('8 Findings 1!'), 'the error badge');
      await term.keys('8');
      await term.waitFor((s) => /›ERROR\s+refresh\.concurrent/.test(s), 'the finding');
      const screen = await term.screen(true);
      expect(red.test(screen.split('\n').find((l) => l.includes('refresh.concurrent'))!)).toBe(coloured);
      expect(sgrColour.test(screen)).toBe(coloured);
    });
  }

  /** `serve --ui` on a new state file in tmux; the shell prints the exit code and stays for the test to read it. */
  async function serveUi(): Promise<{ dir: string; term: Terminal }> {
    if (!tmuxAvailable()) throw new Error('tmux is required in CI: /usr/bin/tmux is missing (apt-get install -y tmux)');
    const dir = await scratchDir();
    const term = new Terminal();
    cleanups.push(() => term.kill());
    await term.start(
      `${process.execPath} ${BIN} serve --ui --state ${join(dir, 'state.json')} --port 0 --auth-port 0; echo "EXIT=$?"; sleep 60`,
      {
        TERM: 'xterm-256color',
        CI: 'true',
      },
    );
    return { dir, term };
  }

  it('serve --ui: the emulator and its dashboard in one terminal, the log in a 0600 file, q stops both', async () => {
    const { dir, term } = await serveUi();
    const screen = await term.waitFor((s) => s.includes('● live'), 'the live header');
    const baseUrl = /● live {2}(http:\/\/127\.0\.0\.1:\d+)/.exec(screen)![1]!;
    const admin = JSON.parse(await readFile(join(dir, 'state.admin.json'), 'utf8')) as { auth_url: string };
    await authorizeAndApprove({ baseUrl, authUrl: admin.auth_url }, { scope: 'ask' });
    await term.waitFor((s) => /›active\s+Test Agent/.test(s), 'the grant');
    await term.keys('q');
    const end = await term.waitFor((s) => s.includes('EXIT='), 'the exit');
    expect(end).toContain('EXIT=0');
    expect(end).toContain(`agent-access: stopped ${baseUrl}; the log is in`);
    const log = join(dir, 'state.log');
    expect((await stat(log)).mode & 0o777).toBe(0o600);
    expect(await readFile(log, 'utf8')).toMatch(/api POST \/oauth\/token 200/);
    // Stopped cleanly: the admin file is gone with the process.
    expect(existsSync(join(dir, 'state.admin.json'))).toBe(false);
  });

  it('serve --ui at 80×24 and 160×45: where the pages are, a replayed family that says it ended, details wrapped whole, real URLs', async () => {
    const { dir, term } = await serveUi();
    await term.waitFor((s) => s.includes('● live'), 'the live header');
    const { base_url: baseUrl, auth_url: authUrl } = JSON.parse(await readFile(join(dir, 'state.admin.json'), 'utf8')) as {
      base_url: string;
      auth_url: string;
    };
    // serve --ui prints no ready lines: the dashboard says where the consent and settings pages are.
    let screen = await term.waitFor((s) => s.includes('settings '), 'the URLs');
    expect(screen).toContain(`auth_url ${authUrl}`);
    expect(screen).toContain(`consent  ${authUrl}/oauth/authorize`);
    expect(screen).toContain(`settings ${authUrl}/settings`);

    // A replay: the client refreshes twice with one refresh token; its family dies.
    const login = await authorizeAndApprove({ baseUrl, authUrl }, { scope: 'ask' });
    for (const status of [200, 400])
      expect((await refresh(baseUrl, { client_id: login.client_id, refresh_token: login.tokens!.refresh_token })).status).toBe(status);
    await term.waitFor((s) => s.includes('8 Findings 1!'), 'the finding of the replay');
    await term.keys('2');
    screen = await term.waitFor((s) => s.includes('ended with the family at'), 'the ended family');
    expect(screen).toMatch(/›REPLAYED\s+Test Agent\s+fam_\S+\s+2\s+2\s+ended \d\d:\d\d:\d\d/);
    expect(screen).not.toContain('expires in');

    // 160×45: the detail pane beside the list (63 columns) wraps at spaces; no word is cut.
    await term.resize(160, 45);
    screen = await term.waitFor((s) => s.split('\n')[0]!.includes(`settings ${authUrl}/settings`), 'the wide header');
    const pane = (s: string) =>
      s
        .split('\n')
        .slice(2, -3)
        .map((l) => l.slice(97))
        .join(' ')
        .replace(/\s+/g, ' ');
    expect(pane(screen)).toMatch(/✖ REPLAY of refresh token gen 1 at \d\d:\d\d:\d\d: the whole family died refresh tokens:/);
    expect(pane(screen)).toMatch(/rotated \d\d:\d\d:\d\d ← replayed gen 2/);
    for (const l of screen.split('\n')) expect(l.length).toBeLessThanOrEqual(160);
    await term.keys('8');
    screen = await term.waitFor((s) => s.includes('what     A refresh token'), 'the finding');
    // A number and its unit on one line. The number is the time between the two refreshes ("0 s", "0.1 s"), so
    // where the line breaks around it varies: the checks hold for either.
    expect(pane(screen)).toMatch(/again \d+(\.\d)? s after it was rotated/);
    expect(screen).toMatch(/ \d+(\.\d)? s( |$)/m);
    expect(screen).not.toMatch(/ \d+(\.\d)?\n\s*s /);
    expect(pane(screen)).toContain('the replay rule invalidated the whole family.');
    await term.keys('5');
    screen = await term.waitFor((s) => /status\s+400\s+[\d.]+ ms\s+on http/.test(s), 'the request detail');
    expect(screen).toContain(`on ${baseUrl}`);
    expect(screen).not.toMatch(/\{(base|auth)_url\}/);
    await term.keys('q');
    expect(await term.waitFor((s) => s.includes('EXIT='), 'the exit')).toContain('EXIT=0');
  });
});
