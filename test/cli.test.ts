import { existsSync } from 'node:fs';
import { lstat, readFile, readdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { lockStateFile } from '../src/store/lock.js';
import { scratchDir } from './helpers/emulator.js';
import { killServe, onItsOwn, runCli, startServe, type ServeProcess } from './helpers/cli.js';
import { authorizeAndApprove, http, refresh, register } from './helpers/oauth.js';

const urls = (s: ServeProcess) => ({ baseUrl: s.ready.base_url, authUrl: s.ready.auth_url });

describe('agent-access serve', () => {
  it('--json prints exactly one JSON line when ready; logs go to stderr; the default state is .agent-access/state.json', async () => {
    const dir = await scratchDir();
    const s = await startServe([], { cwd: dir });
    expect(Object.keys(s.ready)).toEqual(expect.arrayContaining(['base_url', 'auth_url', 'issuer', 'state', 'admin_url', 'admin_token']));
    expect(s.ready.issuer).toBe(s.ready.base_url);
    expect(s.ready.base_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(s.ready.auth_url).not.toBe(s.ready.base_url);
    // The real path: the state file is named the same way whichever path (or link) led to it.
    expect(s.ready.state).toBe(join(await realpath(dir), '.agent-access', 'state.json'));
    await http(`${s.ready.base_url}/.well-known/oauth-authorization-server`);
    await new Promise((r) => setTimeout(r, 100));
    expect(s.stderr()).toContain('GET /.well-known/oauth-authorization-server 200');
    expect(s.stdoutRest()).toBe('');
  });

  it('SIGTERM: flushes state, removes the admin file and lock, exits 0', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const s = await startServe(['--state', state]);
    const { client_id } = await register(s.ready.base_url);
    expect(await s.stop()).toBe(0);
    expect(JSON.parse(await readFile(state, 'utf8')).clients[client_id]).toBeTruthy();
    expect(existsSync(join(dir, 'state.admin.json'))).toBe(false);
    expect(existsSync(`${state}.lock`)).toBe(false);
  });

  it('a corrupt state file: exit 3, the message names the file and the fix, the file is untouched', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    await writeFile(state, '{"version":1,', { mode: 0o600 });
    const res = await runCli(['serve', '--port', '0', '--auth-port', '0', '--state', state]);
    expect(res.code).toBe(3);
    expect(res.stderr).toContain(state);
    expect(res.stderr).toContain('mv');
    expect(res.stderr).not.toContain('    at ');
    expect(await readFile(state, 'utf8')).toBe('{"version":1,');
  });

  it('a state file in a place that cannot be written: exit 3 with the file named, no stack trace', async () => {
    const dir = await scratchDir();
    await writeFile(join(dir, 'not-a-dir'), 'x');
    const state = join(dir, 'not-a-dir', 'state.json');
    const res = await runCli(['serve', '--port', '0', '--auth-port', '0', '--state', state]);
    expect(res.code).toBe(3);
    expect(res.stderr).toContain(state);
    expect(res.stderr).not.toContain('    at ');
  });

  it("a usage error is one line and a hint naming the command's own help, exit 2; nested commands too", async () => {
    const cases: Array<[string[], string]> = [
      [['serve', '--rate-limit', 'abc'], 'agent-access serve'],
      [['serve', '--port', '99999'], 'agent-access serve'],
      [['serve', '--clock', 'manaul'], 'agent-access serve'],
      [['ask'], 'agent-access ask'],
      [['grants', 'revoke'], 'agent-access grants revoke'],
      [['clock', 'advance'], 'agent-access clock advance'],
      [['login', '--timeout', '0'], 'agent-access login'],
      // Found by the action, not by commander: the same two lines.
      [['research'], 'agent-access research'],
    ];
    for (const [args, command] of cases) {
      const res = await runCli(args);
      expect(res.code, args.join(' ')).toBe(2);
      expect(res.stdout, args.join(' ')).toBe('');
      const lines = res.stderr.trimEnd().split('\n');
      expect(lines, args.join(' ')).toHaveLength(2);
      expect(lines[0], args.join(' ')).toMatch(/^(error|agent-access): /);
      expect(lines[1], args.join(' ')).toBe(`see \`${command} --help\``);
    }
  });

  it('a usage error exits 2; --in-memory and --state conflict', async () => {
    expect((await runCli(['serve', '--port', 'abc'])).code).toBe(2);
    const conflict = await runCli(['serve', '--in-memory', '--state', 'x.json']);
    expect(conflict.code).toBe(2);
    expect(conflict.stderr).toContain('cannot be used with');
  });

  it('a port in use is reported plainly', async () => {
    const s = await startServe(['--in-memory']);
    const port = new URL(s.ready.base_url).port;
    const res = await runCli(['serve', '--in-memory', '--port', port, '--auth-port', '0']);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('address in use');
    expect(res.stderr).not.toContain('    at ');
  });
});

