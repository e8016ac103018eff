/**
 * Issue 42: `agent-access conformance client` grades a client both ways. agent-access's own client (its commands one
 * after the other: login through $BROWSER, ask, research --wait, train --wait, ask) passes every scenario it exercises;
 * the same client used the wrong way fails the check that names the mistake; and the command's exit codes, JSON,
 * JUnit and kept logs are what docs/conformance.md says.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSENT_OPENER, ConformanceUsageError, runClientConformance, type ClientRun, type ConformanceReport } from '../src/index.js';
import { FAULT_KINDS } from '../src/core/emulation/fault-spec.js';
import { BIN, runCli } from './helpers/cli.js';
import { pollUntil } from './helpers/wait.js';
import { commandsOf } from './helpers/client.js';
import { runOwnClient } from './fixtures/conformance/own-client.mjs';

const OWN_CLIENT = fileURLToPath(new URL('./fixtures/conformance/own-client.mjs', import.meta.url));
const CLI = `${process.execPath} ${BIN}`;
const env = { AGENT_ACCESS_CLI: CLI, NO_COLOR: '1' };

/** The checks of a report that did not pass, as `id verdict: message` lines (a failed assertion shows them). */
const notPassed = (report: ConformanceReport) =>
  report.scenarios.flatMap((s) => s.checks.filter((c) => c.verdict !== 'pass').map((c) => `${c.id} ${c.verdict}: ${c.message}`));
const verdicts = (report: ConformanceReport) => Object.fromEntries(report.scenarios.map((s) => [s.name, s.verdict]));
const check = (report: ConformanceReport, id: string) => report.scenarios.flatMap((s) => s.checks).find((c) => c.id === id);

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'conformance-test-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A POST sent again by curl when the first fails, without Idempotency-Key: the retry that charges twice. */
const CURL_RETRY =
  'tok=$($cli token --base-url "$base")\n' +
  'ask() { curl -sf -X POST "$base/chat/ask" -H "authorization: Bearer $tok" -H "content-type: application/json" -d \'{"question":"Hallo?"}\'; }\n' +
  'ask || ask';

/** part B's fault kind; until it is merged, lost-answer is not exercised. */
const DROP_RESPONSE = (FAULT_KINDS as readonly string[]).includes('drop_response');

/** A client script: the own CLI's commands, `$base` the base URL the scenario appends. */
async function script(name: string, body: string): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, `set -e\nfor base; do :; done\ncli="${CLI}"\n${body}\n`);
  return file;
}

describe('42.5 agent-access own client', () => {
  it('42.5 passes every scenario it exercises; parallel-expiry is not exercised (it never has two calls in flight)', async () => {
    const started = Date.now();
    // In this process: the same commands and requests, without a Node start for each command of each scenario. The
    // client as a command (each command a process) runs in lost-answer and in the tests of the command below.
    const report = await runClientConformance({ client: (run) => runOwnClient(run, commandsOf(run)), suite: 'all' });
    const figures = report.scenarios.map((s) => `${s.name} ${s.verdict} ${(s.duration_ms / 1000).toFixed(1)} s`).join('; ');
    console.log(`own client, all scenarios in ${((Date.now() - started) / 1000).toFixed(1)} s: ${figures}`);
    expect(report.summary.fail, notPassed(report).join('\n')).toBe(0);
    expect(verdicts(report)).toMatchObject({
      flow: 'pass',
      expiry: 'pass',
      rotation: 'pass',
      revoked: 'pass',
      'family-killed': 'pass',
      'rate-limited': 'pass',
      'server-error': 'pass',
      'research-polling': 'pass',
      'research-failed': 'pass',
      'training-async': 'pass',
      shapes: 'pass',
      'consent-denied': 'pass',
      'parallel-expiry': 'not_exercised',
    });
    // A check whose trigger never came is not_exercised, never pass.
    expect(check(report, 'parallel-expiry.one-refresh')?.verdict).toBe('not_exercised');
  }, 240_000);
});

