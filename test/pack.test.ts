import { execFile } from 'node:child_process';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { scratchDir } from './helpers/emulator.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('..', import.meta.url));

describe('the published package', () => {
  it(
    'npm pack produces a package that installs and runs `agent-access --help`, `serve`, `login` and the programmatic API',
    { timeout: 180_000 },
    async () => {
      const dir = await scratchDir();
      // Packs the dist/ that `npm test` built. prepack would rebuild it in place while other tests run the CLI from it.
      await run('npm', ['pack', '--silent', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT });
      const tarball = (await readdir(dir)).find((f) => f.endsWith('.tgz'));
      expect(tarball).toBeDefined();
      const { stdout: listing } = await run('tar', ['-tzf', join(dir, tarball!)]);
      expect(listing).toContain('package/dist/cli/main.js');
      expect(listing).toContain('package/fixtures/persons.json');
      expect(listing).toContain('package/fixtures/scenarios/hausverwaltung.json');
      // conformance client's $BROWSER for the client under test.
      expect(listing).toContain('package/bin/consent-opener.js');
      expect(listing).not.toContain('package/src/');
      expect(listing).not.toContain('package/test/');

      const app = join(dir, 'app');
      await run('mkdir', ['-p', app]);
      await writeFile(join(app, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
      await run('npm', ['install', '--silent', '--no-audit', '--no-fund', join(dir, tarball!)], { cwd: app, timeout: 150_000 });
      const bin = join(app, 'node_modules', '.bin', 'agent-access');
      const { stdout: help } = await run(bin, ['--help'], { cwd: app });
      expect(help).toContain('serve');
      expect(help).toContain('grants');

      // The installed package serves with its own fixtures and answers metadata.
      const child = execFile(bin, ['serve', '--port', '0', '--auth-port', '0', '--in-memory', '--json'], { cwd: app });
      try {
        const line = await new Promise<string>((resolve, reject) => {
          child.stdout!.once('data', (d) => resolve(String(d)));
          child.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
        });
        const { base_url } = JSON.parse(line);
        const res = await fetch(`${base_url}/.well-known/oauth-authorization-server`);
        expect(((await res.json()) as { issuer: string }).issuer).toBe(base_url);

        // The client side runs from the installed package too: discovery and registration, then the wait times out.
        const env = { ...process.env, AGENT_ACCESS_CONFIG_DIR: join(dir, 'config'), AGENT_ACCESS_BASE_URL: '' };
        const login = await run(bin, ['login', '--base-url', base_url, '--no-browser', '--timeout', '1'], { cwd: app, env }).then(
          () => ({ code: 0, stderr: '' }),
          (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
        );
        expect(login.code).toBe(1);
        expect(login.stderr).toMatch(/Open this URL in a browser to log in:\n {2}http:\/\/127\.0\.0\.1:\d+\/oauth\/authorize\?/);
        expect(login.stderr).toMatch(/no answer from the browser within 1 s/);
      } finally {
        child.kill('SIGTERM');
      }

      // conformance client from the installed package: its consent opener (an executable path as $BROWSER) answers
      // the installed client's login, which the person denies: the client exits 5, as consent-denied asks.
      const graded = await run(bin, ['conformance', 'client', '--scenario', 'consent-denied', '--json', '--', bin, 'login', '--base-url'], {
        cwd: app,
        timeout: 60_000,
      });
      expect(JSON.parse(graded.stdout)).toMatchObject({ scenarios: [{ name: 'consent-denied', verdict: 'pass', exit_code: 5 }] });

      // The programmatic API imports from the installed package, with its type declarations, in-process and as a child.
      const script = [
        "import { startEmulator } from 'agent-access';",
        'for (const mode of ["in-process", "child"]) {',
        '  const emu = await startEmulator({ mode, clock: "manual" });',
        '  const { access_token } = await emu.issueTokens({ scopes: ["ask"] });',
        '  await emu.clock.advance("16m");',
        '  const res = await fetch(`${emu.baseUrl}/chat/ask`, { method: "POST", headers: { authorization: `Bearer ${access_token}`, "content-type": "application/json" }, body: JSON.stringify({ question: "Hallo" }) });',
        '  console.log(mode, res.status);',
        '  await emu.stop();',
        '}',
      ].join('\n');
      await writeFile(join(app, 'use.mjs'), script);
      const { stdout: used } = await run(process.execPath, ['use.mjs'], { cwd: app, timeout: 30_000 });
      expect(used).toBe('in-process 401\nchild 401\n');
      const types = await readFile(join(app, 'node_modules', 'agent-access', 'dist', 'index.d.ts'), 'utf8');
      expect(types).toContain('export declare function startEmulator(options?: StartEmulatorOptions): Promise<RunningEmulator>;');
    },
  );
});