describe('agent-access grants: one writer per state file', () => {
  it('with serve running, list and revoke go through the emulator, which refuses the grant on the next request and keeps the change', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const s = await startServe(['--state', state]);
    const flow = await authorizeAndApprove(urls(s));
    const list = await runCli(['grants', 'list', '--state', state, '--json']);
    expect(list.code, `${list.stderr}\nserve: ${s.stderr()}`).toBe(0);
    const [grant] = JSON.parse(list.stdout).grants;
    expect(grant).toMatchObject({ client_name: 'Test Agent', status: 'active', scopes: ['ask'] });
    const human = await runCli(['grants', 'list', '--state', state]);
    expect(human.stdout).toContain(grant.id);
    const revoke = await runCli(['grants', 'revoke', grant.id, '--state', state]);
    expect(revoke.code, `${revoke.stderr}\nserve: ${s.stderr()}`).toBe(0);
    expect(revoke.stdout).toContain(`revoked ${grant.id}`);
    const afterRevoke = await refresh(s.ready.base_url, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token });
    expect(afterRevoke.json().error, afterRevoke.text).toBe('invalid_grant');
    // A later write by the server must not lose the revocation.
    await register(s.ready.base_url);
    expect(await s.stop(), s.stderr()).toBe(0);
    expect(JSON.parse(await readFile(state, 'utf8')).grants[grant.id].status).toBe('revoked');
  });

  it.concurrent(
    'an emulator stopped for longer than its lock takes to go stale (Ctrl+Z, a debugger) keeps its file: revoke goes through it once it runs again',
    { timeout: 40_000 },
    () =>
      onItsOwn(async ({ dir, serve }) => {
        const state = join(dir, 'state.json');
        const s = await serve(['--state', state]);
        await authorizeAndApprove(urls(s));
        const [grant] = JSON.parse((await runCli(['grants', 'list', '--state', state, '--json'])).stdout).grants;
        s.child.kill('SIGSTOP');
        let revoking: ReturnType<typeof runCli>;
        try {
          // Longer than the 5 s after which a lock nobody refreshed counts as stale.
          await sleep(6_500);
          revoking = runCli(['grants', 'revoke', grant.id, '--state', state, '--json'], { timeoutMs: 30_000 });
          // Taking the file over would be done (and the CLI gone) well within this; going through the emulator waits for it.
          await Promise.race([revoking, sleep(4_000)]);
        } finally {
          s.child.kill('SIGCONT');
        }
        const revoke = await revoking;
        expect(revoke.code, `${revoke.stderr}\nserve: ${s.stderr()}`).toBe(0);
        expect(JSON.parse(revoke.stdout).grant).toMatchObject({ id: grant.id, status: 'revoked' });
        // Still the one writer: it serves on, and its next write keeps the revocation.
        expect((await register(s.ready.base_url)).client_id).toBeTruthy();
        expect(await s.stop(), s.stderr()).toBe(0);
        expect(JSON.parse(await readFile(state, 'utf8')).grants[grant.id].status).toBe('revoked');
      }),
  );

  it.concurrent(
    'a running emulator whose admin file is gone: the CLI gives up within seconds and names the file, and touches nothing',
    { timeout: 40_000 },
    () =>
      onItsOwn(async ({ dir, serve }) => {
        const state = join(dir, 'state.json');
        const s = await serve(['--state', state]);
        const before = await readFile(state, 'utf8');
        await rm(join(dir, 'state.admin.json'));
        const started = Date.now();
        const list = await runCli(['grants', 'list', '--state', state], { timeoutMs: 35_000 });
        expect(Date.now() - started).toBeLessThan(20_000);
        expect(list.code).toBe(3);
        expect(list.stderr).toContain(join(dir, 'state.admin.json'));
        expect(await readFile(state, 'utf8')).toBe(before);
        expect(await s.stop(), s.stderr()).toBe(0);
      }),
  );

  it('a state file named through a symlink is one file: the CLI naming its real path goes through the emulator, and the link stays a link', async () => {
    const dir = await realpath(await scratchDir());
    const real = join(dir, 'real', 'state.json');
    const first = await startServe(['--state', real]);
    expect(await first.stop()).toBe(0);
    const link = join(dir, 'linked.json');
    await symlink(real, link);
    const s = await startServe(['--state', link]);
    expect(s.ready.state).toBe(real);
    const flow = await authorizeAndApprove(urls(s));
    const [grant] = JSON.parse((await runCli(['grants', 'list', '--state', real, '--json'])).stdout).grants;
    const revoke = await runCli(['grants', 'revoke', grant.id, '--state', real]);
    expect(revoke.code, revoke.stderr).toBe(0);
    // The running emulator made the change (the CLI did not write the file beside it).
    expect((await refresh(s.ready.base_url, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).json().error).toBe(
      'invalid_grant',
    );
    expect(await s.stop(), s.stderr()).toBe(0);
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    expect(JSON.parse(await readFile(real, 'utf8')).grants[grant.id].status).toBe('revoked');
  });

  it('a state file that is a symlink to a file not there yet: serve creates that file, and the link stays a link', async () => {
    const dir = await realpath(await scratchDir());
    const link = join(dir, 'state.json');
    const target = join(dir, 'elsewhere', 'state.json');
    await symlink(target, link);
    const s = await startServe(['--state', link]);
    expect(s.ready.state).toBe(target);
    expect(await s.stop(), s.stderr()).toBe(0);
    expect(JSON.parse(await readFile(link, 'utf8')).version).toBeDefined();
    expect((await lstat(link)).isSymbolicLink()).toBe(true);
    // Links in a loop are no missing file: the read says what is wrong.
    const [a, b] = [join(dir, 'a.json'), join(dir, 'b.json')];
    await symlink(b, a);
    await symlink(a, b);
    const loop = await runCli(['serve', '--port', '0', '--auth-port', '0', '--state', a]);
    expect(loop.code).toBe(3);
    expect(loop.stderr).toContain(`cannot read state file ${a} (ELOOP)`);
  });

  it('with no emulator running, the CLI works on the file under its lock; the next serve sees the change', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const s = await startServe(['--state', state]);
    const flow = await authorizeAndApprove(urls(s));
    s.child.kill('SIGINT');
    expect(await s.exit).toBe(0);
    const [grant] = JSON.parse((await runCli(['grants', 'list', '--state', state, '--json'])).stdout).grants;
    const revoke = await runCli(['grants', 'revoke', grant.id, '--state', state, '--json']);
    expect(revoke.code).toBe(0);
    expect(JSON.parse(revoke.stdout).grant).toMatchObject({ id: grant.id, status: 'revoked', revoked_by: 'admin' });
    expect(existsSync(`${state}.lock`)).toBe(false);
    const again = await startServe(['--state', state]);
    expect(
      (await refresh(again.ready.base_url, { client_id: flow.client_id, refresh_token: flow.tokens!.refresh_token })).json().error,
    ).toBe('invalid_grant');
  });

  it('grants list, grants revoke and charges in a directory without state exit 3 and create nothing (no .agent-access/)', async () => {
    const dir = await scratchDir();
    for (const args of [['grants', 'list'], ['charges'], ['grants', 'revoke', 'grant_nope']]) {
      const res = await runCli(args, { cwd: dir });
      expect(res.code, args.join(' ')).toBe(3);
      expect(res.stderr, args.join(' ')).toContain(`no state file at ${join(await realpath(dir), '.agent-access', 'state.json')}`);
      expect(await readdir(dir), args.join(' ')).toEqual([]);
    }
  });

  it('an unknown grant id exits 7; a missing state file exits 3 without creating one', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    expect((await runCli(['grants', 'list', '--state', state])).code).toBe(3);
    expect(existsSync(state)).toBe(false);
    const s = await startServe(['--state', state]);
    const viaServer = await runCli(['grants', 'revoke', 'grant_nope', '--state', state]);
    expect(viaServer.code).toBe(7);
    await s.stop();
    const direct = await runCli(['grants', 'revoke', 'grant_nope', '--state', state]);
    expect(direct.code).toBe(7);
    expect(direct.stderr).toContain('grant_nope');
  });

  it('the admin API refuses a wrong admin token', async () => {
    const dir = await scratchDir();
    const s = await startServe(['--state', join(dir, 'state.json')]);
    const res = await http(`${s.ready.admin_url}/grants`, { headers: { authorization: 'Bearer wrong' } });
    expect(res.status).toBe(401);
    const ok = await http(`${s.ready.admin_url}/grants`, { headers: { authorization: `Bearer ${s.ready.admin_token}` } });
    expect(ok.status).toBe(200);
  });
});

