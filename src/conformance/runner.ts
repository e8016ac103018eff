import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDuration } from '../core/state/clock.js';
import { Emulator } from '../server/emulator.js';
import { scenarioVerdict, summarize, type ConformanceReport, type ScenarioReport } from './report.js';
import { RunLog, SteppedClock } from './run-log.js';
import { SCENARIOS, SUITES, type Scenario, type ScenarioRun, type SuiteName } from './scenarios.js';

/** The consent opener shipped with the package: `$BROWSER` of the command under test. */
export const CONSENT_OPENER = fileURLToPath(new URL('../../bin/consent-opener.js', import.meta.url));
/**
 * The consent opener's steps in this process (ClientRun.openConsent): one implementation, in the script that a
 * command starts as `$BROWSER`.
 */
export function openConsent(url: string, signal?: AbortSignal): Promise<void> {
  const opener = createRequire(import.meta.url)(CONSENT_OPENER) as { followConsent: (url: string, signal?: AbortSignal) => Promise<void> };
  return opener.followConsent(url, signal);
}

export const DEFAULT_TIMEOUT_MS = 2 * 60_000;
/**
 * Scenarios at a time. A run is mostly the client waiting (polls, Retry-After) and processes starting, so several
 * fit on two cores; each has its own emulator, and no check depends on how fast the machine is.
 */
const DEFAULT_CONCURRENCY = 4;
/** How long a scenario takes, roughly: its runs, and its waits. */
const weight = (scenario: Scenario) => (scenario.runs ?? 1) + (scenario.waits ?? 0);

/** What is kept of a command's stdout and stderr for `--keep-logs`: the newest bytes. */
const OUTPUT_LIMIT = 1024 * 1024;

/**
 * One run of a client in this process (`ClientConformanceOptions.client`): what a command gets as its last argument
 * and environment, and where its output goes.
 */
export interface ClientRun {
  /** The emulator's base URL, a command's last argument. */
  baseUrl: string;
  /**
   * The environment a command would get (How a run works, docs/conformance.md): this process's, `options.env`, and the
   * scenario's own variables over both (`AGENT_ACCESS_BASE_URL`, `BROWSER`, a `HOME` and config folder of the run's).
   * Read them from here, not from `process.env`: runs go on side by side.
   */
  env: Record<string, string>;
  /** Aborts at the run's timeout, or when the whole run is stopped: the client must stop then, as it cannot be killed. */
  signal: AbortSignal;
  /** Kept as a command's output is (`keepLogs`); never judged. */
  stdout: { write(text: string): void };
  stderr: { write(text: string): void };
  /**
   * What `$BROWSER` does, in this process: requests the consent URL and follows its redirects to the client's
   * redirect URI; resolves once that answer is read, rejects with the cause. A client that would start `$BROWSER`
   * calls this instead, and spares a process start per authorization.
   */
  openConsent: (url: string) => Promise<void>;
}

/** A client in this process: resolves to the exit code a command would exit with (nothing: 0). A throw counts as exit 1. */
export type InProcessClient = (run: ClientRun) => Promise<number | void>;

export interface ClientConformanceOptions {
  /** The client: a program, run as `command ...args BASE_URL`. Either this or `client`. */
  command?: string;
  args?: readonly string[];
  /**
   * The client as a function of this process, called once per run instead of a command: for an agent's own test
   * code, with no process to start. `command`, `args` and `cwd` do not apply.
   */
  client?: InProcessClient;
  /** Scenario names; with `suite`, both together. Default: the suite, else `all`. */
  scenarios?: readonly string[];
  suite?: SuiteName;
  /** Per run of the command: milliseconds or a duration (`2m`, the default). */
  timeout?: number | string;
  /** A folder for each scenario's request log, events, and the command's stdout and stderr. */
  keepLogs?: string;
  /** More environment for the command (the scenario's own variables win). */
  env?: Record<string, string>;
  cwd?: string;
  /** Scenarios run at the same time, each with its own emulator (default 4). */
  concurrency?: number;
  /** Told as each scenario starts and ends. */
  onProgress?: (progress: { scenario: string; report?: ScenarioReport }) => void;
  /**
   * Stops the run (Ctrl-C): the commands running now are killed with their process groups, no scenario starts, each
   * emulator stops and each run's folder is removed; then the promise rejects with the signal's reason.
   */
  signal?: AbortSignal;
}