describe('42.2 the same client used the wrong way fails the check that names the mistake', () => {
  it('42.2 flow: a login without resource (an identity token) fails flow.pkce-state-resource with the RFC 8707 hint', async () => {
    const client = await script('identity.sh', '$cli login --base-url "$base" --identity\n$cli ask --base-url "$base" "Hallo?" || true');
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['flow'], env });
    const failed = check(report, 'flow.pkce-state-resource')!;
    expect(failed).toMatchObject({ verdict: 'fail', rule: expect.stringContaining('RFC 8707') });
    expect(failed.message).toMatch(/no resource/);
    expect(failed.hint).toMatch(/resource=http:\/\/127\.0\.0\.1:\d+\/mcp/);
  }, 60_000);

  it('42.2 flow: scopes asked for and never used fail flow.minimal-scopes (spec 5.9)', async () => {
    const client = await script(
      'scopes.sh',
      '$cli login --base-url "$base" --scope "ask research training.write"\n$cli ask --base-url "$base" "Hallo?"',
    );
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['flow'], env });
    expect(check(report, 'flow.minimal-scopes')).toMatchObject({
      verdict: 'fail',
      message: expect.stringMatching(/“research”, “training.write”/),
    });
  }, 60_000);

  it('42.2 rate-limited: a POST without Idempotency-Key is not retried after its 429, so rate-limited.eventually-succeeds fails', async () => {
    const client = await script('no-key.sh', '$cli login --base-url "$base"\n$cli ask --base-url "$base" "Hallo?"');
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['rate-limited'], env });
    expect(check(report, 'rate-limited.eventually-succeeds')).toMatchObject({
      verdict: 'fail',
      message: expect.stringContaining('POST /chat/ask'),
    });
    expect(report.scenarios[0]!.exit_code).toBe(9);
  }, 60_000);

  it('42.2 server-error: a POST sent again without Idempotency-Key after its 503 fails server-error.retry-with-key', async () => {
    const client = await script('curl-retry.sh', `$cli login --base-url "$base"\n${CURL_RETRY}`);
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['server-error'], env });
    expect(check(report, 'server-error.retry-with-key')).toMatchObject({
      verdict: 'fail',
      message: expect.stringMatching(/^POST \/chat\/ask answered 503 and was sent again [\d.]+ s later without Idempotency-Key$/),
      hint: expect.stringMatching(/^Send an Idempotency-Key header/),
    });
  }, 60_000);

  it('42.2 research-polling: polling in a loop without a pause fails research-polling.interval', async () => {
    const client = await script(
      'hot-poll.sh',
      [
        '$cli login --base-url "$base" --scope research',
        'job=$($cli research --base-url "$base" "Was sagt die Wissensdatenbank über Wartungsintervalle?")',
        'tok=$($cli token --base-url "$base")',
        // Bounded: at most 300 polls.
        'i=0; while [ $i -lt 300 ] && ! curl -s "$base/research/$job" -H "authorization: Bearer $tok" | grep -qE "succeeded|failed"; do i=$((i+1)); done',
      ].join('\n'),
    );
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['research-polling'], env });
    expect(check(report, 'research-polling.interval')).toMatchObject({
      verdict: 'fail',
      message: expect.stringMatching(/polls in [\d.]+ s: one every \d+ ms$/),
    });
  }, 60_000);

  it('42.2 research-failed: the same research started again without a key after it failed fails research-failed.no-unkeyed-restart', async () => {
    const client = await script(
      'restart.sh',
      '$cli login --base-url "$base" --scope research\nq="Wartungsintervalle?"\n$cli research --base-url "$base" --wait --interval 1s "$q" || $cli research --base-url "$base" --wait --interval 1s "$q"',
    );
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['research-failed'], env });
    expect(check(report, 'research-failed.no-unkeyed-restart')?.verdict).toBe('fail');
    expect(check(report, 'research-failed.stops-polling')?.verdict).toBe('pass');
  }, 60_000);

  it('42.2 training-async: asking right after POST /training, before it is indexed, fails training-async.waits-for-indexed', async () => {
    const client = await script(
      'no-wait.sh',
      'printf "# Notiz\\n\\nWartung freitags.\\n" > "$HOME/n.md"\n$cli login --base-url "$base" --scope "ask training.write"\n$cli train --base-url "$base" "$HOME/n.md"\n$cli ask --base-url "$base" "Wann ist Wartung?"',
    );
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['training-async'], env });
    expect(check(report, 'training-async.waits-for-indexed')).toMatchObject({
      verdict: 'fail',
      message: expect.stringMatching(
        /^asked [\d.]+ s after POST \/training, (.+ before the document was indexed|and the document was never indexed)$/,
      ),
    });
  }, 60_000);

  it('42.2 revoked: a script that goes on as if nothing happened (exit 0) fails revoked.stops-or-reauthorizes', async () => {
    const client = await script(
      'ignore.sh',
      '$cli login --base-url "$base"\nfor q in Eins Zwei Drei; do $cli ask --base-url "$base" "$q?" || true; done',
    );
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['revoked'], env });
    expect(check(report, 'revoked.stops-or-reauthorizes')).toMatchObject({
      verdict: 'fail',
      message: expect.stringMatching(/exited 0 without a new authorization/),
    });
    // The own client forgot the dead login after one refused refresh: no loop, no second try of the refused token.
    expect(check(report, 'revoked.no-loop')?.verdict).toBe('pass');
    expect(check(report, 'revoked.no-refused-refresh-retry')?.verdict).toBe('pass');
  }, 60_000);

  it('42.2 consent-denied: a client that exits 0 after the person refused fails consent-denied.exits-non-zero', async () => {
    const client = await script('denied.sh', '$cli login --base-url "$base" || true');
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['consent-denied'], env });
    expect(check(report, 'consent-denied.exits-non-zero')).toMatchObject({
      verdict: 'fail',
      message: 'the client exited 0 after the person refused access',
    });
  }, 60_000);

  it('42.2 expiry: a client that never calls again after its first call leaves expiry not_exercised, and the scenario too', async () => {
    const client = await script('once.sh', '$cli login --base-url "$base"\n$cli ask --base-url "$base" "Hallo?"');
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['expiry'], env });
    expect(report.scenarios[0]).toMatchObject({ verdict: 'not_exercised' });
    expect(report.summary).toEqual({ pass: 0, fail: 0, not_exercised: 1 });
  }, 60_000);
});

