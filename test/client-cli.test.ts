/**
 * The client commands (`login`, `token`, `status`, `logout`, `decode`, `ask`, `research`, `train`) against a
 * real emulator over real sockets. The commands run in this process with the context the binary gives them
 * (helpers/client.ts, runClient); the built binary runs as a child where a process is the point: a whole login,
 * `token` in four processes at once, a research job followed from another process, and the admin commands that read
 * the directory's state. Where time must move on both sides (a token 900 s old), the commands run on the emulator's
 * manual clock. The consent page is answered over HTTP here; test/login-browser.test.ts does it in Chromium.
 */
import { readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ManualClock, SECOND, systemClock } from '../src/core/state/clock.js';
import { setConsentPolicy } from '../src/core/oauth/consent.js';
import { listGrants, revokeGrant } from '../src/core/oauth/grants-admin.js';
import type { Emulator } from '../src/server/emulator.js';
import {
  AUTHORIZE_URL,
  clientEnv,
  decideInBrowser,
  memoryContext,
  runClient,
  runInProcess,
  startCli,
  startClient,
} from './helpers/client.js';
import { runCli, startServe } from './helpers/cli.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { Browser, postForm } from './helpers/oauth.js';

const FAST_JOBS = { researchQueueMs: 300, researchRunMs: 700, trainingStepMs: 150 };

/** `agent-access login --no-browser`, in this process or (`start`: startCli) as a child; the test plays the person. */
async function loginAs(
  emulator: Emulator,
  env: NodeJS.ProcessEnv,
  decision: 'approve' | 'deny' = 'approve',
  extra: string[] = [],
  start: typeof startClient = startClient,
) {
  const cli = start(['login', '--base-url', emulator.baseUrl, '--no-browser', '--json', ...extra], { env });
  const [, url] = await cli.waitForStderr(AUTHORIZE_URL);
  const landed = await decideInBrowser(url!, decision);
  const code = await cli.exit;
  return { code, stdout: cli.stdout(), stderr: cli.stderr(), landed, url: new URL(url!) };
}

async function storedLogin(configDir: string) {
  const dir = join(configDir, 'servers');
  const [name] = (await readdir(dir)).filter((n) => n.endsWith('.json'));
  return { file: join(dir, name!), record: JSON.parse(await readFile(join(dir, name!), 'utf8')) };
}