describe('agent-access charges', () => {
  it('prints totals per client from a running emulator, and from the file once it stopped', async () => {
    const dir = await scratchDir();
    const state = join(dir, 'state.json');
    const s = await startServe(['--state', state, '--price-ask', '0.5']);
    const flow = await authorizeAndApprove(urls(s));
    for (let i = 0; i < 2; i++)
      await http(`${s.ready.base_url}/chat/ask`, {
        method: 'POST',
        headers: { authorization: `Bearer ${flow.tokens!.access_token}`, 'content-type': 'application/json' },
        body: '{"question":"Kaution"}',
      });
    const live = JSON.parse((await runCli(['charges', '--state', state, '--json'])).stdout);
    expect(live).toMatchObject({
      unit: 'AKh',
      total: 1,
      clients: [{ client_id: flow.client_id, client_name: 'Test Agent', total: 1, charges: 2 }],
    });
    expect(live.entries).toHaveLength(2);
    await s.stop();
    const fromFile = await runCli(['charges', '--state', state, '--entries']);
    expect(fromFile.code).toBe(0);
    expect(fromFile.stdout).toContain('Test Agent');
    expect(fromFile.stdout).toContain('1.000');
    expect(fromFile.stdout).toContain('POST /chat/ask');
  });

  it('a malformed --rate-limit is a usage error', async () => {
    const res = await runCli(['serve', '--in-memory', '--rate-limit', 'lots']);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('N/min');
  });
});

