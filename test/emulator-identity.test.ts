/**
 * 45.3: emulators of two projects take turns on one loopback address. Each signs with the key of its own state
 * folder, and the client keeps one login per key: a switch costs no consent, and what it says is true.
 * Real `serve` processes from two folders on the same ports; the client runs as the built binary.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { clientEnv } from './helpers/client.js';
import { runCli, startServe, type ServeProcess } from './helpers/cli.js';
import { scratchDir } from './helpers/emulator.js';

const portsOf = (serve: ServeProcess) => ['--port', new URL(serve.ready.base_url).port, '--auth-port', new URL(serve.ready.auth_url).port];

async function storeRecord(config: string) {
  const dir = join(config, 'servers');
  const names = (await readdir(dir)).filter((n) => n.endsWith('.json'));
  expect(names).toHaveLength(1);
  return JSON.parse(await readFile(join(dir, names[0]!), 'utf8')) as {
    key_id: string;
    login: { access_token: string } | null;
    parked: Record<string, { login: { access_token: string } | null }>;
  };
}

describe('45.3 two emulators on one address keep a login each', () => {
  // Four serves and ten commands one after the other: 6 to 8 s on a quiet machine, past the integration project's 30 s
  // on a loaded one (it failed so at a load of 11). Nothing in it is timed.
  it('a switch is told in one true line, costs no consent going back, and never revokes one emulator’s login at the other', async () => {
    const [projectA, projectB, elsewhere, config] = await Promise.all([scratchDir(), scratchDir(), scratchDir(), scratchDir()]);
    const env = clientEnv(config);
    const cli = (args: string[], cwd: string) => runCli(args, { cwd, env });

    // Project A: its emulator, a login, a token.
    let a = await startServe(['--consent', 'approve'], { cwd: projectA });
    const base = a.ready.base_url;
    const ports = portsOf(a);
    const loginA = await cli(['login', '--headless', '--scope', 'ask'], projectA);
    expect(loginA.code, loginA.stderr).toBe(0);
    const tokenA = (await cli(['token'], projectA)).stdout.trim();
    expect(tokenA).toMatch(/^ey/);
    await a.stop();

    // Project B's emulator on the same address. Asked from elsewhere (no admin file): the server's refusal of A's
    // token makes the client look at the keys there, and it says so, once, truly.
    let b = await startServe(['--consent', 'approve', ...ports], { cwd: projectB });
    expect(b.ready.base_url).toBe(base);
    const refused = await cli(['ask', 'Wann ist die Mittagsruhe?', '--base-url', base], elsewhere);
    expect(refused.code, refused.stderr).toBe(4);
    const lines = refused.stderr.trim().split('\n');
    expect(lines, refused.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^agent-access: ${base} is now another emulator \\(signing key .+, where the stored login's is .+\\); that login is kept for when its emulator is back\\. Run`,
      ),
    );
    expect(lines[0]).toContain(`Run \`agent-access login --base-url ${base}\`.`);
    expect(lines[0]).not.toMatch(/again|register|settings page/);

    // Logging in to B: A's login is kept for A, not revoked at B (which never knew it): no warning, no hint.
    const loginB = await cli(['login', '--headless', '--scope', 'ask'], projectB);
    expect(loginB.code, loginB.stderr).toBe(0);
    expect(loginB.stderr).not.toMatch(/warning|register|settings page/);
    const tokenB = (await cli(['token'], projectB)).stdout.trim();
    expect(tokenB).not.toBe(tokenA);
    let record = await storeRecord(config);
    expect(record.login?.access_token).toBe(tokenB);
    expect(Object.values(record.parked).map((p) => p.login?.access_token)).toEqual([tokenA]);
    await b.stop();

    // A again, from its folder: its admin file names its key, so `token` hands out A's own token at once (offline,
    // the very token of before: no consent), and `ask` works with it.
    a = await startServe(['--consent', 'approve', ...ports], { cwd: projectA });
    const backToA = await cli(['token'], projectA);
    expect(backToA.code, backToA.stderr).toBe(0);
    expect(backToA.stdout.trim()).toBe(tokenA);
    expect(backToA.stderr).toContain('using the login kept for it');
    const askA = await cli(['ask', 'Wann ist die Mittagsruhe?'], projectA);
    expect(askA.code, askA.stderr).toBe(0);
    expect(askA.stderr).not.toMatch(/another emulator|login/);
    await a.stop();

    // B again, asked from elsewhere: B refuses A's token, its keys are B's, and B's kept login answers.
    b = await startServe(['--consent', 'approve', ...ports], { cwd: projectB });
    const askB = await cli(['ask', 'Wann ist die Mittagsruhe?', '--base-url', base], elsewhere);
    expect(askB.code, askB.stderr).toBe(0);
    expect(askB.stderr).toContain('using the login kept for it');
    record = await storeRecord(config);
    expect(record.login?.access_token).toBe(tokenB);
    expect(Object.values(record.parked).map((p) => p.login?.access_token)).toEqual([tokenA]);
    await b.stop();
  }, 120_000);

  it('one emulator restarted from its folder is the same server: its login is simply used, nothing parked', async () => {
    const [project, config] = await Promise.all([scratchDir(), scratchDir()]);
    const env = clientEnv(config);
    let serve = await startServe(['--consent', 'approve'], { cwd: project });
    const ports = portsOf(serve);
    expect((await runCli(['login', '--headless', '--scope', 'ask'], { cwd: project, env })).code).toBe(0);
    const before = (await runCli(['token'], { cwd: project, env })).stdout;
    await serve.stop();
    serve = await startServe(['--consent', 'approve', ...ports], { cwd: project });
    const after = await runCli(['token', '--refresh'], { cwd: project, env });
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout).not.toBe(before);
    expect(after.stderr).toBe('');
    expect((await storeRecord(config)).parked ?? {}).toEqual({});
    await serve.stop();
  });
});