describe('agent-access login (spec 4.2, 4.3, 5; RFC 8252, 7636, 9207, 9728, 8414)', () => {
  it('discovers, registers once, runs PKCE S256 with resource={base_url}/mcp, and stores the tokens 0600', async () => {
    const emulator = await startEmulator();
    const config = await scratchDir();
    const env = clientEnv(config);
    const first = await loginAs(emulator, env, 'approve', [], startCli);
    expect(first.code, first.stderr).toBe(0);
    expect(first.landed.status).toBe(200);
    expect(first.landed.text).toContain('Sie können diesen Tab jetzt schließen');

    const params = first.url.searchParams;
    expect(first.url.origin).toBe(emulator.authUrl);
    expect(params.get('code_challenge_method')).toBe('S256');
    expect(params.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(params.get('state')!.length).toBeGreaterThanOrEqual(32);
    expect(params.get('resource')).toBe(`${emulator.baseUrl}/mcp`);
    expect(params.get('scope')).toBe('ask');
    expect(params.get('redirect_uri')).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);

    const result = JSON.parse(first.stdout);
    expect(result).toMatchObject({
      base_url: emulator.baseUrl,
      issuer: emulator.baseUrl,
      subject: 'person_erika',
      scope: 'ask',
      audience: `${emulator.baseUrl}/mcp`,
      client_registered: true,
      refresh_token: true,
    });

    const { file, record } = await storedLogin(config);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(config, 'servers'))).mode & 0o777).toBe(0o700);
    expect(record.login.access_token).toMatch(/^ey/);
    expect(record.login.refresh_token).toBeTruthy();
    expect(Object.keys(record.clients)).toEqual(['http://127.0.0.1/callback']);

    // Once per server and redirect: the second login reuses the registration, with a new state and verifier.
    const second = await loginAs(emulator, env);
    expect(second.code, second.stderr).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ client_id: result.client_id, client_registered: false });
    expect(second.url.searchParams.get('state')).not.toBe(params.get('state'));
    expect(second.url.searchParams.get('code_challenge')).not.toBe(params.get('code_challenge'));
    expect(Object.keys(emulator.core.state.clients)).toHaveLength(1);
  });

  it('spec 2.7, 5.9: a retired scope is refused before any request (exit 2)', async () => {
    const emulator = await startEmulator();
    let requests = 0;
    emulator.core.events.subscribe((e) => e.name === 'request.served' && requests++);
    const res = await runClient(['login', '--base-url', emulator.baseUrl, '--scope', 'ask contacts.read', '--no-browser'], {
      env: clientEnv(await scratchDir()),
    });
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/"contacts\.read" is retired/);
    expect(res.stderr).not.toMatch(/\n\s+at /);
    expect(requests).toBe(0);
  });

  it('spec 2.7: an unknown scope is refused before any request, in one line that lists the valid scopes (exit 2)', async () => {
    const emulator = await startEmulator();
    let requests = 0;
    emulator.core.events.subscribe((e) => e.name === 'request.served' && requests++);
    const env = clientEnv(await scratchDir());
    const res = await runClient(['login', '--base-url', emulator.baseUrl, '--scope', 'ask foo', '--no-browser'], { env });
    expect(res.code).toBe(2);
    const lines = res.stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(/does not know the scope "foo"; the scopes are ask, workspace\.write, research, training\.write$/);
    expect(lines.slice(1)).toEqual(['see `agent-access login --help`']);
    expect(requests).toBe(0);
    // Without any server to talk to, the scope is still what is wrong.
    const nowhere = await runClient(['login', '--scope', 'foo'], { env, cwd: await scratchDir() });
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toContain('does not know the scope "foo"');
  });

  it('a server it cannot reach: the message says which server it chose and why (the last login, $AGENT_ACCESS_BASE_URL), exit 6', async () => {
    const emulator = await startEmulator();
    const config = await scratchDir();
    const env = clientEnv(config);
    expect((await loginAs(emulator, env)).code).toBe(0);
    const gone = emulator.baseUrl;
    await emulator.stop();
    const elsewhere = await scratchDir();
    for (const args of [['login'], ['ask', 'Wer ist Hufschmied?'], ['token', '--refresh']]) {
      const res = await runClient(args, { env, cwd: elsewhere });
      expect(res.code, res.stderr).toBe(6);
      expect(res.stderr, args[0]).toMatch(/ECONNREFUSED/);
      expect(res.stderr, args[0]).toContain(`${gone} is the server of the last login (`);
      expect(res.stderr, args[0]).toContain('neither --base-url, $AGENT_ACCESS_BASE_URL nor an emulator running in this directory');
      expect(res.stderr.trimEnd().split('\n'), args[0]).toHaveLength(1);
    }
    const viaEnv = await runClient(['login'], { env: clientEnv(config, { AGENT_ACCESS_BASE_URL: gone }), cwd: elsewhere });
    expect(viaEnv.code).toBe(6);
    expect(viaEnv.stderr).toContain(`${gone} is the server $AGENT_ACCESS_BASE_URL names`);
  });

  it('a server on a port fetch refuses (a "bad port" of the Fetch standard): the message says so, not "fetch failed", exit 6', async () => {
    const res = await runClient(['login', '--headless', '--scope', 'ask', '--base-url', 'http://127.0.0.1:9'], {
      env: clientEnv(await scratchDir()),
      cwd: await scratchDir(),
    });
    expect(res.code, res.stderr).toBe(6);
    expect(res.stderr).toContain('its port is one fetch never connects to (a "bad port" of the Fetch standard');
    expect(res.stderr).toContain('http://127.0.0.1:9 is the server --base-url names');
    expect(res.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('RFC 7009: a login that replaces stored tokens revokes the old refresh token at the server and says so', async () => {
    const emulator = await startEmulator();
    setConsentPolicy(emulator.core, null, { decision: 'approve' });
    const env = clientEnv(await scratchDir());
    const first = await runClient(['login', '--base-url', emulator.baseUrl, '--headless'], { env });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).not.toContain('Replaced');
    const [old] = listGrants(emulator.core);
    const second = await runClient(['login', '--base-url', emulator.baseUrl, '--headless'], { env });
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toContain(
      `Replaced the previous login to ${emulator.baseUrl}: revoked its refresh token at the server (RFC 7009), which ends its grant.\n`,
    );
    expect(listGrants(emulator.core).find((g) => g.id === old!.id)).toMatchObject({ status: 'revoked', revoked_by: 'client' });
    const third = await runClient(['login', '--base-url', emulator.baseUrl, '--headless', '--json'], { env });
    expect(JSON.parse(third.stdout).replaced_login).toMatchObject({ revoked: true, client_id: old!.client_id });
    expect(listGrants(emulator.core).filter((g) => g.status === 'active')).toHaveLength(1);
  });

  it('45.1 login whose browser opener fails (BROWSER=false) says so at once in one line (the URL, --no-browser, --callback-port, --headless), and the timeout names the same ways', async () => {
    const emulator = await startEmulator();
    const started = Date.now();
    const res = await runClient(['login', '--base-url', emulator.baseUrl, '--timeout', '3'], {
      env: clientEnv(await scratchDir(), { BROWSER: 'false' }),
    });
    expect(res.code).toBe(1);
    const lines = res.stderr.trimEnd().split('\n');
    const failed = lines.find((l) => l.startsWith('agent-access: could not open a browser'));
    expect(failed).toMatch(
      /^agent-access: could not open a browser: \$BROWSER "false" exited 1\. Open http:\/\/127\.0\.0\.1:\d+\/oauth\/authorize\?\S+ in a browser yourself; with --no-browser .*--callback-port PORT .*--headless with a consent policy/,
    );
    expect(lines.at(-1)).toMatch(
      /^agent-access: no answer from the browser within 3 s; run `agent-access login` again: with --no-browser .*--callback-port PORT .*--headless/,
    );
    // Told before the wait ran out, not with it.
    expect(lines.indexOf(failed!)).toBeLessThan(lines.length - 1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
  });

  it('45.1 an opener that fails does not end the login: the URL used elsewhere completes it', async () => {
    const emulator = await startEmulator();
    const ctx = memoryContext({
      clock: systemClock,
      env: clientEnv(await scratchDir()),
      openUrl: async (url) => {
        // The person opens the printed URL on another machine.
        setTimeout(() => void decideInBrowser(url, 'approve'), 50);
        throw new Error('no display to open a browser on (neither DISPLAY nor WAYLAND_DISPLAY is set, and $BROWSER is not)');
      },
    });
    const res = await runInProcess(['login', '--base-url', emulator.baseUrl], ctx);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toMatch(/^agent-access: could not open a browser: no display to open a browser on .*; with --no-browser/m);
  });

  it('45.1 with no display and no $BROWSER (Linux), login says so at once instead of trying an opener', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    delete env.DISPLAY;
    delete env.WAYLAND_DISPLAY;
    const res = await runClient(['login', '--base-url', emulator.baseUrl, '--timeout', '1'], { env });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(
      /^agent-access: could not open a browser: no display to open a browser on \(neither DISPLAY nor WAYLAND_DISPLAY is set, and \$BROWSER is not\)\. Open /m,
    );
  });

  it('45.11 login --headless whose code exchange fails says so once, never "server answered 502; retrying" (the 502 is its own listener\'s)', async () => {
    const emulator = await startEmulator();
    setConsentPolicy(emulator.core, null, { decision: 'approve' });
    emulator.faults.arm({ kind: 'server_error', route: '/oauth/token', count: 1 });
    const res = await runClient(['login', '--base-url', emulator.baseUrl, '--headless'], { env: clientEnv(await scratchDir()) });
    expect(res.code).toBe(6);
    expect(res.stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(/^Requesting the consent page on .* without a browser/),
      `agent-access: code exchange: the server answered HTTP 500 (${emulator.baseUrl}/oauth/token)`,
    ]);
  });

  it('MCP SEP-2352: when the server names another authorization server, the stored tokens are never presented to it; log in anew', async () => {
    const emulator = await startEmulator();
    setConsentPolicy(emulator.core, null, { decision: 'approve' });
    const config = await scratchDir();
    const env = clientEnv(config);
    expect((await runClient(['login', '--base-url', emulator.baseUrl, '--headless'], { env })).code).toBe(0);
    // As if the tokens came from the authorization server the resource named before.
    const { file, record } = await storedLogin(config);
    await writeFile(file, JSON.stringify({ ...record, issuer: 'https://old-as.example' }), { mode: 0o600 });
    let refreshes = 0;
    emulator.core.events.subscribe((e) => e.name === 'refresh.rotated' && refreshes++);
    const refused = await runClient(['token', '--refresh', '--base-url', emulator.baseUrl], { env });
    expect(refused.code).toBe(4);
    expect(refused.stderr).toMatch(/now names another authorization server \(http:\/\/127\.0\.0\.1:\d+, was https:\/\/old-as\.example\)/);
    expect(refreshes).toBe(0);
    expect((await storedLogin(config)).record).toMatchObject({ login: null, clients: {} });
    const again = await runClient(['login', '--base-url', emulator.baseUrl, '--headless', '--json'], { env });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ client_registered: true });
  });

  it('RFC 6749 §4.1.2.1: "Ablehnen" ends the command with a clear message and exit 5; nothing is stored', async () => {
    const emulator = await startEmulator();
    const config = await scratchDir();
    const denied = await loginAs(emulator, clientEnv(config), 'deny');
    expect(denied.code).toBe(5);
    expect(denied.stderr).toMatch(/access denied: the person clicked "Ablehnen"/);
    expect(denied.landed.text).toContain('Zugriff abgelehnt');
    const { record } = await storedLogin(config);
    expect(record.login).toBeNull();
  });

  it('RFC 6749 §10.12: a redirect with a foreign state is turned away and the real one still completes', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    const cli = startClient(['login', '--base-url', emulator.baseUrl, '--no-browser'], { env });
    const [, url] = await cli.waitForStderr(AUTHORIZE_URL);
    const callback = new URL(new URL(url!).searchParams.get('redirect_uri')!);
    const forged = await fetch(`${callback}?code=stolen&state=not-ours&iss=${encodeURIComponent(emulator.baseUrl)}`);
    expect(forged.status).toBe(400);
    expect(await forged.text()).toContain('Unbekannte Anmeldung');
    await decideInBrowser(url!, 'approve');
    expect(await cli.exit, cli.stderr()).toBe(0);
  });

  it('RFC 9207: a redirect with the right state but another issuer (mix-up) ends the login without exchanging the code', async () => {
    const emulator = await startEmulator();
    let exchanges = 0;
    emulator.core.events.subscribe((e) => e.name === 'tokens.issued' && exchanges++);
    const cli = startClient(['login', '--base-url', emulator.baseUrl, '--no-browser'], { env: clientEnv(await scratchDir()) });
    const [, url] = await cli.waitForStderr(AUTHORIZE_URL);
    const sent = new URL(url!).searchParams;
    const landed = await fetch(
      `${sent.get('redirect_uri')}?code=abc&state=${sent.get('state')}&iss=${encodeURIComponent('https://attacker.example')}`,
    );
    expect(landed.status).toBe(400);
    expect(await cli.exit).toBe(1);
    expect(cli.stderr()).toMatch(/authorization: .*"iss"/);
    expect(exchanges).toBe(0);
  });

  it('RFC 6749 §10.12: the state is single use: a reload of the redirect while its code is exchanged is turned away and the login still succeeds', async () => {
    const emulator = await startEmulator();
    let replays = 0;
    emulator.core.events.subscribe((e) => e.name === 'code.replayed' && replays++);
    // The exchange of the first redirect is held, so the reload surely comes while it runs (after it, the command may
    // have ended: the reload after a login is test/loopback-receiver.test.ts's).
    emulator.faults.arm({ kind: 'latency', ms: 2_000, route: 'POST /oauth/token', count: 1 });
    const exchanging = new Promise<void>((resolve) =>
      emulator.core.events.subscribe((e) => e.name === 'fault.fired' && e.data.kind === 'latency' && resolve()),
    );
    const cli = startClient(['login', '--base-url', emulator.baseUrl, '--no-browser'], { env: clientEnv(await scratchDir()) });
    const [, url] = await cli.waitForStderr(AUTHORIZE_URL);
    const { answer } = await new Browser().submitForm(url!, { decision: 'approve' });
    const location = answer.headers.location as string;
    const first = fetch(location);
    await exchanging;
    const reload = await fetch(location);
    expect(reload.status).toBe(400);
    expect(await reload.text()).toContain('Unbekannte Anmeldung');
    expect((await first).status).toBe(200);
    expect(await cli.exit, cli.stderr()).toBe(0);
    expect(replays).toBe(0);
  });

  it('a request with a malformed Host header does not crash the listener', async () => {
    const emulator = await startEmulator();
    const cli = startClient(['login', '--base-url', emulator.baseUrl, '--no-browser', '--json'], {
      env: clientEnv(await scratchDir()),
    });
    const [, url] = await cli.waitForStderr(AUTHORIZE_URL);
    const callback = new URL(new URL(url!).searchParams.get('redirect_uri')!);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port: callback.port, path: '/callback?state=x', headers: { host: 'a b' } }, (res) =>
        resolve(res.statusCode ?? 0),
      )
        .on('error', reject)
        .end();
    });
    expect(status).toBe(400);
    // The same listener still takes the real redirect and the login completes: no crash, and no wait for a timeout.
    const landed = await decideInBrowser(url!, 'approve');
    expect(landed.status).toBe(200);
    expect(await cli.exit, cli.stderr()).toBe(0);
    expect(JSON.parse(cli.stdout())).toMatchObject({ subject: 'person_erika' });
    expect(cli.stderr()).not.toMatch(/\n\s+at /);
  });

  it('bad option values are usage errors (exit 2) without a stack trace', async () => {
    const env = clientEnv(await scratchDir());
    for (const args of [
      ['--callback-port', '70000'],
      ['--timeout', '0'],
      ['--timeout', '3000000'],
    ]) {
      const res = await runClient(['login', '--base-url', 'http://127.0.0.1:9', ...args], { env });
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stderr).not.toMatch(/\n\s+at /);
    }
  });

  it('a cached client the server no longer knows (emulator restarted in memory) is registered anew', async () => {
    const first = await startEmulator();
    const env = clientEnv(await scratchDir());
    expect((await loginAs(first, env)).code).toBe(0);
    const port = Number(new URL(first.baseUrl).port);
    const authPort = Number(new URL(first.authUrl).port);
    await first.stop();
    const second = await startEmulator({ port, authPort });
    const again = await loginAs(second, env);
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout).client_registered).toBe(true);
  });

  it('--timeout: no answer from the browser ends the wait with a message, and the listener is closed', async () => {
    const emulator = await startEmulator();
    const cli = startClient(['login', '--base-url', emulator.baseUrl, '--no-browser', '--timeout', '1'], {
      env: clientEnv(await scratchDir()),
    });
    const [, url] = await cli.waitForStderr(AUTHORIZE_URL);
    expect(await cli.exit).toBe(1);
    expect(cli.stderr()).toMatch(/no answer from the browser within 1 s/);
    await expect(fetch(new URL(url!).searchParams.get('redirect_uri')!)).rejects.toThrow();
  });

  it('--identity leaves out resource: the token has no {base_url}/mcp audience and the REST routes refuse it', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    const login = await loginAs(emulator, env, 'approve', ['--identity']);
    expect(login.code, login.stderr).toBe(0);
    expect(login.url.searchParams.has('resource')).toBe(false);
    expect(JSON.parse(login.stdout).resource).toBeNull();
    const ask = await runClient(['ask', 'Wer ist Josef Huber?', '--base-url', emulator.baseUrl], { env });
    expect(ask.code).toBe(4);
    expect(ask.stderr).toMatch(/refused the access token/);
  });
});

