import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { ClientContext, Output } from '../../src/client/context.js';
import { run } from '../../src/cli/program.js';
import type { Clock } from '../../src/core/state/clock.js';
import { BIN } from './cli.js';
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

export interface CliProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match of `pattern` in stderr, waiting for it. */
  waitForStderr(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  exit: Promise<number | null>;
}

/** Starts the built CLI and lets the test talk to it while it runs. */
export function startCli(args: string[], options: { env: NodeJS.ProcessEnv; cwd?: string }): CliProcess {
  const child = spawn(process.execPath, [BIN, ...args], { env: options.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const waiters = new Set<() => void>();
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => {
    stderr += d;
    for (const wake of waiters) wake();
  });
  const exit = once(child, 'exit').then(([code]) => code as number | null);
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  void exit.then(() => clearTimeout(killer));
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exit,
    waitForStderr(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const match = stderr.match(pattern);
          if (!match) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(match);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`stderr never matched ${pattern}; stderr so far:\n${stderr}`));
        }, timeoutMs);
        void exit.then(() =>
          setImmediate(
            () =>
              check() ||
              (waiters.delete(check),
              clearTimeout(timer),
              reject(new Error(`the command exited before stderr matched ${pattern}:\n${stderr}`))),
          ),
        );
        if (!check()) waiters.add(check);
      });
    },
  };
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