/** Scenario names that are none, or a suite that is none: a usage error (exit 2). */
export class ConformanceUsageError extends Error {
  override name = 'ConformanceUsageError';
}

/** The command could not be started at all (exit 3). */
export class CommandNotStartedError extends Error {
  override name = 'CommandNotStartedError';
}

/** The scenarios `options` names, in the order of SCENARIOS. */
export function selectScenarios(options: Pick<ClientConformanceOptions, 'scenarios' | 'suite'>): Scenario[] {
  const names = new Set<string>();
  if (options.suite !== undefined) {
    if (!Object.hasOwn(SUITES, options.suite))
      throw new ConformanceUsageError(`no suite "${options.suite}"; the suites: ${Object.keys(SUITES).join(', ')}`);
    for (const n of SUITES[options.suite]) names.add(n);
  }
  for (const n of options.scenarios ?? []) {
    if (!SCENARIOS.some((s) => s.name === n))
      throw new ConformanceUsageError(`no scenario "${n}"; the scenarios: ${SCENARIOS.map((s) => s.name).join(', ')}`);
    names.add(n);
  }
  if (names.size === 0) for (const n of SUITES.all) names.add(n);
  return SCENARIOS.filter((s) => names.has(s.name));
}

/** How long the output of a command that exited may still come, from children outside its group. */
const OUTPUT_GRACE_MS = 2_000;

/**
 * Puts a client through the scenarios (README "Grading your client"): each run gets a fresh in-memory emulator on
 * free loopback ports, the command runs against it with the base URL as its last argument, and the checks judge
 * what the emulator saw. Resolves to the report that `conformance client --json` prints.
 */
export async function runClientConformance(options: ClientConformanceOptions): Promise<ConformanceReport> {
  if ((options.command === undefined) === (options.client === undefined))
    throw new ConformanceUsageError('give the client as a command or as a function (client), one of the two');
  const scenarios = selectScenarios(options);
  const timeoutMs = options.timeout === undefined ? DEFAULT_TIMEOUT_MS : parseDuration(options.timeout);
  if (timeoutMs <= 0) throw new ConformanceUsageError('the timeout must be longer than 0');
  // A few scenarios at a time: a run is mostly the client's own waiting and process starts.
  const reports: ScenarioReport[] = new Array<ScenarioReport>(scenarios.length);
  // The longest first, so that they do not end up alone at the end; reported in their own order.
  const queue = scenarios.map((scenario, i) => ({ scenario, i })).sort((a, b) => weight(b.scenario) - weight(a.scenario));
  const worker = async () => {
    for (let item = queue.shift(); item && !options.signal?.aborted; item = queue.shift()) {
      try {
        reports[item.i] = await runScenario(item.scenario, options, timeoutMs);
      } catch (e) {
        // The command cannot be started: no more scenarios, and the others end their run before this is thrown.
        queue.length = 0;
        throw e;
      }
    }
  };
  const settled = await Promise.allSettled(
    Array.from({ length: Math.max(1, Math.min(options.concurrency ?? DEFAULT_CONCURRENCY, scenarios.length)) }, worker),
  );
  // Once every run has ended and cleaned up: the commands killed by an abort are not judged.
  options.signal?.throwIfAborted();
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  const command = options.client ? [`(in process) ${options.client.name || 'client'}`] : [options.command!, ...(options.args ?? [])];
  return { version: 1, command, scenarios: reports, summary: summarize(reports) };
}