describe('agent-access token, status, decode, logout (spec 3.2, 3.3, 5.3, 5.7)', () => {
  it('spec 5.3: one second past 900 s of virtual time the old token is refused; `token` refreshes with rotation', async () => {
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock });
    const ctx = memoryContext({
      clock,
      env: clientEnv(await scratchDir()),
      openUrl: async (url) => void (await decideInBrowser(url, 'approve')),
    });
    expect((await runInProcess(['login', '--base-url', emulator.baseUrl], ctx)).code).toBe(0);
    const first = (await runInProcess(['token', '--base-url', emulator.baseUrl, '--min-ttl', '0'], ctx)).stdout.trim();

    clock.advance(899 * SECOND);
    expect((await runInProcess(['token', '--base-url', emulator.baseUrl, '--min-ttl', '0'], ctx)).stdout.trim()).toBe(first);
    const askAt = (token: string) =>
      fetch(`${emulator.baseUrl}/chat/ask`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ question: 'Wer ist Josef Huber?' }),
      });
    expect((await askAt(first)).status).toBe(200);

    clock.advance(2 * SECOND);
    expect((await askAt(first)).status).toBe(401);
    const refreshed = await runInProcess(['token', '--base-url', emulator.baseUrl, '--json'], ctx);
    expect(refreshed.code, refreshed.stderr).toBe(0);
    const json = JSON.parse(refreshed.stdout);
    expect(json.access_token).not.toBe(first);
    expect(json.expires_in).toBe(900);
    expect((await askAt(json.access_token)).status).toBe(200);
    const status = JSON.parse((await runInProcess(['status', '--base-url', emulator.baseUrl, '--json'], ctx)).stdout);
    expect(status).toMatchObject({ logged_in: true, refreshes: 1, expired: false, subject: 'person_erika' });
  });

  it('parallel `token` calls in separate processes refresh once, all print the new token, and the family stays alive', async () => {
    // The token endpoint answers slowly, so all four processes find the expired token before the first refresh ends.
    const emulator = await startEmulator({
      extendApi: (app) => {
        app.addHook('onRequest', async (request) => void (request.url === '/oauth/token' ? await sleep(700) : undefined));
      },
    });
    const config = await scratchDir();
    const env = clientEnv(config);
    expect((await loginAs(emulator, env)).code).toBe(0);
    let rotations = 0;
    emulator.core.events.subscribe((e) => e.name === 'refresh.rotated' && rotations++);
    let invalidated = 0;
    emulator.core.events.subscribe((e) => e.name === 'family.invalidated' && invalidated++);
    // Fifteen minutes later on the client's clock: the stored access token has expired.
    const { file, record } = await storedLogin(config);
    await writeFile(file, JSON.stringify({ ...record, login: { ...record.login, expires_at: Date.now() - 1_000 } }));

    const runs = await Promise.all(Array.from({ length: 4 }, () => runCli(['token', '--base-url', emulator.baseUrl], { env })));
    for (const r of runs) expect(r.code, r.stderr).toBe(0);
    expect(new Set(runs.map((r) => r.stdout.trim())).size).toBe(1);
    expect(runs[0]!.stdout.trim()).not.toBe(record.login.access_token);
    expect(rotations).toBe(1);
    expect(invalidated).toBe(0);

    // The family is alive: the rotated refresh token works.
    const later = await runClient(['token', '--base-url', emulator.baseUrl, '--min-ttl', '900'], { env });
    expect(later.code, later.stderr).toBe(0);
    expect(rotations).toBe(2);
  });

  it('spec 3.2: after a replay invalidated the family, `token` says so plainly, exits 4 and forgets the tokens', async () => {
    const emulator = await startEmulator();
    const config = await scratchDir();
    const env = clientEnv(config);
    expect((await loginAs(emulator, env)).code).toBe(0);
    const { record } = await storedLogin(config);
    const stolen = record.login.refresh_token as string;
    expect((await runClient(['token', '--base-url', emulator.baseUrl, '--min-ttl', '900'], { env })).code).toBe(0);
    // Someone replays the rotated token: the whole family dies (spec 3.2).
    const replay = await postForm(`${emulator.baseUrl}/oauth/token`, {
      grant_type: 'refresh_token',
      refresh_token: stolen,
      client_id: record.login.client_id,
    });
    expect(replay.status).toBe(400);

    const res = await runClient(['token', '--base-url', emulator.baseUrl, '--min-ttl', '900'], { env });
    expect(res.code).toBe(4);
    expect(res.stdout).toBe('');
    // The cause as the server gave it: a replay, not a revocation.
    expect(res.stderr).toMatch(
      /no longer valid: refresh token family was invalidated because one of its refresh tokens was used twice \(replay\)\./,
    );
    expect(res.stderr).not.toMatch(/revoked|Hint:/);
    expect(res.stderr).toMatch(/Run `agent-access login --base-url http:\/\/127\.0\.0\.1:\d+` again/);
    expect((await storedLogin(config)).record.login).toBeNull();
    expect((await runClient(['status', '--base-url', emulator.baseUrl], { env })).code).toBe(4);
  });

  it('spec 3.3: a grant revoked by the person is refused on the next call; ask reports it and exits 4', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    expect((await loginAs(emulator, env)).code).toBe(0);
    const [grant] = listGrants(emulator.core);
    await revokeGrant(emulator.core, grant!.id, 'person');
    const res = await runClient(['ask', 'Wer ist Josef Huber?', '--base-url', emulator.baseUrl], { env });
    expect(res.code).toBe(4);
    expect(res.stderr).toMatch(/grant was revoked/);
  });

  it('token --refresh proves the grant at the server: after the person revoked it, exit 4 with a plain message', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    expect((await loginAs(emulator, env)).code).toBe(0);
    await revokeGrant(emulator.core, listGrants(emulator.core)[0]!.id, 'person');
    // The stored token is not expired, so plain `token` cannot know; --refresh asks the server.
    expect((await runClient(['token', '--base-url', emulator.baseUrl], { env })).code).toBe(0);
    const res = await runClient(['token', '--refresh', '--base-url', emulator.baseUrl], { env });
    expect(res.code).toBe(4);
    expect(res.stderr).toMatch(/no longer valid: the grant was revoked by the person\. Run `agent-access login/);
    expect(res.stderr).not.toMatch(/invalidated|Hint:/);
  });

  it('after `grants revoke` on a running serve, ask exits 4 and says the grant was revoked by an administrator (not a family invalidation)', async () => {
    const dir = await scratchDir();
    const s = await startServe(['--consent', 'approve', '--quiet'], { cwd: dir });
    const env = clientEnv(await scratchDir());
    // In the emulator's directory: the client finds it through its admin file, grants through its state file.
    const login = await runClient(['login', '--headless'], { env, cwd: dir });
    expect(login.code, login.stderr).toBe(0);
    const listed = await runCli(['grants', 'list', '--json'], { cwd: dir });
    const [grant] = (JSON.parse(listed.stdout) as { grants: Array<{ id: string }> }).grants;
    expect((await runCli(['grants', 'revoke', grant!.id], { cwd: dir })).code).toBe(0);
    const asked = await runClient(['ask', 'Wer ist Josef Huber?'], { env, cwd: dir });
    expect(asked.code).toBe(4);
    expect(asked.stderr).toBe(
      `agent-access: the login to ${s.ready.base_url} is no longer valid: the grant was revoked by an administrator. Run \`agent-access login --base-url ${s.ready.base_url}\` again.\n`,
    );
    expect(await s.stop()).toBe(0);
  });

  it('status shows server, subject, scopes, audience, expiry and refresh age; decode shows header and claims', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    expect((await loginAs(emulator, env, 'approve', ['--scope', 'ask research'])).code).toBe(0);
    const status = await runClient(['status', '--base-url', emulator.baseUrl], { env });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(new RegExp(`server\\s+${emulator.baseUrl} \\(--base-url\\)`));
    expect(status.stdout).toMatch(/subject\s+person_erika/);
    expect(status.stdout).toMatch(/scopes\s+ask research/);
    expect(status.stdout).toMatch(new RegExp(`audience\\s+${emulator.baseUrl}/mcp`));
    expect(status.stdout).toMatch(/access token\s+valid until \S+ \(in 1[45]m \d+s\)/);
    expect(status.stdout).toMatch(/refresh token\s+\d+s old, 0 refreshes since login/);

    const decoded = await runClient(['decode', '--base-url', emulator.baseUrl, '--json'], { env });
    const { header, claims } = JSON.parse(decoded.stdout);
    expect(header).toMatchObject({ typ: 'at+jwt', alg: 'ES256' });
    expect(claims).toMatchObject({ iss: emulator.baseUrl, aud: `${emulator.baseUrl}/mcp`, sub: 'person_erika', scope: 'ask research' });
    const human = await runClient(['decode', (await runClient(['token', '--base-url', emulator.baseUrl], { env })).stdout.trim()], { env });
    expect(human.stdout).toMatch(/typ: "at\+jwt"/);
    expect(human.stdout).toMatch(/exp: \d+ {2}# \S+Z, in 1[45]m/);
    const notJwt = await runClient(['decode', 'abc'], { env });
    expect(notJwt.code).toBe(1);
    expect(notJwt.stderr).toMatch(/not a JWT/);
  });

  it('RFC 7009: logout revokes at the server (the grant ends) and forgets the tokens locally', async () => {
    const emulator = await startEmulator();
    const config = await scratchDir();
    const env = clientEnv(config);
    expect((await loginAs(emulator, env)).code).toBe(0);
    const token = (await runClient(['token', '--base-url', emulator.baseUrl], { env })).stdout.trim();
    const res = await runClient(['logout', '--base-url', emulator.baseUrl], { env });
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/revoked at the server/);
    const ask = await fetch(`${emulator.baseUrl}/chat/ask`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{"question":"Hallo"}',
    });
    expect(ask.status).toBe(401);
    expect((await storedLogin(config)).record.login).toBeNull();
    expect((await runClient(['logout', '--base-url', emulator.baseUrl], { env })).stdout).toMatch(/Not logged in/);
    // 45.11: after a logout the advice is to log in again.
    expect((await runClient(['token', '--base-url', emulator.baseUrl], { env })).stderr).toMatch(
      /Run `agent-access login --base-url \S+` again\.\n$/,
    );
  });

  it('without --base-url the commands find the emulator running from this directory (its default state file)', async () => {
    const { startServe } = await import('./helpers/cli.js');
    const cwd = await scratchDir();
    const serve = await startServe([], { cwd });
    try {
      const env = clientEnv(await scratchDir());
      const cli = startClient(['login', '--no-browser'], { env, cwd });
      const [, url] = await cli.waitForStderr(AUTHORIZE_URL);
      expect(new URL(url!).origin).toBe(serve.ready.auth_url);
      await decideInBrowser(url!, 'approve');
      expect(await cli.exit, cli.stderr()).toBe(0);
      const status = await runClient(['status'], { env, cwd });
      expect(status.stdout).toMatch(/\(the emulator running here\)/);
      // Elsewhere, with nothing running, the newest login is used.
      expect((await runClient(['status'], { env, cwd: await scratchDir() })).stdout).toMatch(/\(the last login\)/);
      // The environment variable wins over discovery.
      const viaEnv = await runClient(['status'], { env: { ...env, AGENT_ACCESS_BASE_URL: 'http://127.0.0.1:9' }, cwd });
      expect(viaEnv.code).toBe(4);
      expect(viaEnv.stderr).toMatch(/not logged in to http:\/\/127\.0\.0\.1:9/);
      // 45.11: never logged in there: "log in", not "log in again".
      const token = await runClient(['token'], { env: { ...env, AGENT_ACCESS_BASE_URL: 'http://127.0.0.1:9' }, cwd });
      expect(token.stderr).toBe(
        'agent-access: not logged in to http://127.0.0.1:9. Run `agent-access login --base-url http://127.0.0.1:9`.\n',
      );
    } finally {
      await serve.stop();
    }
  });
});