describe('agent-access serve after a crash', () => {
  it.concurrent(
    'a holder killed with SIGKILL does not block: its admin file names a pid that is gone, so its lock is taken at once; while the second lives, a third is refused',
    { timeout: 30_000 },
    () =>
      onItsOwn(async ({ dir, serve }) => {
        const state = join(dir, 'state.json');
        const first = await serve(['--state', state]);
        await killServe(first);
        expect(existsSync(`${state}.lock`)).toBe(true);
        const started = Date.now();
        const second = await serve(['--state', state]);
        expect(Date.now() - started).toBeLessThan(10_000);
        expect((await http(`${second.ready.base_url}/.well-known/oauth-authorization-server`)).status).toBe(200);
        // While the second one lives, a third is refused at once.
        const third = await runCli(['serve', '--port', '0', '--auth-port', '0', '--state', state]);
        expect(third.code).toBe(3);
        expect(third.stderr).toContain('in use');
      }),
  );

  it.concurrent(
    'an admin file left by a killed serve whose pid a live process now has (a restarted container) holds nothing: the lock is taken once stale',
    { timeout: 30_000 },
    () =>
      onItsOwn(async ({ dir, serve }) => {
        const state = join(dir, 'state.json');
        const first = await serve(['--state', state]);
        await killServe(first);
        // The dead server's pid now belongs to a live process: this test runner stands in for it.
        const adminFile = join(dir, 'state.admin.json');
        await writeFile(adminFile, JSON.stringify({ ...JSON.parse(await readFile(adminFile, 'utf8')), pid: process.pid }));
        const started = Date.now();
        const second = await serve(['--state', state]);
        expect(Date.now() - started).toBeLessThan(10_000);
        expect((await http(`${second.ready.base_url}/.well-known/oauth-authorization-server`)).status).toBe(200);
      }),
  );

  it.concurrent('a stale admin file naming a dead pid never lets serve take a lock that a live process holds', { timeout: 30_000 }, () =>
    onItsOwn(async ({ dir, serve }) => {
      const state = join(dir, 'state.json');
      const first = await serve(['--state', state]);
      await killServe(first);
      // A live process (as `grants` does) takes the lock once the dead one's is stale, and keeps refreshing it.
      const release = await lockStateFile(state);
      try {
        expect(existsSync(join(dir, 'state.admin.json'))).toBe(true);
        const res = await runCli(['serve', '--port', '0', '--auth-port', '0', '--state', state], { timeoutMs: 25_000 });
        expect(res.code).toBe(3);
        expect(res.stderr).toContain('in use');
      } finally {
        await release();
      }
    }),
  );
});

describe('agent-access dashboard and serve --ui outside a terminal', () => {
  it('refuse with exit 2 and say why, instead of drawing into a pipe; serve starts nothing', async () => {
    const dir = await scratchDir();
    const dashboard = await runCli(['dashboard', '--state', join(dir, 'state.json')]);
    expect(dashboard.code).toBe(2);
    expect(dashboard.stderr).toContain('the dashboard needs an interactive terminal');
    const ui = await runCli(['serve', '--ui', '--state', join(dir, 'state.json'), '--port', '0', '--auth-port', '0']);
    expect(ui.code).toBe(2);
    expect(ui.stderr).toContain('serve --ui needs an interactive terminal');
    expect(existsSync(join(dir, 'state.json'))).toBe(false);
    const remote = await runCli(['dashboard', '--url', 'http://192.0.2.10:4100', '--admin-token', 'secret']);
    expect(remote.code).toBe(2);
    expect(remote.stderr).toContain('the admin API answers on loopback only');
    const both = await runCli(['serve', '--ui', '--json', '--in-memory']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/--json.*cannot be used with.*--ui/);
  });
});