describe.skipIf(!DROP_RESPONSE)('42.2 lost-answer (the drop_response fault)', () => {
  it('42.2 lost-answer: the own client retries the keyed POST whose answer was lost with its key: one charge', async () => {
    const report = await runClientConformance({ command: process.execPath, args: [OWN_CLIENT], scenarios: ['lost-answer'], env });
    expect(report.scenarios[0]!.verdict, notPassed(report).join('\n')).toBe('pass');
    expect(check(report, 'lost-answer.retry-same-key')?.message).toMatch(/retr(y|ies) with the lost call's key/);
  }, 60_000);

  it('42.2 lost-answer: without a key the own client does not retry, and reports the failure (exit non-zero)', async () => {
    const client = await script('lost-no-key.sh', '$cli login --base-url "$base"\n$cli ask --base-url "$base" "Hallo?"');
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['lost-answer'], env });
    expect(check(report, 'lost-answer.retry-same-key')).toMatchObject({ verdict: 'pass', message: expect.stringMatching(/^not retried/) });
  }, 60_000);

  it('42.2 lost-answer: a retry without a key fails both checks (it ran and was charged twice)', async () => {
    const client = await script('lost-curl.sh', `$cli login --base-url "$base"\n${CURL_RETRY}`);
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['lost-answer'], env });
    expect(check(report, 'lost-answer.retry-same-key')?.verdict).toBe('fail');
    expect(check(report, 'lost-answer.one-charge')).toMatchObject({
      verdict: 'fail',
      message: 'POST /chat/ask was charged 2 times for one operation',
    });
  }, 60_000);
});

