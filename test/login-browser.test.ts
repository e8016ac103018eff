/**
 * `agent-access login` end to end with a real browser: the command opens the consent page through $BROWSER
 * (here a script that hands the URL to this test), Debian Chromium driven by playwright-core shows it, the
 * test clicks "Zulassen" or "Ablehnen", and Chromium follows the redirect to the command's loopback listener.
 * Skips with a warning when Chromium is not installed; fails instead in CI.
 */
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Browser as Chromium, BrowserContext } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chromiumPlan, launchChromium, requireChromium } from './helpers/chromium.js';
import { clientEnv, startCli } from './helpers/client.js';
import { runCli } from './helpers/cli.js';
import { scratchDir, startEmulator } from './helpers/emulator.js';
import { pollUntil } from './helpers/wait.js';

const plan = chromiumPlan('login-browser.test.ts');

/** A stand-in for the person's browser launcher: appends each URL it is given to a file. */
async function recordingBrowser(dir: string): Promise<{ command: string; nextUrl: () => Promise<string> }> {
  const script = join(dir, 'record-url.mjs');
  const urls = join(dir, 'urls.txt');
  await writeFile(script, `import { appendFileSync } from 'node:fs';\nappendFileSync(${JSON.stringify(urls)}, process.argv[2] + '\\n');\n`);
  let taken = 0;
  return {
    command: `${process.execPath} ${script}`,
    async nextUrl() {
      const url = await pollUntil(
        async () => (await readFile(urls, 'utf8').catch(() => '')).split('\n').filter(Boolean)[taken],
        'the login command to open a browser',
        { timeoutMs: 15_000, intervalMs: 50 },
      );
      taken++;
      return url;
    },
  };
}

describe.skipIf(!plan.run)(`agent-access login in Chromium${plan.note}`, () => {
  let chromium: Chromium;
  let context: BrowserContext;

  beforeAll(async () => {
    requireChromium();
    chromium = await launchChromium();
  });
  afterAll(async () => {
    await chromium?.close();
  });
  afterEach(async () => {
    await context?.close();
  });

  async function loginWith(button: 'Zulassen' | 'Ablehnen') {
    const emulator = await startEmulator();
    const config = await scratchDir();
    const launcher = await recordingBrowser(await scratchDir());
    const env = clientEnv(config, { BROWSER: launcher.command });
    const cli = startCli(['login', '--base-url', emulator.baseUrl, '--scope', 'ask research'], { env });
    const url = await launcher.nextUrl();
    context = await chromium.newContext();
    const page = await context.newPage();
    await page.goto(url);
    await expect(page.getByText('nicht verifiziert').first().isVisible()).resolves.toBe(true);
    await page.getByRole('button', { name: button, exact: true }).click();
    await page.waitForURL(/^http:\/\/127\.0\.0\.1:\d+\/callback\?/);
    const shown = await page.getByRole('status').innerText();
    const code = await cli.exit;
    return { emulator, env, config, cli, code, shown, url: new URL(url) };
  }

  it('spec 5.2, 5.6: "Zulassen" in Chromium completes the login; the tab says it may be closed; tokens are stored', async () => {
    const { emulator, env, config, cli, code, shown, url } = await loginWith('Zulassen');
    expect(code, cli.stderr()).toBe(0);
    expect(url.origin).toBe(emulator.authUrl);
    expect(url.searchParams.get('resource')).toBe(`${emulator.baseUrl}/mcp`);
    expect(shown).toContain('Sie können diesen Tab jetzt schließen');
    expect(cli.stderr()).toContain('Opening the consent page in your browser');
    expect(cli.stdout()).toMatch(
      /^Logged in to http:\/\/127\.0\.0\.1:\d+ as person_erika \(client \S+, newly registered\)\.\nScopes: ask research;/,
    );

    const [file] = await readdir(join(config, 'servers'));
    const record = JSON.parse(await readFile(join(config, 'servers', file!), 'utf8'));
    expect(record.login.scope).toBe('ask research');
    const ask = await runCli(['ask', 'Wann kommt der Hufschmied?', '--base-url', emulator.baseUrl, '--json'], { env });
    expect(ask.code, ask.stderr).toBe(0);
    expect(JSON.parse(ask.stdout).answer).toMatch(/Hufschmied/);
  });

  it('RFC 6749 §4.1.2.1: "Ablehnen" in Chromium ends login with exit 5 and a clear message; nothing is stored', async () => {
    const { config, cli, code, shown } = await loginWith('Ablehnen');
    expect(code).toBe(5);
    expect(cli.stderr()).toMatch(/access denied: the person clicked "Ablehnen" on the consent screen/);
    expect(shown).toContain('Sie haben den Zugriff abgelehnt');
    const [file] = await readdir(join(config, 'servers'));
    expect(JSON.parse(await readFile(join(config, 'servers', file!), 'utf8')).login).toBeNull();
  });
});