describe('agent-access ask, research, train (spec 4.4)', () => {
  it('4.4 rule 5: ask with a key is answered once and charged once; without a key each call is charged; a reused key with another question exits 8', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    expect((await loginAs(emulator, env)).code).toBe(0);
    const ask = (question: string, ...extra: string[]) =>
      runClient(['ask', question, '--base-url', emulator.baseUrl, '--json', ...extra], { env });
    const charges = () => emulator.core.state.charges.count;

    const keyed = await ask('Wer ist Josef Huber?', '--idempotency-key', 'k-1');
    expect(keyed.code, keyed.stderr).toBe(0);
    const body = JSON.parse(keyed.stdout);
    expect(body.answer).toMatch(/Huber/);
    const again = JSON.parse((await ask('Wer ist Josef Huber?', '--idempotency-key', 'k-1')).stdout);
    expect(again.message_id).toBe(body.message_id);
    const afterKeyed = charges();

    const conflict = await ask('Etwas ganz anderes?', '--idempotency-key', 'k-1');
    expect(conflict.code).toBe(8);
    expect(conflict.stderr).toMatch(/Idempotency-Key "k-1" belongs to another request/);

    const plain1 = JSON.parse((await ask('Wer ist Josef Huber?')).stdout);
    const plain2 = JSON.parse((await ask('Wer ist Josef Huber?')).stdout);
    expect(plain1.message_id).not.toBe(plain2.message_id);
    expect(charges()).toBe(afterKeyed + 2);

    const human = await runClient(['ask', 'Wer ist Josef Huber?', '--base-url', emulator.baseUrl], { env });
    expect(human.stdout).toMatch(/\nSources:\n {2}\[1\] \[contacts\] Josef Huber \(con-002\)/);
    expect(human.stderr).toMatch(/^message_id: \S+$/m);
  });

  it('spec 5.5: a command whose scope the login lacks exits 5 and names the scope to log in with', async () => {
    const emulator = await startEmulator();
    const env = clientEnv(await scratchDir());
    expect((await loginAs(emulator, env)).code).toBe(0);
    const res = await runClient(['research', 'Wie funktioniert die Abrechnung?', '--base-url', emulator.baseUrl], { env });
    expect(res.code).toBe(5);
    expect(res.stderr).toMatch(/needs the scope "research"/);
    expect(res.stderr).toMatch(/agent-access login --scope "ask research"/); // what the login holds, plus what is missing
  });

  it('4.4 rule 3: research --wait polls with progress until succeeded, then prints the report and citations', async () => {
    // In-process on the manual clock: the job moves one step each time the progress line changes, so every state is seen.
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, timings: { researchQueueMs: 1_000, researchRunMs: 1_000 } });
    const ctx = memoryContext({
      clock,
      env: clientEnv(await scratchDir()),
      openUrl: async (url) => void (await decideInBrowser(url, 'approve')),
      onStderr: (text) => (/^research \S+: (queued|running)$/m.test(text) ? clock.advance(SECOND) : undefined),
    });
    const cli = (...args: string[]) => runInProcess([...args, '--base-url', emulator.baseUrl], ctx);
    expect((await cli('login', '--scope', 'research')).code).toBe(0);
    const res = await cli('research', 'Wie läuft der Weidegang?', '--wait', '--interval', '0.01');
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stderr.split('\n').filter((l) => l.startsWith('research '));
    expect(lines.map((l) => l.replace(/job_[^:\s]+/, 'JOB'))).toEqual([
      'research JOB: waiting',
      'research JOB: queued',
      'research JOB: running',
      expect.stringMatching(/^research JOB: succeeded after \d+s$/),
    ]);
    expect(res.stderr).not.toMatch(/\x1b/); // no terminal: plain lines
    expect(res.stdout).toMatch(/\nCitations:\n {2}\[1\] /);
    expect(res.stdout.split('\nCitations:')[0]).toBe(`${Object.values(emulator.core.state.research_jobs)[0]!.report}\n`);
  });

  it('research without --wait prints the job id and how to follow it; --job --wait follows it (separate processes)', async () => {
    const emulator = await startEmulator({ timings: FAST_JOBS });
    const env = clientEnv(await scratchDir());
    expect((await loginAs(emulator, env, 'approve', ['--scope', 'research'])).code).toBe(0);
    const started = await runCli(['research', 'Wie läuft der Weidegang?', '--base-url', emulator.baseUrl], { env });
    const jobId = started.stdout.trim();
    expect(jobId).toMatch(/^job_/);
    expect(started.stderr).toContain(`agent-access research --job ${jobId} --wait`);
    const followed = await runCli(['research', '--job', jobId, '--wait', '--interval', '0.1', '--json', '--base-url', emulator.baseUrl], {
      env,
    });
    expect(followed.code, followed.stderr).toBe(0);
    expect(JSON.parse(followed.stdout)).toMatchObject({ job_id: jobId, status: 'succeeded' });
    expect(followed.stderr).toMatch(/succeeded after \d+s/);
  });

  it('spec 2.6, 4.4 rule 4: train --wait shows each processing_step until indexed; the document is then findable', async () => {
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, timings: { trainingStepMs: 1_000 } });
    const ctx = memoryContext({
      clock,
      env: clientEnv(await scratchDir()),
      openUrl: async (url) => void (await decideInBrowser(url, 'approve')),
      onStderr: (text) => (/^training \S+: (received|parsing|chunking|indexing)$/m.test(text) ? clock.advance(SECOND) : undefined),
    });
    const cli = (...args: string[]) => runInProcess([...args, '--base-url', emulator.baseUrl], ctx);
    expect((await cli('login', '--scope', 'ask training.write')).code).toBe(0);
    const dir = await scratchDir();
    const file = join(dir, 'wartung-aufzug.md');
    await writeFile(
      file,
      '# Wartung Aufzug Nordflügel\n\nDer Aufzug im Nordflügel wird jeden zweiten Dienstag von der Firma Hebetech gewartet.\n',
    );
    const res = await cli('train', file, '--wait', '--interval', '0.01');
    expect(res.code, res.stderr).toBe(0);
    const steps = res.stderr
      .split('\n')
      .filter((l) => l.startsWith('training '))
      .map((l) => l.replace(/^training \S+: /, ''));
    expect(steps).toEqual(['waiting', 'received', 'parsing', 'chunking', 'indexing', expect.stringMatching(/^indexed after \d+s$/)]);
    expect(res.stderr).toMatch(/open it at http:\/\/127\.0\.0\.1:\d+\/documents\//);
    const ask = await cli('ask', 'Wer wartet den Aufzug im Nordflügel?', '--json');
    expect(JSON.parse(ask.stdout).sources.map((s: { title: string }) => s.title)).toContain('Wartung Aufzug Nordflügel');

    const missing = await cli('train', join(dir, 'fehlt.md'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`agent-access: no such file: ${join(dir, 'fehlt.md')}\n`);

    // 45.5: refused input exits 2 (usage), as the tables of docs/errors.md say for invalid_file_name, content_empty and invalid_request.
    expect((await cli('train', file, '--file-name', 'a/b.md')).code).toBe(2);
    await writeFile(join(dir, 'leer.md'), '');
    expect((await cli('train', join(dir, 'leer.md'))).code).toBe(2);
    expect((await cli('ask', 'x'.repeat(4001))).code).toBe(2);
  });

  it('spec 7, 8: a 429 is retried after Retry-After for keyed POSTs; a POST without a key is not retried (exit 9)', async () => {
    // The rate-limit window runs on the manual clock: it moves only when the client announces its retry.
    const clock = new ManualClock();
    const emulator = await startEmulator({ clock, rateLimit: '1/s' });
    const ctx = memoryContext({
      clock,
      env: clientEnv(await scratchDir()),
      openUrl: async (url) => void (await decideInBrowser(url, 'approve')),
      onStderr: (text) => (text.includes('retrying') ? clock.advance(SECOND) : undefined),
    });
    const cli = (...args: string[]) => runInProcess([...args, '--base-url', emulator.baseUrl], ctx);
    expect((await cli('login')).code).toBe(0);
    expect((await cli('ask', 'Hallo')).code).toBe(0); // the window's one request

    const unkeyed = await cli('ask', 'Hallo');
    expect(unkeyed.code).toBe(9);
    expect(unkeyed.stderr).toMatch(
      /rate limited \(limit 1\); try again in 1 s \(a POST without --idempotency-key is never retried automatically\)/,
    );

    const keyed = await cli('ask', 'Hallo', '--idempotency-key', 'retry-me');
    expect(keyed.code, keyed.stderr).toBe(0);
    expect(keyed.stderr).toMatch(/rate limited; retrying in 1 s \(attempt 2 of 4; Ctrl-C stops\)\n/);
    expect(keyed.stdout).toMatch(/\S/);
  });
});
