import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { openInBrowser, type ClientContext, type Output } from '../../src/client/context.js';
import { run } from '../../src/cli/program.js';
import { systemClock, type Clock } from '../../src/core/state/clock.js';
import type { ClientRun } from '../../src/index.js';
import { BIN, type RunResult } from './cli.js';
import { Browser } from './oauth.js';

/** The client's environment for one test: its own config dir, no base URL inherited from the machine. */
export const clientEnv = (configDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  AGENT_ACCESS_CONFIG_DIR: configDir,
  AGENT_ACCESS_BASE_URL: '',
  BROWSER: '',
  NO_COLOR: '1',
  ...extra,
});

/**
 * What a person does in the browser, over HTTP: opens the authorize URL, submits the consent form with
 * "Zulassen" or "Ablehnen", and follows the redirect to the client's loopback listener.
 * Returns the page the listener answered with.
 */
export async function decideInBrowser(authorizeUrl: string, decision: 'approve' | 'deny'): Promise<{ status: number; text: string }> {
  const browser = new Browser();
  const { answer } = await browser.submitForm(authorizeUrl, { decision });
  if (answer.status !== 302) throw new Error(`consent answered ${answer.status}: ${answer.text}`);
  const landed = await browser.get(answer.headers.location as string);
  return { status: landed.status, text: landed.text };
}

/** A command that runs while the test talks to it: what it printed so far, and its exit code once it ends. */
export interface RunningCommand {
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stderr, waiting for it. */
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exit: Promise<number | null>;
}

export interface CliProcess extends RunningCommand {
  child: ChildProcess;
}

/** What a running command printed, and a wait for a pattern in its stderr that ends with the command. */
class Printed {
  out = '';
  err = '';
  /** The command's end: a wait for stderr fails once the command ended without printing what it waited for. */
  exit: Promise<unknown> = new Promise(() => undefined);
  readonly #waiters = new Set<() => void>();

  addErr(text: string): void {
    this.err += text;
    for (const wake of this.#waiters) wake();
  }

  waitForStderr(pattern: RegExp, timeoutMs = 15_000): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const match = this.err.match(pattern);
        if (!match) return false;
        this.#waiters.delete(check);
        clearTimeout(timer);
        resolve(match);
        return true;
      };
      const timer = setTimeout(() => {
        this.#waiters.delete(check);
        reject(new Error(`stderr never matched ${pattern}; stderr so far:\n${this.err}`));
      }, timeoutMs);
      void this.exit.then(() =>
        setImmediate(
          () =>
            check() ||
            (this.#waiters.delete(check),
            clearTimeout(timer),
            reject(new Error(`the command exited before stderr matched ${pattern}:\n${this.err}`))),
        ),
      );
      if (!check()) this.#waiters.add(check);
    });
  }
}

/** Starts the built CLI and lets the test talk to it while it runs. */
export function startCli(args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): CliProcess {
  const child = spawn(process.execPath, [BIN, ...args], { env: options.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  const printed = new Printed();
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  printed.exit = exit;
  child.stdout.on('data', (d) => (printed.out += d));
  child.stderr.on('data', (d) => printed.addErr(String(d)));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  void exit.then(() => clearTimeout(killer));
  return { child, stdout: () => printed.out, stderr: () => printed.err, exit, waitForStderr: (p, t) => printed.waitForStderr(p, t) };
}

/**
 * The context the binary gives a command (processContext): the system clock, the browser `env` names, with the
 * output where a test wants it. A client command run with it sees what it sees in a process of its own.
 */
const commandContext = (env: NodeJS.ProcessEnv, cwd: string, stdout: Output, stderr: Output): ClientContext => ({
  clock: systemClock,
  env,
  cwd,
  stdout,
  stderr,
  openUrl: (url) => openInBrowser(url, env),
});

/**
 * Starts a client command (login, token, ask, ...) in this process, as `startCli` starts it in a child. The
 * commands that read the directory's state file (grants, charges) or stdin (`decode -`) write to the process's own
 * streams: run those with `runCli`.
 */
export function startClient(args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): RunningCommand {
  const printed = new Printed();
  const ctx = commandContext(
    options.env,
    options.cwd ?? process.cwd(),
    { write: (s: string) => (printed.out += s) },
    { write: (s: string) => printed.addErr(s) },
  );
  const exit = run(args, ctx);
  printed.exit = exit;
  return { stdout: () => printed.out, stderr: () => printed.err, exit, waitForStderr: (p, t) => printed.waitForStderr(p, t) };
}

/** Runs a client command in this process to its end (see startClient); the same result as `runCli`'s. */
export async function runClient(args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): Promise<RunResult> {
  const command = startClient(args, options);
  const code = await command.exit;
  return { code, stdout: command.stdout(), stderr: command.stderr() };
}

/**
 * The CLI's command lines for a client in this process under `runClientConformance` (its `client`): each runs as a
 * command of that run would, with its environment and its output the run's, and the consent opener's steps run in
 * this process as its browser (ClientRun.openConsent, which settles as the opener's process would exit). Once the run
 * is aborted (its timeout), the next command line does not start and exits 1.
 */
export function commandsOf(conformanceRun: ClientRun): (args: string[]) => Promise<number> {
  const { env, stdout, stderr, signal } = conformanceRun;
  const ctx = { ...commandContext(env, process.cwd(), stdout, stderr), openUrl: conformanceRun.openConsent };
  return async (args) => (signal.aborted ? 1 : run(args, ctx));
}

/** The authorize URL that `login --no-browser` prints. */
export const AUTHORIZE_URL = /^\s+(http:\/\/\S+\/oauth\/authorize\?\S+)$/m;

/** A context for running commands in-process: captured output, a given clock, a scripted browser. */
export function memoryContext(options: {
  clock: Clock;
  env: NodeJS.ProcessEnv;
  cwd?: string;
  openUrl?: (url: string) => Promise<void>;
  onStderr?: (text: string) => void;
}): ClientContext & { out: () => string; err: () => string } {
  let out = '';
  let err = '';
  const stdout: Output = { write: (s: string) => (out += s) };
  const stderr: Output = {
    write: (s: string) => {
      err += s;
      options.onStderr?.(s);
    },
  };
  return {
    clock: options.clock,
    env: options.env,
    cwd: options.cwd ?? process.cwd(),
    stdout,
    stderr,
    openUrl: options.openUrl ?? (async () => undefined),
    out: () => out,
    err: () => err,
  };
}

/** Runs one command line in-process; resolves with the exit code and what it printed. */
export async function runInProcess(
  args: string[],
  ctx: ReturnType<typeof memoryContext>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const before = { out: ctx.out().length, err: ctx.err().length };
  const code = await run(args, ctx);
  return { code, stdout: ctx.out().slice(before.out), stderr: ctx.err().slice(before.err) };
}
