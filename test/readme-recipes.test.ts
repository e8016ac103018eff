/**
 * The README's CI recipe (README "CI") run as written, with the built CLI in place of `npx --no-install agent-access`
 * and free ports: serve --json in the background, readiness, login --headless under an approve policy, ask, the
 * clock moved past the access token's 900 s, ask again (refreshed by the client).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, startServe } from './helpers/cli.js';
import { clientEnv } from './helpers/client.js';
import { scratchDir } from './helpers/emulator.js';
import { blockAfter, CI_RECIPE, QUICK_START_CLIENT, QUICK_START_SERVE, runScript } from './helpers/docs.js';

describe('README recipes', () => {
  it('the quick start runs as written: serve, login, ask, research, and curl with the token', async () => {
    const dir = await scratchDir();
    const config = await scratchDir();
    // `npm start` is the build, then serve: the build is there already. Free ports instead of 4100/4101 (the client
    // finds the emulator running in this directory either way), an approve policy in the person's place, and jobs
    // that end soon: `research --wait` and `train --wait` poll them to their end either way.
    const serve = await startServe(['--consent', 'approve', '--quiet', '--research-duration', '500ms', '--training-step', '100ms'], {
      cwd: dir,
    });
    const baseUrl = String(JSON.parse(serve.readyLine).base_url);
    const start = blockAfter(QUICK_START_SERVE);
    expect(start).toMatch(/^npm install && npm start/);
    // The person's browser: opens the consent URL, which the policy answers, and follows the redirect to `login`.
    const browser = join(dir, 'browser.mjs');
    await writeFile(browser, 'await fetch(process.argv.at(-1), { redirect: "follow" }).then((r) => r.text());\n');
    const client = blockAfter(QUICK_START_CLIENT)
      .replaceAll('npx agent-access', `'${process.execPath}' '${BIN}'`)
      .replaceAll('http://127.0.0.1:4100', baseUrl);
    const { code, stdout, stderr } = await runScript(dir, client, clientEnv(config, { BROWSER: `${process.execPath} ${browser}` }), 90_000);
    await serve.stop();
    expect(code, stderr).toBe(0);
    expect(stdout).toMatch(/Logged in to http:\/\/127\.0\.0\.1:\d+/);
    // The curl line's answer: a JSON answer with sources (spec 2.4).
    const last = stdout.trim().split('\n').at(-1)!;
    expect(JSON.parse(last)).toMatchObject({
      answer: expect.any(String),
      sources: expect.any(Array),
      message_id: expect.stringMatching(/^msg_/),
    });
  });

  it("the CI job stops at once, with serve's log, when serve cannot start", async () => {
    const dir = await scratchDir();
    // The recipe up to readiness, with a serve that fails at start (a fixtures directory that does not exist).
    const lines = blockAfter(CI_RECIPE).split('\n');
    const waited = lines.slice(0, lines.findIndex((l) => l.startsWith('[ -s ready.json ]')) + 1).join('\n');
    const script = waited
      .replaceAll('npx --no-install agent-access', `'${process.execPath}' '${BIN}'`)
      .replace('serve --json', `serve --json --fixtures '${join(dir, 'missing')}'`)
      // A wait that did not notice would now run for hours, and the test's kill would end it: no bound on time needed.
      .replace('seq 150', 'seq 100000');
    const { code, stdout } = await runScript(dir, script, { ...process.env, NO_COLOR: '1' }, 60_000);
    // Exit 1 from the recipe's own check, not the kill: the wait stopped as serve did.
    expect(code).toBe(1);
    // serve's own message, printed by the recipe: the job log says why.
    expect(stdout).toMatch(/agent-access: .*missing/);
  });

  it('the CI job with login under an approve policy runs as written', async () => {
    const dir = await scratchDir();
    const script = blockAfter(CI_RECIPE).replaceAll('npx --no-install agent-access', `'${process.execPath}' '${BIN}'`);
    const { code, stdout, stderr } = await runScript(dir, script, { ...process.env, NO_COLOR: '1' }, 60_000);
    expect(code, `${stderr}\n${await readFile(join(dir, 'serve.log'), 'utf8').catch(() => '')}`).toBe(0);
    // Two answers, the second after the clock moved 16 minutes: the client refreshed its token in between.
    expect(stdout).toMatch(/^Logged in to http:\/\/127\.0\.0\.1:\d+ as \S+ .*\nScopes: ask research;/);
    // Each --json answer is a pretty-printed object from a line "{" to a line "}".
    const answers = [...stdout.matchAll(/^\{\n[\s\S]*?\n\}$/gm)].map((m) => JSON.parse(m[0]) as { answer: string; message_id: string });
    expect(answers).toHaveLength(2);
    expect(answers.every((a) => typeof a.answer === 'string' && a.message_id.startsWith('msg_'))).toBe(true);
    const log = await readFile(join(dir, 'serve.log'), 'utf8');
    expect(log.match(/POST \/oauth\/token 200/g)).toHaveLength(2); // the code exchange, then the refresh
  });
});