async function runScenario(scenario: Scenario, options: ClientConformanceOptions, timeoutMs: number): Promise<ScenarioReport> {
  options.onProgress?.({ scenario: scenario.name });
  const started = Date.now();
  const runs: ScenarioRun[] = [];
  for (let i = 0; i < (scenario.runs ?? 1); i++) {
    runs.push(await runOnce(scenario, i, options, timeoutMs));
    options.signal?.throwIfAborted();
  }
  const checks = scenario.judge(runs);
  const report: ScenarioReport = {
    name: scenario.name,
    description: scenario.description,
    verdict: scenarioVerdict(checks),
    exit_code: runs.at(-1)!.exitCode,
    duration_ms: Date.now() - started,
    ...(runs.some((r) => r.timedOut) ? { timed_out: true } : {}),
    checks,
  };
  options.onProgress?.({ scenario: scenario.name, report });
  return report;
}
/** Appends to a bounded buffer of the newest output. */
const keepTail = (text: string, chunk: Buffer | string) => (text + chunk.toString()).slice(-OUTPUT_LIMIT);

async function runOnce(scenario: Scenario, index: number, options: ClientConformanceOptions, timeoutMs: number): Promise<ScenarioRun> {
  const log = new RunLog();
  const clock = new SteppedClock();
  const errors: string[] = [];
  const scenarioOptions = scenario.options?.(index) ?? {};
  const emulator = await Emulator.start({
    ...scenarioOptions,
    port: 0,
    authPort: 0,
    inMemory: true,
    clock,
    observer: log,
    onNotice: () => undefined,
    onError: (error, context) => void errors.push(`${context}: ${error.stack ?? error.message}`),
  });
  const unsubscribe = emulator.core.events.subscribe((event) => log.event(event));
  const home = await mkdtemp(join(tmpdir(), 'agent-access-conformance-'));
  let stdout = '';
  let stderr = '';
  try {
    scenario.arm?.({
      emulator,
      clock,
      log,
      jump: (ms) => {
        clock.jump(ms);
        void Promise.all([emulator.resources.settle(), emulator.faults.runDue()]).catch((e: Error) => errors.push(`jump: ${e.message}`));
      },
    });
    await mkdir(join(home, 'config'));
    const baseUrl = emulator.baseUrl;
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      ...options.env,
      AGENT_ACCESS_BASE_URL: baseUrl,
      AGENT_ACCESS_MCP_URL: `${baseUrl}/mcp`,
      AGENT_ACCESS_SCENARIO: scenario.name,
      AGENT_ACCESS_CONFIG_DIR: join(home, 'config'),
      HOME: home,
      // Every place a client may keep a login is the run's own, so none leaks into the next scenario.
      XDG_CONFIG_HOME: join(home, '.config'),
      XDG_DATA_HOME: join(home, '.local', 'share'),
      XDG_STATE_HOME: join(home, '.local', 'state'),
      XDG_CACHE_HOME: join(home, '.cache'),
      BROWSER: CONSENT_OPENER,
    };
    const ran = options.client
      ? await runInProcess(options.client, { baseUrl, env, timeoutMs, signal: options.signal })
      : await runCommand({ ...options, command: options.command! }, { baseUrl, env, timeoutMs });
    ({ stdout, stderr } = ran);
    const { exitCode, timedOut } = ran;
    // The findings judged on the run as a whole (scope.unused, grant.abandoned) are judged when read.
    log.findings.push(...emulator.core.findings.list());
    return {
      log,
      exitCode,
      timedOut,
      baseUrl,
      resource: `${baseUrl}/mcp`,
      ...(scenarioOptions.varyUnspecified ? { seed: scenarioOptions.varyUnspecified.seed } : {}),
    };
  } finally {
    unsubscribe();
    await emulator.stop();
    await rm(home, { recursive: true, force: true });
    if (options.keepLogs) {
      const dir = join(options.keepLogs, (scenario.runs ?? 1) > 1 ? `${scenario.name}-${index + 1}` : scenario.name);
      await mkdir(dir, { recursive: true });
      await Promise.all([
        writeFile(join(dir, 'requests.jsonl'), log.exchanges.map((e) => JSON.stringify(e)).join('\n') + '\n'),
        writeFile(join(dir, 'events.jsonl'), log.events.map((e) => JSON.stringify(e)).join('\n') + '\n'),
        writeFile(join(dir, 'stdout.log'), stdout),
        writeFile(join(dir, 'stderr.log'), stderr + (errors.length ? `\n--- emulator errors ---\n${errors.join('\n')}\n` : '')),
      ]);
    }
  }
}