describe('42.1 the command', () => {
  it('42.1 exit 0, the report as JSON, JUnit with one testcase per check, and the kept logs of each scenario', async () => {
    const junit = join(dir, 'report.xml');
    const logs = join(dir, 'logs');
    const { code, stdout, stderr } = await runCli(
      [
        'conformance',
        'client',
        '--scenario',
        'consent-denied',
        '--json',
        '--junit',
        junit,
        '--keep-logs',
        logs,
        '--',
        process.execPath,
        OWN_CLIENT,
      ],
      { env, timeoutMs: 60_000 },
    );
    expect(code, stderr).toBe(0);
    const report = JSON.parse(stdout) as ConformanceReport;
    expect(report).toMatchObject({ version: 1, command: [process.execPath, OWN_CLIENT], summary: { pass: 1, fail: 0, not_exercised: 0 } });
    expect(report.scenarios[0]).toMatchObject({ name: 'consent-denied', verdict: 'pass', exit_code: 5 });
    // One line per scenario on stderr when it is no terminal, without colour.
    expect(stderr).toMatch(/^consent-denied: pass \(\d+\.\d s, exit 5\)$/m);
    expect(stderr).not.toContain('\x1b[');
    const xml = await readFile(junit, 'utf8');
    expect(xml.match(/<testcase /g)).toHaveLength(report.scenarios[0]!.checks.length);
    expect(xml).toContain('name="consent-denied.exits-non-zero"');
    expect((await readdir(join(logs, 'consent-denied'))).sort()).toEqual(['events.jsonl', 'requests.jsonl', 'stderr.log', 'stdout.log']);
    expect(await readFile(join(logs, 'consent-denied', 'requests.jsonl'), 'utf8')).toContain('/oauth/authorize');
  }, 60_000);

  it('42.1 exit 1 when a scenario fails, with the failed check, its rule and hint in the table', async () => {
    const client = await script('identity-cli.sh', '$cli login --base-url "$base" --identity');
    const { code, stdout } = await runCli(['conformance', 'client', '--scenario', 'flow', '--', 'sh', client], { env, timeoutMs: 60_000 });
    expect(code).toBe(1);
    expect(stdout).toMatch(/^flow +fail/m);
    expect(stdout).toMatch(/FAIL flow\.pkce-state-resource \(spec 4\.2;.*RFC 8707 §2\)/);
    expect(stdout).toMatch(/hint: Send resource=/);
  }, 60_000);

  it('42.1 exit 2 for an unknown scenario or suite, exit 3 when the command cannot be started', async () => {
    expect((await runCli(['conformance', 'client', '--scenario', 'nope', '--', 'true'])).code).toBe(2);
    expect((await runCli(['conformance', 'client', '--suite', 'nope', '--', 'true'])).code).toBe(2);
    const missing = await runCli(['conformance', 'client', '--scenario', 'consent-denied', '--', join(dir, 'no-such-client')], {
      timeoutMs: 30_000,
    });
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/cannot start .*no-such-client: ENOENT/);
  }, 60_000);

  it('42.1 a command still running at --timeout is killed with its whole process group, and the run is judged', async () => {
    const pidFile = join(dir, 'grandchild.pid');
    const client = await script('hang.sh', `sleep 60 & echo $! > ${pidFile}\nwait`);
    const report = await runClientConformance({ command: 'sh', args: [client], scenarios: ['consent-denied'], timeout: '1s', env });
    expect(report.scenarios[0]).toMatchObject({ timed_out: true, exit_code: null, verdict: 'not_exercised' });
    const grandchild = Number(await readFile(pidFile, 'utf8'));
    // Gone, or a zombie no one reaped yet: not running.
    const state = await readFile(`/proc/${grandchild}/stat`, 'utf8').then(
      (stat) => stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3),
      () => 'gone',
    );
    expect(['gone', 'Z']).toContain(state);
  }, 60_000);

  it('42.1 Ctrl-C (SIGINT) or SIGTERM stops the run: exit 130, every command under test killed with its group, every run folder removed, no report', async () => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      const marks = join(dir, `interrupted-${signal}`);
      await mkdir(marks);
      // Each scenario's command leaves its background child's pid and its HOME, then waits.
      const client = await script(`hang-${signal}.sh`, `sleep 60 & echo "$! $HOME" > ${marks}/$AGENT_ACCESS_SCENARIO\nwait`);
      const child = spawn(
        process.execPath,
        [BIN, 'conformance', 'client', '--scenario', 'flow', '--scenario', 'expiry', '--', 'sh', client],
        {
          env: { ...process.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const written = async () => {
        const lines = await Promise.all((await readdir(marks)).map((name) => readFile(join(marks, name), 'utf8')));
        return lines.length === 2 && lines.every((line) => line.endsWith('\n')) ? lines.map((line) => line.trim().split(' ')) : null;
      };
      const runs = await pollUntil(written, 'both commands under test to start', { timeoutMs: 30_000 });
      child.kill(signal);
      expect(await exited, stderr).toBe(130);
      expect(stderr).toMatch(new RegExp(`interrupted \\(${signal}\\): the commands under test were stopped and their folders removed`));
      expect(stdout).toBe('');
      for (const [pid, home] of runs) {
        expect(await processState(Number(pid)), `${signal}: background child of a command`).not.toBe('running');
        await expect(stat(home!), `${signal}: the run's HOME`).rejects.toMatchObject({ code: 'ENOENT' });
      }
    }
  }, 90_000);
});