/** What one run of the client left: its exit code (null: killed, or an in-process client that did not stop), its output. */
interface Ran {
  exitCode: number | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

interface RunContext {
  baseUrl: string;
  env: Record<string, string>;
  timeoutMs: number;
}

/** Runs `command ...args BASE_URL` in a process group of its own, so that the timeout ends whatever it started too. */
async function runCommand(
  options: Pick<ClientConformanceOptions, 'args' | 'cwd' | 'signal'> & { command: string },
  { baseUrl, env, timeoutMs }: RunContext,
): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  let timedOut = false;
  const child = spawn(options.command, [...(options.args ?? []), baseUrl], {
    cwd: options.cwd,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (d: Buffer) => (stdout = keepTail(stdout, d)));
  child.stderr.on('data', (d: Buffer) => (stderr = keepTail(stderr, d)));
  const killGroup = () => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // the group is gone already
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup();
  }, timeoutMs);
  options.signal?.addEventListener('abort', killGroup, { once: true });
  // 'exit', not 'close': a child the command left in the background may hold its stdout for as long as it lives.
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    child.once('error', (e: NodeJS.ErrnoException) =>
      reject(new CommandNotStartedError(`cannot start ${options.command}: ${e.code ?? e.message}`)),
    );
    child.once('exit', (code) => resolve(code));
  }).finally(() => {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', killGroup);
    // Whatever it left running (a loopback listener, a browser it started) goes with it.
    killGroup();
  });
  // The rest of its output, unless something outside its group still holds the pipes.
  await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, OUTPUT_GRACE_MS).unref())]);
  return { exitCode, timedOut, stdout, stderr };
}

/**
 * Calls an in-process client (`ClientConformanceOptions.client`) as a command would be run. At the timeout, or when
 * the run is stopped, its signal aborts; a client that does not stop then is judged all the same, 2 s later.
 */
async function runInProcess(
  client: InProcessClient,
  { baseUrl, env, timeoutMs, signal }: RunContext & { signal?: AbortSignal },
): Promise<Ran> {
  let stdout = '';
  let stderr = '';
  let timedOut = false;
  const stop = new AbortController();
  const timer = setTimeout(() => {
    timedOut = true;
    stop.abort(new Error(`the run took longer than its timeout (${timeoutMs} ms)`));
  }, timeoutMs);
  const stopped = () => stop.abort(signal?.reason);
  signal?.addEventListener('abort', stopped, { once: true });
  try {
    const run = (async () =>
      client({
        baseUrl,
        env,
        signal: stop.signal,
        stdout: { write: (text) => void (stdout = keepTail(stdout, text)) },
        stderr: { write: (text) => void (stderr = keepTail(stderr, text)) },
        openConsent: (url) => openConsent(url, stop.signal),
      }))().then(
      // A function that returns nothing ended as a script that runs to its end does: 0.
      (code) => code ?? 0,
      (e: unknown) => {
        // As a command that crashed: exit 1, its stack on stderr.
        stderr = keepTail(stderr, `${(e as Error)?.stack ?? String(e)}\n`);
        return 1;
      },
    );
    const given = new Promise<null>((resolve) =>
      stop.signal.addEventListener('abort', () => setTimeout(() => resolve(null), OUTPUT_GRACE_MS).unref(), { once: true }),
    );
    const exitCode = await Promise.race([run, given]);
    return { exitCode, timedOut, stdout, stderr };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', stopped);
  }
}