/** `gone`, `zombie` (ended, not yet reaped) or `running`, from /proc. */
async function processState(pid: number): Promise<'gone' | 'zombie' | 'running'> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return 'gone';
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z' ? 'zombie' : 'running';
}

describe('runClientConformance with a client in this process (client)', () => {
  it('the function gets the base URL and the environment a command would, and its exit code is judged as a command’s', async () => {
    const runs: ClientRun[] = [];
    const report = await runClientConformance({
      client: async function recorder(run) {
        runs.push(run);
        run.stdout.write('nichts zu tun\n');
        return 7;
      },
      scenarios: ['consent-denied', 'flow'],
      env: { ...env, EXTRA: 'aus den Optionen' },
      keepLogs: join(dir, 'in-process-logs'),
    });
    expect(report.command).toEqual(['(in process) recorder']);
    expect(report.scenarios.map((s) => s.exit_code)).toEqual([7, 7]);
    expect(runs).toHaveLength(2);
    for (const run of runs) {
      expect(run.env).toMatchObject({
        AGENT_ACCESS_BASE_URL: run.baseUrl,
        AGENT_ACCESS_MCP_URL: `${run.baseUrl}/mcp`,
        BROWSER: CONSENT_OPENER,
        EXTRA: 'aus den Optionen',
      });
      expect(run.signal.aborted).toBe(false);
    }
    expect(runs.map((r) => r.env.AGENT_ACCESS_SCENARIO).sort()).toEqual(['consent-denied', 'flow']);
    // Each run its own emulator and its own home.
    expect(new Set(runs.map((r) => r.baseUrl)).size).toBe(2);
    expect(new Set(runs.map((r) => r.env.HOME)).size).toBe(2);
    expect(await readFile(join(dir, 'in-process-logs', 'flow', 'stdout.log'), 'utf8')).toBe('nichts zu tun\n');
  }, 60_000);

  it('a throw is judged as exit 1, its stack kept as a crashed command’s stderr', async () => {
    const report = await runClientConformance({
      client: async () => {
        throw new Error('der Agent ist abgestürzt');
      },
      scenarios: ['consent-denied'],
      keepLogs: join(dir, 'in-process-crash'),
    });
    expect(report.scenarios[0]!.exit_code).toBe(1);
    expect(await readFile(join(dir, 'in-process-crash', 'consent-denied', 'stderr.log'), 'utf8')).toMatch(
      /^Error: der Agent ist abgestürzt\n {4}at /,
    );
  }, 60_000);

  it('at the timeout its signal aborts: a client that stops then is judged timed out; one that does not, 2 s later all the same', async () => {
    const stops = await runClientConformance({
      client: (run) => new Promise((resolve) => run.signal.addEventListener('abort', () => resolve(0))),
      scenarios: ['consent-denied'],
      timeout: '1s',
    });
    expect(stops.scenarios[0]).toMatchObject({ timed_out: true, exit_code: 0 });
    const started = Date.now();
    const hangs = await runClientConformance({
      client: () => new Promise<number>(() => undefined),
      scenarios: ['consent-denied'],
      timeout: '1s',
    });
    expect(hangs.scenarios[0]).toMatchObject({ timed_out: true, exit_code: null, verdict: 'not_exercised' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_000);
  }, 60_000);

  it('neither a command nor a client, or both: a usage error', async () => {
    await expect(runClientConformance({ scenarios: ['flow'] })).rejects.toThrow(ConformanceUsageError);
    await expect(runClientConformance({ command: 'true', client: async () => 0, scenarios: ['flow'] })).rejects.toThrow(
      /as a command or as a function/,
    );
  });
});
